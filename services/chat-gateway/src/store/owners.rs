//! Rows stored before owners were scoped by issuer.
//!
//! Migration 0004 renames every owner `<id>` of that time to `legacy <id>`,
//! which no caller's key matches. [`Store::adopt_legacy_owners`] hands
//! them to the issuer they came from (the only identity source a gateway
//! had, or the one `auth.legacy_issuer` names): `legacy alice` becomes
//! `<issuer>  alice`, the key of that issuer's `alice` without a tenant.

use futures::future::BoxFuture;
use sqlx::{AnyConnection, Row};

use super::{Store, StoreError, batch::Write};

/// What became of the rows stored before owners were scoped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Legacy {
    /// Conversations handed to the issuer.
    pub adopted: u64,
    /// Conversations still set aside (no issuer to hand them to).
    pub waiting: u64,
}

const LEGACY: &str = "legacy %";

struct Adopt {
    prefix: Option<String>,
}

impl Write for Adopt {
    type Output = Legacy;

    fn run<'c>(&'c self, conn: &'c mut AnyConnection) -> BoxFuture<'c, Result<Legacy, StoreError>> {
        Box::pin(async move {
            let mut adopted = 0;
            if let Some(prefix) = &self.prefix {
                // `legacy ` is 7 characters: the id starts at the 8th.
                adopted = sqlx::query(
                    "UPDATE conversations SET owner = $1 || substr(owner, 8) WHERE owner LIKE $2",
                )
                .bind(prefix.as_str())
                .bind(LEGACY)
                .execute(&mut *conn)
                .await?
                .rows_affected();
                sqlx::query("UPDATE turns SET owner = $1 || substr(owner, 8) WHERE owner LIKE $2")
                    .bind(prefix.as_str())
                    .bind(LEGACY)
                    .execute(&mut *conn)
                    .await?;
            }
            let waiting: i64 =
                sqlx::query("SELECT count(*) AS n FROM conversations WHERE owner LIKE $1")
                    .bind(LEGACY)
                    .fetch_one(&mut *conn)
                    .await?
                    .try_get("n")?;
            Ok(Legacy {
                adopted,
                waiting: u64::try_from(waiting).unwrap_or(0),
            })
        })
    }
}

impl Store {
    /// Hands the rows stored before owners were scoped to the principals
    /// whose keys start with `prefix` (see `auth::issuer_prefix`); with
    /// `None`, only counts them. Idempotent: replicas starting together
    /// adopt each row once.
    pub async fn adopt_legacy_owners(&self, prefix: Option<&str>) -> Result<Legacy, StoreError> {
        self.write(Adopt {
            prefix: prefix.map(str::to_owned),
        })
        .await
    }
}
