//! The agent-runner container is killed (SIGKILL) in the middle of a turn:
//! the client gets an `error` event it may retry, the user message and the
//! partial answer are in the store, and once the runner is started again
//! the next turn works.

use parley_proto::gateway::v1::{MessageRole, TurnState};

use crate::support::{
    chat::request,
    gate,
    stack::{Service, Stack, StackOptions},
};

#[tokio::test]
async fn a_runner_killed_mid_turn_gives_a_retryable_error_and_keeps_the_partial_answer() {
    let test = "a_runner_killed_mid_turn_gives_a_retryable_error_and_keeps_the_partial_answer";
    let Some(prerequisites) = gate::prerequisites(test).await else {
        return;
    };
    let options = StackOptions {
        runner_script: Some("slow-script.toml"),
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
            stack.kill(Service::Runner).await;
            let turn = reader.finish().await;

            let error = turn
                .error
                .as_ref()
                .unwrap_or_else(|| panic!("no error event: {}", turn.summary()));
            assert!(error.retryable, "{error:?}");
            assert_eq!(error.reason, "RUNNER_UNAVAILABLE", "{error:?}");
            // No transport internals (h2 errors, addresses) reach the client.
            assert_eq!(
                error.message, "the agent-runner stopped answering during the turn",
                "{error:?}"
            );
            let complete = turn.complete();
            assert!(!complete.success);
            assert_eq!(complete.state, TurnState::Failed as i32);
            assert!(
                turn.text.starts_with("Starting the slow report"),
                "{}",
                turn.summary()
            );
            assert!(!turn.text.contains("second half"), "{}", turn.summary());

            let stored = client.get_conversation(&turn.conversation_id).await;
            let roles: Vec<i32> = stored.messages.iter().map(|m| m.role).collect();
            assert_eq!(
                roles,
                [MessageRole::User as i32, MessageRole::Assistant as i32]
            );
            assert_eq!(stored.messages[0].text, "Run the slow report");
            let partial = &stored.messages[1];
            assert_eq!(partial.state, TurnState::Failed as i32);
            assert!(
                partial
                    .text
                    .contains("Starting the slow report: the first half is in."),
                "{partial:?}"
            );
            let stored_error = partial.error.as_ref().expect("the stored error");
            assert_eq!(stored_error.reason, "RUNNER_UNAVAILABLE");
            assert!(stored_error.retryable);

            let took = stack.restart(Service::Runner).await;
            eprintln!("agent-runner SERVING again {took:?} after docker start");
            let next = client
                .chat(request(
                    &turn.conversation_id,
                    "Something quick",
                    "tables_list",
                ))
                .await;
            assert!(next.complete().success, "{}", next.summary());
            assert_eq!(next.complete().suggested_values.len(), 1);
            let stored = client.get_conversation(&turn.conversation_id).await;
            assert_eq!(stored.messages.len(), 4);
            assert_eq!(stored.messages[3].state, TurnState::Completed as i32);
        })
        .await;
}
