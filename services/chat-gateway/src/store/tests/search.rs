//! Titles, metadata, flags and full-text search, on SQLite and PostgreSQL.

use std::collections::BTreeMap;

use super::*;
use crate::store::search::{Archived, ConversationUpdate, ListFilter, Updated, query_terms};

/// A conversation of `owner` titled `title` whose turns send `messages`
/// and get `answers` (one turn per pair); its id.
async fn conversation(store: &Store, owner: &str, title: &str, turns: &[(&str, &str)]) -> String {
    let conversation = id();
    for (index, (message, answer)) in turns.iter().enumerate() {
        let turn = id();
        let message = user_message(message);
        let begun = store
            .begin_turn(&NewTurn {
                owner,
                conversation_id: &conversation,
                create: index == 0,
                turn_id: &turn,
                replica: REPLICA,
                lease_ttl_ms: lease(),
                stream_ahead: 0,
                request_id: None,
                parent: None,
                user_message: &message,
                title,
                admission: &Default::default(),
            })
            .await
            .expect("begin turn");
        assert!(matches!(begun, BeginTurn::Started { .. }), "{begun:?}");
        assert!(
            store
                .finish_turn(FinishTurn {
                    owner,
                    conversation_id: &conversation,
                    turn_id: &turn,
                    replica: REPLICA,
                    state: TurnState::Completed,
                    retryable: false,
                    wire: None,
                    outcome: None,
                    events: vec![
                        EventBody::Reasoning {
                            text: "secret reasoning".into(),
                        },
                        assistant(answer, TurnState::Completed),
                    ],
                    pause: None,
                })
                .await
                .expect("finish turn")
        );
    }
    conversation
}

/// The ids a search of `owner` for `query` finds (one page of 50).
async fn found(store: &Store, owner: &str, query: &str, filter: &ListFilter) -> Vec<String> {
    let (page, _) = store
        .search(owner, &query_terms(query), filter, 50, 0)
        .await
        .expect("search");
    page.into_iter().map(|summary| summary.id).collect()
}

fn all() -> ListFilter {
    ListFilter {
        archived: Archived::Include,
        ..ListFilter::default()
    }
}

/// Search finds words of old messages, answers and titles, ranked, in
/// pages, only among the caller's own conversations, and forgets what is
/// deleted or renamed.
pub(super) async fn search_finds_old_messages_ranked_and_owned(store: Store) {
    let filter = ListFilter::default();
    let plain = conversation(
        &store,
        "alice",
        "Errands",
        &[
            (
                "Where is the zebra crossing near the station?",
                "Two blocks north.",
            ),
            (
                "And the bakery?",
                "Next to a Giraffe statue, and a zebra mural.",
            ),
            ("thanks", "You're welcome."),
        ],
    )
    .await;
    let dense = conversation(
        &store,
        "alice",
        "Zebra facts",
        &[("zebra zebra zebra", "Zebra stripes are unique.")],
    )
    .await;
    let bobs = conversation(&store, "bob", "Zebra", &[("zebra giraffe", "zebra")]).await;

    // A word of the first message of a conversation with later turns.
    assert_eq!(
        found(&store, "alice", "crossing", &filter).await,
        vec![plain.clone()]
    );
    // Case and punctuation do not matter; the denser match ranks first.
    assert_eq!(
        found(&store, "alice", "ZEBRA!", &filter).await,
        vec![dense.clone(), plain.clone()]
    );
    // The answer is searched; every word must be in one text.
    assert_eq!(
        found(&store, "alice", "giraffe", &filter).await,
        vec![plain.clone()]
    );
    assert_eq!(
        found(&store, "alice", "giraffe mural", &filter).await,
        vec![plain.clone()]
    );
    assert!(
        found(&store, "alice", "crossing giraffe", &filter)
            .await
            .is_empty()
    );
    // The title.
    assert_eq!(
        found(&store, "alice", "errands", &filter).await,
        vec![plain.clone()]
    );
    // Reasoning is not indexed, nor are words never written.
    assert!(found(&store, "alice", "secret", &filter).await.is_empty());
    assert!(found(&store, "alice", "okapi", &filter).await.is_empty());
    // Never another user's, whatever the words.
    for query in ["zebra", "giraffe", "zebra giraffe"] {
        let theirs = found(&store, "bob", query, &filter).await;
        assert_eq!(theirs, vec![bobs.clone()], "{query}");
    }
    assert!(
        !found(&store, "alice", "zebra", &filter)
            .await
            .contains(&bobs)
    );
    assert!(found(&store, "carol", "zebra", &filter).await.is_empty());

    // Pages: positions in the ranking.
    let terms = query_terms("zebra");
    let (first, next) = store
        .search("alice", &terms, &filter, 1, 0)
        .await
        .expect("page 1");
    assert_eq!((first.len(), next), (1, Some(1)));
    assert_eq!(first[0].id, dense);
    let (second, next) = store
        .search("alice", &terms, &filter, 1, 1)
        .await
        .expect("page 2");
    assert_eq!((second.len(), next), (1, None));
    assert_eq!(second[0].id, plain);

    // Combined with the filters.
    let pinned = ListFilter {
        pinned_only: true,
        ..ListFilter::default()
    };
    assert!(found(&store, "alice", "zebra", &pinned).await.is_empty());
    let pin = ConversationUpdate {
        pinned: Some(true),
        ..Default::default()
    };
    store
        .update_conversation("alice", &plain, pin)
        .await
        .expect("pin");
    assert_eq!(
        found(&store, "alice", "zebra", &pinned).await,
        vec![plain.clone()]
    );
    let archive = ConversationUpdate {
        archived: Some(true),
        ..Default::default()
    };
    store
        .update_conversation("alice", &dense, archive)
        .await
        .expect("archive");
    assert_eq!(
        found(&store, "alice", "zebra", &filter).await,
        vec![plain.clone()]
    );
    let archived = ListFilter {
        archived: Archived::Only,
        ..ListFilter::default()
    };
    assert_eq!(
        found(&store, "alice", "zebra", &archived).await,
        vec![dense.clone()]
    );
    assert_eq!(
        found(&store, "alice", "zebra", &all()).await,
        vec![dense.clone(), plain.clone()]
    );

    // A new title replaces the old one in the index.
    let rename = ConversationUpdate {
        title: Some("Penguin notes".into()),
        ..Default::default()
    };
    store
        .update_conversation("alice", &plain, rename)
        .await
        .expect("rename");
    assert_eq!(
        found(&store, "alice", "penguin", &filter).await,
        vec![plain.clone()]
    );
    assert!(found(&store, "alice", "errands", &filter).await.is_empty());

    // A title a model wrote (`retitle`) replaces the old one too, unless
    // the user renamed the conversation since.
    assert!(
        store
            .retitle("alice", &dense, "Zebra facts", "Striped horses")
            .await
            .expect("retitle")
    );
    assert_eq!(
        found(&store, "alice", "striped", &all()).await,
        vec![dense.clone()]
    );
    assert!(found(&store, "alice", "facts", &all()).await.is_empty());
    assert!(
        !store
            .retitle("alice", &dense, "Zebra facts", "Okapi")
            .await
            .expect("retitle")
    );
    assert!(found(&store, "alice", "okapi", &all()).await.is_empty());

    // Deleted: gone from the index.
    assert_eq!(
        store.delete("alice", &plain).await.expect("delete"),
        Deletion::Deleted
    );
    assert!(found(&store, "alice", "crossing", &all()).await.is_empty());
    assert_eq!(
        found(&store, "alice", "zebra", &all()).await,
        vec![dense.clone()]
    );
    let left: i64 =
        sqlx::query("SELECT count(*) AS n FROM search_texts WHERE conversation_id = $1")
            .bind(plain.as_str())
            .fetch_one(&store.pool)
            .await
            .expect("count")
            .try_get("n")
            .expect("n");
    assert_eq!(left, 0);
}

/// `update_conversation` changes what it is asked to, for the owner only;
/// the list filters by pinned, archived and metadata.
pub(super) async fn updates_and_list_filters(store: Store) {
    let first = conversation(&store, "alice", "First", &[("one", "1")]).await;
    let second = conversation(&store, "alice", "Second", &[("two", "2")]).await;
    let before = store
        .conversation("alice", &first)
        .await
        .expect("read")
        .expect("there");
    assert!(before.metadata.is_empty() && !before.pinned && !before.archived);

    // Another user's, or none: not found, and nothing changes.
    let title = ConversationUpdate {
        title: Some("Mine now".into()),
        ..Default::default()
    };
    for (owner, conversation) in [("bob", first.as_str()), ("alice", "no-such-conversation")] {
        assert_eq!(
            store
                .update_conversation(owner, conversation, title.clone())
                .await
                .expect("update"),
            Updated::NotFound
        );
    }
    assert_eq!(
        store
            .conversation("alice", &first)
            .await
            .expect("read")
            .expect("there")
            .title,
        "First"
    );

    let set = ConversationUpdate {
        title: Some("Renamed".into()),
        set_metadata: BTreeMap::from([
            ("project".to_owned(), "apollo".to_owned()),
            ("team.name".to_owned(), "blue team".to_owned()),
        ]),
        pinned: Some(true),
        ..Default::default()
    };
    let Updated::Done(after) = store
        .update_conversation("alice", &first, set)
        .await
        .expect("update")
    else {
        panic!("not updated");
    };
    assert_eq!(after.title, "Renamed");
    assert!(after.pinned && !after.archived);
    assert_eq!(after.metadata.len(), 2);
    // Its place in the list stays.
    assert_eq!(after.updated_at, before.updated_at);

    // Entries merge: set one, remove one, the rest stay.
    let merge = ConversationUpdate {
        set_metadata: BTreeMap::from([("stage".to_owned(), "done".to_owned())]),
        remove_metadata: vec!["team.name".into(), "never-set".into()],
        ..Default::default()
    };
    let Updated::Done(merged) = store
        .update_conversation("alice", &first, merge)
        .await
        .expect("merge")
    else {
        panic!("not merged");
    };
    assert_eq!(
        merged.metadata,
        BTreeMap::from([
            ("project".to_owned(), "apollo".to_owned()),
            ("stage".to_owned(), "done".to_owned()),
        ])
    );
    assert!(merged.pinned, "unset flags stay");
    assert_eq!(merged.title, "Renamed", "an unset title stays");

    // More than the limit once merged: refused whole.
    let crowd = ConversationUpdate {
        set_metadata: (0..15).map(|n| (format!("k{n}"), "v".to_owned())).collect(),
        pinned: Some(false),
        ..Default::default()
    };
    assert_eq!(
        store
            .update_conversation("alice", &first, crowd)
            .await
            .expect("update"),
        Updated::TooManyEntries(17)
    );
    let unchanged = store
        .conversation("alice", &first)
        .await
        .expect("read")
        .expect("there");
    assert_eq!(unchanged.metadata, merged.metadata);
    assert!(unchanged.pinned);

    let ids = |page: Vec<ConversationSummary>| page.into_iter().map(|c| c.id).collect::<Vec<_>>();
    let list = |filter: ListFilter| {
        let store = store.clone();
        async move {
            ids(store
                .list_filtered("alice", &filter, 50, None)
                .await
                .expect("list")
                .0)
        }
    };
    assert_eq!(
        list(ListFilter::default()).await,
        vec![second.clone(), first.clone()]
    );
    let pinned = ListFilter {
        pinned_only: true,
        ..ListFilter::default()
    };
    assert_eq!(list(pinned).await, vec![first.clone()]);
    let by_project = |value: &str| ListFilter {
        metadata: BTreeMap::from([("project".to_owned(), value.to_owned())]),
        ..ListFilter::default()
    };
    assert_eq!(list(by_project("apollo")).await, vec![first.clone()]);
    assert!(list(by_project("gemini")).await.is_empty());
    let both = ListFilter {
        metadata: BTreeMap::from([
            ("project".to_owned(), "apollo".to_owned()),
            ("stage".to_owned(), "draft".to_owned()),
        ]),
        ..ListFilter::default()
    };
    assert!(list(both).await.is_empty(), "every entry must match");
    // Bob's filters never reach Alice's conversations.
    assert!(
        store
            .list_filtered("bob", &by_project("apollo"), 50, None)
            .await
            .expect("list")
            .0
            .is_empty()
    );

    // Archived: left out by default, listed alone or with the rest.
    let archive = ConversationUpdate {
        archived: Some(true),
        ..Default::default()
    };
    store
        .update_conversation("alice", &second, archive)
        .await
        .expect("archive");
    assert_eq!(list(ListFilter::default()).await, vec![first.clone()]);
    assert_eq!(
        store.list("alice", 50, None).await.expect("list").0.len(),
        1,
        "the plain list leaves archived ones out too"
    );
    let only = ListFilter {
        archived: Archived::Only,
        ..ListFilter::default()
    };
    assert_eq!(list(only).await, vec![second.clone()]);
    assert_eq!(list(all()).await, vec![second.clone(), first.clone()]);
    // Pages of a filtered list.
    let (page, next) = store
        .list_filtered("alice", &all(), 1, None)
        .await
        .expect("page 1");
    assert_eq!(ids(page), vec![second.clone()]);
    let (page, next) = store
        .list_filtered("alice", &all(), 1, next.as_ref())
        .await
        .expect("page 2");
    assert_eq!((ids(page), next), (vec![first.clone()], None));
}

/// A database an older gateway wrote (migrations up to 0016, rows as it
/// stored them) is indexed by migration 0018: its conversations are found
/// by their old messages, answers and titles, by their owner only.
pub(super) async fn migration_indexes_what_was_stored_before(url: &str) {
    sqlx::any::install_default_drivers();
    let backend = Backend::from_url(url).expect("backend");
    let pool = sqlx::AnyPool::connect(url).await.expect("connect");
    migrator_until(backend, 16)
        .run(&pool)
        .await
        .expect("migrate to 0016");
    let conversation = id();
    let turn = id();
    sqlx::query(
        "INSERT INTO conversations (id, owner, title, created_at, updated_at, turn_count, last_seq) \
         VALUES ($1, 'dev  alice', 'Quarterly report', 1, 2, 1, 4)",
    )
    .bind(conversation.as_str())
    .execute(&pool)
    .await
    .expect("conversation");
    let events = [
        user_message("Please summarise the aardvark census"),
        EventBody::Reasoning {
            text: "pangolin".into(),
        },
        assistant(
            "The census counted 12 aardvarks and one marmot.",
            TurnState::Completed,
        ),
    ];
    for (seq, event) in (1_i64..).zip(&events) {
        sqlx::query(
            "INSERT INTO events (conversation_id, seq, turn_id, kind, body, created_at) \
             VALUES ($1, $2, $3, $4, $5, 1)",
        )
        .bind(conversation.as_str())
        .bind(seq)
        .bind(turn.as_str())
        .bind(event.kind())
        .bind(serde_json::to_string(event).expect("json"))
        .execute(&pool)
        .await
        .expect("event");
    }
    pool.close().await;

    let store = Store::open(url, &StoreOptions::default())
        .await
        .expect("migrate to now");
    let filter = ListFilter::default();
    for query in ["aardvark", "marmot", "quarterly"] {
        assert_eq!(
            found(&store, "dev  alice", query, &filter).await,
            vec![conversation.clone()],
            "{query}"
        );
    }
    assert!(
        found(&store, "dev  alice", "pangolin", &filter)
            .await
            .is_empty()
    );
    assert!(
        found(&store, "dev  bob", "aardvark", &filter)
            .await
            .is_empty()
    );
    let listed = store.list("dev  alice", 10, None).await.expect("list").0;
    assert_eq!(listed.len(), 1);
    assert!(listed[0].metadata.is_empty() && !listed[0].pinned && !listed[0].archived);
    // New turns are indexed as they are written, beside the old ones.
    let (_later, begun) = super::begin_with(
        &store,
        "dev  alice",
        &conversation,
        false,
        None,
        &user_message("and the okapi census?"),
        None,
    )
    .await;
    assert!(matches!(begun, BeginTurn::Started { .. }), "{begun:?}");
    assert_eq!(
        found(&store, "dev  alice", "okapi census", &filter).await,
        vec![conversation.clone()]
    );
    store.close().await;
}

on_both_backends!(
    search_finds_old_messages_ranked_and_owned,
    updates_and_list_filters
);

#[tokio::test]
async fn sqlite_migration_indexes_what_was_stored_before() {
    let dir = tempfile::tempdir().expect("temp dir");
    let url = format!("sqlite://{}?mode=rwc", dir.path().join("old.db").display());
    migration_indexes_what_was_stored_before(&url).await;
}

#[tokio::test]
async fn postgres_migration_indexes_what_was_stored_before() {
    let Some((url, schema)) =
        test_postgres::fresh_schema("store::tests::search::postgres_migration").await
    else {
        return;
    };
    migration_indexes_what_was_stored_before(&url).await;
    test_postgres::drop_schema(&schema).await;
}

/// The search plan on SQLite reads the FTS5 index, not every text.
#[tokio::test]
async fn sqlite_search_uses_the_index() {
    let (store, _dir) = sqlite_store().await;
    conversation(&store, "alice", "t", &[("zebra", "z")]).await;
    let rows = sqlx::query(
        "EXPLAIN QUERY PLAN SELECT s.conversation_id FROM search_index i \
         JOIN search_texts s ON s.id = i.rowid WHERE search_index MATCH '\"zebra\"'",
    )
    .fetch_all(&store.pool)
    .await
    .expect("plan");
    let plan: Vec<String> = rows
        .iter()
        .map(|row| row.try_get::<String, _>("detail").expect("detail"))
        .collect();
    assert!(
        plan.iter().any(|step| step.contains("VIRTUAL TABLE INDEX")),
        "{plan:?}"
    );
}

/// What indexing adds to a turn's two writes (`begin_turn`, `finish_turn`
/// with an answer), measured: rounds of turns alternate between the
/// index on and a trigger that drops every `search_texts` row before it is
/// written (the statement still runs: what is measured is the row and its
/// index entries). Prints the median µs per write of each; run with
/// `PARLEY_MEASURE=1` and `--nocapture` (a build's optimisation level matters: the dev
/// profile compiles SQLite at -O0, so its numbers are an upper bound).
async fn index_write_cost(store: Store, backend: &str) {
    let skip_on: &[&str] = if store.backend() == Backend::Sqlite {
        &[
            "CREATE TRIGGER search_texts_skip BEFORE INSERT ON search_texts \
           BEGIN SELECT RAISE(IGNORE); END",
        ]
    } else {
        &[
            "CREATE OR REPLACE FUNCTION search_texts_skip() RETURNS trigger LANGUAGE plpgsql \
             AS $$ BEGIN RETURN NULL; END $$",
            "CREATE TRIGGER search_texts_skip BEFORE INSERT ON search_texts \
             FOR EACH ROW EXECUTE FUNCTION search_texts_skip()",
        ]
    };
    let skip_off = if store.backend() == Backend::Sqlite {
        "DROP TRIGGER search_texts_skip"
    } else {
        "DROP TRIGGER search_texts_skip ON search_texts"
    };
    let message = "Could you compare the quarterly revenue of the northern and southern \
                   regions, and tell me which product lines grew fastest since January? \
                   Please keep it short."
        .to_owned();
    let answer = "The northern region grew 12 % over the quarter, led by garden furniture \
                  and outdoor lighting; the southern region grew 4 %, mostly from kitchen \
                  appliances. "
        .repeat(8);
    // One connection makes and drops the trigger: another one's SQLite
    // schema cache could still hold it.
    let mut ddl = store.pool.acquire().await.expect("connection");
    // Per arm (indexed, not): every begin's and finish's time.
    let mut samples: [(Vec<f64>, Vec<f64>); 2] = Default::default();
    let (rounds, turns) = if full_size() { (60, 10) } else { (2, 3) };
    let mut conversations = [id(), id()];
    for round in 0..rounds {
        for (indexed, conversation) in [true, false].into_iter().zip(conversations.iter_mut()) {
            if !indexed {
                for statement in skip_on {
                    sqlx::query(sqlx::AssertSqlSafe(*statement))
                        .persistent(false)
                        .execute(&mut *ddl)
                        .await
                        .expect("skip");
                }
            }
            for n in 0..turns {
                let started = std::time::Instant::now();
                let (turn, begun) = super::begin_with(
                    &store,
                    "alice",
                    conversation,
                    round == 0 && n == 0,
                    None,
                    &user_message(&message),
                    None,
                )
                .await;
                let begin = started.elapsed();
                assert!(matches!(begun, BeginTurn::Started { .. }), "{begun:?}");
                let started = std::time::Instant::now();
                assert!(
                    store
                        .finish_turn(FinishTurn {
                            owner: "alice",
                            conversation_id: conversation,
                            turn_id: &turn,
                            replica: REPLICA,
                            state: TurnState::Completed,
                            retryable: false,
                            wire: None,
                            outcome: None,
                            events: vec![assistant(&answer, TurnState::Completed)],
                            pause: None,
                        })
                        .await
                        .expect("finish")
                );
                let arm = &mut samples[usize::from(!indexed)];
                arm.0.push(begin.as_secs_f64() * 1e6);
                arm.1.push(started.elapsed().as_secs_f64() * 1e6);
            }
            if !indexed {
                sqlx::query(sqlx::AssertSqlSafe(skip_off))
                    .persistent(false)
                    .execute(&mut *ddl)
                    .await
                    .expect("unskip");
            }
        }
    }
    drop(ddl);
    let median = |values: &mut Vec<f64>| {
        values.sort_by(f64::total_cmp);
        values[values.len() / 2]
    };
    let [
        (mut indexed_begin, mut indexed_finish),
        (mut plain_begin, mut plain_finish),
    ] = samples;
    let (ib, pb) = (median(&mut indexed_begin), median(&mut plain_begin));
    let (ifin, pfin) = (median(&mut indexed_finish), median(&mut plain_finish));
    println!(
        "{backend} (medians): begin_turn {ib:.0} µs indexed vs {pb:.0} µs not ({:+.0} µs); \
         finish_turn {ifin:.0} µs vs {pfin:.0} µs ({:+.0} µs); {} turns each",
        ib - pb,
        ifin - pfin,
        rounds * turns
    );
}

/// Runs at a small size with the other tests (its code and checks); with
/// `PARLEY_MEASURE=1` and `--nocapture`, at the size its figures are for.
#[tokio::test]
async fn measure_index_write_cost() {
    let (store, _dir) = sqlite_store().await;
    index_write_cost(store, "sqlite").await;
    if let Some((store, schema)) = postgres_store("store::tests::search::measure").await {
        index_write_cost(store.clone(), "postgres").await;
        drop_schema(store, &schema).await;
    }
}

/// PostgreSQL can answer a search's match from the GIN index (the planner
/// picks it once the table is large; here sequential scans are turned off
/// to see that it can).
#[tokio::test]
async fn postgres_search_can_use_the_gin_index() {
    let Some((store, schema)) = postgres_store("store::tests::search::postgres_gin").await else {
        return;
    };
    conversation(&store, "alice", "t", &[("zebra", "z")]).await;
    let mut conn = store.pool.acquire().await.expect("connection");
    sqlx::query("SET enable_seqscan = off")
        .execute(&mut *conn)
        .await
        .expect("set");
    let rows = sqlx::query(
        "EXPLAIN SELECT s.conversation_id, ts_rank(s.document, q.query) \
         FROM search_texts s, plainto_tsquery('simple', 'zebra') AS q (query) \
         WHERE s.document @@ q.query",
    )
    .fetch_all(&mut *conn)
    .await
    .expect("plan");
    let plan: Vec<String> = rows
        .iter()
        .map(|row| row.try_get::<String, _>(0).expect("line"))
        .collect();
    assert!(
        plan.iter()
            .any(|line| line.contains("search_texts_document")),
        "{plan:#?}"
    );
    drop(conn);
    drop_schema(store, &schema).await;
}

/// Whether a measurement runs at the size its figures are for
/// (`PARLEY_MEASURE=1`) rather than the small one every run of the tests
/// uses.
fn full_size() -> bool {
    std::env::var_os("PARLEY_MEASURE").is_some()
}

/// What a search costs with many users' texts matching: `users` users with
/// `conversations` conversations of `texts` texts each, every text holding
/// the common word; one user's searches for it (all their conversations
/// match) and for a rare word. Prints the median ms of 5.
async fn search_cost(store: Store, backend: &str) {
    let (users, conversations, texts): (u32, u32, u32) = if full_size() {
        (50, 200, 5)
    } else {
        (3, 10, 2)
    };
    let mut tx = store.pool.begin().await.expect("begin");
    for user in 0..users {
        for n in 0..conversations {
            let conversation = format!("c-{user}-{n}");
            sqlx::query(
                "INSERT INTO conversations (id, owner, title, created_at, updated_at, turn_count, last_seq) \
                 VALUES ($1, $2, 'Monthly report', $3, $3, 0, 0)",
            )
            .bind(conversation.as_str())
            .bind(format!("user-{user}"))
            .bind(i64::from(n))
            .execute(&mut *tx)
            .await
            .expect("conversation");
            for t in 0..texts {
                sqlx::query(
                    "INSERT INTO search_texts (conversation_id, turn_id, body) VALUES ($1, $2, $3)",
                )
                .bind(conversation.as_str())
                .bind(format!("t-{user}-{n}-{t}"))
                .bind(format!(
                    "Please compare the quarterly report numbers for region {t}, item {n}{}",
                    if n == 7 { " and the aardvark" } else { "" }
                ))
                .execute(&mut *tx)
                .await
                .expect("text");
            }
        }
    }
    tx.commit().await.expect("commit");
    for (query, expected) in [("report", conversations.min(50) as usize), ("aardvark", 1)] {
        let terms = query_terms(query);
        let mut times = Vec::new();
        for _ in 0..5 {
            let started = std::time::Instant::now();
            let (page, _) = store
                .search("user-1", &terms, &ListFilter::default(), 50, 0)
                .await
                .expect("search");
            times.push(started.elapsed().as_secs_f64() * 1e3);
            assert_eq!(page.len(), expected);
        }
        times.sort_by(f64::total_cmp);
        println!(
            "{backend}: search for `{query}` among {} texts of {users} users: {:.1} ms (median of 5)",
            users * conversations * texts,
            times[2]
        );
    }
}

/// Runs at a small size with the other tests (its code and checks); with
/// `PARLEY_MEASURE=1` and `--nocapture`, at the size its figures are for.
#[tokio::test]
async fn measure_search_cost() {
    let (store, _dir) = sqlite_store().await;
    search_cost(store, "sqlite").await;
    if let Some((store, schema)) = postgres_store("store::tests::search::measure_search").await {
        search_cost(store.clone(), "postgres").await;
        drop_schema(store, &schema).await;
    }
}
