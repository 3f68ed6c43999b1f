//! The W3C trace context of a tool call reaches the MCP server in the
//! request's `_meta`: the fixture server of `tests/fixtures/mcp` (official
//! Python SDK, over stdio) answers with the `traceparent` it read, and it
//! must be the runner's `execute_tool` span.
//!
//! A binary of its own: spans are captured by a thread-local subscriber,
//! and a test running beside it on another thread without one can leave a
//! span's callsite disabled for everyone (`tracing`'s interest cache).
//! Python and the SDK come from `scripts/mcp.sh`; without them the test
//! prints NOT RUN (and fails under CI=true).

use std::{sync::Arc, time::Duration};

use agent_runner::{
    app::RunnerApp,
    config::RunnerConfig,
    provider::{
        Providers,
        scripted::{Script, ScriptedProvider},
    },
    tools::mcp::{McpServerConfig, ServerState},
};
use futures::StreamExt;
use parley_proto::runner::v1::{
    self as pb, ListToolsRequest, RunRequest, agent_runner_client::AgentRunnerClient,
    run_event::Event,
};
use parley_testkit::spans::SpanCapture;

const FIXTURE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/mcp/fixture_server.py"
);

const SCRIPT: &str = r#"
model = "mcp-test"

[default]
steps = [
  { tool_call = { name = "fixture__trace_meta", input = {} } },
  { text = "Traced." },
]
"#;

#[tokio::test]
async fn the_trace_context_of_the_tool_span_reaches_the_server_in_meta() {
    // Spans of this thread (the runner's tasks included: a current-thread
    // runtime) are recorded with their W3C ids.
    let (capture, _guard) = SpanCapture::install();
    let Some(python) = parley_testkit::mcp_python("mcp_trace_meta") else {
        return;
    };
    let gates = tempfile::tempdir().expect("tempdir");
    let mut config = RunnerConfig::scripted_demo();
    config.mcp_servers.insert(
        "fixture".into(),
        McpServerConfig::stdio(vec![
            python.display().to_string(),
            FIXTURE.into(),
            "stdio".into(),
            gates.path().display().to_string(),
        ]),
    );
    let provider = ScriptedProvider::new("scripted", Script::from_toml(SCRIPT).expect("script"));
    let app = RunnerApp::with_providers(
        &config,
        Providers::single("scripted", Arc::new(provider), "mcp-test"),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(parley_grpc::serve(
        listener,
        app.routes(),
        parley_grpc::ServeOptions::new("agent-runner-mcp-trace-test", vec![]),
        std::future::pending(),
    ));
    let server = app.runner().tools.mcp.get("fixture").expect("configured");
    let mut watch = server.watch();
    let ready = watch.wait_for(|s| s.state == ServerState::Ready);
    assert!(
        tokio::time::timeout(Duration::from_secs(60), ready)
            .await
            .is_ok(),
        "the fixture server is not ready: {:?}",
        server.snapshot()
    );

    let mut client = AgentRunnerClient::connect(format!("http://{addr}"))
        .await
        .expect("connect");
    let tools = client
        .list_tools(ListToolsRequest {})
        .await
        .expect("ListTools")
        .into_inner()
        .tools;
    let request = RunRequest {
        messages: vec![pb::Message {
            role: pb::Role::User as i32,
            text: "trace please".into(),
            ..Default::default()
        }],
        tools,
        ..Default::default()
    };
    let mut stream = client.run(request).await.expect("Run").into_inner();
    let mut complete = None;
    let mut finished = None;
    while let Some(event) = stream.next().await {
        match event.expect("event").event {
            Some(Event::ToolComplete(c)) => complete = Some(c),
            Some(Event::Finished(f)) => finished = Some(f),
            Some(Event::Error(error)) => panic!("the turn failed: {error:?}"),
            _ => {}
        }
    }
    let complete = complete.expect("a tool_complete");
    assert!(complete.success, "{complete:?}");
    assert_eq!(finished.expect("finished").text, "Traced.");

    // What the fixture read from `_meta` of its tools/call request.
    let meta: serde_json::Value = serde_json::from_str(&complete.result_text).expect("JSON");
    let traceparent = meta["traceparent"]
        .as_str()
        .unwrap_or_else(|| panic!("no traceparent in _meta: {meta}"));
    let spans = capture.spans();
    let span = spans
        .iter()
        .find(|s| s.name == "execute_tool fixture__trace_meta")
        .unwrap_or_else(|| panic!("no execute_tool span among {spans:?}"));
    assert_eq!(traceparent, span.traceparent());
}
