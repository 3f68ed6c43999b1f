//! Load shedding: a full gateway refuses at once and cheaply, with
//! `RESOURCE_EXHAUSTED` and `RetryInfo`, while the streams it admitted run
//! to their end; open streams count until they end.

use std::{sync::Arc, time::Duration};

use parley_proto::{
    gateway::v1::{self as gw, chat_event::Event},
    runner::v1::run_event,
};
use tokio::sync::Notify;
use tonic::Code;
use tonic_types::StatusExt;

use crate::harness::{
    Harness, Options, chat_request, collect,
    fake_runner::{Reply, Step, finished},
    reason,
};

/// Two turns at once, three streams.
fn small(config: &mut chat_gateway::config::GatewayConfig) {
    config.turns.max_concurrent = 2;
    config.turns.max_streams = 3;
    config.turns.per_user = chat_gateway::config::Quota::UNLIMITED;
}

fn assert_shed(status: &tonic::Status, expected: &str) {
    assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
    assert_eq!(reason(status), expected);
    assert!(
        status
            .get_details_retry_info()
            .and_then(|info| info.retry_delay)
            .is_some(),
        "a RetryInfo: {status:?}"
    );
}

#[tokio::test]
async fn a_full_gateway_sheds_the_excess_and_finishes_what_it_admitted() {
    let mut stack = Harness::start(Options {
        tweak: small,
        ..Options::default()
    })
    .await;
    // Each admitted turn waits for its own gate (a stored permit, so the
    // order of opening and waiting does not matter).
    let gates = [Arc::new(Notify::new()), Arc::new(Notify::new())];
    for gate in &gates {
        stack.runner.push(Reply::Steps(vec![
            Step::Send(run_event::Event::TextDelta("Working".into())),
            Step::Gate(gate.clone()),
            Step::Send(finished("Working")),
        ]));
    }
    let mut admitted = Vec::new();
    for message in ["one", "two"] {
        admitted.push(
            stack
                .client
                .chat(chat_request("", message, "tables_list"))
                .await
                .expect("admitted")
                .into_inner(),
        );
    }
    // Both turn slots are taken: the excess is refused, fifty at once,
    // without reaching the runner or the store, and counted (the metric is
    // process-wide and other tests run beside this one: at least fifty).
    let metrics = parley_grpc::telemetry::metrics();
    let rejected = || {
        metrics
            .tenant_rejected
            .with_label_values(&["", "TOO_MANY_TURNS"])
            .get()
    };
    let rejected_before = rejected();
    let excess = (0..50).map(|n| {
        let mut client = stack.client.clone();
        async move {
            client
                .chat(chat_request("", &format!("excess {n}"), "tables_list"))
                .await
                .expect_err("shed")
        }
    });
    for refused in futures::future::join_all(excess).await {
        assert_shed(&refused, "TOO_MANY_TURNS");
    }
    assert_eq!(
        stack.runner.seen().len(),
        2,
        "the runner saw only the admitted turns"
    );
    assert!(
        rejected() - rejected_before >= 50,
        "refused turns count in parley_tenant_turns_rejected_total"
    );

    // A third stream (a follower) fills the stream limit: then even a
    // follower is refused.
    let mut first = admitted.remove(0);
    let status = first.message().await.expect("stream").expect("status");
    let Some(Event::Status(ids)) = status.event else {
        panic!("the first event is a status: {status:?}")
    };
    let follower = stack
        .client
        .resume_turn(gw::ResumeTurnRequest {
            conversation_id: ids.conversation_id.clone(),
            turn_id: ids.turn_id.clone(),
            after_seq: 0,
        })
        .await
        .expect("a third stream")
        .into_inner();
    let refused = stack
        .client
        .resume_turn(gw::ResumeTurnRequest {
            conversation_id: ids.conversation_id.clone(),
            turn_id: ids.turn_id.clone(),
            after_seq: 0,
        })
        .await
        .expect_err("a fourth stream");
    assert_shed(&refused, "TOO_MANY_STREAMS");

    // What was admitted runs to its end.
    for gate in &gates {
        gate.notify_one();
    }
    let followed = collect(follower).await;
    assert!(followed.complete.success);
    let second = collect(admitted.remove(0)).await;
    assert!(second.complete.success);
    drop(first);

    // Every stream has ended: the gateway admits again.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        match stack
            .client
            .chat(chat_request("", "After the rush", "tables_list"))
            .await
        {
            Ok(stream) => {
                assert!(collect(stream.into_inner()).await.complete.success);
                break;
            }
            Err(status) => {
                assert!(
                    tokio::time::Instant::now() < deadline,
                    "never admitted: {status:?}"
                );
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    }
    stack.stop().await;
}
