//! Turns as durable objects shared by every gateway replica: leases, the
//! wire event log, cross-replica cancel and the sweep that ends turns whose
//! replica died.
//!
//! A running turn's row names the replica that runs it and a lease
//! (`lease_until`, Unix ms) that the replica renews for all its turns in one
//! statement ([`Store::renew_leases`]). Leases are written and compared on
//! the store's clock only ([`super::group::clock_sql`]), never a replica's:
//! a replica whose clock runs ahead does not take its peers' healthy turns
//! for lost. Any replica ends a turn whose lease
//! expired ([`Store::reap`]): in one transaction it reads what the turn
//! stored, lets the caller build the turn's ending from it (the store knows
//! no wire types), and writes that ending only if the lease is still
//! expired, so replicas sweeping at once end a turn once.
//!
//! The wire log (`turn_events`) keeps a turn's `ChatEvent`s in batches,
//! opaque to the store. On PostgreSQL every write that adds to it, and every
//! cancel request, NOTIFYs the other replicas (see [`super::listen`]); the
//! notification is delivered when the transaction commits.

use std::{collections::HashSet, sync::Arc};

use futures::future::BoxFuture;
use sqlx::{AnyConnection, Arguments, AssertSqlSafe, Row, any::AnyRow};

use super::{
    EventBody, Store, StoreError, TURN_CANCEL_CHANNEL, TURN_EVENTS_CHANNEL, TurnState, WireBatch,
    batch::{Deferred, Write},
    group::{Statements, on_store_clock},
    now_ms,
    writes::{EncodedEvent, FinishTurnWrite, notify, to_i64, tokens_of},
};

/// The longest lease or watch written, in ms (about 30 years): the store
/// adds it to its clock, and a longer one would overflow.
pub(super) const MAX_LEASE_MS: i64 = 1 << 40;

/// A running turn of this replica, as lease renewal found it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeldTurn {
    /// The turn.
    pub id: String,
    /// Whether a `CancelTurn` asked for it to stop.
    pub cancel_requested: bool,
    /// Whether a follower on another replica said it is there until now
    /// or later (on the store's clock).
    pub watched: bool,
}

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

/// One turn's next wire batch, for [`Store::append_wire`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TurnBatch {
    /// The turn.
    pub turn_id: String,
    /// Its events after the last stored one.
    pub batch: WireBatch,
}

/// Turns per statement: five binds a row keeps a statement far below
/// SQLite's limit of 32 766 binds.
pub(super) const APPEND_CHUNK: usize = 256;

/// The event log's write: the next wire batch of each of a replica's
/// turns, stored only for the turns it still runs.
pub(super) struct AppendWire {
    pub(super) replica: String,
    pub(super) batches: Vec<TurnBatch>,
    pub(super) notify: bool,
    pub(super) now: i64,
}

impl AppendWire {
    /// The statements that store `chunk`: both keep to the turns `replica`
    /// still runs, so neither waits for the other's result (one round trip
    /// on SQLite). They return the ids of those turns.
    fn statements(
        &self,
        conn: &AnyConnection,
        chunk: &[TurnBatch],
    ) -> Result<Statements, StoreError> {
        let mut group = Statements::new(conn);
        let binds = Binds::of(&group);
        advance_held(&mut group, binds, &self.replica, chunk)?;
        insert_wires(&mut group, binds, &self.replica, chunk, self.now)?;
        Ok(group)
    }
}

/// The ids in `rows` (those of the turns still held).
fn held_ids(rows: &[AnyRow]) -> Result<HashSet<String>, StoreError> {
    rows.iter().map(|row| Ok(row.try_get("id")?)).collect()
}

impl Write for AppendWire {
    /// Per batch, in order: whether its turn is still running on this
    /// replica (and the batch stored).
    type Output = Vec<bool>;

    fn run<'c>(
        &'c self,
        conn: &'c mut AnyConnection,
    ) -> BoxFuture<'c, Result<Vec<bool>, StoreError>> {
        Box::pin(async move {
            let mut stored = Vec::with_capacity(self.batches.len());
            for chunk in self.batches.chunks(APPEND_CHUNK) {
                let held = held_ids(&self.statements(conn, chunk)?.fetch_all(conn).await?)?;
                let kept: Vec<&TurnBatch> = chunk
                    .iter()
                    .filter(|turn| held.contains(turn.turn_id.as_str()))
                    .collect();
                if self.notify {
                    notify_many(conn, TURN_EVENTS_CHANNEL, &kept).await?;
                }
                stored.extend(
                    chunk
                        .iter()
                        .map(|turn| held.contains(turn.turn_id.as_str())),
                );
            }
            Ok(stored)
        })
    }

    /// One chunk without NOTIFYs (SQLite's case): its statements go with
    /// the COMMIT, and which turns were still held is read from what they
    /// return. A lone turn's events then cost one round trip, not two.
    fn run_deferring<'c>(
        &'c self,
        conn: &'c mut AnyConnection,
    ) -> BoxFuture<'c, Result<Deferred<Vec<bool>>, StoreError>> {
        Box::pin(async move {
            if self.notify || self.batches.len() > APPEND_CHUNK {
                return Ok(Deferred {
                    output: Some(self.run(conn).await?),
                    tail: None,
                });
            }
            Ok(Deferred {
                output: None,
                tail: Some(self.statements(conn, &self.batches)?),
            })
        })
    }

    fn output_from(&self, rows: &[AnyRow]) -> Result<Vec<bool>, StoreError> {
        let held = held_ids(rows)?;
        Ok(self
            .batches
            .iter()
            .map(|turn| held.contains(turn.turn_id.as_str()))
            .collect())
    }
}

/// How a multi-row statement writes its placeholders.
#[derive(Debug, Clone, Copy)]
enum Binds {
    /// `$1, $2...` (PostgreSQL; the values bind in number order).
    Numbered,
    /// `?, ?...` (SQLite; the values bind in text order). sqlx asks SQLite
    /// for each placeholder's name, and SQLite finds a name by walking the
    /// statement's list of names: with `$n` that is quadratic in a
    /// statement of hundreds of rows, with anonymous `?` there is no list.
    Anonymous,
}

impl Binds {
    /// Anonymous where the group runs as one query (SQLite).
    fn of(group: &Statements) -> Self {
        if group.is_joined() {
            Self::Anonymous
        } else {
            Self::Numbered
        }
    }

    /// The placeholder of the value bound `number`th (from 1): `$number`,
    /// or `?` when values bind in text order.
    fn one(self, number: usize) -> String {
        match self {
            Self::Numbered => format!("${number}"),
            Self::Anonymous => "?".to_owned(),
        }
    }

    /// `($first, $second), ($third, $fourth)...` (or `(?, ?), (?, ?)...`):
    /// `rows` rows of `width` placeholders numbered from `first`. The
    /// statements built with it are fixed text and placeholders (hence
    /// `AssertSqlSafe`): every value is bound. Not sqlx's `QueryBuilder`:
    /// for the `Any` driver it writes `?` placeholders, which PostgreSQL
    /// rejects.
    fn rows(self, rows: usize, width: usize, first: usize) -> String {
        let mut sql = String::with_capacity(rows * width * 5);
        for row in 0..rows {
            if row > 0 {
                sql.push_str(", ");
            }
            sql.push('(');
            for column in 0..width {
                if column > 0 {
                    sql.push_str(", ");
                }
                sql.push_str(&self.one(first + row * width + column));
            }
            sql.push(')');
        }
        sql
    }
}

/// Adds to `group` the statement that moves `last_event_seq` of the
/// batches' turns that `replica` still runs and returns their ids, one
/// statement for the whole chunk.
fn advance_held(
    group: &mut Statements,
    binds: Binds,
    replica: &str,
    chunk: &[TurnBatch],
) -> Result<(), StoreError> {
    // The rows' values bind first, the replica last: the same order for
    // numbered and anonymous placeholders.
    let sql = format!(
        "WITH batch (turn, seq) AS (VALUES {}) \
         UPDATE turns SET last_event_seq = batch.seq FROM batch \
         WHERE turns.id = batch.turn AND turns.replica = {} \
         AND turns.state = 'running' RETURNING id",
        binds.rows(chunk.len(), 2, 1),
        binds.one(chunk.len() * 2 + 1)
    );
    group.push(sql, |values| {
        for turn in chunk {
            values.add(turn.turn_id.as_str())?;
            values.add(to_i64(turn.batch.last_seq))?;
        }
        values.add(replica)
    })
}

/// Adds to `group` the statement that inserts the batches of the turns
/// that `replica` still runs, one statement for them all.
fn insert_wires(
    group: &mut Statements,
    binds: Binds,
    replica: &str,
    chunk: &[TurnBatch],
    now: i64,
) -> Result<(), StoreError> {
    let sql = format!(
        "WITH wire (turn_id, first_seq, last_seq, events, created_at) AS (VALUES {}) \
         INSERT INTO turn_events (turn_id, first_seq, last_seq, events, created_at) \
         SELECT wire.turn_id, wire.first_seq, wire.last_seq, wire.events, wire.created_at \
         FROM wire JOIN turns ON turns.id = wire.turn_id \
         WHERE turns.replica = {} AND turns.state = 'running'",
        binds.rows(chunk.len(), 5, 1),
        binds.one(chunk.len() * 5 + 1)
    );
    group.push(sql, |values| {
        for turn in chunk {
            values.add(turn.turn_id.as_str())?;
            values.add(to_i64(turn.batch.first_seq))?;
            values.add(to_i64(turn.batch.last_seq))?;
            values.add(turn.batch.events.as_str())?;
            values.add(now)?;
        }
        values.add(replica)
    })
}

/// NOTIFYs `channel` once per batch's turn, in one statement.
async fn notify_many(
    conn: &mut AnyConnection,
    channel: &str,
    batches: &[&TurnBatch],
) -> Result<(), StoreError> {
    if batches.is_empty() {
        return Ok(());
    }
    let sql = format!(
        "SELECT pg_notify($1, batch.turn) FROM (VALUES {}) AS batch (turn)",
        Binds::Numbered.rows(batches.len(), 1, 2)
    );
    let mut query = sqlx::query(AssertSqlSafe(sql)).bind(channel);
    for turn in batches {
        query = query.bind(turn.turn_id.as_str());
    }
    query.execute(&mut *conn).await?;
    Ok(())
}

struct Renew {
    replica: String,
    /// The lease's length, ms from now on the store's clock.
    ttl: i64,
}

impl Write for Renew {
    type Output = Vec<HeldTurn>;

    fn autocommit(&self) -> bool {
        true
    }

    fn run<'c>(
        &'c self,
        conn: &'c mut AnyConnection,
    ) -> BoxFuture<'c, Result<Vec<HeldTurn>, StoreError>> {
        Box::pin(async move {
            let sql = on_store_clock(
                conn,
                "UPDATE turns SET lease_until = {now} + $2 WHERE replica = $1 AND state = 'running' \
                 RETURNING id, cancel_requested, \
                 CAST(CASE WHEN watched_until >= {now} THEN 1 ELSE 0 END AS BIGINT) AS watched",
            );
            let rows = sqlx::query(AssertSqlSafe(sql))
                .bind(self.replica.as_str())
                .bind(self.ttl)
                .fetch_all(&mut *conn)
                .await?;
            rows.iter()
                .map(|row| {
                    Ok(HeldTurn {
                        id: row.try_get("id")?,
                        cancel_requested: row.try_get::<i64, _>("cancel_requested")? != 0,
                        watched: row.try_get::<i64, _>("watched")? != 0,
                    })
                })
                .collect()
        })
    }
}

/// The fence before a turn's tool calls: its lease renewed, only while
/// it is unexpired and held by this replica.
struct HoldForDispatch {
    turn_id: String,
    replica: String,
    ttl: i64,
}

impl Write for HoldForDispatch {
    /// Whether the turn is still this replica's.
    type Output = bool;

    fn autocommit(&self) -> bool {
        true
    }

    fn run<'c>(&'c self, conn: &'c mut AnyConnection) -> BoxFuture<'c, Result<bool, StoreError>> {
        Box::pin(async move {
            let sql = on_store_clock(
                conn,
                "UPDATE turns SET lease_until = {now} + $3 \
                 WHERE id = $1 AND replica = $2 AND state = 'running' AND lease_until >= {now} \
                 RETURNING id",
            );
            Ok(sqlx::query(AssertSqlSafe(sql))
                .bind(self.turn_id.as_str())
                .bind(self.replica.as_str())
                .bind(self.ttl)
                .fetch_optional(&mut *conn)
                .await?
                .is_some())
        })
    }
}

struct Watch {
    owner: String,
    turn_id: String,
    /// For how long, ms from now on the store's clock.
    watch_for: i64,
}

impl Write for Watch {
    type Output = ();

    fn autocommit(&self) -> bool {
        true
    }

    fn run<'c>(&'c self, conn: &'c mut AnyConnection) -> BoxFuture<'c, Result<(), StoreError>> {
        Box::pin(async move {
            let sql = on_store_clock(
                conn,
                "UPDATE turns SET watched_until = {now} + $3 \
                 WHERE id = $1 AND owner = $2 AND state = 'running'",
            );
            sqlx::query(AssertSqlSafe(sql))
                .bind(self.turn_id.as_str())
                .bind(self.owner.as_str())
                .bind(self.watch_for)
                .execute(&mut *conn)
                .await?;
            Ok(())
        })
    }
}

struct RequestCancel {
    owner: String,
    turn_id: String,
    notify: bool,
}

impl Write for RequestCancel {
    /// The replica running the turn; `None` when it is not running.
    type Output = Option<String>;

    fn run<'c>(
        &'c self,
        conn: &'c mut AnyConnection,
    ) -> BoxFuture<'c, Result<Option<String>, StoreError>> {
        Box::pin(async move {
            let row = sqlx::query(
                "UPDATE turns SET cancel_requested = 1 \
                 WHERE id = $1 AND owner = $2 AND state = 'running' RETURNING replica",
            )
            .bind(self.turn_id.as_str())
            .bind(self.owner.as_str())
            .fetch_optional(&mut *conn)
            .await?;
            let Some(row) = row else { return Ok(None) };
            if self.notify {
                notify(conn, TURN_CANCEL_CHANNEL, &self.turn_id).await?;
            }
            Ok(Some(
                row.try_get::<Option<String>, _>("replica")?
                    .unwrap_or_default(),
            ))
        })
    }
}

struct Prune {
    before: i64,
}

impl Write for Prune {
    /// How many batches were deleted.
    type Output = u64;

    fn autocommit(&self) -> bool {
        true
    }

    fn run<'c>(&'c self, conn: &'c mut AnyConnection) -> BoxFuture<'c, Result<u64, StoreError>> {
        Box::pin(async move {
            Ok(sqlx::query("DELETE FROM turn_events WHERE created_at < $1")
                .bind(self.before)
                .execute(&mut *conn)
                .await?
                .rows_affected())
        })
    }
}

struct Reap {
    turn_id: String,
    condition: ReapIf,
    finalize: Finalize,
    notify: bool,
    now: i64,
}

async fn wire_batches(
    conn: &mut AnyConnection,
    turn_id: &str,
    after_seq: u64,
) -> Result<Vec<WireBatch>, StoreError> {
    let rows = sqlx::query(
        "SELECT first_seq, last_seq, events FROM turn_events \
         WHERE turn_id = $1 AND last_seq > $2 ORDER BY first_seq",
    )
    .bind(turn_id)
    .bind(to_i64(after_seq))
    .fetch_all(&mut *conn)
    .await?;
    rows.iter().map(batch_from_row).collect()
}

fn batch_from_row(row: &sqlx::any::AnyRow) -> Result<WireBatch, StoreError> {
    Ok(WireBatch {
        first_seq: to_u64(row.try_get("first_seq")?),
        last_seq: to_u64(row.try_get("last_seq")?),
        events: row.try_get("events")?,
    })
}

fn to_u64(value: i64) -> u64 {
    u64::try_from(value).unwrap_or(0)
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
            let input = ReapInput {
                owner: row.try_get("owner")?,
                conversation_id: row.try_get("conversation_id")?,
                turn_id: self.turn_id.clone(),
                last_event_seq: to_u64(row.try_get("last_event_seq")?),
                stream_ahead: to_u64(row.try_get("stream_ahead")?),
                wire: wire_batches(conn, &self.turn_id, 0).await?,
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
                tokens: tokens_of(&reaped.events),
                events: reaped
                    .events
                    .iter()
                    .map(EncodedEvent::new)
                    .collect::<Result<_, _>>()?,
                wire: Some(reaped.wire),
                notify: self.notify,
                now: self.now,
            };
            finish.run(conn).await
        })
    }
}

impl Store {
    /// Appends the next wire batch of each of `replica`'s running turns in
    /// one transaction. Per batch, in order: false when its turn is no
    /// longer this replica's (another replica ended it after its lease
    /// expired, or the conversation was deleted); nothing is stored for it.
    pub async fn append_wire(
        &self,
        replica: &str,
        batches: Vec<TurnBatch>,
    ) -> Result<Vec<bool>, StoreError> {
        if batches.is_empty() {
            return Ok(Vec::new());
        }
        self.write(AppendWire {
            replica: replica.to_owned(),
            batches,
            notify: self.notifies(),
            now: now_ms(),
        })
        .await
    }

    /// Renews the lease of every running turn of `replica` for `ttl_ms`
    /// from now on the store's clock, and returns them.
    pub async fn renew_leases(
        &self,
        replica: &str,
        ttl_ms: i64,
    ) -> Result<Vec<HeldTurn>, StoreError> {
        self.write(Renew {
            replica: replica.to_owned(),
            ttl: ttl_ms.min(MAX_LEASE_MS),
        })
        .await
    }

    /// The fence before a turn's next tool calls: true, with its lease
    /// renewed for `ttl_ms`, only while `replica` still holds `turn_id`
    /// and its lease has not expired (on the store's clock). False once
    /// the lease lapsed, even before another replica ended the turn: a
    /// replica that stalled past its lease may not start tools any more.
    pub async fn hold_for_dispatch(
        &self,
        turn_id: &str,
        replica: &str,
        ttl_ms: i64,
    ) -> Result<bool, StoreError> {
        self.write(HoldForDispatch {
            turn_id: turn_id.to_owned(),
            replica: replica.to_owned(),
            ttl: ttl_ms.min(MAX_LEASE_MS),
        })
        .await
    }

    /// Asks the replica running a turn of `owner` to stop it. Returns that
    /// replica, or `None` when the turn is not running.
    pub async fn request_cancel(
        &self,
        owner: &str,
        turn_id: &str,
    ) -> Result<Option<String>, StoreError> {
        self.write(RequestCancel {
            owner: owner.to_owned(),
            turn_id: turn_id.to_owned(),
            notify: self.notifies(),
        })
        .await
    }

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

    /// The stored wire batches of a turn of `owner` that hold events after
    /// `after_seq`, in order (empty when the turn is not this owner's).
    pub async fn wire_events(
        &self,
        owner: &str,
        turn_id: &str,
        after_seq: u64,
    ) -> Result<Vec<WireBatch>, StoreError> {
        let rows = sqlx::query(
            "SELECT e.first_seq, e.last_seq, e.events FROM turn_events e \
             JOIN turns t ON t.id = e.turn_id \
             WHERE e.turn_id = $1 AND t.owner = $2 AND e.last_seq > $3 ORDER BY e.first_seq",
        )
        .bind(turn_id)
        .bind(owner)
        .bind(to_i64(after_seq))
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(batch_from_row).collect()
    }

    /// Says that a client follows `turn_id` of `owner` from this replica
    /// for `for_ms` from now (on the store's clock), so that the replica
    /// running it does not take it for abandoned.
    pub async fn watch_turn(
        &self,
        owner: &str,
        turn_id: &str,
        for_ms: i64,
    ) -> Result<(), StoreError> {
        self.write(Watch {
            owner: owner.to_owned(),
            turn_id: turn_id.to_owned(),
            watch_for: for_ms.min(MAX_LEASE_MS),
        })
        .await
    }

    /// Deletes the wire events stored before `before` (Unix ms): the
    /// resume window has passed. Conversation history is not touched.
    pub async fn prune_wire(&self, before: i64) -> Result<u64, StoreError> {
        self.write(Prune { before }).await
    }

    /// Deletes the quotas' token counts of days before yesterday (`now` in
    /// Unix ms); returns how many day counts went.
    pub async fn prune_quota_days(&self, now: i64) -> Result<u64, StoreError> {
        self.write(super::quota::PruneTokens { now }).await
    }
}

#[cfg(test)]
mod tests;
