//! The runner's secrets and its own authentication, on the real binary: a
//! provider key and the runner's bearer token read from files and read
//! again on SIGHUP (a provider of the test's own sees the new key; a failed
//! read keeps the old one and logs no secret), every AgentRunner call
//! refused without the token or with another one while health stays open,
//! and no start on an address beyond loopback without a token, mutual TLS
//! or `auth.allow_unauthenticated`.

mod support;

use std::{
    net::SocketAddr,
    path::{Path, PathBuf},
    process::Stdio,
    time::Duration,
};

use futures::StreamExt;
use parley_proto::runner::v1::{
    self as pb, RunRequest, agent_runner_client::AgentRunnerClient, run_event::Event as Ev,
};
use support::replay::{ReplayServer, Reply};
use tokio::process::{Child, Command};
use tonic::{Code, Request, transport::Channel};
use tonic_types::StatusExt;

const BIN: &str = env!("CARGO_BIN_EXE_agent-runner");

/// A running `agent-runner` process.
struct RunnerProcess {
    child: Child,
    addr: SocketAddr,
    log: PathBuf,
}

impl RunnerProcess {
    /// Starts the binary with `toml` as its configuration (written under
    /// `dir`) and waits for its `listening` line.
    async fn start(dir: &Path, toml: &str) -> Self {
        let (child, log) = spawn(dir, toml);
        let mut process = Self {
            child,
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            log,
        };
        process.addr = process.wait_for_listening().await;
        process
    }

    fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    async fn wait_for_listening(&mut self) -> SocketAddr {
        for _ in 0..1500 {
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("agent-runner exited ({status}):\n{}", self.log_text());
            }
            let addr = self.log_text().lines().find_map(|line| {
                let entry: serde_json::Value = serde_json::from_str(line).ok()?;
                (entry.get("message")?.as_str()? == "listening")
                    .then(|| entry.get("addr")?.as_str()?.parse::<SocketAddr>().ok())
                    .flatten()
            });
            if let Some(addr) = addr {
                // 0.0.0.0:port is dialled on loopback.
                return SocketAddr::from(([127, 0, 0, 1], addr.port()));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        panic!("agent-runner did not listen:\n{}", self.log_text());
    }

    /// Waits until the log has `count` lines containing `text`.
    async fn wait_for_log(&self, text: &str, count: usize) {
        for _ in 0..1500 {
            if self.log_text().matches(text).count() >= count {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        panic!("no `{text}` (x{count}) in the log:\n{}", self.log_text());
    }

    fn hangup(&self) {
        let pid = self.child.id().expect("the runner runs");
        let status = std::process::Command::new("kill")
            .args(["-HUP", &pid.to_string()])
            .status()
            .expect("run kill");
        assert!(status.success(), "kill -HUP {pid}");
    }

    async fn client(&self) -> AgentRunnerClient<Channel> {
        let channel = Channel::from_shared(format!("http://{}", self.addr))
            .expect("url")
            .connect()
            .await
            .expect("connect to the runner");
        AgentRunnerClient::new(channel)
    }
}

fn spawn(dir: &Path, toml: &str) -> (Child, PathBuf) {
    let file = dir.join("runner.toml");
    std::fs::write(&file, toml).expect("write the runner config");
    let log = dir.join("runner.log");
    let out = std::fs::File::create(&log).expect("log file");
    let err = out.try_clone().expect("log file");
    let child = Command::new(BIN)
        .arg("--config")
        .arg(&file)
        .args(["--metrics-listen", "off", "--log-format", "json"])
        .env_remove("PARLEY_LISTEN")
        .env_remove("PARLEY_RUNNER_CONFIG")
        .stdout(Stdio::from(out))
        .stderr(Stdio::from(err))
        .kill_on_drop(true)
        .spawn()
        .expect("start agent-runner");
    (child, log)
}

fn request() -> RunRequest {
    RunRequest {
        messages: vec![pb::Message {
            role: pb::Role::User as i32,
            text: "hello".into(),
            ..Default::default()
        }],
        ..Default::default()
    }
}

fn with_token(token: Option<&str>) -> Request<RunRequest> {
    let mut request = Request::new(request());
    if let Some(token) = token {
        request.metadata_mut().insert(
            "authorization",
            format!("Bearer {token}").parse().expect("ascii"),
        );
    }
    request
}

/// Runs one turn and returns its text; panics when the turn fails.
async fn run(client: &mut AgentRunnerClient<Channel>, token: &str) -> String {
    let mut stream = client
        .run(with_token(Some(token)))
        .await
        .expect("the run starts")
        .into_inner();
    let mut text = String::new();
    while let Some(event) = stream.next().await {
        match event.expect("event").event {
            Some(Ev::TextDelta(delta)) => text.push_str(&delta),
            Some(Ev::Error(error)) => panic!("the turn failed: {error:?}"),
            _ => {}
        }
    }
    text
}

fn refusal_reason(status: &tonic::Status) -> String {
    status
        .get_details_error_info()
        .map(|info| info.reason)
        .unwrap_or_default()
}

#[tokio::test]
async fn sighup_rotates_the_provider_key_and_the_runner_token_and_every_call_needs_the_token() {
    let dir = tempfile::tempdir().expect("dir");
    let key = dir.path().join("api-key");
    let token = dir.path().join("runner-token");
    std::fs::write(&key, "sk-first-key\n").expect("write key");
    std::fs::write(&token, "runner-token-one\n").expect("write token");
    let provider = ReplayServer::start(vec![Reply::sse_fixture("openai/text.sse"); 3]).await;
    let runner = RunnerProcess::start(
        dir.path(),
        &format!(
            "default_provider = \"p\"\n\n\
             [server]\nlisten = \"127.0.0.1:0\"\n\n\
             [auth]\ntoken_file = \"{}\"\n\n\
             [providers.p]\nkind = \"openai\"\nbase_url = \"{}\"\ndefault_model = \"gpt-4o\"\napi_key_file = \"{}\"\n",
            token.display(),
            provider.url("/v1"),
            key.display()
        ),
    )
    .await;
    let mut client = runner.client().await;

    // Health stays open for the kubelet's probes.
    let mut health =
        tonic_health::pb::health_client::HealthClient::new(client_channel(runner.addr).await);
    let serving = health
        .check(tonic_health::pb::HealthCheckRequest {
            service: "parley.runner.v1.AgentRunner".into(),
        })
        .await
        .expect("health answers without a token")
        .into_inner();
    assert_eq!(serving.status, 1, "SERVING");

    // Without the token, with another one: refused before anything runs.
    for (presented, reason) in [
        (None, "MISSING_TOKEN"),
        (Some("runner-token-two"), "INVALID_TOKEN"),
    ] {
        let status = client
            .run(with_token(presented))
            .await
            .expect_err("refused");
        assert_eq!(status.code(), Code::Unauthenticated, "{presented:?}");
        assert_eq!(refusal_reason(&status), reason, "{presented:?}");
        let status = client
            .list_tools(pb::ListToolsRequest::default())
            .await
            .expect_err("ListTools is guarded too");
        assert_eq!(status.code(), Code::Unauthenticated);
    }
    assert!(provider.requests().is_empty(), "no model call was made");

    assert!(!run(&mut client, "runner-token-one").await.is_empty());
    assert_eq!(
        provider.requests()[0].header("authorization"),
        Some("Bearer sk-first-key")
    );

    // Rotated files, then SIGHUP: the new key and the new token.
    std::fs::write(&key, "sk-second-key\n").expect("write key");
    std::fs::write(&token, "runner-token-two\n").expect("write token");
    runner.hangup();
    runner.wait_for_log("secrets read again", 1).await;
    let status = client
        .run(with_token(Some("runner-token-one")))
        .await
        .expect_err("the old token is refused");
    assert_eq!(refusal_reason(&status), "INVALID_TOKEN");
    assert!(!run(&mut client, "runner-token-two").await.is_empty());
    assert_eq!(
        provider.requests()[1].header("authorization"),
        Some("Bearer sk-second-key")
    );

    // A key file that cannot be read: a warning without the secret, and
    // the key held stays.
    std::fs::remove_file(&key).expect("remove key");
    runner.hangup();
    runner.wait_for_log("secrets read again", 2).await;
    let log = runner.log_text();
    assert!(
        log.contains("could not be read again") && log.contains("api_key_file"),
        "{log}"
    );
    for secret in [
        "sk-first-key",
        "sk-second-key",
        "runner-token-one",
        "runner-token-two",
    ] {
        assert!(!log.contains(secret), "{secret} in the log:\n{log}");
    }
    assert!(!run(&mut client, "runner-token-two").await.is_empty());
    assert_eq!(
        provider.requests()[2].header("authorization"),
        Some("Bearer sk-second-key")
    );
}

async fn client_channel(addr: SocketAddr) -> Channel {
    Channel::from_shared(format!("http://{addr}"))
        .expect("url")
        .connect()
        .await
        .expect("connect")
}

/// Waits for the process to exit by itself; kills it and fails when it
/// still serves after 30 s.
async fn exits(child: &mut Child, log: &Path) -> std::process::ExitStatus {
    for _ in 0..1500 {
        if let Ok(Some(status)) = child.try_wait() {
            return status;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let _ = child.kill().await;
    panic!(
        "agent-runner still runs:\n{}",
        std::fs::read_to_string(log).unwrap_or_default()
    );
}

#[tokio::test]
async fn beyond_loopback_the_runner_needs_a_token_mutual_tls_or_an_explicit_switch() {
    let dir = tempfile::tempdir().expect("dir");
    let (mut child, log) = spawn(dir.path(), "[server]\nlisten = \"0.0.0.0:0\"\n");
    let status = exits(&mut child, &log).await;
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(!status.success(), "{text}");
    assert!(
        text.contains("auth.token_file")
            && text.contains("auth.allow_unauthenticated")
            && text.contains("client_ca"),
        "{text}"
    );

    // The explicit switch: it serves, and says so.
    let dir = tempfile::tempdir().expect("dir");
    let runner = RunnerProcess::start(
        dir.path(),
        "[server]\nlisten = \"0.0.0.0:0\"\n\n[auth]\nallow_unauthenticated = true\n",
    )
    .await;
    runner
        .wait_for_log("RUNNER SERVED WITHOUT AUTHENTICATION", 1)
        .await;
    let mut client = runner.client().await;
    assert!(
        client
            .list_tools(pb::ListToolsRequest::default())
            .await
            .is_ok()
    );
    drop(runner);

    // A token: it serves, and only with the token.
    let dir = tempfile::tempdir().expect("dir");
    let token = dir.path().join("token");
    std::fs::write(&token, "a-runner-token\n").expect("write token");
    let runner = RunnerProcess::start(
        dir.path(),
        &format!(
            "[server]\nlisten = \"0.0.0.0:0\"\n\n[auth]\ntoken_file = \"{}\"\n",
            token.display()
        ),
    )
    .await;
    let mut client = runner.client().await;
    let status = client
        .list_tools(pb::ListToolsRequest::default())
        .await
        .expect_err("refused");
    assert_eq!(refusal_reason(&status), "MISSING_TOKEN");
    let mut request = Request::new(pb::ListToolsRequest::default());
    request.metadata_mut().insert(
        "authorization",
        "Bearer a-runner-token".parse().expect("ascii"),
    );
    assert!(client.list_tools(request).await.is_ok());
    assert!(!runner.log_text().contains("a-runner-token"));
}
