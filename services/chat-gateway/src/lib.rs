//! chat-gateway: the API application backends call.
//!
//! One server-streaming `Chat` call per user message: the gateway
//! authenticates the caller ([`auth`]), stores the message in the caller's
//! conversation ([`store`]), resolves the user's page through the registry
//! ([`registry`]), builds the system prompt ([`prompt`]), runs the turn on
//! the agent-runner and relays its events through the payload parser so the
//! client sees clean text and typed elements ([`turn`]), then stores the
//! answer. [`service`] is the gRPC edge, [`app`] assembles and serves it,
//! [`config`] holds the settings the binary reads.

pub mod app;
pub mod auth;
pub mod blobs;
pub mod clients;
pub mod config;
pub mod convert;
pub mod durable;
pub mod engine;
pub mod error;
pub mod prompt;
pub mod registry;
pub mod secret;
pub mod service;
pub mod store;
pub(crate) mod text;
pub mod turn;
pub mod web;
