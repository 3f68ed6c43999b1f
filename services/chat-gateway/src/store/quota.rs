//! Limits on what one user, and one tenant, may start: turns at once,
//! turns per minute, tokens per day.
//!
//! The counts come from the store inside the transaction that begins a
//! turn: running turns from `turns`, admissions in the last minute from
//! the `quota_admissions` ledger (written with the turn when a per-minute
//! limit counts it, and left alone when its conversation is deleted), so
//! they hold across gateway replicas: on PostgreSQL the
//! transaction first takes an advisory lock per user and per tenant (two
//! replicas admitting the same user's turns take turns), and SQLite's one
//! writer serialises the same way. Nothing leaks when a replica dies: its
//! running turns stop counting once the lease sweep ends them, and the
//! per-minute and per-day counts are windows over start times.
//!
//! Tokens are those of the turns the user (or tenant) started since 00:00
//! UTC, recorded as each turn ends; a turn still running counts when it
//! ends, so the concurrent-turn limit bounds how far a day's budget can be
//! overrun. They are kept per day in `quota_tokens` (added to by the write
//! that ends a turn, so they stay spent when the conversation is deleted),
//! and every count is read from an index range that does not grow with the
//! caller's history ([`usage_sql`]).

use std::time::Duration;

use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};
use sqlx::{AnyConnection, Arguments, Row};

use super::{
    Store, StoreError,
    batch::Write,
    group::{Statements, is_sqlite},
};

/// The limits of one scope (a user or a tenant); 0 leaves one unlimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Quota {
    /// Turns running at once.
    pub concurrent_turns: u32,
    /// Turns started in any 60 seconds.
    pub turns_per_minute: u32,
    /// Input + output tokens of the turns started since 00:00 UTC.
    pub tokens_per_day: u64,
    /// What the turns started since 00:00 UTC may cost, in units of the
    /// runner's `[pricing] currency` (`5.0`; kept in micro-units).
    pub cost_per_day: Cost,
    /// Event streams open at once (`Chat`, `ExecuteAction` and
    /// `ResumeTurn`, on every replica).
    pub streams: u32,
    /// Turns paused at once, waiting for decisions on their tool calls
    /// (`SubmitToolDecisions`); a turn that would pause past it fails with
    /// `TOO_MANY_PAUSED_TURNS` instead.
    pub awaiting: u32,
}

impl Quota {
    /// No limit at all.
    pub const UNLIMITED: Quota = Quota {
        concurrent_turns: 0,
        turns_per_minute: 0,
        tokens_per_day: 0,
        cost_per_day: Cost::ZERO,
        streams: 0,
        awaiting: 0,
    };

    fn is_unlimited(&self) -> bool {
        // Paused turns are counted when a turn pauses, not at admission.
        Self {
            awaiting: 0,
            ..*self
        } == Self::UNLIMITED
    }
}

/// An amount of the runner's currency, in micro-units; written in the
/// configuration as a decimal number of units (`5`, `2.50`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Cost(pub u64);

impl Cost {
    /// Nothing (no limit, where a limit is meant).
    pub const ZERO: Cost = Cost(0);
    /// The largest amount accepted, in units: a trillion.
    pub const MAX_UNITS: f64 = 1e12;

    /// `units` of the currency, when it is a finite amount of 0 to
    /// [`Self::MAX_UNITS`] (rounded to the nearest micro-unit).
    pub fn from_units(units: f64) -> Option<Self> {
        if units.is_finite() && (0.0..=Self::MAX_UNITS).contains(&units) {
            // At most 10¹⁸ micro-units: within u64.
            #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
            Some(Self((units * 1e6).round() as u64))
        } else {
            None
        }
    }

    /// The amount in units (`2.5`).
    pub fn units(self) -> f64 {
        // Micro-units below 2⁵³ are exact; larger ones are far past any limit.
        #[allow(clippy::cast_precision_loss)]
        let micros = self.0 as f64;
        micros / 1e6
    }
}

impl std::fmt::Display for Cost {
    /// Units with the decimals that matter: `5`, `2.5`, `0.000125`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let whole = self.0 / 1_000_000;
        let fraction = self.0 % 1_000_000;
        if fraction == 0 {
            return write!(f, "{whole}");
        }
        let digits = format!("{fraction:06}");
        write!(f, "{whole}.{}", digits.trim_end_matches('0'))
    }
}

impl Serialize for Cost {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_f64(self.units())
    }
}

impl<'de> Deserialize<'de> for Cost {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let units = f64::deserialize(deserializer)?;
        Self::from_units(units).ok_or_else(|| {
            serde::de::Error::custom(format!(
                "a cost is 0 to {} units of the currency, not {units}",
                Self::MAX_UNITS
            ))
        })
    }
}

/// The lease a new stream takes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewStream {
    /// The lease's id (made by the gateway).
    pub id: String,
    /// How long it holds unless its replica renews it, in ms.
    pub ttl_ms: i64,
}

/// What a new turn is admitted against.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Admission {
    /// The caller's tenant key, when it has a tenant.
    pub tenant: Option<String>,
    /// The limits of each user.
    pub user: Quota,
    /// The limits of each tenant.
    pub tenant_quota: Quota,
    /// The stream the turn is started from, which takes a stream lease
    /// with the turn (and counts against the streams limits); `None`
    /// starts a turn without one.
    pub stream: Option<NewStream>,
}

impl Admission {
    /// Whether a per-minute limit counts this admission, so that it goes
    /// into the ledger: without one nothing reads the ledger, and a turn
    /// writes no row there. (A limit switched on later counts from then.)
    pub(crate) fn counts_in_ledger(&self) -> bool {
        self.limits(|quota| quota.turns_per_minute > 0)
    }

    /// Whether a streams limit counts this caller's streams, so that each
    /// takes a lease in the store: the user's, or its tenant's when it has
    /// one. (A caller without a tenant under only a tenant limit takes
    /// none: no count would read it.)
    pub fn counts_streams(&self) -> bool {
        self.limits(|quota| quota.streams > 0)
    }

    /// Whether `limited` holds for the user's quota, or the tenant's when
    /// the caller has a tenant.
    fn limits(&self, limited: impl Fn(&Quota) -> bool) -> bool {
        limited(&self.user) || (self.tenant.is_some() && limited(&self.tenant_quota))
    }
}

/// Whose limit was reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// The calling user's.
    User,
    /// The calling user's tenant's.
    Tenant,
}

impl Scope {
    /// `user` or `tenant`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::User => "user",
            Self::Tenant => "tenant",
        }
    }
}

/// Which limit was reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    /// Turns at once.
    ConcurrentTurns,
    /// Turns per minute.
    TurnsPerMinute,
    /// Tokens per day.
    TokensPerDay,
    /// Cost per day.
    CostPerDay,
    /// Event streams open at once.
    Streams,
}

impl Limit {
    /// The configuration key's last part (`concurrent_turns`...).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ConcurrentTurns => "concurrent_turns",
            Self::TurnsPerMinute => "turns_per_minute",
            Self::TokensPerDay => "tokens_per_day",
            Self::CostPerDay => "cost_per_day",
            Self::Streams => "streams",
        }
    }
}

/// A refused turn: the limit, and when trying again can succeed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuotaExceeded {
    /// Whose limit.
    pub scope: Scope,
    /// Which limit.
    pub limit: Limit,
    /// Its value (micro-units for [`Limit::CostPerDay`]).
    pub max: u64,
    /// When a new turn can be admitted (at least a second).
    pub retry_after: Duration,
}

impl QuotaExceeded {
    /// The limit's value as configured: a count, or an amount of the
    /// currency for the cost limit (`2.5`).
    pub fn max_text(&self) -> String {
        match self.limit {
            Limit::CostPerDay => Cost(self.max).to_string(),
            _ => self.max.to_string(),
        }
    }
}

const MINUTE_MS: i64 = 60_000;
const DAY_MS: i64 = 86_400_000;

/// Checks `admission` for `owner` at `now` (Unix ms) on the connection of
/// the transaction that will insert the turn. `lock` takes PostgreSQL's
/// advisory locks first.
pub(crate) async fn check(
    conn: &mut AnyConnection,
    owner: &str,
    admission: &Admission,
    now: i64,
    lock: bool,
) -> Result<Option<QuotaExceeded>, StoreError> {
    let scopes = [
        (Scope::User, Some(owner), admission.user),
        (
            Scope::Tenant,
            admission.tenant.as_deref(),
            admission.tenant_quota,
        ),
    ];
    for (scope, key, quota) in scopes {
        let Some(key) = key else { continue };
        if quota.is_unlimited() {
            continue;
        }
        if lock {
            sqlx::query("SELECT pg_advisory_xact_lock(hashtext($1))")
                .bind(format!("parley {} {key}", scope.as_str()))
                .execute(&mut *conn)
                .await?;
        }
        let used = usage(conn, scope, key, now).await?;
        if let Some(refusal) = used.exceeds(scope, quota, now) {
            return Ok(Some(refusal));
        }
        if admission.stream.is_some()
            && let Some(refusal) = used.streams_exceed(scope, quota)
        {
            return Ok(Some(refusal));
        }
    }
    Ok(None)
}

/// What one scope has running and has started recently.
struct Usage {
    running: u64,
    last_minute: u64,
    oldest_in_minute: Option<i64>,
    tokens_today: u64,
    cost_today: u64,
    streams: u64,
}

async fn usage(
    conn: &mut AnyConnection,
    scope: Scope,
    key: &str,
    now: i64,
) -> Result<Usage, StoreError> {
    let minute_ago = now - MINUTE_MS;
    let row = sqlx::query(usage_sql(scope, is_sqlite(conn)))
        .bind(key)
        .bind(minute_ago)
        .bind(scope.as_str())
        .bind(day_of(now))
        .fetch_one(&mut *conn)
        .await?;
    let count = |name: &str| -> Result<u64, StoreError> {
        Ok(u64::try_from(row.try_get::<i64, _>(name)?).unwrap_or(0))
    };
    Ok(Usage {
        running: count("running")?,
        last_minute: count("last_minute")?,
        oldest_in_minute: row.try_get::<Option<i64>, _>("oldest")?,
        tokens_today: count("tokens")?,
        cost_today: count("cost")?,
        streams: count("streams")?,
    })
}

/// What a scope has running, has started in the last minute and has spent
/// today, read where each is indexed: the running turns (a partial index),
/// the last minute's starts (a range of `(owner|tenant, created_at)`) and
/// today's row of `quota_tokens` (its tokens and its cost). Nothing here grows with the scope's
/// history: summing the day's turns instead made a user with 200 000 turns
/// wait 0.4 s on every turn start, with the writer held.
///
/// Its open streams are the unexpired rows of `stream_leases`, on the
/// database's clock (`sqlite` or not picks the clock's SQL).
///
/// Values: `$1` the user or tenant key, `$2` a minute ago, `$3` the
/// scope's name, `$4` today (Unix ms at 00:00 UTC).
pub(crate) fn usage_sql(scope: Scope, sqlite: bool) -> &'static str {
    let sql = scope_sql(scope);
    if sqlite { sql.usage_sqlite } else { sql.usage }
}

/// The statements of one scope, whose key is a column of `turns`.
struct ScopeSql {
    /// [`usage_sql`] on PostgreSQL.
    usage: &'static str,
    /// [`usage_sql`] on SQLite.
    usage_sqlite: &'static str,
    /// The upsert of [`record_spend`]: `$1` the scope's name, `$2` the
    /// tokens, `$3` the turn, `$4` the cost. A WHERE on its SELECT: SQLite
    /// would otherwise read `ON CONFLICT` as a join's `ON`.
    record_spend: &'static str,
}

/// Each scope's statements, written once for its column (static text: no
/// query is formatted per turn).
fn scope_sql(scope: Scope) -> ScopeSql {
    macro_rules! usage {
        ($column:literal, $clock:ident) => {
            concat!(
                "SELECT (SELECT count(*) FROM turns WHERE ", $column, " = $1 AND state = 'running') AS running, ",
                "(SELECT count(*) FROM quota_admissions WHERE ", $column, " = $1 AND created_at > $2) AS last_minute, ",
                "(SELECT min(created_at) FROM quota_admissions WHERE ", $column, " = $1 AND created_at > $2) AS oldest, ",
                "coalesce((SELECT tokens FROM quota_tokens WHERE scope = $3 AND key = $1 AND day = $4), 0) AS tokens, ",
                "coalesce((SELECT cost_micros FROM quota_tokens WHERE scope = $3 AND key = $1 AND day = $4), 0) AS cost, ",
                "(SELECT count(*) FROM stream_leases WHERE ", $column, " = $1 AND expires_at > ", db_now_ms!($clock), ") AS streams"
            )
        };
    }
    macro_rules! of_column {
        ($column:literal) => {
            ScopeSql {
                usage: usage!($column, postgres),
                usage_sqlite: usage!($column, sqlite),
                record_spend: concat!(
                    "INSERT INTO quota_tokens (scope, key, day, tokens, cost_micros) ",
                    "SELECT $1, ", $column, ", created_at - created_at % 86400000, $2, $4 FROM turns ",
                    "WHERE id = $3 AND ", $column, " IS NOT NULL ",
                    "ON CONFLICT (scope, key, day) DO UPDATE SET tokens = quota_tokens.tokens + excluded.tokens, ",
                    "cost_micros = quota_tokens.cost_micros + excluded.cost_micros"
                ),
            }
        };
    }
    match scope {
        Scope::User => of_column!("owner"),
        Scope::Tenant => of_column!("tenant"),
    }
}

/// 00:00 UTC of the day of `ms` (Unix ms).
fn day_of(ms: i64) -> i64 {
    ms - ms.rem_euclid(DAY_MS)
}

/// Adds the `tokens` turn `turn_id` used and what they cost (`cost`
/// micro-units) to its user's and its tenant's counts for the day it
/// started, in the write that ends it (`group`).
pub(crate) fn record_spend(
    group: &mut Statements,
    turn_id: &str,
    tokens: i64,
    cost: i64,
) -> Result<(), StoreError> {
    if tokens <= 0 && cost <= 0 {
        return Ok(());
    }
    for scope in [Scope::User, Scope::Tenant] {
        group.push(scope_sql(scope).record_spend, |values| {
            values.add(scope.as_str())?;
            values.add(tokens.max(0))?;
            values.add(turn_id)?;
            values.add(cost.max(0))
        })?;
    }
    Ok(())
}

/// Adds to `group` the ledger row of an admitted turn, which the
/// per-minute counts read: deleting the turn's conversation leaves it.
pub(crate) fn record_admission(
    group: &mut Statements,
    turn_id: &str,
    owner: &str,
    tenant: Option<&str>,
    now: i64,
) -> Result<(), StoreError> {
    group.push(
        "INSERT INTO quota_admissions (created_at, turn_id, owner, tenant) VALUES ($1, $2, $3, $4)",
        |values| {
            values.add(now)?;
            values.add(turn_id)?;
            values.add(owner)?;
            values.add(tenant)
        },
    )
}

/// Most ledger rows one pruning statement deletes: each batch is a short
/// transaction of its own, so pruning a backlog never holds the table.
pub(crate) const PRUNE_BATCH: i64 = 1_000;

/// Deletes at most [`PRUNE_BATCH`] admissions older than the per-minute
/// window (with a minute's margin for replicas whose clocks are behind),
/// oldest first, through the ledger's primary key.
pub(crate) struct PruneAdmissions {
    pub(crate) now: i64,
}

impl Write for PruneAdmissions {
    /// How many admissions were deleted.
    type Output = u64;

    fn autocommit(&self) -> bool {
        true
    }

    fn run<'c>(&'c self, conn: &'c mut AnyConnection) -> BoxFuture<'c, Result<u64, StoreError>> {
        Box::pin(async move {
            Ok(sqlx::query(
                "DELETE FROM quota_admissions WHERE (created_at, turn_id) IN \
                 (SELECT created_at, turn_id FROM quota_admissions WHERE created_at < $1 \
                  ORDER BY created_at LIMIT $2)",
            )
            .bind(self.now - 2 * MINUTE_MS)
            .bind(PRUNE_BATCH)
            .execute(&mut *conn)
            .await?
            .rows_affected())
        })
    }
}

/// Deletes the token counts of days before yesterday (`now` in Unix ms):
/// only today's are read, and yesterday's stay for replicas whose clocks
/// are behind.
pub(crate) struct PruneTokens {
    pub(crate) now: i64,
}

impl Write for PruneTokens {
    /// How many day counts were deleted.
    type Output = u64;

    fn autocommit(&self) -> bool {
        true
    }

    fn run<'c>(&'c self, conn: &'c mut AnyConnection) -> BoxFuture<'c, Result<u64, StoreError>> {
        Box::pin(async move {
            Ok(sqlx::query("DELETE FROM quota_tokens WHERE day < $1")
                .bind(day_of(self.now) - DAY_MS)
                .execute(&mut *conn)
                .await?
                .rows_affected())
        })
    }
}

/// Most [`PRUNE_BATCH`]es one call of [`Store::prune_admissions`] runs:
/// a backlog larger than this is left to the next call.
const PRUNE_BATCHES: usize = 100;

impl Store {
    /// Deletes the admissions the per-minute counts no longer read (`now`
    /// in Unix ms), in batches of [`PRUNE_BATCH`], at most
    /// [`PRUNE_BATCHES`] of them; returns how many went.
    pub async fn prune_admissions(&self, now: i64) -> Result<u64, StoreError> {
        let mut pruned = 0;
        for _ in 0..PRUNE_BATCHES {
            let batch = self.write(PruneAdmissions { now }).await?;
            pruned += batch;
            if batch < PRUNE_BATCH.unsigned_abs() {
                break;
            }
        }
        Ok(pruned)
    }
}

impl Usage {
    /// Whether one more stream is over `quota`'s streams limit.
    fn streams_exceed(&self, scope: Scope, quota: Quota) -> Option<QuotaExceeded> {
        let max = u64::from(quota.streams);
        (max > 0 && self.streams >= max).then(|| QuotaExceeded {
            scope,
            limit: Limit::Streams,
            max,
            // A stream may close any moment; try again shortly.
            retry_after: Duration::from_secs(1),
        })
    }

    fn exceeds(&self, scope: Scope, quota: Quota, now: i64) -> Option<QuotaExceeded> {
        let refuse = |limit, max: u64, wait_ms: i64| QuotaExceeded {
            scope,
            limit,
            max,
            retry_after: Duration::from_millis(u64::try_from(wait_ms.max(1_000)).unwrap_or(1_000)),
        };
        let concurrent = u64::from(quota.concurrent_turns);
        if concurrent > 0 && self.running >= concurrent {
            // A running turn may end any moment; try again shortly.
            return Some(refuse(Limit::ConcurrentTurns, concurrent, 1_000));
        }
        let per_minute = u64::from(quota.turns_per_minute);
        if per_minute > 0 && self.last_minute >= per_minute {
            let oldest = self.oldest_in_minute.unwrap_or(now);
            return Some(refuse(
                Limit::TurnsPerMinute,
                per_minute,
                oldest + MINUTE_MS - now,
            ));
        }
        let tomorrow = day_of(now) + DAY_MS;
        if quota.tokens_per_day > 0 && self.tokens_today >= quota.tokens_per_day {
            return Some(refuse(
                Limit::TokensPerDay,
                quota.tokens_per_day,
                tomorrow - now,
            ));
        }
        let cost = quota.cost_per_day.0;
        if cost > 0 && self.cost_today >= cost {
            return Some(refuse(Limit::CostPerDay, cost, tomorrow - now));
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_token_upserts_count_days_as_the_reads_do() {
        for scope in [Scope::User, Scope::Tenant] {
            let day = format!("created_at % {DAY_MS},");
            assert!(scope_sql(scope).record_spend.contains(&day), "{scope:?}");
        }
    }

    fn usage(running: u64, last_minute: u64, oldest: Option<i64>, tokens: u64) -> Usage {
        Usage {
            running,
            last_minute,
            oldest_in_minute: oldest,
            tokens_today: tokens,
            cost_today: 0,
            streams: 0,
        }
    }

    const QUOTA: Quota = Quota {
        concurrent_turns: 2,
        turns_per_minute: 3,
        tokens_per_day: 1_000,
        // 2.50 units.
        cost_per_day: Cost(2_500_000),
        streams: 2,
        awaiting: 0,
    };

    #[test]
    fn only_a_streams_limit_that_applies_to_the_caller_takes_leases() {
        let tenant_only = Quota {
            streams: 512,
            ..Quota::UNLIMITED
        };
        let admission = |tenant: Option<&str>, user: Quota| Admission {
            tenant: tenant.map(str::to_owned),
            user,
            tenant_quota: tenant_only,
            stream: None,
        };
        assert!(
            !admission(None, Quota::UNLIMITED).counts_streams(),
            "no tenant, no user limit"
        );
        assert!(admission(Some("guild"), Quota::UNLIMITED).counts_streams());
        assert!(admission(None, QUOTA).counts_streams());
    }

    #[test]
    fn the_streams_limit_refuses_one_more_than_it_allows() {
        let mut open = usage(0, 0, None, 0);
        open.streams = 1;
        assert_eq!(open.streams_exceed(Scope::User, QUOTA), None);
        open.streams = 2;
        let refused = open.streams_exceed(Scope::User, QUOTA).expect("refused");
        assert_eq!((refused.limit, refused.max), (Limit::Streams, 2));
        assert_eq!(open.streams_exceed(Scope::User, Quota::UNLIMITED), None);
    }

    #[test]
    fn each_limit_refuses_with_when_to_retry() {
        // 2026-11-24T12:00:00Z.
        let now = 1_795_521_600_000;
        assert_eq!(
            usage(1, 2, Some(now - 1), 999).exceeds(Scope::User, QUOTA, now),
            None
        );
        let busy = usage(2, 2, None, 0)
            .exceeds(Scope::User, QUOTA, now)
            .expect("refused");
        assert_eq!((busy.limit, busy.max), (Limit::ConcurrentTurns, 2));
        let fast = usage(0, 3, Some(now - 45_000), 0)
            .exceeds(Scope::Tenant, QUOTA, now)
            .expect("refused");
        assert_eq!(
            (fast.scope, fast.limit, fast.retry_after),
            (
                Scope::Tenant,
                Limit::TurnsPerMinute,
                Duration::from_secs(15)
            )
        );
        let spent = usage(0, 0, None, 1_000)
            .exceeds(Scope::User, QUOTA, now)
            .expect("refused");
        assert_eq!(
            (spent.limit, spent.retry_after),
            (Limit::TokensPerDay, Duration::from_secs(12 * 3600)),
            "until midnight UTC"
        );
        let mut dear = usage(0, 0, None, 10);
        dear.cost_today = 2_499_999;
        assert_eq!(dear.exceeds(Scope::Tenant, QUOTA, now), None);
        dear.cost_today = 2_500_000;
        let dear = dear.exceeds(Scope::Tenant, QUOTA, now).expect("refused");
        assert_eq!(
            (dear.limit, dear.max_text(), dear.retry_after),
            (
                Limit::CostPerDay,
                "2.5".to_owned(),
                Duration::from_secs(12 * 3600)
            ),
        );
        assert_eq!(
            usage(9, 9, Some(now), 9_999).exceeds(Scope::User, Quota::UNLIMITED, now),
            None
        );
    }

    #[test]
    fn a_cost_is_written_in_units_and_kept_in_micro_units() {
        let quota: Quota = serde_json::from_str(r#"{"cost_per_day": 2.5}"#).expect("parses");
        assert_eq!(quota.cost_per_day, Cost(2_500_000));
        let whole: Quota = serde_json::from_str(r#"{"cost_per_day": 20}"#).expect("parses");
        assert_eq!(whole.cost_per_day.to_string(), "20");
        assert_eq!(Cost(125).to_string(), "0.000125");
        assert_eq!(Cost(1_050_000).to_string(), "1.05");
        for bad in ["-1", "1e13"] {
            let parsed: Result<Quota, _> =
                serde_json::from_str(&format!(r#"{{"cost_per_day": {bad}}}"#));
            assert!(parsed.is_err(), "{bad}");
        }
    }
}
