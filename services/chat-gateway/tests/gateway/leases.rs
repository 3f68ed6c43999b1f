//! Turn leases between real gateway processes on one PostgreSQL: leases on
//! the store's clock (one replica's clock shifted with libfaketime), the
//! sweep after a replica is killed, and fencing of tool calls.

use std::{
    net::SocketAddr,
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use agent_runner::{
    agent_loop::Runner,
    allow::{Allowed, AllowedEndpoints},
    provider::{
        Providers,
        scripted::{Script, ScriptedProvider},
    },
    retry::RetryPolicy,
    service::RunnerService,
    tools::{CallContext, LocalTool, ProgressSender, ToolFailure, ToolOutput, ToolRuntime},
    turn::Limits,
};
use futures::StreamExt;
use parley_proto::{
    gateway::v1::chat_gateway_client::ChatGatewayClient,
    runner::v1::agent_runner_server::AgentRunnerServer,
};
use serde_json::{Value, json};
use sqlx::Row;
use tokio::sync::Notify;
use tonic::transport::Channel;

use crate::{
    durable::{ending, ids, read_texts, text},
    harness::{
        Options, chat_request, drain,
        fake_runner::{Reply, Step, finished},
        incoming,
        process::{GatewayProcess, ProcessConfig, libfaketime},
        start_upstreams,
    },
    postgres,
};

/// How far ahead the shifted replica's clocks run.
const AHEAD: &str = "+15s";

#[tokio::test]
async fn a_replica_whose_clock_runs_ahead_leaves_its_peers_healthy_turns_alone() {
    const TEST: &str =
        "leases::a_replica_whose_clock_runs_ahead_leaves_its_peers_healthy_turns_alone";
    if libfaketime().is_none() {
        parley_testkit::not_run(
            TEST,
            "libfaketime is not installed: apt-get install -y faketime",
        );
        return;
    }
    let Some((database_url, schema)) = postgres::fresh_schema(TEST).await else {
        return;
    };
    let (runner, runner_addr, parser_addr, _parser) = start_upstreams(&Options::default()).await;
    let dir = tempfile::tempdir().expect("temp dir");
    let config = ProcessConfig {
        database_url,
        runner: runner_addr,
        parser: parser_addr,
        lease_renew: Duration::from_millis(200),
        lease_ttl: Duration::from_secs(1),
        stream_ahead: 32,
        per_user_concurrent_turns: 0,
    };
    let mut a = GatewayProcess::start(&config, dir.path(), "a").await;
    let mut ahead =
        GatewayProcess::start_with(&config, dir.path(), "ahead", Some(AHEAD), &[]).await;

    let gate = Arc::new(Notify::new());
    runner.push(Reply::Steps(vec![
        text("Working on it"),
        Step::Gate(gate.clone()),
        text(" and done."),
        Step::Send(finished("Working on it and done.")),
    ]));
    let mut on_a = a
        .client
        .chat(chat_request("", "A long job", "tables_list"))
        .await
        .expect("chat on A")
        .into_inner();
    let seen = read_texts(&mut on_a, 1).await;
    let (_, turn) = ids(&seen);
    // The shifted replica sweeps every 200 ms; by its own clock every lease
    // A writes (1 s) expired 14 s ago. Three lease lengths of its sweeps.
    tokio::time::sleep(3 * config.lease_ttl).await;
    gate.notify_one();
    let rest = drain(on_a).await;
    let (error, complete) = ending(&rest);
    assert_eq!(error, None, "turn {turn} was ended by the replica ahead");
    assert!(complete.success, "{complete:?}");
    assert!(
        !ahead.log_text().contains("stopped renewing its lease"),
        "{}",
        ahead.log_text()
    );
    a.kill().await;
    ahead.kill().await;
    postgres::drop_schema(&schema).await;
}

/// How many running turns the killed replica has:
/// `PARLEY_TEST_KILLED_TURNS`, by default 1 000.
fn killed_turns() -> usize {
    std::env::var("PARLEY_TEST_KILLED_TURNS")
        .ok()
        .and_then(|count| count.parse().ok())
        .unwrap_or(1000)
}

/// Turns per client connection (the gateway's HTTP/2 streams per
/// connection are limited).
const TURNS_PER_CONNECTION: usize = 100;

/// The shortest time left on `turn`'s lease (ms, on the store's clock) and
/// how many turns run, sampled every 50 ms until no more than `left` turns
/// run or `within` has passed.
async fn watch_lease(
    conn: &mut sqlx::AnyConnection,
    turn: &str,
    left: i64,
    within: Duration,
) -> (i64, i64) {
    let deadline = tokio::time::Instant::now() + within;
    let mut shortest = i64::MAX;
    loop {
        let row = sqlx::query(
            "SELECT (SELECT lease_until FROM turns WHERE id = $1) \
             - CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS BIGINT) AS remaining, \
             (SELECT count(*) FROM turns WHERE state = 'running') AS running",
        )
        .bind(turn)
        .fetch_one(&mut *conn)
        .await
        .expect("read the leases");
        let remaining: i64 = row.try_get("remaining").expect("remaining");
        let running: i64 = row.try_get("running").expect("running");
        shortest = shortest.min(remaining);
        if running <= left || tokio::time::Instant::now() >= deadline {
            return (shortest, running);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn a_killed_replicas_running_turns_all_end_in_bounded_sweeps_while_the_survivor_keeps_its_own()
 {
    const TEST: &str = "leases::a_killed_replicas_running_turns_all_end_in_bounded_sweeps_while_the_survivor_keeps_its_own";
    let Some((database_url, schema)) = postgres::fresh_schema(TEST).await else {
        return;
    };
    let count = killed_turns();
    let (runner, runner_addr, parser_addr, _parser) = start_upstreams(&Options::default()).await;
    let dir = tempfile::tempdir().expect("temp dir");
    let config = ProcessConfig {
        database_url,
        runner: runner_addr,
        parser: parser_addr,
        lease_renew: Duration::from_millis(200),
        lease_ttl: Duration::from_secs(1),
        stream_ahead: 32,
        per_user_concurrent_turns: 0,
    };
    let room = (count + 16).to_string();
    let mut doomed = GatewayProcess::start_with(
        &config,
        dir.path(),
        "doomed",
        None,
        &[
            ("PARLEY_TURNS__MAX_CONCURRENT", &room),
            ("PARLEY_TURNS__MAX_STREAMS", &room),
            ("PARLEY_TURNS__PER_TENANT__CONCURRENT_TURNS", "0"),
            ("PARLEY_TURNS__PER_USER__TURNS_PER_MINUTE", "0"),
            ("PARLEY_TURNS__PER_TENANT__TURNS_PER_MINUTE", "0"),
            ("PARLEY_TURNS__PER_USER__STREAMS", "0"),
            ("PARLEY_TURNS__PER_TENANT__STREAMS", "0"),
        ],
    )
    .await;
    let mut survivor = GatewayProcess::start_with(
        &config,
        dir.path(),
        "survivor",
        None,
        &[("PARLEY_TURNS__SWEEP_BATCH", "50")],
    )
    .await;

    // The survivor's own turn runs through the sweeps.
    let gate = Arc::new(Notify::new());
    runner.push(Reply::Steps(vec![
        text("Still here"),
        Step::Gate(gate.clone()),
        text(" and done."),
        Step::Send(finished("Still here and done.")),
    ]));
    let mut own = survivor
        .client
        .chat(chat_request("", "A long job", "tables_list"))
        .await
        .expect("chat on the survivor")
        .into_inner();
    let (_, own_turn) = ids(&read_texts(&mut own, 1).await);

    // The doomed replica's turns, each running (its first text streamed).
    for _ in 0..count {
        runner.push(Reply::Steps(vec![text("Half an answer"), Step::Hang]));
    }
    let mut clients = Vec::new();
    for _ in 0..count.div_ceil(TURNS_PER_CONNECTION) {
        let channel = Channel::from_shared(format!("http://{}", doomed.addr))
            .expect("url")
            .connect()
            .await
            .expect("connect");
        clients.push(ChatGatewayClient::new(channel));
    }
    let streams: Vec<_> = futures::stream::iter(0..count)
        .map(|index| {
            let mut client = clients[index / TURNS_PER_CONNECTION].clone();
            async move {
                let mut stream = client
                    .chat(chat_request("", "Tell me everything", "tables_list"))
                    .await
                    .expect("chat on the doomed replica")
                    .into_inner();
                read_texts(&mut stream, 1).await;
                stream
            }
        })
        .buffer_unordered(64)
        .collect()
        .await;
    assert_eq!(streams.len(), count);
    doomed.kill().await;
    let killed = std::time::Instant::now();

    let mut conn = postgres::connect(&schema).await;
    let (shortest, running) = watch_lease(&mut conn, &own_turn, 1, Duration::from_secs(120)).await;
    eprintln!(
        "leases: {count} turns of a killed replica ended in {} ms; the survivor's own lease had at least {shortest} ms left",
        killed.elapsed().as_millis()
    );
    assert_eq!(running, 1, "only the survivor's own turn still runs");
    assert!(
        shortest > 0,
        "the survivor's own lease lapsed during the sweeps ({shortest} ms)"
    );
    // The survivor logs each end after its store commit, and its log
    // reaches this process through a pipe: the last lines may trail the
    // store by a moment.
    let ended_in_log = || {
        survivor
            .log_text()
            .matches("stopped renewing its lease")
            .count()
    };
    let logged_by = std::time::Instant::now() + Duration::from_secs(30);
    while ended_in_log() < count && std::time::Instant::now() < logged_by {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(ended_in_log(), count, "each turn ended once");

    gate.notify_one();
    let (error, complete) = ending(&drain(own).await);
    assert_eq!(error, None);
    assert!(complete.success, "{complete:?}");
    drop(streams);
    survivor.kill().await;
    postgres::drop_schema(&schema).await;
}

/// The test's own `current_time`: counts its calls; the first waits for
/// the test's gate.
#[derive(Debug, Default)]
struct CountedClock {
    calls: AtomicUsize,
    gate: Notify,
}

#[tonic::async_trait]
impl LocalTool for CountedClock {
    fn name(&self) -> &str {
        "current_time"
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
        if self.calls.fetch_add(1, Ordering::SeqCst) == 0 {
            self.gate.notified().await;
        }
        Ok(ToolOutput {
            text: "2030-01-01T00:00:00Z".into(),
            payload: None,
            attachments: Vec::new(),
        })
    }
}

/// The real agent-runner on port 0: the scripted provider playing `script`,
/// with `clock` as its `current_time`.
async fn runner_with(script: &str, clock: Arc<CountedClock>) -> SocketAddr {
    let provider = ScriptedProvider::new("scripted", Script::from_toml(script).expect("script"));
    let mut tools = ToolRuntime::with_builtins();
    tools.register(clock);
    let runner = Runner {
        providers: Arc::new(Providers::single(
            "scripted",
            Arc::new(provider),
            "scripted-demo",
        )),
        tools,
        retry: RetryPolicy::default(),
        prices: Default::default(),
    };
    // `table_view` offers `lookup_rows` at this address: a tool with
    // effects, so its turns run fenced.
    let allowed = Allowed {
        endpoints: AllowedEndpoints::parse(["127.0.0.1:50061"]).expect("pattern"),
        ..Allowed::defaults_of(&runner.providers)
    };
    let service =
        RunnerService::new(Arc::new(runner), Limits::default(), 16, 64).with_allowed(allowed);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        let _ = tonic::transport::Server::builder()
            .add_service(AgentRunnerServer::new(service))
            .serve_with_incoming(incoming(listener))
            .await;
    });
    addr
}

/// Two rounds of `current_time`, then an answer.
const TWO_ROUNDS: &str = r#"
[default]
steps = [
  { tool_call = { name = "current_time", id = "first", input = { utc_offset = "+00:00" } } },
  { text = "Once more. " },
  { tool_call = { name = "current_time", id = "second", input = { utc_offset = "+00:00" } } },
  { text = "Done." },
]
"#;

#[tokio::test]
async fn a_replica_that_stalled_past_its_lease_starts_no_further_tool_call() {
    const TEST: &str = "leases::a_replica_that_stalled_past_its_lease_starts_no_further_tool_call";
    let Some((database_url, schema)) = postgres::fresh_schema(TEST).await else {
        return;
    };
    let clock = Arc::new(CountedClock::default());
    let runner_addr = runner_with(TWO_ROUNDS, clock.clone()).await;
    let (_, _, parser_addr, _parser) = start_upstreams(&Options::default()).await;
    let dir = tempfile::tempdir().expect("temp dir");
    let config = ProcessConfig {
        database_url,
        runner: runner_addr,
        parser: parser_addr,
        lease_renew: Duration::from_millis(200),
        lease_ttl: Duration::from_secs(1),
        stream_ahead: 32,
        per_user_concurrent_turns: 0,
    };
    let mut stalls = GatewayProcess::start(&config, dir.path(), "stalls").await;
    let mut other = GatewayProcess::start(&config, dir.path(), "other").await;

    let on_stalls = stalls
        .client
        // A page with a gRPC tool (`lookup_rows`, never called here): only
        // a turn whose tools can have effects is fenced.
        .chat(chat_request("", "What time is it, twice?", "table_view"))
        .await
        .expect("chat")
        .into_inner();
    // The first call runs (held at the gate).
    let started = tokio::time::Instant::now();
    while clock.calls.load(Ordering::SeqCst) == 0 {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the first tool call did not start"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The replica stalls; the other ends its turn once the lease lapsed.
    stalls.pause();
    let mut conn = postgres::connect(&schema).await;
    let started = tokio::time::Instant::now();
    loop {
        let running: i64 =
            sqlx::query("SELECT count(*) AS running FROM turns WHERE state = 'running'")
                .fetch_one(&mut conn)
                .await
                .expect("count")
                .try_get("running")
                .expect("running");
        if running == 0 {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the other replica did not end the stalled replica's turn:\n{}",
            other.log_text()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // The first call returns (if its time-out has not ended it already),
    // the model asks for a second one; then the stalled replica runs on.
    clock.gate.notify_one();
    stalls.resume();
    let rest = tokio::time::timeout(Duration::from_secs(30), drain(on_stalls))
        .await
        .expect("the stalled replica's stream ends");
    assert_eq!(
        clock.calls.load(Ordering::SeqCst),
        1,
        "a tool call started for a turn another replica had ended: {rest:?}"
    );
    stalls.kill().await;
    other.kill().await;
    postgres::drop_schema(&schema).await;
}
