//! Parley end to end: the three images on a Docker network, driven through
//! the gateway's published port as an application backend would.
//!
//! Every test starts its own stack (`support::stack`) from the images that
//! `scripts/images.sh` builds (`parley/*:<workspace version>`), with the
//! gateway on the test PostgreSQL of `scripts/postgres.sh`. Without Docker,
//! the images or PostgreSQL a test prints `NOT RUN: <test>: <why>` and
//! returns; under `CI=true` it fails instead. `scripts/test.sh` builds the
//! images and starts PostgreSQL first.

mod conversation;
mod deploy_secrets;
mod gateway_sigterm;
mod go_client;
mod grpcurl;
mod network_policy;
mod parser_outage;
mod python_client;
mod replicas;
mod runner_crash;
mod runner_tls_key;
mod support;
