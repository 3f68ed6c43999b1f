//! The gateway's edge over real gRPC: requests that fail to decode (sent
//! as raw bytes), the same input mistake answered with the same code by
//! every RPC, and the one audit line of a refused call.
//!
//! Its own test binary: every test here captures its logs
//! (`LogCapture`), which a binary where other tests log without a
//! capture would make flaky.

#[allow(dead_code)]
#[path = "gateway/harness/mod.rs"]
mod harness;

use chat_gateway::{
    auth::Authenticator,
    config::{AuthConfig, StaticTokenConfig},
};
use harness::{Harness, Options, reason, with_token};
use parley_grpc::{
    edge::AUDIT_TARGET,
    status::{MALFORMED_MESSAGE, REQUEST_TOO_LARGE},
};
use parley_proto::gateway::v1 as gw;
use parley_testkit::raw::{self, LogCapture, deep_struct, field};
use prost::bytes::Bytes;
use tonic::{Code, Status, transport::Channel};

const CHAT: &str = "/parley.gateway.v1.ChatGateway/Chat";
const GET: &str = "/parley.gateway.v1.ChatGateway/GetConversation";
const TOKEN: &str = "edge-test-token-0123456789";

async fn channel(harness: &Harness) -> Channel {
    Channel::from_shared(format!("http://{}", harness.addr))
        .expect("url")
        .connect()
        .await
        .expect("connect")
}

async fn refused(channel: Channel, path: &'static str, message: Vec<u8>) -> Status {
    match raw::call(channel, path, vec![Bytes::from(message)]).await {
        Ok(responses) => panic!("{path} accepted: {} responses", responses.len()),
        Err(status) => status,
    }
}

fn assert_short(status: &Status, code: Code, expected_reason: &str) {
    assert_eq!(status.code(), code, "{status:?}");
    assert_eq!(reason(status), expected_reason, "{status:?}");
    assert!(status.message().len() < 200, "short: {}", status.message());
}

fn audit_lines(logs: &LogCapture) -> Vec<serde_json::Value> {
    logs.lines()
        .into_iter()
        .filter(|line| line["target"] == AUDIT_TARGET)
        .collect()
}

#[tokio::test]
async fn undecodable_requests_are_invalid_argument_or_resource_exhausted() {
    let (logs, _guard) = LogCapture::install();
    let harness = Harness::start(Options::default()).await;
    let channel = channel(&harness).await;

    // ChatRequest { message (2), page (3) { page (1), state (4): 10 000 deep } }
    let page = [field(1, b"tables_list"), field(4, &deep_struct(10_000))].concat();
    let chat = [field(2, b"hello"), field(3, &page)].concat();
    let status = refused(channel.clone(), CHAT, chat).await;
    assert_short(&status, Code::InvalidArgument, MALFORMED_MESSAGE);
    assert_eq!(status.message(), "page: is nested too deeply");

    // A conversation id that is not UTF-8.
    let status = refused(channel.clone(), GET, field(1, &[0xff, 0xfe])).await;
    assert_short(&status, Code::InvalidArgument, MALFORMED_MESSAGE);
    assert!(
        status.message().starts_with("conversation_id: "),
        "{status:?}"
    );

    // Over the gateway's 4 MiB: a 5 MiB message.
    let big = [
        field(2, &vec![b'a'; 5 << 20]),
        field(3, &field(1, b"tables_list")),
    ]
    .concat();
    let status = refused(channel.clone(), CHAT, big).await;
    assert_short(&status, Code::ResourceExhausted, REQUEST_TOO_LARGE);

    harness.stop().await;
    assert_eq!(audit_lines(&logs).len(), 3, "one audit line per refusal");
}

/// What a case sends, through the generated client.
enum Call {
    Chat(gw::ChatRequest),
    ExecuteAction(gw::ExecuteActionRequest),
    CancelTurn(gw::CancelTurnRequest),
    ResumeTurn(gw::ResumeTurnRequest),
    Get(gw::GetConversationRequest),
    List(gw::ListConversationsRequest),
    Delete(gw::DeleteConversationRequest),
    Describe(gw::DescribePageRequest),
}

async fn status_of(harness: &mut Harness, call: Call) -> Status {
    let client = &mut harness.client;
    let result = match call {
        Call::Chat(request) => client.chat(request).await.map(drop),
        Call::ExecuteAction(request) => client.execute_action(request).await.map(drop),
        Call::CancelTurn(request) => client.cancel_turn(request).await.map(drop),
        Call::ResumeTurn(request) => client.resume_turn(request).await.map(drop),
        Call::Get(request) => client.get_conversation(request).await.map(drop),
        Call::List(request) => client.list_conversations(request).await.map(drop),
        Call::Delete(request) => client.delete_conversation(request).await.map(drop),
        Call::Describe(request) => client.describe_page(request).await.map(drop),
    };
    match result {
        Ok(()) => Status::ok("accepted"),
        Err(status) => status,
    }
}

#[tokio::test]
async fn the_same_mistake_gets_the_same_code_from_every_rpc() {
    let (_logs, _guard) = LogCapture::install();
    let mut harness = Harness::start(Options::default()).await;
    let long = "x".repeat(200);
    let control = "conv\u{0}id".to_owned();
    let unknown = "0190b0a0-0000-7000-8000-000000000000".to_owned();
    let page = |name: &str| {
        Some(gw::PageContext {
            page: name.to_owned(),
            ..Default::default()
        })
    };
    let chat = |conversation_id: &str| {
        Call::Chat(gw::ChatRequest {
            conversation_id: conversation_id.to_owned(),
            message: "hello".into(),
            page: page("tables_list"),
            ..Default::default()
        })
    };
    let action = |conversation_id: &str| {
        Call::ExecuteAction(gw::ExecuteActionRequest {
            conversation_id: conversation_id.to_owned(),
            action: "create_table".into(),
            page: page("tables_list"),
            ..Default::default()
        })
    };
    let cancel = |conversation_id: &str| {
        Call::CancelTurn(gw::CancelTurnRequest {
            conversation_id: conversation_id.to_owned(),
            ..Default::default()
        })
    };
    let resume = |conversation_id: &str| {
        Call::ResumeTurn(gw::ResumeTurnRequest {
            conversation_id: conversation_id.to_owned(),
            ..Default::default()
        })
    };
    let get = |conversation_id: &str| {
        Call::Get(gw::GetConversationRequest {
            conversation_id: conversation_id.to_owned(),
            ..Default::default()
        })
    };
    let delete = |conversation_id: &str| {
        Call::Delete(gw::DeleteConversationRequest {
            conversation_id: conversation_id.to_owned(),
        })
    };
    let missing = (Code::InvalidArgument, "MISSING_CONVERSATION_ID");
    let invalid = (Code::InvalidArgument, "INVALID_ID");
    let not_found = (Code::NotFound, "CONVERSATION_NOT_FOUND");
    let cases: Vec<(&str, Call, (Code, &str))> = vec![
        // An empty id where one is required: a malformed request.
        ("CancelTurn empty id", cancel(""), missing),
        ("ResumeTurn empty id", resume(""), missing),
        ("GetConversation empty id", get(""), missing),
        ("DeleteConversation empty id", delete(""), missing),
        // Too long, or with control characters: malformed too.
        ("Chat long id", chat(&long), invalid),
        ("ExecuteAction long id", action(&long), invalid),
        ("CancelTurn long id", cancel(&long), invalid),
        ("ResumeTurn long id", resume(&long), invalid),
        ("GetConversation long id", get(&long), invalid),
        ("DeleteConversation long id", delete(&long), invalid),
        ("Chat control id", chat(&control), invalid),
        ("GetConversation control id", get(&control), invalid),
        ("DeleteConversation control id", delete(&control), invalid),
        ("CancelTurn control id", cancel(&control), invalid),
        (
            "ResumeTurn long turn id",
            Call::ResumeTurn(gw::ResumeTurnRequest {
                conversation_id: unknown.clone(),
                turn_id: long.clone(),
                ..Default::default()
            }),
            invalid,
        ),
        (
            "DescribePage long page",
            Call::Describe(gw::DescribePageRequest {
                page: page(&long),
                ..Default::default()
            }),
            invalid,
        ),
        // A well-formed id of no conversation of the caller's: missing,
        // from every RPC that takes one.
        ("Chat unknown id", chat(&unknown), not_found),
        ("CancelTurn unknown id", cancel(&unknown), not_found),
        ("ResumeTurn unknown id", resume(&unknown), not_found),
        ("GetConversation unknown id", get(&unknown), not_found),
        ("DeleteConversation unknown id", delete(&unknown), not_found),
        // Tokens and required fields.
        (
            "ListConversations bad token",
            Call::List(gw::ListConversationsRequest {
                page_token: "not-a-token!".into(),
                ..Default::default()
            }),
            (Code::InvalidArgument, "INVALID_PAGE_TOKEN"),
        ),
        (
            "ExecuteAction no action",
            Call::ExecuteAction(gw::ExecuteActionRequest {
                page: page("tables_list"),
                ..Default::default()
            }),
            (Code::InvalidArgument, "MISSING_ACTION"),
        ),
        (
            "Chat empty message",
            Call::Chat(gw::ChatRequest {
                page: page("tables_list"),
                ..Default::default()
            }),
            (Code::InvalidArgument, "EMPTY_MESSAGE"),
        ),
    ];
    let mut wrong = Vec::new();
    for (name, call, (code, expected)) in cases {
        let status = status_of(&mut harness, call).await;
        if status.code() != code || reason(&status) != expected {
            wrong.push(format!(
                "{name}: {:?} {} ({}), expected {code:?} {expected}",
                status.code(),
                reason(&status),
                status.message()
            ));
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
    harness.stop().await;
}

#[tokio::test]
async fn a_refused_call_logs_one_line_without_the_token_or_the_message() {
    let (logs, _guard) = LogCapture::install();
    let auth = Authenticator::from_config(
        &AuthConfig {
            static_tokens: vec![StaticTokenConfig {
                user: "edge-bot".into(),
                token: Some(TOKEN.into()),
                token_env: None,
                token_file: None,
                admin: false,
                tenant: Some("acme".into()),
            }],
            ..AuthConfig::default()
        },
        false,
    )
    .expect("auth config");
    let mut harness = Harness::start(Options {
        auth,
        ..Options::default()
    })
    .await;

    let secret = "please-never-log-this-message";
    let unknown = "0190b0a0-0000-7000-8000-000000000000";
    let mut request = harness::chat_request(unknown, secret, "tables_list");
    request.request_id = "req-1".into();
    let status = harness
        .client
        .chat(with_token(request, TOKEN))
        .await
        .expect_err("refused");
    assert_eq!(status.code(), Code::NotFound);
    let lines = audit_lines(&logs);
    assert_eq!(lines.len(), 1, "{lines:?}");
    let line = &lines[0];
    assert_eq!(line["message"], "call rejected");
    assert_eq!(line["level"], "INFO");
    assert_eq!(line["rpc"], "parley.gateway.v1.ChatGateway/Chat");
    assert_eq!(line["code"], "NOT_FOUND");
    assert_eq!(line["reason"], "CONVERSATION_NOT_FOUND");
    assert_eq!(line["tenant"], "acme");

    // Refused before the caller is known: no tenant.
    let status = harness
        .client
        .get_conversation(with_token(
            gw::GetConversationRequest {
                conversation_id: unknown.into(),
                ..Default::default()
            },
            "wrong-token-0123456789",
        ))
        .await
        .expect_err("refused");
    assert_eq!(status.code(), Code::Unauthenticated);
    let lines = audit_lines(&logs);
    assert_eq!(lines.len(), 2, "{lines:?}");
    let line = &lines[1];
    assert_eq!(line["rpc"], "parley.gateway.v1.ChatGateway/GetConversation");
    assert_eq!(line["code"], "UNAUTHENTICATED");
    assert_eq!(line["reason"], "INVALID_TOKEN");
    assert!(line.get("tenant").is_none(), "{line}");

    harness.stop().await;
    let text = logs.text();
    for never in [TOKEN, "wrong-token-0123456789", secret] {
        assert!(!text.contains(never), "`{never}` is in the logs:\n{text}");
    }
}
