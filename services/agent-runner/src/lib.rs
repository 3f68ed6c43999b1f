//! The agent-runner: the LLM tool loop over real provider protocols.

pub mod provider;
pub mod events;
pub mod retry;
pub mod turn;
