//! MCP tool servers: the tools of the servers in `[mcp_servers.NAME]`,
//! called through the official Rust SDK (`rmcp`).
//!
//! **Lifecycle.** Every configured server is started (stdio: a child
//! process, no shell) or connected (Streamable HTTP) when the runner starts,
//! not at first use, so `ListTools` knows the tools before the first turn
//! and a broken server shows in the logs and in `ListTools` at once. Each
//! server has a supervisor task ([`server`]): the `initialize` handshake
//! (protocol 2025-11-25, older servers negotiate down), `tools/list` (every
//! page), then it waits. `notifications/tools/list_changed` reads the list
//! again. A server that exits, closes its stream or fails a call at the
//! transport is marked down and started again after a backoff that doubles
//! up to `max_restart_backoff` (reset once it stayed up that long).
//!
//! **State.** `ListTools` reports each server's state (`READY`,
//! `CONNECTING`, `DOWN` with why) and how often it was started; the
//! metrics `parley_mcp_server_up{server}` (1 ready, 0 otherwise) and
//! `parley_mcp_server_connects_total{server,outcome}` (`ready`, `failed`)
//! show the same to Prometheus, labelled only by configured names. The
//! runner's gRPC health stays `SERVING` while a server is down: turns
//! still run, and only that server's tools fail. Calls are counted by
//! `parley_tool_call_duration_seconds{gen_ai_tool_name="SERVER__TOOL"}`.
//!
//! **Calls** ([`call`]). While a server is down its tools fail at once
//! with `UNAVAILABLE` and a message saying so; the turn goes on and the
//! model reads the error. A call carries a progress token (its
//! `notifications/progress` become `tool_progress` events; see [`progress`]
//! for notifications that arrive before or after their call) and the W3C
//! trace context in `_meta`; dropping it (the tool's time-out, a cancelled
//! turn) sends `notifications/cancelled`. Results: `structuredContent` is
//! the tool's JSON result, text blocks its text, `isError` a tool error the
//! model sees; images, audio and resources stay typed in the tool's payload
//! (`mcp_content`) for the UI, and images and image or PDF resources also
//! go to the model as files of the result (`ToolOutput::attachments`), to
//! the models that take them.
//!
//! **Names.** The model calls an MCP tool `SERVER__TOOL` (characters other
//! than letters, digits, `_` and `-` become `_`); requests name it by its
//! endpoint `SERVER/TOOL`. A tool whose model name would be longer than 64
//! characters, or equal to a built-in's or to another tool's, is left out
//! with a warning: nothing a server offers can shadow another tool.

pub mod call;
pub mod config;
pub mod progress;
pub mod server;
mod state;
mod stdio;

use std::{collections::BTreeMap, path::Path, sync::Arc};

use parley_proto::runner::v1 as pb;
use tokio_util::sync::CancellationToken;

pub use config::McpServerConfig;
pub use server::{McpServer, McpTool, ServerState};

/// Looks up the runner's environment variables (API keys, `env`, `headers`).
pub type Lookup = Arc<dyn Fn(&str) -> Option<String> + Send + Sync>;

/// The configured MCP servers, by name.
#[derive(Debug, Default)]
pub struct McpServers {
    servers: BTreeMap<String, Arc<McpServer>>,
    shutdown: CancellationToken,
}

impl McpServers {
    /// Starts one supervisor per server (needs a Tokio runtime). Built-in
    /// tool names are reserved: no server tool may take them.
    pub fn start(
        configs: &BTreeMap<String, McpServerConfig>,
        base_dir: &Path,
        lookup: Lookup,
        reserved: Vec<String>,
        client_tls: &parley_grpc::tls::ClientTlsConfig,
    ) -> Self {
        let shutdown = CancellationToken::new();
        let reserved = Arc::new(reserved);
        let servers = configs
            .iter()
            .map(|(name, config)| {
                let config = McpServerConfig {
                    client_tls: client_tls.clone(),
                    ..config.clone()
                };
                let server = McpServer::new(
                    name.clone(),
                    config,
                    base_dir.to_path_buf(),
                    lookup.clone(),
                    reserved.clone(),
                );
                tokio::spawn(server.clone().supervise(shutdown.child_token()));
                (name.clone(), server)
            })
            .collect::<BTreeMap<_, _>>();
        if !servers.is_empty() {
            tracing::info!(servers = ?servers.keys().collect::<Vec<_>>(), "starting MCP servers");
        }
        Self { servers, shutdown }
    }

    /// Servers built elsewhere, without supervisors (tests).
    #[cfg(test)]
    pub(crate) fn from_servers(servers: impl IntoIterator<Item = Arc<McpServer>>) -> Self {
        Self {
            servers: servers
                .into_iter()
                .map(|server| (server.name().to_owned(), server))
                .collect(),
            shutdown: CancellationToken::new(),
        }
    }

    /// The server named `name`.
    pub fn get(&self, name: &str) -> Option<&Arc<McpServer>> {
        self.servers.get(name)
    }

    /// Every server, by name.
    pub fn iter(&self) -> impl Iterator<Item = &Arc<McpServer>> {
        self.servers.values()
    }

    /// The `ListTools` answer: every tool with a model name, and every
    /// server's state. Model names taken by an earlier server (by name
    /// order) leave the later server's tool out.
    pub fn list(&self) -> pb::ListToolsResponse {
        let mut tools: Vec<pb::ToolDefinition> = Vec::new();
        let mut servers = Vec::new();
        for server in self.servers.values() {
            let snapshot = server.snapshot();
            for tool in snapshot.tools.values() {
                if tools.iter().any(|t| t.name == tool.model_name) {
                    tracing::warn!(server = %server.name(), tool = %tool.name, model_name = %tool.model_name, "an MCP tool's name is taken by another server's tool; left out");
                    continue;
                }
                tools.push(tool.definition(server.name()));
            }
            servers.push(pb::McpServerStatus {
                name: server.name().to_owned(),
                transport: server.config().transport().as_str().to_owned(),
                state: snapshot.state.proto() as i32,
                error: snapshot.error.clone(),
                tools: u32::try_from(snapshot.tools.len()).unwrap_or(u32::MAX),
                connects: snapshot.connects,
            });
        }
        pb::ListToolsResponse { tools, servers }
    }
}

impl Drop for McpServers {
    fn drop(&mut self) {
        // Stops the supervisors; their child processes are killed with them.
        self.shutdown.cancel();
    }
}

/// The model's name of `tool` on `server`: `SERVER__TOOL`, with characters
/// other than letters, digits, `_` and `-` as `_`.
pub fn model_name(server: &str, tool: &str) -> String {
    let tool: String = tool
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("{server}__{tool}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn model_names_are_namespaced_and_sanitised() {
        assert_eq!(
            model_name("time", "get_current_time"),
            "time__get_current_time"
        );
        assert_eq!(model_name("fs", "read.file/v2"), "fs__read_file_v2");
    }
}
