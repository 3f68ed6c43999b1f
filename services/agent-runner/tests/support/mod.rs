//! What the runner's integration tests share: [`replay`] is a scripted
//! HTTP server standing in for a model provider, [`events`] drains a
//! provider stream, [`turns`] builds runners and turns and checks a turn's
//! events, and [`tool_server`] is a test `ToolService`. Each test file
//! uses a part of it.

#![allow(dead_code)]

pub mod events;
pub mod replay;
pub mod tool_server;
pub mod turns;
