//! The domain form of one `Run` request: everything the loop needs to run a
//! turn, with the wire types already converted and validated. Tests build
//! these by hand; the service builds them in `convert`.

use std::{sync::Arc, time::Duration};

use serde_json::Value;

use crate::provider::{Message, ModelChoice};

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
