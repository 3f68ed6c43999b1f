//! The agent-runner: the LLM tool loop over real provider protocols.
//!
//! A `Run` request becomes a [`turn::Turn`] ([`convert`]), is checked and
//! bound ([`agent_loop::Runner::prepare`]) and runs in its own task
//! ([`service`]): model calls through one [`provider::Provider`] trait with
//! retries, fallback and timeouts ([`model_call`], [`retry`]), tools run in
//! parallel with validation and progress ([`tools`], with the MCP servers'
//! tools in [`tools::mcp`]), and every step is a numbered event ([`events`],
//! the model's text shaped by [`output`]) streamed back to the caller. [`observe`]
//! holds the GenAI spans and metrics of the loop. [`app`] builds and serves
//! the whole runner from its [`config`], [`auth`] says who may call it and
//! [`allow`] what a request may make the runner reach; [`error`] is where
//! refusals become `tonic::Status`.

pub mod agent_loop;
pub mod allow;
pub mod app;
pub mod attachments;
pub mod auth;
pub mod config;
pub mod context;
pub mod convert;
pub mod error;
pub mod events;
pub mod init;
pub mod model_call;
pub mod observe;
pub mod output;
pub mod parsing;
pub mod pricing;
pub mod prompts;
pub mod provider;
pub mod retry;
pub mod routes;
pub mod service;
pub mod tool_sets;
pub mod tools;
pub mod turn;
