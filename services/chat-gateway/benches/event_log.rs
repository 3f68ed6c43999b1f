//! What the event log's write costs the gateway: one `Store::append_wire`
//! of the next wire batch of each of 100 running turns (what a replica at
//! 100 streams writes every `turns.log_interval`), through the store's
//! group-commit writer on an SQLite file, as the gateway runs it. Every 22
//! appends (a mock turn's deltas) the turns end and 100 new ones begin,
//! outside the timing, so the tables grow as they do under load.
//!
//! `cargo bench -p chat-gateway --bench event_log`

use std::time::{Duration, Instant};

use chat_gateway::store::{Store, TurnBatch, WireBatch};
use criterion::{Criterion, criterion_group, criterion_main};

#[path = "store_fixture.rs"]
mod store_fixture;

/// Running turns, as at 100 streams.
const TURNS: usize = 100;
/// Appends per turn before it ends (a 20-chunk answer, its start and end).
const APPENDS_PER_TURN: u64 = 22;
/// One flush's events, encoded: a text delta or two (base64).
const EVENTS: &str = "CgQIARIAGhQKEnRoZSB0YWJsZSBoYXMgYSBzdGF0dXMgY29sdW1uLiA=";

/// Begins [`TURNS`] turns, each in a new conversation; their ids.
async fn begin(store: &Store) -> Vec<(String, String)> {
    let message = store_fixture::user("What should the tracker show next?".into());
    let mut turns = Vec::with_capacity(TURNS);
    for _ in 0..TURNS {
        let conversation = uuid::Uuid::now_v7().to_string();
        let turn = uuid::Uuid::now_v7().to_string();
        store_fixture::begin(store, &conversation, &turn, true, None, &message).await;
        turns.push((conversation, turn));
    }
    turns
}

/// Ends the turns, their last batch after `last_seq`.
async fn finish(store: &Store, turns: &[(String, String)], last_seq: u64) {
    for (conversation, turn) in turns {
        let answer = store_fixture::answer("The table has a status column.".into());
        let wire = WireBatch {
            first_seq: last_seq + 1,
            last_seq: last_seq + 1,
            events: EVENTS.into(),
        };
        store_fixture::finish(store, conversation, turn, answer, Some(wire)).await;
    }
}

fn bench(c: &mut Criterion) {
    let (runtime, store, _dir) = store_fixture::sqlite_store();
    let mut turns = runtime.block_on(begin(&store));
    let mut appended = 0_u64;
    c.bench_function("event_log/append_100_turns", |b| {
        b.iter_custom(|iters| {
            let mut spent = Duration::ZERO;
            for _ in 0..iters {
                if appended == APPENDS_PER_TURN {
                    runtime.block_on(finish(&store, &turns, appended));
                    turns = runtime.block_on(begin(&store));
                    appended = 0;
                }
                appended += 1;
                let batches = turns
                    .iter()
                    .map(|(_, turn)| TurnBatch {
                        turn_id: turn.clone(),
                        batch: WireBatch {
                            first_seq: appended,
                            last_seq: appended,
                            events: EVENTS.into(),
                        },
                    })
                    .collect();
                let started = Instant::now();
                let held = runtime
                    .block_on(store.append_wire("bench", batches))
                    .expect("append");
                spent += started.elapsed();
                assert!(held.iter().all(|held| *held));
            }
            spent
        })
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
