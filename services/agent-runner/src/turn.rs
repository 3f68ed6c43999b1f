//! The domain form of one `Run` request: everything the loop needs to run a
//! turn, with the wire types already converted and validated. Tests build
//! these by hand; the service builds them in `convert`. A continuation (a
//! turn that paused for the user's decisions, run again with them) carries
//! its [`Decision`]s on the calls [`pending_calls`] finds.

use std::{sync::Arc, time::Duration};

use serde_json::Value;

use crate::provider::{
    ImageLimits, InputKind, Message, ModelChoice, PromptCache, ToolCall, ToolResult,
};

/// A fully assembled turn.
#[derive(Debug, Clone)]
pub struct Turn {
    /// The system prompt (may be empty); shared with the turn's model calls.
    pub system: Arc<str>,
    /// The conversation, oldest first, ending with the new user message.
    pub messages: Vec<Message>,
    /// The tools the model may call.
    pub tools: Vec<ToolDef>,
    /// The model to call first.
    pub model: ModelChoice,
    /// Models tried in order when the previous one fails before answering.
    pub fallbacks: Vec<ModelChoice>,
    /// When set, the answer is JSON satisfying this schema (native API).
    pub output_schema: Option<Value>,
    /// The schema's name (OpenAI requires one).
    pub output_schema_name: String,
    /// Bounds on the turn, defaults already applied.
    pub limits: Limits,
    /// The conversation id, passed to tools.
    pub conversation_id: String,
    /// The turn id, for logs.
    pub turn_id: String,
    /// The authenticated user, passed to tools.
    pub user_id: String,
    /// Where `user_id` comes from (`jwt:<iss>`, `static`, `dev`).
    pub user_issuer: String,
    /// The user's tenant; empty when none.
    pub tenant: String,
    /// Whether tool calls written into the text are recognised
    /// (docs/output-format.md#tool-calls-in-the-text).
    pub text_tool_calls: bool,
    /// Run a model call that fails after streaming part of its answer
    /// again (a `StepReset` first) instead of failing the turn.
    pub mid_answer_failover: bool,
    /// The page's UI state, passed to tools.
    pub context: Option<Value>,
    /// A continuation's decisions, one for each call its pause left
    /// pending ([`pending_calls`] of `messages`); empty for a new turn.
    pub decisions: Vec<Decision>,
    /// The model calls the turn made before its pause (continuations
    /// only): they count against `limits.max_iterations`, and the next one
    /// is numbered after them.
    pub iterations_done: u32,
    /// What prompt-caching providers may reuse (the stable part of
    /// `system`, the cache key).
    pub cache: PromptCache,
    /// What `model`, then each of `fallbacks`, takes as input
    /// ([`crate::attachments::fit`] sets it; a model past its end takes
    /// every kind). Files a tool returns are given only to models that take
    /// them.
    pub inputs: Vec<Vec<InputKind>>,
    /// The context window of `model`, then of each of `fallbacks`, where
    /// one is known ([`crate::routes::Routes::windows`]): each call's history is
    /// fitted to it.
    pub windows: Vec<Option<crate::context::Window>>,
    /// The largest image every candidate takes: larger ones, the user's
    /// and the tools', are downscaled ([`crate::attachments::images`]).
    pub image_limits: ImageLimits,
}

/// The user's (or the app's) decision on one pending tool call.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    /// The pending call's id.
    pub call_id: String,
    /// What to do with it.
    pub verdict: Verdict,
}

/// What a [`Decision`] says.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// Run the call; with `arguments`, instead of the model's.
    Approve {
        /// The user's edited arguments (an object), if any.
        arguments: Option<Value>,
    },
    /// Do not run it; the model is told the user declined, and why.
    Reject {
        /// The user's reason; may be empty.
        reason: String,
    },
    /// The app ran the call (a client tool) and this is its output.
    Output(Value),
    /// The app ran the call (a client tool) and it failed with this error.
    Failed(String),
}

/// A tool offered to the model, and where it runs.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolDef {
    /// The tool name.
    pub name: String,
    /// What the tool does, for the model.
    pub description: String,
    /// The JSON schema of the input.
    pub input_schema: Value,
    /// Where it runs.
    pub endpoint: ToolEndpoint,
    /// How long one call may take; `None` uses `Limits::tool_timeout`.
    pub timeout: Option<Duration>,
    /// Whether a call waits for the user's approval (the turn pauses).
    pub needs_approval: bool,
}

/// Where a tool runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolEndpoint {
    /// A built-in tool of the runner, by name.
    Builtin(String),
    /// A `parley.tools.v1.ToolService` address.
    Grpc(String),
    /// A tool of an MCP server configured in the runner.
    Mcp {
        /// The server's name in `[mcp_servers.NAME]`.
        server: String,
        /// The tool's name on that server.
        tool: String,
    },
    /// The application runs it: a call pauses the turn, and the
    /// continuation carries the app's result.
    Client {
        /// When set, the app's output must satisfy this JSON schema.
        output_schema: Option<Value>,
    },
}

/// Bounds on one turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Maximum model calls in the turn.
    pub max_iterations: u32,
    /// Output token limit per model call; `None` leaves the provider's default.
    pub max_output_tokens: Option<u32>,
    /// Default time one tool call may take.
    pub tool_timeout: Duration,
    /// Time from sending a model request to its first streamed event.
    pub first_token_timeout: Duration,
    /// Longest silence between two streamed events.
    pub idle_timeout: Duration,
    /// Time for the whole turn (already bounded by the gRPC deadline).
    pub total_timeout: Duration,
    /// How many tool calls run at once.
    pub max_parallel_tools: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_iterations: 10,
            max_output_tokens: None,
            tool_timeout: Duration::from_secs(30),
            first_token_timeout: Duration::from_secs(60),
            idle_timeout: Duration::from_secs(60),
            total_timeout: Duration::from_secs(600),
            max_parallel_tools: 4,
        }
    }
}

/// One problem with a request field (a `google.rpc.BadRequest` violation).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// The field path, for example `tools[2].name`.
    pub field: String,
    /// What is wrong with it.
    pub description: String,
}

impl Violation {
    /// A violation of `field`.
    pub fn new(field: impl Into<String>, description: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            description: description.into(),
        }
    }
}

/// The calls a pause left pending in `messages`: those of the last
/// assistant message that no tool result after it answers, in the model's
/// order. None when anything but tool results follows that message.
pub fn pending_calls(messages: &[Message]) -> Vec<&ToolCall> {
    let Some(position) = messages
        .iter()
        .rposition(|message| matches!(message, Message::Assistant { .. }))
    else {
        return Vec::new();
    };
    let Message::Assistant { tool_calls, .. } = &messages[position] else {
        return Vec::new();
    };
    let mut answered: Vec<&str> = Vec::new();
    for message in &messages[position + 1..] {
        match message {
            Message::ToolResults(results) => {
                answered.extend(results.iter().map(|result| result.call_id.as_str()));
            }
            _ => return Vec::new(),
        }
    }
    tool_calls
        .iter()
        .filter(|call| !answered.contains(&call.id.as_str()))
        .collect()
}

/// Orders `results` as `calls` made them (results of no call of them last,
/// in their order), so each provider gets its results in the model's order
/// however they were collected.
pub fn order_results(calls: &[ToolCall], results: &mut [ToolResult]) {
    let position = |result: &ToolResult| {
        calls
            .iter()
            .position(|call| call.id == result.call_id)
            .unwrap_or(usize::MAX)
    };
    if results
        .windows(2)
        .any(|pair| position(&pair[0]) > position(&pair[1]))
    {
        results.sort_by_key(position);
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn call(id: &str) -> ToolCall {
        ToolCall {
            id: id.into(),
            name: "t".into(),
            input: json!({}),
            provider_data: None,
        }
    }

    fn result(id: &str) -> ToolResult {
        ToolResult {
            call_id: id.into(),
            name: "t".into(),
            text: String::new(),
            is_error: false,
            attachments: Vec::new(),
        }
    }

    fn assistant(ids: &[&str]) -> Message {
        Message::Assistant {
            reasoning: Vec::new(),
            text: String::new(),
            tool_calls: ids.iter().map(|id| call(id)).collect(),
        }
    }

    fn ids(calls: Vec<&ToolCall>) -> Vec<&str> {
        calls.into_iter().map(|call| call.id.as_str()).collect()
    }

    #[test]
    fn pending_calls_are_the_last_answers_calls_without_a_result() {
        let user = Message::user("hi");
        let history = vec![
            user.clone(),
            assistant(&["a", "b", "c"]),
            Message::ToolResults(vec![result("b")]),
        ];
        assert_eq!(ids(pending_calls(&history)), ["a", "c"]);
        assert_eq!(ids(pending_calls(&history[..2])), ["a", "b", "c"]);
        let mut answered = history.clone();
        answered.push(user.clone());
        assert!(pending_calls(&answered).is_empty());
        assert!(pending_calls(&[user]).is_empty());
    }

    #[test]
    fn results_follow_the_calls_order() {
        let calls = [call("b"), call("a"), call("c")];
        let mut results = vec![result("a"), result("x"), result("c"), result("b")];
        order_results(&calls, &mut results);
        let ids: Vec<&str> = results.iter().map(|r| r.call_id.as_str()).collect();
        assert_eq!(ids, ["b", "a", "c", "x"]);
    }
}
