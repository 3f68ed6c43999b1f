//! Finding conversations through the wire: full-text search over old
//! messages (ranked, paged, the caller's own only), `UpdateConversation`
//! (title, metadata, pinned, archived) and the list's filters.

use std::{collections::HashMap, sync::OnceLock};

use chat_gateway::config::GatewayConfig;
use parley_proto::gateway::v1 as gw;
use tonic::{Code, Status};

use crate::{
    auth::{authenticator, hs256},
    harness::{Harness, Options, chat, chat_request, fake_runner::text_reply, reason, with_token},
};

/// The PostgreSQL URL of [`search_on_postgres`]'s gateway (a `tweak` is a
/// plain `fn`).
static POSTGRES_URL: OnceLock<String> = OnceLock::new();

fn on_postgres(config: &mut GatewayConfig) {
    if let Some(url) = POSTGRES_URL.get() {
        config.store.database_url = url.clone();
    }
}

/// A conversation of the holder of `token`: one turn per `(message,
/// answer)`; its id.
async fn conversation(stack: &mut Harness, token: &str, turns: &[(&str, &str)]) -> String {
    let mut id = String::new();
    for (message, answer) in turns {
        stack.runner.push(text_reply(&[answer]));
        let turn = chat(
            &mut stack.client,
            with_token(chat_request(&id, message, "tables_list"), token),
        )
        .await;
        assert!(turn.complete.success, "{turn:?}");
        id = turn.conversation_id();
    }
    id
}

async fn list(
    stack: &mut Harness,
    token: &str,
    request: gw::ListConversationsRequest,
) -> Result<gw::ListConversationsResponse, Status> {
    stack
        .client
        .list_conversations(with_token(request, token))
        .await
        .map(tonic::Response::into_inner)
}

/// The ids a search finds, first page.
async fn search(stack: &mut Harness, token: &str, query: &str) -> Vec<String> {
    ids(list(
        stack,
        token,
        gw::ListConversationsRequest {
            query: query.into(),
            ..Default::default()
        },
    )
    .await
    .expect("search"))
}

fn ids(page: gw::ListConversationsResponse) -> Vec<String> {
    page.conversations.into_iter().map(|c| c.id).collect()
}

fn refusal(status: &Status) -> (Code, String) {
    (status.code(), reason(status))
}

/// What the scenario checks, on the gateway's store (SQLite or
/// PostgreSQL).
async fn search_scenario(mut stack: Harness) {
    let alice = hs256("alice", "parley", 600);
    let bob = hs256("bob", "parley", 600);
    let old = conversation(
        &mut stack,
        &alice,
        &[
            ("Plan the zebra migration study", "Start with the maps."),
            ("What about the budget?", "Ask the giraffe foundation."),
            ("Anything else?", "No."),
            ("Thanks", "You're welcome."),
        ],
    )
    .await;
    let dense = conversation(
        &mut stack,
        &alice,
        &[("zebra zebra zebra notes", "Zebras, noted.")],
    )
    .await;
    let bobs = conversation(&mut stack, &bob, &[("zebra giraffe", "zebra")]).await;

    // A word of the first message of a conversation four turns old, and
    // one of an answer; the denser match first; never Bob's.
    assert_eq!(
        search(&mut stack, &alice, "migration").await,
        vec![old.clone()]
    );
    assert_eq!(
        search(&mut stack, &alice, "Giraffe?").await,
        vec![old.clone()]
    );
    assert_eq!(
        search(&mut stack, &alice, "zebra").await,
        vec![dense.clone(), old.clone()]
    );
    assert_eq!(search(&mut stack, &bob, "zebra").await, vec![bobs.clone()]);
    assert_eq!(
        search(&mut stack, &bob, "migration").await,
        Vec::<String>::new()
    );
    assert_eq!(
        search(&mut stack, &alice, "okapi").await,
        Vec::<String>::new()
    );

    // Pages follow the ranking; a token holds for its own request only.
    let request = |token: &str| gw::ListConversationsRequest {
        query: "zebra".into(),
        page_size: 1,
        page_token: token.into(),
        ..Default::default()
    };
    let first = list(&mut stack, &alice, request("")).await.expect("page 1");
    assert_eq!(first.conversations[0].id, dense);
    assert!(!first.next_page_token.is_empty());
    let second = list(&mut stack, &alice, request(&first.next_page_token))
        .await
        .expect("page 2");
    assert_eq!(ids(second.clone()), vec![old.clone()]);
    assert!(second.next_page_token.is_empty());
    let other_query = gw::ListConversationsRequest {
        query: "giraffe".into(),
        page_token: first.next_page_token.clone(),
        ..Default::default()
    };
    let plain = gw::ListConversationsRequest {
        page_token: first.next_page_token.clone(),
        ..Default::default()
    };
    let list_page = list(
        &mut stack,
        &alice,
        gw::ListConversationsRequest {
            page_size: 1,
            ..Default::default()
        },
    )
    .await
    .expect("plain list");
    for wrong in [other_query, plain, request(&list_page.next_page_token)] {
        let refused = list(&mut stack, &alice, wrong)
            .await
            .expect_err("wrong token");
        assert_eq!(
            refusal(&refused),
            (Code::InvalidArgument, "INVALID_PAGE_TOKEN".into())
        );
    }
    let long = list(
        &mut stack,
        &alice,
        gw::ListConversationsRequest {
            query: "zebra ".repeat(60),
            ..Default::default()
        },
    )
    .await
    .expect_err("long query");
    assert_eq!(
        refusal(&long),
        (Code::InvalidArgument, "INVALID_QUERY".into())
    );
    stack.stop().await;
}

#[tokio::test]
async fn search_finds_an_old_message_ranked_and_never_another_users() {
    search_scenario(
        Harness::start(Options {
            auth: authenticator(),
            ..Options::default()
        })
        .await,
    )
    .await;
}

#[tokio::test]
async fn search_on_postgres() {
    let Some((url, schema)) = crate::postgres::fresh_schema("finding::search_on_postgres").await
    else {
        return;
    };
    POSTGRES_URL.set(url).expect("set once");
    search_scenario(
        Harness::start(Options {
            auth: authenticator(),
            tweak: on_postgres,
            ..Options::default()
        })
        .await,
    )
    .await;
    crate::postgres::drop_schema(&schema).await;
}

async fn update(
    stack: &mut Harness,
    token: &str,
    request: gw::UpdateConversationRequest,
) -> Result<gw::Conversation, Status> {
    stack
        .client
        .update_conversation(with_token(request, token))
        .await
        .map(tonic::Response::into_inner)
}

/// The field of a refusal's BadRequest.
fn field(status: &Status) -> String {
    tonic_types::StatusExt::get_details_bad_request(status)
        .expect("field violations")
        .field_violations[0]
        .field
        .clone()
}

#[tokio::test]
async fn update_conversation_is_checked_owned_and_filters_the_list() {
    let mut stack = Harness::start(Options {
        auth: authenticator(),
        ..Options::default()
    })
    .await;
    let alice = hs256("alice", "parley", 600);
    let mallory = hs256("mallory", "parley", 600);
    let trip = conversation(&mut stack, &alice, &[("Book a train", "Done.")]).await;
    let other = conversation(&mut stack, &alice, &[("Something else", "Sure.")]).await;

    let updated = update(
        &mut stack,
        &alice,
        gw::UpdateConversationRequest {
            conversation_id: trip.clone(),
            title: Some("  Trip to Oslo ".into()),
            metadata: HashMap::from([("project".to_owned(), "apollo".to_owned())]),
            pinned: Some(true),
            ..Default::default()
        },
    )
    .await
    .expect("update");
    assert_eq!(updated.title, "Trip to Oslo");
    assert_eq!(
        updated.metadata.get("project").map(String::as_str),
        Some("apollo")
    );
    assert!(updated.pinned && !updated.archived);
    let read = stack
        .client
        .get_conversation(with_token(
            gw::GetConversationRequest {
                conversation_id: trip.clone(),
                ..Default::default()
            },
            &alice,
        ))
        .await
        .expect("get")
        .into_inner()
        .conversation
        .expect("conversation");
    assert_eq!(read, updated);
    // The new title is searched.
    assert_eq!(search(&mut stack, &alice, "oslo").await, vec![trip.clone()]);

    // Bad input: INVALID_ARGUMENT naming the field.
    for (request, expected, named) in [
        (
            gw::UpdateConversationRequest {
                title: Some(" ".into()),
                ..Default::default()
            },
            "INVALID_TITLE",
            "title".to_owned(),
        ),
        (
            gw::UpdateConversationRequest {
                title: Some("x".repeat(201)),
                ..Default::default()
            },
            "INVALID_TITLE",
            "title".to_owned(),
        ),
        (
            gw::UpdateConversationRequest {
                metadata: HashMap::from([("bad key".to_owned(), "v".to_owned())]),
                ..Default::default()
            },
            "INVALID_METADATA",
            "metadata[bad key]".to_owned(),
        ),
        (
            gw::UpdateConversationRequest {
                metadata: HashMap::from([("k".to_owned(), "v".repeat(513))]),
                ..Default::default()
            },
            "INVALID_METADATA",
            "metadata[k]".to_owned(),
        ),
        (
            gw::UpdateConversationRequest {
                // 16 more entries: 17 once merged with `project`.
                metadata: (0..16).map(|n| (format!("k{n}"), "v".to_owned())).collect(),
                ..Default::default()
            },
            "INVALID_METADATA",
            "metadata".to_owned(),
        ),
    ] {
        let refused = update(
            &mut stack,
            &alice,
            gw::UpdateConversationRequest {
                conversation_id: trip.clone(),
                ..request
            },
        )
        .await
        .expect_err(expected);
        assert_eq!(refusal(&refused), (Code::InvalidArgument, expected.into()));
        assert_eq!(field(&refused), named);
    }
    let missing = update(&mut stack, &alice, gw::UpdateConversationRequest::default())
        .await
        .expect_err("no id");
    assert_eq!(
        refusal(&missing),
        (Code::InvalidArgument, "MISSING_CONVERSATION_ID".into())
    );

    // Someone else's conversation answers exactly like an unknown one,
    // and stays as it was.
    let mut answers = Vec::new();
    for id in [trip.clone(), uuid::Uuid::now_v7().to_string()] {
        let refused = update(
            &mut stack,
            &mallory,
            gw::UpdateConversationRequest {
                conversation_id: id,
                title: Some("Mine".into()),
                archived: Some(true),
                ..Default::default()
            },
        )
        .await
        .expect_err("not theirs");
        answers.push((
            refused.code(),
            reason(&refused),
            refused.message().to_owned(),
        ));
    }
    assert_eq!(answers[0], answers[1]);
    assert_eq!(
        (answers[0].0, answers[0].1.as_str()),
        (Code::NotFound, "CONVERSATION_NOT_FOUND")
    );
    let unchanged = update(
        &mut stack,
        &alice,
        gw::UpdateConversationRequest {
            conversation_id: trip.clone(),
            ..Default::default()
        },
    )
    .await
    .expect("no change");
    assert_eq!(unchanged, updated);

    // Filters: pinned, metadata, archived.
    let pinned = gw::ListConversationsRequest {
        pinned_only: true,
        ..Default::default()
    };
    assert_eq!(
        ids(list(&mut stack, &alice, pinned).await.expect("pinned")),
        vec![trip.clone()]
    );
    let by = |value: &str| gw::ListConversationsRequest {
        metadata: HashMap::from([("project".to_owned(), value.to_owned())]),
        ..Default::default()
    };
    assert_eq!(
        ids(list(&mut stack, &alice, by("apollo"))
            .await
            .expect("apollo")),
        vec![trip.clone()]
    );
    assert!(
        ids(list(&mut stack, &alice, by("gemini"))
            .await
            .expect("gemini"))
        .is_empty()
    );
    assert!(
        ids(list(&mut stack, &mallory, by("apollo"))
            .await
            .expect("mallory"))
        .is_empty()
    );
    let bad_filter = list(
        &mut stack,
        &alice,
        gw::ListConversationsRequest {
            metadata: HashMap::from([("no spaces".to_owned(), "v".to_owned())]),
            ..Default::default()
        },
    )
    .await
    .expect_err("bad filter");
    assert_eq!(
        refusal(&bad_filter),
        (Code::InvalidArgument, "INVALID_METADATA".into())
    );

    update(
        &mut stack,
        &alice,
        gw::UpdateConversationRequest {
            conversation_id: other.clone(),
            archived: Some(true),
            ..Default::default()
        },
    )
    .await
    .expect("archive");
    let archived = |filter: gw::ArchivedFilter| gw::ListConversationsRequest {
        archived: filter as i32,
        ..Default::default()
    };
    for (filter, expected) in [
        (gw::ArchivedFilter::Unspecified, vec![trip.clone()]),
        (gw::ArchivedFilter::Exclude, vec![trip.clone()]),
        (gw::ArchivedFilter::Only, vec![other.clone()]),
        (
            gw::ArchivedFilter::Include,
            vec![other.clone(), trip.clone()],
        ),
    ] {
        assert_eq!(
            ids(list(&mut stack, &alice, archived(filter))
                .await
                .expect("list")),
            expected,
            "{filter:?}"
        );
    }
    // An archived conversation is still searched when asked for.
    let archived_search = gw::ListConversationsRequest {
        query: "something".into(),
        archived: gw::ArchivedFilter::Only as i32,
        ..Default::default()
    };
    assert_eq!(
        ids(list(&mut stack, &alice, archived_search)
            .await
            .expect("search")),
        vec![other.clone()]
    );
    assert!(search(&mut stack, &alice, "something").await.is_empty());
    stack.stop().await;
}

/// A store written before search existed (the demo's conversations, by
/// the binaries of schema 0016: services/chat-gateway/testdata/README.md)
/// is indexed by migration 0018: its old messages and answers are found.
#[tokio::test]
async fn conversations_written_before_search_are_found() {
    let mut stack = Harness::start(Options {
        database_file: Some(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/store-0016.db"),
        ),
        ..Options::default()
    })
    .await;
    let titles = |page: gw::ListConversationsResponse| {
        page.conversations
            .into_iter()
            .map(|c| c.title)
            .collect::<Vec<_>>()
    };
    let mut found = Vec::new();
    for query in ["salaries", "interview", "status filter", "Walrus Ltd"] {
        let page = stack
            .client
            .list_conversations(gw::ListConversationsRequest {
                query: query.into(),
                ..Default::default()
            })
            .await
            .expect("search")
            .into_inner();
        found.push((query, titles(page)));
    }
    assert_eq!(
        found,
        [
            // An answer's word.
            ("salaries", vec!["Add some sample data".to_owned()]),
            // A later turn's message and answer.
            (
                "interview",
                vec!["Find the applications at Walrus".to_owned()]
            ),
            // Two words of the second answer.
            (
                "status filter",
                vec!["Help me create a job tracker for my applications".to_owned()]
            ),
            (
                "Walrus Ltd",
                vec!["Find the applications at Walrus".to_owned()]
            ),
        ]
    );
    let all = stack
        .client
        .list_conversations(gw::ListConversationsRequest {
            query: "applications".into(),
            ..Default::default()
        })
        .await
        .expect("search")
        .into_inner();
    assert_eq!(all.conversations.len(), 3);
    stack.stop().await;
}
