//! What assembling a turn's history costs the gateway, per turn: the
//! store's reads of the latest turns and their events, then the history
//! rebuilt from them (`turn/flow.rs` `earlier_turns`), on SQLite, for a
//! conversation of 50 and of 500 stored turns. Two paths: a conversation
//! that never branched (turns read by position) and one that has (read up
//! the branch by a recursive query, migration 0017).
//!
//! `cargo bench -p chat-gateway --bench history`

use std::hint::black_box;

use chat_gateway::{
    store::{
        AssistantMessage, BeginTurn, EventBody, FinishTurn, NewTurn, Store, StoreOptions,
        StoredPage, TurnState,
    },
    turn::history::{FileWindow, rebuild_with},
};
use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};

/// The gateway's defaults: 50 turns, 4 MiB.
const MAX_TURNS: u32 = 50;
const MAX_BYTES: usize = 4 * 1024 * 1024;

fn user(text: String) -> EventBody {
    EventBody::UserMessage {
        text,
        page: StoredPage {
            page: "tables_list".into(),
            ..Default::default()
        },
        response_schema: None,
        request_id: None,
        action: None,
        attachments: Vec::new(),
    }
}

fn answer(n: usize) -> EventBody {
    EventBody::AssistantMessage(AssistantMessage {
        text: format!(
            "Answer {n}: {}",
            "the table has a status column. ".repeat(25)
        ),
        payload: None,
        suggested_values: vec![],
        suggested_actions: vec![],
        structured: None,
        usage: None,
        state: TurnState::Completed,
        stop_reason: "end_turn".into(),
        error: None,
    })
}

/// Stores a turn (its parent `parent` when it starts a branch); its id.
async fn turn(store: &Store, conversation: &str, n: usize, parent: Option<&str>) -> String {
    let id = uuid::Uuid::now_v7().to_string();
    let message = user(format!("Question {n}: what should the tracker show next?"));
    let begun = store
        .begin_turn(&NewTurn {
            owner: "bench",
            conversation_id: conversation,
            create: n == 0,
            turn_id: &id,
            replica: "bench",
            lease_ttl_ms: 60_000,
            stream_ahead: 0,
            request_id: None,
            parent,
            user_message: &message,
            title: "bench",
            admission: &Default::default(),
        })
        .await
        .expect("begin");
    assert!(matches!(begun, BeginTurn::Started { .. }), "{begun:?}");
    store
        .finish_turn(FinishTurn {
            owner: "bench",
            conversation_id: conversation,
            turn_id: &id,
            replica: "bench",
            state: TurnState::Completed,
            retryable: false,
            outcome: None,
            events: vec![answer(n)],
            wire: None,
            pause: None,
        })
        .await
        .expect("finish");
    id
}

fn bench(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let dir = tempfile::tempdir().expect("temp dir");
    let url = format!(
        "sqlite://{}?mode=rwc",
        dir.path().join("bench.db").display()
    );
    let store = runtime
        .block_on(Store::open(&url, &StoreOptions::default()))
        .expect("store");
    let window = FileWindow {
        turns: 2,
        max_bytes: 24 * 1024 * 1024,
    };
    let mut group = c.benchmark_group("history");
    for stored in [50_usize, 500] {
        // A conversation that never branched, and one whose last turn was
        // regenerated (the same length, read up its branch).
        let (linear, branched, leaf) = runtime.block_on(async {
            let linear = uuid::Uuid::now_v7().to_string();
            let branched = uuid::Uuid::now_v7().to_string();
            let mut last = String::new();
            let mut before_last = String::new();
            for n in 0..stored {
                turn(&store, &linear, n, None).await;
                before_last = std::mem::replace(&mut last, turn(&store, &branched, n, None).await);
            }
            let leaf = turn(&store, &branched, stored, Some(&before_last)).await;
            (linear, branched, leaf)
        });
        group.bench_with_input(BenchmarkId::new("linear", stored), &stored, |b, _| {
            b.iter(|| {
                runtime.block_on(async {
                    let events = store
                        .recent_events("bench", &linear, MAX_TURNS)
                        .await
                        .expect("events");
                    let turns = store
                        .recent_turns("bench", &linear, MAX_TURNS)
                        .await
                        .expect("turns");
                    black_box(rebuild_with(&events, &turns, MAX_BYTES, window))
                })
            })
        });
        group.bench_with_input(BenchmarkId::new("branched", stored), &stored, |b, _| {
            b.iter(|| {
                runtime.block_on(async {
                    let (turns, events) = store
                        .branch_history("bench", &branched, &leaf, MAX_TURNS)
                        .await
                        .expect("branch");
                    black_box(rebuild_with(&events, &turns, MAX_BYTES, window))
                })
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
