//! The wire log (`turn_events`): a turn's `ChatEvent`s in batches, opaque
//! to the store, written by each replica's event log for all its turns at
//! once ([`Store::append_wire`]), read by followers on any replica
//! ([`Store::wire_events`]) and pruned once the resume window has passed.
//! On PostgreSQL every write that adds to it NOTIFYs the other replicas
//! (see [`super::listen`]).

use std::collections::HashSet;

use futures::future::BoxFuture;
use sqlx::{AnyConnection, Arguments, AssertSqlSafe, Row, any::AnyRow};

use super::{
    Store, StoreError, TURN_EVENTS_CHANNEL, WireBatch,
    batch::{Deferred, Write},
    group::Statements,
    now_ms,
    writes::to_i64,
};

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
    /// The statement that stores `chunk`, for the turns `replica` still
    /// runs, and returns their ids: one statement (one round trip on
    /// SQLite, where it goes with the COMMIT). The turn's row is not
    /// written: a running turn's last stored seq is its newest batch's
    /// (see [`super::queries::TURN_COLUMNS`]), so the log's write every
    /// `turns.log_interval` rewrites no turn row.
    fn statements(
        &self,
        conn: &AnyConnection,
        chunk: &[TurnBatch],
    ) -> Result<Statements, StoreError> {
        let mut group = Statements::new(conn);
        let binds = Binds::of(&group);
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

/// Adds to `group` the statement that inserts the batches of the turns
/// that `replica` still runs, one statement for them all, returning their
/// ids (`id`).
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
         WHERE turns.replica = {} AND turns.state = 'running' RETURNING turn_id AS id",
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
            // A running turn's batches stay: its newest is its last
            // stored seq (see `queries::TURN_COLUMNS`).
            Ok(sqlx::query(
                "DELETE FROM turn_events WHERE created_at < $1 AND NOT EXISTS \
                 (SELECT 1 FROM turns WHERE turns.id = turn_events.turn_id AND turns.state = 'running')",
            )
                .bind(self.before)
                .execute(&mut *conn)
                .await?
                .rows_affected())
        })
    }
}

pub(super) async fn wire_batches(
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

pub(super) fn to_u64(value: i64) -> u64 {
    u64::try_from(value).unwrap_or(0)
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

    /// Deletes the wire events stored before `before` (Unix ms): the
    /// resume window has passed. A running turn's are kept (a turn that
    /// runs longer than the window is resumed whole, and its newest batch
    /// says where its log ended). Conversation history is not touched.
    pub async fn prune_wire(&self, before: i64) -> Result<u64, StoreError> {
        self.write(Prune { before }).await
    }
}

#[cfg(test)]
mod tests;
