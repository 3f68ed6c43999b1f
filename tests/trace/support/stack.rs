//! The three real binaries as child processes, each on a port it bound
//! itself (`--listen 127.0.0.1:0`, the address read back from its log):
//! ports picked ahead and released could be taken meanwhile by another
//! test's process, whose health check would then answer for this one.
//!
//! The binaries come from the target directory this test was built into
//! (`cargo test --workspace` builds them); this crate never runs cargo
//! itself (a test that does deadlocks on the build lock). When one is
//! missing the test fails and says to run `cargo build --bins`.

use std::{
    net::TcpListener,
    path::{Path, PathBuf},
    process::Stdio,
    time::{Duration, Instant},
};

use std::process::{Child, Command};
use tonic_health::pb::{HealthCheckRequest, health_client::HealthClient};

/// The repository root.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .canonicalize()
        .expect("repository root")
}

/// The directory holding this build's binaries (`target/debug`): the test
/// executable lives in its `deps/`.
fn bin_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    let deps = exe.parent().expect("deps directory");
    deps.parent().expect("profile directory").to_path_buf()
}

/// The path of binary `name`; panics with the fix when it is missing.
pub fn binary(name: &str) -> PathBuf {
    let path = bin_dir().join(name);
    assert!(
        path.is_file(),
        "{} is missing: build the services first with `cargo build --bins` \
         (cargo test --workspace builds them too)",
        path.display()
    );
    path
}

/// A free port on 127.0.0.1 (bound, read, released).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|addr| addr.port())
        .expect("a free port")
}

/// Where the stack sends spans, if anywhere.
#[derive(Debug, Clone)]
pub struct Tracing {
    /// `OTEL_EXPORTER_OTLP_ENDPOINT`; `None` leaves tracing off.
    pub endpoint: Option<String>,
    /// `OTEL_BSP_SCHEDULE_DELAY` in milliseconds.
    pub schedule_delay_ms: u64,
}

/// The running stack.
#[derive(Debug)]
pub struct Stack {
    /// The gateway's URL.
    pub gateway: String,
    children: Vec<(&'static str, Child)>,
    _state: tempfile::TempDir,
}

fn command(name: &str, tracing: &Tracing, log: &Path) -> Command {
    let mut command = Command::new(binary(name));
    for (key, _) in std::env::vars() {
        if key.starts_with("OTEL_") || key.starts_with("PARLEY_") {
            command.env_remove(key);
        }
    }
    command
        .env("RUST_LOG", "info")
        .arg("--metrics-listen")
        .arg("127.0.0.1:0")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(log).expect("log file"));
    if let Some(endpoint) = &tracing.endpoint {
        command.env("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint).env(
            "OTEL_BSP_SCHEDULE_DELAY",
            tracing.schedule_delay_ms.to_string(),
        );
    }
    command
}

/// The URL the service logging to `log` listens on, from its `listening`
/// line (JSON logs), once it has bound.
async fn bound_url(name: &str, log: &Path) -> String {
    let started = Instant::now();
    loop {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        let addr = text.lines().find_map(|line| {
            let entry: serde_json::Value = serde_json::from_str(line).ok()?;
            (entry.get("message")?.as_str()? == "listening")
                .then(|| entry.get("addr")?.as_str().map(str::to_owned))
                .flatten()
        });
        if let Some(addr) = addr {
            return format!("http://{addr}");
        }
        if started.elapsed() > Duration::from_secs(30) {
            panic!("{name} logged no listening address; its log:\n{text}");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits until the service at `url` is healthy; returns `url`.
async fn wait_healthy(url: String, name: &str, log: &Path) -> String {
    let started = Instant::now();
    loop {
        if let Ok(channel) = tonic::transport::Endpoint::from_shared(url.clone())
            .expect("a valid url")
            .connect()
            .await
            && let Ok(reply) = HealthClient::new(channel)
                .check(HealthCheckRequest {
                    service: String::new(),
                })
                .await
            && reply.into_inner().status == 1
        {
            return url;
        }
        if started.elapsed() > Duration::from_secs(30) {
            let text = std::fs::read_to_string(log).unwrap_or_default();
            panic!("{name} did not become healthy on {url}; its log:\n{text}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

impl Stack {
    /// Starts parser, runner (scripted model playing `script`) and gateway
    /// (SQLite in a temporary directory, `registry`), and waits until all
    /// three are healthy.
    pub async fn start(tracing: &Tracing, script: &Path, registry: &Path) -> Self {
        let state = tempfile::tempdir().expect("state directory");
        let dir = state.path();
        let profiles = repo_root().join("deploy/config/parser-profiles.json");

        let mut children = Vec::new();
        let log = dir.join("parser.log");
        let parser = command("payload-parser", tracing, &log)
            .arg("--listen")
            .arg("127.0.0.1:0")
            .arg("--profiles")
            .arg(&profiles)
            .spawn()
            .expect("spawn payload-parser");
        children.push(("payload-parser", parser));
        let parser_url = bound_url("payload-parser", &log).await;
        let parser_url = wait_healthy(parser_url, "payload-parser", &log).await;

        let log = dir.join("runner.log");
        // The runner may dial the tool endpoints of the gateway's registry.
        let runner = command("agent-runner", tracing, &log)
            .env("PARLEY_TOOLS__REGISTRY", registry)
            .arg("--listen")
            .arg("127.0.0.1:0")
            .arg("--script")
            .arg(script)
            .spawn()
            .expect("spawn agent-runner");
        children.push(("agent-runner", runner));
        let runner_url = bound_url("agent-runner", &log).await;
        let runner_url = wait_healthy(runner_url, "agent-runner", &log).await;

        let log = dir.join("gateway.log");
        let gateway = command("chat-gateway", tracing, &log)
            .arg("--listen")
            .arg("127.0.0.1:0")
            .arg("--runner")
            .arg(&runner_url)
            .arg("--parser")
            .arg(&parser_url)
            .arg("--registry")
            .arg(registry)
            .arg("--database-url")
            .arg(format!(
                "sqlite://{}?mode=rwc",
                dir.join("parley.db").display()
            ))
            .arg("--dev-auth")
            .spawn()
            .expect("spawn chat-gateway");
        children.push(("chat-gateway", gateway));
        let gateway_url = bound_url("chat-gateway", &log).await;
        let gateway_url = wait_healthy(gateway_url, "chat-gateway", &log).await;

        Self {
            gateway: gateway_url,
            children,
            _state: state,
        }
    }

    /// Sends SIGTERM to every process and waits until all have exited
    /// (each flushes its spans on the way out). Returns how long it took.
    pub async fn stop(&mut self) -> Duration {
        let started = Instant::now();
        for (name, child) in &self.children {
            let pid = child.id();
            let status = std::process::Command::new("kill")
                .arg("-TERM")
                .arg(pid.to_string())
                .status()
                .expect("run kill");
            assert!(status.success(), "cannot signal {name}");
        }
        for (name, child) in &mut self.children {
            let exit = loop {
                if let Some(exit) = child.try_wait().expect("wait for the child") {
                    break exit;
                }
                assert!(
                    started.elapsed() < Duration::from_secs(30),
                    "{name} did not exit within 30 s of SIGTERM"
                );
                tokio::time::sleep(Duration::from_millis(20)).await;
            };
            assert!(exit.success(), "{name} exited with {exit}");
        }
        self.children.clear();
        started.elapsed()
    }

    /// The logs of the three processes so far, for failure messages.
    pub fn logs(&self) -> String {
        ["parser.log", "runner.log", "gateway.log"]
            .iter()
            .map(|file| {
                let text =
                    std::fs::read_to_string(self._state.path().join(file)).unwrap_or_default();
                format!("---- {file}\n{text}")
            })
            .collect()
    }
}

impl Drop for Stack {
    /// A test that panics mid-way must not leave processes behind.
    fn drop(&mut self) {
        for (_, child) in &mut self.children {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
