//! The gateway as a real process (the `chat-gateway` binary this package
//! builds, run by [`parley_testkit::process`]), for what only a process can show: a SIGKILL mid-turn, and
//! several replicas on one database.

use std::{
    net::SocketAddr,
    path::{Path, PathBuf},
    time::Duration,
};

use parley_grpc::config::duration;
use parley_proto::gateway::v1::chat_gateway_client::ChatGatewayClient;
use parley_testkit::process::Process;
use tonic::transport::Channel;

/// What a gateway process is configured with.
#[derive(Debug, Clone)]
pub struct ProcessConfig {
    /// The store.
    pub database_url: String,
    /// The runner.
    pub runner: SocketAddr,
    /// The parser sidecar.
    pub parser: SocketAddr,
    /// `turns.lease_renew`.
    pub lease_renew: Duration,
    /// `turns.lease_ttl`.
    pub lease_ttl: Duration,
    /// `turns.stream_ahead`: 0 releases only stored events (a killed
    /// gateway's stored partial answer is exactly what its client saw).
    pub stream_ahead: u64,
    /// `turns.per_user.concurrent_turns` (0: unlimited).
    pub per_user_concurrent_turns: u32,
}

/// A running `chat-gateway` process in dev auth.
#[derive(Debug)]
pub struct GatewayProcess {
    process: Process,
    /// Its address.
    pub addr: SocketAddr,
    /// A client of it.
    pub client: ChatGatewayClient<Channel>,
    /// Its log (stderr and stdout).
    pub log: PathBuf,
}

impl GatewayProcess {
    /// Starts `chat-gateway` with `config`, its files under `dir` named
    /// after `name`, and waits until it answers. It binds port 0 and the
    /// address is read from its `listening` log line: a port picked ahead
    /// and released could be taken by another test's process meanwhile.
    pub async fn start(config: &ProcessConfig, dir: &Path, name: &str) -> Self {
        Self::start_with(config, dir, name, None, &[]).await
    }

    /// [`GatewayProcess::start`], with `env` set (`PARLEY_` settings, say)
    /// and the process's clocks off by
    /// `offset` (libfaketime's `FAKETIME` syntax, e.g. `+15s`) when given: Debian's
    /// `faketime` must be installed (see [`libfaketime`]).
    pub async fn start_with(
        config: &ProcessConfig,
        dir: &Path,
        name: &str,
        offset: Option<&str>,
        env: &[(&str, &str)],
    ) -> Self {
        let file = dir.join(format!("{name}.toml"));
        let toml = format!(
            "[server]\nlisten = \"127.0.0.1:0\"\ndrain_timeout = \"2s\"\n\n\
             [store]\ndatabase_url = \"{}\"\n\n\
             [upstream]\nrunner_url = \"http://{}\"\nparser_url = \"http://{}\"\n\n\
             [turns]\nlease_renew = \"{}\"\nlease_ttl = \"{}\"\nstream_ahead = {}\n\n\
             [turns.per_user]\nconcurrent_turns = {}\n\n\
             [auth]\ndev = true\n",
            config.database_url,
            config.runner,
            config.parser,
            duration::format(config.lease_renew),
            duration::format(config.lease_ttl),
            config.stream_ahead,
            config.per_user_concurrent_turns
        );
        std::fs::write(&file, toml).expect("write the gateway config");
        let log = dir.join(format!("{name}.log"));
        let mut command =
            parley_testkit::process::command(Path::new(env!("CARGO_BIN_EXE_chat-gateway")));
        command.envs(env.iter().copied());
        if let Some(offset) = offset {
            // The library itself, not the `faketime` wrapper: a SIGKILL
            // then reaches the gateway, not a parent that forked it.
            let library = libfaketime().expect("libfaketime is installed");
            command
                .env("LD_PRELOAD", library)
                .env("FAKETIME", offset)
                .env("DONT_FAKE_MONOTONIC", "1")
                .env("FAKETIME_DONT_FAKE_MONOTONIC", "1");
        }
        command
            .arg("--config")
            .arg(&file)
            .arg("--metrics-listen")
            .arg("127.0.0.1:0")
            .arg("--log-format")
            .arg("json");
        let mut process = Process::spawn("chat-gateway", command, &log);
        let addr = process.bound_addr().await;
        let channel = process.connect(&format!("http://{addr}")).await;
        Self {
            process,
            addr,
            client: ChatGatewayClient::new(channel),
            log,
        }
    }

    /// Kills it with SIGKILL (no drain, no clean-up) and waits for it.
    pub async fn kill(&mut self) {
        self.process.kill();
    }

    /// Freezes it (SIGSTOP): it holds its connections and leases but
    /// does nothing until [`GatewayProcess::resume`].
    pub fn pause(&self) {
        self.process.signal("-STOP");
    }

    /// Lets a paused process run again (SIGCONT).
    pub fn resume(&self) {
        self.process.signal("-CONT");
    }

    /// Its log so far.
    pub fn log_text(&self) -> String {
        self.process.log_text()
    }
}

/// Debian's libfaketime (package `faketime`), which shifts the clocks of
/// the process it is preloaded in; `None` when it is not installed.
pub fn libfaketime() -> Option<PathBuf> {
    std::fs::read_dir("/usr/lib")
        .ok()?
        .filter_map(Result::ok)
        .map(|entry| entry.path().join("faketime/libfaketime.so.1"))
        .chain([PathBuf::from("/usr/lib/faketime/libfaketime.so.1")])
        .find(|path| path.is_file())
}
