//! The agent-runner: the LLM tool loop over real provider protocols.

pub mod provider;
