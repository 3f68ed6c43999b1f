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
    store::{EventBody, Store},
    turn::history::{FileWindow, rebuild_with},
};
use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};

#[path = "store_fixture.rs"]
mod store_fixture;

/// The gateway's defaults: 50 turns, 4 MiB.
const MAX_TURNS: u32 = 50;
const MAX_BYTES: usize = 4 * 1024 * 1024;

fn answer(n: usize) -> EventBody {
    store_fixture::answer(format!(
        "Answer {n}: {}",
        "the table has a status column. ".repeat(25)
    ))
}

/// Stores a turn (its parent `parent` when it starts a branch); its id.
async fn turn(store: &Store, conversation: &str, n: usize, parent: Option<&str>) -> String {
    let id = uuid::Uuid::now_v7().to_string();
    let message = store_fixture::user(format!("Question {n}: what should the tracker show next?"));
    store_fixture::begin(store, conversation, &id, n == 0, parent, &message).await;
    store_fixture::finish(store, conversation, &id, answer(n), None).await;
    id
}

fn bench(c: &mut Criterion) {
    let (runtime, store, _dir) = store_fixture::sqlite_store();
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
