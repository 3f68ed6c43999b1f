//! What the event log's write costs the gateway: one `Store::append_wire`
//! of the next wire batch of each of 100 running turns (what a replica at
//! 100 streams writes every `turns.log_interval`), through the store's
//! group-commit writer on an SQLite file, as the gateway runs it. Every 22
//! appends (a mock turn's deltas) the turns end and 100 new ones begin,
//! outside the timing, so the tables grow as they do under load.
//!
//! `cargo bench -p chat-gateway --bench event_log`

use std::time::{Duration, Instant};

use chat_gateway::store::{
    AssistantMessage, BeginTurn, EventBody, FinishTurn, NewTurn, Store, StoreOptions, StoredPage,
    TurnBatch, TurnState, WireBatch,
};
use criterion::{Criterion, criterion_group, criterion_main};

/// Running turns, as at 100 streams.
const TURNS: usize = 100;
/// Appends per turn before it ends (a 20-chunk answer, its start and end).
const APPENDS_PER_TURN: u64 = 22;
/// One flush's events, encoded: a text delta or two (base64).
const EVENTS: &str = "CgQIARIAGhQKEnRoZSB0YWJsZSBoYXMgYSBzdGF0dXMgY29sdW1uLiA=";

fn user() -> EventBody {
    EventBody::UserMessage {
        text: "What should the tracker show next?".into(),
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

fn answer() -> EventBody {
    EventBody::AssistantMessage(AssistantMessage {
        text: "The table has a status column.".into(),
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

/// Begins [`TURNS`] turns, each in a new conversation; their ids.
async fn begin(store: &Store) -> Vec<(String, String)> {
    let message = user();
    let mut turns = Vec::with_capacity(TURNS);
    for _ in 0..TURNS {
        let conversation = uuid::Uuid::now_v7().to_string();
        let turn = uuid::Uuid::now_v7().to_string();
        let begun = store
            .begin_turn(&NewTurn {
                owner: "bench",
                conversation_id: &conversation,
                create: true,
                turn_id: &turn,
                replica: "bench",
                lease_ttl_ms: 60_000,
                stream_ahead: 32,
                request_id: None,
                parent: None,
                user_message: &message,
                title: "bench",
                admission: &Default::default(),
            })
            .await
            .expect("begin");
        assert!(matches!(begun, BeginTurn::Started { .. }), "{begun:?}");
        turns.push((conversation, turn));
    }
    turns
}

/// Ends the turns, their last batch after `last_seq`.
async fn finish(store: &Store, turns: &[(String, String)], last_seq: u64) {
    for (conversation, turn) in turns {
        let ended = store
            .finish_turn(FinishTurn {
                owner: "bench",
                conversation_id: conversation,
                turn_id: turn,
                replica: "bench",
                state: TurnState::Completed,
                retryable: false,
                outcome: None,
                events: vec![answer()],
                wire: Some(WireBatch {
                    first_seq: last_seq + 1,
                    last_seq: last_seq + 1,
                    events: EVENTS.into(),
                }),
                pause: None,
            })
            .await
            .expect("finish");
        assert!(ended);
    }
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
