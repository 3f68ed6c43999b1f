//! What one MCP server is now: its state, the tools it offers (schemas
//! compiled) and the connection's shared parts, published whole on every
//! change.

use std::{
    collections::BTreeMap,
    sync::{Arc, atomic::AtomicBool},
};

use jsonschema::Validator;
use parley_proto::runner::v1 as pb;
use rmcp::service::{Peer, RoleClient};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::progress::ProgressRoutes;

/// Where a server is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerState {
    /// Starting or connecting, handshake and tool list in progress.
    Connecting,
    /// Initialised; its tools can be called.
    Ready,
    /// Down; the next attempt is scheduled.
    Down,
}

impl ServerState {
    /// `1` when ready, for `parley_mcp_server_up`.
    pub(super) fn up(self) -> i64 {
        i64::from(self == Self::Ready)
    }

    /// The wire enum.
    pub fn proto(self) -> pb::McpServerState {
        match self {
            Self::Connecting => pb::McpServerState::Connecting,
            Self::Ready => pb::McpServerState::Ready,
            Self::Down => pb::McpServerState::Down,
        }
    }
}

/// One tool of a server, with its input schema compiled.
#[derive(Debug)]
pub struct McpTool {
    /// The server's name for it.
    pub name: String,
    /// The model's name for it (`SERVER__TOOL`).
    pub model_name: String,
    /// The server's description.
    pub description: String,
    /// The server's `inputSchema`.
    pub input_schema: Value,
    /// `input_schema`, compiled.
    pub validator: Arc<Validator>,
}

impl McpTool {
    /// As a tool definition for `RunRequest.tools` (endpoint `mcp`).
    pub fn definition(&self, server: &str) -> pb::ToolDefinition {
        pb::ToolDefinition {
            name: self.model_name.clone(),
            description: self.description.clone(),
            input_schema: self
                .input_schema
                .as_object()
                .map(parley_proto::json::to_struct),
            endpoint: Some(pb::ToolEndpoint {
                kind: Some(pb::tool_endpoint::Kind::Mcp(format!(
                    "{server}/{}",
                    self.name
                ))),
            }),
            timeout: None,
            needs_approval: false,
        }
    }
}

/// What the server is now; replaced whole on every change.
#[derive(Debug, Clone)]
pub struct Snapshot {
    /// The state.
    pub state: ServerState,
    /// The connection, while ready.
    pub peer: Option<Peer<RoleClient>>,
    /// The tools last listed, by the server's names.
    pub tools: Arc<BTreeMap<String, Arc<McpTool>>>,
    /// Why it is down (or why the last attempt failed).
    pub error: String,
    /// How many times it was started or connected.
    pub connects: u32,
    /// Cancelled by a call that found this connection broken.
    pub(crate) broken: CancellationToken,
    /// The progress routes of this connection's running calls.
    pub(crate) progress: Arc<ProgressRoutes>,
    /// Set when this connection was closed because the server sent a
    /// message over [`McpServer::max_message`](super::McpServer::max_message).
    pub(crate) oversized: Arc<AtomicBool>,
}
