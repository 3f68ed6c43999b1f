//! The gateway end to end, in-process: a controllable fake agent-runner and
//! the real payload-parser service on port 0 (the real agent-runner too in
//! `real_stack`), the gateway on port 0 with SQLite in a temp dir, and a
//! generated client.

mod abandoned;
mod attachments;
mod auth;
mod branches;
mod consent;
mod control;
mod conversations;
mod durable;
mod feedback;
mod finding;
mod flow;
// Answers and history within their limits.
mod history;
// Shared with benches/turn_latency.rs; each uses a part.
#[allow(dead_code)]
mod harness;
mod leases;
mod moto;
mod overload;
mod postgres;
mod provider_keys;
mod python_client;
mod quotas;
mod real_stack;
mod replayed_usage;
mod secrets;
mod streaming;
mod ui_stream;
mod unix_socket;
mod usage;
