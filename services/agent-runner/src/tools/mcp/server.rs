//! One MCP server: its supervisor (start or connect, handshake, tool list,
//! restart with backoff), its published state, and the client handler that
//! receives its notifications.

use std::{
    collections::BTreeMap,
    path::PathBuf,
    process::Stdio,
    sync::{Arc, atomic::AtomicBool},
    time::Duration,
};

use rmcp::{
    ClientHandler, ServiceExt,
    model::{
        ClientCapabilities, ClientConfig, Implementation, ProgressNotificationParam,
        ProtocolVersion,
    },
    service::{NotificationContext, Peer, RoleClient, RunningService},
    transport::{
        StreamableHttpClientTransport, async_rw::AsyncRwTransport,
        streamable_http_client::StreamableHttpClientTransportConfig,
    },
};
use serde_json::Value;
use tokio::{
    process::{Child, Command},
    sync::{Notify, watch},
    time::Instant,
};
use tokio_util::sync::CancellationToken;

pub use super::state::{McpTool, ServerState, Snapshot};
use super::{
    Lookup,
    config::McpServerConfig,
    model_name,
    progress::ProgressRoutes,
    stdio::{GroupChild, LineLimit, log_stderr},
};
use crate::tools::MAX_TOOL_NAME_LEN;

/// The variables a child process gets from the runner besides its `env`.
pub const PASSED_VARIABLES: [&str; 6] = ["PATH", "HOME", "LANG", "LC_ALL", "TZ", "TMPDIR"];
/// Room for the JSON-RPC envelope around a result of `max_output_bytes`.
const ENVELOPE_BYTES: usize = 64 * 1024;

/// A configured server and its supervisor's state.
#[derive(Debug)]
pub struct McpServer {
    name: String,
    config: McpServerConfig,
    base_dir: PathBuf,
    lookup: LookupDebug,
    reserved: Arc<Vec<String>>,
    state: watch::Sender<Arc<Snapshot>>,
    /// Wakes the supervisor to read the tool list again.
    relist: Arc<Notify>,
}

struct LookupDebug(Lookup);

impl std::fmt::Debug for LookupDebug {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Lookup")
    }
}

/// Why an attempt to start or connect failed.
#[derive(Debug, thiserror::Error)]
enum ConnectError {
    #[error("environment variable `{0}` is not set")]
    MissingVariable(String),
    #[error("cannot start `{program}`: {source}")]
    Spawn {
        program: String,
        #[source]
        source: std::io::Error,
    },
    #[error("invalid header `{0}`")]
    Header(String),
    #[error("cannot build the HTTP client: {0}")]
    Client(String),
    #[error("the handshake failed: {0}")]
    Handshake(String),
    #[error("tools/list failed: {0}")]
    List(String),
    #[error("no answer within {0:?} (start-up, handshake and tool list)")]
    Timeout(Duration),
}

/// A live connection.
struct Connection {
    running: RunningService<RoleClient, Handler>,
    child: Option<GroupChild>,
    progress: Arc<ProgressRoutes>,
    oversized: Arc<AtomicBool>,
}

impl McpServer {
    /// A server not started yet.
    pub fn new(
        name: String,
        config: McpServerConfig,
        base_dir: PathBuf,
        lookup: Lookup,
        reserved: Arc<Vec<String>>,
    ) -> Arc<Self> {
        let (state, _) = watch::channel(Arc::new(Snapshot {
            state: ServerState::Connecting,
            peer: None,
            tools: Arc::default(),
            error: String::new(),
            connects: 0,
            broken: CancellationToken::new(),
            progress: Arc::default(),
            oversized: Arc::default(),
        }));
        parley_grpc::telemetry::metrics()
            .mcp_server_up
            .with_label_values(&[name.as_str()])
            .set(0);
        Arc::new(Self {
            name,
            config,
            base_dir,
            lookup: LookupDebug(lookup),
            reserved,
            state,
            relist: Arc::new(Notify::new()),
        })
    }

    /// Its name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its configuration.
    pub fn config(&self) -> &McpServerConfig {
        &self.config
    }

    /// The largest message read from it: `max_output_bytes` and room for
    /// the JSON-RPC envelope.
    pub fn max_message(&self) -> usize {
        self.config.max_output_bytes.saturating_add(ENVELOPE_BYTES)
    }

    /// Its state now.
    pub fn snapshot(&self) -> Arc<Snapshot> {
        self.state.borrow().clone()
    }

    /// Follows its state.
    pub fn watch(&self) -> watch::Receiver<Arc<Snapshot>> {
        self.state.subscribe()
    }

    fn publish(&self, change: impl FnOnce(&mut Snapshot)) {
        self.state.send_modify(|snapshot| {
            let mut next = Snapshot::clone(snapshot);
            change(&mut next);
            parley_grpc::telemetry::metrics()
                .mcp_server_up
                .with_label_values(&[self.name.as_str()])
                .set(next.state.up());
            *snapshot = Arc::new(next);
        });
    }

    fn count_connect(&self, outcome: &str) {
        parley_grpc::telemetry::metrics()
            .mcp_server_connects
            .with_label_values(&[self.name.as_str(), outcome])
            .inc();
    }

    /// Runs until `shutdown`: connects, serves, reconnects with backoff.
    pub async fn supervise(self: Arc<Self>, shutdown: CancellationToken) {
        let mut backoff = self.config.restart_backoff;
        loop {
            self.publish(|s| {
                s.state = ServerState::Connecting;
                s.peer = None;
                s.connects = s.connects.saturating_add(1);
            });
            let attempt = tokio::select! {
                () = shutdown.cancelled() => return,
                attempt = tokio::time::timeout(self.config.startup_timeout, self.connect()) => attempt,
            };
            let error = match attempt {
                Err(_) => {
                    self.count_connect("failed");
                    ConnectError::Timeout(self.config.startup_timeout).to_string()
                }
                Ok(Err(error)) => {
                    self.count_connect("failed");
                    error.to_string()
                }
                Ok(Ok((connection, tools))) => {
                    self.count_connect("ready");
                    let up_since = Instant::now();
                    let peer = connection.running.peer().clone();
                    let progress = connection.progress.clone();
                    let oversized = connection.oversized.clone();
                    let broken = CancellationToken::new();
                    tracing::info!(server = %self.name, tools = tools.len(), "MCP server ready");
                    self.publish(|s| {
                        s.state = ServerState::Ready;
                        s.peer = Some(peer);
                        s.tools = Arc::new(tools);
                        s.error.clear();
                        s.broken = broken.clone();
                        s.progress = progress;
                        s.oversized = oversized;
                    });
                    let ended = self.serve(connection, &broken, &shutdown).await;
                    if shutdown.is_cancelled() {
                        return;
                    }
                    if up_since.elapsed() >= self.config.max_restart_backoff {
                        backoff = self.config.restart_backoff;
                    }
                    ended
                }
            };
            tracing::warn!(server = %self.name, %error, retry_in = ?backoff, "MCP server down");
            self.publish(|s| {
                s.state = ServerState::Down;
                s.peer = None;
                s.error = error;
            });
            tokio::select! {
                () = shutdown.cancelled() => return,
                () = tokio::time::sleep(backoff) => {}
            }
            backoff = (backoff * 2).min(self.config.max_restart_backoff);
        }
    }

    /// Serves one connection until it ends; returns why.
    async fn serve(
        &self,
        connection: Connection,
        broken: &CancellationToken,
        shutdown: &CancellationToken,
    ) -> String {
        let Connection {
            running, mut child, ..
        } = connection;
        let peer = running.peer().clone();
        let cancel = running.cancellation_token();
        let mut ended = std::pin::pin!(running.waiting());
        let reason = loop {
            tokio::select! {
                () = shutdown.cancelled() => {
                    cancel.cancel();
                    break "the runner is stopping".to_owned();
                }
                quit = &mut ended => break format!("the connection ended ({quit:?})"),
                () = broken.cancelled() => {
                    cancel.cancel();
                    break "a call found the connection broken".to_owned();
                }
                () = self.relist.notified() => {
                    match tokio::time::timeout(self.config.startup_timeout, self.list_tools(&peer)).await {
                        Ok(Ok(tools)) => {
                            tracing::info!(server = %self.name, tools = tools.len(), "MCP tool list changed");
                            self.publish(|s| s.tools = Arc::new(tools));
                        }
                        Ok(Err(error)) => tracing::warn!(server = %self.name, %error, "MCP tool list not read again"),
                        Err(_) => tracing::warn!(server = %self.name, "MCP tool list not read again in time"),
                    }
                }
            }
        };
        // Whatever ended the connection, the process goes with it.
        if let Some(child) = child.as_mut() {
            let exited = child.try_wait();
            // The group goes whether or not its leader is still there.
            child.kill_group();
            let status = match exited {
                Ok(Some(status)) => Some(status),
                _ => child.wait().await.ok(),
            };
            if let Some(status) = status.filter(|_| !shutdown.is_cancelled()) {
                return format!("the process exited ({status})");
            }
        }
        reason
    }

    async fn connect(&self) -> Result<(Connection, BTreeMap<String, Arc<McpTool>>), ConnectError> {
        // Routes of this connection only: a late notification of an
        // earlier process cannot reach a call on this one.
        let progress = Arc::new(ProgressRoutes::default());
        let handler = Handler {
            server: self.name.clone(),
            progress: progress.clone(),
            relist: self.relist.clone(),
        };
        let max_message = self.max_message();
        let oversized = Arc::new(AtomicBool::new(false));
        let handshake =
            |e: rmcp::service::ClientInitializeError| ConnectError::Handshake(e.to_string());
        let connection = if let Some(url) = &self.config.url {
            let mut headers = reqwest::header::HeaderMap::new();
            let mut insert = |header: &String, value: &str| {
                let name = reqwest::header::HeaderName::from_bytes(header.as_bytes())
                    .map_err(|_| ConnectError::Header(header.clone()))?;
                let mut value = reqwest::header::HeaderValue::from_str(value)
                    .map_err(|_| ConnectError::Header(header.clone()))?;
                value.set_sensitive(true);
                headers.insert(name, value);
                Ok::<_, ConnectError>(())
            };
            for (header, variable) in &self.config.headers {
                insert(header, &self.variable(variable)?)?;
            }
            // The files' values as last read (SIGHUP reads them again).
            for (header, secret) in &self.config.header_secrets {
                secret.with_exposed(|value| insert(header, value))?;
            }
            let _ = rustls::crypto::ring::default_provider().install_default();
            let builder = reqwest::Client::builder()
                .connect_timeout(self.config.startup_timeout)
                .tcp_nodelay(true)
                .user_agent(concat!("parley-agent-runner/", env!("CARGO_PKG_VERSION")))
                .default_headers(headers);
            let client = with_client_tls(builder, &self.config.client_tls)?
                .build()
                .map_err(|e| ConnectError::Client(e.to_string()))?;
            let mut config = StreamableHttpClientTransportConfig::with_uri(url.clone());
            config.max_json_response_size = max_message;
            config.max_sse_event_size = max_message;
            let transport = StreamableHttpClientTransport::with_client(client, config);
            Connection {
                running: handler.serve(transport).await.map_err(handshake)?,
                child: None,
                progress,
                oversized,
            }
        } else {
            let mut child = GroupChild::new(self.spawn()?);
            let (Some(stdout), Some(stdin)) = (child.stdout.take(), child.stdin.take()) else {
                return Err(ConnectError::Spawn {
                    program: self.program().to_owned(),
                    source: std::io::Error::other("no stdio pipes"),
                });
            };
            if let Some(stderr) = child.stderr.take() {
                tokio::spawn(log_stderr(self.name.clone(), stderr));
            }
            // The SDK skips a line over its limit and carries on, leaving
            // the call it answered waiting for the tool's time-out; ending
            // the stream instead fails every call on it at once.
            let stdout = LineLimit::new(stdout, max_message, oversized.clone());
            let transport =
                AsyncRwTransport::new_client(stdout, stdin).with_max_line_length(max_message);
            Connection {
                running: handler.serve(transport).await.map_err(handshake)?,
                child: Some(child),
                progress,
                oversized,
            }
        };
        let tools = self
            .list_tools(connection.running.peer())
            .await
            .map_err(ConnectError::List)?;
        Ok((connection, tools))
    }

    fn program(&self) -> &str {
        self.config
            .command
            .as_ref()
            .and_then(|c| c.first())
            .map_or("", String::as_str)
    }

    fn variable(&self, name: &str) -> Result<String, ConnectError> {
        (self.lookup.0)(name).ok_or_else(|| ConnectError::MissingVariable(name.to_owned()))
    }

    /// The child process: the program and its arguments as given (no
    /// shell), only the passed variables and `env`, in a process group of
    /// its own, killed when dropped.
    fn spawn(&self) -> Result<Child, ConnectError> {
        let command = self.config.command.as_deref().unwrap_or_default();
        let Some((program, args)) = command.split_first() else {
            return Err(ConnectError::Spawn {
                program: String::new(),
                source: std::io::Error::other("no program"),
            });
        };
        let mut cmd = Command::new(program);
        cmd.args(args)
            .env_clear()
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        for name in PASSED_VARIABLES {
            if let Some(value) = (self.lookup.0)(name) {
                cmd.env(name, value);
            }
        }
        for (name, variable) in &self.config.env {
            cmd.env(name, self.variable(variable)?);
        }
        if let Some(cwd) = &self.config.cwd {
            cmd.current_dir(if cwd.is_relative() {
                self.base_dir.join(cwd)
            } else {
                cwd.clone()
            });
        }
        cmd.spawn().map_err(|source| ConnectError::Spawn {
            program: program.clone(),
            source,
        })
    }

    /// Reads every page of `tools/list` and compiles the schemas; tools
    /// that cannot be offered are left out with a warning.
    async fn list_tools(
        &self,
        peer: &Peer<RoleClient>,
    ) -> Result<BTreeMap<String, Arc<McpTool>>, String> {
        let listed = peer.list_all_tools().await.map_err(|e| e.to_string())?;
        Ok(self.admit(listed))
    }

    /// The tools of `listed` that can be offered: at most `max_tools`, each
    /// with a model name of at most 64 characters that no built-in and no
    /// other tool of this server has, and a schema that compiles.
    fn admit(&self, listed: Vec<rmcp::model::Tool>) -> BTreeMap<String, Arc<McpTool>> {
        let mut tools = BTreeMap::new();
        let mut model_names: Vec<String> = Vec::new();
        for tool in listed {
            if tools.len() >= self.config.max_tools {
                tracing::warn!(server = %self.name, max_tools = self.config.max_tools, "the server offers more tools than max_tools; the rest are left out");
                break;
            }
            let name = tool.name.to_string();
            let model_name = model_name(&self.name, &name);
            let skip = |why: &str| tracing::warn!(server = %self.name, tool = %name, why, "MCP tool left out");
            if model_name.len() > MAX_TOOL_NAME_LEN {
                skip("its model name is longer than 64 characters");
                continue;
            }
            if self.reserved.contains(&model_name) || model_names.contains(&model_name) {
                skip("its model name is taken by another tool");
                continue;
            }
            let input_schema = Value::Object((*tool.input_schema).clone());
            let validator = match jsonschema::validator_for(&input_schema) {
                Ok(validator) => Arc::new(validator),
                Err(error) => {
                    skip(&format!("its input schema does not compile: {error}"));
                    continue;
                }
            };
            model_names.push(model_name.clone());
            tools.insert(
                name.clone(),
                Arc::new(McpTool {
                    name,
                    model_name,
                    description: tool.description.as_deref().unwrap_or_default().to_owned(),
                    input_schema,
                    validator,
                }),
            );
        }
        tools
    }
}

/// Receives one connection's notifications.
#[derive(Debug, Clone)]
pub(crate) struct Handler {
    server: String,
    progress: Arc<ProgressRoutes>,
    relist: Arc<Notify>,
}

impl ClientHandler for Handler {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("parley-agent-runner", env!("CARGO_PKG_VERSION")),
        )
        .with_protocol_version(ProtocolVersion::LATEST_WITH_INITIALIZE)
    }

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        // Kept for its call when that call has not registered yet.
        if let Some((sender, progress)) = self.progress.route(params) {
            progress.report(&sender).await;
        }
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        tracing::debug!(server = %self.server, "notifications/tools/list_changed");
        self.relist.notify_one();
    }
}

/// `builder` verifying servers against `[client_tls] ca` only (the system's
/// roots without one) and showing its client certificate, when set.
fn with_client_tls(
    mut builder: reqwest::ClientBuilder,
    tls: &parley_grpc::tls::ClientTlsConfig,
) -> Result<reqwest::ClientBuilder, ConnectError> {
    let read = |key: &str, path: &std::path::Path| {
        std::fs::read(path)
            .map_err(|e| ConnectError::Client(format!("{key} `{}`: {e}", path.display())))
    };
    if let Some(ca) = &tls.ca {
        let certs = reqwest::Certificate::from_pem_bundle(&read("client_tls.ca", ca)?)
            .map_err(|e| ConnectError::Client(format!("client_tls.ca: {e}")))?;
        builder = builder.tls_certs_only(certs);
    }
    match (&tls.cert, &tls.key) {
        (Some(cert), Some(key)) => {
            let mut pem = read("client_tls.cert", cert)?;
            pem.extend_from_slice(b"\n");
            pem.extend(read("client_tls.key", key)?);
            let identity = reqwest::Identity::from_pem(&pem)
                .map_err(|e| ConnectError::Client(format!("client_tls.cert / key: {e}")))?;
            builder = builder.identity(identity);
        }
        (None, None) => {}
        _ => {
            return Err(ConnectError::Client(
                "client_tls.cert and client_tls.key go together".into(),
            ));
        }
    }
    Ok(builder)
}

#[cfg(test)]
mod tests;
