//! Paused turns. A turn whose tool calls wait for the user's decisions is
//! `awaiting_input`: no replica holds it (no lease), and what its
//! continuation needs is in its row, written by the turn's end
//! ([`super::FinishTurn::pause`]). Taking it back — a `SubmitToolDecisions`
//! on any replica, or a replica that closes it because it expired or the
//! user moved on — makes it `running` again under that replica's lease, in
//! one conditional update: of several replicas trying at once, exactly one
//! gets it.

use futures::future::BoxFuture;
use sqlx::{AnyConnection, AssertSqlSafe, Row};

use super::{Store, StoreError, batch::Write, group::on_store_clock, turns::MAX_LEASE_MS};

/// A paused turn, taken by a replica.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PausedTurn {
    /// Its conversation.
    pub conversation_id: String,
    /// The seq of its last stored wire event (the pause's status).
    pub last_event_seq: u64,
    /// What the pause stored for its continuation.
    pub continuation: String,
}

/// What taking a paused turn found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Taken {
    /// The turn is this replica's now, running.
    Taken(PausedTurn),
    /// It is not (or no longer) paused, its pause expired (unless taken to
    /// be closed), or it is no turn of this owner.
    NotPaused,
    /// Another turn runs on its conversation.
    Busy,
}

/// What to take.
#[derive(Debug, Clone)]
pub struct TakePaused<'a> {
    /// The turn's owner.
    pub owner: &'a str,
    /// The turn.
    pub turn_id: &'a str,
    /// The replica taking it.
    pub replica: &'a str,
    /// Its lease's length, ms.
    pub lease_ttl_ms: i64,
    /// The `SubmitToolDecisions` request id, when sent.
    pub request_id: Option<&'a str>,
    /// Take it also when its pause has expired (to close it).
    pub expired_too: bool,
    /// Take it only while its last stored event is this one: the pause
    /// the caller read, not a later one.
    pub at_seq: Option<u64>,
}

struct TakeWrite {
    owner: String,
    turn_id: String,
    replica: String,
    ttl: i64,
    request_id: Option<String>,
    expired_too: bool,
    at_seq: Option<i64>,
}

impl Write for TakeWrite {
    type Output = Taken;

    fn autocommit(&self) -> bool {
        true
    }

    fn run<'c>(&'c self, conn: &'c mut AnyConnection) -> BoxFuture<'c, Result<Taken, StoreError>> {
        Box::pin(async move {
            let sql = on_store_clock(
                conn,
                "UPDATE turns SET state = 'running', replica = $3, lease_until = {now} + $4, \
                 finished_at = NULL, cancel_requested = 0, decisions_request_id = $5 \
                 WHERE id = $1 AND owner = $2 AND state = 'awaiting_input' \
                 AND ($6 = 1 OR input_until > {now}) \
                 AND ($7 IS NULL OR last_event_seq = $7) \
                 AND NOT EXISTS (SELECT 1 FROM turns AS other \
                     WHERE other.conversation_id = turns.conversation_id AND other.state = 'running') \
                 RETURNING conversation_id, last_event_seq, continuation",
            );
            let row = sqlx::query(AssertSqlSafe(sql))
                .bind(self.turn_id.as_str())
                .bind(self.owner.as_str())
                .bind(self.replica.as_str())
                .bind(self.ttl)
                .bind(self.request_id.as_deref())
                .bind(i64::from(self.expired_too))
                .bind(self.at_seq)
                .fetch_optional(&mut *conn)
                .await;
            let row = match row {
                Ok(Some(row)) => row,
                Ok(None) => return self.why_not(conn).await,
                // Another replica began a turn on the conversation meanwhile
                // (PostgreSQL, `turns_one_running`).
                Err(sqlx::Error::Database(db)) if db.is_unique_violation() => {
                    return Ok(Taken::Busy);
                }
                Err(error) => return Err(error.into()),
            };
            let continuation: Option<String> = row.try_get("continuation")?;
            Ok(Taken::Taken(PausedTurn {
                conversation_id: row.try_get("conversation_id")?,
                last_event_seq: u64::try_from(row.try_get::<i64, _>("last_event_seq")?)
                    .unwrap_or(0),
                continuation: continuation.unwrap_or_default(),
            }))
        })
    }
}

impl TakeWrite {
    /// Why the update took nothing: busy when the turn is still paused
    /// (and may be taken) but another turn runs on its conversation.
    async fn why_not(&self, conn: &mut AnyConnection) -> Result<Taken, StoreError> {
        let sql = on_store_clock(
            conn,
            "SELECT id FROM turns WHERE id = $1 AND owner = $2 AND state = 'awaiting_input' \
             AND ($3 = 1 OR input_until > {now}) AND ($4 IS NULL OR last_event_seq = $4)",
        );
        let paused = sqlx::query(AssertSqlSafe(sql))
            .bind(self.turn_id.as_str())
            .bind(self.owner.as_str())
            .bind(i64::from(self.expired_too))
            .bind(self.at_seq)
            .fetch_optional(&mut *conn)
            .await?;
        Ok(if paused.is_some() {
            Taken::Busy
        } else {
            Taken::NotPaused
        })
    }
}

/// A paused turn whose pause has expired.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExpiredPause {
    /// Its owner.
    pub owner: String,
    /// The turn.
    pub turn_id: String,
}

struct Expired {
    limit: i64,
}

impl Write for Expired {
    type Output = Vec<ExpiredPause>;

    fn autocommit(&self) -> bool {
        true
    }

    fn run<'c>(
        &'c self,
        conn: &'c mut AnyConnection,
    ) -> BoxFuture<'c, Result<Vec<ExpiredPause>, StoreError>> {
        Box::pin(async move {
            let sql = on_store_clock(
                conn,
                "SELECT owner, id FROM turns WHERE state = 'awaiting_input' \
                 AND input_until <= {now} ORDER BY input_until LIMIT $1",
            );
            let rows = sqlx::query(AssertSqlSafe(sql))
                .bind(self.limit)
                .fetch_all(&mut *conn)
                .await?;
            rows.iter()
                .map(|row| {
                    Ok(ExpiredPause {
                        owner: row.try_get("owner")?,
                        turn_id: row.try_get("id")?,
                    })
                })
                .collect()
        })
    }
}

impl Store {
    /// Takes a paused turn of `take.owner` for `take.replica`: it runs
    /// again under that replica's lease (see the module).
    pub async fn take_paused(&self, take: &TakePaused<'_>) -> Result<Taken, StoreError> {
        self.write(TakeWrite {
            owner: take.owner.to_owned(),
            turn_id: take.turn_id.to_owned(),
            replica: take.replica.to_owned(),
            ttl: take.lease_ttl_ms.min(MAX_LEASE_MS),
            request_id: take.request_id.map(str::to_owned),
            expired_too: take.expired_too,
            at_seq: take
                .at_seq
                .map(|seq| i64::try_from(seq).unwrap_or(i64::MAX)),
        })
        .await
    }

    /// At most `limit` paused turns whose pause has expired, the oldest
    /// first.
    pub async fn expired_pauses(&self, limit: u32) -> Result<Vec<ExpiredPause>, StoreError> {
        self.write(Expired {
            limit: i64::from(limit),
        })
        .await
    }

    /// A paused turn of `owner`: its last stored seq and continuation.
    pub async fn paused(
        &self,
        owner: &str,
        turn_id: &str,
    ) -> Result<Option<(u64, String)>, StoreError> {
        let row = sqlx::query(
            "SELECT last_event_seq, continuation FROM turns \
             WHERE owner = $1 AND id = $2 AND state = 'awaiting_input'",
        )
        .bind(owner)
        .bind(turn_id)
        .fetch_optional(&self.pool)
        .await?;
        row.map(|row| {
            let seq: i64 = row.try_get("last_event_seq")?;
            let continuation: Option<String> = row.try_get("continuation")?;
            Ok((
                u64::try_from(seq).unwrap_or(0),
                continuation.unwrap_or_default(),
            ))
        })
        .transpose()
    }

    /// Whether `owner` has conversation `conversation_id` (`None`: no),
    /// and its paused turn, if any: one read for a new message on it.
    pub async fn conversation_paused(
        &self,
        owner: &str,
        conversation_id: &str,
    ) -> Result<Option<Option<String>>, StoreError> {
        let row = sqlx::query(
            "SELECT (SELECT t.id FROM turns t WHERE t.conversation_id = c.id \
                 AND t.owner = c.owner AND t.state = 'awaiting_input' LIMIT 1) AS paused \
             FROM conversations c WHERE c.id = $1 AND c.owner = $2",
        )
        .bind(conversation_id)
        .bind(owner)
        .fetch_optional(&self.pool)
        .await?;
        row.map(|row| row.try_get::<Option<String>, _>("paused"))
            .transpose()
            .map_err(Into::into)
    }

    /// The paused turn of a conversation of `owner`, if any.
    pub async fn paused_turn(
        &self,
        owner: &str,
        conversation_id: &str,
    ) -> Result<Option<String>, StoreError> {
        let row = sqlx::query(
            "SELECT id FROM turns WHERE owner = $1 AND conversation_id = $2 \
             AND state = 'awaiting_input' ORDER BY turn_index DESC LIMIT 1",
        )
        .bind(owner)
        .bind(conversation_id)
        .fetch_optional(&self.pool)
        .await?;
        row.map(|row| row.try_get("id"))
            .transpose()
            .map_err(Into::into)
    }

    /// How many paused turns `owner` has, and its tenant (0 without one).
    pub async fn paused_count(
        &self,
        owner: &str,
        tenant: Option<&str>,
    ) -> Result<(u32, u32), StoreError> {
        let row = sqlx::query(
            "SELECT (SELECT COUNT(*) FROM turns WHERE owner = $1 AND state = 'awaiting_input') \
             AS by_owner, \
             (SELECT COUNT(*) FROM turns WHERE tenant = $2 AND state = 'awaiting_input') \
             AS by_tenant",
        )
        .bind(owner)
        .bind(tenant)
        .fetch_one(&self.pool)
        .await?;
        let count = |column: &str| -> Result<u32, StoreError> {
            Ok(u32::try_from(row.try_get::<i64, _>(column)?).unwrap_or(u32::MAX))
        };
        Ok((count("by_owner")?, count("by_tenant")?))
    }

    /// The request id of the `SubmitToolDecisions` that continued a turn
    /// of `owner`, if any.
    pub async fn decisions_request_id(
        &self,
        owner: &str,
        turn_id: &str,
    ) -> Result<Option<String>, StoreError> {
        let row =
            sqlx::query("SELECT decisions_request_id FROM turns WHERE owner = $1 AND id = $2")
                .bind(owner)
                .bind(turn_id)
                .fetch_optional(&self.pool)
                .await?;
        Ok(row
            .map(|row| row.try_get::<Option<String>, _>("decisions_request_id"))
            .transpose()?
            .flatten())
    }
}
