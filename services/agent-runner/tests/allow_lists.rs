//! The runner is not an open proxy: a `RunRequest` may name only the tool
//! endpoints (`tools.allowed_endpoints`, `tools.registry`) and the models
//! (`models.allowed`) the runner's configuration allows. Everything runs
//! for real: the runner from a configuration file on a TCP port, a real
//! ToolService, and a bare TCP listener standing for a server the runner
//! must never dial.

mod support;

use std::{io::ErrorKind, path::Path};

use agent_runner::{
    app::RunnerApp,
    config::{Flags, RunnerConfig},
};
use futures::StreamExt;
use parley_grpc::config::ServiceConfig;
use parley_proto::runner::v1::{
    self as pb, RunEvent, RunRequest, agent_runner_client::AgentRunnerClient,
    run_event::Event as Ev,
};
use tonic::Code;
use tonic_types::StatusExt;

/// A script whose turns call the tool `lookup` once, then answer.
const CALLS_LOOKUP: &str = r#"
model = "scripted-allow"
[default]
steps = [
  { tool_call = { name = "lookup", id = "c1", input = { query = "x" } } },
  { text = "done" },
]
"#;

/// A listener the runner must never reach: `accepted_nothing` asks the
/// kernel whether a connection is waiting (non-blocking `accept`).
struct Trap(std::net::TcpListener);

impl Trap {
    fn new() -> Self {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind the trap");
        listener.set_nonblocking(true).expect("non-blocking");
        Self(listener)
    }

    fn port(&self) -> u16 {
        self.0.local_addr().expect("address").port()
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port())
    }

    fn assert_accepted_nothing(&self) {
        match self.0.accept() {
            Err(error) if error.kind() == ErrorKind::WouldBlock => {}
            Ok((_, peer)) => panic!("the runner connected to the trap from {peer}"),
            Err(error) => panic!("accept on the trap: {error}"),
        }
    }
}

/// The runner of the configuration file `runner.toml` in `dir` (with
/// `text` and the script `script.toml` beside it), served on port 0.
async fn runner_from_file(dir: &Path, text: &str) -> AgentRunnerClient<tonic::transport::Channel> {
    std::fs::write(dir.join("script.toml"), CALLS_LOOKUP).expect("write the script");
    let file = dir.join("runner.toml");
    let text =
        format!("{text}\n[providers.scripted]\nkind = \"scripted\"\nscript = \"script.toml\"\n");
    std::fs::write(&file, text).expect("write the configuration");
    let config =
        RunnerConfig::load(Some(&file), [], Flags::default()).expect("valid configuration");
    serve(&config).await
}

async fn serve(config: &RunnerConfig) -> AgentRunnerClient<tonic::transport::Channel> {
    let app = RunnerApp::build(config, |_| None).expect("runner");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(parley_grpc::serve(
        listener,
        app.routes(),
        parley_grpc::ServeOptions::new("agent-runner-allow-test", vec![]),
        std::future::pending(),
    ));
    AgentRunnerClient::connect(format!("http://{addr}"))
        .await
        .expect("connect")
}

fn remote_tool(name: &str, address: &str) -> pb::ToolDefinition {
    pb::ToolDefinition {
        name: name.into(),
        endpoint: Some(pb::ToolEndpoint {
            kind: Some(pb::tool_endpoint::Kind::Grpc(address.into())),
        }),
        ..Default::default()
    }
}

fn request(tools: Vec<pb::ToolDefinition>) -> RunRequest {
    RunRequest {
        messages: vec![pb::Message {
            role: pb::Role::User as i32,
            text: "look it up".into(),
            ..Default::default()
        }],
        tools,
        ..Default::default()
    }
}

fn with_model(mut request: RunRequest, provider: &str, model: &str) -> RunRequest {
    request.model = Some(pb::ModelRef {
        provider: provider.into(),
        model: model.into(),
        parameters: None,
    });
    request
}

/// Every event of a turn that must run to its end.
async fn run_to_end(
    client: &mut AgentRunnerClient<tonic::transport::Channel>,
    request: RunRequest,
) -> Vec<RunEvent> {
    let mut stream = client.run(request).await.expect("run").into_inner();
    let mut events = Vec::new();
    while let Some(event) = stream.next().await {
        events.push(event.expect("event"));
    }
    events
}

fn finished_text(events: &[RunEvent]) -> String {
    match events.last().and_then(|e| e.event.clone()) {
        Some(Ev::Finished(finished)) => finished.text,
        other => panic!("expected the turn to finish, got {other:?}"),
    }
}

fn assert_endpoint_refused(status: &tonic::Status, tool: &str, port: u16) {
    assert_eq!(status.code(), Code::FailedPrecondition, "{status:?}");
    let info = status.get_details_error_info().expect("error info");
    assert_eq!(info.reason, "TOOL_ENDPOINT_NOT_ALLOWED");
    assert_eq!(info.metadata.get("tool").map(String::as_str), Some(tool));
    assert!(
        status.message().contains(&format!("`{tool}`")),
        "{status:?}"
    );
    assert!(
        !status.message().contains(&port.to_string()) && !status.message().contains("127.0.0.1"),
        "the refusal echoes the address: {status:?}"
    );
}

#[tokio::test]
async fn a_runner_without_an_allow_list_dials_no_tool_server_a_request_names() {
    let trap = Trap::new();
    let dir = tempfile::tempdir().expect("directory");
    std::fs::write(dir.path().join("script.toml"), CALLS_LOOKUP).expect("script");
    let mut config = RunnerConfig::scripted_demo();
    config.providers.insert(
        "scripted".into(),
        agent_runner::config::ProviderConfig::scripted(Some(dir.path().join("script.toml"))),
    );
    let mut client = serve(&config).await;

    let refused = client
        .run(request(vec![remote_tool("lookup", &trap.url())]))
        .await
        .expect_err("a tool endpoint no configuration allows");
    assert_endpoint_refused(&refused, "lookup", trap.port());
    trap.assert_accepted_nothing();
}

#[tokio::test]
async fn an_allowed_endpoint_is_called_and_one_off_the_list_is_refused_undialled() {
    let (tools, record) = parley_testkit::tools::start(1).await;
    let tools_port = tools.rsplit(':').next().expect("port").to_owned();
    let trap = Trap::new();
    let dir = tempfile::tempdir().expect("directory");
    let mut client = runner_from_file(
        dir.path(),
        &format!(
            "[tools]\nallowed_endpoints = [\"127.0.0.1:{tools_port}\", \"*.tools.invalid:*\"]\n"
        ),
    )
    .await;

    let events = run_to_end(&mut client, request(vec![remote_tool("lookup", &tools)])).await;
    assert_eq!(finished_text(&events), "done");
    assert_eq!(record.names(), vec!["lookup".to_owned()]);

    // The same server under another name is another endpoint.
    let by_name = format!("http://localhost:{tools_port}");
    let refused = client
        .run(request(vec![
            remote_tool("lookup", &tools),
            remote_tool("other", &by_name),
        ]))
        .await
        .expect_err("localhost is not 127.0.0.1");
    assert_endpoint_refused(&refused, "other", tools_port.parse().expect("port"));

    let refused = client
        .run(request(vec![remote_tool("lookup", &trap.url())]))
        .await
        .expect_err("the trap is on no list");
    assert_endpoint_refused(&refused, "lookup", trap.port());
    trap.assert_accepted_nothing();
    assert_eq!(record.names(), vec!["lookup".to_owned()], "one call in all");
}

#[tokio::test]
async fn the_registry_s_grpc_endpoints_are_allowed() {
    let (tools, record) = parley_testkit::tools::start(1).await;
    let trap = Trap::new();
    let dir = tempfile::tempdir().expect("directory");
    std::fs::write(
        dir.path().join("registry.yaml"),
        format!(
            "version: 1\ntools:\n  current_time: {{ builtin: current_time }}\n  lookup_rows:\n    description: rows\n    grpc: {tools}\n    timeout: 5s\n"
        ),
    )
    .expect("write the registry");
    let mut client = runner_from_file(dir.path(), "[tools]\nregistry = \"registry.yaml\"\n").await;

    let events = run_to_end(&mut client, request(vec![remote_tool("lookup", &tools)])).await;
    assert_eq!(finished_text(&events), "done");
    assert_eq!(record.names(), vec!["lookup".to_owned()]);

    let refused = client
        .run(request(vec![remote_tool("lookup", &trap.url())]))
        .await
        .expect_err("the trap is not in the registry");
    assert_endpoint_refused(&refused, "lookup", trap.port());
    trap.assert_accepted_nothing();
}

fn assert_model_refused(status: &tonic::Status, field: &str, model: &str) {
    assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
    assert_eq!(
        parley_grpc::status::reason(status).as_deref(),
        Some("MODEL_NOT_ALLOWED"),
        "{status:?}"
    );
    let violations = status.get_details_bad_request().expect("bad request");
    assert_eq!(violations.field_violations[0].field, field);
    assert!(
        status.message().contains(&format!("`{model}`")),
        "{status:?}"
    );
}

#[tokio::test]
async fn by_default_only_the_providers_default_models_are_served() {
    let mut client = serve(&RunnerConfig::scripted_demo()).await;
    let refused = client
        .run(with_model(request(vec![]), "scripted", "gpt-4o"))
        .await
        .expect_err("a model no provider has as its default");
    assert_model_refused(&refused, "model", "scripted/gpt-4o");

    let mut fallback = with_model(request(vec![]), "scripted", "scripted-demo");
    fallback.fallbacks = vec![pb::ModelRef {
        provider: String::new(),
        model: "other".into(),
        parameters: None,
    }];
    let refused = client
        .run(fallback)
        .await
        .expect_err("a fallback off the list");
    assert_model_refused(&refused, "fallbacks[0]", "scripted/other");

    // The default model, named or not, is served.
    for request in [
        request(vec![]),
        with_model(request(vec![]), "", "scripted-demo"),
        with_model(request(vec![]), "scripted", "scripted-demo"),
    ] {
        let events = run_to_end(&mut client, request).await;
        assert!(
            matches!(
                events.last().and_then(|e| e.event.clone()),
                Some(Ev::Finished(_))
            ),
            "{events:?}"
        );
    }
}

#[tokio::test]
async fn models_allowed_takes_exact_names_and_prefixes() {
    let dir = tempfile::tempdir().expect("directory");
    let mut client = runner_from_file(
        dir.path(),
        "[models]\nallowed = [\"scripted/scripted-*\", \"scripted/exact\"]\n",
    )
    .await;
    for model in ["scripted-allow", "scripted-other", "exact", ""] {
        let events = run_to_end(&mut client, with_model(request(vec![]), "scripted", model)).await;
        assert!(
            matches!(
                events.last().and_then(|e| e.event.clone()),
                Some(Ev::Finished(_))
            ),
            "{model}: {events:?}"
        );
    }
    for model in ["exact-2", "scripted", "other"] {
        let refused = client
            .run(with_model(request(vec![]), "scripted", model))
            .await
            .expect_err("off the list");
        assert_model_refused(&refused, "model", &format!("scripted/{model}"));
    }
}
