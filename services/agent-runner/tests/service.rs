//! The AgentRunner service: request validation, admission, the gRPC
//! deadline, and cancellation when the client drops the stream (in process
//! on paused time, and over real gRPC with a remote tool and a fake HTTP
//! provider that records when its connection closed).

mod support;

use std::{
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use agent_runner::{
    agent_loop::Runner,
    allow::{Allowed, AllowedEndpoints, AllowedModels},
    provider::Providers,
    provider::{
        http::HttpProviderConfig,
        openai::OpenAiProvider,
        scripted::{EMBEDDED_DEMO_SCRIPT, Script, ScriptedProvider},
    },
    service::RunnerService,
    tools::{CallContext, LocalTool, ProgressSender, ToolFailure, ToolOutput, ToolRuntime},
    turn::Limits,
};
use futures::StreamExt;
use parley_proto::runner::v1::{
    self as pb, RunEvent, RunRequest, agent_runner_client::AgentRunnerClient,
    agent_runner_server::AgentRunner, run_event::Event as Ev,
};
use serde_json::{Value, json};
use support::turns::{Recording, retry, scripted};
use tokio::sync::Notify;
use tonic::{Code, Request};
use tonic_types::StatusExt;

/// A local tool that never finishes and records when it is dropped.
#[derive(Debug, Default)]
struct Hang {
    dropped: Arc<AtomicUsize>,
    notify: Arc<Notify>,
}

struct Flag(Arc<AtomicUsize>, Arc<Notify>);
impl Drop for Flag {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
        self.1.notify_one();
    }
}

#[async_trait::async_trait]
impl LocalTool for Hang {
    fn name(&self) -> &str {
        "hang"
    }
    fn description(&self) -> &str {
        "never finishes"
    }
    fn input_schema(&self) -> Value {
        json!({"type": "object"})
    }
    async fn run(
        &self,
        _input: Value,
        _ctx: CallContext,
        progress: ProgressSender,
    ) -> Result<ToolOutput, ToolFailure> {
        let _flag = Flag(self.dropped.clone(), self.notify.clone());
        progress
            .report("waiting", "waiting forever", Some(0.0))
            .await;
        std::future::pending().await
    }
}

fn service(provider: Arc<Recording>, tools: ToolRuntime, max_runs: usize) -> RunnerService {
    let runner = Runner {
        providers: Arc::new(Providers::single("scripted", provider, "scripted-demo")),
        tools,
        retry: retry(),
        prices: Default::default(),
    };
    // The tests' tool servers listen on 127.0.0.1, and they name scripted
    // models of their own.
    let allowed = Allowed {
        endpoints: AllowedEndpoints::parse(["127.0.0.1:*"]).expect("endpoints"),
        models: AllowedModels::parse(["scripted/*"], &["scripted"]).expect("models"),
        routes: Default::default(),
        prices: Default::default(),
    };
    RunnerService::new(Arc::new(runner), Limits::default(), max_runs, 64).with_allowed(allowed)
}

fn user(text: &str) -> pb::Message {
    pb::Message {
        role: pb::Role::User as i32,
        text: text.into(),
        ..Default::default()
    }
}

fn builtin_tool(name: &str, builtin: &str) -> pb::ToolDefinition {
    pb::ToolDefinition {
        name: name.into(),
        endpoint: Some(pb::ToolEndpoint {
            kind: Some(pb::tool_endpoint::Kind::Builtin(builtin.into())),
        }),
        ..Default::default()
    }
}

fn request(text: &str, tools: Vec<pb::ToolDefinition>) -> RunRequest {
    RunRequest {
        messages: vec![user(text)],
        tools,
        ..Default::default()
    }
}

/// Reads events until `stop` matches one; returns them all.
async fn read_until<S>(stream: &mut S, stop: impl Fn(&RunEvent) -> bool) -> Vec<RunEvent>
where
    S: futures::Stream<Item = Result<RunEvent, tonic::Status>> + Unpin,
{
    let mut events = Vec::new();
    while let Some(item) = stream.next().await {
        let event = item.expect("event");
        let done = stop(&event);
        events.push(event);
        if done {
            break;
        }
    }
    events
}

#[tokio::test]
async fn invalid_requests_are_refused_with_details() {
    let provider = scripted(
        "no_structured_output_models = [\"plain\"]\n[default]\nsteps = [{ text = \"x\" }]",
    );
    let svc = service(provider, ToolRuntime::with_builtins(), 4);

    let empty = svc
        .run(Request::new(RunRequest::default()))
        .await
        .err()
        .expect("refused");
    assert_eq!(empty.code(), Code::InvalidArgument);
    assert_eq!(
        parley_grpc::status::reason(&empty).as_deref(),
        Some("INVALID_REQUEST")
    );
    assert_eq!(
        empty
            .get_details_bad_request()
            .expect("violations")
            .field_violations[0]
            .field,
        "messages"
    );

    let duplicate = request(
        "hi",
        vec![
            builtin_tool("t", "calculator"),
            builtin_tool("t", "current_time"),
        ],
    );
    let status = svc
        .run(Request::new(duplicate))
        .await
        .err()
        .expect("refused");
    assert_eq!(
        status
            .get_details_bad_request()
            .expect("violations")
            .field_violations[0]
            .field,
        "tools[1].name"
    );

    let mut unknown = request("hi", vec![]);
    unknown.model = Some(pb::ModelRef {
        provider: "nope".into(),
        ..Default::default()
    });
    let status = svc.run(Request::new(unknown)).await.err().expect("refused");
    assert_eq!(
        (
            status.code(),
            parley_grpc::status::reason(&status).as_deref()
        ),
        (Code::InvalidArgument, Some("UNKNOWN_PROVIDER"))
    );

    let mut structured = request("hi", vec![]);
    structured.model = Some(pb::ModelRef {
        model: "plain".into(),
        ..Default::default()
    });
    structured.output_schema = Some(parley_proto::json::to_struct_wrapped(
        &json!({"type": "object"}),
    ));
    let status = svc
        .run(Request::new(structured))
        .await
        .err()
        .expect("refused");
    assert_eq!(status.code(), Code::FailedPrecondition);
    assert_eq!(
        parley_grpc::status::reason(&status).as_deref(),
        Some("STRUCTURED_OUTPUT_UNSUPPORTED")
    );
    assert!(status.message().contains("plain"), "{}", status.message());
}

#[tokio::test(start_paused = true)]
async fn dropping_the_stream_cancels_a_running_tool_within_100_ms() {
    let hang = Arc::new(Hang::default());
    let mut tools = ToolRuntime::with_builtins();
    tools.register(hang.clone());
    let provider = scripted(
        "[default]\nsteps = [{ tool_call = { name = \"wait\", id = \"w\" } }, { text = \"never\" }]",
    );
    let svc = service(provider, tools, 4);
    let mut stream = svc
        .run(Request::new(request(
            "go",
            vec![builtin_tool("wait", "hang")],
        )))
        .await
        .expect("accepted")
        .into_inner();
    let events = read_until(&mut stream, |e| {
        matches!(e.event, Some(Ev::ToolProgress(_)))
    })
    .await;
    assert!(
        events
            .iter()
            .any(|e| matches!(e.event, Some(Ev::ToolStart(_))))
    );
    let dropped = hang.notify.notified();
    drop(stream);
    let cancelled = tokio::time::timeout(Duration::from_millis(100), dropped).await;
    assert!(
        cancelled.is_ok(),
        "the tool was not dropped within 100 ms of the client leaving"
    );
    assert_eq!(hang.dropped.load(Ordering::SeqCst), 1);
}

#[tokio::test(start_paused = true)]
async fn dropping_the_stream_cancels_the_model_call_within_100_ms() {
    let provider = scripted(
        "[default]\nsteps = [{ text = \"Hello\" }, { delay = \"60s\" }, { text = \" world\" }]",
    );
    let svc = service(provider.clone(), ToolRuntime::with_builtins(), 4);
    let mut stream = svc
        .run(Request::new(request("hi", vec![])))
        .await
        .expect("accepted")
        .into_inner();
    read_until(&mut stream, |e| matches!(e.event, Some(Ev::TextDelta(_)))).await;
    let dropped = provider.dropped_notify.notified();
    drop(stream);
    let cancelled = tokio::time::timeout(Duration::from_millis(100), dropped).await;
    assert!(
        cancelled.is_ok(),
        "the model stream was not dropped within 100 ms"
    );
    assert_eq!(provider.dropped.load(Ordering::SeqCst), 1);
}

#[tokio::test(start_paused = true)]
async fn the_grpc_deadline_bounds_the_turn() {
    let provider = scripted(
        "[default]\nsteps = [{ text = \"slow\" }, { delay = \"600s\" }, { text = \"!\" }]",
    );
    let svc = service(provider, ToolRuntime::with_builtins(), 4);
    let mut req = Request::new(request("hi", vec![]));
    req.metadata_mut()
        .insert("grpc-timeout", "2S".parse().expect("metadata"));
    let started = tokio::time::Instant::now();
    let mut stream = svc.run(req).await.expect("accepted").into_inner();
    let events = read_until(&mut stream, |e| {
        matches!(e.event, Some(Ev::Error(_) | Ev::Finished(_)))
    })
    .await;
    assert!(started.elapsed() < Duration::from_secs(10));
    match &events.last().and_then(|e| e.event.clone()) {
        Some(Ev::Error(error)) => {
            assert_eq!(error.reason, "DEADLINE_EXCEEDED");
            assert_eq!(error.partial_text, "slow");
        }
        other => panic!("expected an error, got {other:?}"),
    }
}

#[tokio::test(start_paused = true)]
async fn turns_beyond_the_limit_are_refused_as_busy() {
    let provider = scripted("[default]\nsteps = [{ delay = \"600s\" }, { text = \"x\" }]");
    let svc = service(provider, ToolRuntime::with_builtins(), 1);
    let _first = svc
        .run(Request::new(request("a", vec![])))
        .await
        .expect("accepted");
    let busy = svc
        .run(Request::new(request("b", vec![])))
        .await
        .err()
        .expect("refused");
    assert_eq!(
        (busy.code(), parley_grpc::status::reason(&busy).as_deref()),
        (Code::ResourceExhausted, Some("RUNNER_BUSY"))
    );
    drop(_first);
    // The turn's task notices the dropped stream and ends; its permit is
    // released then. Poll (bounded) rather than guess how long that takes.
    let released = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            if svc.run(Request::new(request("c", vec![]))).await.is_ok() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
    assert!(released.is_ok(), "the permit is released with the turn");
}

#[tokio::test]
async fn a_full_runner_refuses_first_and_counts_a_turn_until_its_stream_is_done() {
    let provider = scripted("[default]\nsteps = [{ text = \"done\" }]");
    let svc = service(provider, ToolRuntime::with_builtins(), 1);
    let mut first = svc
        .run(Request::new(request("a", vec![])))
        .await
        .expect("accepted")
        .into_inner();
    // The turn ends at once, but its client has not read its events: it
    // still counts.
    while let Some(event) = first.next().await {
        if matches!(event.expect("event").event, Some(Ev::Finished(_))) {
            break;
        }
    }
    // Refused before the request is even read: an invalid request gets
    // RUNNER_BUSY, not INVALID_REQUEST.
    let invalid = RunRequest::default();
    let busy = svc.run(Request::new(invalid)).await.err().expect("refused");
    assert_eq!(
        parley_grpc::status::reason(&busy).as_deref(),
        Some("RUNNER_BUSY")
    );
    drop(first);
    // The stream is done (and its task ends): the slot frees and requests
    // are read again (polled, bounded).
    let reason = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            let refused = svc
                .run(Request::new(RunRequest::default()))
                .await
                .err()
                .expect("an invalid request");
            let reason = parley_grpc::status::reason(&refused).unwrap_or_default();
            if reason != "RUNNER_BUSY" {
                return reason;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("the slot is freed");
    assert_eq!(reason, "INVALID_REQUEST");
}

/// Starts the service on port 0 and returns a client.
async fn serve(svc: RunnerService) -> AgentRunnerClient<tonic::transport::Channel> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let routes = tonic::service::Routes::new(
        parley_proto::runner::v1::agent_runner_server::AgentRunnerServer::new(svc),
    );
    let options =
        parley_grpc::ServeOptions::new("agent-runner-test", vec!["parley.runner.v1.AgentRunner"]);
    tokio::spawn(parley_grpc::serve(
        listener,
        routes,
        options,
        std::future::pending(),
    ));
    AgentRunnerClient::connect(format!("http://{addr}"))
        .await
        .expect("connect")
}

#[tokio::test]
async fn grpc_run_streams_the_demo_turn_with_tool_progress() {
    let provider = Recording::new(Arc::new(ScriptedProvider::new(
        "scripted",
        Script::from_toml(EMBEDDED_DEMO_SCRIPT).expect("demo script"),
    )));
    let mut client = serve(service(provider, ToolRuntime::with_builtins(), 4)).await;
    let req = request(
        "Create a job tracker",
        vec![builtin_tool("current_time", "current_time")],
    );
    let mut stream = client.run(req).await.expect("run").into_inner();
    let events = read_until(&mut stream, |e| {
        matches!(e.event, Some(Ev::Finished(_) | Ev::Error(_)))
    })
    .await;
    for (i, event) in events.iter().enumerate() {
        assert_eq!(event.seq, i as u64 + 1);
    }
    assert!(
        events
            .iter()
            .any(|e| matches!(&e.event, Some(Ev::ToolProgress(p)) if p.stage == "reading_clock"))
    );
    assert!(events.iter().any(
        |e| matches!(&e.event, Some(Ev::ToolComplete(c)) if c.success && c.name == "current_time")
    ));
    let text: String = events
        .iter()
        .filter_map(|e| match &e.event {
            Some(Ev::TextDelta(t)) => Some(t.as_str()),
            _ => None,
        })
        .collect();
    match &events.last().and_then(|e| e.event.clone()) {
        Some(Ev::Finished(finished)) => {
            assert_eq!(finished.text, text);
            assert!(finished.text.contains("SCHEMA_PROPOSAL:"));
            assert_eq!(finished.iterations, 2);
            assert_eq!(finished.stop_reason, pb::StopReason::EndTurn as i32);
        }
        other => panic!("expected finished, got {other:?}"),
    }
}

#[tokio::test]
async fn grpc_cancellation_reaches_a_remote_tool() {
    let (address, record) = parley_testkit::tools::start(2).await;
    let provider = scripted(
        "[default]\nsteps = [{ tool_call = { name = \"hang\", id = \"r1\" } }, { text = \"never\" }]",
    );
    let mut client = serve(service(provider, ToolRuntime::with_builtins(), 4)).await;
    let hang = pb::ToolDefinition {
        name: "hang".into(),
        endpoint: Some(pb::ToolEndpoint {
            kind: Some(pb::tool_endpoint::Kind::Grpc(address)),
        }),
        ..Default::default()
    };
    let mut stream = client
        .run(request("go", vec![hang]))
        .await
        .expect("run")
        .into_inner();
    read_until(&mut stream, |e| {
        matches!(e.event, Some(Ev::ToolProgress(_)))
    })
    .await;
    let cancelled = record.cancelled_notify.notified();
    let dropped_at = std::time::Instant::now();
    drop(stream);
    let seen = tokio::time::timeout(Duration::from_secs(10), cancelled).await;
    assert!(seen.is_ok(), "the remote tool never saw the cancellation");
    eprintln!(
        "remote tool cancelled {:?} after the client dropped the stream",
        dropped_at.elapsed()
    );
    assert_eq!(
        *record.cancelled.lock().expect("lock"),
        vec!["r1".to_owned()]
    );
}

#[tokio::test]
async fn grpc_cancellation_closes_the_provider_connection() {
    let partial = "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"Hel\"},\"finish_reason\":null}]}\n\n";
    let server = support::replay::ReplayServer::start(vec![
        support::replay::Reply::sse(partial).end(support::replay::End::Hang),
    ])
    .await;
    let openai =
        OpenAiProvider::new(HttpProviderConfig::new("fake", server.url("/v1"))).expect("provider");
    let provider = Recording::new(Arc::new(openai));
    let runner = Runner {
        providers: Arc::new(Providers::single("fake", provider, "m")),
        tools: ToolRuntime::with_builtins(),
        retry: retry(),
        prices: Default::default(),
    };
    let svc = RunnerService::new(Arc::new(runner), Limits::default(), 4, 64);
    let mut client = serve(svc).await;
    let mut stream = client
        .run(request("hi", vec![]))
        .await
        .expect("run")
        .into_inner();
    let events = read_until(&mut stream, |e| matches!(e.event, Some(Ev::TextDelta(_)))).await;
    assert!(
        matches!(&events.last().and_then(|e| e.event.clone()), Some(Ev::TextDelta(t)) if t == "Hel")
    );
    let dropped_at = std::time::Instant::now();
    drop(stream);
    let closed = server.wait_client_closed(0, Duration::from_secs(10)).await;
    let closed_at = closed.expect("the provider connection was not closed");
    eprintln!(
        "provider connection closed {:?} after the client dropped the stream",
        closed_at.saturating_duration_since(dropped_at)
    );
}

#[tokio::test]
async fn a_request_over_the_configured_size_is_refused_as_too_large_and_one_under_it_runs() {
    use agent_runner::{app::RunnerApp, config::RunnerConfig};

    let mut config = RunnerConfig::scripted_demo();
    config.max_request_bytes = 64 * 1024;
    let app = RunnerApp::build(&config, |_| None).expect("runner");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let options = parley_grpc::ServeOptions::new("agent-runner-size-test", vec![]);
    tokio::spawn(parley_grpc::serve(
        listener,
        app.routes(),
        options,
        std::future::pending(),
    ));
    let mut client = AgentRunnerClient::connect(format!("http://{addr}"))
        .await
        .expect("connect");

    let refused = client
        .run(request(&"x".repeat(100 * 1024), vec![]))
        .await
        .expect_err("over the limit");
    assert_eq!(refused.code(), Code::ResourceExhausted, "{refused:?}");
    assert_eq!(
        parley_grpc::status::reason(&refused).as_deref(),
        Some(parley_grpc::status::REQUEST_TOO_LARGE)
    );
    assert!(
        refused.get_details_retry_info().is_none(),
        "not worth retrying"
    );

    let mut stream = client
        .run(request(&"x".repeat(32 * 1024), vec![]))
        .await
        .expect("under the limit")
        .into_inner();
    let events = read_until(&mut stream, |event| {
        matches!(event.event, Some(Ev::Finished(_) | Ev::Error(_)))
    })
    .await;
    assert!(
        matches!(
            events.last().and_then(|event| event.event.as_ref()),
            Some(Ev::Finished(_))
        ),
        "{events:?}"
    );
}

/// A local tool that counts its calls.
#[derive(Debug, Default)]
struct Count(AtomicUsize);

#[async_trait::async_trait]
impl LocalTool for Count {
    fn name(&self) -> &str {
        "count"
    }
    fn description(&self) -> &str {
        "counts its calls"
    }
    fn input_schema(&self) -> Value {
        json!({"type": "object"})
    }
    async fn run(
        &self,
        _input: Value,
        _ctx: CallContext,
        _progress: ProgressSender,
    ) -> Result<ToolOutput, ToolFailure> {
        let calls = self.0.fetch_add(1, Ordering::SeqCst) + 1;
        Ok(ToolOutput {
            text: format!("call {calls}"),
            payload: None,
            attachments: Vec::new(),
        })
    }
}

#[tokio::test]
async fn a_fenced_turn_starts_no_tool_its_client_did_not_allow() {
    let count = Arc::new(Count::default());
    let mut tools = ToolRuntime::with_builtins();
    tools.register(count.clone());
    let provider = scripted(
        "[default]\nsteps = [{ tool_call = { name = \"count\", id = \"a\" } }, \
         { text = \"Once more.\" }, { tool_call = { name = \"count\", id = \"b\" } }, \
         { text = \"done\" }]",
    );
    let mut client = serve(service(provider, tools, 4)).await;
    let (send, requests) = tokio::sync::mpsc::channel(4);
    send.send(pb::RunFencedRequest {
        message: Some(pb::run_fenced_request::Message::Start(request(
            "count twice",
            vec![builtin_tool("count", "count")],
        ))),
    })
    .await
    .expect("send");
    let mut stream = client
        .run_fenced(tokio_stream::wrappers::ReceiverStream::new(requests))
        .await
        .expect("run")
        .into_inner();
    let mut events = Vec::new();
    while let Some(item) = stream.next().await {
        let event = item.expect("event");
        match &event.event {
            Some(Ev::DispatchPending(pending)) => {
                // Nothing started before the client answered.
                assert_eq!(
                    count.0.load(Ordering::SeqCst),
                    pending.iteration as usize - 1
                );
                send.send(pb::RunFencedRequest {
                    message: Some(pb::run_fenced_request::Message::Decision(
                        pb::DispatchDecision {
                            iteration: pending.iteration,
                            allowed: pending.iteration == 1,
                        },
                    )),
                })
                .await
                .expect("decide");
            }
            Some(Ev::Finished(_) | Ev::Error(_)) => {
                events.push(event);
                break;
            }
            _ => {}
        }
        events.push(event);
    }
    let pending: Vec<_> = events
        .iter()
        .filter_map(|e| match &e.event {
            Some(Ev::DispatchPending(pending)) => Some(pending.call_ids.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(pending, [vec!["a".to_owned()], vec!["b".to_owned()]]);
    assert_eq!(
        count.0.load(Ordering::SeqCst),
        1,
        "only the allowed call ran"
    );
    let starts = events
        .iter()
        .filter(|e| matches!(e.event, Some(Ev::ToolStart(_))))
        .count();
    assert_eq!(starts, 1);
    match events.last().and_then(|e| e.event.clone()) {
        Some(Ev::Error(error)) => assert_eq!(error.reason, "DISPATCH_DENIED"),
        other => panic!("expected the denial, got {other:?}"),
    }
}

#[tokio::test]
async fn files_reach_the_model_and_one_that_takes_none_refuses_or_is_told_of_them() {
    use agent_runner::routes::{InputKind, RouteConfig, Routes};
    let provider = scripted("[default]\nsteps = [{ echo = \"attachments\" }]");
    let runner = Runner {
        providers: Arc::new(Providers::single(
            "scripted",
            provider.clone(),
            "scripted-demo",
        )),
        tools: ToolRuntime::with_builtins(),
        retry: retry(),
        prices: Default::default(),
    };
    let routes = Routes::from_config(
        &std::collections::BTreeMap::from([(
            "plain".to_owned(),
            RouteConfig {
                primary: "scripted/text-only".into(),
                fallbacks: Vec::new(),
                context_window: None,
                max_output_tokens: None,
                input: vec![InputKind::Text],
                prices: None,
                max_image_bytes: None,
                max_image_edge: None,
            },
        )]),
        &runner.providers,
    )
    .expect("routes");
    let allowed = Allowed {
        endpoints: AllowedEndpoints::none(),
        models: AllowedModels::parse(["scripted/*"], &["scripted"]).expect("models"),
        routes,
        prices: Default::default(),
    };
    let svc = RunnerService::new(Arc::new(runner), Limits::default(), 4, 64).with_allowed(allowed);
    let with_files = |model: &str, describe: bool| {
        let mut message = user("What is this?");
        message.attachments = vec![
            pb::Attachment {
                name: "a.png".into(),
                media_type: "image/png".into(),
                data: b"\x89PNG\r\n\x1a\n".to_vec(),
                ..Default::default()
            },
            pb::Attachment {
                name: "b.csv".into(),
                media_type: "text/csv".into(),
                data: b"x,y\n".to_vec(),
                ..Default::default()
            },
        ];
        RunRequest {
            messages: vec![message],
            model: Some(pb::ModelRef {
                provider: "scripted".into(),
                model: model.into(),
                parameters: None,
            }),
            describe_unsupported_attachments: describe,
            ..Default::default()
        }
    };
    let text = |events: &[RunEvent]| {
        events
            .iter()
            .find_map(|event| match &event.event {
                Some(pb::run_event::Event::Finished(finished)) => Some(finished.text.clone()),
                _ => None,
            })
            .expect("finished")
    };

    // A model that takes images gets both files, as they were sent.
    let answer = async |request: RunRequest| {
        let mut stream = svc
            .run(Request::new(request))
            .await
            .expect("runs")
            .into_inner();
        let events = read_until(&mut stream, |event| {
            matches!(event.event, Some(pb::run_event::Event::Finished(_)))
        })
        .await;
        text(&events)
    };
    assert_eq!(
        answer(with_files("scripted-demo", false)).await,
        "a.png (image/png, 8 bytes, sha256 4c4b6a3be131)\nb.csv (text/csv, 4 bytes, sha256 9c6536d38fa3)"
    );

    // A text-only model: refused before any call...
    let calls = provider.requests.lock().expect("requests").len();
    let refused = svc
        .run(Request::new(with_files("text-only", false)))
        .await
        .err()
        .expect("refused");
    assert_eq!(refused.code(), Code::FailedPrecondition);
    assert_eq!(
        parley_grpc::status::reason(&refused).as_deref(),
        Some("ATTACHMENT_UNSUPPORTED")
    );
    assert!(refused.message().contains("text-only"), "{refused:?}");
    assert_eq!(provider.requests.lock().expect("requests").len(), calls);

    // ...or told of the image when the request asks for that.
    assert_eq!(
        answer(with_files("text-only", true)).await,
        "b.csv (text/csv, 4 bytes, sha256 9c6536d38fa3)\n[file a.png, image/png, 8 bytes, not shown to this model]"
    );

    // Over RunFenced the bytes may follow the request, cut anywhere: the
    // turn starts once each file is whole.
    let streamed = |parts: Vec<Vec<u8>>| {
        let mut request = with_files("scripted-demo", false);
        for file in &mut request.messages[0].attachments {
            file.size_bytes = file.data.len() as u64;
            file.data.clear();
        }
        let mut messages = vec![pb::RunFencedRequest {
            message: Some(pb::run_fenced_request::Message::Start(request)),
        }];
        messages.extend(parts.into_iter().map(|data| pb::RunFencedRequest {
            message: Some(pb::run_fenced_request::Message::AttachmentData(
                pb::AttachmentData { data },
            )),
        }));
        messages
    };
    let mut client = serve(svc.clone()).await;
    let (send, requests) = tokio::sync::mpsc::channel(8);
    for message in streamed(vec![
        b"\x89PNG\r".to_vec(),
        b"\n\x1a\nx,".to_vec(),
        b"y\n".to_vec(),
    ]) {
        send.send(message).await.expect("send");
    }
    let mut stream = client
        .run_fenced(tokio_stream::wrappers::ReceiverStream::new(requests))
        .await
        .expect("runs")
        .into_inner();
    let mut finished = None;
    while let Some(item) = stream.next().await {
        if let Some(pb::run_event::Event::Finished(done)) = item.expect("event").event {
            finished = Some(done.text);
        }
    }
    drop(send);
    assert_eq!(
        finished.as_deref(),
        Some(
            "a.png (image/png, 8 bytes, sha256 4c4b6a3be131)\nb.csv (text/csv, 4 bytes, sha256 9c6536d38fa3)"
        )
    );

    // Fewer bytes than the sizes say: refused, the turn never starts.
    let (send, requests) = tokio::sync::mpsc::channel(8);
    for message in streamed(vec![b"\x89PNG".to_vec()]) {
        send.send(message).await.expect("send");
    }
    drop(send);
    let Err(refused) = client
        .run_fenced(tokio_stream::wrappers::ReceiverStream::new(requests))
        .await
    else {
        panic!("a file short of its size is refused");
    };
    assert_eq!(refused.code(), Code::InvalidArgument);
    assert!(
        refused.message().contains("ended after 4 of 8"),
        "{refused:?}"
    );
}

#[tokio::test]
async fn a_fenced_client_that_stalls_inside_its_files_is_cut_at_the_read_timeout_and_frees_its_slot()
 {
    let provider = scripted("[default]\nsteps = [{ text = \"done\" }]");
    let svc = service(provider, ToolRuntime::with_builtins(), 1)
        .with_request_read_timeout(Duration::from_millis(300));
    let mut client = serve(svc).await;
    // A start that announces 100 bytes of a file, then only 10 of them,
    // and a client that keeps its side open.
    let mut start = request("look at this", vec![]);
    start.messages[0].attachments.push(pb::Attachment {
        name: "a.txt".into(),
        media_type: "text/plain".into(),
        size_bytes: 100,
        ..Default::default()
    });
    let (send, requests) = tokio::sync::mpsc::channel(4);
    send.send(pb::RunFencedRequest {
        message: Some(pb::run_fenced_request::Message::Start(start)),
    })
    .await
    .expect("send");
    send.send(pb::RunFencedRequest {
        message: Some(pb::run_fenced_request::Message::AttachmentData(
            pb::AttachmentData {
                data: vec![b'x'; 10],
            },
        )),
    })
    .await
    .expect("send");
    let refused = client
        .run_fenced(tokio_stream::wrappers::ReceiverStream::new(requests))
        .await
        .expect_err("cut at the read timeout");
    assert_eq!(refused.code(), Code::DeadlineExceeded, "{refused:?}");
    assert!(
        refused.message().contains("request_read_timeout"),
        "{refused:?}"
    );
    // The only slot is free again: a plain turn runs.
    let mut stream = client
        .run(request("hello", vec![]))
        .await
        .expect("admitted")
        .into_inner();
    let mut finished = false;
    while let Some(item) = stream.next().await {
        finished |= matches!(item.expect("event").event, Some(Ev::Finished(_)));
    }
    assert!(finished);
    drop(send);
}
