//! What the store benches share (a module of `history` and `event_log`,
//! not a bench of its own): a store on a new SQLite file, as the gateway
//! opens it, and the messages they store.

use chat_gateway::store::{
    AssistantMessage, BeginTurn, EventBody, FinishTurn, NewTurn, Store, StoreOptions, StoredPage,
    TurnState, WireBatch,
};

/// A current-thread runtime and a store on a new SQLite file in a temp
/// dir (kept as long as the store is used).
pub fn sqlite_store() -> (tokio::runtime::Runtime, Store, tempfile::TempDir) {
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
    (runtime, store, dir)
}

/// A user's message on the example's `tables_list` page.
pub fn user(text: String) -> EventBody {
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

/// A completed answer of plain text.
pub fn answer(text: String) -> EventBody {
    EventBody::AssistantMessage(AssistantMessage {
        text,
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

/// A turn of `conversation` (made by it when `create`; after `parent`
/// when it starts a branch), begun for the bench's owner with `message`.
pub async fn begin(
    store: &Store,
    conversation: &str,
    turn: &str,
    create: bool,
    parent: Option<&str>,
    message: &EventBody,
) {
    let begun = store
        .begin_turn(&NewTurn {
            owner: "bench",
            conversation_id: conversation,
            create,
            turn_id: turn,
            replica: "bench",
            lease_ttl_ms: 60_000,
            stream_ahead: 32,
            request_id: None,
            parent,
            user_message: message,
            title: "bench",
            admission: &Default::default(),
        })
        .await
        .expect("begin");
    assert!(matches!(begun, BeginTurn::Started { .. }), "{begun:?}");
}

/// Ends a turn [`begin`] began, completed with `answer` (and its last wire
/// events, when the bench logs them).
pub async fn finish(
    store: &Store,
    conversation: &str,
    turn: &str,
    answer: EventBody,
    wire: Option<WireBatch>,
) {
    let ended = store
        .finish_turn(FinishTurn {
            owner: "bench",
            conversation_id: conversation,
            turn_id: turn,
            replica: "bench",
            state: TurnState::Completed,
            retryable: false,
            outcome: None,
            events: vec![answer],
            wire,
            pause: None,
        })
        .await
        .expect("finish");
    assert!(ended, "the turn was the bench's to end");
}
