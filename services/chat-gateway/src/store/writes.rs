//! The store's three writes as [`Write`]s: a turn's start, its end, and
//! deleting a conversation.
//!
//! Each owns its inputs, already encoded (JSON bodies are serialised by the
//! caller, not in the writer's queue), runs portable SQL filtered by owner,
//! and returns before writing anything when the conversation is not this
//! owner's: it may share its transaction with other writes (see
//! [`super::batch`]).

use futures::future::BoxFuture;
use sqlx::{AnyConnection, Row};

use super::{EventBody, StoreError, TurnState, batch::Write};

/// An event ready to insert.
#[derive(Debug, Clone)]
pub(crate) struct EncodedEvent {
    kind: &'static str,
    body: String,
}

impl EncodedEvent {
    pub(crate) fn new(body: &EventBody) -> Result<Self, StoreError> {
        Ok(Self {
            kind: body.kind(),
            body: serde_json::to_string(body).map_err(StoreError::Encode)?,
        })
    }
}

async fn insert_events(
    conn: &mut AnyConnection,
    conversation_id: &str,
    turn_id: &str,
    first_seq: i64,
    events: &[EncodedEvent],
    now: i64,
) -> Result<(), StoreError> {
    for (seq, event) in (first_seq..).zip(events) {
        sqlx::query(
            "INSERT INTO events (conversation_id, seq, turn_id, kind, body, created_at) \
             VALUES ($1, $2, $3, $4, $5, $6)",
        )
        .bind(conversation_id)
        .bind(seq)
        .bind(turn_id)
        .bind(event.kind)
        .bind(event.body.as_str())
        .bind(now)
        .execute(&mut *conn)
        .await?;
    }
    Ok(())
}

/// A new turn and its user message, creating the conversation when asked.
#[derive(Debug)]
pub(crate) struct BeginTurnWrite {
    pub(crate) owner: String,
    pub(crate) conversation_id: String,
    pub(crate) create: bool,
    pub(crate) turn_id: String,
    pub(crate) request_id: Option<String>,
    pub(crate) user_message: EncodedEvent,
    pub(crate) title: String,
    pub(crate) now: i64,
}

impl Write for BeginTurnWrite {
    /// The turn's 0-based position; `None` when the conversation is not
    /// this owner's (nothing written).
    type Output = Option<i64>;

    fn run<'c>(
        &'c self,
        conn: &'c mut AnyConnection,
    ) -> BoxFuture<'c, Result<Option<i64>, StoreError>> {
        Box::pin(async move {
            let (seq, turn_index) = if self.create {
                sqlx::query(
                    "INSERT INTO conversations (id, owner, title, created_at, updated_at, turn_count, last_seq) \
                     VALUES ($1, $2, $3, $4, $4, 1, 1)",
                )
                .bind(self.conversation_id.as_str())
                .bind(self.owner.as_str())
                .bind(self.title.as_str())
                .bind(self.now)
                .execute(&mut *conn)
                .await?;
                (1_i64, 0_i64)
            } else {
                let row = sqlx::query(
                    "UPDATE conversations SET last_seq = last_seq + 1, turn_count = turn_count + 1, updated_at = $3 \
                     WHERE id = $1 AND owner = $2 RETURNING last_seq, turn_count",
                )
                .bind(self.conversation_id.as_str())
                .bind(self.owner.as_str())
                .bind(self.now)
                .fetch_optional(&mut *conn)
                .await?;
                let Some(row) = row else { return Ok(None) };
                let turn_count: i64 = row.try_get("turn_count")?;
                (row.try_get("last_seq")?, turn_count - 1)
            };
            sqlx::query(
                "INSERT INTO turns (id, conversation_id, owner, request_id, turn_index, state, outcome, created_at, finished_at) \
                 VALUES ($1, $2, $3, $4, $5, $6, NULL, $7, NULL)",
            )
            .bind(self.turn_id.as_str())
            .bind(self.conversation_id.as_str())
            .bind(self.owner.as_str())
            .bind(self.request_id.as_deref())
            .bind(turn_index)
            .bind(TurnState::Running.as_str())
            .bind(self.now)
            .execute(&mut *conn)
            .await?;
            insert_events(
                conn,
                &self.conversation_id,
                &self.turn_id,
                seq,
                std::slice::from_ref(&self.user_message),
                self.now,
            )
            .await?;
            Ok(Some(turn_index))
        })
    }
}

/// A turn's events and how it ended.
#[derive(Debug)]
pub(crate) struct FinishTurnWrite {
    pub(crate) owner: String,
    pub(crate) conversation_id: String,
    pub(crate) turn_id: String,
    pub(crate) state: TurnState,
    pub(crate) outcome: Option<String>,
    pub(crate) events: Vec<EncodedEvent>,
    pub(crate) now: i64,
}

impl Write for FinishTurnWrite {
    /// False when the conversation is not this owner's any more (deleted
    /// meanwhile; nothing written).
    type Output = bool;

    fn run<'c>(&'c self, conn: &'c mut AnyConnection) -> BoxFuture<'c, Result<bool, StoreError>> {
        Box::pin(async move {
            let count = i64::try_from(self.events.len()).unwrap_or(i64::MAX);
            let row = sqlx::query(
                "UPDATE conversations SET last_seq = last_seq + $3, updated_at = $4 \
                 WHERE id = $1 AND owner = $2 RETURNING last_seq",
            )
            .bind(self.conversation_id.as_str())
            .bind(self.owner.as_str())
            .bind(count)
            .bind(self.now)
            .fetch_optional(&mut *conn)
            .await?;
            let Some(row) = row else { return Ok(false) };
            let last_seq: i64 = row.try_get("last_seq")?;
            insert_events(
                conn,
                &self.conversation_id,
                &self.turn_id,
                last_seq - count + 1,
                &self.events,
                self.now,
            )
            .await?;
            sqlx::query(
                "UPDATE turns SET state = $3, outcome = $4, finished_at = $5 \
                 WHERE id = $1 AND owner = $2",
            )
            .bind(self.turn_id.as_str())
            .bind(self.owner.as_str())
            .bind(self.state.as_str())
            .bind(self.outcome.as_deref())
            .bind(self.now)
            .execute(&mut *conn)
            .await?;
            Ok(true)
        })
    }
}

/// A conversation with its turns and events.
#[derive(Debug)]
pub(crate) struct DeleteWrite {
    pub(crate) owner: String,
    pub(crate) conversation_id: String,
}

impl Write for DeleteWrite {
    /// False when the conversation is not this owner's (nothing deleted).
    type Output = bool;

    fn run<'c>(&'c self, conn: &'c mut AnyConnection) -> BoxFuture<'c, Result<bool, StoreError>> {
        Box::pin(async move {
            let deleted = sqlx::query("DELETE FROM conversations WHERE id = $1 AND owner = $2")
                .bind(self.conversation_id.as_str())
                .bind(self.owner.as_str())
                .execute(&mut *conn)
                .await?
                .rows_affected();
            if deleted == 0 {
                return Ok(false);
            }
            // The foreign keys cascade; these also clean up where they are off.
            sqlx::query("DELETE FROM events WHERE conversation_id = $1")
                .bind(self.conversation_id.as_str())
                .execute(&mut *conn)
                .await?;
            sqlx::query("DELETE FROM turns WHERE conversation_id = $1")
                .bind(self.conversation_id.as_str())
                .execute(&mut *conn)
                .await?;
            Ok(true)
        })
    }
}
