//! One MCP server: its supervisor (start or connect, handshake, tool list,
//! restart with backoff), its published state, and the client handler that
//! receives its notifications.

use std::{
    collections::BTreeMap,
    path::PathBuf,
    pin::Pin,
    process::Stdio,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    task::{Context, Poll, ready},
    time::Duration,
};

use jsonschema::Validator;
use parley_proto::runner::v1 as pb;
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
    io::{AsyncRead, AsyncReadExt, ReadBuf},
    process::{Child, Command},
    sync::{Notify, watch},
    time::Instant,
};
use tokio_util::sync::CancellationToken;

use super::{Lookup, config::McpServerConfig, model_name, progress::ProgressRoutes};
use crate::tools::MAX_TOOL_NAME_LEN;

/// The variables a child process gets from the runner besides its `env`.
pub const PASSED_VARIABLES: [&str; 6] = ["PATH", "HOME", "LANG", "LC_ALL", "TZ", "TMPDIR"];
/// Room for the JSON-RPC envelope around a result of `max_output_bytes`.
const ENVELOPE_BYTES: usize = 64 * 1024;
/// The longest stderr line of a child that is logged.
const MAX_STDERR_LINE: usize = 2048;

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
    fn up(self) -> i64 {
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
    /// message over [`McpServer::max_message`].
    pub(crate) oversized: Arc<AtomicBool>,
}

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
            let stdout = LineLimit {
                inner: stdout,
                max: max_message,
                line: 0,
                oversized: oversized.clone(),
            };
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

/// A stdio server's output that fails once a line (one JSON-RPC message)
/// grows past `max` bytes: the connection closes, its calls fail at once,
/// and the server is started again.
struct LineLimit<R> {
    inner: R,
    max: usize,
    line: usize,
    oversized: Arc<AtomicBool>,
}

impl<R: AsyncRead + Unpin> AsyncRead for LineLimit<R> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        ready!(Pin::new(&mut this.inner).poll_read(cx, buf))?;
        for &byte in &buf.filled()[before..] {
            if byte == b'\n' {
                this.line = 0;
            } else {
                this.line += 1;
                if this.line > this.max {
                    this.oversized.store(true, Ordering::Relaxed);
                    return Poll::Ready(Err(std::io::Error::other(format!(
                        "a message longer than {} bytes",
                        this.max
                    ))));
                }
            }
        }
        Poll::Ready(Ok(()))
    }
}

/// Logs a child's stderr line by line without holding more than
/// `MAX_STDERR_LINE` bytes of a line: it reads bounded chunks, logs a line's
/// first bytes (invalid UTF-8 replaced) and drops the rest, and keeps
/// draining until the pipe closes, so a server writing without newlines or
/// writing bytes that are not UTF-8 neither grows the runner nor dies on a
/// broken pipe.
async fn log_stderr<R: AsyncRead + Unpin>(server: String, mut stderr: R) {
    let mut chunk = vec![0_u8; 8192];
    let mut line = StderrLine::default();
    loop {
        let read = match stderr.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(read) => read,
        };
        line.push(&chunk[..read], |text, dropped| {
            if dropped > 0 {
                tracing::info!(server = %server, line = %text, dropped, "MCP server stderr (truncated)");
            } else {
                tracing::info!(server = %server, line = %text, "MCP server stderr");
            }
        });
    }
    line.finish(|text, dropped| {
        tracing::info!(server = %server, line = %text, dropped, "MCP server stderr");
    });
}

/// The line of stderr being read: its first `MAX_STDERR_LINE` bytes and how
/// many more were dropped.
#[derive(Default)]
struct StderrLine {
    kept: Vec<u8>,
    dropped: u64,
}

impl StderrLine {
    /// Adds `bytes`, calling `emit(text, dropped)` for every line they end.
    fn push(&mut self, mut bytes: &[u8], mut emit: impl FnMut(&str, u64)) {
        while !bytes.is_empty() {
            let (part, ended) = match memchr::memchr(b'\n', bytes) {
                Some(at) => (&bytes[..at], Some(at + 1)),
                None => (bytes, None),
            };
            let room = MAX_STDERR_LINE.saturating_sub(self.kept.len());
            let take = room.min(part.len());
            self.kept.extend_from_slice(&part[..take]);
            self.dropped += (part.len() - take) as u64;
            match ended {
                Some(next) => {
                    self.emit(&mut emit);
                    bytes = &bytes[next..];
                }
                None => break,
            }
        }
    }

    /// Emits a last line that no newline ended.
    fn finish(&mut self, mut emit: impl FnMut(&str, u64)) {
        if !self.kept.is_empty() || self.dropped > 0 {
            self.emit(&mut emit);
        }
    }

    fn emit(&mut self, emit: &mut impl FnMut(&str, u64)) {
        let text = String::from_utf8_lossy(&self.kept);
        emit(text.trim_end_matches('\r'), self.dropped);
        self.kept.clear();
        self.dropped = 0;
    }
}

/// A stdio server's process, leader of its own process group: ending it
/// ends the whole group (grandchildren such as those `npx` or `uvx` start
/// included), whether the connection ended by cancel, time-out, shutdown
/// or a crash, and whenever the value is dropped.
pub(crate) struct GroupChild(Child, Option<rustix::process::Pid>);

impl GroupChild {
    fn new(child: Child) -> Self {
        let group = child
            .id()
            .and_then(|pid| i32::try_from(pid).ok())
            .and_then(rustix::process::Pid::from_raw);
        Self(child, group)
    }

    /// Sends SIGKILL to every process of the group, also after the leader
    /// has exited (its grandchildren keep the group, and so its id, alive);
    /// the leader's status is still there for `wait`.
    fn kill_group(&mut self) {
        let Some(group) = self.1 else {
            let _ = self.0.start_kill();
            return;
        };
        if rustix::process::kill_process_group(group, rustix::process::Signal::KILL).is_err() {
            // No group left (every member gone); the leader itself still
            // goes with `kill_on_drop`.
            let _ = self.0.start_kill();
        }
    }
}

impl std::ops::Deref for GroupChild {
    type Target = Child;
    fn deref(&self) -> &Child {
        &self.0
    }
}

impl std::ops::DerefMut for GroupChild {
    fn deref_mut(&mut self) -> &mut Child {
        &mut self.0
    }
}

impl Drop for GroupChild {
    fn drop(&mut self) {
        self.kill_group();
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
mod tests {
    use super::*;

    fn server(name: &str, reserved: &[&str]) -> Arc<McpServer> {
        McpServer::new(
            name.to_owned(),
            McpServerConfig::stdio(vec!["unused".into()]),
            PathBuf::new(),
            Arc::new(|_: &str| None),
            Arc::new(reserved.iter().map(|r| (*r).to_owned()).collect()),
        )
    }

    fn tool(name: &str) -> rmcp::model::Tool {
        serde_json::from_value(serde_json::json!({
            "name": name,
            "description": format!("the tool {name}"),
            "inputSchema": {"type": "object"},
        }))
        .expect("a tool")
    }

    #[test]
    fn a_server_tool_cannot_take_a_reserved_or_repeated_name() {
        // `s__clock` stands for a built-in's name; `a.b` and `a/b` both
        // become `s__a_b`: the first one listed keeps it.
        let s = server("s", &["s__clock"]);
        let admitted = s.admit(vec![
            tool("clock"),
            tool("a.b"),
            tool("a/b"),
            tool("ok"),
            tool(&"x".repeat(70)),
        ]);
        assert_eq!(
            admitted.keys().map(String::as_str).collect::<Vec<_>>(),
            ["a.b", "ok"]
        );
        assert_eq!(admitted["a.b"].model_name, "s__a_b");
    }

    #[test]
    fn max_tools_bounds_the_list() {
        let mut config = McpServerConfig::stdio(vec!["unused".into()]);
        config.max_tools = 2;
        let s = McpServer::new(
            "s".into(),
            config,
            PathBuf::new(),
            Arc::new(|_: &str| None),
            Arc::default(),
        );
        let admitted = s.admit(vec![tool("a"), tool("b"), tool("c")]);
        assert_eq!(admitted.len(), 2);
    }

    #[test]
    fn two_servers_cannot_offer_the_same_model_name() {
        // `a` + `_b` and `a_` + `b` are both `a___b`.
        let first = server("a", &[]);
        let second = server("a_", &[]);
        for (s, name) in [(&first, "_b"), (&second, "b")] {
            let tools = Arc::new(s.admit(vec![tool(name)]));
            s.publish(|snapshot| {
                snapshot.state = ServerState::Ready;
                snapshot.tools = tools;
            });
        }
        let servers = super::super::McpServers::from_servers([first, second]);
        let listed = servers.list();
        let names: Vec<(&str, Option<&pb::tool_endpoint::Kind>)> = listed
            .tools
            .iter()
            .map(|t| {
                (
                    t.name.as_str(),
                    t.endpoint.as_ref().and_then(|e| e.kind.as_ref()),
                )
            })
            .collect();
        assert_eq!(
            names,
            [("a___b", Some(&pb::tool_endpoint::Kind::Mcp("a/_b".into())))]
        );
        // Both servers are listed, each with the tool it offers.
        assert_eq!(listed.servers.len(), 2);
    }

    #[test]
    fn the_up_gauge_follows_the_state() {
        let s = server("gauge-test", &[]);
        let up = || {
            parley_grpc::telemetry::metrics()
                .mcp_server_up
                .with_label_values(&["gauge-test"])
                .get()
        };
        assert_eq!(up(), 0);
        s.publish(|snapshot| snapshot.state = ServerState::Ready);
        assert_eq!(up(), 1);
        s.publish(|snapshot| snapshot.state = ServerState::Down);
        assert_eq!(up(), 0);
    }

    #[test]
    fn a_stderr_line_keeps_its_first_bytes_and_replaces_invalid_utf8() {
        let mut line = StderrLine::default();
        let mut seen = Vec::new();
        let long = vec![b'a'; MAX_STDERR_LINE + 10];
        line.push(&long, |t, d| seen.push((t.to_owned(), d)));
        line.push(b"\nbad \xff\r\nta", |t, d| seen.push((t.to_owned(), d)));
        line.finish(|t, d| seen.push((t.to_owned(), d)));
        assert_eq!(seen.len(), 3);
        assert_eq!(seen[0].0.len(), MAX_STDERR_LINE);
        assert_eq!(seen[0].1, 10);
        assert_eq!(seen[1], ("bad \u{fffd}".to_owned(), 0));
        assert_eq!(seen[2], ("ta".to_owned(), 0));
    }
}
