//! The sweep: any replica ends a running turn whose lease expired
//! ([`Store::reap`]). In one transaction it reads what the turn stored,
//! lets the caller build the turn's ending from it (the store knows no wire
//! types), and writes that ending only if the condition still holds, so
//! replicas sweeping at once end a turn once.

use std::sync::Arc;

use futures::future::BoxFuture;
use sqlx::{AnyConnection, AssertSqlSafe, Row};

use super::{
    EventBody, Store, StoreError, TurnState, WireBatch,
    batch::Write,
    group::on_store_clock,
    now_ms,
    wire::{to_u64, wire_batches},
    writes::{EncodedEvent, FinishTurnWrite, usage_of},
};

/// What the sweep knows of a turn it ends.
#[derive(Debug, Clone)]
pub struct ReapInput {
    /// The turn's owner.
    pub owner: String,
    /// Its conversation.
    pub conversation_id: String,
    /// The turn.
    pub turn_id: String,
    /// The seq of its last stored wire event.
    pub last_event_seq: u64,
    /// How many events its replica could stream ahead of the stored ones:
    /// clients may have seen seqs up to `last_event_seq + stream_ahead`.
    pub stream_ahead: u64,
    /// Its stored wire batches, in order.
    pub wire: Vec<WireBatch>,
}

/// How a swept turn ends: what [`Store::reap`] writes.
#[derive(Debug, Clone)]
pub struct Reaped {
    /// The final state (failed, as a rule).
    pub state: TurnState,
    /// Whether a retry of its request id runs again.
    pub retryable: bool,
    /// The wire outcome (see [`super::FinishTurn::outcome`]).
    pub outcome: Option<String>,
    /// The conversation events (partial answer, tools) to append.
    pub events: Vec<EventBody>,
    /// The final wire events (`error`, `complete`).
    pub wire: WireBatch,
}

/// Builds a swept turn's ending from what it stored.
pub type Finalize = Arc<dyn Fn(&ReapInput) -> Reaped + Send + Sync>;

/// Which running turns a reap may end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReapIf {
    /// Only when its lease has expired (any replica's sweep).
    LeaseExpired,
    /// Only when this replica holds it (its own turn whose task ended
    /// without storing the end, for example on a store failure).
    HeldBy(String),
    /// Whatever its lease, unless this replica holds it: at start-up on
    /// SQLite, whose file belongs to one process, every other replica is
    /// gone.
    NotHeldBy(String),
}

struct Reap {
    turn_id: String,
    condition: ReapIf,
    finalize: Finalize,
    notify: bool,
    now: i64,
}

impl Write for Reap {
    /// Whether this reap ended the turn.
    type Output = bool;

    fn run<'c>(&'c self, conn: &'c mut AnyConnection) -> BoxFuture<'c, Result<bool, StoreError>> {
        Box::pin(async move {
            let sql = on_store_clock(
                conn,
                "SELECT owner, conversation_id, replica, last_event_seq, stream_ahead, \
                 CAST(CASE WHEN lease_until IS NULL OR lease_until < {now} THEN 1 ELSE 0 END AS BIGINT) AS expired \
                 FROM turns WHERE id = $1 AND state = 'running'",
            );
            let row = sqlx::query(AssertSqlSafe(sql))
                .bind(self.turn_id.as_str())
                .fetch_optional(&mut *conn)
                .await?;
            let Some(row) = row else { return Ok(false) };
            let replica: Option<String> = row.try_get("replica")?;
            let expired = row.try_get::<i64, _>("expired")? != 0;
            let reapable = match &self.condition {
                ReapIf::LeaseExpired => expired,
                ReapIf::HeldBy(me) => replica.as_deref() == Some(me.as_str()),
                ReapIf::NotHeldBy(me) => replica.as_deref() != Some(me.as_str()),
            };
            if !reapable {
                return Ok(false);
            }
            let wire = wire_batches(conn, &self.turn_id, 0).await?;
            // A running turn's row keeps the seq its last pause wrote (0
            // before any): the batches the event log added since hold the
            // rest (the prune keeps them while it runs).
            let stored = to_u64(row.try_get("last_event_seq")?);
            let input = ReapInput {
                owner: row.try_get("owner")?,
                conversation_id: row.try_get("conversation_id")?,
                turn_id: self.turn_id.clone(),
                last_event_seq: wire
                    .last()
                    .map_or(stored, |batch| batch.last_seq.max(stored)),
                stream_ahead: to_u64(row.try_get("stream_ahead")?),
                wire,
            };
            let reaped = (self.finalize)(&input);
            let finish = FinishTurnWrite {
                owner: input.owner,
                conversation_id: input.conversation_id,
                turn_id: input.turn_id,
                // The condition again, in the update: a replica that renews
                // its lease meanwhile keeps its turn.
                replica: match &self.condition {
                    ReapIf::LeaseExpired => None,
                    ReapIf::HeldBy(me) => Some(me.clone()),
                    ReapIf::NotHeldBy(_) => replica,
                },
                state: reaped.state,
                retryable: reaped.retryable,
                outcome: reaped.outcome,
                usage: usage_of(&reaped.events),
                search_text: reaped.events.iter().find_map(super::search::indexed_text),
                events: reaped
                    .events
                    .iter()
                    .map(EncodedEvent::new)
                    .collect::<Result<_, _>>()?,
                wire: Some(reaped.wire),
                pause: None,
                notify: self.notify,
                now: self.now,
            };
            finish.run(conn).await
        })
    }
}

impl Store {
    /// At most `limit` running turns whose lease expired (on the store's
    /// clock), the longest expired first. Maintenance only: not filtered
    /// by owner, never reachable from a request.
    pub async fn expired_turns(&self, limit: usize) -> Result<Vec<String>, StoreError> {
        let mut conn = self.pool.acquire().await?;
        let sql = on_store_clock(
            &conn,
            "SELECT id FROM turns WHERE state = 'running' AND (lease_until IS NULL OR lease_until < {now}) \
             ORDER BY lease_until LIMIT $1",
        );
        let rows = sqlx::query(AssertSqlSafe(sql))
            .bind(i64::try_from(limit).unwrap_or(i64::MAX))
            .fetch_all(&mut *conn)
            .await?;
        rows.iter().map(|row| Ok(row.try_get("id")?)).collect()
    }

    /// Every running turn, whatever its lease: SQLite's recovery at
    /// start-up. Maintenance only, like [`Store::expired_turns`].
    pub async fn running_turns(&self) -> Result<Vec<String>, StoreError> {
        let rows = sqlx::query("SELECT id FROM turns WHERE state = 'running'")
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(|row| Ok(row.try_get("id")?)).collect()
    }

    /// Ends a running turn that `condition` allows with what `finalize`
    /// builds from its stored wire events; true when this call ended it.
    pub async fn reap(
        &self,
        turn_id: &str,
        condition: ReapIf,
        finalize: Finalize,
    ) -> Result<bool, StoreError> {
        self.write(Reap {
            turn_id: turn_id.to_owned(),
            condition,
            finalize,
            notify: self.notifies(),
            now: now_ms(),
        })
        .await
    }
}
