//! Turns as durable objects shared by every gateway replica: leases,
//! watches and cross-replica cancel. The wire event log is [`super::wire`],
//! the sweep that ends turns whose replica died [`super::reap`].
//!
//! A running turn's row names the replica that runs it and a lease
//! (`lease_until`, Unix ms) that the replica renews for all its turns in one
//! statement ([`Store::renew_leases`]). Leases are written and compared on
//! the store's clock only ([`super::group::clock_sql`]), never a replica's:
//! a replica whose clock runs ahead does not take its peers' healthy turns
//! for lost. On PostgreSQL a cancel request NOTIFYs the other replicas (see
//! [`super::listen`]); the notification is delivered when the transaction
//! commits.

use futures::future::BoxFuture;
use sqlx::{AnyConnection, AssertSqlSafe, Row};

use super::{
    Store, StoreError, TURN_CANCEL_CHANNEL, batch::Write, group::on_store_clock, writes::notify,
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

impl Store {
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

    /// Deletes the quotas' token counts of days before yesterday (`now` in
    /// Unix ms); returns how many day counts went.
    pub async fn prune_quota_days(&self, now: i64) -> Result<u64, StoreError> {
        self.write(super::quota::PruneTokens { now }).await
    }
}
