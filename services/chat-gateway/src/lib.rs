//! chat-gateway library.
