//! The scan: one pass over a response's text, shared by [`crate::parse`]
//! and [`crate::StreamParser`].
//!
//! [`Engine`] walks the text and decides at each trigger byte ([`trigger`])
//! whether an element starts; [`state`] holds what it remembers between calls (the
//! element being read, what has been found), and [`message`] builds the
//! cleaned message from the text it keeps.

mod engine;
mod message;
mod state;
mod trigger;

pub(crate) use self::engine::Engine;
