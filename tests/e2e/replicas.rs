//! Two chat-gateway replicas (containers A and B) on one PostgreSQL schema,
//! sharing a runner with the slow scripted model and a parser, with short
//! leases (`fixtures/replicas-gateway.toml`). A client switches between
//! them: B refuses a second turn on a conversation A is running a turn
//! on, B cancels A's turn, B resumes a stream A started, and B ends (as
//! `REPLICA_LOST`) the turn of an A that was killed.

use std::time::{Duration, Instant};

use parley_proto::gateway::v1::{ChatRequest, MessageRole, TurnState, chat_event::Event};
use tonic::Code;

use crate::support::{
    chat::{Client, Turn, TurnReader, kind, request},
    gate,
    stack::{Service, Stack, StackOptions},
};

/// The replicas' `lease_ttl` (fixtures/replicas-gateway.toml).
const LEASE_TTL: Duration = Duration::from_millis(1500);
/// The page every request is sent from.
const PAGE: &str = "tables_list";
/// One line, a 3 s pause, the rest (fixtures/slow-script.toml).
const SLOW: &str = "Run the slow report";
const SLOW_FIRST: &str = "Starting the slow report: the first half is in.";
/// One line, a 60 s pause, the rest.
const LONG: &str = "Run the long report";
const LONG_FIRST: &str = "Starting the long report: the first part is in.";

/// Starts the stack with replicas A ([`Service::Gateway`]) and B
/// ([`Service::GatewayB`]), or returns `None` when it cannot run here.
async fn replicas(test: &str) -> Option<Stack> {
    let prerequisites = gate::prerequisites(test).await?;
    let options = StackOptions {
        runner_script: Some("slow-script.toml"),
        gateway_config: Some("replicas-gateway.toml"),
        second_gateway: true,
        ..StackOptions::default()
    };
    Some(Stack::start(&prerequisites, options).await)
}

/// Clients of A and B.
async fn clients(stack: &Stack) -> (Client, Client) {
    (
        stack.client_of(Service::Gateway).await,
        stack.client_of(Service::GatewayB).await,
    )
}

/// Opens `request` and reads until the streamed text contains `first`.
async fn open_until(client: &mut Client, request: ChatRequest, first: &str) -> TurnReader {
    let mut reader = client.open(request).await;
    assert!(
        reader.until_text(first).await,
        "{}",
        reader.so_far().summary()
    );
    reader
}

/// Asserts that `events` are `after + 1, after + 2, ...`.
fn assert_seqs_follow(turn: &Turn, after: u64) {
    let seqs: Vec<u64> = turn.events.iter().map(|event| event.seq).collect();
    let expected: Vec<u64> = (after + 1..=after + seqs.len() as u64).collect();
    assert_eq!(seqs, expected, "{}", turn.summary());
}

/// Asserts that `turn` is the ending of a turn whose replica died, as
/// resumed after `after`: an error and a complete, numbered after every seq
/// the dead replica could have sent (so possibly skipping some).
fn assert_ending_after(turn: &Turn, after: u64) {
    let seqs: Vec<u64> = turn.events.iter().map(|event| event.seq).collect();
    assert_eq!(seqs.len(), 2, "{}", turn.summary());
    assert!(seqs[0] > after, "{seqs:?} after {after}");
    assert_eq!(seqs[1], seqs[0] + 1, "{}", turn.summary());
}

#[tokio::test]
async fn a_second_turn_on_another_replica_is_refused_while_one_runs() {
    let test = "a_second_turn_on_another_replica_is_refused_while_one_runs";
    let Some(stack) = replicas(test).await else {
        return;
    };
    stack
        .run(async |stack| {
            let (mut a, mut b) = clients(stack).await;
            let reader = open_until(&mut a, request("", SLOW, PAGE), SLOW_FIRST).await;
            let conversation = reader.so_far().conversation_id.clone();

            let refused = b
                .try_open(request(&conversation, "Something quick", PAGE))
                .await;
            let Err(status) = refused else {
                panic!("B accepted a second turn while A runs one");
            };
            assert_eq!(status.code(), Code::FailedPrecondition, "{status:?}");
            assert_eq!(
                parley_grpc::status::reason(&status).as_deref(),
                Some("TURN_IN_PROGRESS"),
                "{status:?}"
            );

            // A's turn is untouched by the refusal, which stored nothing.
            let turn = reader.finish().await;
            assert!(turn.complete().success, "{}", turn.summary());
            let stored = b.get_conversation(&conversation).await;
            let texts: Vec<&str> = stored.messages.iter().map(|m| m.text.as_str()).collect();
            assert_eq!(texts, [SLOW, turn.complete().message.as_str()]);
        })
        .await;
}

#[tokio::test]
async fn cancel_turn_on_one_replica_stops_the_turn_running_on_another() {
    let test = "cancel_turn_on_one_replica_stops_the_turn_running_on_another";
    let Some(stack) = replicas(test).await else {
        return;
    };
    stack
        .run(async |stack| {
            let (mut a, mut b) = clients(stack).await;
            let mut reader = open_until(&mut a, request("", LONG, PAGE), LONG_FIRST).await;
            let conversation = reader.so_far().conversation_id.clone();
            let turn_id = reader.so_far().turn_id.clone();
            let reading = tokio::spawn(async move {
                reader.until(kind::complete).await;
                let completed = Instant::now();
                (reader.finish().await, completed)
            });

            let asked = Instant::now();
            let response = b.cancel_turn(&conversation, &turn_id).await;
            let (turn, completed) = reading.await.expect("A's stream reader");
            let latency = completed.saturating_duration_since(asked);
            eprintln!("CancelTurn on B -> complete on A's stream: {latency:?}");

            assert!(response.cancelled, "{response:?}");
            assert_eq!(response.turn_id, turn_id);
            let complete = turn.complete();
            assert!(!complete.success, "{}", turn.summary());
            assert_eq!(complete.state, TurnState::Cancelled as i32);
            assert!(
                latency < Duration::from_millis(500),
                "A's stream completed {latency:?} after CancelTurn on B"
            );

            for client in [&mut a, &mut b] {
                let stored = client.get_conversation(&conversation).await;
                let roles: Vec<i32> = stored.messages.iter().map(|m| m.role).collect();
                assert_eq!(
                    roles,
                    [MessageRole::User as i32, MessageRole::Assistant as i32]
                );
                let answer = &stored.messages[1];
                assert_eq!(answer.turn_id, turn_id);
                assert_eq!(answer.state, TurnState::Cancelled as i32, "{answer:?}");
                assert!(answer.text.contains(LONG_FIRST), "{answer:?}");
            }
        })
        .await;
}

#[tokio::test]
async fn resume_turn_on_another_replica_delivers_exactly_the_rest() {
    let test = "resume_turn_on_another_replica_delivers_exactly_the_rest";
    let Some(stack) = replicas(test).await else {
        return;
    };
    stack
        .run(async |stack| {
            let (mut a, mut b) = clients(stack).await;
            let mut reader = a.open(request("", SLOW, PAGE)).await;
            assert!(
                reader
                    .until(|event| matches!(event, Event::Status(_)))
                    .await,
                "{}",
                reader.so_far().summary()
            );
            let conversation = reader.so_far().conversation_id.clone();
            let turn_id = reader.so_far().turn_id.clone();
            // The undisturbed client: the whole turn, from A.
            let observer = a.resume(&conversation, &turn_id, 0).await;
            let observing = tokio::spawn(observer.finish());

            assert!(
                reader.until_text(SLOW_FIRST).await,
                "{}",
                reader.so_far().summary()
            );
            let seen = reader.so_far().events.clone();
            let last = reader.so_far().last_seq();
            drop(reader);

            let resumed = b.resume(&conversation, &turn_id, last).await.finish().await;
            let observed = observing.await.expect("the observer");
            eprintln!(
                "dropped after seq {last}; B resumed {} events, the observer saw {}",
                resumed.events.len(),
                observed.events.len()
            );

            assert!(observed.status.is_none(), "{}", observed.summary());
            assert!(observed.complete().success, "{}", observed.summary());
            assert_seqs_follow(&observed, 0);
            assert!(resumed.status.is_none(), "{}", resumed.summary());
            assert_seqs_follow(&resumed, last);
            assert_eq!(
                seen.len() + resumed.events.len(),
                observed.events.len(),
                "seen {} + resumed {} events vs observed {}",
                seen.len(),
                resumed.summary(),
                observed.summary()
            );
            for (got, want) in seen.iter().chain(&resumed.events).zip(&observed.events) {
                assert_eq!(got, want, "event seq {}", want.seq);
            }
            assert_eq!(resumed.complete().turn_id, turn_id);
        })
        .await;
}

#[tokio::test]
async fn a_killed_replicas_turn_ends_as_replica_lost_on_the_other() {
    let test = "a_killed_replicas_turn_ends_as_replica_lost_on_the_other";
    let Some(stack) = replicas(test).await else {
        return;
    };
    stack
        .run(async |stack| {
            let (mut a, mut b) = clients(stack).await;
            let first = a.chat(request("", "Something quick", PAGE)).await;
            assert!(first.complete().success, "{}", first.summary());
            let conversation = first.conversation_id.clone();
            let slow = ChatRequest {
                request_id: uuid::Uuid::new_v4().to_string(),
                ..request(&conversation, SLOW, PAGE)
            };
            let reader = open_until(&mut a, slow.clone(), SLOW_FIRST).await;
            let turn_id = reader.so_far().turn_id.clone();
            let last = reader.so_far().last_seq();
            // B follows the turn from the store: once it has the text, A's
            // log holds everything A's client saw (A may stream up to
            // `turns.stream_ahead` events before storing them).
            let mut watching = b.resume(&conversation, &turn_id, 0).await;
            assert!(
                watching.until_text(SLOW_FIRST).await,
                "{}",
                watching.so_far().summary()
            );

            let killed = Instant::now();
            stack.kill(Service::Gateway).await;
            drop(reader);
            let mut resuming = b.resume(&conversation, &turn_id, last).await;
            resuming.until(kind::complete).await;
            let lost_after = killed.elapsed();
            let resumed = resuming.finish().await;
            eprintln!(
                "SIGKILL of A -> complete (REPLICA_LOST) on B's ResumeTurn: {lost_after:?} ({} events after seq {last})",
                resumed.events.len()
            );

            assert!(resumed.status.is_none(), "{}", resumed.summary());
            assert_ending_after(&resumed, last);
            let watched = watching.finish().await;
            assert_eq!(
                watched.events.last(),
                resumed.events.last(),
                "B's follower and B's resume end alike"
            );
            let error = resumed
                .error
                .as_ref()
                .unwrap_or_else(|| panic!("no error event: {}", resumed.summary()));
            assert_eq!(error.reason, "REPLICA_LOST", "{error:?}");
            assert!(error.retryable, "{error:?}");
            let complete = resumed.complete();
            assert!(!complete.success, "{}", resumed.summary());
            assert_eq!(complete.state, TurnState::Failed as i32);
            assert!(
                lost_after < LEASE_TTL + Duration::from_secs(2),
                "REPLICA_LOST {lost_after:?} after the kill"
            );

            let stored = b.get_conversation(&conversation).await;
            assert_eq!(stored.messages.len(), 4, "{stored:?}");
            let lost = &stored.messages[3];
            assert_eq!(lost.turn_id, turn_id);
            assert_eq!(lost.state, TurnState::Failed as i32, "{lost:?}");
            assert!(lost.text.contains(SLOW_FIRST), "{lost:?}");
            assert_eq!(
                lost.error.as_ref().map(|error| error.reason.as_str()),
                Some("REPLICA_LOST"),
                "{lost:?}"
            );

            let next = b
                .chat(request(&conversation, "Something quick", PAGE))
                .await;
            assert!(next.complete().success, "{}", next.summary());

            let retried = b.chat(slow).await;
            assert!(retried.complete().success, "{}", retried.summary());
            assert_ne!(retried.complete().turn_id, turn_id);
            assert!(retried.text.contains(SLOW_FIRST), "{}", retried.summary());
            let stored = b.get_conversation(&conversation).await;
            let states: Vec<i32> = stored.messages.iter().skip(1).step_by(2).map(|m| m.state).collect();
            assert_eq!(
                states,
                [
                    TurnState::Completed as i32,
                    TurnState::Failed as i32,
                    TurnState::Completed as i32,
                    TurnState::Completed as i32
                ]
            );
        })
        .await;
}
