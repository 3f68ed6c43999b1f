//! The runner's MCP tools, as the gateway knows them: read from
//! `AgentRunner/ListTools` (descriptions and input schemas come from the
//! MCP servers through the runner, never from the registry file) and
//! allowed on a page by its `SERVER/TOOL` or `SERVER/*` rules.
//!
//! A background task reads the list at start-up and then every
//! `limits.mcp_tools_refresh` (10 s); until the first answer, and while the
//! runner is unreachable, the last list read is used (at first: none, so a
//! page's MCP tools are simply not offered). A tool whose model name equals
//! one of the registry's tools is left out of the pages that have both: the
//! registry's wins.

use std::{
    collections::BTreeMap,
    sync::{Arc, PoisonError, RwLock},
    time::Duration,
};

use parley_proto::runner::v1::{
    ListToolsRequest, ListToolsResponse, agent_runner_client::AgentRunnerClient, tool_endpoint,
};

use super::model::{McpRule, ToolDef, ToolEndpointDef};
use crate::clients::Traced;

/// How long one `ListTools` call may take.
pub const LIST_TIMEOUT: Duration = Duration::from_secs(5);

/// The MCP tools last listed by the runner, by `SERVER/TOOL`.
#[derive(Debug, Default)]
pub struct McpCatalog {
    tools: RwLock<Arc<BTreeMap<String, Arc<ToolDef>>>>,
}

impl McpCatalog {
    /// Replaces the list with the runner's answer; definitions that are
    /// not MCP tools or whose schema is not an object are ignored.
    pub fn replace(&self, response: ListToolsResponse) {
        let mut tools = BTreeMap::new();
        for tool in response.tools {
            let Some(tool_endpoint::Kind::Mcp(reference)) =
                tool.endpoint.and_then(|endpoint| endpoint.kind)
            else {
                continue;
            };
            let input_schema = tool.input_schema.as_ref().map_or_else(
                || serde_json::json!({"type": "object"}),
                parley_proto::json::from_struct_value,
            );
            tools.insert(
                reference.clone(),
                Arc::new(ToolDef {
                    name: tool.name,
                    description: tool.description,
                    input_schema_wire: super::wire::json_to_struct(&input_schema),
                    input_schema,
                    global: false,
                    endpoint: ToolEndpointDef::Mcp(reference),
                    timeout: None,
                    payload_type: None,
                    needs_approval: false,
                }),
            );
        }
        *self.tools.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(tools);
    }

    /// The tools `rule` allows, in name order.
    pub fn matching(&self, rule: &McpRule) -> Vec<Arc<ToolDef>> {
        let tools = self
            .tools
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        match &rule.tool {
            Some(tool) => tools
                .get(&format!("{}/{tool}", rule.server))
                .cloned()
                .into_iter()
                .collect(),
            None => {
                let prefix = format!("{}/", rule.server);
                tools
                    .range(prefix.clone()..)
                    .take_while(|(reference, _)| reference.starts_with(&prefix))
                    .map(|(_, tool)| tool.clone())
                    .collect()
            }
        }
    }

    /// Reads the runner's list once.
    pub async fn refresh(
        &self,
        runner: &mut AgentRunnerClient<Traced>,
    ) -> Result<usize, tonic::Status> {
        let mut request = tonic::Request::new(ListToolsRequest {});
        request.set_timeout(LIST_TIMEOUT);
        let response = runner.list_tools(request).await?.into_inner();
        let count = response.tools.len();
        self.replace(response);
        Ok(count)
    }

    /// Reads the runner's list now and then every `every`, until the
    /// catalog is dropped.
    pub fn spawn_refresh(self: &Arc<Self>, runner: AgentRunnerClient<Traced>, every: Duration) {
        let catalog = Arc::downgrade(self);
        tokio::spawn(async move {
            let mut runner = runner;
            let mut failing = false;
            loop {
                let Some(current) = catalog.upgrade() else {
                    return;
                };
                match current.refresh(&mut runner).await {
                    Ok(count) => {
                        if failing {
                            tracing::info!(tools = count, "the runner's MCP tools are read again");
                        }
                        failing = false;
                    }
                    // Unimplemented: a runner from before MCP tools.
                    Err(status) if !failing => {
                        tracing::warn!(code = ?status.code(), message = %status.message(), "cannot read the runner's MCP tools; keeping the last list");
                        failing = true;
                    }
                    Err(_) => {}
                }
                drop(current);
                tokio::time::sleep(every).await;
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use parley_proto::runner::v1 as pb;

    use super::*;

    fn tool(name: &str, reference: &str) -> pb::ToolDefinition {
        pb::ToolDefinition {
            name: name.into(),
            description: format!("{name} does things"),
            endpoint: Some(pb::ToolEndpoint {
                kind: Some(tool_endpoint::Kind::Mcp(reference.into())),
            }),
            ..Default::default()
        }
    }

    #[test]
    fn rules_select_one_tool_or_a_whole_server() {
        let catalog = McpCatalog::default();
        catalog.replace(ListToolsResponse {
            tools: vec![
                tool("time__now", "time/now"),
                tool("time__convert", "time/convert"),
                tool("timer__start", "timer/start"),
            ],
            servers: Vec::new(),
        });
        let all = catalog.matching(&McpRule {
            server: "time".into(),
            tool: None,
        });
        let names: Vec<&str> = all.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, vec!["time__convert", "time__now"]);
        let one = catalog.matching(&McpRule {
            server: "time".into(),
            tool: Some("now".into()),
        });
        assert_eq!(one[0].endpoint, ToolEndpointDef::Mcp("time/now".into()));
        assert!(
            catalog
                .matching(&McpRule {
                    server: "time".into(),
                    tool: Some("gone".into()),
                })
                .is_empty()
        );
    }
}
