//! Store tests: every scenario runs on an SQLite file and on PostgreSQL.
//!
//! PostgreSQL comes from `PARLEY_TEST_POSTGRES_URL` (`scripts/postgres.sh`
//! starts one and prints it); each test gets its own schema. Without the
//! variable the PostgreSQL half fails under `CI=true` and otherwise prints a
//! loud NOT RUN line ([`parley_testkit::not_run`]).

#[path = "../../tests/gateway/postgres.rs"]
pub(crate) mod test_postgres;

use serde_json::json;

use std::sync::Arc;

use sqlx::Row;

use super::*;
use crate::store::listen::Notice;
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
    let (url, schema) = test_postgres::fresh_schema(test).await?;
    let store = Store::open(&url, &StoreOptions::default())
        .await
        .expect("open postgres store");
    Some((store, schema))
}

/// Drops a test schema made by [`postgres_store`].
pub(crate) async fn drop_schema(store: Store, schema: &str) {
    store.close().await;
    test_postgres::drop_schema(schema).await;
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
        attachments: Vec::new(),
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

/// The replica the tests' turns run on.
const REPLICA: &str = "replica-a";

/// A lease that lasts the test (ms from now on the store's clock).
fn lease() -> i64 {
    60_000
}

/// A lease that has already expired.
const EXPIRED: i64 = -1;

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
    let (turn, begun) = begin_with(
        store,
        owner,
        conversation,
        create,
        request,
        &user_message("hello there"),
        None,
    )
    .await;
    assert!(matches!(begun, BeginTurn::Started { .. }), "{begun:?}");
    turn
}

/// Begins a turn of `message` (whose parent is `parent` when it starts a
/// branch); its id and what `begin_turn` did.
pub(crate) async fn begin_with(
    store: &Store,
    owner: &str,
    conversation: &str,
    create: bool,
    request: Option<&str>,
    message: &EventBody,
    parent: Option<&str>,
) -> (String, BeginTurn) {
    let turn = id();
    let begun = store
        .begin_turn(&NewTurn {
            owner,
            conversation_id: conversation,
            create,
            turn_id: &turn,
            replica: REPLICA,
            lease_ttl_ms: lease(),
            stream_ahead: 0,
            request_id: request,
            parent,
            user_message: message,
            title: "hello there",
            admission: &Default::default(),
        })
        .await
        .expect("begin turn");
    (turn, begun)
}

async fn finish(store: &Store, owner: &str, conversation: &str, turn: &str, text: &str) -> bool {
    store
        .finish_turn(FinishTurn {
            owner,
            conversation_id: conversation,
            turn_id: turn,
            replica: REPLICA,
            state: TurnState::Completed,
            retryable: false,
            wire: None,
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
            pause: None,
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
            replica: REPLICA,
            lease_ttl_ms: lease(),
            stream_ahead: 0,
            request_id: None,
            parent: None,
            user_message: &message,
            title: "",
            admission: &Default::default(),
        })
        .await
        .expect("begin");
    assert_eq!(begun, BeginTurn::NotFound);
    assert!(!finish(&store, "mallory", &conversation, &turn, "overwrite").await);
    assert_eq!(
        store
            .delete("mallory", &conversation)
            .await
            .expect("delete"),
        Deletion::NotFound
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
                replica: REPLICA,
                lease_ttl_ms: lease(),
                stream_ahead: 0,
                request_id: Some("req-7"),
                parent: None,
                user_message: &message,
                title: "hello again",
                admission: &Default::default(),
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
                    replica: REPLICA,
                    lease_ttl_ms: lease(),
                    stream_ahead: 0,
                    request_id: Some("req-race"),
                    parent: None,
                    user_message: &message,
                    title: "race",
                    admission: &Default::default(),
                })
                .await
        }));
    }
    let mut started = 0;
    for task in tasks {
        match task.await.expect("join").expect("begin") {
            BeginTurn::Started { .. } => started += 1,
            BeginTurn::DuplicateRequest(_) => {}
            other @ (BeginTurn::NotFound | BeginTurn::Busy { .. } | BeginTurn::OverQuota(_)) => {
                panic!("unexpected {other:?}")
            }
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
    assert_eq!(
        store.delete("alice", &conversation).await.expect("delete"),
        Deletion::Deleted
    );
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
    assert_eq!(
        store
            .delete("alice", &conversation)
            .await
            .expect("delete twice"),
        Deletion::NotFound
    );
    // Finishing a turn whose conversation was deleted stores nothing.
    assert!(!finish(&store, "alice", &conversation, &turn, "late").await);
}

/// The state of alice's turn.
async fn state_of(store: &Store, turn: &str) -> TurnState {
    store
        .turn("alice", turn)
        .await
        .expect("turn")
        .expect("exists")
        .state
}

/// A turn's end that finds the turn not as it expects (held by another
/// replica, or named with another conversation) writes nothing at all:
/// neither the turn nor its conversation's seqs, which the end reads and
/// moves on in the same query.
async fn an_end_that_does_not_hold_its_turn_writes_nothing(store: Store) {
    let conversation = id();
    let (turn, _) = begin_on(&store, &conversation, true, REPLICA, lease(), None).await;
    let other = id();
    begin_on(&store, &other, true, REPLICA, lease(), None).await;
    let ending = |replica: &'static str, conversation_id: String| {
        let store = store.clone();
        let turn = turn.clone();
        async move {
            store
                .finish_turn(FinishTurn {
                    owner: "alice",
                    conversation_id: &conversation_id,
                    turn_id: &turn,
                    replica,
                    state: TurnState::Completed,
                    retryable: false,
                    outcome: None,
                    events: vec![assistant("ended", TurnState::Completed)],
                    wire: None,
                    pause: None,
                })
                .await
                .expect("finish turn")
        }
    };
    assert!(!ending("replica-b", conversation.clone()).await);
    assert!(!ending(REPLICA, other.clone()).await);
    for id in [&conversation, &other] {
        let events = store.events("alice", id).await.expect("events");
        assert_eq!(events.len(), 1, "only the user message: {events:?}");
    }
    assert_eq!(state_of(&store, &turn).await, TurnState::Running);
    // The end that holds it takes the next seq after the user message.
    assert!(ending(REPLICA, conversation.clone()).await);
    let seqs: Vec<i64> = store
        .events("alice", &conversation)
        .await
        .expect("events")
        .iter()
        .map(|event| event.seq)
        .collect();
    assert_eq!(seqs, vec![1, 2]);
    assert_eq!(state_of(&store, &turn).await, TurnState::Completed);
}

/// Begins a turn on `replica` with a lease of `lease_ttl_ms`.
async fn begin_on(
    store: &Store,
    conversation: &str,
    create: bool,
    replica: &str,
    lease_ttl_ms: i64,
    request: Option<&str>,
) -> (String, BeginTurn) {
    let turn = id();
    let message = user_message("hello there");
    let begun = store
        .begin_turn(&NewTurn {
            owner: "alice",
            conversation_id: conversation,
            create,
            turn_id: &turn,
            replica,
            lease_ttl_ms,
            stream_ahead: 3,
            request_id: request,
            parent: None,
            user_message: &message,
            title: "hello there",
            admission: &Default::default(),
        })
        .await
        .expect("begin turn");
    (turn, begun)
}

async fn end(
    store: &Store,
    conversation: &str,
    turn: &str,
    state: TurnState,
    retryable: bool,
) -> bool {
    store
        .finish_turn(FinishTurn {
            owner: "alice",
            conversation_id: conversation,
            turn_id: turn,
            replica: REPLICA,
            state,
            retryable,
            outcome: None,
            events: vec![assistant("ended", state)],
            wire: None,
            pause: None,
        })
        .await
        .expect("finish turn")
}

/// A turn's end reaches the other replicas' listeners (PostgreSQL's
/// NOTIFY, sent in the finishing write's statement); SQLite has none.
async fn a_finished_turn_notifies_the_other_replicas(store: Store) {
    let Some(mut notices) = store.listen() else {
        assert_eq!(store.backend(), Backend::Sqlite);
        return;
    };
    let conversation = id();
    let (turn, _) = begin_on(
        &store,
        &conversation,
        true,
        REPLICA,
        now_ms() + 60_000,
        None,
    )
    .await;
    // The listener connects on its own: a cancel request's notice shows it
    // is listening.
    let mut listening = false;
    for _ in 0..50 {
        store.request_cancel("alice", &turn).await.expect("cancel");
        let heard = tokio::time::timeout(Duration::from_millis(200), notices.recv()).await;
        if let Ok(Some(Notice::Cancel(id))) = heard
            && id == turn
        {
            listening = true;
            break;
        }
    }
    assert!(listening, "the listener never heard a cancel request");
    assert!(end(&store, &conversation, &turn, TurnState::Completed, false).await);
    let heard = tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            match notices.recv().await {
                Some(Notice::TurnEvents(id)) if id == turn => return true,
                Some(_) => {}
                None => return false,
            }
        }
    })
    .await;
    assert_eq!(heard, Ok(true), "no notice of the turn's end");
}

/// Appends one turn's batch as `replica`: whether the turn was held.
async fn append(
    store: &Store,
    turn: &str,
    replica: &str,
    batch: WireBatch,
) -> Result<bool, StoreError> {
    let held = store
        .append_wire(
            replica,
            vec![TurnBatch {
                turn_id: turn.to_owned(),
                batch,
            }],
        )
        .await?;
    Ok(held == [true])
}

fn batch(first: u64, last: u64) -> WireBatch {
    WireBatch {
        first_seq: first,
        last_seq: last,
        events: format!("events {first}..={last}"),
    }
}

/// A finalize that ends a swept turn as failed and records what it read.
fn finalize(seen: Arc<std::sync::Mutex<Option<ReapInput>>>) -> Finalize {
    Arc::new(move |input: &ReapInput| {
        *seen.lock().expect("lock") = Some(input.clone());
        Reaped {
            state: TurnState::Failed,
            retryable: true,
            outcome: None,
            events: vec![assistant("partial", TurnState::Failed)],
            wire: batch(input.last_event_seq + 1, input.last_event_seq + 2),
        }
    })
}

async fn one_running_turn_per_conversation(store: Store) {
    let conversation = id();
    let (first, begun) = begin_on(&store, &conversation, true, REPLICA, lease(), None).await;
    assert!(matches!(begun, BeginTurn::Started { .. }));
    // Another replica, same conversation: refused by the database.
    let (_, begun) = begin_on(&store, &conversation, false, "replica-b", lease(), None).await;
    assert_eq!(
        begun,
        BeginTurn::Busy {
            turn_id: first.clone()
        }
    );
    assert_eq!(
        store
            .running_turn("alice", &conversation)
            .await
            .expect("read")
            .map(|t| t.id),
        Some(first.clone())
    );
    assert!(end(&store, &conversation, &first, TurnState::Completed, false).await);
    let (second, begun) = begin_on(&store, &conversation, false, "replica-b", lease(), None).await;
    assert!(matches!(begun, BeginTurn::Started { .. }), "{begun:?}");
    assert_eq!(
        store
            .latest_turn("alice", &conversation)
            .await
            .expect("read")
            .map(|t| t.id),
        Some(second)
    );
    // Racing replicas on a fresh conversation: exactly one starts.
    let conversation = id();
    let (_, begun) = begin_on(&store, &conversation, true, REPLICA, lease(), None).await;
    assert!(matches!(begun, BeginTurn::Started { .. }));
    let mut tasks = Vec::new();
    for replica in ["r1", "r2", "r3", "r4"] {
        let store = store.clone();
        let conversation = conversation.clone();
        tasks.push(tokio::spawn(async move {
            begin_on(&store, &conversation, false, replica, lease(), None)
                .await
                .1
        }));
    }
    for task in tasks {
        let begun = task.await.expect("join");
        assert!(matches!(begun, BeginTurn::Busy { .. }), "{begun:?}");
    }
}

async fn retryable_failures_free_their_request_id(store: Store) {
    let conversation = id();
    let (first, _) = begin_on(&store, &conversation, true, REPLICA, lease(), Some("req-r")).await;
    assert!(end(&store, &conversation, &first, TurnState::Failed, true).await);
    let (second, begun) = begin_on(
        &store,
        &conversation,
        false,
        REPLICA,
        lease(),
        Some("req-r"),
    )
    .await;
    assert!(matches!(begun, BeginTurn::Started { .. }), "{begun:?}");
    let owner_of_id = store
        .turn_by_request("alice", "req-r")
        .await
        .expect("read")
        .expect("exists");
    assert_eq!(owner_of_id.id, second);
    // A non-retryable failure keeps it: the retry replays.
    assert!(end(&store, &conversation, &second, TurnState::Failed, false).await);
    let (_, begun) = begin_on(
        &store,
        &conversation,
        false,
        REPLICA,
        lease(),
        Some("req-r"),
    )
    .await;
    let BeginTurn::DuplicateRequest(existing) = begun else {
        panic!("expected a duplicate, got {begun:?}")
    };
    assert_eq!(existing.id, second);
    assert!(!existing.retryable);
}

/// One append stores the batches of many turns, skipping (and telling)
/// those this replica no longer runs.
async fn one_append_for_many_turns(store: Store) {
    let mut turns = Vec::new();
    for replica in [REPLICA, REPLICA, "replica-b"] {
        let (turn, _) = begin_on(&store, &id(), true, replica, lease(), None).await;
        turns.push(turn);
    }
    let batches: Vec<TurnBatch> = turns
        .iter()
        .zip([batch(1, 2), batch(1, 4), batch(1, 1)])
        .map(|(turn, batch)| TurnBatch {
            turn_id: turn.clone(),
            batch,
        })
        .collect();
    let held = store.append_wire(REPLICA, batches).await.expect("append");
    assert_eq!(held, [true, true, false]);
    for (turn, expected) in turns
        .iter()
        .zip([vec![batch(1, 2)], vec![batch(1, 4)], vec![]])
    {
        assert_eq!(
            store.wire_events("alice", turn, 0).await.expect("wire"),
            expected
        );
    }
    let record = store
        .turn("alice", &turns[1])
        .await
        .expect("read")
        .expect("exists");
    assert_eq!(record.last_event_seq, 4);
    assert_eq!(
        store.append_wire(REPLICA, Vec::new()).await.expect("empty"),
        Vec::<bool>::new()
    );
}

/// An append of more turns than one statement takes, turns not held on
/// both sides of a statement's end among them: through the store's writer,
/// then run directly in a transaction of its own (as a write that is not
/// its batch's last runs on SQLite).
async fn an_append_of_many_turns_spans_statements(store: Store) {
    use super::batch::Write;
    let count = wire::APPEND_CHUNK + 2;
    let theirs = [0, wire::APPEND_CHUNK - 1, wire::APPEND_CHUNK];
    let ended = 100;
    let mut turns = Vec::new();
    let mut conversations = Vec::new();
    for number in 0..count {
        let replica = if theirs.contains(&number) {
            "replica-b"
        } else {
            REPLICA
        };
        let conversation = id();
        let (turn, _) = begin_on(&store, &conversation, true, replica, lease(), None).await;
        turns.push(turn);
        conversations.push(conversation);
    }
    assert!(
        end(
            &store,
            &conversations[ended],
            &turns[ended],
            TurnState::Completed,
            false
        )
        .await
    );
    let expected: Vec<bool> = (0..count)
        .map(|number| !theirs.contains(&number) && number != ended)
        .collect();
    let batches = |first, last| -> Vec<TurnBatch> {
        turns
            .iter()
            .map(|turn| TurnBatch {
                turn_id: turn.clone(),
                batch: batch(first, last),
            })
            .collect()
    };
    let held = store
        .append_wire(REPLICA, batches(1, 2))
        .await
        .expect("append");
    assert_eq!(held, expected);
    let direct = wire::AppendWire {
        replica: REPLICA.to_owned(),
        batches: batches(3, 3),
        notify: store.notifies(),
        now: now_ms(),
    };
    let mut tx = store.pool.begin().await.expect("begin");
    let held = direct.run(&mut tx).await.expect("run");
    tx.commit().await.expect("commit");
    assert_eq!(held, expected);
    for number in [0, 1, ended, count - 3, count - 2, count - 1] {
        let stored = store
            .wire_events("alice", &turns[number], 0)
            .await
            .expect("wire");
        let want = if expected[number] {
            vec![batch(1, 2), batch(3, 3)]
        } else {
            vec![]
        };
        assert_eq!(stored, want, "turn {number}");
        let record = store
            .turn("alice", &turns[number])
            .await
            .expect("read")
            .expect("exists");
        let last = if expected[number] { 3 } else { 0 };
        assert_eq!(record.last_event_seq, last, "turn {number}");
    }
}

/// Only the replica that holds a turn's unexpired lease may start its
/// next tool calls; once the lease lapsed it may not, reaped or not.
async fn tool_calls_are_fenced_by_the_lease(store: Store) {
    let (turn, _) = begin_on(&store, &id(), true, REPLICA, lease(), None).await;
    let hold = |replica: &'static str| {
        let (store, turn) = (store.clone(), turn.clone());
        async move {
            store
                .hold_for_dispatch(&turn, replica, lease())
                .await
                .expect("fence")
        }
    };
    assert!(hold(REPLICA).await);
    assert!(!hold("replica-b").await, "another replica's turn");
    store.renew_leases(REPLICA, EXPIRED).await.expect("renew");
    assert!(!hold(REPLICA).await, "its lease lapsed");
    // Renewed, then ended by another replica's sweep.
    store.renew_leases(REPLICA, lease()).await.expect("renew");
    assert!(hold(REPLICA).await);
    store.renew_leases(REPLICA, EXPIRED).await.expect("renew");
    let seen = Arc::new(std::sync::Mutex::new(None));
    assert!(
        store
            .reap(&turn, ReapIf::LeaseExpired, finalize(seen))
            .await
            .expect("reap")
    );
    store.renew_leases(REPLICA, lease()).await.expect("renew");
    assert!(!hold(REPLICA).await, "ended");
}

async fn wire_log_leases_and_reaping(store: Store) {
    let conversation = id();
    // A lease already expired: its replica is gone.
    let (turn, _) = begin_on(&store, &conversation, true, REPLICA, EXPIRED, None).await;
    assert!(
        append(&store, &turn, REPLICA, batch(1, 3))
            .await
            .expect("append")
    );
    assert!(
        append(&store, &turn, REPLICA, batch(4, 5))
            .await
            .expect("append")
    );
    // Only the turn's replica writes its log.
    assert!(
        !append(&store, &turn, "replica-b", batch(6, 6))
            .await
            .expect("append")
    );
    let after = store.wire_events("alice", &turn, 3).await.expect("wire");
    assert_eq!(after, vec![batch(4, 5)]);
    let logged = vec![batch(1, 3), batch(4, 5)];
    assert_eq!(
        store.wire_events("alice", &turn, 0).await.expect("wire"),
        logged
    );
    assert!(
        store
            .wire_events("mallory", &turn, 0)
            .await
            .expect("wire")
            .is_empty()
    );
    let record = store
        .turn("alice", &turn)
        .await
        .expect("read")
        .expect("exists");
    assert_eq!(record.last_event_seq, 5);
    assert_eq!(record.replica.as_deref(), Some(REPLICA));
    // The log of a turn that still runs outlives the resume window: its
    // newest batch says where it ended (the append writes no turn row).
    assert_eq!(store.prune_wire(now_ms() + 1).await.expect("prune"), 0);
    assert_eq!(
        store.wire_events("alice", &turn, 0).await.expect("wire"),
        logged
    );

    // Cancel requests reach the replica at its next renewal.
    assert_eq!(
        store
            .request_cancel("mallory", &turn)
            .await
            .expect("cancel"),
        None
    );
    assert_eq!(
        store
            .request_cancel("alice", &turn)
            .await
            .expect("cancel")
            .as_deref(),
        Some(REPLICA)
    );
    let seen = Arc::new(std::sync::Mutex::new(None));
    // A follower elsewhere says it is there (another owner cannot).
    let watched = 5_000;
    store
        .watch_turn("mallory", &turn, watched + 1)
        .await
        .expect("watch");
    store
        .watch_turn("alice", &turn, watched)
        .await
        .expect("watch");
    // Held by its replica and not expired after a renewal: not swept.
    let held = store.renew_leases(REPLICA, lease()).await.expect("renew");
    assert_eq!(
        held,
        vec![HeldTurn {
            id: turn.clone(),
            cancel_requested: true,
            watched: true,
        }]
    );
    assert!(store.expired_turns(100).await.expect("expired").is_empty());
    assert!(
        !store
            .reap(&turn, ReapIf::LeaseExpired, finalize(seen.clone()))
            .await
            .expect("reap")
    );
    assert!(
        !store
            .reap(
                &turn,
                ReapIf::HeldBy("replica-b".into()),
                finalize(seen.clone())
            )
            .await
            .expect("reap")
    );

    // Expired again (the replica stopped renewing): swept, once.
    store.renew_leases(REPLICA, EXPIRED).await.expect("renew");
    assert_eq!(
        store.expired_turns(100).await.expect("expired"),
        vec![turn.clone()]
    );
    assert!(
        store
            .reap(&turn, ReapIf::LeaseExpired, finalize(seen.clone()))
            .await
            .expect("reap")
    );
    assert!(
        !store
            .reap(&turn, ReapIf::LeaseExpired, finalize(seen.clone()))
            .await
            .expect("reap")
    );
    let input = seen.lock().expect("lock").take().expect("finalize ran");
    assert_eq!(input.last_event_seq, 5);
    assert_eq!(input.stream_ahead, 3);
    assert_eq!(input.wire.len(), 2);
    assert_eq!(input.owner, "alice");
    let record = store
        .turn("alice", &turn)
        .await
        .expect("read")
        .expect("exists");
    assert_eq!(record.state, TurnState::Failed);
    assert!(record.retryable);
    assert_eq!(record.last_event_seq, 7);
    assert_eq!(
        store.wire_events("alice", &turn, 5).await.expect("wire"),
        vec![batch(6, 7)]
    );
    let events = store.events("alice", &conversation).await.expect("events");
    assert_eq!(
        events.last().map(|e| &e.body),
        Some(&assistant("partial", TurnState::Failed))
    );
    // The replica that lost it can neither log nor end it any more.
    assert!(
        !append(&store, &turn, REPLICA, batch(8, 8))
            .await
            .expect("append")
    );
    assert!(!end(&store, &conversation, &turn, TurnState::Completed, false).await);
    assert!(
        store
            .renew_leases(REPLICA, lease())
            .await
            .expect("renew")
            .is_empty()
    );
    // The conversation is free again.
    let (_, begun) = begin_on(&store, &conversation, false, "replica-b", lease(), None).await;
    assert!(matches!(begun, BeginTurn::Started { .. }), "{begun:?}");

    // Past the resume window the wire log goes; the history stays.
    assert!(store.prune_wire(now_ms() + 1).await.expect("prune") >= 3);
    assert!(
        store
            .wire_events("alice", &turn, 0)
            .await
            .expect("wire")
            .is_empty()
    );
    assert_eq!(
        store
            .events("alice", &conversation)
            .await
            .expect("events")
            .len(),
        3
    );
}

async fn injected_write_faults_store_nothing(store: Store) {
    let conversation = id();
    let (turn, _) = begin_on(&store, &conversation, true, REPLICA, lease(), None).await;
    store.faults().fail_writes(true);
    let failed = store
        .finish_turn(FinishTurn {
            owner: "alice",
            conversation_id: &conversation,
            turn_id: &turn,
            replica: REPLICA,
            state: TurnState::Completed,
            retryable: false,
            outcome: None,
            events: vec![assistant("lost", TurnState::Completed)],
            wire: Some(batch(1, 2)),
            pause: None,
        })
        .await;
    assert!(matches!(failed, Err(StoreError::Injected(_))), "{failed:?}");
    assert!(matches!(
        append(&store, &turn, REPLICA, batch(1, 1)).await,
        Err(StoreError::Injected(_))
    ));
    store.faults().fail_writes(false);
    let record = store
        .turn("alice", &turn)
        .await
        .expect("read")
        .expect("exists");
    assert_eq!(record.state, TurnState::Running);
    assert_eq!(
        store
            .events("alice", &conversation)
            .await
            .expect("events")
            .len(),
        1
    );
    assert!(
        store
            .wire_events("alice", &turn, 0)
            .await
            .expect("wire")
            .is_empty()
    );
}

/// Migration 0004 on rows of the bare-id era, then their adoption.
async fn rows_from_before_scoped_owners_wait_for_their_issuer(store: Store) {
    // A conversation (and its turn, with a request id) of `alice`, stored
    // before owners were scoped, then migrated as 0004 migrates every row.
    let conversation = id();
    let turn = start(&store, "alice", &conversation, true, Some("req-1")).await;
    let migration: Vec<&str> = include_str!("migrations/0004_scoped_owners.sql")
        .lines()
        .filter(|line| !line.trim_start().starts_with("--"))
        .collect();
    for statement in migration
        .join("\n")
        .split(';')
        .map(str::to_owned)
        .filter(|sql| !sql.trim().is_empty())
    {
        sqlx::query(sqlx::AssertSqlSafe(statement))
            .execute(&store.pool)
            .await
            .expect("the migration's statement");
    }
    for owner in ["alice", "dev  alice", "static  alice"] {
        assert!(
            store
                .events(owner, &conversation)
                .await
                .expect("read")
                .is_empty(),
            "{owner} sees it"
        );
    }

    // No issuer to hand them to: they wait, hidden.
    let legacy = store.adopt_legacy_owners(None).await.expect("count");
    assert_eq!(
        legacy,
        owners::Legacy {
            adopted: 0,
            waiting: 1
        }
    );

    // Handed to the static tokens' `alice`, and only to her.
    let legacy = store
        .adopt_legacy_owners(Some("static  "))
        .await
        .expect("adopt");
    assert_eq!(
        legacy,
        owners::Legacy {
            adopted: 1,
            waiting: 0
        }
    );
    assert_eq!(
        store
            .events("static  alice", &conversation)
            .await
            .expect("hers now")
            .len(),
        1
    );
    assert!(
        store
            .events("dev  alice", &conversation)
            .await
            .expect("read")
            .is_empty()
    );
    let by_request = store
        .turn_by_request("static  alice", "req-1")
        .await
        .expect("read")
        .expect("her request id too");
    assert_eq!(by_request.id, turn);
    // A second replica starting later finds nothing left to adopt.
    let again = store
        .adopt_legacy_owners(Some("static  "))
        .await
        .expect("adopt");
    assert_eq!(
        again,
        owners::Legacy {
            adopted: 0,
            waiting: 0
        }
    );
}

/// Begins a turn of `owner` on a new conversation under `admission`.
async fn admit_as(store: &Store, owner: &str, admission: &quota::Admission) -> BeginTurn {
    let message = user_message("hello there");
    store
        .begin_turn(&NewTurn {
            owner,
            conversation_id: &id(),
            create: true,
            turn_id: &id(),
            replica: REPLICA,
            lease_ttl_ms: lease(),
            stream_ahead: 0,
            request_id: None,
            parent: None,
            user_message: &message,
            title: "hello there",
            admission,
        })
        .await
        .expect("begin turn")
}

/// Begins a turn of `owner` (in `tenant`), `quota` for user and tenant.
async fn admit(store: &Store, owner: &str, tenant: Option<&str>, quota: quota::Quota) -> BeginTurn {
    let admission = quota::Admission {
        tenant: tenant.map(str::to_owned),
        user: quota,
        tenant_quota: quota,
        stream: None,
    };
    admit_as(store, owner, &admission).await
}

fn refused(begun: &BeginTurn) -> Option<(quota::Scope, quota::Limit)> {
    match begun {
        BeginTurn::OverQuota(refusal) => Some((refusal.scope, refusal.limit)),
        _ => None,
    }
}

/// The turns of `owner` that are running, as the store lists them.
async fn running_of(store: &Store, owner: &str) -> Vec<(String, String)> {
    let rows = sqlx::query(
        "SELECT id, conversation_id FROM turns WHERE owner = $1 AND state = 'running' ORDER BY id",
    )
    .bind(owner)
    .fetch_all(&store.pool)
    .await
    .expect("read");
    rows.iter()
        .map(|row| {
            (
                row.try_get("id").expect("id"),
                row.try_get("conversation_id").expect("conversation"),
            )
        })
        .collect()
}

/// Ends `turn` with `tokens` of usage.
async fn finish_with_usage(
    store: &Store,
    owner: &str,
    conversation: &str,
    turn: &str,
    tokens: u64,
) {
    let mut answer = assistant("done", TurnState::Completed);
    if let EventBody::AssistantMessage(message) = &mut answer {
        message.usage = Some(model::StoredUsage {
            input_tokens: tokens / 2,
            output_tokens: tokens - tokens / 2,
            model_calls: 1,
            model: "m".into(),
            ..model::StoredUsage::default()
        });
    }
    let ended = store
        .finish_turn(FinishTurn {
            owner,
            conversation_id: conversation,
            turn_id: turn,
            replica: REPLICA,
            state: TurnState::Completed,
            retryable: false,
            wire: None,
            outcome: None,
            events: vec![answer],
            pause: None,
        })
        .await
        .expect("finish");
    assert!(ended);
}

async fn users_and_tenants_have_limits(store: Store) {
    use quota::{Limit, Quota, Scope};
    // Turns at once: alice's second is refused, bob (alone) is not, and
    // alice may start again once her turn ends.
    let two_at_once = Quota {
        concurrent_turns: 1,
        ..Quota::UNLIMITED
    };
    assert_eq!(
        refused(&admit(&store, "alice", None, two_at_once).await),
        None
    );
    assert_eq!(
        refused(&admit(&store, "alice", None, two_at_once).await),
        Some((Scope::User, Limit::ConcurrentTurns))
    );
    assert_eq!(
        refused(&admit(&store, "bob", None, two_at_once).await),
        None
    );
    let [(turn, conversation)] =
        <[_; 1]>::try_from(running_of(&store, "alice").await).expect("one running turn of alice");
    finish_with_usage(&store, "alice", &conversation, &turn, 10).await;
    assert_eq!(
        refused(&admit(&store, "alice", None, two_at_once).await),
        None
    );

    // Turns per minute, with when to retry.
    let per_minute = Quota {
        turns_per_minute: 2,
        ..Quota::UNLIMITED
    };
    for _ in 0..2 {
        assert_eq!(
            refused(&admit(&store, "carol", None, per_minute).await),
            None
        );
    }
    let BeginTurn::OverQuota(refusal) = admit(&store, "carol", None, per_minute).await else {
        panic!("the third turn of the minute is refused")
    };
    assert_eq!(refusal.limit, Limit::TurnsPerMinute);
    assert!(
        refusal.retry_after > std::time::Duration::from_secs(50)
            && refusal.retry_after <= std::time::Duration::from_secs(60),
        "{refusal:?}"
    );

    // Tokens per day, counted from the usage turns record as they end.
    let budget = Quota {
        tokens_per_day: 1_000,
        ..Quota::UNLIMITED
    };
    for _ in 0..2 {
        assert_eq!(refused(&admit(&store, "dave", None, budget).await), None);
    }
    for (turn, conversation) in running_of(&store, "dave").await {
        finish_with_usage(&store, "dave", &conversation, &turn, 600).await;
    }
    let BeginTurn::OverQuota(refusal) = admit(&store, "dave", None, budget).await else {
        panic!("1 200 tokens of 1 000 spent: refused")
    };
    assert_eq!(refusal.limit, Limit::TokensPerDay);
    assert!(refusal.retry_after <= std::time::Duration::from_secs(86_400));

    // A tenant's limit counts all its users; a user of no tenant is not
    // held by it.
    let tenant_of_one = Quota {
        concurrent_turns: 1,
        ..Quota::UNLIMITED
    };
    let admission = |tenant: Option<&str>| quota::Admission {
        tenant: tenant.map(str::to_owned),
        user: Quota::UNLIMITED,
        tenant_quota: tenant_of_one,
        stream: None,
    };
    for (owner, tenant, expected) in [
        ("erin", Some("acme"), None),
        (
            "frank",
            Some("acme"),
            Some((Scope::Tenant, Limit::ConcurrentTurns)),
        ),
        ("grace", Some("globex"), None),
        ("heidi", None, None),
    ] {
        let begun = admit_as(&store, owner, &admission(tenant)).await;
        assert_eq!(refused(&begun), expected, "{owner}");
    }
}

/// The tokens turns spent are kept per day of their start: they stay
/// spent when their conversation is deleted, they count for the user and
/// the tenant, yesterday's do not hold today, and counts older than
/// yesterday are pruned.
async fn spent_tokens_are_kept_per_day(store: Store) {
    use quota::{Limit, Quota, Scope};
    let budget = Quota {
        tokens_per_day: 1_000,
        ..Quota::UNLIMITED
    };
    let in_acme = quota::Admission {
        tenant: Some("acme".into()),
        user: budget,
        tenant_quota: budget,
        stream: None,
    };
    assert_eq!(refused(&admit_as(&store, "ivan", &in_acme).await), None);
    let [(turn, conversation)] =
        <[_; 1]>::try_from(running_of(&store, "ivan").await).expect("one running turn of ivan");
    finish_with_usage(&store, "ivan", &conversation, &turn, 1_200).await;
    assert_eq!(
        store.delete("ivan", &conversation).await.expect("delete"),
        Deletion::Deleted
    );
    assert_eq!(
        refused(&admit_as(&store, "ivan", &in_acme).await),
        Some((Scope::User, Limit::TokensPerDay)),
        "the deleted conversation's tokens stay spent"
    );
    assert_eq!(
        refused(&admit_as(&store, "judy", &in_acme).await),
        Some((Scope::Tenant, Limit::TokensPerDay)),
        "a user of the same tenant meets the tenant's count"
    );

    const DAY: i64 = 86_400_000;
    let now = now_ms();
    let today = now - now % DAY;
    for day in [today - DAY, today - 2 * DAY] {
        sqlx::query(
            "INSERT INTO quota_tokens (scope, key, day, tokens) VALUES ('user', $1, $2, 5000)",
        )
        .bind("kim")
        .bind(day)
        .execute(&store.pool)
        .await
        .expect("insert an earlier day's count");
    }
    assert_eq!(
        refused(&admit(&store, "kim", None, budget).await),
        None,
        "yesterday's tokens do not count today"
    );
    assert_eq!(store.prune_quota_days(now).await.expect("prune"), 1);
    let days: Vec<i64> = sqlx::query("SELECT day FROM quota_tokens WHERE key = $1")
        .bind("kim")
        .fetch_all(&store.pool)
        .await
        .expect("read")
        .iter()
        .map(|row| row.try_get("day").expect("day"))
        .collect();
    assert_eq!(days, [today - DAY]);
}

/// SQLite's `EXPLAIN QUERY PLAN` of `sql`, to bind its values to.
fn explain(sql: &str) -> sqlx::query::Query<'static, sqlx::Any, sqlx::any::AnyArguments> {
    sqlx::query(sqlx::AssertSqlSafe(format!("EXPLAIN QUERY PLAN {sql}")))
}

/// The steps of a plan `explain` asks for, as SQLite words them.
async fn plan_of(
    store: &Store,
    explain: sqlx::query::Query<'static, sqlx::Any, sqlx::any::AnyArguments>,
) -> Vec<String> {
    explain
        .fetch_all(&store.pool)
        .await
        .expect("explain")
        .iter()
        .map(|row| row.try_get::<String, _>("detail").expect("detail"))
        .collect()
}

/// A turn's history (`queries::RECENT_EVENTS`) is read by turn: never by
/// going over every event of its conversation.
#[tokio::test]
async fn recent_history_is_read_by_turn() {
    let (store, _dir) = sqlite_store().await;
    let explain = explain(queries::RECENT_EVENTS)
        .bind("conversation")
        .bind("owner")
        .bind(50_i64);
    let plan = plan_of(&store, explain).await;
    let events: Vec<&String> = plan.iter().filter(|step| step.contains(" e ")).collect();
    assert_eq!(events.len(), 1, "{plan:?}");
    assert!(events[0].contains("events_by_turn (turn_id=?)"), "{plan:?}");
}

/// The quotas' reads (`quota::usage_sql`) go through an index range that
/// does not grow with the caller's history: each read of `turns` is bound
/// by a running-turns index or by `created_at`, never by the owner or
/// tenant alone (which read every turn they ever started).
#[tokio::test]
async fn quota_reads_stay_within_their_windows() {
    let (store, _dir) = sqlite_store().await;
    for scope in [quota::Scope::User, quota::Scope::Tenant] {
        let explain = explain(quota::usage_sql(scope, true))
            .bind("someone")
            .bind(0_i64)
            .bind(scope.as_str())
            .bind(0_i64);
        let plan = plan_of(&store, explain).await;
        let reads: Vec<&String> = plan
            .iter()
            .filter(|step| step.contains(" turns ") || step.contains(" quota_admissions "))
            .collect();
        assert_eq!(reads.len(), 3, "{plan:?}");
        for read in reads {
            assert!(
                read.contains("turns_running_by_") || read.contains("created_at>"),
                "{scope:?}: {read}"
            );
        }
        assert!(
            plan.iter()
                .any(|step| step.contains("quota_tokens") && step.contains("INDEX")),
            "{plan:?}"
        );
    }
}

/// A turn admitted this minute keeps counting when its conversation is
/// deleted; a conversation whose turn still runs is not deleted (the turn
/// would stop counting as running); the ledger is pruned past the window.
async fn admissions_outlive_deleted_conversations(store: Store) {
    use quota::{Limit, Quota};
    let per_minute = Quota {
        turns_per_minute: 2,
        ..Quota::UNLIMITED
    };
    for _ in 0..2 {
        assert_eq!(
            refused(&admit(&store, "mallet", None, per_minute).await),
            None
        );
        let [(turn, conversation)] = <[_; 1]>::try_from(running_of(&store, "mallet").await)
            .expect("one running turn of mallet");
        assert_eq!(
            store.delete("mallet", &conversation).await.expect("delete"),
            Deletion::TurnRunning {
                turn_id: turn.clone()
            },
            "not while its turn runs"
        );
        finish_with_usage(&store, "mallet", &conversation, &turn, 10).await;
        assert_eq!(
            store.delete("mallet", &conversation).await.expect("delete"),
            Deletion::Deleted
        );
    }
    assert_eq!(
        refused(&admit(&store, "mallet", None, per_minute).await),
        Some((quota::Scope::User, Limit::TurnsPerMinute)),
        "deleted conversations' turns still count this minute"
    );
    let ledger = |store: Store| async move {
        sqlx::query("SELECT count(*) AS n FROM quota_admissions WHERE owner = 'mallet'")
            .fetch_one(&store.pool)
            .await
            .expect("count")
            .try_get::<i64, _>("n")
            .expect("n")
    };
    assert_eq!(ledger(store.clone()).await, 2);
    assert_eq!(store.prune_admissions(now_ms()).await.expect("prune"), 0);
    let later = now_ms() + 3 * 60_000;
    assert!(store.prune_admissions(later).await.expect("prune") >= 2);
    assert_eq!(ledger(store.clone()).await, 0);

    // Only a per-minute limit reads the ledger: a turn admitted without
    // one, for the user and for the tenant, leaves no row...
    let no_minute_limit = Quota {
        concurrent_turns: 100,
        ..Quota::UNLIMITED
    };
    assert_eq!(
        refused(&admit(&store, "mallet", Some("guild"), no_minute_limit).await),
        None
    );
    assert_eq!(ledger(store.clone()).await, 0, "no limit reads it");
    // ...and one the tenant's limit counts does.
    let tenant_limited = quota::Admission {
        tenant: Some("guild".into()),
        user: Quota::UNLIMITED,
        tenant_quota: per_minute,
        stream: None,
    };
    assert_eq!(
        refused(&admit_as(&store, "mallet", &tenant_limited).await),
        None
    );
    assert_eq!(
        ledger(store.clone()).await,
        1,
        "the tenant's limit reads it"
    );
}

/// Streams count per user across the turns that open them and the
/// streams that follow; a released lease frees its place, and an expired
/// one (its replica died) stops counting.
async fn stream_leases_count_open_streams(store: Store) {
    use quota::{Limit, Quota, Scope};
    let two = Quota {
        streams: 2,
        ..Quota::UNLIMITED
    };
    let stream = |id: &str, ttl_ms: i64| quota::NewStream {
        id: id.into(),
        ttl_ms,
    };
    let with_stream = |id: &str, ttl_ms: i64| quota::Admission {
        tenant: None,
        user: two,
        tenant_quota: Quota::UNLIMITED,
        stream: Some(stream(id, ttl_ms)),
    };
    // A turn's stream, then a follower's: the third is refused, as a turn
    // or as a follower.
    assert_eq!(
        refused(&admit_as(&store, "olga", &with_stream("s1", 60_000)).await),
        None
    );
    assert_eq!(
        store
            .open_stream("olga", REPLICA, &with_stream("s2", 60_000))
            .await
            .expect("open"),
        None
    );
    assert_eq!(
        refused(&admit_as(&store, "olga", &with_stream("s3", 60_000)).await),
        Some((Scope::User, Limit::Streams))
    );
    let refusal = store
        .open_stream("olga", REPLICA, &with_stream("s3", 60_000))
        .await
        .expect("open")
        .expect("refused");
    assert_eq!((refusal.limit, refusal.max), (Limit::Streams, 2));
    // Another user is not held by olga's streams.
    assert_eq!(
        store
            .open_stream("pat", REPLICA, &with_stream("p1", 60_000))
            .await
            .expect("open"),
        None
    );
    // A closed stream frees its place.
    assert_eq!(
        store
            .release_streams(vec!["s2".into()])
            .await
            .expect("release"),
        1
    );
    assert_eq!(
        store
            .open_stream("olga", REPLICA, &with_stream("s4", 60_000))
            .await
            .expect("open"),
        None
    );
    // Leases of a replica that stopped renewing them expire, on the
    // database's clock, and are deleted by any replica's renewal.
    assert_eq!(
        store
            .release_streams(vec!["s1".into(), "s4".into()])
            .await
            .expect("release"),
        2
    );
    for id in ["d1", "d2"] {
        store
            .open_stream("olga", "dead-replica", &with_stream(id, -1))
            .await
            .expect("open");
    }
    assert_eq!(
        store
            .open_stream("olga", REPLICA, &with_stream("s5", 60_000))
            .await
            .expect("open"),
        None,
        "expired leases do not count"
    );
    assert_eq!(
        store.renew_streams(REPLICA, 60_000).await.expect("renew"),
        2
    );
}

/// Admissions of one user's turns at once (as replicas racing on one
/// database make them) never exceed the limit.
async fn racing_admissions_respect_the_limit(store: Store) {
    let limit = quota::Quota {
        concurrent_turns: 3,
        ..quota::Quota::UNLIMITED
    };
    let tasks: Vec<_> = (0..48)
        .map(|_| {
            let store = store.clone();
            tokio::spawn(async move { admit(&store, "racer", None, limit).await })
        })
        .collect();
    let mut started = 0;
    for task in tasks {
        if matches!(task.await.expect("join"), BeginTurn::Started { .. }) {
            started += 1;
        }
    }
    assert_eq!(started, 3);
    assert_eq!(running_of(&store, "racer").await.len(), 3);
}

/// Pauses a running turn of `owner` for `wait_ms`, with its continuation.
async fn pause(store: &Store, owner: &str, conversation: &str, turn: &str, wait_ms: i64) -> bool {
    store
        .finish_turn(FinishTurn {
            owner,
            conversation_id: conversation,
            turn_id: turn,
            replica: REPLICA,
            state: TurnState::AwaitingInput,
            retryable: false,
            wire: Some(batch(1, 3)),
            outcome: None,
            events: Vec::new(),
            pause: Some(Pause {
                continuation: "Y29udGludWF0aW9u".into(),
                wait_ms,
            }),
        })
        .await
        .expect("pause turn")
}

fn take<'a>(owner: &'a str, turn: &'a str, replica: &'a str) -> pauses::TakePaused<'a> {
    pauses::TakePaused {
        owner,
        turn_id: turn,
        replica,
        lease_ttl_ms: lease(),
        request_id: Some("decide-1"),
        expired_too: false,
        at_seq: Some(3),
    }
}

async fn paused_turns_are_taken_back_once(store: Store) {
    let conversation = id();
    let turn = start(&store, "alice", &conversation, true, None).await;
    assert!(pause(&store, "alice", &conversation, &turn, lease()).await);
    assert_eq!(state_of(&store, &turn).await, TurnState::AwaitingInput);
    assert_eq!(
        store
            .paused_turn("alice", &conversation)
            .await
            .expect("read"),
        Some(turn.clone())
    );
    assert_eq!(
        store.paused_count("alice", None).await.expect("count"),
        (1, 0)
    );
    let (seq, continuation) = store
        .paused("alice", &turn)
        .await
        .expect("read")
        .expect("paused");
    assert_eq!((seq, continuation.as_str()), (3, "Y29udGludWF0aW9u"));
    // No lease: the lease sweep leaves it alone.
    assert!(store.expired_turns(10).await.expect("sweep").is_empty());

    // Not another owner's, not at another pause's seq.
    let theirs = store
        .take_paused(&take("mallory", &turn, "r2"))
        .await
        .expect("take");
    assert_eq!(theirs, pauses::Taken::NotPaused);
    let stale = store
        .take_paused(&pauses::TakePaused {
            at_seq: Some(2),
            ..take("alice", &turn, "r2")
        })
        .await
        .expect("take");
    assert_eq!(stale, pauses::Taken::NotPaused);

    // Two replicas at once: exactly one gets it.
    let (first, second) = (take("alice", &turn, "r1"), take("alice", &turn, "r2"));
    let (a, b) = tokio::join!(store.take_paused(&first), store.take_paused(&second));
    let taken = [a.expect("a"), b.expect("b")];
    assert_eq!(
        taken
            .iter()
            .filter(|t| matches!(t, pauses::Taken::Taken(_)))
            .count(),
        1,
        "{taken:?}"
    );
    assert_eq!(state_of(&store, &turn).await, TurnState::Running);
    assert_eq!(
        store
            .decisions_request_id("alice", &turn)
            .await
            .expect("read")
            .as_deref(),
        Some("decide-1")
    );

    // A pause that expired is taken only to be closed.
    let conversation = id();
    let turn = start(&store, "alice", &conversation, true, None).await;
    assert!(pause(&store, "alice", &conversation, &turn, EXPIRED).await);
    let expired = store.expired_pauses(10).await.expect("expired");
    assert_eq!(
        expired,
        vec![pauses::ExpiredPause {
            owner: "alice".into(),
            turn_id: turn.clone()
        }]
    );
    let late = store
        .take_paused(&take("alice", &turn, "r1"))
        .await
        .expect("take");
    assert_eq!(late, pauses::Taken::NotPaused);
    let closing = store
        .take_paused(&pauses::TakePaused {
            expired_too: true,
            ..take("alice", &turn, REPLICA)
        })
        .await
        .expect("take");
    assert!(matches!(closing, pauses::Taken::Taken(_)), "{closing:?}");
    // Ended, the continuation is cleared.
    assert!(finish(&store, "alice", &conversation, &turn, "closed").await);
    assert!(store.paused("alice", &turn).await.expect("read").is_none());
    let left: Option<String> = sqlx::query("SELECT continuation FROM turns WHERE id = $1")
        .bind(turn.as_str())
        .fetch_one(&store.pool)
        .await
        .expect("row")
        .try_get("continuation")
        .expect("column");
    assert_eq!(left, None);
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
    one_running_turn_per_conversation,
    retryable_failures_free_their_request_id,
    wire_log_leases_and_reaping,
    a_finished_turn_notifies_the_other_replicas,
    one_append_for_many_turns,
    an_append_of_many_turns_spans_statements,
    injected_write_faults_store_nothing,
    rows_from_before_scoped_owners_wait_for_their_issuer,
    users_and_tenants_have_limits,
    spent_tokens_are_kept_per_day,
    racing_admissions_respect_the_limit,
    admissions_outlive_deleted_conversations,
    stream_leases_count_open_streams,
    an_end_that_does_not_hold_its_turn_writes_nothing,
    tool_calls_are_fenced_by_the_lease,
    paused_turns_are_taken_back_once,
    decisions_and_ratings_are_the_owners_and_the_last_one_wins,
    a_conversation_sums_the_usage_its_turns_end_with,
    attachments_are_stored_in_chunks_read_by_their_owner_and_swept_when_abandoned,
    branches_keep_old_turns_and_history_follows_the_current_leaf,
);

/// Begins a turn whose parent is `parent` (a branch), finishes it with
/// `answer`, and returns its id.
async fn branch_turn(
    store: &Store,
    conversation: &str,
    parent: Option<&str>,
    text: &str,
    answer: &str,
) -> (String, bool) {
    let (turn, begun) = begin_with(
        store,
        "alice",
        conversation,
        false,
        None,
        &user_message(text),
        parent,
    )
    .await;
    let BeginTurn::Started { branched, .. } = begun else {
        panic!("{begun:?}");
    };
    assert!(finish(store, "alice", conversation, &turn, answer).await);
    (turn, branched)
}

/// A conversation written linearly (NULL parents) branches: the new turn
/// names its parent, history follows the current leaf up its branch only,
/// a switch moves the leaf (not while a turn runs), and another owner
/// sees no tree.
async fn branches_keep_old_turns_and_history_follows_the_current_leaf(store: Store) {
    let conversation = id();
    let first = start(&store, "alice", &conversation, true, None).await;
    assert!(finish(&store, "alice", &conversation, &first, "one").await);
    let (second, branched) = branch_turn(&store, &conversation, None, "two?", "two").await;
    assert!(
        !branched,
        "a conversation that never branched keeps NULL parents"
    );
    let (third, _) = branch_turn(&store, &conversation, None, "three?", "three").await;
    // Regenerate the second turn: a sibling under the first.
    let (again, branched) = branch_turn(
        &store,
        &conversation,
        Some(first.as_str()),
        "two?",
        "two again",
    )
    .await;
    assert!(branched);
    let summary = store
        .conversation("alice", &conversation)
        .await
        .expect("read")
        .expect("exists");
    assert_eq!(summary.current_leaf.as_deref(), Some(again.as_str()));
    // The next plain turn continues the new branch.
    let (fourth, branched) = branch_turn(&store, &conversation, None, "four?", "four").await;
    assert!(branched);
    let (turns, events) = store
        .branch_history("alice", &conversation, &fourth, 50)
        .await
        .expect("history");
    let ids: Vec<&str> = turns.iter().map(|t| t.id.as_str()).collect();
    assert_eq!(ids, [first.as_str(), again.as_str(), fourth.as_str()]);
    assert!(events.iter().all(|e| ids.contains(&e.turn_id.as_str())));
    assert!(events.windows(2).all(|w| w[0].seq < w[1].seq));
    // Bounded like the history: the last two turns of the branch.
    let (turns, _) = store
        .branch_history("alice", &conversation, &fourth, 2)
        .await
        .expect("history");
    assert_eq!(turns.len(), 2);
    assert_eq!(turns[0].id, again);
    // The old branch is intact: its leaf's history is first, second, third.
    let (turns, _) = store
        .branch_history("alice", &conversation, &third, 50)
        .await
        .expect("history");
    let ids: Vec<&str> = turns.iter().map(|t| t.id.as_str()).collect();
    assert_eq!(ids, [first.as_str(), second.as_str(), third.as_str()]);

    let tree = store.turn_tree("alice", &conversation).await.expect("tree");
    let position = tree.position(&second).expect("second");
    let siblings: Vec<&str> = tree
        .siblings(position)
        .iter()
        .map(|p| tree.turn(*p).id.as_str())
        .collect();
    assert_eq!(siblings, [second.as_str(), again.as_str()]);
    assert_eq!(tree.turn(tree.newest_leaf(position)).id, third);
    assert!(
        store
            .turn_tree("mallory", &conversation)
            .await
            .expect("tree")
            .current_leaf(None)
            .is_none()
    );
    assert!(
        store
            .branch_history("mallory", &conversation, &fourth, 50)
            .await
            .expect("history")
            .0
            .is_empty()
    );

    assert_eq!(
        store
            .switch_branch("alice", &conversation, &third)
            .await
            .expect("switch"),
        branches::Switched::Done
    );
    let (fifth, _) = branch_turn(&store, &conversation, None, "five?", "five").await;
    let (turns, _) = store
        .branch_history("alice", &conversation, &fifth, 50)
        .await
        .expect("history");
    assert_eq!(turns.len(), 4);
    assert_eq!(turns[2].id, third);
    // Search sees the current branch only: the regenerated answer is on
    // the other one now.
    let found = |word: &'static str| {
        let store = store.clone();
        async move {
            store
                .search(
                    "alice",
                    &[word.to_owned()],
                    &crate::store::search::ListFilter::default(),
                    10,
                    0,
                )
                .await
                .expect("search")
                .0
                .len()
        }
    };
    assert_eq!(found("again").await, 0);
    assert_eq!((found("three").await, found("five").await), (1, 1));
    assert_eq!(
        store
            .switch_branch("mallory", &conversation, &third)
            .await
            .expect("switch"),
        branches::Switched::NotFound
    );
    let running = start(&store, "alice", &conversation, false, None).await;
    assert_eq!(
        store
            .switch_branch("alice", &conversation, &third)
            .await
            .expect("switch"),
        branches::Switched::Busy(running)
    );
    let message = store
        .user_message("alice", &conversation, &again)
        .await
        .expect("read");
    assert!(matches!(message, Some(EventBody::UserMessage { text, .. }) if text == "two?"));
    assert!(
        store
            .user_message("mallory", &conversation, &again)
            .await
            .expect("read")
            .is_none()
    );
}

/// An upload's bytes round-trip through the backend's byte column; only a
/// finished upload is read, only by its owner; an abandoned one is swept;
/// deleting the conversation it was sent in deletes it.
async fn attachments_are_stored_in_chunks_read_by_their_owner_and_swept_when_abandoned(
    store: Store,
) {
    use super::attachments::{FinishedUpload, NewUpload};
    fn upload(id: &str) -> NewUpload<'_> {
        NewUpload {
            id,
            owner: "alice",
            name: "a.bin",
            media_type: "application/pdf",
            object_key: None,
        }
    }
    let file = format!("att_{}", id());
    let file = file.as_str();
    store.begin_upload(&upload(file)).await.expect("begin");
    let chunks: [Vec<u8>; 2] = [(0..=255).collect(), vec![0, 1, 2, 255]];
    for (seq, chunk) in chunks.iter().enumerate() {
        assert!(
            store
                .put_chunk(file, seq as u64, chunk.clone())
                .await
                .expect("put")
        );
    }
    assert_eq!(
        store.attachment("alice", file).await.expect("read"),
        None,
        "not yet"
    );
    let finished = store
        .finish_upload("alice", file, 260, "ab12", 0)
        .await
        .expect("finish");
    let FinishedUpload::Ready(stored) = finished else {
        panic!("{finished:?}");
    };
    assert_eq!((stored.size_bytes, stored.sha256.as_str()), (260, "ab12"));
    assert_eq!(store.attachment("bob", file).await.expect("read"), None);
    assert_eq!(
        store.attachment("alice", file).await.expect("read"),
        Some(stored)
    );
    for (seq, chunk) in chunks.iter().enumerate() {
        let read = store
            .attachment_chunk(file, seq as u64)
            .await
            .expect("chunk");
        assert_eq!(read.as_ref(), Some(chunk));
    }
    assert_eq!(store.attachment_chunk(file, 2).await.expect("end"), None);
    assert_eq!(store.attachment_bytes("alice").await.expect("bytes"), 260);

    // Over the quota at the end: deleted, chunks and all.
    let over = format!("att_{}", id());
    let over = over.as_str();
    store.begin_upload(&upload(over)).await.expect("begin");
    store.put_chunk(over, 0, vec![9; 100]).await.expect("put");
    assert_eq!(
        store
            .finish_upload("alice", over, 100, "cd", 300)
            .await
            .expect("finish"),
        FinishedUpload::OverQuota { limit: 300 }
    );
    assert_eq!(store.attachment_chunk(over, 0).await.expect("chunk"), None);

    // Abandoned: swept once older than the cut-off, and a chunk after it
    // finds its upload gone.
    let left = format!("att_{}", id());
    let left = left.as_str();
    store.begin_upload(&upload(left)).await.expect("begin");
    store.put_chunk(left, 0, vec![1; 10]).await.expect("put");
    assert_eq!(
        store.sweep_uploads(now_ms() - 60_000).await.expect("sweep"),
        0
    );
    assert_eq!(store.sweep_uploads(now_ms() + 1).await.expect("sweep"), 1);
    assert!(!store.put_chunk(left, 1, vec![1]).await.expect("put"));
    assert_eq!(store.uploads_in_progress().await.expect("count"), 0);

    // Finished but never sent: swept once older than the cut-off; one
    // sent with a message is not.
    let idle = format!("att_{}", id());
    let idle = idle.as_str();
    store.begin_upload(&upload(idle)).await.expect("begin");
    store.put_chunk(idle, 0, vec![2; 10]).await.expect("put");
    store
        .finish_upload("alice", idle, 10, "ef", 0)
        .await
        .expect("finish");
    assert_eq!(
        store
            .sweep_unattached(now_ms() - 60_000)
            .await
            .expect("sweep"),
        0
    );

    // Sent in a conversation: deleted with it.
    let conversation = id();
    let turn = start(&store, "alice", &conversation, true, None).await;
    assert!(finish(&store, "alice", &conversation, &turn, "done").await);
    sqlx::query("UPDATE attachments SET conversation_id = $1 WHERE id = $2")
        .bind(conversation.as_str())
        .bind(file)
        .execute(&store.pool)
        .await
        .expect("link");
    assert_eq!(
        store.sweep_unattached(now_ms() + 1).await.expect("sweep"),
        1,
        "the idle file alone"
    );
    assert_eq!(store.attachment("alice", idle).await.expect("read"), None);
    assert_eq!(store.attachment_chunk(idle, 0).await.expect("chunk"), None);
    assert!(
        store
            .attachment("alice", file)
            .await
            .expect("read")
            .is_some()
    );
    store.delete("alice", &conversation).await.expect("delete");
    assert_eq!(store.attachment("alice", file).await.expect("read"), None);
    assert_eq!(store.attachment_chunk(file, 0).await.expect("chunk"), None);
}

/// Each turn's end adds its usage, every count, to its conversation's
/// total; an end without usage adds nothing, and a listing reads it too.
async fn a_conversation_sums_the_usage_its_turns_end_with(store: Store) {
    let conversation = id();
    let used = |input, cached, written, output, reasoning, cost| model::StoredUsage {
        input_tokens: input,
        output_tokens: output,
        model_calls: 3,
        model: "m".into(),
        cached_input_tokens: cached,
        cache_write_tokens: written,
        reasoning_tokens: reasoning,
        cost_micros: cost,
        currency: if cost > 0 {
            "EUR".into()
        } else {
            String::new()
        },
    };
    for (n, usage) in [
        Some(used(6187, 4060, 2060, 155, 24, 11_469)),
        None,
        Some(used(6370, 6260, 40, 75, 6, 3_300)),
        // Unpriced: adds its tokens, leaves the currency.
        Some(used(10, 0, 0, 5, 0, 0)),
    ]
    .into_iter()
    .enumerate()
    {
        let turn = start(&store, "alice", &conversation, n == 0, None).await;
        let mut answer = assistant("done", TurnState::Completed);
        if let EventBody::AssistantMessage(message) = &mut answer {
            message.usage = usage;
        }
        let ended = store
            .finish_turn(FinishTurn {
                owner: "alice",
                conversation_id: &conversation,
                turn_id: &turn,
                replica: REPLICA,
                state: TurnState::Completed,
                retryable: false,
                wire: None,
                outcome: None,
                events: vec![answer],
                pause: None,
            })
            .await
            .expect("finish");
        assert!(ended);
    }
    let summary = store
        .conversation("alice", &conversation)
        .await
        .expect("read")
        .expect("alice's conversation");
    let total = model::StoredUsage {
        input_tokens: 6187 + 6370 + 10,
        output_tokens: 155 + 75 + 5,
        model_calls: 9,
        model: String::new(),
        cached_input_tokens: 4060 + 6260,
        cache_write_tokens: 2060 + 40,
        reasoning_tokens: 24 + 6,
        cost_micros: 11_469 + 3_300,
        currency: "EUR".into(),
    };
    assert_eq!((summary.turn_count, &summary.usage), (4, &total));
    let (listed, _) = store.list("alice", 10, None).await.expect("list");
    assert_eq!(listed[0].usage, total);
    assert_eq!(
        store
            .conversation("bob", &conversation)
            .await
            .expect("read"),
        None
    );
}

async fn decisions_and_ratings_are_the_owners_and_the_last_one_wins(store: Store) {
    let conversation = id();
    let turn = start(&store, "alice", &conversation, true, None).await;
    assert!(finish(&store, "alice", &conversation, &turn, "Here.").await);
    let decided = store
        .decided_turn("alice", &conversation, &turn)
        .await
        .expect("read")
        .expect("alice's turn");
    assert_eq!(decided.state, TurnState::Completed);
    assert_eq!(decided.page, "tables_list");
    assert_eq!(decided.trace_parent, None, "begun outside a traced call");
    for (owner, conversation) in [("mallory", conversation.as_str()), ("alice", "other")] {
        assert_eq!(
            store
                .decided_turn(owner, conversation, &turn)
                .await
                .expect("read"),
            None
        );
    }

    let dismissed = StoredDecision {
        decision: UserDecision::Dismissed,
        applied_data: None,
        note: String::new(),
        decided_at: 1,
    };
    let edited = StoredDecision {
        decision: UserDecision::Edited,
        applied_data: Some(serde_json::json!({"rows": [1]})),
        note: "one row".into(),
        decided_at: 2,
    };
    assert!(
        !store
            .record_payload_decision("mallory", &conversation, &turn, &dismissed)
            .await
            .expect("write"),
        "not mallory's"
    );
    for decision in [&dismissed, &edited] {
        assert!(
            store
                .record_payload_decision("alice", &conversation, &turn, decision)
                .await
                .expect("write")
        );
    }
    let rating = StoredFeedback {
        rating: -1,
        comment: "wrong table".into(),
        tags: vec!["inaccurate".into()],
        submitted_at: 3,
    };
    assert!(
        store
            .record_feedback("alice", &conversation, &turn, &rating)
            .await
            .expect("write")
    );
    let turns = store.turns("alice", &conversation).await.expect("turns");
    assert_eq!(
        turns[0].payload_decision.as_ref(),
        Some(&edited),
        "the last one wins"
    );
    assert_eq!(turns[0].feedback.as_ref(), Some(&rating));
    let recent = store
        .recent_turns("alice", &conversation, 1)
        .await
        .expect("recent");
    assert_eq!(recent, turns);
}

/// A second replica's store on the schema of a test PostgreSQL URL.
async fn replica_on(url: &str, options: StoreOptions) -> Store {
    Store::open(url, &options)
        .await
        .expect("open a second replica's store")
}

/// A connection of `store`'s pool left idle inside a transaction that
/// holds `turn`'s row lock: a replica frozen (SIGSTOP) between a write's
/// statement and its COMMIT.
async fn freeze_holding(store: &Store, turn: &str) -> sqlx::pool::PoolConnection<sqlx::Any> {
    let mut conn = store.pool.acquire().await.expect("a connection");
    sqlx::raw_sql("BEGIN")
        .execute(&mut *conn)
        .await
        .expect("begin");
    sqlx::query("UPDATE turns SET lease_until = lease_until WHERE id = $1")
        .bind(turn)
        .execute(&mut *conn)
        .await
        .expect("lock the turn's row");
    conn
}

/// Before the session limits, a replica frozen inside a transaction held
/// its turn's row, and a delete on another replica (which asks the turn
/// to stop) waited for it forever. Now the server ends the frozen session
/// after `idle_in_transaction_timeout`, and the waiting write goes through.
#[tokio::test]
async fn a_replica_frozen_inside_a_transaction_holds_no_row_for_long() {
    let Some((url, schema)) = test_postgres::fresh_schema(
        "store::tests::a_replica_frozen_inside_a_transaction_holds_no_row_for_long",
    )
    .await
    else {
        return;
    };
    let frozen = replica_on(
        &url,
        StoreOptions {
            idle_in_transaction_timeout: Duration::from_millis(300),
            ..StoreOptions::default()
        },
    )
    .await;
    let other = replica_on(&url, StoreOptions::default()).await;
    let conversation = id();
    let (turn, _) = begin_on(&frozen, &conversation, true, "a", 60_000, None).await;
    let held = freeze_holding(&frozen, &turn).await;
    // A bound against a hang of the test itself, far above the 300 ms.
    let asked = tokio::time::timeout(
        Duration::from_secs(60),
        other.request_cancel("alice", &turn),
    )
    .await
    .expect("the cancel did not wait for the frozen session")
    .expect("the cancel is stored");
    assert_eq!(asked.as_deref(), Some("a"));
    drop(held);
    frozen.close().await;
    other.close().await;
    test_postgres::drop_schema(&schema).await;
}

/// A row lock held longer than `lock_timeout` fails the waiting write as
/// the store being unavailable (retryable), instead of hanging it.
#[tokio::test]
async fn a_write_waits_for_a_row_lock_at_most_lock_timeout() {
    let Some((url, schema)) = test_postgres::fresh_schema(
        "store::tests::a_write_waits_for_a_row_lock_at_most_lock_timeout",
    )
    .await
    else {
        return;
    };
    let holder = replica_on(&url, StoreOptions::default()).await;
    let waiter = replica_on(
        &url,
        StoreOptions {
            lock_timeout: Duration::from_millis(300),
            ..StoreOptions::default()
        },
    )
    .await;
    let conversation = id();
    let (turn, _) = begin_on(&holder, &conversation, true, "a", 60_000, None).await;
    let mut held = freeze_holding(&holder, &turn).await;
    let refused = tokio::time::timeout(
        Duration::from_secs(60),
        waiter.request_cancel("alice", &turn),
    )
    .await
    .expect("the cancel gave up waiting for the lock")
    .expect_err("the row stays locked");
    assert!(
        refused.to_string().contains("lock timeout"),
        "a lock time-out: {refused}"
    );
    sqlx::raw_sql("ROLLBACK")
        .execute(&mut *held)
        .await
        .expect("roll back");
    drop(held);
    assert_eq!(
        waiter
            .request_cancel("alice", &turn)
            .await
            .expect("the lock is free")
            .as_deref(),
        Some("a")
    );
    holder.close().await;
    waiter.close().await;
    test_postgres::drop_schema(&schema).await;
}

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

#[tokio::test]
async fn a_database_that_cannot_be_opened_says_why() {
    let dir = tempfile::tempdir().expect("temp dir");
    let url = format!(
        "sqlite://{}?mode=rwc",
        dir.path().join("no-such-dir").join("parley.db").display()
    );
    let error = Store::open(&url, &StoreOptions::default())
        .await
        .expect_err("no directory to create the file in");
    let message = error.to_string();
    assert!(
        message.contains("unable to open database file"),
        "the real cause, not a pool time-out: {message}"
    );
}

mod early;
mod search;
