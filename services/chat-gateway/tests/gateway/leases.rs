//! Turn leases between real gateway processes on one PostgreSQL: leases on
//! the store's clock (one replica's clock shifted with libfaketime), the
//! sweep after a replica is killed, and fencing of tool calls.

use std::{sync::Arc, time::Duration};

use futures::StreamExt;
use parley_proto::gateway::v1::chat_gateway_client::ChatGatewayClient;
use sqlx::Row;
use tokio::sync::Notify;
use tonic::transport::Channel;

use crate::{
    durable::{ending, ids, read_texts, text},
    harness::{
        Options, chat_request, drain,
        fake_runner::{Reply, Step, finished},
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
        parley_grpc::testing::not_run(
            TEST,
            "libfaketime is not installed: apt-get install -y faketime",
        );
        return;
    }
    let Some((database_url, schema)) = postgres::fresh_schema(TEST).await else {
        return;
    };
    let (runner, runner_addr, parser_addr) = start_upstreams(&Options::default()).await;
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
    let (runner, runner_addr, parser_addr) = start_upstreams(&Options::default()).await;
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
    let ended = survivor
        .log_text()
        .matches("stopped renewing its lease")
        .count();
    assert_eq!(ended, count, "each turn ended once");

    gate.notify_one();
    let (error, complete) = ending(&drain(own).await);
    assert_eq!(error, None);
    assert!(complete.success, "{complete:?}");
    drop(streams);
    survivor.kill().await;
    postgres::drop_schema(&schema).await;
}
