//! What the runner's integration tests share: [`replay`] is a scripted
//! HTTP server standing in for a model provider, [`events`] drains a
//! provider stream and [`turns`] builds runners and turns and checks a turn's
//! events. Each test file uses a part of it; the test `ToolService` is
//! `parley_testkit::tools`.

#![allow(dead_code)]

pub mod events;
pub mod replay;
pub mod turns;
