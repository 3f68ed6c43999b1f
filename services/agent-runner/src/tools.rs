//! Tools: what the model may call, how calls are checked, and how they run.
//!
//! A turn's tools are declared in the request and prepared once ([`prepare`]):
//! names checked, schemas compiled, each bound to a local tool (the
//! built-ins, [`builtin`]), a remote `parley.tools.v1.ToolService`
//! ([`remote`]) or a tool of a configured MCP server ([`mcp`]), each a
//! [`ToolSource`]; a tool the application runs ([`client`]) never runs
//! here. [`execute`] runs one round of the model's calls: unknown
//! names and invalid inputs are answered as tool errors without running
//! anything, valid calls run in parallel (bounded), each with its own
//! timeout, their progress streamed, and every outcome is fed back to the
//! model. Nothing runs that the request did not register: no shell, no URL
//! fetch, no MCP server the runner's configuration does not name.

pub mod builtin;
pub mod calculator;
pub mod client;
pub mod clock;
pub mod execute;
pub mod mcp;
pub mod prepare;
pub mod remote;
pub mod schemas;

use std::{collections::BTreeMap, fmt, sync::Arc, time::Duration};

use parley_proto::parser::v1::Payload;
use serde_json::Value;
use tokio::sync::mpsc;

/// The longest tool name accepted (OpenAI's limit): a request's tool
/// names, and the names MCP tools are offered under.
pub const MAX_TOOL_NAME_LEN: usize = 64;

/// What a tool returns on success.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ToolOutput {
    /// The text given to the model.
    pub text: String,
    /// A typed payload for the UI, passed through unchanged.
    pub payload: Option<Payload>,
    /// Images and documents for the model, after `text` (which names
    /// them, for models that take none).
    pub attachments: Vec<std::sync::Arc<crate::provider::Attachment>>,
}

/// Why a tool call failed; the model sees the message as a tool error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolFailure {
    /// The stable reason.
    pub reason: FailureReason,
    /// A message the model can act on.
    pub message: String,
}

impl ToolFailure {
    /// A failure with `reason` and `message`.
    pub fn new(reason: FailureReason, message: impl Into<String>) -> Self {
        Self {
            reason,
            message: message.into(),
        }
    }
}

/// Stable reasons for a failed tool call (`ToolComplete.error_reason`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureReason {
    /// The model named a tool the turn does not have.
    UnknownTool,
    /// The input does not satisfy the tool's schema.
    InvalidInput,
    /// The tool took longer than its timeout.
    Timeout,
    /// The tool ran and reported an error.
    ToolError,
    /// The tool's server could not be reached.
    Unavailable,
    /// The turn was cancelled while the tool ran.
    Cancelled,
    /// The user declined to run the call.
    Rejected,
    /// The app's output for a tool it runs does not satisfy the tool's
    /// output schema.
    InvalidOutput,
}

impl FailureReason {
    /// The UPPER_SNAKE name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::UnknownTool => "UNKNOWN_TOOL",
            Self::InvalidInput => "INVALID_INPUT",
            Self::Timeout => "TIMEOUT",
            Self::ToolError => "TOOL_ERROR",
            Self::Unavailable => "UNAVAILABLE",
            Self::Cancelled => "CANCELLED",
            Self::Rejected => "REJECTED",
            Self::InvalidOutput => "INVALID_OUTPUT",
        }
    }
}

impl fmt::Display for FailureReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Progress of a running tool.
#[derive(Debug, Clone, PartialEq)]
pub struct Progress {
    /// A short machine-friendly stage name.
    pub stage: String,
    /// A human-readable message.
    pub message: String,
    /// Completion between 0 and 1, when known.
    pub fraction: Option<f32>,
}

/// Where a running call reports progress; cheap to clone.
#[derive(Debug, Clone)]
pub struct ProgressSender {
    index: usize,
    tx: mpsc::Sender<(usize, Progress)>,
}

impl ProgressSender {
    /// A sender tagging progress with the call's `index`.
    pub fn new(index: usize, tx: mpsc::Sender<(usize, Progress)>) -> Self {
        Self { index, tx }
    }

    /// Reports progress; waits while the client is slow, and does nothing
    /// once the turn is over.
    pub async fn report(&self, stage: &str, message: impl Into<String>, fraction: Option<f32>) {
        let progress = Progress {
            stage: stage.to_owned(),
            message: message.into(),
            fraction: fraction.map(|f| f.clamp(0.0, 1.0)),
        };
        let _ = self.tx.send((self.index, progress)).await;
    }
}

/// What a tool knows about the call besides its input.
#[derive(Debug, Clone, PartialEq)]
pub struct CallContext {
    /// The call id.
    pub call_id: String,
    /// The conversation the turn belongs to.
    pub conversation_id: String,
    /// The user on whose behalf the model calls the tool.
    pub user_id: String,
    /// Where `user_id` comes from (`jwt:<iss>`, `static`, `dev`).
    pub user_issuer: String,
    /// The user's tenant; empty when none.
    pub tenant: String,
    /// The page's UI state, when the turn has one.
    pub context: Option<Value>,
    /// The time the call has.
    pub timeout: Duration,
}

/// A tool that runs inside the runner.
#[async_trait::async_trait]
pub trait LocalTool: Send + Sync + fmt::Debug {
    /// The name under which requests refer to it (`ToolEndpoint.builtin`).
    fn name(&self) -> &str;
    /// The description offered to the model when the request gives none.
    fn description(&self) -> &str;
    /// The input schema used when the request gives none.
    fn input_schema(&self) -> Value;
    /// Runs one call. The future is dropped when the turn is cancelled or
    /// the call times out.
    async fn run(
        &self,
        input: Value,
        ctx: CallContext,
        progress: ProgressSender,
    ) -> Result<ToolOutput, ToolFailure>;
}

/// Where one of a turn's tools runs, behind one interface: a local tool
/// ([`builtin::LocalSource`]), a `ToolService` ([`remote::RemoteSource`]) or
/// a tool of an MCP server ([`mcp::call::McpSource`]).
#[async_trait::async_trait]
pub trait ToolSource: Send + Sync + fmt::Debug {
    /// Whether a call leaves the runner (a remote or MCP server).
    fn is_remote(&self) -> bool;

    /// Runs one call of the tool the model knows as `name`. The future is
    /// dropped when the turn is cancelled or the call times out.
    async fn call(
        &self,
        name: &str,
        input: &Value,
        ctx: CallContext,
        progress: ProgressSender,
    ) -> Result<ToolOutput, ToolFailure>;
}

/// Everything that runs tools, shared by all turns.
#[derive(Debug, Clone)]
pub struct ToolRuntime {
    local: BTreeMap<String, Arc<dyn LocalTool>>,
    /// Cached channels to remote tool servers.
    pub channels: Arc<remote::Channels>,
    /// The configured MCP servers.
    pub mcp: Arc<mcp::McpServers>,
    /// Tool input schemas compiled so far, shared by turns.
    pub schemas: Arc<schemas::Schemas>,
}

impl ToolRuntime {
    /// The built-in tools and an empty channel cache.
    pub fn with_builtins() -> Self {
        let mut runtime = Self {
            local: BTreeMap::new(),
            channels: Arc::new(remote::Channels::default()),
            mcp: Arc::default(),
            schemas: Arc::default(),
        };
        for tool in builtin::all() {
            runtime.register(tool);
        }
        runtime
    }

    /// With `tls` for its `https://` tool servers.
    pub fn with_client_tls(mut self, tls: parley_grpc::tls::ClientTls) -> Self {
        self.channels = Arc::new(remote::Channels::with_tls(tls));
        self
    }

    /// With `servers` as its MCP servers.
    pub fn with_mcp(mut self, servers: mcp::McpServers) -> Self {
        self.mcp = Arc::new(servers);
        self
    }

    /// Adds (or replaces) a local tool.
    pub fn register(&mut self, tool: Arc<dyn LocalTool>) {
        self.local.insert(tool.name().to_owned(), tool);
    }

    /// The local tool named `name`.
    pub fn local(&self, name: &str) -> Option<&Arc<dyn LocalTool>> {
        self.local.get(name)
    }

    /// The names of the local tools.
    pub fn local_names(&self) -> impl Iterator<Item = &str> {
        self.local.keys().map(String::as_str)
    }
}
