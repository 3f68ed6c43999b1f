//! What the gateway adds to a turn, measured on the in-process stack of the
//! tests (fake runner, real payload-parser service, gateway on SQLite):
//!
//! - added latency to the first text event: from the moment the runner
//!   sends its first text delta (after a 100 ms "time to first token", during
//!   which the gateway sets the turn up, as it does in real use) to the
//!   moment the client receives the first `text_delta` (one gateway hop, the
//!   parser sidecar's round trip and the client hop), p50 and p99, at 1, 100
//!   and 1 000 concurrent streams;
//! - events per second through the whole stack at 1 000 concurrent streams.
//!
//! Percentiles over concurrent streams do not fit criterion's iteration
//! model, so this is a plain `harness = false` main. Under `cargo bench` it
//! runs the full measurement; under `cargo test --all-targets` (no `--bench`
//! argument) it runs one small round as a smoke test.
//!
//! With `PARLEY_BENCH_TRACING=on` it also measures what tracing costs: the
//! gateway's spans exported over OTLP to an in-process collector, against
//! the same rounds with export paused, alternated round by round in one
//! process, and prints both percentiles and their ratio.

#[allow(dead_code)]
#[path = "../tests/gateway/harness/mod.rs"]
mod harness;
#[path = "trace_collector.rs"]
mod trace_collector;

use std::time::{Duration, Instant};

use harness::{
    Harness, Options, chat_request,
    fake_runner::{Reply, Step, text_reply},
};
use parley_proto::gateway::v1::chat_event::Event;

/// Text deltas per answer (plus status, complete).
const DELTAS: usize = 20;

/// The fake model's time to first token.
const FIRST_TOKEN: Duration = Duration::from_millis(100);

struct Round {
    added: Vec<Duration>,
    /// From the client's call to the runner receiving the assembled turn.
    setup: Vec<Duration>,
    events: usize,
    elapsed: Duration,
}

async fn round(stack: &Harness, streams: usize) -> Round {
    let words: Vec<String> = (0..DELTAS).map(|n| format!("word{n} ")).collect();
    let deltas: Vec<&str> = words.iter().map(String::as_str).collect();
    for _ in 0..streams {
        let Reply::Steps(mut steps) = text_reply(&deltas) else {
            unreachable!()
        };
        // The model's own time to first token: the gateway sets up the
        // turn (history, prompt, parser stream) meanwhile, as in real use.
        steps.insert(0, Step::Sleep(FIRST_TOKEN));
        stack.runner.push(Reply::Steps(steps));
    }
    let started = Instant::now();
    let mut tasks = Vec::with_capacity(streams);
    for n in 0..streams {
        let mut client = stack.client.clone();
        tasks.push(tokio::spawn(async move {
            let called = Instant::now();
            let mut stream = client
                .chat(chat_request("", &format!("message {n}"), "tables_list"))
                .await
                .expect("chat accepted")
                .into_inner();
            let mut first_text = None;
            let mut conversation = String::new();
            let mut events = 0;
            while let Some(event) = stream.message().await.expect("stream ok") {
                events += 1;
                match event.event {
                    Some(Event::Status(status)) if conversation.is_empty() => {
                        conversation = status.conversation_id
                    }
                    Some(Event::TextDelta(_)) if first_text.is_none() => {
                        first_text = Some(Instant::now())
                    }
                    Some(Event::Complete(complete)) => assert!(complete.success, "{complete:?}"),
                    _ => {}
                }
            }
            (
                conversation,
                called,
                first_text.expect("a text delta"),
                events,
            )
        }));
    }
    let mut seen = Vec::with_capacity(streams);
    for task in tasks {
        seen.push(task.await.expect("join"));
    }
    let elapsed = started.elapsed();
    let arrived: std::collections::HashMap<String, Instant> = stack
        .runner
        .seen()
        .into_iter()
        .map(|seen| (seen.request.conversation_id, seen.at))
        .collect();
    let mut added = Vec::with_capacity(streams);
    let mut setup = Vec::with_capacity(streams);
    let mut events = 0;
    for (conversation, called, received, count) in seen {
        if let Some(at) = arrived.get(&conversation) {
            setup.push(at.saturating_duration_since(called));
        }
        let sent = stack
            .runner
            .first_text_at(&conversation)
            .expect("the runner sent text");
        added.push(received.saturating_duration_since(sent));
        events += count;
    }
    Round {
        added,
        setup,
        events,
        elapsed,
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let rank = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}

fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1e3
}

/// Mean time of `work` over `times` runs.
fn mean(times: u32, mut work: impl FnMut()) -> Duration {
    let started = Instant::now();
    for _ in 0..times {
        work();
    }
    started.elapsed() / times
}

/// The CPU work every turn does before its first text can flow.
fn per_turn_work(times: u32) {
    use chat_gateway::{
        prompt::{PromptInput, build_system_prompt},
        registry::{PageRef, Registry},
    };
    let registry = Registry::example();
    let state =
        serde_json::json!({"table": {"name": "Jobs", "id": "t1", "row_count": 3, "columns": []}});
    let prompt = mean(times, || {
        let page = registry.resolve(&PageRef::new("table_view", "rows", ""));
        let prompt = build_system_prompt(&PromptInput {
            registry: &registry,
            page: &page,
            stream_id: None,
            state: Some(&state),
            history_payloads: &[],
            response_schema: None,
        });
        std::hint::black_box(prompt);
    });
    let profile = registry
        .resolve(&PageRef::new("table_view", "rows", ""))
        .parse_profile();
    let compile = mean(times, || {
        std::hint::black_box(
            payload_parser::Profile::from_proto(&profile).expect("profile compiles"),
        );
    });
    println!(
        "per-turn work: resolve + system prompt {:.1} us; parse profile compile (parser side, per stream) {:.1} us",
        compile_us(prompt),
        compile_us(compile)
    );
}

/// The serialised store writes of one turn on SQLite: `begin_turn` (user
/// message) and `finish_turn` (answer), sequential, mean.
async fn store_writes(times: u32) {
    use chat_gateway::store::{
        BeginTurn, EventBody, FinishTurn, NewTurn, Store, StoreOptions, StoredPage, TurnState,
    };
    let dir = tempfile::tempdir().expect("temp dir");
    let url = format!(
        "sqlite://{}?mode=rwc",
        dir.path().join("bench.db").display()
    );
    let store = Store::open(&url, &StoreOptions::default())
        .await
        .expect("open");
    let message = EventBody::UserMessage {
        text: "hello".into(),
        page: StoredPage::default(),
        response_schema: None,
        request_id: None,
        action: None,
    };
    let (mut begin, mut finish) = (Duration::ZERO, Duration::ZERO);
    for n in 0..times {
        let (conversation, turn) = (format!("c{n}"), format!("t{n}"));
        let started = Instant::now();
        let begun = store
            .begin_turn(&NewTurn {
                owner: "bench",
                conversation_id: &conversation,
                create: true,
                turn_id: &turn,
                request_id: None,
                user_message: &message,
                title: "hello",
            })
            .await
            .expect("begin");
        assert!(matches!(begun, BeginTurn::Started { .. }));
        begin += started.elapsed();
        let started = Instant::now();
        store
            .finish_turn(&FinishTurn {
                owner: "bench",
                conversation_id: &conversation,
                turn_id: &turn,
                state: TurnState::Completed,
                outcome: None,
                events: vec![EventBody::Reasoning { text: "r".into() }],
            })
            .await
            .expect("finish");
        finish += started.elapsed();
    }
    println!(
        "store (SQLite, sequential): begin_turn {:.1} us, finish_turn {:.1} us",
        compile_us(begin / times),
        compile_us(finish / times)
    );
}

fn compile_us(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1e6
}

/// Tracing off vs on over the same plan, alternated round by round.
async fn tracing_overhead(
    stack: &Harness,
    telemetry: &parley_grpc::telemetry::Telemetry,
    plan: &[(usize, usize)],
) {
    println!(
        "tracing overhead: added latency with span export paused vs on (OTLP to an in-process collector)"
    );
    for &(streams, rounds) in plan {
        let (mut off, mut on) = (Vec::new(), Vec::new());
        for _ in 0..rounds {
            telemetry.set_exporting(false);
            off.extend(round(stack, streams).await.added);
            telemetry.set_exporting(true);
            on.extend(round(stack, streams).await.added);
        }
        telemetry.set_exporting(false);
        off.sort();
        on.sort();
        let (off50, off99) = (percentile(&off, 0.50), percentile(&off, 0.99));
        let (on50, on99) = (percentile(&on, 0.50), percentile(&on, 0.99));
        println!(
            "  {streams:>5} streams: off p50 {:>8.3} ms p99 {:>8.3} ms | on p50 {:>8.3} ms p99 {:>8.3} ms | on/off p50 {:.2}x p99 {:.2}x",
            ms(off50),
            ms(off99),
            ms(on50),
            ms(on99),
            on50.as_secs_f64() / off50.as_secs_f64(),
            on99.as_secs_f64() / off99.as_secs_f64(),
        );
    }
}

fn main() {
    let full = std::env::args().any(|arg| arg == "--bench");
    per_turn_work(if full { 200 } else { 2 });
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let traced = std::env::var("PARLEY_BENCH_TRACING").is_ok_and(|v| v == "on" || v == "1");
    runtime.block_on(async {
        let telemetry = if traced {
            let (collector, spans) = trace_collector::start().await;
            let settings = parley_grpc::telemetry::TraceSettings {
                endpoint: Some(format!("http://{collector}")),
                ..Default::default()
            };
            let options = parley_grpc::telemetry::TelemetryOptions {
                service_name: "chat-gateway-bench",
                service_version: env!("CARGO_PKG_VERSION"),
                log_format: parley_grpc::telemetry::LogFormat::Json,
                default_log_filter: "warn",
            };
            let telemetry =
                parley_grpc::telemetry::init_with(options, &settings).expect("telemetry");
            telemetry.set_exporting(false);
            Some((telemetry, spans))
        } else {
            None
        };
        store_writes(if full { 500 } else { 2 }).await;
        let stack = Harness::start(Options {
            tweak: |config| {
                config.turns.max_concurrent = 4096;
                config.store.acquire_timeout_ms = 60_000;
            },
            ..Options::default()
        })
        .await;
        // Warm the connections and the database.
        round(&stack, 10).await;
        let plan: &[(usize, usize)] = if full { &[(1, 300), (100, 5), (1000, 3)] } else { &[(10, 1)] };
        println!("gateway added latency to the first text event (runner sent -> client received)");
        for &(streams, rounds) in plan {
            let mut added = Vec::new();
            let mut setup = Vec::new();
            let mut events = 0;
            let mut elapsed = Duration::ZERO;
            for _ in 0..rounds {
                let measured = round(&stack, streams).await;
                added.extend(measured.added);
                setup.extend(measured.setup);
                events += measured.events;
                elapsed += measured.elapsed;
            }
            added.sort();
            setup.sort();
            println!(
                "  {streams:>5} concurrent streams: p50 {:>8.3} ms  p99 {:>8.3} ms  ({} samples); {:>9.0} events/s; \
                 call to runner request p50 {:>8.3} ms p99 {:>8.3} ms",
                ms(percentile(&added, 0.50)),
                ms(percentile(&added, 0.99)),
                added.len(),
                events as f64 / elapsed.as_secs_f64(),
                ms(percentile(&setup, 0.50)),
                ms(percentile(&setup, 0.99)),
            );
        }
        if let Some((telemetry, spans)) = telemetry {
            tracing_overhead(&stack, &telemetry, plan).await;
            // The fake runner holds each stream open after `finished`; the
            // gateway reads it aside for up to 5 s, and a turn's spans close
            // after that. Wait, so the last round's spans are counted.
            tokio::time::sleep(Duration::from_secs(6)).await;
            telemetry.shutdown().await;
            println!("  spans received by the collector: {}", spans.spans());
        }
        stack.stop().await;
    });
}
