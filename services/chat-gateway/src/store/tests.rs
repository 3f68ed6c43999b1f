//! Store tests: every scenario runs on an SQLite file and on PostgreSQL.
//!
//! PostgreSQL comes from `PARLEY_TEST_POSTGRES_URL` (`scripts/postgres.sh`
//! starts one and prints it); each test gets its own schema. Without the
//! variable the PostgreSQL half fails under `CI=true` and otherwise prints a
//! loud SKIPPED line ([`skip`]).

#[path = "../../tests/gateway/skip.rs"]
mod skip;

use serde_json::json;

use super::*;
use crate::store::model::{AssistantMessage, StoredPage};

/// A store on a fresh SQLite file; the directory lives as long as the guard.
pub(crate) async fn sqlite_store() -> (Store, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("temp dir");
    let url = format!(
        "sqlite://{}?mode=rwc",
        dir.path().join("parley.db").display()
    );
    let store = Store::open(&url, &StoreOptions::default())
        .await
        .expect("open sqlite store");
    (store, dir)
}

/// A store in a fresh schema of the test PostgreSQL (and the schema's
/// name), or `None` (with a loud line) when none is configured outside CI.
pub(crate) async fn postgres_store(test: &str) -> Option<(Store, String)> {
    let Ok(base) = std::env::var("PARLEY_TEST_POSTGRES_URL") else {
        skip::skip(
            test,
            "PARLEY_TEST_POSTGRES_URL is not set: export PARLEY_TEST_POSTGRES_URL=\"$(scripts/postgres.sh)\"",
        );
        return None;
    };
    sqlx::any::install_default_drivers();
    let schema = format!("t_{}", uuid::Uuid::new_v4().simple());
    let admin = sqlx::AnyPool::connect(&base)
        .await
        .expect("connect to PARLEY_TEST_POSTGRES_URL");
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!("CREATE SCHEMA {schema}")))
        .execute(&admin)
        .await
        .expect("create test schema");
    admin.close().await;
    let separator = if base.contains('?') { '&' } else { '?' };
    let url = format!("{base}{separator}options=-c%20search_path%3D{schema}");
    let store = Store::open(&url, &StoreOptions::default())
        .await
        .expect("open postgres store");
    Some((store, schema))
}

/// Drops a test schema made by [`postgres_store`].
pub(crate) async fn drop_schema(store: Store, schema: &str) {
    store.close().await;
    let Ok(base) = std::env::var("PARLEY_TEST_POSTGRES_URL") else {
        return;
    };
    let admin = sqlx::AnyPool::connect(&base)
        .await
        .expect("connect to PARLEY_TEST_POSTGRES_URL");
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!("DROP SCHEMA {schema} CASCADE")))
        .execute(&admin)
        .await
        .expect("drop test schema");
    admin.close().await;
}

fn user_message(text: &str) -> EventBody {
    EventBody::UserMessage {
        text: text.into(),
        page: StoredPage {
            page: "tables_list".into(),
            state: Some(json!({"tables": 2})),
            ..Default::default()
        },
        response_schema: None,
        request_id: None,
        action: None,
    }
}

fn assistant(text: &str, state: TurnState) -> EventBody {
    EventBody::AssistantMessage(AssistantMessage {
        text: text.into(),
        payload: None,
        suggested_values: vec![],
        suggested_actions: vec![],
        structured: None,
        usage: None,
        state,
        stop_reason: "end_turn".into(),
        error: None,
    })
}

fn id() -> String {
    uuid::Uuid::now_v7().to_string()
}

/// Starts a turn and returns its id.
async fn start(
    store: &Store,
    owner: &str,
    conversation: &str,
    create: bool,
    request: Option<&str>,
) -> String {
    let turn = id();
    let message = user_message("hello there");
    let begun = store
        .begin_turn(&NewTurn {
            owner,
            conversation_id: conversation,
            create,
            turn_id: &turn,
            request_id: request,
            user_message: &message,
            title: "hello there",
        })
        .await
        .expect("begin turn");
    assert!(matches!(begun, BeginTurn::Started { .. }), "{begun:?}");
    turn
}

async fn finish(store: &Store, owner: &str, conversation: &str, turn: &str, text: &str) -> bool {
    store
        .finish_turn(&FinishTurn {
            owner,
            conversation_id: conversation,
            turn_id: turn,
            state: TurnState::Completed,
            outcome: Some("b3V0Y29tZQ==".into()),
            events: vec![
                EventBody::Reasoning {
                    text: "thinking".into(),
                },
                EventBody::ToolCall {
                    call_id: "c1".into(),
                    name: "lookup".into(),
                    input: json!({"q": 1}),
                },
                EventBody::ToolResult {
                    call_id: "c1".into(),
                    name: "lookup".into(),
                    success: true,
                    duration_ms: 12,
                    output: "found".into(),
                    payload: None,
                    error: String::new(),
                },
                assistant(text, TurnState::Completed),
            ],
        })
        .await
        .expect("finish turn")
}

async fn log_is_gapless_and_ordered(store: Store) {
    let conversation = id();
    let first = start(&store, "alice", &conversation, true, None).await;
    assert!(finish(&store, "alice", &conversation, &first, "one").await);
    let second = start(&store, "alice", &conversation, false, None).await;
    assert!(finish(&store, "alice", &conversation, &second, "two").await);

    let events = store.events("alice", &conversation).await.expect("events");
    let seqs: Vec<i64> = events.iter().map(|event| event.seq).collect();
    assert_eq!(seqs, (1..=10).collect::<Vec<_>>());
    assert_eq!(events[0].body, user_message("hello there"));
    assert_eq!(events[4].body, assistant("one", TurnState::Completed));
    assert_eq!(events[9].body, assistant("two", TurnState::Completed));
    assert!(events[..5].iter().all(|event| event.turn_id == first));

    let summary = store
        .conversation("alice", &conversation)
        .await
        .expect("read")
        .expect("exists");
    assert_eq!(summary.turn_count, 2);
    assert_eq!(summary.title, "hello there");
    let turns = store.turns("alice", &conversation).await.expect("turns");
    assert_eq!(
        turns.iter().map(|turn| turn.turn_index).collect::<Vec<_>>(),
        vec![0, 1]
    );
    assert!(turns.iter().all(|turn| turn.state == TurnState::Completed));
    assert_eq!(turns[0].outcome.as_deref(), Some("b3V0Y29tZQ=="));

    let recent = store
        .recent_events("alice", &conversation, 1)
        .await
        .expect("recent");
    assert!(recent.iter().all(|event| event.turn_id == second));
    assert_eq!(recent.len(), 5);
}

async fn other_owner_sees_nothing(store: Store) {
    let conversation = id();
    let turn = start(&store, "alice", &conversation, true, Some("req-1")).await;
    assert!(finish(&store, "alice", &conversation, &turn, "secret").await);

    assert_eq!(
        store
            .conversation("mallory", &conversation)
            .await
            .expect("read"),
        None
    );
    assert!(
        store
            .events("mallory", &conversation)
            .await
            .expect("events")
            .is_empty()
    );
    assert!(
        store
            .recent_events("mallory", &conversation, 10)
            .await
            .expect("recent")
            .is_empty()
    );
    assert!(
        store
            .turns("mallory", &conversation)
            .await
            .expect("turns")
            .is_empty()
    );
    assert_eq!(store.turn("mallory", &turn).await.expect("turn"), None);
    assert_eq!(
        store
            .turn_by_request("mallory", "req-1")
            .await
            .expect("by request"),
        None
    );
    let (listed, _) = store.list("mallory", 50, None).await.expect("list");
    assert!(listed.iter().all(|summary| summary.id != conversation));

    let message = user_message("let me in");
    let begun = store
        .begin_turn(&NewTurn {
            owner: "mallory",
            conversation_id: &conversation,
            create: false,
            turn_id: &id(),
            request_id: None,
            user_message: &message,
            title: "",
        })
        .await
        .expect("begin");
    assert_eq!(begun, BeginTurn::NotFound);
    assert!(!finish(&store, "mallory", &conversation, &turn, "overwrite").await);
    assert!(
        !store
            .delete("mallory", &conversation)
            .await
            .expect("delete")
    );

    // Alice's conversation is untouched by all of that.
    assert_eq!(
        store
            .events("alice", &conversation)
            .await
            .expect("events")
            .len(),
        5
    );
    // The same request id is independent per owner.
    start(&store, "mallory", &id(), true, Some("req-1")).await;
}

async fn request_ids_are_idempotent(store: Store) {
    let conversation = id();
    let turn = start(&store, "alice", &conversation, true, Some("req-7")).await;
    let message = user_message("hello again");
    for create in [false, true] {
        let target = if create { id() } else { conversation.clone() };
        let begun = store
            .begin_turn(&NewTurn {
                owner: "alice",
                conversation_id: &target,
                create,
                turn_id: &id(),
                request_id: Some("req-7"),
                user_message: &message,
                title: "hello again",
            })
            .await
            .expect("begin");
        let BeginTurn::DuplicateRequest(existing) = begun else {
            panic!("expected a duplicate, got {begun:?}")
        };
        assert_eq!(existing.id, turn);
        assert_eq!(existing.state, TurnState::Running);
        assert_eq!(existing.outcome, None);
    }
    assert_eq!(
        store
            .events("alice", &conversation)
            .await
            .expect("events")
            .len(),
        1
    );
    assert!(finish(&store, "alice", &conversation, &turn, "done").await);
    let existing = store
        .turn_by_request("alice", "req-7")
        .await
        .expect("read")
        .expect("exists");
    assert_eq!(existing.state, TurnState::Completed);
    assert!(existing.outcome.is_some());
}

async fn racing_request_ids_start_one_turn(store: Store) {
    let mut tasks = Vec::new();
    for _ in 0..8 {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            let message = user_message("race");
            store
                .begin_turn(&NewTurn {
                    owner: "alice",
                    conversation_id: &id(),
                    create: true,
                    turn_id: &id(),
                    request_id: Some("req-race"),
                    user_message: &message,
                    title: "race",
                })
                .await
        }));
    }
    let mut started = 0;
    for task in tasks {
        match task.await.expect("join").expect("begin") {
            BeginTurn::Started { .. } => started += 1,
            BeginTurn::DuplicateRequest(_) => {}
            BeginTurn::NotFound => panic!("unexpected not found"),
        }
    }
    assert_eq!(started, 1);
}

async fn list_pages_newest_first(store: Store) {
    let mut made = Vec::new();
    for _ in 0..5 {
        let conversation = id();
        start(&store, "pager", &conversation, true, None).await;
        made.push(conversation);
    }
    let mut seen = Vec::new();
    let mut cursor = None;
    let mut pages = 0;
    loop {
        let (page, next) = store.list("pager", 2, cursor.as_ref()).await.expect("list");
        assert!(page.len() <= 2);
        seen.extend(
            page.into_iter()
                .map(|summary| (summary.updated_at, summary.id)),
        );
        pages += 1;
        match next {
            Some(next) => cursor = Some(next),
            None => break,
        }
    }
    assert_eq!(pages, 3);
    let mut expected = seen.clone();
    expected.sort_by(|a, b| b.cmp(a));
    assert_eq!(seen, expected, "newest first, no repeats");
    let mut ids: Vec<String> = seen.into_iter().map(|(_, id)| id).collect();
    ids.sort();
    made.sort();
    assert_eq!(ids, made);
}

async fn delete_removes_the_log(store: Store) {
    let conversation = id();
    let turn = start(&store, "alice", &conversation, true, Some("req-del")).await;
    assert!(finish(&store, "alice", &conversation, &turn, "bye").await);
    assert!(store.delete("alice", &conversation).await.expect("delete"));
    assert_eq!(
        store
            .conversation("alice", &conversation)
            .await
            .expect("read"),
        None
    );
    assert!(
        store
            .events("alice", &conversation)
            .await
            .expect("events")
            .is_empty()
    );
    assert_eq!(store.turn("alice", &turn).await.expect("turn"), None);
    assert!(
        !store
            .delete("alice", &conversation)
            .await
            .expect("delete twice")
    );
    // Finishing a turn whose conversation was deleted stores nothing.
    assert!(!finish(&store, "alice", &conversation, &turn, "late").await);
}

macro_rules! on_both_backends {
    ($($scenario:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test]
                async fn $scenario() {
                    let (store, _dir) = super::sqlite_store().await;
                    super::$scenario(store).await;
                }
            )*
        }
        mod postgres {
            $(
                #[tokio::test]
                async fn $scenario() {
                    if let Some((store, schema)) =
                        super::postgres_store(concat!("store::tests::postgres::", stringify!($scenario))).await
                    {
                        super::$scenario(store.clone()).await;
                        super::drop_schema(store, &schema).await;
                    }
                }
            )*
        }
    };
}

on_both_backends!(
    log_is_gapless_and_ordered,
    other_owner_sees_nothing,
    request_ids_are_idempotent,
    racing_request_ids_start_one_turn,
    list_pages_newest_first,
    delete_removes_the_log,
);

#[tokio::test]
async fn reopening_runs_migrations_once() {
    let dir = tempfile::tempdir().expect("temp dir");
    let url = format!(
        "sqlite://{}?mode=rwc",
        dir.path().join("parley.db").display()
    );
    let store = Store::open(&url, &StoreOptions::default())
        .await
        .expect("first open");
    let conversation = id();
    start(&store, "alice", &conversation, true, None).await;
    store.close().await;
    let store = Store::open(&url, &StoreOptions::default())
        .await
        .expect("second open");
    assert_eq!(
        store
            .events("alice", &conversation)
            .await
            .expect("events")
            .len(),
        1
    );
}

#[test]
fn urls_choose_the_backend() {
    assert_eq!(
        Backend::from_url("sqlite://parley.db?mode=rwc").expect("sqlite"),
        Backend::Sqlite
    );
    assert_eq!(
        Backend::from_url("postgres://u@h/db").expect("postgres"),
        Backend::Postgres
    );
    assert_eq!(
        Backend::from_url("postgresql://u@h/db").expect("postgresql"),
        Backend::Postgres
    );
    assert!(matches!(
        Backend::from_url("mysql://h/db"),
        Err(StoreError::UnsupportedUrl(_))
    ));
}

#[test]
fn titles_are_the_first_line_shortened() {
    assert_eq!(title_from("\n  Hello world \nmore", 80), "Hello world");
    assert_eq!(title_from("abcdef", 4), "abc…");
    assert_eq!(title_from("ééééé", 5), "ééééé");
}
