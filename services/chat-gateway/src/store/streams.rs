//! Stream leases: the event streams open on every replica, counted per
//! user and per tenant (`turns.per_user.streams`, `turns.per_tenant.streams`).
//!
//! A stream that starts a turn (`Chat`, `ExecuteAction`) takes its lease
//! in the write that begins the turn ([`insert_lease`], checked with the
//! turn's other limits in [`super::quota::check`]); a stream that follows
//! one (`ResumeTurn`, a retried request id) takes it with [`OpenStream`],
//! under the same advisory locks, so admissions on two replicas never
//! overrun a limit. A lease is deleted when its stream closes
//! ([`ReleaseStreams`], batched by the replica) and renewed by its replica
//! ([`RenewStreams`]); the leases of a replica that died expire. Every
//! time compared here is the database's clock, so replicas whose own
//! clocks disagree still agree on which leases hold.

use futures::future::BoxFuture;
use sqlx::{AnyConnection, Arguments, AssertSqlSafe, Row, any::AnyArguments};

use super::{
    Store, StoreError,
    batch::Write,
    group::{Statements, is_sqlite},
    quota::{Admission, NewStream, QuotaExceeded, Scope},
};

/// The insert of a lease: `$1` id, `$2` owner, `$3` tenant, `$4` replica,
/// `$5` its time to live (ms).
macro_rules! insert_sql {
    ($clock:ident) => {
        concat!(
            "INSERT INTO stream_leases (id, owner, tenant, replica, expires_at) VALUES ($1, $2, $3, $4, ",
            db_now_ms!($clock),
            " + $5)"
        )
    };
}

/// Adds to `group` the insert of `stream`'s lease (the write that begins
/// its turn).
pub(crate) fn insert_lease(
    group: &mut Statements,
    sqlite: bool,
    stream: &NewStream,
    owner: &str,
    tenant: Option<&str>,
    replica: &str,
) -> Result<(), StoreError> {
    let sql = if sqlite {
        insert_sql!(sqlite)
    } else {
        insert_sql!(postgres)
    };
    group.push(sql, |values| {
        values.add(stream.id.as_str())?;
        values.add(owner)?;
        values.add(tenant)?;
        values.add(replica)?;
        values.add(stream.ttl_ms)
    })
}

/// The open streams of one user (`$1`) or tenant.
fn count_sql(scope: Scope, sqlite: bool) -> &'static str {
    macro_rules! count {
        ($column:literal, $clock:ident) => {
            concat!(
                "SELECT count(*) AS n FROM stream_leases WHERE ",
                $column,
                " = $1 AND expires_at > ",
                db_now_ms!($clock)
            )
        };
    }
    match (scope, sqlite) {
        (Scope::User, true) => count!("owner", sqlite),
        (Scope::User, false) => count!("owner", postgres),
        (Scope::Tenant, true) => count!("tenant", sqlite),
        (Scope::Tenant, false) => count!("tenant", postgres),
    }
}

/// A stream that starts no turn: its lease, unless a streams limit of its
/// user or tenant is reached.
pub(crate) struct OpenStream {
    pub(crate) owner: String,
    pub(crate) replica: String,
    /// The limits, the tenant and the lease (`admission.stream` is set).
    pub(crate) admission: Admission,
}

impl Write for OpenStream {
    /// The refusal, when a limit is reached (nothing written).
    type Output = Option<QuotaExceeded>;

    fn run<'c>(
        &'c self,
        conn: &'c mut AnyConnection,
    ) -> BoxFuture<'c, Result<Self::Output, StoreError>> {
        Box::pin(async move {
            let Some(stream) = &self.admission.stream else {
                return Ok(None);
            };
            let sqlite = is_sqlite(conn);
            let scopes = [
                (Scope::User, Some(self.owner.as_str()), self.admission.user),
                (
                    Scope::Tenant,
                    self.admission.tenant.as_deref(),
                    self.admission.tenant_quota,
                ),
            ];
            for (scope, key, quota) in scopes {
                let Some(key) = key else { continue };
                if quota.streams == 0 {
                    continue;
                }
                if !sqlite {
                    // The lock the turn admissions of this scope take.
                    sqlx::query("SELECT pg_advisory_xact_lock(hashtext($1))")
                        .bind(format!("parley {} {key}", scope.as_str()))
                        .execute(&mut *conn)
                        .await?;
                }
                let open: i64 = sqlx::query(count_sql(scope, sqlite))
                    .bind(key)
                    .fetch_one(&mut *conn)
                    .await?
                    .try_get("n")?;
                let max = u64::from(quota.streams);
                if u64::try_from(open).unwrap_or(0) >= max {
                    return Ok(Some(QuotaExceeded {
                        scope,
                        limit: super::quota::Limit::Streams,
                        max,
                        retry_after: std::time::Duration::from_secs(1),
                    }));
                }
            }
            let sql = if sqlite {
                insert_sql!(sqlite)
            } else {
                insert_sql!(postgres)
            };
            sqlx::query(sql)
                .bind(stream.id.as_str())
                .bind(self.owner.as_str())
                .bind(self.admission.tenant.as_deref())
                .bind(self.replica.as_str())
                .bind(stream.ttl_ms)
                .execute(&mut *conn)
                .await?;
            Ok(None)
        })
    }
}

/// Most leases one [`ReleaseStreams`] statement deletes.
const RELEASE_CHUNK: usize = 256;

/// Deletes the leases of closed streams.
pub(crate) struct ReleaseStreams {
    pub(crate) ids: Vec<String>,
}

impl Write for ReleaseStreams {
    /// How many leases went.
    type Output = u64;

    fn autocommit(&self) -> bool {
        true
    }

    fn run<'c>(&'c self, conn: &'c mut AnyConnection) -> BoxFuture<'c, Result<u64, StoreError>> {
        Box::pin(async move {
            let mut released = 0;
            for chunk in self.ids.chunks(RELEASE_CHUNK) {
                let placeholders: Vec<String> =
                    (1..=chunk.len()).map(|n| format!("${n}")).collect();
                let text = format!(
                    "DELETE FROM stream_leases WHERE id IN ({})",
                    placeholders.join(", ")
                );
                let mut values = AnyArguments::default();
                for id in chunk {
                    values
                        .add(id.as_str())
                        .map_err(|error| StoreError::Database(sqlx::Error::Encode(error)))?;
                }
                released += sqlx::query_with(AssertSqlSafe(text), values)
                    .execute(&mut *conn)
                    .await?
                    .rows_affected();
            }
            Ok(released)
        })
    }
}

/// Most expired leases one renewal deletes (the rest go at the next).
const PRUNE_EXPIRED: i64 = 1_000;

/// Renews a replica's leases and deletes (a bounded number of) expired
/// ones, of any replica.
pub(crate) struct RenewStreams {
    pub(crate) replica: String,
    pub(crate) ttl_ms: i64,
}

macro_rules! renew_sql {
    ($clock:ident) => {
        concat!(
            "UPDATE stream_leases SET expires_at = ",
            db_now_ms!($clock),
            " + $2 WHERE replica = $1"
        )
    };
}

macro_rules! prune_sql {
    ($clock:ident) => {
        concat!(
            "DELETE FROM stream_leases WHERE id IN (SELECT id FROM stream_leases WHERE expires_at < ",
            db_now_ms!($clock),
            " LIMIT $1)"
        )
    };
}

impl Write for RenewStreams {
    /// How many expired leases were deleted.
    type Output = u64;

    fn autocommit(&self) -> bool {
        true
    }

    fn run<'c>(&'c self, conn: &'c mut AnyConnection) -> BoxFuture<'c, Result<u64, StoreError>> {
        Box::pin(async move {
            let sqlite = is_sqlite(conn);
            let (renew, prune) = if sqlite {
                (renew_sql!(sqlite), prune_sql!(sqlite))
            } else {
                (renew_sql!(postgres), prune_sql!(postgres))
            };
            sqlx::query(renew)
                .bind(self.replica.as_str())
                .bind(self.ttl_ms)
                .execute(&mut *conn)
                .await?;
            Ok(sqlx::query(prune)
                .bind(PRUNE_EXPIRED)
                .execute(&mut *conn)
                .await?
                .rows_affected())
        })
    }
}

impl Store {
    /// Takes a lease for a stream of `owner` that starts no turn, unless
    /// `admission`'s streams limits are reached (the refusal).
    pub async fn open_stream(
        &self,
        owner: &str,
        replica: &str,
        admission: &Admission,
    ) -> Result<Option<QuotaExceeded>, StoreError> {
        self.write(OpenStream {
            owner: owner.to_owned(),
            replica: replica.to_owned(),
            admission: admission.clone(),
        })
        .await
    }

    /// Deletes the leases of closed streams; how many went.
    pub async fn release_streams(&self, ids: Vec<String>) -> Result<u64, StoreError> {
        if ids.is_empty() {
            return Ok(0);
        }
        self.write(ReleaseStreams { ids }).await
    }

    /// Renews `replica`'s stream leases for `ttl_ms` and deletes expired
    /// ones; how many expired leases went.
    pub async fn renew_streams(&self, replica: &str, ttl_ms: i64) -> Result<u64, StoreError> {
        self.write(RenewStreams {
            replica: replica.to_owned(),
            ttl_ms,
        })
        .await
    }
}
