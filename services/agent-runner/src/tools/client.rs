//! Tools the application runs (endpoint `client`).
//!
//! The runner never runs one: a call of it pauses the turn
//! (`input_required`, see `agent_loop`), and the continuation carries the
//! app's output or error, checked against the tool's output schema when it
//! declares one ([`ClientTool::check_output`]). Its [`ClientSource`] only
//! answers a call that reached it anyway with an error.

use std::sync::Arc;

use jsonschema::Validator;
use serde_json::Value;

use super::{CallContext, FailureReason, ProgressSender, ToolFailure, ToolOutput, ToolSource};

/// What the runner knows of a tool the app runs.
#[derive(Debug, Clone, Default)]
pub struct ClientTool {
    /// Checks the app's output, when the tool declares an output schema.
    pub output: Option<Arc<Validator>>,
}

impl ClientTool {
    /// Every way `output` violates the tool's output schema, as `path:
    /// message` lines; nothing to check without one.
    pub fn check_output(&self, output: &Value) -> Result<(), String> {
        match &self.output {
            Some(validator) => super::schemas::problems(validator, output),
            None => Ok(()),
        }
    }
}

/// The source of a tool the app runs: it never runs here.
#[derive(Debug, Clone, Copy)]
pub struct ClientSource;

#[async_trait::async_trait]
impl ToolSource for ClientSource {
    fn is_remote(&self) -> bool {
        false
    }

    async fn call(
        &self,
        name: &str,
        _input: &Value,
        _ctx: CallContext,
        _progress: ProgressSender,
    ) -> Result<ToolOutput, ToolFailure> {
        Err(ToolFailure::new(
            FailureReason::ToolError,
            format!("`{name}` runs in the application, not in the runner"),
        ))
    }
}
