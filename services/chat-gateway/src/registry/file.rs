//! The registry file format (YAML, one file so it fits a Kubernetes
//! ConfigMap), as serde types. These mirror the file exactly: names are map
//! keys, kept in file order and with duplicates preserved so that validation
//! can report them; `validate` turns them into the domain types of `model`.
//!
//! ```yaml
//! version: 1
//! limits: { max_context_chars: 8000 }          # optional, see `FileLimits`
//! preamble: "You are ..."                      # prompt section 1
//! help: "..."                                  # prompt section 7
//! payload_types:
//!   schema_proposal: { marker: SCHEMA_PROPOSAL, global: false, schema: {...},
//!                      llm_instructions: "...", summary_template: "..." }
//! tools:
//!   current_time: { builtin: current_time, global: true, input_schema: {...} }
//!   lookup_rows:  { grpc: "http://127.0.0.1:50061", timeout: 5s, ... }
//!   delete_rows:  { grpc: "...", approval: always, ... }   # the user approves each call
//!   pick_rows:    { runs: client, output_schema: {...}, ... } # the app runs it
//! actions:
//!   close_chat:   { handler: client, global: true, description: "..." }
//!   run_analysis: { handler: server, message_template: "...", params_schema: {...} }
//! streams:
//!   sales-pipeline: { instructions: "..." }
//! pages:
//!   table_view:
//!     instructions: "..."
//!     mid_answer_failover: true                # optional, see `PageEntry`
//!     context_template: "..."
//!     payload_types: [schema_proposal, data_proposal]
//!     tools: [lookup_rows]
//!     actions: [open_table]
//!     tabs:
//!       rows: { instructions: "...", tools: [...], subtabs: { selection: {...} } }
//! ```

use std::fmt;
use std::marker::PhantomData;

use serde::Deserialize;
use serde::de::{MapAccess, Visitor};

/// A YAML mapping kept as an ordered list of `(key, value)`, duplicates
/// included: serde maps would silently keep the last of two equal keys.
#[derive(Debug, Clone, PartialEq)]
pub struct NamedMap<V>(pub Vec<(String, V)>);

impl<V> Default for NamedMap<V> {
    fn default() -> Self {
        Self(Vec::new())
    }
}

impl<'de, V: Deserialize<'de>> Deserialize<'de> for NamedMap<V> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct MapVisitor<V>(PhantomData<V>);

        impl<'de, V: Deserialize<'de>> Visitor<'de> for MapVisitor<V> {
            type Value = NamedMap<V>;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a mapping from names to entries")
            }

            fn visit_unit<E: serde::de::Error>(self) -> Result<Self::Value, E> {
                Ok(NamedMap::default())
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut entries = Vec::with_capacity(map.size_hint().unwrap_or(0));
                while let Some((key, value)) = map.next_entry::<String, V>()? {
                    entries.push((key, value));
                }
                Ok(NamedMap(entries))
            }
        }

        deserializer.deserialize_map(MapVisitor(PhantomData))
    }
}

/// The whole file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RegistryFile {
    /// Format version; only `1` exists.
    pub version: u32,
    /// Prompt limits; every field has a default.
    #[serde(default)]
    pub limits: FileLimits,
    /// Prompt section 1: identity, role, style, proposal mechanics.
    #[serde(default)]
    pub preamble: String,
    /// Prompt section 7: the app's help topics.
    #[serde(default)]
    pub help: String,
    /// Payload types by name.
    #[serde(default)]
    pub payload_types: NamedMap<PayloadTypeEntry>,
    /// Tools by name.
    #[serde(default)]
    pub tools: NamedMap<ToolEntry>,
    /// Suggested-action targets (client and server handled) by identifier.
    #[serde(default)]
    pub actions: NamedMap<ActionEntry>,
    /// Per-stream instructions by stream id.
    #[serde(default)]
    pub streams: NamedMap<StreamEntry>,
    /// Pages by name.
    #[serde(default)]
    pub pages: NamedMap<PageEntry>,
}

/// Limits of prompt assembly; all optional in the file.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileLimits {
    /// Maximum characters of the rendered current-context section.
    pub max_context_chars: Option<usize>,
    /// Maximum payloads listed in the manifest (the most recent are kept).
    pub max_manifest_entries: Option<usize>,
    /// Maximum characters of one manifest summary.
    pub max_summary_chars: Option<usize>,
    /// Template fuel: bounds the work one template rendering may do.
    pub template_fuel: Option<u64>,
    /// How often the runner's MCP tools are read again (`ListTools`).
    #[serde(default, with = "parley_grpc::config::duration::option")]
    pub mcp_tools_refresh: Option<std::time::Duration>,
}

/// A payload type definition (knows nothing of pages).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PayloadTypeEntry {
    /// The marker the model writes, UPPER_SNAKE, without colon; absent for
    /// payloads that only tools produce.
    #[serde(default)]
    pub marker: Option<String>,
    /// What the payload is for.
    #[serde(default)]
    pub description: String,
    /// Available on every page without being listed.
    #[serde(default)]
    pub global: bool,
    /// The JSON schema the payload's object must satisfy.
    pub schema: serde_json::Value,
    /// How to teach the model to write it (prompt section 6).
    #[serde(default)]
    pub llm_instructions: String,
    /// Template summarising one earlier payload for the manifest (section 5).
    #[serde(default)]
    pub summary_template: Option<String>,
}

/// Whether a tool's calls wait for the user's approval.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FileApproval {
    /// Each call waits for the user's approval (`SubmitToolDecisions`).
    Always,
    /// Calls run at once.
    #[default]
    Never,
}

/// Who runs a tool that has neither `builtin` nor `grpc`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FileRuns {
    /// The application: each call pauses the turn with a `client_tool_call`.
    Client,
}

/// A tool definition: exactly one of `builtin`, `grpc` or `runs: client`
/// says where it runs.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolEntry {
    /// What the tool does, for the model.
    #[serde(default)]
    pub description: String,
    /// Available on every page without being listed.
    #[serde(default)]
    pub global: bool,
    /// The JSON schema of the tool's input.
    pub input_schema: serde_json::Value,
    /// A built-in tool of the agent-runner, by its name there.
    #[serde(default)]
    pub builtin: Option<String>,
    /// The `http(s)://` address of an app's `parley.tools.v1.ToolService`.
    #[serde(default)]
    pub grpc: Option<String>,
    /// How long one call may take (`5s`, `500ms`).
    #[serde(default, with = "parley_grpc::config::duration::option")]
    pub timeout: Option<std::time::Duration>,
    /// The payload type of the structured result the tool returns, if any.
    #[serde(default)]
    pub payload_type: Option<String>,
    /// `always`: each call waits for the user's approval.
    #[serde(default)]
    pub approval: FileApproval,
    /// `client`: the application runs the tool.
    #[serde(default)]
    pub runs: Option<FileRuns>,
    /// For `runs: client`: the JSON schema the app's output must satisfy.
    #[serde(default)]
    pub output_schema: Option<serde_json::Value>,
}

/// Who handles an action.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FileHandler {
    /// The client UI.
    Client,
    /// The gateway, through `ExecuteAction`.
    Server,
}

/// An action that suggestions may name.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ActionEntry {
    /// What the action does, for the model.
    #[serde(default)]
    pub description: String,
    /// Who handles it.
    pub handler: FileHandler,
    /// Available on every page without being listed.
    #[serde(default)]
    pub global: bool,
    /// JSON schema of the action's `params`, if it takes any.
    #[serde(default)]
    pub params_schema: Option<serde_json::Value>,
    /// Server actions: the user message a run of the action sends, rendered
    /// with the action's params.
    #[serde(default)]
    pub message_template: Option<String>,
}

/// Instructions for one stream id.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StreamEntry {
    /// Added to the prompt (section 3) when the request names this stream.
    pub instructions: String,
}

/// Declares a page, tab or subtab entry: the five fields every scope has,
/// plus its children. (`serde(flatten)` would lose `deny_unknown_fields` and
/// the entry paths in errors, so each level spells its fields out.)
macro_rules! scope_entry {
    ($(#[$doc:meta])* $name:ident { $($(#[$cdoc:meta])* $child:ident: $child_ty:ty),* }) => {
        $(#[$doc])*
        #[derive(Debug, Default, Deserialize)]
        #[serde(deny_unknown_fields)]
        pub struct $name {
            /// Added to prompt section 2, after the enclosing scope's.
            #[serde(default)]
            pub instructions: String,
            /// Renders the UI state (section 4); the most specific scope's wins.
            #[serde(default)]
            pub context_template: Option<String>,
            /// Payload types by name.
            #[serde(default)]
            pub payload_types: Vec<String>,
            /// Tools by name.
            #[serde(default)]
            pub tools: Vec<String>,
            /// Actions by identifier.
            #[serde(default)]
            pub actions: Vec<String>,
            $($(#[$cdoc])* #[serde(default)] pub $child: $child_ty,)*
        }

        impl $name {
            /// The scope's own fields, without its children.
            pub fn scope(&self) -> ScopeView<'_> {
                ScopeView {
                    instructions: &self.instructions,
                    context_template: self.context_template.as_deref(),
                    payload_types: &self.payload_types,
                    tools: &self.tools,
                    actions: &self.actions,
                }
            }
        }
    };
}

/// The fields a page, a tab and a subtab share, borrowed.
#[derive(Debug, Clone, Copy)]
pub struct ScopeView<'a> {
    /// Instructions for prompt section 2.
    pub instructions: &'a str,
    /// The context template, if this scope has one.
    pub context_template: Option<&'a str>,
    /// Payload type names.
    pub payload_types: &'a [String],
    /// Tool names.
    pub tools: &'a [String],
    /// Action identifiers.
    pub actions: &'a [String],
}

scope_entry!(
    /// A page: what it adds plus its tabs.
    PageEntry {
        /// Tabs by name.
        tabs: NamedMap<TabEntry>,
        /// Turns on this page (any tab) run a model call that fails after
        /// streaming again, as `ChatRequest.mid_answer_failover` asks.
        mid_answer_failover: bool,
        /// The model (a route of the runner's `[models.NAME]`, or
        /// `provider/model`) of this page's turns whose request names none;
        /// unset: the runner's default.
        model: Option<String>,
        /// The models a request on this page may name
        /// (`ChatRequest.model`); empty: none but `model`.
        models_allowed: Vec<String>,
        /// The media types of the files a user may attach on this page
        /// (`image/png`, or `image/*` for any image); empty: none.
        attachments: Vec<String>,
        /// What a model that takes none of a file's kind gets: `fail` (the
        /// turn fails, `ATTACHMENT_UNSUPPORTED`; the default) or `describe`
        /// (a line naming the file instead).
        attachments_unsupported: Option<String>
    }
);

scope_entry!(
    /// A tab: what it adds plus its subtabs.
    TabEntry {
        /// Subtabs by name.
        subtabs: NamedMap<SubtabEntry>
    }
);

scope_entry!(
    /// A subtab: what it adds.
    SubtabEntry {}
);
