//! Resolution (docs/architecture.md#registry-and-pages): what a page, tab
//! and subtab may use is the globals,
//! then the page's own, then the tab's, then the subtab's — in that priority
//! order, without duplicates. An unknown page gets the globals only; an
//! unknown tab or subtab adds nothing. The result converts to the three wire
//! shapes other parts need: the parser's profile, the runner's tool
//! definitions and the `DescribePage` answer.

use std::sync::Arc;

use parley_proto::gateway::v1 as gw;
use parley_proto::parser::v1 as parser;
use parley_proto::runner::v1 as runner;

use super::mcp::McpCatalog;
use super::model::{
    ActionDef, Handler, PageRef, PayloadTypeDef, Scope, TemplateRef, ToolDef, ToolEndpointDef,
};

/// What a page, tab and subtab resolve to.
#[derive(Debug, Clone)]
pub struct ResolvedPage {
    /// Where the user is, as asked.
    pub page_ref: PageRef,
    /// Whether the page is registered (unknown pages get the globals only).
    pub known: bool,
    /// Whether a tab was named and is registered on the page.
    pub tab_known: bool,
    /// Whether a subtab was named and is registered on the tab.
    pub subtab_known: bool,
    /// Payload types in priority order: global first, then page, tab, subtab.
    pub payload_types: Vec<Arc<PayloadTypeDef>>,
    /// Tools, in the same order.
    pub tools: Vec<Arc<ToolDef>>,
    /// Actions suggestions may name, in the same order.
    pub actions: Vec<Arc<ActionDef>>,
    /// Page, tab and subtab instructions, in that order, empty ones left out.
    pub instructions: Vec<String>,
    /// The context templates of page, tab and subtab, joined by newlines
    /// (each renders on its own; their outputs are joined in that order).
    pub context_template: Option<String>,
    /// The compiled templates' keys, page first, for rendering.
    pub(crate) context_template_keys: Vec<String>,
    /// Whether the page turns mid-answer failover on for its turns (the
    /// request can turn it on too).
    pub mid_answer_failover: bool,
    /// The model of the page's turns whose request names none (`None`:
    /// the runner's default).
    pub model: Option<String>,
    /// The models a request on the page may name besides `model`.
    pub models_allowed: Vec<String>,
    /// The media types (`image/png`) and families (`image/*`) a file
    /// attached on the page may have, lower-case.
    pub attachments: Vec<String>,
    /// Files a model cannot take are described to it, not refused.
    pub describe_unsupported_attachments: bool,
}

impl ResolvedPage {
    /// Whether a file of `media_type` may be attached on the page.
    pub fn allows_attachment(&self, media_type: &str) -> bool {
        let media_type = media_type.to_ascii_lowercase();
        self.attachments
            .iter()
            .any(|allowed| match allowed.strip_suffix("/*") {
                Some(family) => media_type
                    .split_once('/')
                    .is_some_and(|(kind, _)| kind == family),
                None => *allowed == media_type,
            })
    }

    /// The models a request on the page may name: `model` and
    /// `models_allowed`, without repeats.
    pub fn allowed_models(&self) -> impl Iterator<Item = &str> {
        let extra = self
            .models_allowed
            .iter()
            .filter(|name| self.model.as_ref() != Some(*name));
        self.model.iter().chain(extra).map(String::as_str)
    }

    /// Starts from the globals.
    pub(crate) fn globals(
        page_ref: PageRef,
        payload_types: &[Arc<PayloadTypeDef>],
        tools: &[Arc<ToolDef>],
        actions: &[Arc<ActionDef>],
    ) -> Self {
        let mut out = Self {
            page_ref,
            known: false,
            tab_known: false,
            subtab_known: false,
            payload_types: Vec::new(),
            tools: Vec::new(),
            actions: Vec::new(),
            instructions: Vec::new(),
            context_template: None,
            context_template_keys: Vec::new(),
            mid_answer_failover: false,
            model: None,
            models_allowed: Vec::new(),
            attachments: Vec::new(),
            describe_unsupported_attachments: false,
        };
        extend(
            &mut out.payload_types,
            payload_types.iter().filter(|p| p.global),
            |p| &p.name,
        );
        extend(&mut out.tools, tools.iter().filter(|t| t.global), |t| {
            &t.name
        });
        extend(&mut out.actions, actions.iter().filter(|a| a.global), |a| {
            &a.action
        });
        out
    }

    /// Adds one scope (page, tab or subtab) after what is already there.
    pub(crate) fn add_scope(&mut self, scope: &Scope, mcp: &McpCatalog) {
        extend(&mut self.payload_types, scope.payload_types.iter(), |p| {
            &p.name
        });
        extend(&mut self.tools, scope.tools.iter(), |t| &t.name);
        for rule in &scope.mcp {
            extend(&mut self.tools, mcp.matching(rule).iter(), |t| &t.name);
        }
        extend(&mut self.actions, scope.actions.iter(), |a| &a.action);
        if !scope.instructions.is_empty() {
            self.instructions.push(scope.instructions.clone());
        }
        if let Some(TemplateRef { key, source }) = &scope.context_template {
            self.context_template = Some(match self.context_template.take() {
                Some(before) => format!("{before}\n{source}"),
                None => source.clone(),
            });
            self.context_template_keys.push(key.clone());
        }
    }

    /// The payload types the model writes after a marker (tool-only payload
    /// types have none), in priority order.
    pub fn marker_payload_types(&self) -> impl Iterator<Item = &Arc<PayloadTypeDef>> {
        self.payload_types.iter().filter(|p| p.has_marker())
    }

    /// The parser profile: payloads (name, marker, schema) in priority order,
    /// every allowed action (`client_actions`) and those the server handles
    /// (`server_actions`). No tool names: tool calls written into the text
    /// are the runner's (with `turns.text_tool_calls` on it removes and runs
    /// them before the text reaches the gateway); off, such text stays what
    /// the user reads rather than vanishing as a call nothing runs.
    pub fn parse_profile(&self) -> parser::ParseProfile {
        parser::ParseProfile {
            payloads: self
                .marker_payload_types()
                .map(|p| parser::PayloadSpec {
                    name: p.name.clone(),
                    marker: p.marker.clone(),
                    schema: p.schema_wire.clone(),
                })
                .collect(),
            client_actions: self.actions.iter().map(|a| a.action.clone()).collect(),
            tools: Vec::new(),
            server_actions: self
                .actions
                .iter()
                .filter(|a| a.handler == Handler::Server)
                .map(|a| a.action.clone())
                .collect(),
        }
    }

    /// Whether a tool of the page can change anything beyond the runner: a
    /// gRPC or MCP tool. The built-in tools read the clock and do
    /// arithmetic, so starting one twice for a turn changes nothing, and a
    /// turn offering only those needs no lease fence before its tool calls
    /// (see `turn::relay`).
    pub fn has_tools_with_effects(&self) -> bool {
        self.tools.iter().any(|tool| {
            !matches!(
                tool.endpoint,
                ToolEndpointDef::Builtin(_) | ToolEndpointDef::Client { .. }
            )
        })
    }

    /// The runner's tool definitions, with endpoint and timeout.
    pub fn runner_tools(&self) -> Vec<runner::ToolDefinition> {
        self.tools
            .iter()
            .map(|t| runner::ToolDefinition {
                name: t.name.clone(),
                description: t.description.clone(),
                input_schema: t.input_schema_wire.clone(),
                endpoint: Some(runner::ToolEndpoint {
                    kind: Some(match &t.endpoint {
                        ToolEndpointDef::Builtin(name) => {
                            runner::tool_endpoint::Kind::Builtin(name.clone())
                        }
                        ToolEndpointDef::Grpc(url) => {
                            runner::tool_endpoint::Kind::Grpc(url.clone())
                        }
                        ToolEndpointDef::Mcp(reference) => {
                            runner::tool_endpoint::Kind::Mcp(reference.clone())
                        }
                        ToolEndpointDef::Client { output_schema } => {
                            runner::tool_endpoint::Kind::Client(runner::ClientTool {
                                output_schema: output_schema.clone(),
                            })
                        }
                    }),
                }),
                timeout: t
                    .timeout
                    .and_then(|d| prost_types::Duration::try_from(d).ok()),
                needs_approval: t.needs_approval,
            })
            .collect()
    }

    /// The `DescribePage` answer, without the system prompt.
    pub fn describe(&self) -> gw::DescribePageResponse {
        gw::DescribePageResponse {
            known_page: self.known,
            payload_types: self
                .payload_types
                .iter()
                .map(|p| gw::PayloadTypeInfo {
                    name: p.name.clone(),
                    marker: p.marker.clone(),
                    description: p.description.clone(),
                    schema: p.schema_wire.clone(),
                    global: p.global,
                })
                .collect(),
            tools: self
                .tools
                .iter()
                .map(|t| gw::ToolInfo {
                    name: t.name.clone(),
                    description: t.description.clone(),
                    input_schema: t.input_schema_wire.clone(),
                    global: t.global,
                    needs_approval: t.needs_approval,
                    runs_on_client: matches!(t.endpoint, ToolEndpointDef::Client { .. }),
                })
                .collect(),
            client_actions: self
                .actions
                .iter()
                .map(|a| gw::ClientActionInfo {
                    action: a.action.clone(),
                    description: a.description.clone(),
                    handler: match a.handler {
                        Handler::Client => parser::ActionHandler::Client,
                        Handler::Server => parser::ActionHandler::Server,
                    } as i32,
                    global: a.global,
                })
                .collect(),
            system_prompt: String::new(),
            mid_answer_failover: self.mid_answer_failover,
            model: self.model.clone().unwrap_or_default(),
            models_allowed: self.allowed_models().map(str::to_owned).collect(),
            attachment_types: self.attachments.clone(),
        }
    }
}

/// Appends the items whose name is not already present.
fn extend<'a, T: 'a>(
    into: &mut Vec<Arc<T>>,
    items: impl Iterator<Item = &'a Arc<T>>,
    name: impl Fn(&T) -> &String,
) {
    for item in items {
        if !into.iter().any(|have| name(have) == name(item)) {
            into.push(Arc::clone(item));
        }
    }
}
