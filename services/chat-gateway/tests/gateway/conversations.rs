//! Conversations through the wire: ownership, listing, deletion, pages and
//! server actions.

use parley_proto::gateway::v1 as gw;
use tonic::Code;

use crate::{
    auth::{hs256, secured},
    harness::{Harness, Options, chat, chat_request, reason, with_token},
};

#[tokio::test]
async fn another_users_conversation_answers_exactly_like_an_unknown_one() {
    let mut stack = secured().await;
    let alice = hs256("alice", "parley", 600);
    let mallory = hs256("mallory", "parley", 600);
    let turn = chat(
        &mut stack.client,
        with_token(chat_request("", "My secret plans", "tables_list"), &alice),
    )
    .await;
    let theirs = turn.conversation_id();
    let unknown = uuid::Uuid::now_v7().to_string();

    let mut answers = Vec::new();
    for id in [&theirs, &unknown] {
        let client = &mut stack.client;
        let get = client
            .get_conversation(with_token(
                gw::GetConversationRequest {
                    conversation_id: id.clone(),
                    ..Default::default()
                },
                &mallory,
            ))
            .await
            .expect_err("get");
        let chat = client
            .chat(with_token(
                chat_request(id, "Let me in", "tables_list"),
                &mallory,
            ))
            .await
            .expect_err("chat");
        let cancel = client
            .cancel_turn(with_token(
                gw::CancelTurnRequest {
                    conversation_id: id.clone(),
                    turn_id: String::new(),
                },
                &mallory,
            ))
            .await
            .expect_err("cancel");
        let delete = client
            .delete_conversation(with_token(
                gw::DeleteConversationRequest {
                    conversation_id: id.clone(),
                },
                &mallory,
            ))
            .await
            .expect_err("delete");
        let action = client
            .execute_action(with_token(
                gw::ExecuteActionRequest {
                    conversation_id: id.clone(),
                    action: "run_analysis".into(),
                    page: Some(gw::PageContext {
                        page: "table_view".into(),
                        ..Default::default()
                    }),
                    ..Default::default()
                },
                &mallory,
            ))
            .await
            .expect_err("action");
        let resume = client
            .resume_turn(with_token(
                gw::ResumeTurnRequest {
                    conversation_id: id.clone(),
                    turn_id: turn.complete.turn_id.clone(),
                    after_seq: 0,
                },
                &mallory,
            ))
            .await
            .expect_err("resume");
        answers.push(
            [get, chat, cancel, delete, action, resume]
                .iter()
                .map(|status| (status.code(), reason(status), status.message().to_owned()))
                .collect::<Vec<_>>(),
        );
    }
    assert_eq!(
        answers[0], answers[1],
        "identical for someone else's and an unknown conversation"
    );
    assert!(
        answers[0]
            .iter()
            .all(|(code, reason, _)| *code == Code::NotFound && reason == "CONVERSATION_NOT_FOUND")
    );

    let listed = stack
        .client
        .list_conversations(with_token(
            gw::ListConversationsRequest::default(),
            &mallory,
        ))
        .await
        .expect("list")
        .into_inner();
    assert!(listed.conversations.is_empty());
    // Alice still has hers, untouched.
    let stored = stack
        .client
        .get_conversation(with_token(
            gw::GetConversationRequest {
                conversation_id: theirs,
                ..Default::default()
            },
            &alice,
        ))
        .await
        .expect("get")
        .into_inner();
    assert_eq!(stored.messages.len(), 2);
    stack.stop().await;
}

#[tokio::test]
async fn lists_page_newest_first_with_opaque_tokens() {
    let mut stack = Harness::start(Options::default()).await;
    let mut made = Vec::new();
    for n in 0..5 {
        made.push(
            chat(
                &mut stack.client,
                chat_request("", &format!("Conversation {n}"), "tables_list"),
            )
            .await
            .conversation_id(),
        );
    }
    let mut seen = Vec::new();
    let mut token = String::new();
    loop {
        let page = stack
            .client
            .list_conversations(gw::ListConversationsRequest {
                page_size: 2,
                page_token: token.clone(),
                ..Default::default()
            })
            .await
            .expect("list")
            .into_inner();
        assert!(page.conversations.len() <= 2);
        seen.extend(page.conversations.into_iter().map(|c| c.id));
        if page.next_page_token.is_empty() {
            break;
        }
        token = page.next_page_token;
    }
    made.reverse();
    assert_eq!(seen, made, "newest first, each once");
    let bad = stack
        .client
        .list_conversations(gw::ListConversationsRequest {
            page_size: 2,
            page_token: "garbage!".into(),
            ..Default::default()
        })
        .await
        .expect_err("bad token");
    assert_eq!(
        (bad.code(), reason(&bad).as_str()),
        (Code::InvalidArgument, "INVALID_PAGE_TOKEN")
    );
    stack.stop().await;
}

#[tokio::test]
async fn deleting_removes_the_conversation() {
    let mut stack = Harness::start(Options::default()).await;
    let id = chat(
        &mut stack.client,
        chat_request("", "Forget me", "tables_list"),
    )
    .await
    .conversation_id();
    stack
        .client
        .delete_conversation(gw::DeleteConversationRequest {
            conversation_id: id.clone(),
        })
        .await
        .expect("delete");
    let gone = stack
        .client
        .get_conversation(gw::GetConversationRequest {
            conversation_id: id.clone(),
            ..Default::default()
        })
        .await
        .expect_err("gone");
    assert_eq!(gone.code(), Code::NotFound);
    let again = stack
        .client
        .delete_conversation(gw::DeleteConversationRequest {
            conversation_id: id,
        })
        .await
        .expect_err("twice");
    assert_eq!(again.code(), Code::NotFound);
    stack.stop().await;
}

#[tokio::test]
async fn requests_are_checked_field_by_field() {
    let mut stack = Harness::start(Options::default()).await;
    let mut cases = vec![
        (chat_request("", "   ", "tables_list"), "EMPTY_MESSAGE"),
        (
            chat_request("", &"x".repeat(40_000), "tables_list"),
            "MESSAGE_TOO_LARGE",
        ),
        (
            chat_request(&"c".repeat(200), "hi", "tables_list"),
            "INVALID_ID",
        ),
    ];
    let mut bad_model = chat_request("", "hi", "tables_list");
    bad_model.model = "openai/".into();
    cases.push((bad_model, "INVALID_MODEL"));
    let mut bad_schema = chat_request("", "hi", "tables_list");
    bad_schema.response_schema = Some(parley_proto::json::to_struct_wrapped(
        &serde_json::json!({"type": 12}),
    ));
    cases.push((bad_schema, "INVALID_RESPONSE_SCHEMA"));
    for (request, expected) in cases {
        let status = stack.client.chat(request).await.expect_err(expected);
        assert_eq!(
            (status.code(), reason(&status).as_str()),
            (Code::InvalidArgument, expected)
        );
        let bad =
            tonic_types::StatusExt::get_details_bad_request(&status).expect("field violations");
        assert!(!bad.field_violations.is_empty());
    }
    assert!(stack.runner.seen().is_empty());
    stack.stop().await;
}

#[tokio::test]
async fn describe_page_resolves_and_can_show_the_prompt() {
    let mut stack = Harness::start(Options::default()).await;
    let described = stack
        .client
        .describe_page(gw::DescribePageRequest {
            page: Some(gw::PageContext {
                page: "table_view".into(),
                tab: "rows".into(),
                ..Default::default()
            }),
            include_system_prompt: true,
        })
        .await
        .expect("describe")
        .into_inner();
    assert!(described.known_page);
    let names: Vec<&str> = described
        .payload_types
        .iter()
        .map(|p| p.name.as_str())
        .collect();
    assert!(names.contains(&"data_proposal"), "{names:?}");
    assert!(described.tools.iter().any(|t| t.name == "lookup_rows"));
    assert!(described.system_prompt.contains("## FORMAT RULES"));
    let unknown = stack
        .client
        .describe_page(gw::DescribePageRequest {
            page: Some(gw::PageContext {
                page: "nowhere".into(),
                ..Default::default()
            }),
            include_system_prompt: false,
        })
        .await
        .expect("describe")
        .into_inner();
    assert!(!unknown.known_page && unknown.system_prompt.is_empty());
    stack.stop().await;
}

#[tokio::test]
async fn server_actions_run_a_turn_and_others_are_refused() {
    let mut stack = Harness::start(Options::default()).await;
    let page = Some(gw::PageContext {
        page: "table_view".into(),
        ..Default::default()
    });
    let params = parley_proto::json::to_struct_wrapped(&serde_json::json!({"focus": "Status"}));
    let stream = stack
        .client
        .execute_action(gw::ExecuteActionRequest {
            conversation_id: String::new(),
            action: "run_analysis".into(),
            params: Some(params),
            page: page.clone(),
            request_id: String::new(),
        })
        .await
        .expect("server action")
        .into_inner();
    let turn = crate::harness::collect(stream).await;
    assert!(turn.complete.success);
    let sent = &stack.runner.seen()[0].request.messages[0].text;
    assert!(sent.contains("focusing on Status"), "{sent}");

    let refusals = [
        (
            "close_chat",
            page.clone(),
            Code::FailedPrecondition,
            "CLIENT_ACTION",
        ),
        (
            "launch_rockets",
            page.clone(),
            Code::InvalidArgument,
            "UNKNOWN_ACTION",
        ),
        (
            "run_analysis",
            Some(gw::PageContext {
                page: "tables_list".into(),
                ..Default::default()
            }),
            Code::FailedPrecondition,
            "ACTION_NOT_ON_PAGE",
        ),
    ];
    for (action, page, code, expected) in refusals {
        let status = stack
            .client
            .execute_action(gw::ExecuteActionRequest {
                action: action.into(),
                page,
                ..Default::default()
            })
            .await
            .expect_err(action);
        assert_eq!(
            (status.code(), reason(&status).as_str()),
            (code, expected),
            "{action}"
        );
    }
    let bad_params = stack
        .client
        .execute_action(gw::ExecuteActionRequest {
            action: "run_analysis".into(),
            params: Some(parley_proto::json::to_struct_wrapped(
                &serde_json::json!({"focus": 7}),
            )),
            page,
            ..Default::default()
        })
        .await
        .expect_err("params");
    assert_eq!(
        (bad_params.code(), reason(&bad_params).as_str()),
        (Code::InvalidArgument, "INVALID_ACTION_PARAMS")
    );
    assert_eq!(stack.runner.seen().len(), 1);
    stack.stop().await;
}

async fn conversation_page(
    stack: &mut Harness,
    conversation_id: &str,
    page_size: u32,
    page_token: &str,
    token: &str,
) -> Result<gw::GetConversationResponse, tonic::Status> {
    stack
        .client
        .get_conversation(with_token(
            gw::GetConversationRequest {
                conversation_id: conversation_id.to_owned(),
                page_size,
                page_token: page_token.to_owned(),
                ..Default::default()
            },
            token,
        ))
        .await
        .map(tonic::Response::into_inner)
}

#[tokio::test]
async fn a_conversation_reads_back_in_pages_that_only_its_own_token_follows() {
    let mut stack = secured().await;
    let alice = hs256("alice", "parley", 600);
    let mallory = hs256("mallory", "parley", 600);
    let mut conversation = String::new();
    for number in 1..=5 {
        let turn = chat(
            &mut stack.client,
            with_token(
                chat_request(&conversation, &format!("message {number}"), "tables_list"),
                &alice,
            ),
        )
        .await;
        assert!(turn.complete.success, "{:?}", turn.error);
        conversation = turn.conversation_id();
    }

    // Two turns a page, the newest page first, each page oldest first.
    let mut pages: Vec<Vec<String>> = Vec::new();
    let mut token = String::new();
    loop {
        let page = conversation_page(&mut stack, &conversation, 2, &token, &alice)
            .await
            .expect("a page");
        assert_eq!(page.conversation.as_ref().map(|c| c.turn_count), Some(5));
        let roles: Vec<i32> = page.messages.iter().map(|m| m.role).collect();
        assert_eq!(roles, [1, 2].repeat(roles.len() / 2), "whole turns");
        pages.push(
            page.messages
                .iter()
                .filter(|m| m.role == gw::MessageRole::User as i32)
                .map(|m| m.text.clone())
                .collect(),
        );
        token = page.next_page_token;
        if token.is_empty() {
            break;
        }
        assert!(pages.len() < 5, "the pages end: {pages:?}");
    }
    assert_eq!(
        pages,
        vec![
            vec!["message 4", "message 5"],
            vec!["message 2", "message 3"],
            vec!["message 1"],
        ]
    );

    // The default page holds all five turns.
    let whole = conversation_page(&mut stack, &conversation, 0, "", &alice)
        .await
        .expect("the default page");
    assert_eq!(whole.messages.len(), 10);
    assert!(whole.next_page_token.is_empty());

    let first = conversation_page(&mut stack, &conversation, 2, "", &alice)
        .await
        .expect("a page");
    let alices_token = first.next_page_token;
    // Another user with the owner's token reads nothing of it...
    let refused = conversation_page(&mut stack, &conversation, 2, &alices_token, &mallory)
        .await
        .expect_err("not mallory's");
    assert_eq!(refused.code(), Code::NotFound, "{refused:?}");
    // ...and cannot use it on a conversation of their own.
    let own = chat(
        &mut stack.client,
        with_token(chat_request("", "mine", "tables_list"), &mallory),
    )
    .await
    .conversation_id();
    for bad in [alices_token.as_str(), "not-a-token", "dHVybnM6MTpvdGhlcg"] {
        let refused = conversation_page(&mut stack, &own, 2, bad, &mallory)
            .await
            .expect_err("a bad token");
        assert_eq!(refused.code(), Code::InvalidArgument, "{bad}: {refused:?}");
        assert_eq!(reason(&refused), "INVALID_PAGE_TOKEN");
    }
    stack.stop().await;
}
