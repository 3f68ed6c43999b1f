//! The gateway end to end, in-process: a fake agent-runner and the parser
//! library behind the parser's gRPC contract on port 0, the gateway on port
//! 0 with SQLite in a temp dir, and a generated client.

mod auth;
mod control;
mod conversations;
mod flow;
mod harness;
mod real_stack;
