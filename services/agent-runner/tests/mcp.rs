//! The runner against real MCP servers: the fixture server of
//! `tests/fixtures/mcp/fixture_server.py` (official Python SDK), over stdio
//! and over Streamable HTTP, through `ListTools` and `Run` on a served
//! runner whose scripted model calls its tools.
//!
//! Python and the SDK come from `scripts/mcp.sh` (a virtual environment,
//! PyPI); without them each test prints NOT RUN (and fails under CI=true).
//! Tools that must wait for the test wait for a gate file the test creates
//! once it has seen what it checks, so no sleep decides an outcome.

use std::{
    path::{Path, PathBuf},
    sync::Arc,
    time::Duration,
};

use agent_runner::{
    app::RunnerApp,
    config::RunnerConfig,
    provider::{
        Providers,
        scripted::{Script, ScriptedProvider},
    },
    tools::mcp::McpServerConfig,
};
use futures::StreamExt;
use parley_proto::runner::v1::{
    self as pb, ListToolsRequest, McpServerState, RunEvent, RunRequest,
    agent_runner_client::AgentRunnerClient, run_event::Event,
};
use tonic::transport::Channel;

const FIXTURE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/mcp/fixture_server.py"
);

/// The fixture's `max_output_bytes` (256 KiB).
const MAX_OUTPUT_BYTES: usize = 256 * 1024;

/// A bound on waits for a server's state; never reached when things work.
const PATIENCE: Duration = Duration::from_secs(60);

#[derive(Debug, Clone, Copy)]
enum Transport {
    Stdio,
    Http,
}

struct Stack {
    client: AgentRunnerClient<Channel>,
    gates: tempfile::TempDir,
    _app: RunnerApp,
    _http_server: Option<tokio::process::Child>,
}

const SCRIPT: &str = r#"
model = "mcp-test"
chunk_chars = 64

[[turns]]
match = { contains = "count" }
steps = [
  { tool_call = { name = "fixture__count", input = { steps = 3, gate = "count-gate" } } },
  { text = "Counted." },
]

[[turns]]
match = { contains = "fail" }
steps = [
  { tool_call = { name = "fixture__fail", input = { reason = "no such city" } } },
  { text = "It failed." },
]

[[turns]]
match = { contains = "forecast" }
steps = [
  { tool_call = { name = "fixture__forecast", input = { city = "Lyon" } } },
  { text = "Sunny." },
]

[[turns]]
match = { contains = "invalid" }
steps = [
  { tool_call = { name = "fixture__forecast", input = { town = "Lyon" } } },
  { text = "Bad input." },
]

[[turns]]
match = { contains = "forever" }
steps = [
  { tool_call = { name = "fixture__wait_forever", input = { marker = "turn" } } },
  { text = "Never." },
]

[[turns]]
match = { contains = "pid" }
steps = [
  { tool_call = { name = "fixture__pid", input = {} } },
  { text = "Done." },
]

[[turns]]
match = { contains = "chart" }
steps = [
  { tool_call = { name = "fixture__chart", input = {} } },
  { echo = "attachments" },
]

[[turns]]
match = { contains = "huge" }
steps = [
  { tool_call = { name = "fixture__big", input = { size = 2000000 } } },
  { text = "Too huge." },
]

[[turns]]
match = { contains = "big" }
steps = [
  { tool_call = { name = "fixture__big", input = { size = 300000 } } },
  { text = "Too big." },
]

[[turns]]
match = { contains = "down" }
steps = [
  { tool_call = { name = "never_up__echo", input = {} } },
  { text = "Went on." },
]

[default]
steps = [{ text = "Nothing to do." }]
"#;

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|addr| addr.port())
        .expect("a free port")
}

async fn stack(test: &str, transport: Transport, tool_timeout: Duration) -> Option<Stack> {
    let python = parley_testkit::mcp_python(test)?;
    let gates = tempfile::tempdir().expect("tempdir");
    let gate_dir = gates.path().display().to_string();
    let python_str = python.display().to_string();
    let (server, http_server) = match transport {
        Transport::Stdio => (
            McpServerConfig::stdio(vec![python_str, FIXTURE.into(), "stdio".into(), gate_dir]),
            None,
        ),
        Transport::Http => {
            let port = free_port();
            let child = tokio::process::Command::new(&python)
                .args([FIXTURE, "http", &gate_dir, &port.to_string()])
                .kill_on_drop(true)
                .stdout(std::process::Stdio::null())
                .spawn()
                .expect("start the HTTP fixture");
            (
                McpServerConfig::http(format!("http://127.0.0.1:{port}/mcp")),
                Some(child),
            )
        }
    };
    let mut server = server;
    // The HTTP fixture may not listen yet: the runner retries quickly.
    server.restart_backoff = Duration::from_millis(100);
    server.max_restart_backoff = Duration::from_millis(500);
    server.max_output_bytes = MAX_OUTPUT_BYTES;
    let mut config = RunnerConfig::scripted_demo();
    config.limits.tool_timeout = tool_timeout;
    config.mcp_servers.insert("fixture".into(), server);
    let provider = ScriptedProvider::new("scripted", Script::from_toml(SCRIPT).expect("script"));
    let app = RunnerApp::with_providers(
        &config,
        Providers::single("scripted", Arc::new(provider), "mcp-test"),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let options = parley_grpc::ServeOptions::new("agent-runner-mcp-test", vec![]);
    tokio::spawn(parley_grpc::serve(
        listener,
        app.routes(),
        options,
        std::future::pending(),
    ));
    let client = AgentRunnerClient::connect(format!("http://{addr}"))
        .await
        .expect("connect");
    let stack = Stack {
        client,
        gates,
        _app: app,
        _http_server: http_server,
    };
    stack.ready(1).await;
    Some(stack)
}

impl Stack {
    fn gate(&self, name: &str) -> PathBuf {
        self.gates.path().join(name)
    }

    fn server(&self) -> std::sync::Arc<agent_runner::tools::mcp::McpServer> {
        self._app
            .runner()
            .tools
            .mcp
            .get("fixture")
            .expect("configured")
            .clone()
    }

    /// Waits until the fixture is ready after `connects` connections.
    async fn ready(&self, connects: u32) {
        let mut watch = self.server().watch();
        let ready = watch.wait_for(|s| {
            s.state == agent_runner::tools::mcp::ServerState::Ready && s.connects >= connects
        });
        match tokio::time::timeout(PATIENCE, ready).await {
            Ok(Ok(_)) => {}
            _ => panic!(
                "the fixture server is not ready: {:?}",
                self.server().snapshot()
            ),
        }
    }

    async fn tools(&self) -> pb::ListToolsResponse {
        self.client
            .clone()
            .list_tools(ListToolsRequest {})
            .await
            .expect("ListTools")
            .into_inner()
    }

    async fn request(&self, text: &str) -> RunRequest {
        RunRequest {
            messages: vec![pb::Message {
                role: pb::Role::User as i32,
                text: text.into(),
                ..Default::default()
            }],
            // What the gateway does: the definitions exactly as listed.
            tools: self.tools().await.tools,
            ..Default::default()
        }
    }

    async fn run(&self, text: &str) -> tonic::Streaming<RunEvent> {
        let request = self.request(text).await;
        self.client
            .clone()
            .run(request)
            .await
            .expect("Run")
            .into_inner()
    }
}

async fn until_complete(stream: &mut tonic::Streaming<RunEvent>) -> (Vec<Event>, pb::ToolComplete) {
    let mut seen = Vec::new();
    while let Some(event) = stream.next().await {
        let event = event.expect("event").event.expect("an event");
        if let Event::ToolComplete(complete) = &event {
            return (seen, (**complete).clone());
        }
        seen.push(event);
    }
    panic!("the stream ended without a tool_complete: {seen:?}");
}

async fn finished(stream: &mut tonic::Streaming<RunEvent>) -> pb::Finished {
    while let Some(event) = stream.next().await {
        match event.expect("event").event {
            Some(Event::Finished(finished)) => return *finished,
            Some(Event::Error(error)) => panic!("the turn failed: {error:?}"),
            _ => {}
        }
    }
    panic!("the stream ended without finished");
}

async fn wait_for_file(path: &Path) {
    let appeared = async {
        while !path.exists() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    };
    tokio::time::timeout(PATIENCE, appeared)
        .await
        .unwrap_or_else(|_| panic!("{} never appeared", path.display()));
}

async fn lists_its_tools_with_schemas(transport: Transport) {
    let Some(stack) = stack("mcp_lists_tools", transport, Duration::from_secs(30)).await else {
        return;
    };
    let listed = stack.tools().await;
    let forecast = listed
        .tools
        .iter()
        .find(|t| t.name == "fixture__forecast")
        .expect("forecast listed");
    assert_eq!(forecast.description, "A structured forecast for a city.");
    assert_eq!(
        forecast.endpoint.as_ref().and_then(|e| e.kind.clone()),
        Some(pb::tool_endpoint::Kind::Mcp("fixture/forecast".into()))
    );
    let schema =
        parley_proto::json::from_struct_value(forecast.input_schema.as_ref().expect("schema"));
    assert_eq!(schema["required"], serde_json::json!(["city"]));
    let server = &listed.servers[0];
    assert_eq!(server.name, "fixture");
    assert_eq!(server.state, McpServerState::Ready as i32);
    assert_eq!(server.tools as usize, listed.tools.len());
    assert_eq!(
        server.transport,
        match transport {
            Transport::Stdio => "stdio",
            Transport::Http => "http",
        }
    );
}

#[tokio::test]
async fn stdio_server_lists_its_tools_with_schemas() {
    lists_its_tools_with_schemas(Transport::Stdio).await;
}

#[tokio::test]
async fn http_server_lists_its_tools_with_schemas() {
    lists_its_tools_with_schemas(Transport::Http).await;
}

async fn calls_map_progress_errors_and_structured_results(transport: Transport) {
    let Some(stack) = stack("mcp_calls", transport, Duration::from_secs(30)).await else {
        return;
    };
    // Progress: three steps reach the client as tool_progress before the
    // tool completes (it waits for the gate until then).
    let mut stream = stack.run("count please").await;
    let mut fractions = Vec::new();
    while fractions.len() < 3 {
        match stream
            .next()
            .await
            .expect("more events")
            .expect("event")
            .event
        {
            Some(Event::ToolProgress(progress)) => {
                fractions.push((progress.fraction.unwrap_or(-1.0) * 3.0).round() as i32);
                assert!(progress.message.starts_with("step "), "{progress:?}");
            }
            Some(Event::ToolComplete(complete)) => {
                panic!("completed before its progress: {complete:?}")
            }
            _ => {}
        }
    }
    fractions.sort_unstable();
    assert_eq!(fractions, vec![1, 2, 3]);
    std::fs::write(stack.gate("count-gate"), b"").expect("open the gate");
    let (_, complete) = until_complete(&mut stream).await;
    assert!(complete.success, "{complete:?}");
    assert_eq!(complete.result_text, "counted to 3");
    finished(&mut stream).await;

    // isError: a tool error the model sees; the turn goes on.
    let mut stream = stack.run("fail please").await;
    let (_, complete) = until_complete(&mut stream).await;
    assert!(!complete.success);
    assert_eq!(complete.error_reason, "TOOL_ERROR");
    assert!(
        complete.error.contains("refused: no such city"),
        "{complete:?}"
    );
    assert_eq!(finished(&mut stream).await.text, "It failed.");

    // structuredContent: the JSON result.
    let mut stream = stack.run("forecast please").await;
    let (_, complete) = until_complete(&mut stream).await;
    assert!(complete.success, "{complete:?}");
    let json: serde_json::Value = serde_json::from_str(&complete.result_text).expect("JSON");
    assert_eq!(
        json,
        serde_json::json!({"city": "Lyon", "celsius": 21.5, "sunny": true})
    );
    finished(&mut stream).await;

    // Images are kept typed in the payload; the model reads what they are.
    let mut stream = stack.run("chart please").await;
    let (_, complete) = until_complete(&mut stream).await;
    assert!(complete.success, "{complete:?}");
    assert_eq!(
        complete.result_text,
        "a chart\n[image chart-1.png, image/png, 8 bytes, shown to the user]"
    );
    let payload = complete.payload.expect("a payload");
    assert_eq!(payload.r#type, "mcp_content");
    let data = parley_proto::json::from_struct(&payload.data.expect("data"));
    assert_eq!(data["server"], "fixture");
    assert_eq!(data["content"][0]["type"], "image");
    assert_eq!(data["content"][0]["mimeType"], "image/png");
    assert_eq!(data["content"][0]["data"], "iVBORw0KGgo=");
    // ... and the model gets the image itself (the scripted model echoes
    // the files it was given).
    assert_eq!(
        finished(&mut stream).await.text,
        "chart-1.png (image/png, 8 bytes, sha256 4c4b6a3be131) from the tool fixture__chart"
    );

    // A result over max_output_bytes fails the call, not the turn.
    let mut stream = stack.run("big please").await;
    let (_, complete) = until_complete(&mut stream).await;
    assert_eq!(complete.error_reason, "TOOL_ERROR", "{complete:?}");
    assert!(
        complete.error.contains(&format!(
            "more than this server's max_output_bytes ({MAX_OUTPUT_BYTES})"
        )),
        "{complete:?}"
    );
    assert_eq!(finished(&mut stream).await.text, "Too big.");

    // Input checked against the server's schema before the call.
    let mut stream = stack.run("invalid please").await;
    let (_, complete) = until_complete(&mut stream).await;
    assert_eq!(complete.error_reason, "INVALID_INPUT", "{complete:?}");
    assert!(complete.error.contains("city"), "{complete:?}");
    finished(&mut stream).await;
}

#[tokio::test]
async fn stdio_calls_map_progress_errors_and_structured_results() {
    calls_map_progress_errors_and_structured_results(Transport::Stdio).await;
}

#[tokio::test]
async fn http_calls_map_progress_errors_and_structured_results() {
    calls_map_progress_errors_and_structured_results(Transport::Http).await;
}

async fn a_cancelled_turn_cancels_the_call(transport: Transport) {
    let Some(stack) = stack("mcp_cancel", transport, Duration::from_secs(30)).await else {
        return;
    };
    let mut stream = stack.run("wait forever").await;
    // The call is running on the server…
    wait_for_file(&stack.gate("started-turn")).await;
    // …the client goes away: the turn is cancelled, and the server is told.
    drop(stream.next().await);
    drop(stream);
    wait_for_file(&stack.gate("cancelled-turn")).await;
}

#[tokio::test]
async fn stdio_a_cancelled_turn_cancels_the_call() {
    a_cancelled_turn_cancels_the_call(Transport::Stdio).await;
}

#[tokio::test]
async fn http_a_cancelled_turn_cancels_the_call() {
    a_cancelled_turn_cancels_the_call(Transport::Http).await;
}

#[tokio::test]
async fn a_tool_time_out_cancels_the_call() {
    // A time-out short enough for the test; the tool would run forever.
    let Some(stack) = stack("mcp_timeout", Transport::Stdio, Duration::from_millis(1500)).await
    else {
        return;
    };
    let mut stream = stack.run("wait forever").await;
    let (_, complete) = until_complete(&mut stream).await;
    assert_eq!(complete.error_reason, "TIMEOUT", "{complete:?}");
    assert_eq!(finished(&mut stream).await.text, "Never.");
    wait_for_file(&stack.gate("cancelled-turn")).await;
}

#[tokio::test]
async fn a_server_killed_mid_call_fails_the_call_and_is_restarted() {
    let Some(stack) = stack("mcp_killed", Transport::Stdio, Duration::from_secs(30)).await else {
        return;
    };
    let mut stream = stack.run("pid").await;
    let (_, complete) = until_complete(&mut stream).await;
    let first_pid: i32 = complete.result_text.parse().expect("a pid");
    finished(&mut stream).await;

    let mut stream = stack.run("wait forever").await;
    wait_for_file(&stack.gate("started-turn")).await;
    let killed = std::process::Command::new("kill")
        .args(["-9", &first_pid.to_string()])
        .status()
        .expect("kill");
    assert!(killed.success());
    let (_, complete) = until_complete(&mut stream).await;
    assert!(!complete.success);
    assert_eq!(complete.error_reason, "UNAVAILABLE", "{complete:?}");
    assert!(
        complete.error.contains("MCP server `fixture`"),
        "{complete:?}"
    );
    // The turn completes: the model read the error.
    assert_eq!(finished(&mut stream).await.text, "Never.");

    // Restarted with backoff; the next call works, on a new process.
    stack.ready(2).await;
    let status = stack.tools().await.servers.remove(0);
    assert_eq!(status.state, McpServerState::Ready as i32);
    assert!(status.connects >= 2, "{status:?}");
    let mut stream = stack.run("pid").await;
    let (_, complete) = until_complete(&mut stream).await;
    assert!(complete.success, "{complete:?}");
    let second_pid: i32 = complete.result_text.parse().expect("a pid");
    assert_ne!(first_pid, second_pid);
    finished(&mut stream).await;
}

#[tokio::test]
async fn a_changed_tool_list_is_read_again() {
    let Some(stack) = stack(
        "mcp_list_changed",
        Transport::Stdio,
        Duration::from_secs(30),
    )
    .await
    else {
        return;
    };
    let server = stack.server();
    let snapshot = server.snapshot();
    let peer = snapshot.peer.clone().expect("ready");
    assert!(!snapshot.tools.contains_key("greet"));
    let mut watch = server.watch();
    let params = rmcp::model::CallToolRequestParams::new("add_tool").with_arguments(
        serde_json::json!({"name": "greet"})
            .as_object()
            .cloned()
            .unwrap_or_default(),
    );
    peer.call_tool(params).await.expect("add_tool");
    let listed =
        tokio::time::timeout(PATIENCE, watch.wait_for(|s| s.tools.contains_key("greet"))).await;
    assert!(listed.is_ok(), "the new tool was never listed");
    let names: Vec<String> = stack
        .tools()
        .await
        .tools
        .into_iter()
        .map(|t| t.name)
        .collect();
    assert!(names.contains(&"fixture__greet".to_owned()), "{names:?}");
}

/// A runner whose only MCP server never comes up: its program exits at
/// once. Needs no Python.
async fn down_stack() -> (AgentRunnerClient<Channel>, Channel, RunnerApp) {
    let mut server = McpServerConfig::stdio(vec!["false".into()]);
    server.restart_backoff = Duration::from_millis(50);
    server.max_restart_backoff = Duration::from_millis(200);
    let mut config = RunnerConfig::scripted_demo();
    config.mcp_servers.insert("never_up".into(), server);
    let provider = ScriptedProvider::new("scripted", Script::from_toml(SCRIPT).expect("script"));
    let app = RunnerApp::with_providers(
        &config,
        Providers::single("scripted", Arc::new(provider), "mcp-test"),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let options = parley_grpc::ServeOptions::new(
        "agent-runner-mcp-test",
        vec![agent_runner::app::SERVICE_NAME],
    );
    tokio::spawn(parley_grpc::serve(
        listener,
        app.routes(),
        options,
        std::future::pending(),
    ));
    let channel = Channel::from_shared(format!("http://{addr}"))
        .expect("uri")
        .connect()
        .await
        .expect("connect");
    (AgentRunnerClient::new(channel.clone()), channel, app)
}

#[tokio::test]
async fn a_server_that_is_down_shows_in_list_tools_metrics_and_calls() {
    let (mut client, channel, app) = down_stack().await;
    let server = app
        .runner()
        .tools
        .mcp
        .get("never_up")
        .expect("configured")
        .clone();
    // Down, and tried again with backoff.
    let mut watch = server.watch();
    let down = watch
        .wait_for(|s| s.state == agent_runner::tools::mcp::ServerState::Down && s.connects >= 2);
    assert!(
        tokio::time::timeout(PATIENCE, down).await.is_ok(),
        "never down twice: {:?}",
        server.snapshot()
    );

    // ListTools: the server, its state and why; no tools.
    let listed = client
        .list_tools(ListToolsRequest {})
        .await
        .expect("ListTools")
        .into_inner();
    assert!(listed.tools.is_empty(), "{listed:?}");
    let status = &listed.servers[0];
    assert_eq!(status.name, "never_up");
    assert_eq!(status.transport, "stdio");
    assert_ne!(status.state, McpServerState::Ready as i32, "{status:?}");
    assert!(status.connects >= 2, "{status:?}");

    // Metrics: up 0, failed attempts counted.
    let metrics = parley_grpc::telemetry::metrics();
    assert_eq!(
        metrics.mcp_server_up.with_label_values(&["never_up"]).get(),
        0
    );
    assert!(
        metrics
            .mcp_server_connects
            .with_label_values(&["never_up", "failed"])
            .get()
            >= 2
    );
    let text = metrics.render();
    assert!(
        text.contains("parley_mcp_server_up{server=\"never_up\"} 0"),
        "{text}"
    );
    assert!(
        text.contains("parley_mcp_server_connects_total{outcome=\"failed\",server=\"never_up\"}"),
        "{text}"
    );

    // The runner itself stays SERVING: turns run, only this server's tools fail.
    let health = parley_testkit::raw::call(
        channel,
        "/grpc.health.v1.Health/Check",
        vec![parley_testkit::raw::field(1, agent_runner::app::SERVICE_NAME.as_bytes()).into()],
    )
    .await
    .expect("Health/Check");
    // HealthCheckResponse { status: SERVING (1) }
    assert_eq!(
        health,
        vec![prost::bytes::Bytes::from_static(&[0x08, 0x01])]
    );

    // A call to one of its tools fails at once with a clear error, and the
    // turn goes on.
    let request = RunRequest {
        messages: vec![pb::Message {
            role: pb::Role::User as i32,
            text: "down please".into(),
            ..Default::default()
        }],
        tools: vec![pb::ToolDefinition {
            name: "never_up__echo".into(),
            endpoint: Some(pb::ToolEndpoint {
                kind: Some(pb::tool_endpoint::Kind::Mcp("never_up/echo".into())),
            }),
            ..Default::default()
        }],
        ..Default::default()
    };
    let mut stream = client.run(request).await.expect("Run").into_inner();
    let (_, complete) = until_complete(&mut stream).await;
    assert!(!complete.success);
    assert_eq!(complete.error_reason, "UNAVAILABLE", "{complete:?}");
    assert!(
        complete.error.contains("the MCP server `never_up` is"),
        "{complete:?}"
    );
    assert_eq!(finished(&mut stream).await.text, "Went on.");
}

#[tokio::test]
async fn a_stdio_server_gets_secrets_from_named_variables_only() {
    // Needs no Python: `sh` writes what it was given and exits.
    let dir = tempfile::tempdir().expect("tempdir");
    let seen = dir.path().join("seen");
    let mut secrets = McpServerConfig::stdio(vec![
        "sh".into(),
        "-c".into(),
        format!(
            "printf '%s|%s|%s' \"$API_TOKEN\" \"$OPENAI_API_KEY\" \"$PARLEY_TEST_TIME_TOKEN\" > '{}'",
            seen.display()
        ),
    ]);
    secrets
        .env
        .insert("API_TOKEN".into(), "PARLEY_TEST_TIME_TOKEN".into());
    secrets.restart_backoff = Duration::from_secs(30);
    let mut missing = McpServerConfig::stdio(vec!["sh".into(), "-c".into(), "exit 0".into()]);
    missing
        .env
        .insert("API_TOKEN".into(), "PARLEY_TEST_UNSET_TOKEN".into());
    missing.restart_backoff = Duration::from_secs(30);
    let mut config = RunnerConfig::scripted_demo();
    config.mcp_servers.insert("secrets".into(), secrets);
    config.mcp_servers.insert("missing".into(), missing);
    // The runner's environment: the server's variable, a provider's key.
    let app = RunnerApp::build(&config, |name| match name {
        "PARLEY_TEST_TIME_TOKEN" => Some("s3cret".to_owned()),
        "OPENAI_API_KEY" => Some("sk-provider".to_owned()),
        "PATH" => std::env::var("PATH").ok(),
        _ => None,
    })
    .expect("build");
    let written = async {
        loop {
            if let Ok(text) = std::fs::read_to_string(&seen)
                && text.matches('|').count() == 2
            {
                return text;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    };
    let text = tokio::time::timeout(PATIENCE, written)
        .await
        .expect("the server never ran");
    // Its API_TOKEN is the named variable's value; neither the provider's
    // key nor the variable itself reaches the child.
    assert_eq!(text, "s3cret||");

    let server = app
        .runner()
        .tools
        .mcp
        .get("missing")
        .expect("configured")
        .clone();
    let mut watch = server.watch();
    let down = watch.wait_for(|s| s.state == agent_runner::tools::mcp::ServerState::Down);
    assert!(tokio::time::timeout(PATIENCE, down).await.is_ok());
    let error = server.snapshot().error.clone();
    assert!(
        error.contains("environment variable `PARLEY_TEST_UNSET_TOKEN` is not set"),
        "{error}"
    );
}

async fn a_result_beyond_the_message_limit_fails_the_call(transport: Transport) {
    let Some(stack) = stack("mcp_huge", transport, Duration::from_secs(30)).await else {
        return;
    };
    // 2 MB: more than max_output_bytes and the envelope's room, so the
    // message itself is refused: the call fails at once (not at the
    // tool's time-out), the turn goes on.
    let started = std::time::Instant::now();
    let mut stream = stack.run("huge please").await;
    let (_, complete) = until_complete(&mut stream).await;
    assert_eq!(complete.error_reason, "UNAVAILABLE", "{complete:?}");
    let expected = match transport {
        Transport::Stdio => "the MCP server `fixture` sent a message over",
        Transport::Http => "sent a message over max_output_bytes",
    };
    assert!(complete.error.contains(expected), "{complete:?}");
    assert_eq!(finished(&mut stream).await.text, "Too huge.");
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "{:?}",
        started.elapsed()
    );
    // The connection was closed; the next call works on a new one.
    stack.ready(2).await;
    let mut stream = stack.run("forecast please").await;
    let (_, complete) = until_complete(&mut stream).await;
    assert!(complete.success, "{complete:?}");
    finished(&mut stream).await;
}

#[tokio::test]
async fn stdio_a_result_beyond_the_message_limit_fails_the_call() {
    a_result_beyond_the_message_limit_fails_the_call(Transport::Stdio).await;
}

#[tokio::test]
async fn http_a_result_beyond_the_message_limit_fails_the_call() {
    a_result_beyond_the_message_limit_fails_the_call(Transport::Http).await;
}
