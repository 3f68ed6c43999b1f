//! Runner overhead per streamed token.
//!
//! A provider that answers instantly (in process, 1 000 one-token text
//! deltas) feeds the real service, measured through gRPC on loopback (a
//! tonic client on the same runtime) and, for comparison, through the loop
//! directly:
//! - `first_token_grpc` / `first_token_loop`: from the moment the provider
//!   yields its first text delta to the moment the client (gRPC) or the
//!   event receiver (loop) holds the matching `text_delta` event; the
//!   provider waits after that delta until it arrived, so it travels alone;
//! - `one_stream`: a whole 1 000-token turn (1 004 events), as events/s;
//! - `concurrent_100`: 100 turns at once, as aggregate events/s;
//! - `refused_grpc`: one `Run` refused `RUNNER_BUSY` by a full runner (its
//!   one slot held by a waiting turn), client and server in this process: what load
//!   shedding costs per refused call, one call in flight at a time, so the
//!   time is the CPU of both ends plus loopback.

use std::{
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use agent_runner::{
    app::RunnerApp,
    config::RunnerConfig,
    events::{EventKind, EventSink},
    provider::ModelChoice,
    provider::Providers,
    provider::{
        ChatRequest, EventStream, Finish, FinishReason, Message, Provider, ProviderError,
        StreamEvent, Usage,
    },
    turn::{Limits, Turn},
};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use futures::StreamExt;
use parley_proto::runner::v1::{
    self as pb, RunRequest, agent_runner_client::AgentRunnerClient, run_event::Event as Ev,
};
use tokio::{
    runtime::Runtime,
    sync::{Notify, mpsc},
};
use tokio_util::sync::CancellationToken;

const TOKENS: usize = 1000;
/// Status (started), status (model call), the deltas, usage, finished.
const EVENTS: u64 = TOKENS as u64 + 4;

/// Answers instantly; records when it yielded its first text delta. With a
/// gate, it waits after the first delta until the client has received it,
/// so the first delta travels alone (otherwise the transport batches it
/// with the rest of an answer that is already complete).
#[derive(Debug, Default)]
struct Instant1000 {
    first_yield: Arc<Mutex<Option<Instant>>>,
    gate: Option<Arc<Notify>>,
}

#[async_trait::async_trait]
impl Provider for Instant1000 {
    fn name(&self) -> &str {
        "fake"
    }
    fn system(&self) -> &'static str {
        "bench"
    }
    fn supports_structured_output(&self, _model: &str) -> bool {
        true
    }
    async fn stream(&self, _request: ChatRequest) -> Result<EventStream, ProviderError> {
        let first = self.first_yield.clone();
        let deltas = (0..TOKENS).map(move |i| {
            if i == 0
                && let Ok(mut slot) = first.lock()
            {
                *slot = Some(Instant::now());
            }
            Ok(StreamEvent::TextDelta("tok ".to_owned()))
        });
        let tail = [
            Ok(StreamEvent::Usage(Usage {
                input_tokens: 10,
                output_tokens: TOKENS as u64,
                ..Usage::default()
            })),
            Ok(StreamEvent::Finish(Finish {
                reason: FinishReason::EndTurn,
                raw_reason: "stop".into(),
                response_id: None,
                response_model: None,
            })),
        ];
        let events = futures::stream::iter(deltas.chain(tail));
        match self.gate.clone() {
            None => Ok(Box::pin(events)),
            Some(gate) => {
                let mut events = events;
                let head = events.next().await;
                let wait = futures::stream::once(async move { gate.notified().await })
                    .filter_map(|()| async { None });
                Ok(Box::pin(
                    futures::stream::iter(head).chain(wait).chain(events),
                ))
            }
        }
    }
}

/// The runner as the binary builds it (default limits and retry policy,
/// 1 024 turns at once), with the instant provider.
fn app(provider: Arc<Instant1000>) -> RunnerApp {
    let mut config = RunnerConfig::scripted_demo();
    config.max_concurrent_runs = 1024;
    RunnerApp::with_providers(&config, Providers::single("fake", provider, "fake"))
}

fn request() -> RunRequest {
    RunRequest {
        messages: vec![pb::Message {
            role: pb::Role::User as i32,
            text: "go".into(),
            ..Default::default()
        }],
        ..Default::default()
    }
}

fn turn() -> Turn {
    Turn {
        system: "".into(),
        messages: vec![Message::user("go")],
        tools: Vec::new(),
        model: ModelChoice {
            provider: String::new(),
            model: String::new(),
            params: Default::default(),
        },
        fallbacks: Vec::new(),
        output_schema: None,
        output_schema_name: String::new(),
        limits: Limits::default(),
        conversation_id: String::new(),
        turn_id: String::new(),
        user_id: String::new(),
        user_issuer: String::new(),
        tenant: String::new(),
        text_tool_calls: false,
        mid_answer_failover: false,
        context: None,
        decisions: Vec::new(),
        iterations_done: 0,
        cache: Default::default(),
        inputs: Vec::new(),
        windows: Vec::new(),
        image_limits: Default::default(),
    }
}

/// Serves the runner on loopback and returns a connected client.
fn serve(rt: &Runtime, app: &RunnerApp) -> AgentRunnerClient<tonic::transport::Channel> {
    rt.block_on(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        // The accepted sockets get TCP_NODELAY here: `Server::tcp_nodelay`
        // applies only to listeners tonic binds itself.
        let incoming = tokio_stream::wrappers::TcpListenerStream::new(listener).map(|socket| {
            socket.inspect(|s| {
                let _ = s.set_nodelay(true);
            })
        });
        tokio::spawn(
            tonic::transport::Server::builder()
                .add_routes(app.routes())
                .serve_with_incoming(incoming),
        );
        AgentRunnerClient::connect(format!("http://{addr}"))
            .await
            .expect("connect")
    })
}

/// Runs one turn over gRPC; returns (events, time from the provider's first
/// yield to the first text delta in the client's hands).
async fn grpc_turn(
    client: &mut AgentRunnerClient<tonic::transport::Channel>,
    first: &Mutex<Option<Instant>>,
    gate: Option<&Notify>,
) -> (u64, Duration) {
    let mut stream = client.run(request()).await.expect("run").into_inner();
    let mut count = 0;
    let mut gap = Duration::ZERO;
    while let Some(event) = stream.next().await {
        let event = event.expect("event");
        count += 1;
        if count == 3
            && matches!(event.event, Some(Ev::TextDelta(_)))
            && let Some(at) = first.lock().ok().and_then(|slot| *slot)
        {
            gap = at.elapsed();
            if let Some(gate) = gate {
                gate.notify_one();
            }
        }
    }
    (count, gap)
}

fn benches(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let provider = Arc::new(Instant1000::default());
    let client = serve(&rt, &app(provider.clone()));
    let gate = Arc::new(Notify::new());
    let gated = Arc::new(Instant1000 {
        first_yield: Arc::default(),
        gate: Some(gate.clone()),
    });
    let gated_app = app(gated.clone());
    let gated_client = serve(&rt, &gated_app);

    let mut group = c.benchmark_group("runner");
    group.measurement_time(Duration::from_secs(8));

    let first = gated.first_yield.clone();
    let mut grpc_client = gated_client.clone();
    group.bench_function("first_token_grpc", |b| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let (count, gap) = grpc_turn(&mut grpc_client, &first, Some(&gate)).await;
                    assert_eq!(count, EVENTS);
                    total += gap;
                }
                total
            })
        })
    });

    let first = gated.first_yield.clone();
    let loop_runner = gated_app.runner().clone();
    let loop_gate = gate.clone();
    group.bench_function("first_token_loop", |b| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let prepared = loop_runner.prepare(turn()).expect("valid");
                    let (tx, mut rx) = mpsc::channel(64);
                    let task_runner = loop_runner.clone();
                    let task = tokio::spawn(async move {
                        task_runner
                            .run(prepared, EventSink::new(tx), CancellationToken::new())
                            .await;
                    });
                    let mut seen_first = false;
                    while let Some(event) = rx.recv().await {
                        if !seen_first && matches!(event.kind, EventKind::TextDelta(_)) {
                            seen_first = true;
                            if let Some(at) = first.lock().ok().and_then(|slot| *slot) {
                                total += at.elapsed();
                            }
                            loop_gate.notify_one();
                        }
                    }
                    let _ = task.await;
                }
                total
            })
        })
    });

    group.throughput(Throughput::Elements(EVENTS));
    let mut one_client = client.clone();
    let first = provider.first_yield.clone();
    group.bench_function("one_stream_grpc", |b| {
        b.iter(|| rt.block_on(async { grpc_turn(&mut one_client, &first, None).await.0 }))
    });

    // A runner with one turn slot, held by a turn whose provider waits
    // after its first delta for a gate nobody opens.
    let mut full_config = RunnerConfig::scripted_demo();
    full_config.max_concurrent_runs = 1;
    let holder_provider = Arc::new(Instant1000 {
        first_yield: Arc::default(),
        gate: Some(Arc::new(Notify::new())),
    });
    let full_app = RunnerApp::with_providers(
        &full_config,
        Providers::single("fake", holder_provider, "fake"),
    );
    let mut refused_client = serve(&rt, &full_app);
    let _holder = rt.block_on(async {
        let mut stream = refused_client
            .run(request())
            .await
            .expect("the holder runs")
            .into_inner();
        while let Some(event) = stream.next().await {
            if matches!(event.expect("event").event, Some(Ev::TextDelta(_))) {
                break;
            }
        }
        stream
    });
    group.throughput(Throughput::Elements(1));
    group.bench_function("refused_grpc", |b| {
        b.iter(|| {
            rt.block_on(async {
                let status = refused_client.run(request()).await.expect_err("refused");
                assert_eq!(status.code(), tonic::Code::ResourceExhausted, "{status:?}");
            })
        })
    });

    group.throughput(Throughput::Elements(EVENTS * 100));
    group.sample_size(20);
    group.bench_function("concurrent_100_grpc", |b| {
        b.iter(|| {
            rt.block_on(async {
                let turns: Vec<_> = (0..100)
                    .map(|_| {
                        let mut client = client.clone();
                        let first = provider.first_yield.clone();
                        tokio::spawn(async move { grpc_turn(&mut client, &first, None).await.0 })
                    })
                    .collect();
                let mut total = 0;
                for turn in turns {
                    total += turn.await.expect("turn");
                }
                assert_eq!(total, EVENTS * 100);
                total
            })
        })
    });
    group.finish();
}

criterion_group!(runner_benches, benches);
criterion_main!(runner_benches);
