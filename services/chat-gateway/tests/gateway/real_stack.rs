//! The three services together in-process: the gateway, the parser and the
//! real agent-runner playing its demo script with the scripted provider.

use agent_runner::{app::RunnerApp, config::RunnerConfig};
use parley_proto::{
    gateway::v1::{self as gw, chat_event::Event},
    parser::v1::payload::Typed,
};

use crate::harness::{Harness, Options, chat, chat_request, incoming};

/// Starts the real runner (no configuration: the scripted demo) on port 0.
pub(crate) async fn real_runner() -> String {
    let app = RunnerApp::build(&RunnerConfig::scripted_demo(), |_| None).expect("runner");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        let _ = tonic::transport::Server::builder()
            .add_routes(app.routes())
            .serve_with_incoming(incoming(listener))
            .await;
    });
    format!("http://{addr}")
}

#[tokio::test]
async fn a_two_turn_conversation_through_the_whole_stack() {
    let runner_url = real_runner().await;
    let mut stack = Harness::start(Options {
        runner_url: Some(runner_url),
        ..Options::default()
    })
    .await;

    let first = chat(
        &mut stack.client,
        chat_request("", "Please create a job tracker", "tables_list"),
    )
    .await;
    assert!(first.complete.success, "{:?}", first.complete);
    for leak in ["SCHEMA_PROPOSAL", "\"mode\"", "{"] {
        assert!(
            !first.text.contains(leak),
            "{leak} leaked into {:?}",
            first.text
        );
    }
    assert_eq!(first.text, first.complete.message);
    let tool_events = first
        .events
        .iter()
        .filter(|e| matches!(e.event, Some(Event::ToolStart(_))))
        .count();
    assert_eq!(tool_events, 1, "the demo calls current_time");
    assert_eq!(first.complete.tool_history[0].name, "current_time");
    let payload = first
        .complete
        .custom_payload
        .as_ref()
        .expect("the schema proposal");
    let Some(Typed::SchemaProposal(proposal)) = &payload.typed else {
        panic!("{payload:?}")
    };
    assert_eq!(proposal.table_name.as_deref(), Some("Job Applications"));

    let second = chat(
        &mut stack.client,
        chat_request(
            &first.conversation_id(),
            "I accepted the table",
            "tables_list",
        ),
    )
    .await;
    assert!(second.complete.success, "{:?}", second.complete);
    assert!(!second.text.contains("SUGGESTED"), "{:?}", second.text);
    let labels: Vec<&str> = second
        .complete
        .suggested_values
        .iter()
        .map(|v| v.label.as_str())
        .collect();
    assert!(labels.contains(&"Add sample data"), "{labels:?}");
    assert_eq!(
        second
            .complete
            .suggested_actions
            .first()
            .map(|a| a.action.as_str()),
        Some("close_chat")
    );

    let stored = stack
        .client
        .get_conversation(gw::GetConversationRequest {
            conversation_id: first.conversation_id(),
        })
        .await
        .expect("get")
        .into_inner();
    let roles: Vec<i32> = stored.messages.iter().map(|m| m.role).collect();
    assert_eq!(roles, vec![1, 2, 1, 2]);
    assert_eq!(stored.messages[3].text, second.complete.message);
    assert_eq!(stored.conversation.expect("summary").turn_count, 2);
    stack.stop().await;
}
