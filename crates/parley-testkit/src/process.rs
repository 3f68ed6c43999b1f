//! One of the Parley binaries as a child process: a clean environment, its
//! log in a file, the address it bound read back from its `listening` log
//! line, health checks, signals, and a kill when it is dropped.
//!
//! A service is best started on port 0 (`--listen 127.0.0.1:0`) and its
//! address read from the log: a port picked ahead and released could be
//! taken meanwhile by another test's process, whose health check would
//! then answer for this one.
//!
//! The binaries come from the target directory the running executable was
//! built into ([`bin_dir`]); nothing here runs cargo (a test that does
//! deadlocks on the build lock).

use std::{
    ffi::OsStr,
    net::{SocketAddr, TcpListener},
    path::{Path, PathBuf},
    process::{Child, Command, ExitStatus, Stdio},
    time::{Duration, Instant},
};

use tonic::transport::Channel;
use tonic_health::pb::{HealthCheckRequest, health_client::HealthClient};

/// How long a process may take to bind, to become healthy or to exit.
pub const STARTUP_LIMIT: Duration = Duration::from_secs(30);

/// The repository root.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("repository root")
}

/// The directory holding this build's binaries (`target/debug`): a test
/// executable lives in its `deps/`, any other binary in it.
pub fn bin_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("executable path");
    let dir = exe.parent().expect("executable directory");
    if dir.file_name() == Some(OsStr::new("deps")) {
        dir.parent().expect("profile directory").to_path_buf()
    } else {
        dir.to_path_buf()
    }
}

/// The path of binary `name` in [`bin_dir`]; panics with the fix when it
/// is missing.
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

/// A command for `program` in a clean environment: no inherited `OTEL_` or
/// `PARLEY_` variables (the caller sets what it means), `RUST_LOG=info`
/// (the `listening` line is at INFO), stdin closed.
pub fn command(program: &Path) -> Command {
    let mut command = Command::new(program);
    for (key, _) in std::env::vars_os() {
        let text = key.to_string_lossy();
        if text.starts_with("OTEL_") || text.starts_with("PARLEY_") {
            command.env_remove(&key);
        }
    }
    command.env("RUST_LOG", "info").stdin(Stdio::null());
    command
}

/// A running child process and its log.
#[derive(Debug)]
pub struct Process {
    name: String,
    child: Option<Child>,
    log: PathBuf,
}

impl Process {
    /// Spawns `command`, its stdout and stderr appended to `log`; `name`
    /// is for messages.
    pub fn spawn(name: &str, mut command: Command, log: &Path) -> Self {
        let out = std::fs::File::create(log).expect("log file");
        let err = out.try_clone().expect("log file");
        let child = command
            .stdout(Stdio::from(out))
            .stderr(Stdio::from(err))
            .spawn()
            .unwrap_or_else(|error| panic!("spawn {name}: {error}"));
        Self {
            name: name.to_owned(),
            child: Some(child),
            log: log.to_path_buf(),
        }
    }

    /// Its name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, Child::id)
    }

    /// Its log file.
    pub fn log(&self) -> &Path {
        &self.log
    }

    /// Its log so far.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Panics (with its log) when it has exited.
    fn assert_running(&mut self) {
        if let Some(child) = &mut self.child
            && let Ok(Some(status)) = child.try_wait()
        {
            panic!("{} exited ({status}):\n{}", self.name, self.log_text());
        }
    }

    /// The address of its `listening` log line (JSON logs), once it has
    /// bound; panics when it exits first or logs none within
    /// [`STARTUP_LIMIT`].
    pub async fn bound_addr(&mut self) -> SocketAddr {
        let started = Instant::now();
        loop {
            self.assert_running();
            let text = self.log_text();
            let addr = text.lines().find_map(|line| {
                let entry: serde_json::Value = serde_json::from_str(line).ok()?;
                (entry.get("message")?.as_str()? == "listening")
                    .then(|| entry.get("addr")?.as_str()?.parse().ok())
                    .flatten()
            });
            if let Some(addr) = addr {
                return addr;
            }
            assert!(
                started.elapsed() < STARTUP_LIMIT,
                "{} logged no listening address within {STARTUP_LIMIT:?}:\n{text}",
                self.name
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Waits until `channel()` gives a connection (`what` names where, for
    /// the message) on which `grpc.health.v1` reports SERVING for the
    /// server as a whole; panics when it exits first or after
    /// [`STARTUP_LIMIT`].
    pub async fn wait_serving<F, Fut>(&mut self, what: &str, mut channel: F)
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Option<Channel>>,
    {
        let started = Instant::now();
        loop {
            self.assert_running();
            if let Some(channel) = channel().await
                && let Ok(reply) = HealthClient::new(channel)
                    .check(HealthCheckRequest::default())
                    .await
                && reply.into_inner().status == 1
            {
                return;
            }
            assert!(
                started.elapsed() < STARTUP_LIMIT,
                "{} did not become healthy on {what}; its log:\n{}",
                self.name,
                self.log_text()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Waits until it reports SERVING over plain gRPC at `url`.
    pub async fn wait_healthy(&mut self, url: &str) {
        let endpoint =
            tonic::transport::Endpoint::from_shared(url.to_owned()).expect("a valid url");
        self.wait_serving(url, || {
            let endpoint = endpoint.clone();
            async move { endpoint.connect().await.ok() }
        })
        .await;
    }

    /// A channel to it at `url`, retried until it connects; panics when it
    /// exits first or after [`STARTUP_LIMIT`].
    pub async fn connect(&mut self, url: &str) -> Channel {
        let endpoint =
            tonic::transport::Endpoint::from_shared(url.to_owned()).expect("a valid url");
        let started = Instant::now();
        loop {
            self.assert_running();
            if let Ok(channel) = endpoint.connect().await {
                return channel;
            }
            assert!(
                started.elapsed() < STARTUP_LIMIT,
                "{} did not answer on {url}:\n{}",
                self.name,
                self.log_text()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Sends `signal` (`-TERM`, `-STOP`, `-CONT`, `-KILL`) with `kill(1)`.
    pub fn signal(&self, signal: &str) {
        let pid = self.pid();
        let status = Command::new("kill")
            .arg(signal)
            .arg(pid.to_string())
            .status()
            .expect("run kill");
        assert!(status.success(), "kill {signal} {pid} ({})", self.name);
    }

    /// Kills it with SIGKILL (no drain, no clean-up) and waits for it.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Waits until it has exited; panics after `limit`.
    pub async fn wait_exit(&mut self, limit: Duration) -> ExitStatus {
        let started = Instant::now();
        let Some(child) = &mut self.child else {
            panic!("{} was already reaped", self.name);
        };
        loop {
            if let Some(exit) = child.try_wait().expect("wait for the child") {
                self.child = None;
                return exit;
            }
            assert!(
                started.elapsed() < limit,
                "{} did not exit within {limit:?}",
                self.name
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

impl Drop for Process {
    /// A test that panics mid-way must not leave processes behind.
    fn drop(&mut self) {
        self.kill();
    }
}
