//! [`Store::begin_turn_early`]: the decision to start a turn, told before
//! it commits where nothing but the commit can change it. The commit is
//! held back for real: another connection holds SQLite's write lock, so the
//! store's writer can read (decide) but not write until it is released.

use std::time::Duration;

use sqlx::Connection;
use tokio::sync::oneshot;

use super::*;

/// A connection of its own to the store's file holding the write lock.
async fn write_lock(dir: &tempfile::TempDir) -> sqlx::SqliteConnection {
    let url = format!("sqlite://{}", dir.path().join("parley.db").display());
    let mut conn = sqlx::SqliteConnection::connect(&url)
        .await
        .expect("connect to the store's file");
    sqlx::raw_sql("BEGIN IMMEDIATE")
        .execute(&mut conn)
        .await
        .expect("take the write lock");
    conn
}

/// Begins a turn of alice on a new conversation (with `request_id`) in
/// its own task; the turn's id, and the task.
fn begin_early(
    store: &Store,
    request_id: Option<&str>,
    admission: quota::Admission,
    told: oneshot::Sender<(u32, bool)>,
) -> (
    String,
    tokio::task::JoinHandle<Result<BeginTurn, StoreError>>,
) {
    let (store, turn, request_id) = (store.clone(), id(), request_id.map(str::to_owned));
    let turn_id = turn.clone();
    let task = tokio::spawn(async move {
        let message = user_message("hello there");
        store
            .begin_turn_early(
                &NewTurn {
                    owner: "alice",
                    conversation_id: &id(),
                    create: true,
                    turn_id: &turn_id,
                    replica: REPLICA,
                    lease_ttl_ms: lease(),
                    stream_ahead: 0,
                    request_id: request_id.as_deref(),
                    parent: None,
                    user_message: &message,
                    title: "hello there",
                    admission: &admission,
                },
                told,
            )
            .await
    });
    (turn, task)
}

#[tokio::test]
async fn a_turn_is_told_started_before_it_commits_and_committed_after() {
    let (store, dir) = sqlite_store().await;
    let mut lock = write_lock(&dir).await;
    let (told, started) = oneshot::channel();
    let (turn, begin) = begin_early(&store, None, quota::Admission::default(), told);
    let decided = tokio::time::timeout(Duration::from_secs(10), started)
        .await
        .expect("the decision comes while the write lock is held")
        .expect("told");
    assert_eq!(decided, (0, false));
    // Nothing of it is committed yet: the start waits for the lock.
    assert!(store.turn("alice", &turn).await.expect("read").is_none());
    assert!(!begin.is_finished());
    sqlx::raw_sql("ROLLBACK")
        .execute(&mut lock)
        .await
        .expect("release the write lock");
    let begun = begin.await.expect("join").expect("begin");
    assert_eq!(
        begun,
        BeginTurn::Started {
            turn_index: 0,
            branched: false
        }
    );
    assert!(store.turn("alice", &turn).await.expect("read").is_some());
}

#[tokio::test]
async fn a_start_that_cannot_commit_fails_after_it_was_told() {
    let (store, dir) = sqlite_store().await;
    // Held past SQLite's busy timeout (5 s): the commit fails.
    let _lock = write_lock(&dir).await;
    let (told, started) = oneshot::channel();
    let (turn, begin) = begin_early(&store, None, quota::Admission::default(), told);
    assert!(started.await.is_ok(), "told before the commit");
    let failed = begin.await.expect("join");
    assert!(failed.is_err(), "{failed:?}");
    assert!(store.turn("alice", &turn).await.expect("read").is_none());
}

#[tokio::test]
async fn a_turn_with_a_request_id_or_refused_by_a_limit_is_never_told() {
    let (store, _dir) = sqlite_store().await;
    // A request id: another call's may take it at the insert, with the
    // commit; the decision is not final before.
    let (told, started) = oneshot::channel();
    let (_, begin) = begin_early(&store, Some("req-1"), quota::Admission::default(), told);
    let begun = begin.await.expect("join").expect("begin");
    assert!(matches!(begun, BeginTurn::Started { .. }), "{begun:?}");
    assert!(started.await.is_err(), "a request id's start is not told");

    // A limit: one turn a minute, the second refused and never told.
    let one_a_minute = quota::Admission {
        user: quota::Quota {
            turns_per_minute: 1,
            ..quota::Quota::UNLIMITED
        },
        ..Default::default()
    };
    let (told, started) = oneshot::channel();
    let (_, first) = begin_early(&store, None, one_a_minute.clone(), told);
    assert!(matches!(
        first.await.expect("join").expect("begin"),
        BeginTurn::Started { .. }
    ));
    assert!(started.await.is_ok());
    let (told, started) = oneshot::channel();
    let (_, second) = begin_early(&store, None, one_a_minute, told);
    let refused = second.await.expect("join").expect("begin");
    assert!(matches!(refused, BeginTurn::OverQuota(_)), "{refused:?}");
    assert!(started.await.is_err(), "a refused turn is not told");
}

#[tokio::test]
async fn postgres_commits_before_it_tells() {
    const TEST: &str = "store::tests::early::postgres_commits_before_it_tells";
    let Some((store, schema)) = postgres_store(TEST).await else {
        return;
    };
    // Its inserts meet the unique indexes (another replica's running turn)
    // only as they run: it tells nothing early.
    let (told, started) = oneshot::channel();
    let (_, begin) = begin_early(&store, None, quota::Admission::default(), told);
    let begun = begin.await.expect("join").expect("begin");
    assert!(matches!(begun, BeginTurn::Started { .. }), "{begun:?}");
    assert!(started.await.is_err());
    drop_schema(store, &schema).await;
}
