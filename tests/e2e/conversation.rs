//! A whole conversation through the images, configured as the Kubernetes
//! manifests configure them (`deploy/config`: the Kubernetes gateway
//! configuration with JWT auth, the page registry, the parser profiles, the
//! runner configuration with the demo script): two turns with a tool call,
//! tool progress, a schema proposal and suggestions, then the conversation
//! read back from PostgreSQL.

use parley_proto::{
    gateway::v1::{MessageRole, TurnState, chat_event::Event},
    parser::v1::payload::Typed,
};

use crate::support::{
    chat::{kind, request},
    gate,
    stack::{Stack, StackOptions},
};

const MARKERS: [&str; 4] = [
    "SCHEMA_PROPOSAL",
    "SUGGESTED_VALUES",
    "SUGGESTED_ACTIONS",
    "DATA_PROPOSAL",
];

#[tokio::test]
async fn a_two_turn_conversation_with_a_tool_a_proposal_and_suggestions() {
    let test = "a_two_turn_conversation_with_a_tool_a_proposal_and_suggestions";
    let Some(prerequisites) = gate::prerequisites(test).await else {
        return;
    };
    let options = StackOptions {
        deployed_config: true,
        ..StackOptions::default()
    };
    Stack::start(&prerequisites, options)
        .await
        .run(async |stack| {
            let mut anonymous = crate::support::chat::Client::connect(
                &stack.addr(crate::support::stack::Service::Gateway).await,
                None,
            )
            .await;
            let refused = anonymous
                .try_chat(request("", "Hello", "tables_list"))
                .await
                .expect_err("the deployed gateway requires a token");
            assert_eq!(refused.code(), tonic::Code::Unauthenticated, "{refused:?}");

            let mut client = stack.client().await;
            let first = client
                .chat(request(
                    "",
                    "Help me create a job tracker for my applications",
                    "tables_list",
                ))
                .await;
            let complete = first.complete();
            assert!(complete.success, "{}", first.summary());
            assert!(first.error.is_none(), "{}", first.summary());
            let seqs: Vec<u64> = first.events.iter().map(|event| event.seq).collect();
            assert_eq!(seqs, (1..=seqs.len() as u64).collect::<Vec<_>>());
            for marker in MARKERS.iter().chain(&["\"mode\"", "{"]) {
                assert!(
                    !first.text.contains(marker),
                    "{marker} leaked: {:?}",
                    first.text
                );
            }
            assert_eq!(first.text, complete.message);
            assert_eq!(first.count(kind::tool_start), 1, "{}", first.summary());
            assert!(first.count(kind::tool_progress) >= 1, "{}", first.summary());
            let Some(Event::ToolComplete(tool)) = first
                .events
                .iter()
                .filter_map(|event| event.event.as_ref())
                .find(|event| kind::tool_complete(event))
            else {
                panic!("no tool_complete: {}", first.summary())
            };
            assert_eq!(tool.name, "current_time");
            assert!(tool.success, "{tool:?}");
            let payload = complete.custom_payload.as_ref().expect("a custom payload");
            let Some(Typed::SchemaProposal(proposal)) = &payload.typed else {
                panic!("not a schema proposal: {payload:?}")
            };
            assert_eq!(proposal.table_name.as_deref(), Some("Job Applications"));
            assert_eq!(proposal.operations.len(), 5);
            assert!(!first.parser_fallback(), "{:?}", complete.diagnostics);

            let second = client
                .chat(request(
                    &first.conversation_id,
                    "I accepted the table. What now?",
                    "tables_list",
                ))
                .await;
            let answer = second.complete();
            assert!(answer.success, "{}", second.summary());
            assert_eq!(second.text, answer.message);
            let labels: Vec<&str> = answer
                .suggested_values
                .iter()
                .map(|value| value.label.as_str())
                .collect();
            assert_eq!(
                labels,
                [
                    "Add sample data",
                    "Add a notes column",
                    "Explain the statuses"
                ]
            );
            let actions: Vec<&str> = answer
                .suggested_actions
                .iter()
                .map(|action| action.action.as_str())
                .collect();
            assert_eq!(actions, ["close_chat"]);

            let stored = client.get_conversation(&first.conversation_id).await;
            let roles: Vec<i32> = stored.messages.iter().map(|m| m.role).collect();
            let (user, assistant) = (MessageRole::User as i32, MessageRole::Assistant as i32);
            assert_eq!(roles, [user, assistant, user, assistant]);
            assert_eq!(
                stored.messages[0].text,
                "Help me create a job tracker for my applications"
            );
            assert_eq!(stored.messages[1].text, complete.message);
            assert_eq!(stored.messages[1].state, TurnState::Completed as i32);
            assert_eq!(stored.messages[1].tool_history.len(), 1);
            assert_eq!(stored.messages[1].custom_payload, complete.custom_payload);
            assert_eq!(stored.messages[3].text, answer.message);
            assert_eq!(stored.messages[3].suggested_values, answer.suggested_values);
            let summary = stored.conversation.expect("a summary");
            assert_eq!(summary.turn_count, 2);
            let listed = client.list_conversations().await;
            assert!(
                listed
                    .conversations
                    .iter()
                    .any(|conversation| conversation.id == first.conversation_id),
                "{listed:?}"
            );
        })
        .await;
}
