//! What the end-to-end tests share: the gate that decides whether they can
//! run, the stack of three containers, the gateway client and the
//! PostgreSQL schema of each stack.

pub mod chat;
pub mod gate;
pub mod postgres;
pub mod stack;
