//! Turns whose client went away: cancelled after `abandoned_turn_grace`
//! with their partial answer stored, unless someone resumes them.

use std::{sync::Arc, time::Duration};

use parley_proto::{
    gateway::v1::{self as gw, ChatEvent, chat_event::Event},
    runner::v1::run_event,
};
use tokio::sync::Notify;
use tonic::Streaming;

use crate::harness::{
    Harness, Options, answered, chat_request,
    fake_runner::{Reply, Step, finished},
    until_text,
};

/// A one-second grace, checked every 100 ms.
fn short_grace(config: &mut chat_gateway::config::GatewayConfig) {
    config.turns.abandoned_turn_grace = Duration::from_secs(1);
    config.turns.lease_renew = Duration::from_millis(100);
    config.turns.lease_ttl = Duration::from_secs(5);
}

fn abandoned_count() -> u64 {
    let m = parley_grpc::telemetry::metrics();
    m.tenant_abandoned.with_label_values(&[""]).get()
}

#[tokio::test]
async fn a_turn_nobody_follows_is_cancelled_after_the_grace_with_its_partial_answer() {
    let mut stack = Harness::start(Options {
        tweak: short_grace,
        ..Options::default()
    })
    .await;
    stack.runner.push(Reply::Steps(vec![
        Step::Send(run_event::Event::TextDelta("Halfway".into())),
        Step::Hang,
    ]));
    let before = abandoned_count();
    let mut stream = stack
        .client
        .chat(chat_request("", "A long one", "tables_list"))
        .await
        .expect("chat")
        .into_inner();
    let (conversation, _, _) = until_text(&mut stream).await;
    // The client goes away.
    drop(stream);
    let answer = answered(&mut stack.client, &conversation).await;
    assert_eq!(answer.state, gw::TurnState::Cancelled as i32);
    assert_eq!(answer.text, "Halfway");
    assert!(abandoned_count() > before, "the metric counts it");
    // The runner saw its stream dropped: the model call stopped too.
    stack.runner.dropped(1).await;
    stack.stop().await;
}

#[tokio::test]
async fn a_turn_resumed_within_the_grace_runs_to_its_end() {
    let mut stack = Harness::start(Options {
        tweak: short_grace,
        ..Options::default()
    })
    .await;
    let gate = Arc::new(Notify::new());
    stack.runner.push(Reply::Steps(vec![
        Step::Send(run_event::Event::TextDelta("Halfway".into())),
        Step::Gate(gate.clone()),
        Step::Send(run_event::Event::TextDelta(" there".into())),
        Step::Send(finished("Halfway there")),
    ]));
    let mut stream = stack
        .client
        .chat(chat_request("", "A long one", "tables_list"))
        .await
        .expect("chat")
        .into_inner();
    let (conversation, turn, seq) = until_text(&mut stream).await;
    drop(stream);
    // The client reconnects and follows the turn again.
    let resumed = stack
        .client
        .resume_turn(gw::ResumeTurnRequest {
            conversation_id: conversation.clone(),
            turn_id: turn,
            after_seq: seq,
        })
        .await
        .expect("resume")
        .into_inner();
    // Three graces later the turn still runs for its follower (what this
    // waits for is the watchdog's chance to act, not a timing claim).
    tokio::time::sleep(Duration::from_secs(3)).await;
    gate.notify_one();
    let rest: Vec<ChatEvent> = collect_rest(resumed).await;
    let Some(Event::Complete(complete)) = rest.last().and_then(|e| e.event.clone()) else {
        panic!("ends with complete: {rest:?}")
    };
    assert!(complete.success, "{complete:?}");
    assert_eq!(
        answered(&mut stack.client, &conversation).await.text,
        "Halfway there"
    );
    stack.stop().await;
}

async fn collect_rest(mut stream: Streaming<ChatEvent>) -> Vec<ChatEvent> {
    let mut events = Vec::new();
    while let Some(event) = tokio::time::timeout(Duration::from_secs(10), stream.message())
        .await
        .expect("an event within 10 s")
        .expect("stream ok")
    {
        events.push(event);
    }
    events
}
