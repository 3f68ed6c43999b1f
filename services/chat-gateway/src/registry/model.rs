//! The registry's domain types: definitions that know nothing of pages
//! (payload types, tools, actions), the page tree that references them by
//! name, and the prompt limits. Built once from the file by `validate`, then
//! shared read-only.

use std::sync::Arc;
use std::time::Duration;

/// A custom payload type (docs/output-format.md#custom-payload-types).
#[derive(Debug, Clone, PartialEq)]
pub struct PayloadTypeDef {
    /// The type name, for example `schema_proposal`.
    pub name: String,
    /// The marker without decoration or colon, for example `SCHEMA_PROPOSAL`;
    /// empty for payloads that only tools produce (never taught to the model).
    pub marker: String,
    /// What it is for.
    pub description: String,
    /// The JSON schema (an object) the payload must satisfy.
    pub schema: serde_json::Value,
    /// `schema` as a protobuf `Struct`, converted once at load for the wire
    /// (the parser's profile, `DescribePage`).
    pub schema_wire: Option<prost_types::Struct>,
    /// How the model is taught to write it.
    pub llm_instructions: String,
    /// Summarises an earlier payload in the manifest; rendered with the
    /// payload's fields as variables.
    pub summary_template: Option<String>,
    /// Available on every page without being listed.
    pub global: bool,
}

impl PayloadTypeDef {
    /// Whether the model writes this payload after a marker (as opposed to a
    /// payload that only tools return).
    pub fn has_marker(&self) -> bool {
        !self.marker.is_empty()
    }
}

/// Where a tool runs.
#[derive(Debug, Clone, PartialEq)]
pub enum ToolEndpointDef {
    /// A built-in tool of the agent-runner, by its name there.
    Builtin(String),
    /// An app's `parley.tools.v1.ToolService` at this `http(s)://` address.
    Grpc(String),
    /// A tool of an MCP server configured in the runner, `SERVER/TOOL`;
    /// learned from the runner's `ListTools`, never defined in the file.
    Mcp(String),
    /// The application runs it (`runs: client`): each call pauses the turn
    /// with a `client_tool_call`; the app's output must satisfy the schema,
    /// when one is given.
    Client {
        /// `output_schema` as a protobuf `Struct`, when set.
        output_schema: Option<prost_types::Struct>,
    },
}

/// A page's rule allowing MCP tools: `SERVER/TOOL`, or `SERVER/*` for all
/// of the server's tools.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpRule {
    /// The runner's name for the server.
    pub server: String,
    /// The tool, or `None` for every tool of the server.
    pub tool: Option<String>,
}

/// A tool the model may call.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolDef {
    /// The name the model calls it by.
    pub name: String,
    /// What it does, for the model.
    pub description: String,
    /// The JSON schema (an object) of its input.
    pub input_schema: serde_json::Value,
    /// `input_schema` as a protobuf `Struct`, converted once at load for
    /// the wire (the runner's tool definitions, `DescribePage`).
    pub input_schema_wire: Option<prost_types::Struct>,
    /// Available on every page without being listed.
    pub global: bool,
    /// Where it runs.
    pub endpoint: ToolEndpointDef,
    /// How long one call may take; `None` uses the runner's default.
    pub timeout: Option<Duration>,
    /// The payload type of the structured result it returns, if any.
    pub payload_type: Option<String>,
    /// Whether each call waits for the user's approval (`approval: always`).
    pub needs_approval: bool,
}

/// Who handles a suggested action.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Handler {
    /// The client UI (navigation, closing the panel, ...).
    Client,
    /// The gateway, when the client calls `ExecuteAction`.
    Server,
}

impl Handler {
    /// The name used in the file and in the prompt (`client` / `server`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Client => "client",
            Self::Server => "server",
        }
    }
}

/// What a server-handled action does: it runs a turn whose user message is
/// `message_template` rendered with the action's params.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerActionDef {
    /// A template (Jinja syntax); the params' fields are its variables.
    pub message_template: String,
}

/// An action a suggested-action button may trigger.
#[derive(Debug, Clone, PartialEq)]
pub struct ActionDef {
    /// The identifier, for example `close_chat`.
    pub action: String,
    /// What it does, for the model.
    pub description: String,
    /// Who handles it.
    pub handler: Handler,
    /// Available on every page without being listed.
    pub global: bool,
    /// The JSON schema of its `params`, if it takes any.
    pub params_schema: Option<serde_json::Value>,
    /// Set exactly when `handler` is `Server`.
    pub server: Option<ServerActionDef>,
}

/// Where the user is: empty strings mean none.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct PageRef {
    /// The page, for example `table_view`.
    pub page: String,
    /// The tab within the page.
    pub tab: String,
    /// The subtab within the tab.
    pub subtab: String,
}

impl PageRef {
    /// A reference from its three parts.
    pub fn new(page: impl Into<String>, tab: impl Into<String>, subtab: impl Into<String>) -> Self {
        Self {
            page: page.into(),
            tab: tab.into(),
            subtab: subtab.into(),
        }
    }
}

impl From<&parley_proto::gateway::v1::PageContext> for PageRef {
    fn from(ctx: &parley_proto::gateway::v1::PageContext) -> Self {
        Self::new(ctx.page.clone(), ctx.tab.clone(), ctx.subtab.clone())
    }
}

/// The limits of prompt assembly, from the file's `limits` (or defaults).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Maximum characters of the rendered current-context section.
    pub max_context_chars: usize,
    /// Maximum payloads listed in the manifest; the most recent are kept.
    pub max_manifest_entries: usize,
    /// Maximum characters of one manifest summary.
    pub max_summary_chars: usize,
    /// Bounds the work of one template rendering (minijinja fuel).
    pub template_fuel: u64,
    /// How often the runner's MCP tools are read again.
    pub mcp_tools_refresh: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_context_chars: 8_000,
            max_manifest_entries: 20,
            max_summary_chars: 300,
            template_fuel: 50_000,
            mcp_tools_refresh: Duration::from_secs(10),
        }
    }
}

/// What one scope (page, tab or subtab) adds, with names resolved.
#[derive(Debug, Clone, Default)]
pub(crate) struct Scope {
    /// Instructions for prompt section 2.
    pub instructions: String,
    /// The key of this scope's context template in the template set.
    pub context_template: Option<TemplateRef>,
    /// Payload types in the order listed.
    pub payload_types: Vec<Arc<PayloadTypeDef>>,
    /// Tools in the order listed.
    pub tools: Vec<Arc<ToolDef>>,
    /// MCP tools allowed here, in the order listed (after `tools`).
    pub mcp: Vec<McpRule>,
    /// Actions in the order listed.
    pub actions: Vec<Arc<ActionDef>>,
}

/// A context template: its source and its key in the compiled template set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TemplateRef {
    /// The entry path, used as the template's name.
    pub key: String,
    /// The source text.
    pub source: String,
}

/// A subtab.
#[derive(Debug, Clone, Default)]
pub(crate) struct SubtabDef {
    pub scope: Scope,
}

/// A tab and its subtabs, in file order.
#[derive(Debug, Clone, Default)]
pub(crate) struct TabDef {
    pub scope: Scope,
    pub subtabs: Vec<(String, SubtabDef)>,
}

/// A page and its tabs, in file order.
#[derive(Debug, Clone, Default)]
pub(crate) struct PageDef {
    pub scope: Scope,
    pub tabs: Vec<(String, TabDef)>,
    /// Mid-answer failover for every turn on the page.
    pub mid_answer_failover: bool,
    /// The model of the page's turns whose request names none.
    pub model: Option<String>,
    /// The models a request on the page may name.
    pub models_allowed: Vec<String>,
    /// The media types a file attached on the page may have.
    pub attachments: Vec<String>,
    /// Files a model cannot take are described to it, not refused.
    pub describe_unsupported_attachments: bool,
}
