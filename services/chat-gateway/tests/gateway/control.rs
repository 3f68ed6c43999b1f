//! Turn control: disconnects, cancel, deadlines, one turn per conversation,
//! idempotent retries, the concurrency limit and shutdown.

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use parley_proto::{
    gateway::v1::{self as gw, chat_event::Event},
    runner::v1::run_event,
};
use tokio::sync::Notify;
use tonic::Code;

use crate::harness::{
    Harness, Options, answered, chat, chat_request, collect,
    fake_runner::{Reply, Step, finished},
    reason, until_text,
};

/// A reply that writes `first`, then waits for the gate, then finishes.
fn gated(first: &str, rest: &str, gate: &Arc<Notify>) -> Reply {
    Reply::Steps(vec![
        Step::Send(run_event::Event::TextDelta(first.into())),
        Step::Gate(gate.clone()),
        Step::Send(run_event::Event::TextDelta(rest.into())),
        Step::Send(finished(&format!("{first}{rest}"))),
    ])
}

/// A reply that writes `first`, then hangs until dropped.
fn hanging(first: &str) -> Reply {
    Reply::Steps(vec![
        Step::Send(run_event::Event::TextDelta(first.into())),
        Step::Hang,
    ])
}

async fn conversation(stack: &mut Harness, id: &str) -> gw::GetConversationResponse {
    stack
        .client
        .get_conversation(gw::GetConversationRequest {
            conversation_id: id.into(),
            ..Default::default()
        })
        .await
        .expect("get")
        .into_inner()
}

#[tokio::test]
async fn a_client_that_disconnects_still_gets_its_answer_stored() {
    let mut stack = Harness::start(Options::default()).await;
    let gate = Arc::new(Notify::new());
    stack
        .runner
        .push(gated("The answer is ", "forty-two.", &gate));
    let mut stream = stack
        .client
        .chat(chat_request("", "What is the answer?", "tables_list"))
        .await
        .expect("chat")
        .into_inner();
    let (conversation_id, _, _) = until_text(&mut stream).await;
    drop(stream);
    // While the turn waits, the conversation shows it running.
    let running = conversation(&mut stack, &conversation_id).await;
    assert_eq!(
        running.messages.last().map(|m| m.state),
        Some(gw::TurnState::Running as i32)
    );
    gate.notify_one();
    let answer = answered(&mut stack.client, &conversation_id).await;
    assert_eq!(answer.text, "The answer is forty-two.");
    assert_eq!(answer.state, gw::TurnState::Completed as i32);
    assert_eq!(
        stack.runner.drop_count(),
        0,
        "the runner's stream was never cut"
    );
    stack.stop().await;
}

#[tokio::test]
async fn cancel_stops_the_runner_and_keeps_the_partial_answer() {
    let mut stack = Harness::start(Options::default()).await;
    stack.runner.push(hanging("Partial answer so far"));
    let mut stream = stack
        .client
        .chat(chat_request("", "Write a long essay", "tables_list"))
        .await
        .expect("chat")
        .into_inner();
    let (conversation_id, turn_id, _) = until_text(&mut stream).await;

    let asked = Instant::now();
    let response = stack
        .client
        .cancel_turn(gw::CancelTurnRequest {
            conversation_id: conversation_id.clone(),
            turn_id: turn_id.clone(),
        })
        .await
        .expect("cancel")
        .into_inner();
    let answered_in = asked.elapsed();
    assert_eq!(
        (response.cancelled, response.turn_id.as_str()),
        (true, turn_id.as_str())
    );
    let runner_stopped = stack
        .runner
        .dropped(1)
        .await
        .saturating_duration_since(asked);

    let rest = collect_rest(&mut stream).await;
    let Some(Event::Complete(complete)) = rest.last().and_then(|e| e.event.clone()) else {
        panic!("{rest:?}")
    };
    assert!(!complete.success);
    assert_eq!(complete.state, gw::TurnState::Cancelled as i32);
    assert_eq!(complete.message, "Partial answer so far");
    assert!(
        rest.iter()
            .all(|e| !matches!(e.event, Some(Event::Error(_)))),
        "a cancel is not an error"
    );

    // CancelTurn returned after the partial answer was stored.
    let stored = conversation(&mut stack, &conversation_id).await;
    let last = stored.messages.last().expect("answer");
    assert_eq!(
        (last.state, last.text.as_str()),
        (gw::TurnState::Cancelled as i32, "Partial answer so far")
    );
    println!(
        "cancel: CancelTurn answered in {:.1} ms, runner stream dropped {:.1} ms after the request",
        answered_in.as_secs_f64() * 1e3,
        runner_stopped.as_secs_f64() * 1e3
    );

    // Nothing is running any more.
    let again = stack
        .client
        .cancel_turn(gw::CancelTurnRequest {
            conversation_id,
            turn_id: String::new(),
        })
        .await
        .expect("cancel")
        .into_inner();
    assert!(!again.cancelled);
    stack.stop().await;
}

async fn collect_rest(stream: &mut tonic::Streaming<gw::ChatEvent>) -> Vec<gw::ChatEvent> {
    let mut rest = Vec::new();
    let read = async {
        while let Some(event) = stream.message().await.expect("stream ok") {
            rest.push(event);
        }
    };
    tokio::time::timeout(Duration::from_secs(10), read)
        .await
        .expect("ends within 10 s");
    rest
}

#[tokio::test]
async fn the_deadline_bounds_the_turn_and_reaches_the_runner() {
    let mut stack = Harness::start(Options::default()).await;
    stack.runner.push(hanging("Thinking about it"));
    let mut request = tonic::Request::new(chat_request("", "Take your time", "tables_list"));
    request.set_timeout(Duration::from_secs(2));
    // The client's own deadline ends its call; the turn ends on the server.
    let mut stream = stack.client.chat(request).await.expect("chat").into_inner();
    let (conversation_id, _, _) = until_text(&mut stream).await;
    while let Ok(Some(_)) = stream.message().await {}

    stack.runner.dropped(1).await;
    let timeout = stack.runner.seen()[0]
        .timeout
        .expect("grpc-timeout passed on");
    assert!(
        timeout > Duration::ZERO && timeout <= Duration::from_secs(2),
        "{timeout:?}"
    );
    let answer = answered(&mut stack.client, &conversation_id).await;
    assert_eq!(answer.state, gw::TurnState::Failed as i32);
    assert_eq!(answer.text, "Thinking about it");
    stack.stop().await;
}

#[tokio::test]
async fn a_second_message_while_a_turn_runs_is_refused_unless_it_cancels() {
    let mut stack = Harness::start(Options::default()).await;
    stack.runner.push(hanging("Working"));
    let mut first = stack
        .client
        .chat(chat_request("", "First", "tables_list"))
        .await
        .expect("chat")
        .into_inner();
    let (conversation_id, turn_id, _) = until_text(&mut first).await;

    let refused = stack
        .client
        .chat(chat_request(&conversation_id, "Second", "tables_list"))
        .await
        .expect_err("busy");
    assert_eq!(refused.code(), Code::FailedPrecondition);
    assert_eq!(reason(&refused), "TURN_IN_PROGRESS");

    let mut replacing = chat_request(&conversation_id, "Second, now", "tables_list");
    replacing.cancel_running = true;
    stack
        .runner
        .push(crate::harness::fake_runner::text_reply(&["Done."]));
    let second = chat(&mut stack.client, replacing).await;
    assert!(second.complete.success);
    assert_ne!(second.complete.turn_id, turn_id);

    let rest = collect_rest(&mut first).await;
    let Some(Event::Complete(complete)) = rest.last().and_then(|e| e.event.clone()) else {
        panic!("{rest:?}")
    };
    assert_eq!(complete.state, gw::TurnState::Cancelled as i32);

    // The log has both turns in order, the first cancelled.
    let stored = conversation(&mut stack, &conversation_id).await;
    let states: Vec<i32> = stored
        .messages
        .iter()
        .filter(|m| m.role == 2)
        .map(|m| m.state)
        .collect();
    assert_eq!(
        states,
        vec![
            gw::TurnState::Cancelled as i32,
            gw::TurnState::Completed as i32
        ]
    );
    stack.stop().await;
}

#[tokio::test]
async fn a_retried_request_id_follows_or_replays_its_turn() {
    let mut stack = Harness::start(Options::default()).await;
    let gate = Arc::new(Notify::new());
    stack.runner.push(gated("One ", "answer.", &gate));
    let mut request = chat_request("", "Only once", "tables_list");
    request.request_id = "req-42".into();
    let mut first = stack
        .client
        .chat(request.clone())
        .await
        .expect("chat")
        .into_inner();
    until_text(&mut first).await;

    // While it runs, the retry attaches to it from its first event.
    let attached = stack
        .client
        .chat(request.clone())
        .await
        .expect("a retry while the turn runs follows it")
        .into_inner();
    gate.notify_one();
    let rest = collect_rest(&mut first).await;
    let Some(Event::Complete(original)) = rest.last().and_then(|e| e.event.clone()) else {
        panic!("{rest:?}")
    };
    let attached = collect(attached).await;
    assert_eq!(attached.complete, *original);
    assert_eq!(attached.text, "One answer.");

    // Once it is over, the retry replays the stored stream exactly.
    let replayed = chat(&mut stack.client, request).await;
    assert_eq!(
        replayed.events, attached.events,
        "the same events, seq by seq"
    );
    assert_eq!(stack.runner.seen().len(), 1, "no second model call");
    let stored = conversation(&mut stack, &original.conversation_id).await;
    assert_eq!(stored.messages.len(), 2, "no second turn");
    stack.stop().await;
}

#[tokio::test]
async fn a_retried_request_id_runs_again_after_a_retryable_failure() {
    let mut stack = Harness::start(Options::default()).await;
    stack
        .runner
        .push(Reply::Fail(tonic::Status::unavailable("runner restarting")));
    let mut request = chat_request("", "Try me", "tables_list");
    request.request_id = "req-retry".into();
    let failed = chat(&mut stack.client, request.clone()).await;
    let error = failed.error.clone().expect("an error event");
    assert!(error.retryable, "{error:?}");
    assert!(!failed.complete.success);

    stack.runner.push(crate::harness::fake_runner::text_reply(&[
        "Second ", "time.",
    ]));
    let retried = chat(&mut stack.client, request.clone()).await;
    assert!(retried.complete.success, "{:?}", retried.complete);
    assert_eq!(retried.text, "Second time.");
    assert_ne!(
        retried.complete.turn_id, failed.complete.turn_id,
        "a new turn"
    );
    assert_eq!(
        retried.complete.conversation_id, failed.complete.conversation_id,
        "in the conversation the failed turn had created"
    );
    let stored = conversation(&mut stack, &failed.complete.conversation_id).await;
    assert_eq!(stored.messages.len(), 4, "both attempts, one conversation");
    assert_eq!(stack.runner.seen().len(), 2);
    // And now the id is the successful turn's: a third try replays it.
    let replayed = chat(&mut stack.client, request).await;
    assert_eq!(replayed.complete, retried.complete);
    assert_eq!(stack.runner.seen().len(), 2);
    stack.stop().await;
}

#[tokio::test]
async fn the_concurrency_limit_refuses_with_a_retryable_status() {
    let mut stack = Harness::start(Options {
        tweak: |c| c.turns.max_concurrent = 1,
        ..Options::default()
    })
    .await;
    stack.runner.push(hanging("Busy"));
    let mut first = stack
        .client
        .chat(chat_request("", "First", "tables_list"))
        .await
        .expect("chat")
        .into_inner();
    let (conversation_id, _, _) = until_text(&mut first).await;
    let refused = stack
        .client
        .chat(chat_request("", "Another conversation", "tables_list"))
        .await
        .expect_err("full");
    assert_eq!(
        (refused.code(), reason(&refused).as_str()),
        (Code::ResourceExhausted, "TOO_MANY_TURNS")
    );
    stack
        .client
        .cancel_turn(gw::CancelTurnRequest {
            conversation_id,
            turn_id: String::new(),
        })
        .await
        .expect("cancel");
    collect_rest(&mut first).await;
    // The permit came back with the turn's end.
    let turn = chat(
        &mut stack.client,
        chat_request("", "Now it fits", "tables_list"),
    )
    .await;
    assert!(turn.complete.success);
    stack.stop().await;
}

#[tokio::test]
async fn shutdown_stores_a_turn_that_outlives_the_drain_as_failed() {
    let mut stack = Harness::start(Options {
        tweak: |c| c.server.drain_timeout = Duration::from_secs(1),
        ..Options::default()
    })
    .await;
    stack.runner.push(hanging("Halfway"));
    let mut stream = stack
        .client
        .chat(chat_request("", "Long job", "tables_list"))
        .await
        .expect("chat")
        .into_inner();
    let (conversation_id, turn_id, _) = until_text(&mut stream).await;
    drop(stream);
    let url = stack.database_url.clone();
    let _dir = stack.stop().await;
    // The gateway drained for 1 s, then stopped the turn and stored it.
    let store = chat_gateway::store::Store::open(&url, &Default::default())
        .await
        .expect("reopen");
    let dev = chat_gateway::auth::Principal::dev();
    let turn = store
        .turn(dev.owner(), &turn_id)
        .await
        .expect("read")
        .expect("stored");
    assert_eq!(turn.state, chat_gateway::store::TurnState::Failed);
    let events = store
        .events(dev.owner(), &conversation_id)
        .await
        .expect("events");
    let Some(chat_gateway::store::EventBody::AssistantMessage(answer)) =
        events.last().map(|e| e.body.clone())
    else {
        panic!("{events:?}")
    };
    assert_eq!(answer.text, "Halfway");
    assert_eq!(answer.error.map(|e| e.reason), Some("SHUTDOWN".to_owned()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_next_message_sent_as_soon_as_complete_arrives_is_accepted() {
    // Clients that send their next message the moment they read `complete`
    // (the benchmark's do) must find the conversation free, whichever
    // thread runs what. (One user sends them all: its limits are off.)
    let stack = Harness::start(Options {
        tweak: |config| config.turns.per_user = chat_gateway::config::Quota::UNLIMITED,
        ..Options::default()
    })
    .await;
    let clients = (0..8).map(|_| {
        let mut client = stack.client.clone();
        tokio::spawn(async move {
            let first = chat(&mut client, chat_request("", "One", "tables_list")).await;
            let conversation_id = first.conversation_id();
            for n in 0..25 {
                let next = client
                    .chat(chat_request(
                        &conversation_id,
                        &format!("Next {n}"),
                        "tables_list",
                    ))
                    .await
                    .unwrap_or_else(|status| panic!("turn {n} refused: {status:?}"));
                let next = collect(next.into_inner()).await;
                assert!(next.complete.success, "{:?}", next.complete);
            }
        })
    });
    for client in futures::future::join_all(clients).await {
        client.expect("client");
    }
    stack.stop().await;
}
