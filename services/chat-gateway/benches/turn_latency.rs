//! What the gateway adds to a turn, measured on the in-process stack of the
//! tests: a fake runner that streams like a model, the real payload-parser
//! service, the gateway on SQLite, and generated clients, all on loopback.
//!
//! Load model (steady state, not a burst): `streams` clients each hold one
//! conversation and send turns back to back (closed loop, starts staggered
//! over one turn), so `streams` Chat streams are open at every moment. The
//! fake model answers like a real one: a time to first token (jittered), then
//! text deltas at a fixed inter-token gap. For each turn:
//!
//! - **relay**: the runner hands its first text delta to its stream → the
//!   client receives the first `text_delta` (the gateway's hop in, the
//!   parser sidecar's round trip, the hop out). This is the gateway's added
//!   latency to the first text event over the runner's own, the issue's
//!   target (p99 < 1 ms at 1 000 streams);
//! - **setup**: the client calls `Chat` → the runner receives the assembled
//!   `Run` (auth, the user message stored, history, prompt, parser stream);
//! - **first text added**: the client's time to first text minus the
//!   runner's own (= setup + relay).
//!
//! Also: events/s and turns/s received by the clients over the window.
//! Percentiles over concurrent streams do not fit criterion's iteration
//! model, so this is a plain `harness = false` main. Under `cargo bench` it
//! runs the full measurement (about three minutes); under `cargo test
//! --all-targets` (no `--bench` argument) one short level as a smoke test.
//! `PARLEY_BENCH_SECONDS` sets the window of the concurrent levels,
//! `PARLEY_BENCH_STREAMS` runs one level only (for profiling),
//! `PARLEY_BENCH_PARSER=down` runs with no parser sidecar (every turn
//! falls back to the in-process parser: what the sidecar's hop costs),
//! `PARLEY_BENCH_DELTAS` and `PARLEY_BENCH_GAP_MS` change the model's
//! answer (50 deltas 20 ms apart by default).
//!
//! With `PARLEY_BENCH_EVENT_LOG=compare` each level runs twice in the same
//! process, on a gateway with `turns.event_log = false` (events reach the
//! client as produced; only the answer is stored) and then on one with it
//! on (the default: each event is committed to the turn's wire log, the
//! stream running at most `turns.stream_ahead` events ahead of it), and
//! prints both and their ratio: what resumable, crash-safe streams cost.
//! `PARLEY_BENCH_STREAM_AHEAD` and `PARLEY_BENCH_LOG_INTERVAL_MS` set
//! `turns.stream_ahead` and `turns.log_interval`.
//!
//! With `PARLEY_BENCH_CONVERSATIONS=compare` each level runs twice, with
//! every client's turns in one conversation and then with each turn in a
//! new conversation, and prints both and their ratio: a new conversation's
//! turn reads no history and calls the runner while its start commits
//! (`Engine::begin_early`), so its *setup* shows what the store write
//! costs the first token.
//!
//! With `PARLEY_BENCH_EXCESS=N` and `PARLEY_BENCH_MAX_TURNS` set to the
//! level's streams (the gateway is full), each level runs alone and then
//! beside N callers each calling `Chat` every 50 ms, refused (`TOO_MANY_TURNS`)
//! unless they catch a slot a client just freed (the clients then retry):
//! what the excess does to the admitted streams' latency.
//!
//! With `PARLEY_BENCH_SHED=on` it first measures load shedding: a gateway
//! whose turn slots are all held by running turns, hammered by clients whose
//! every `Chat` is refused (`TOO_MANY_TURNS`): refusals per second and
//! process CPU per refused call (the idle CPU of the same window measured
//! just before is subtracted).
//!
//! With `PARLEY_BENCH_TRACING=on` each level runs twice in the same
//! process, with the gateway's span export paused and then on (OTLP to an
//! in-process collector), and prints both and their ratio: what tracing
//! costs.

#[allow(dead_code)]
#[path = "../tests/gateway/harness/mod.rs"]
mod harness;
#[path = "trace_collector.rs"]
mod trace_collector;

use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, Instant},
};

use harness::{
    Harness, Options, ParserMode, chat_request,
    fake_runner::{Reply, Step, finished},
};
use parley_proto::{gateway::v1::chat_event::Event, runner::v1::run_event};

/// How the fake model answers.
#[derive(Debug, Clone, Copy)]
struct Model {
    /// Mean time to first token (each turn draws from ±50 % of it).
    first_token: Duration,
    /// Text deltas per answer.
    deltas: usize,
    /// Pause between two deltas.
    gap: Duration,
}

const MODEL: Model = Model {
    first_token: Duration::from_millis(200),
    deltas: 50,
    gap: Duration::from_millis(20),
};

impl Model {
    /// One answer; `draw` in [0, 1) picks the time to first token.
    fn reply(&self, draw: f64) -> Reply {
        let first = self.first_token.mul_f64(0.5 + draw);
        let mut steps = vec![Step::Sleep(first)];
        let mut text = String::new();
        for n in 0..self.deltas {
            let word = format!("word{n} ");
            text.push_str(&word);
            steps.push(Step::Send(run_event::Event::TextDelta(word)));
            steps.push(Step::Sleep(self.gap));
        }
        steps.pop();
        steps.push(Step::Send(finished(&text)));
        Reply::Steps(steps)
    }

    fn turn_length(&self) -> Duration {
        self.first_token + self.gap * self.deltas as u32
    }
}

/// A small deterministic generator (xorshift), so runs draw the same jitter.
struct Draws(u64);

impl Draws {
    fn next(&mut self) -> f64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 11) as f64 / (1_u64 << 53) as f64
    }
}

/// One turn as the client saw it.
struct Sample {
    turn_id: String,
    called: Instant,
    first_text: Instant,
    events: usize,
}

/// Where a client's turns go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Conversations {
    /// All in one conversation (each turn reads the ones before back).
    One,
    /// Each in a new conversation (a turn that calls the runner while its
    /// start commits).
    New,
}

/// One client: turns back to back until `stop`.
async fn client(
    stack: Arc<Harness>,
    model: Model,
    seed: u64,
    start_after: Duration,
    stop: Arc<AtomicBool>,
    max_turns: usize,
    conversations: Conversations,
) -> Vec<Sample> {
    tokio::time::sleep(start_after).await;
    let mut draws = Draws(seed | 1);
    let mut conversation = String::new();
    let mut samples = Vec::new();
    let mut client = stack.client.clone();
    while !stop.load(Ordering::Relaxed) && samples.len() < max_turns {
        stack.runner.push(model.reply(draws.next()));
        // A full gateway refuses (the overload measurement's excess callers
        // can take a freed slot first): try again, as clients do.
        let (called, mut stream) = loop {
            let called = Instant::now();
            match client
                .chat(chat_request(&conversation, "next question", "tables_list"))
                .await
            {
                Ok(stream) => break (called, stream.into_inner()),
                Err(status) if status.code() == tonic::Code::ResourceExhausted => {
                    tokio::time::sleep(Duration::from_millis(1)).await
                }
                Err(status) => panic!("chat refused: {status:?}"),
            }
        };
        let (mut turn_id, mut first_text, mut events) = (String::new(), None, 0);
        while let Some(event) = stream.message().await.expect("stream ok") {
            events += 1;
            match event.event {
                Some(Event::Status(status)) if turn_id.is_empty() => {
                    turn_id = status.turn_id;
                    if conversations == Conversations::One {
                        conversation = status.conversation_id;
                    }
                }
                Some(Event::TextDelta(_)) if first_text.is_none() => {
                    first_text = Some(Instant::now())
                }
                Some(Event::Complete(complete)) => assert!(complete.success, "{complete:?}"),
                _ => {}
            }
        }
        samples.push(Sample {
            turn_id,
            called,
            first_text: first_text.expect("a text delta"),
            events,
        });
    }
    samples
}

/// CPU time this process has used (user + system), from /proc.
fn cpu_time() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command name (which ends with the last ')').
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    // Linux reports in USER_HZ, 100 per second on every common platform.
    Some(Duration::from_millis(ticks * 10))
}

#[derive(Default)]
struct Level {
    relay: Vec<Duration>,
    setup: Vec<Duration>,
    added: Vec<Duration>,
    events: usize,
    turns: usize,
    elapsed: Duration,
    /// CPU time of the whole process over the window.
    cpu: Option<Duration>,
    /// Calls of the excess callers refused.
    refused: u64,
}

/// How long a level runs.
#[derive(Debug, Clone, Copy)]
enum Length {
    /// Each client sends this many turns after its warm-up turn.
    Turns(usize),
    /// Clients run for this window after every client has warmed up.
    Window(Duration),
}

/// How long each excess caller waits between its calls: 64 callers offer
/// about 1 200 calls/s, some 16 times what 100 streams of this model
/// complete.
const EXCESS_PAUSE: Duration = Duration::from_millis(50);

/// Runs `streams` clients and gathers the samples measured after warm-up;
/// with `excess` callers beside them, each calling `Chat` every
/// [`EXCESS_PAUSE`] on a gateway that admits only the clients' turns
/// (refusals counted in `Level::refused`).
async fn level(
    stack: &Arc<Harness>,
    model: Model,
    streams: usize,
    length: Length,
    excess: usize,
) -> Level {
    level_of(stack, model, streams, length, excess, Conversations::One).await
}

/// [`level`], the clients' turns going to `conversations`.
async fn level_of(
    stack: &Arc<Harness>,
    model: Model,
    streams: usize,
    length: Length,
    excess: usize,
    conversations: Conversations,
) -> Level {
    let stop = Arc::new(AtomicBool::new(false));
    let refused = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let callers: Vec<_> = (0..excess)
        .map(|_| {
            let (stack, stop, refused) = (stack.clone(), stop.clone(), refused.clone());
            tokio::spawn(async move {
                let mut client = stack.client.clone();
                while !stop.load(Ordering::Relaxed) {
                    tokio::time::sleep(EXCESS_PAUSE).await;
                    match client
                        .chat(chat_request("", "one more", "tables_list"))
                        .await
                    {
                        Err(_) => {
                            refused.fetch_add(1, Ordering::Relaxed);
                        }
                        // It took a slot a client had just freed: read its
                        // answer like a client would.
                        Ok(stream) => {
                            let mut stream = stream.into_inner();
                            while let Ok(Some(_)) = stream.message().await {}
                        }
                    }
                }
            })
        })
        .collect();
    let stagger = model.turn_length();
    let max_turns = match length {
        Length::Turns(turns) => turns + 1,
        Length::Window(_) => usize::MAX,
    };
    let tasks: Vec<_> = (0..streams)
        .map(|n| {
            let start_after = stagger.mul_f64(n as f64 / streams as f64);
            tokio::spawn(client(
                stack.clone(),
                model,
                0x9e37_79b9_7f4a_7c15 ^ (n as u64 + 1),
                start_after,
                stop.clone(),
                max_turns,
                conversations,
            ))
        })
        .collect();
    let (window_start, cpu_start) = match length {
        Length::Turns(_) => (Instant::now(), cpu_time()),
        Length::Window(window) => {
            // Warm-up: every client has started and finished a turn.
            tokio::time::sleep(stagger * 2).await;
            let start = (Instant::now(), cpu_time());
            tokio::time::sleep(window).await;
            stop.store(true, Ordering::Relaxed);
            start
        }
    };
    let mut level = Level::default();
    let mut cpu_end = cpu_time();
    for task in tasks {
        let samples = task.await.expect("client");
        let warm = match length {
            Length::Turns(_) => samples.into_iter().skip(1).collect::<Vec<_>>(),
            Length::Window(_) => samples
                .into_iter()
                .filter(|sample| sample.called >= window_start)
                .collect(),
        };
        for sample in warm {
            let clock = stack
                .runner
                .clock(&sample.turn_id)
                .expect("the runner saw the turn");
            let sent = clock.first_text.expect("the runner sent text");
            let relay = sample.first_text.saturating_duration_since(sent);
            let setup = clock.arrived.saturating_duration_since(sample.called);
            level.relay.push(relay);
            level.setup.push(setup);
            level.added.push(setup + relay);
            level.events += sample.events;
            level.turns += 1;
        }
    }
    if let Length::Turns(_) = length {
        // The clients ran until now.
        cpu_end = cpu_time();
    }
    level.elapsed = window_start.elapsed();
    stop.store(true, Ordering::Relaxed);
    for caller in callers {
        caller.await.expect("caller");
    }
    level.refused = refused.load(Ordering::Relaxed);
    level.cpu = cpu_start
        .zip(cpu_end)
        .map(|(start, end)| end.saturating_sub(start));
    stack.runner.forget();
    level
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let rank = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}

fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1e3
}

fn us(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1e6
}

fn p50_p99(samples: &mut [Duration]) -> String {
    samples.sort();
    format!(
        "p50 {:>7.3} p99 {:>7.3}",
        ms(percentile(samples, 0.50)),
        ms(percentile(samples, 0.99))
    )
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
            attachments: &[],
        });
        std::hint::black_box(prompt);
    });
    let profile = registry
        .resolve(&PageRef::new("table_view", "rows", ""))
        .parse_profile();
    let compile = mean(times, || {
        std::hint::black_box(
            parley_parse::Profile::from_proto(&profile).expect("profile compiles"),
        );
    });
    println!(
        "per-turn work: resolve + system prompt {:.1} us; parse profile compile {:.1} us",
        us(prompt),
        us(compile)
    );
}

/// The store writes of turns on SQLite: `begin_turn` (the user message)
/// then `finish_turn` (the answer). First one turn at a time (the latency
/// of a lone write), then `concurrent` turns at once with one transaction
/// per write (`write_batch` 1, the baseline) and with group commit.
async fn store_writes(times: u32, concurrent: usize) {
    use chat_gateway::store::{
        BeginTurn, EventBody, FinishTurn, NewTurn, Store, StoreOptions, StoredPage, TurnState,
    };
    async fn one_turn(store: &Store, n: usize) -> (Duration, Duration) {
        let message = EventBody::UserMessage {
            text: "hello".into(),
            page: StoredPage::default(),
            response_schema: None,
            request_id: None,
            action: None,
            attachments: Vec::new(),
        };
        let (conversation, turn) = (format!("c{n}"), format!("t{n}"));
        let started = Instant::now();
        let begun = store
            .begin_turn(&NewTurn {
                owner: "bench",
                conversation_id: &conversation,
                create: true,
                turn_id: &turn,
                replica: "bench",
                lease_ttl_ms: 24 * 60 * 60 * 1000,
                stream_ahead: 0,
                request_id: None,
                parent: None,
                user_message: &message,
                title: "hello",
                admission: &Default::default(),
            })
            .await
            .expect("begin");
        assert!(matches!(begun, BeginTurn::Started { .. }));
        let begin = started.elapsed();
        let started = Instant::now();
        store
            .finish_turn(FinishTurn {
                owner: "bench",
                conversation_id: &conversation,
                turn_id: &turn,
                replica: "bench",
                state: TurnState::Completed,
                retryable: false,
                outcome: None,
                events: vec![EventBody::Reasoning { text: "r".into() }],
                wire: None,
                pause: None,
            })
            .await
            .expect("finish");
        (begin, started.elapsed())
    }
    async fn open(dir: &tempfile::TempDir, name: &str, write_batch: usize) -> Store {
        let url = format!("sqlite://{}?mode=rwc", dir.path().join(name).display());
        Store::open(
            &url,
            &StoreOptions {
                write_batch,
                acquire_timeout: Duration::from_secs(60),
                ..StoreOptions::default()
            },
        )
        .await
        .expect("open")
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let store = open(&dir, "lone.db", 64).await;
    let (mut begin, mut finish) = (Duration::ZERO, Duration::ZERO);
    for n in 0..times as usize {
        let (b, f) = one_turn(&store, n).await;
        begin += b;
        finish += f;
    }
    println!(
        "store (SQLite), one turn at a time: begin_turn {:.1} us, finish_turn {:.1} us",
        us(begin / times),
        us(finish / times)
    );
    let mut rates = Vec::new();
    for (name, write_batch) in [("one transaction per write", 1), ("group commit (64)", 64)] {
        let store = Arc::new(open(&dir, &format!("batch{write_batch}.db"), write_batch).await);
        let started = Instant::now();
        let turns: Vec<_> = (0..concurrent)
            .map(|n| {
                let store = store.clone();
                tokio::spawn(async move { one_turn(&store, n).await })
            })
            .collect();
        let mut begins = Vec::with_capacity(concurrent);
        for turn in turns {
            begins.push(turn.await.expect("turn").0);
        }
        let elapsed = started.elapsed();
        let rate = concurrent as f64 / elapsed.as_secs_f64();
        println!(
            "store (SQLite), {concurrent} turns at once, {name}: {rate:.0} turns/s (2 writes each); begin_turn {}",
            p50_p99(&mut begins)
        );
        rates.push(rate);
    }
    if let [baseline, batched] = rates[..] {
        println!(
            "  group commit / one transaction per write: {:.1}x",
            batched / baseline
        );
    }
}

/// Tracing for the whole process, exporting to an in-process collector,
/// with export paused until a level asks for it.
async fn start_tracing() -> (parley_grpc::telemetry::Telemetry, trace_collector::Counter) {
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
    let telemetry = parley_grpc::telemetry::init_with(options, &settings).expect("telemetry");
    telemetry.set_exporting(false);
    (telemetry, spans)
}

/// The gateway stack of the benchmark, with the turn event log on or off.
async fn bench_stack(parser: ParserMode, event_log: bool) -> Harness {
    fn common(config: &mut chat_gateway::config::GatewayConfig) {
        let number = |name: &str| std::env::var(name).ok().and_then(|v| v.parse::<u64>().ok());
        config.turns.max_concurrent = number("PARLEY_BENCH_MAX_TURNS").map_or(4096, |n| n as usize);
        // Every stream is the one dev user: its limits are off.
        config.turns.per_user = chat_gateway::config::Quota::UNLIMITED;
        config.store.acquire_timeout = Duration::from_secs(60);
        if let Some(ahead) = number("PARLEY_BENCH_STREAM_AHEAD") {
            config.turns.stream_ahead = ahead;
        }
        if let Some(interval) = number("PARLEY_BENCH_LOG_INTERVAL_MS") {
            config.turns.log_interval = Duration::from_millis(interval);
        }
    }
    Harness::start(Options {
        parser,
        tweak: if event_log {
            common
        } else {
            |config| {
                common(config);
                config.turns.event_log = false;
            }
        },
        ..Options::default()
    })
    .await
}

/// Microseconds of process CPU per event received over a level.
fn cpu_per_event(measured: &Level) -> f64 {
    measured
        .cpu
        .map_or(f64::NAN, |cpu| us(cpu) / measured.events.max(1) as f64)
}

fn report(streams: usize, label: &str, measured: &mut Level) {
    let seconds = measured.elapsed.as_secs_f64();
    let cpu_per_event = cpu_per_event(measured);
    println!(
        "{streams:>5} streams{label}: relay {} | setup {} | first text added {} | {:>6} turns, {:>8.0} events/s, {:>6.0} turns/s, {:>6.1} us CPU/event",
        p50_p99(&mut measured.relay),
        p50_p99(&mut measured.setup),
        p50_p99(&mut measured.added),
        measured.turns,
        measured.events as f64 / seconds,
        measured.turns as f64 / seconds,
        cpu_per_event,
    );
}

fn main() {
    let full = std::env::args().any(|arg| arg == "--bench");
    let window = Duration::from_secs(
        std::env::var("PARLEY_BENCH_SECONDS")
            .ok()
            .and_then(|value| value.parse().ok())
            .unwrap_or(20),
    );
    let traced = std::env::var("PARLEY_BENCH_TRACING").is_ok_and(|v| v == "on" || v == "1");
    per_turn_work(if full { 200 } else { 2 });
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    runtime.block_on(async {
        let tracing = if traced {
            Some(start_tracing().await)
        } else {
            None
        };
        store_writes(if full { 500 } else { 2 }, if full { 1000 } else { 10 }).await;
        if !full || std::env::var("PARLEY_BENCH_SHED").is_ok_and(|v| v == "on") {
            let window = if full { window } else { Duration::from_millis(200) };
            shedding(window, 8, if full { 64 } else { 4 }).await;
        }
        // `PARLEY_BENCH_PARSER=down`: no sidecar, every turn cleans its text
        // with the in-process parser (what the sidecar's hop costs).
        let parser = match std::env::var("PARLEY_BENCH_PARSER").as_deref() {
            Ok("down") => ParserMode::Down,
            _ => ParserMode::Up,
        };
        let stack = Arc::new(bench_stack(parser, true).await);
        let compare_log = std::env::var("PARLEY_BENCH_EVENT_LOG").is_ok_and(|v| v == "compare");
        let unlogged = if compare_log {
            Some(Arc::new(bench_stack(parser, false).await))
        } else {
            None
        };
        let model = if full {
            // `PARLEY_BENCH_DELTAS` / `PARLEY_BENCH_GAP_MS` change the answer's
            // shape (e.g. fewer, larger chunks 200 ms apart, as providers that
            // batch tokens send them).
            let number = |name: &str| std::env::var(name).ok().and_then(|v| v.parse::<u64>().ok());
            Model {
                deltas: number("PARLEY_BENCH_DELTAS").map_or(MODEL.deltas, |n| n.max(1) as usize),
                gap: number("PARLEY_BENCH_GAP_MS").map_or(MODEL.gap, Duration::from_millis),
                ..MODEL
            }
        } else {
            Model {
                first_token: Duration::from_millis(20),
                deltas: 5,
                gap: Duration::from_millis(2),
            }
        };
        println!(
            "model: first token {} ms ±50 %, {} deltas {} ms apart; each stream sends turns back to back",
            model.first_token.as_millis(),
            model.deltas,
            model.gap.as_millis()
        );
        // `PARLEY_BENCH_EXCESS=N` (with `PARLEY_BENCH_MAX_TURNS` = the
        // streams, so the gateway is full): each level runs alone, then
        // with N callers whose calls the full gateway refuses.
        let excess: usize = std::env::var("PARLEY_BENCH_EXCESS")
            .ok()
            .and_then(|value| value.parse().ok())
            .unwrap_or(0);
        let only: Option<usize> = std::env::var("PARLEY_BENCH_STREAMS")
            .ok()
            .and_then(|value| value.parse().ok());
        let plan = if full {
            vec![
                (1, Length::Turns(100)),
                (100, Length::Window(window)),
                (1000, Length::Window(window)),
            ]
        } else {
            vec![(10, Length::Window(Duration::from_millis(200)))]
        };
        // `PARLEY_BENCH_CONVERSATIONS=compare`: each level runs with every
        // client in one conversation, then with each turn in a new one
        // (whose runner call goes out while its start commits).
        let compare_new =
            std::env::var("PARLEY_BENCH_CONVERSATIONS").is_ok_and(|v| v == "compare");
        println!("all figures in ms");
        for (streams, length) in plan
            .into_iter()
            .filter(|(streams, _)| only.is_none_or(|only| only == *streams))
        {
            if compare_new {
                let mut one = level(&stack, model, streams, length, 0).await;
                let mut new =
                    level_of(&stack, model, streams, length, 0, Conversations::New).await;
                report(streams, " (one conversation) ", &mut one);
                report(streams, " (new conversations)", &mut new);
                println!(
                    "        new/one conversation: setup p50 {:.2}x p99 {:.2}x; first text added p50 {:.2}x p99 {:.2}x",
                    ratio(&new.setup, &one.setup, 0.50),
                    ratio(&new.setup, &one.setup, 0.99),
                    ratio(&new.added, &one.added, 0.50),
                    ratio(&new.added, &one.added, 0.99),
                );
                continue;
            }
            if let Some(unlogged) = &unlogged {
                let mut off = level(unlogged, model, streams, length, 0).await;
                let mut on = level(&stack, model, streams, length, 0).await;
                report(streams, " (event log off)", &mut off);
                report(streams, " (event log on) ", &mut on);
                println!(
                    "        event log on/off: relay p50 {:.2}x p99 {:.2}x; first text added p99 {:.2}x; CPU/event {:.2}x",
                    ratio(&on.relay, &off.relay, 0.50),
                    ratio(&on.relay, &off.relay, 0.99),
                    ratio(&on.added, &off.added, 0.99),
                    cpu_per_event(&on) / cpu_per_event(&off),
                );
                continue;
            }
            if excess > 0 {
                let mut calm = level(&stack, model, streams, length, 0).await;
                let mut loaded = level(&stack, model, streams, length, excess).await;
                report(streams, " (alone)        ", &mut calm);
                report(streams, " (+ excess load)", &mut loaded);
                println!(
                    "        {excess} excess callers: {:.0} refusals/s; admitted relay p50 {:.2}x p99 {:.2}x, first text added p50 {:.2}x p99 {:.2}x",
                    loaded.refused as f64 / loaded.elapsed.as_secs_f64(),
                    ratio(&loaded.relay, &calm.relay, 0.50),
                    ratio(&loaded.relay, &calm.relay, 0.99),
                    ratio(&loaded.added, &calm.added, 0.50),
                    ratio(&loaded.added, &calm.added, 0.99),
                );
                continue;
            }
            let Some((telemetry, _)) = &tracing else {
                report(streams, "", &mut level(&stack, model, streams, length, 0).await);
                continue;
            };
            let mut off = level(&stack, model, streams, length, 0).await;
            telemetry.set_exporting(true);
            let mut on = level(&stack, model, streams, length, 0).await;
            telemetry.set_exporting(false);
            report(streams, " (tracing off)", &mut off);
            report(streams, " (tracing on) ", &mut on);
            println!(
                "        tracing on/off: relay p50 {:.2}x p99 {:.2}x; first text added p50 {:.2}x p99 {:.2}x",
                ratio(&on.relay, &off.relay, 0.50),
                ratio(&on.relay, &off.relay, 0.99),
                ratio(&on.added, &off.added, 0.50),
                ratio(&on.added, &off.added, 0.99),
            );
        }
        if let Some((telemetry, spans)) = tracing {
            telemetry.shutdown().await;
            println!("spans received by the collector: {}", spans.spans());
        }
        for stack in [Some(stack), unlogged].into_iter().flatten() {
            if let Ok(stack) = Arc::try_unwrap(stack) {
                stack.stop().await;
            }
        }
    });
}

/// Load shedding: `held` turns take every slot (they never end), then
/// `callers` clients call `Chat` back to back for `window`, every call
/// refused; prints refusals/s and µs of process CPU per refusal.
async fn shedding(window: Duration, held: usize, callers: usize) {
    let stack = Arc::new(
        Harness::start(Options {
            tweak: |config| {
                config.turns.max_concurrent = 8;
                config.turns.per_user = chat_gateway::config::Quota::UNLIMITED;
            },
            ..Options::default()
        })
        .await,
    );
    let mut holding = Vec::new();
    for n in 0..held {
        stack.runner.push(Reply::Steps(vec![
            Step::Send(run_event::Event::TextDelta("Working".into())),
            Step::Hang,
        ]));
        let mut client = stack.client.clone();
        holding.push(
            client
                .chat(chat_request("", &format!("held {n}"), "tables_list"))
                .await
                .expect("a held turn")
                .into_inner(),
        );
    }
    // The idle cost of the same window (the held turns, the replica loop).
    let idle_start = cpu_time();
    tokio::time::sleep(window).await;
    let idle = idle_start.zip(cpu_time()).map(|(a, b)| b.saturating_sub(a));
    let stop = Arc::new(AtomicBool::new(false));
    let refusals = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let tasks: Vec<_> = (0..callers)
        .map(|_| {
            let (stack, stop, refusals) = (stack.clone(), stop.clone(), refusals.clone());
            tokio::spawn(async move {
                let mut client = stack.client.clone();
                while !stop.load(Ordering::Relaxed) {
                    let refused = client
                        .chat(chat_request("", "one more", "tables_list"))
                        .await
                        .expect_err("a full gateway refuses");
                    assert_eq!(refused.code(), tonic::Code::ResourceExhausted);
                    refusals.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    let cpu_start = cpu_time();
    let started = Instant::now();
    tokio::time::sleep(window).await;
    let cpu = cpu_start.zip(cpu_time()).map(|(a, b)| b.saturating_sub(a));
    let elapsed = started.elapsed();
    stop.store(true, Ordering::Relaxed);
    for task in tasks {
        task.await.expect("caller");
    }
    let refused = refusals.load(Ordering::Relaxed);
    let work = cpu.zip(idle).map(|(busy, idle)| busy.saturating_sub(idle));
    println!(
        "shedding: {held} turns hold every slot, {callers} callers: {:.0} refusals/s, {:.1} us CPU per refused Chat (client and server in this process; idle {:.0} ms subtracted)",
        refused as f64 / elapsed.as_secs_f64(),
        work.map_or(f64::NAN, |work| us(work) / refused.max(1) as f64),
        idle.map_or(f64::NAN, ms),
    );
    drop(holding);
    if let Ok(stack) = Arc::try_unwrap(stack) {
        stack.stop().await;
    }
}

/// The ratio of two sorted samples' percentile `p`.
fn ratio(on: &[Duration], off: &[Duration], p: f64) -> f64 {
    percentile(on, p).as_secs_f64() / percentile(off, p).as_secs_f64()
}
