//! SIGTERM to the chat-gateway container during a turn, as Kubernetes sends
//! it on a rolling update: the turn either completes within the drain time
//! or ends (an `error` event, or `UNAVAILABLE`) once the drain time is up;
//! either way the process exits within the grace period and nothing is lost
//! from the store: after a restart, the conversation has the user message
//! and a final assistant message.

use std::time::{Duration, Instant};

use parley_proto::gateway::v1::{MessageRole, TurnState};

use crate::support::{
    chat::request,
    gate,
    stack::{Service, Stack, StackOptions},
};

/// The pod's `terminationGracePeriodSeconds` in deploy/base/gateway.yaml.
const GRACE: Duration = Duration::from_secs(30);

#[tokio::test]
async fn sigterm_lets_a_running_turn_finish_and_store_it() {
    let test = "sigterm_lets_a_running_turn_finish_and_store_it";
    let Some(prerequisites) = gate::prerequisites(test).await else {
        return;
    };
    let options = StackOptions {
        runner_script: Some("slow-script.toml"),
        gateway_drain_secs: 20,
        ..StackOptions::default()
    };
    Stack::start(&prerequisites, options)
        .await
        .run(async |stack| {
            let mut client = stack.client().await;
            let mut reader = client
                .open(request("", "Run the slow report", "tables_list"))
                .await;
            assert!(
                reader.until_text("the first half is in.").await,
                "{}",
                reader.so_far().summary()
            );
            let signalled = Instant::now();
            stack.signal(Service::Gateway, "SIGTERM").await;
            let turn = reader.finish().await;
            let finished = signalled.elapsed();
            let (code, _) = stack.wait_exit(Service::Gateway, GRACE).await;
            let exited = signalled.elapsed();
            eprintln!(
                "turn finished {finished:?} and gateway exited ({code}) {exited:?} after SIGTERM"
            );

            assert!(turn.status.is_none(), "{}", turn.summary());
            let complete = turn.complete();
            assert!(complete.success, "{}", turn.summary());
            assert!(
                turn.text.contains("the report is complete"),
                "{}",
                turn.summary()
            );
            assert_eq!(code, 0, "a drained gateway exits cleanly");
            assert!(exited < GRACE, "exited {exited:?} after SIGTERM");

            stack.restart(Service::Gateway).await;
            let mut client = stack.client().await;
            let stored = client.get_conversation(&turn.conversation_id).await;
            let roles: Vec<i32> = stored.messages.iter().map(|m| m.role).collect();
            assert_eq!(
                roles,
                [MessageRole::User as i32, MessageRole::Assistant as i32]
            );
            assert_eq!(stored.messages[1].state, TurnState::Completed as i32);
            assert_eq!(stored.messages[1].text, complete.message);
        })
        .await;
}

#[tokio::test]
async fn sigterm_past_the_drain_time_ends_the_turn_and_stores_it_as_failed() {
    let test = "sigterm_past_the_drain_time_ends_the_turn_and_stores_it_as_failed";
    let Some(prerequisites) = gate::prerequisites(test).await else {
        return;
    };
    let drain = Duration::from_secs(2);
    let options = StackOptions {
        runner_script: Some("slow-script.toml"),
        gateway_drain_secs: drain.as_secs(),
        ..StackOptions::default()
    };
    Stack::start(&prerequisites, options)
        .await
        .run(async |stack| {
            let mut client = stack.client().await;
            let mut reader = client
                .open(request("", "Run the long report", "tables_list"))
                .await;
            assert!(
                reader.until_text("the first part is in.").await,
                "{}",
                reader.so_far().summary()
            );
            let signalled = Instant::now();
            stack.signal(Service::Gateway, "SIGTERM").await;
            let turn = reader.finish().await;
            let ended = signalled.elapsed();
            let (code, _) = stack.wait_exit(Service::Gateway, GRACE).await;
            let exited = signalled.elapsed();
            eprintln!(
                "turn ended {ended:?} after SIGTERM ({}); gateway exited ({code}) after {exited:?}",
                turn.summary()
            );

            // The client learns why the turn is over: a retryable error
            // event and `complete`, before its connection closes cleanly
            // (the gateway stops the turn while it still serves the
            // stream; a broken connection here was the race it had).
            let Some(error) = &turn.error else {
                panic!("no SHUTDOWN error event: {}", turn.summary())
            };
            assert_eq!(error.reason, "SHUTDOWN", "{error:?}");
            assert!(error.retryable, "{error:?}");
            assert!(!turn.complete().success);
            assert!(turn.status.is_none(), "{}", turn.summary());
            assert!(ended >= drain, "ended {ended:?}, before the drain time");
            assert!(exited < GRACE, "exited {exited:?} after SIGTERM");

            stack.restart(Service::Gateway).await;
            let mut client = stack.client().await;
            let stored = client.get_conversation(&turn.conversation_id).await;
            let roles: Vec<i32> = stored.messages.iter().map(|m| m.role).collect();
            assert_eq!(
                roles,
                [MessageRole::User as i32, MessageRole::Assistant as i32]
            );
            let answer = &stored.messages[1];
            assert_eq!(answer.state, TurnState::Failed as i32, "{answer:?}");
            assert!(
                answer
                    .text
                    .contains("Starting the long report: the first part is in."),
                "{answer:?}"
            );
            assert_eq!(
                answer.error.as_ref().map(|error| error.reason.as_str()),
                Some("SHUTDOWN"),
                "{answer:?}"
            );
        })
        .await;
}
