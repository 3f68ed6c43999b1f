//! Turn leases between real gateway processes on one PostgreSQL: leases on
//! the store's clock (one replica's clock shifted with libfaketime), the
//! sweep after a replica is killed, and fencing of tool calls.

use std::{sync::Arc, time::Duration};

use tokio::sync::Notify;

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
        GatewayProcess::start_with_clock(&config, dir.path(), "ahead", Some(AHEAD)).await;

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
