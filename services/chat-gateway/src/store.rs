//! The conversation store: an append-only event log per conversation in SQL.
//!
//! One code path serves SQLite (the embedded default, a file in the working
//! directory) and PostgreSQL: the store talks to an `sqlx::AnyPool`, and the
//! schema and every query are written in the SQL both understand (`TEXT` and
//! `BIGINT` columns, `$n` placeholders, ids made by the gateway, timestamps
//! as Unix milliseconds, JSON bodies as text). The alternative, an enum over
//! two typed pools, would repeat every query per backend for no gain here.
//! Migrations are embedded and run when the store opens.
//!
//! Every query filters by the owner, so a conversation of another user is
//! indistinguishable from one that does not exist. Appends to a conversation
//! bump its `last_seq` in the same statement that checks the owner, which
//! both allocates the event positions and serialises concurrent appends.

/// The database's clock in Unix ms, as SQL text for `concat!`: leases that
/// replicas compare are written and read on one clock, whatever each
/// replica's own says (`sqlite` or `postgres`).
macro_rules! db_now_ms {
    (sqlite) => {
        "CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)"
    };
    (postgres) => {
        "CAST(extract(epoch FROM clock_timestamp()) * 1000 AS BIGINT)"
    };
}

pub mod attachments;
mod batch;
pub mod branches;
pub mod decisions;
mod finding;
mod group;
pub mod listen;
pub mod model;
pub mod owners;
pub mod pauses;
mod queries;
pub mod quota;
pub mod reap;
pub mod search;
pub mod streams;
pub mod summaries;
pub mod tree;
pub mod turns;
pub mod wire;
mod writes;

use std::{borrow::Cow, time::Duration};

use sqlx::{
    AnyConnection, AnyPool, AssertSqlSafe, Connection, SqlSafeStr,
    any::AnyPoolOptions,
    migrate::{Migration, MigrationType, Migrator},
};

pub use model::{
    AssistantMessage, ConversationSummary, EventBody, StoredAttachmentRef, StoredDecision,
    StoredEvent, StoredFeedback, StoredPage, StoredPayload, StoredUsage, TurnRecord, TurnState,
    UserDecision,
};
pub use reap::{Finalize, ReapIf, ReapInput, Reaped};
pub use turns::HeldTurn;
pub use wire::TurnBatch;

/// The PostgreSQL channel that tells replicas a turn stored wire events or
/// ended (payload: the turn id).
pub const TURN_EVENTS_CHANNEL: &str = "parley_turn_events";
/// The PostgreSQL channel that asks a turn's replica to stop it (payload:
/// the turn id).
pub const TURN_CANCEL_CHANNEL: &str = "parley_turn_cancel";

/// Why a store operation failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The URL names no supported database.
    #[error("unsupported database url scheme `{0}` (expected sqlite: or postgres:)")]
    UnsupportedUrl(String),
    /// The database could not be reached.
    #[error("cannot open the {backend} database: {source}")]
    Connect {
        /// Which backend.
        backend: &'static str,
        /// The cause.
        #[source]
        source: sqlx::Error,
    },
    /// A migration failed.
    #[error("database migration failed: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    /// A query failed.
    #[error("database error: {0}")]
    Database(#[from] sqlx::Error),
    /// A stored event does not decode.
    #[error("stored event {seq} of conversation {conversation} is not valid: {source}")]
    CorruptEvent {
        /// The conversation.
        conversation: String,
        /// The event's position.
        seq: i64,
        /// The cause.
        #[source]
        source: serde_json::Error,
    },
    /// A stored turn state is unknown.
    #[error("stored turn {turn} has an unknown state `{state}`")]
    CorruptTurn {
        /// The turn.
        turn: String,
        /// The stored value.
        state: String,
    },
    /// A stored decision or rating of a turn does not decode.
    #[error("stored {column} of turn {turn} is not valid: {source}")]
    CorruptColumn {
        /// The turn.
        turn: String,
        /// The column.
        column: &'static str,
        /// The cause.
        #[source]
        source: serde_json::Error,
    },
    /// A stored column of a conversation does not decode.
    #[error("stored {column} of conversation {conversation} is not valid: {source}")]
    CorruptConversation {
        /// The conversation.
        conversation: String,
        /// The column.
        column: &'static str,
        /// The cause.
        #[source]
        source: serde_json::Error,
    },
    /// An event could not be encoded.
    #[error("cannot encode an event: {0}")]
    Encode(#[source] serde_json::Error),
    /// The SQLite writer task is gone (the store is closing).
    #[error("the store's writer has stopped")]
    WriterStopped,
    /// A write was refused by the fault injection of a test.
    #[error("injected store fault: {0}")]
    Injected(&'static str),
    /// An attachment a turn sends was deleted before its bytes were read.
    #[error("attachment {0} is no longer stored")]
    AttachmentGone(String),
    /// The object store holding attachment bytes failed
    /// ([`crate::blobs`]); `detail` names the failure, never a credential
    /// or a signed URL.
    #[error("object store: {action} failed: {detail}")]
    ObjectStore {
        /// What was asked (`PutObject`, `GetObject`...).
        action: &'static str,
        /// What went wrong.
        detail: String,
    },
}

/// Which database a store talks to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// An SQLite file.
    Sqlite,
    /// A PostgreSQL server.
    Postgres,
}

impl Backend {
    /// The backend a URL names.
    pub fn from_url(url: &str) -> Result<Self, StoreError> {
        let scheme = url.split(':').next().unwrap_or_default();
        match scheme {
            "sqlite" => Ok(Self::Sqlite),
            "postgres" | "postgresql" => Ok(Self::Postgres),
            other => Err(StoreError::UnsupportedUrl(other.to_owned())),
        }
    }

    /// A short name for logs and errors.
    pub fn name(self) -> &'static str {
        match self {
            Self::Sqlite => "sqlite",
            Self::Postgres => "postgres",
        }
    }
}

/// Connection pool bounds and SQLite's write batches.
#[derive(Debug, Clone)]
pub struct StoreOptions {
    /// Most connections held open.
    pub max_connections: u32,
    /// Longest wait for a free connection.
    pub acquire_timeout: Duration,
    /// Most writes SQLite commits in one transaction (see [`batch`]).
    pub write_batch: usize,
    /// PostgreSQL's `lock_timeout` on every connection.
    pub lock_timeout: Duration,
    /// PostgreSQL's `idle_in_transaction_session_timeout` on every
    /// connection.
    pub idle_in_transaction_timeout: Duration,
}

impl Default for StoreOptions {
    fn default() -> Self {
        Self {
            max_connections: 8,
            acquire_timeout: Duration::from_secs(5),
            write_batch: 64,
            lock_timeout: Duration::from_secs(10),
            idle_in_transaction_timeout: Duration::from_secs(5),
        }
    }
}

/// A new turn: its user message, stored before the model is called.
#[derive(Debug, Clone)]
pub struct NewTurn<'a> {
    /// The authenticated user.
    pub owner: &'a str,
    /// The conversation (made by the gateway when `create`).
    pub conversation_id: &'a str,
    /// Whether the conversation is new.
    pub create: bool,
    /// The new turn's id.
    pub turn_id: &'a str,
    /// The replica that runs it.
    pub replica: &'a str,
    /// Its first lease's length, ms from now on the store's clock.
    pub lease_ttl_ms: i64,
    /// How many events its replica may stream ahead of the stored ones
    /// (see [`ReapInput::stream_ahead`]).
    pub stream_ahead: u64,
    /// The idempotency key, when sent.
    pub request_id: Option<&'a str>,
    /// The turn's parent when it starts a branch (an edit or a
    /// regeneration: the parent of the turn it is a sibling of, `""` for
    /// a first message); `None` continues the current branch.
    pub parent: Option<&'a str>,
    /// The user message event.
    pub user_message: &'a EventBody,
    /// The title of a new conversation.
    pub title: &'a str,
    /// The limits the turn is admitted against, and the caller's tenant.
    pub admission: &'a quota::Admission,
}

/// What `begin_turn` did.
#[derive(Debug, Clone, PartialEq)]
pub enum BeginTurn {
    /// The turn and its user message are stored.
    Started {
        /// 0-based position of the turn in the conversation.
        turn_index: u32,
        /// Whether the turn names its parent (the conversation has
        /// branches) rather than following the turn before it: its
        /// history is then read along its branch.
        branched: bool,
    },
    /// The request id was already used by this owner: nothing was stored.
    DuplicateRequest(Box<TurnRecord>),
    /// The conversation does not exist for this owner.
    NotFound,
    /// Another turn is running on the conversation (on any replica):
    /// nothing was stored.
    Busy {
        /// The running turn.
        turn_id: String,
    },
    /// A limit of the user or the tenant refused the turn: nothing was
    /// stored.
    OverQuota(quota::QuotaExceeded),
}

/// What `delete` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Deletion {
    /// The conversation, its turns and events are gone.
    Deleted,
    /// The conversation does not exist for this owner.
    NotFound,
    /// A turn still runs on the conversation (on any replica): nothing was
    /// deleted, so the turn keeps counting against its user's limits
    /// until it has ended.
    TurnRunning {
        /// The running turn.
        turn_id: String,
    },
}

/// A batch of a turn's wire events, as stored: events `first_seq..=last_seq`
/// encoded by the caller (the store keeps them opaque).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WireBatch {
    /// The seq of the first event.
    pub first_seq: u64,
    /// The seq of the last event.
    pub last_seq: u64,
    /// The encoded events.
    pub events: String,
}

/// The end of a turn: its events and final state.
#[derive(Debug, Clone)]
pub struct FinishTurn<'a> {
    /// The authenticated user.
    pub owner: &'a str,
    /// The conversation.
    pub conversation_id: &'a str,
    /// The turn.
    pub turn_id: &'a str,
    /// The replica ending it: the turn must still be running there.
    pub replica: &'a str,
    /// How it ended.
    pub state: TurnState,
    /// For a failed turn: whether sending the same message again may
    /// succeed (a retried request id then runs again).
    pub retryable: bool,
    /// The final wire event to replay for a retried request id once the
    /// wire log is pruned (base64 of a prost-encoded `TurnComplete`).
    pub outcome: Option<String>,
    /// Reasoning, tool calls and results, and the assistant message.
    pub events: Vec<EventBody>,
    /// The turn's wire events not stored yet, its `complete` last.
    pub wire: Option<WireBatch>,
    /// Set when the turn pauses (`state` is [`TurnState::AwaitingInput`])
    /// instead of ending.
    pub pause: Option<Pause>,
}

/// What a pausing turn stores for its continuation.
#[derive(Debug, Clone)]
pub struct Pause {
    /// The continuation (base64 of a prost-encoded message the store does
    /// not read).
    pub continuation: String,
    /// How long the pause waits, ms from now on the store's clock.
    pub wait_ms: i64,
}

/// A position in the conversation list (newest first).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListCursor {
    /// `updated_at` of the last conversation returned.
    pub updated_at: i64,
    /// Its id.
    pub id: String,
}

/// The conversation store.
#[derive(Debug, Clone)]
pub struct Store {
    pool: AnyPool,
    backend: Backend,
    /// Where it was opened from (PostgreSQL's listener connects there too).
    url: String,
    /// Test-only fault injection on writes.
    faults: Faults,
    /// Where writes go. SQLite has one writer at a time, and a connection
    /// that finds the write lock taken sleeps in SQLite's busy handler with
    /// growing pauses (up to 100 ms each), so its writes queue to one task
    /// that commits them in batches; reads (WAL) never wait. PostgreSQL
    /// writes run side by side.
    writes: batch::Writes,
}

const MIGRATIONS: &[(i64, &str, &str)] = &[
    (1, "init", include_str!("store/migrations/0001_init.sql")),
    (
        2,
        "durable turns",
        include_str!("store/migrations/0002_durable_turns.sql"),
    ),
    (
        3,
        "stream ahead",
        include_str!("store/migrations/0003_stream_ahead.sql"),
    ),
    (
        4,
        "scoped owners",
        include_str!("store/migrations/0004_scoped_owners.sql"),
    ),
    (
        5,
        "quotas",
        include_str!("store/migrations/0005_quotas.sql"),
    ),
    (
        6,
        "watched",
        include_str!("store/migrations/0006_watched.sql"),
    ),
    (
        7,
        "quota reads",
        include_str!("store/migrations/0007_quota_reads.sql"),
    ),
    (
        8,
        "quota admissions",
        include_str!("store/migrations/0008_quota_admissions.sql"),
    ),
    (
        9,
        "stream leases",
        include_str!("store/migrations/0009_stream_leases.sql"),
    ),
    (
        11,
        "awaiting input",
        include_str!("store/migrations/0011_awaiting_input.sql"),
    ),
    (
        12,
        "turn decisions",
        include_str!("store/migrations/0012_turn_decisions.sql"),
    ),
    (
        13,
        "conversation usage",
        include_str!("store/migrations/0013_conversation_usage.sql"),
    ),
    (14, "cost", include_str!("store/migrations/0014_cost.sql")),
    (
        15,
        "attachments",
        include_str!("store/migrations/0015_attachments.sql"),
    ),
    (
        16,
        "attachment objects",
        include_str!("store/migrations/0016_attachment_objects.sql"),
    ),
    (
        17,
        "turn tree",
        include_str!("store/migrations/0017_turn_tree.sql"),
    ),
    (
        19,
        "summaries",
        include_str!("store/migrations/0019_summaries.sql"),
    ),
];

/// The migrations whose SQL differs per backend beyond `{bytes}`:
/// `(version, description, SQLite's, PostgreSQL's)`, run in version order
/// with [`MIGRATIONS`]. Full-text search is SQLite's FTS5 on one and a
/// `tsvector` column under a GIN index on the other.
const BACKEND_MIGRATIONS: &[(i64, &str, &str, &str)] = &[(
    18,
    "conversation search",
    include_str!("store/migrations/0018_conversation_search.sqlite.sql"),
    include_str!("store/migrations/0018_conversation_search.postgres.sql"),
)];

/// Makes the store's writes fail on demand, as a full disk or a lost
/// connection would, for tests of what the gateway then tells clients. A
/// test-support switch: off unless a test turns it on.
#[derive(Debug, Clone, Default)]
pub struct Faults(std::sync::Arc<std::sync::atomic::AtomicBool>);

impl Faults {
    /// Makes every write fail (`true`) or succeed again (`false`).
    pub fn fail_writes(&self, fail: bool) {
        self.0.store(fail, std::sync::atomic::Ordering::SeqCst);
    }

    fn check(&self) -> Result<(), StoreError> {
        if self.0.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(StoreError::Injected("writes are failing"));
        }
        Ok(())
    }
}

/// A duration in milliseconds, as an `i64` for the store.
pub(crate) fn millis(duration: Duration) -> i64 {
    i64::try_from(duration.as_millis()).unwrap_or(i64::MAX)
}

/// The migrations, in `backend`'s words: `{bytes}` is its byte string
/// type, and [`BACKEND_MIGRATIONS`] have a text per backend (the things
/// the portable SQL cannot say alike). A database only ever meets one
/// backend's text, so its checksums stay put.
fn migrator(backend: Backend) -> Migrator {
    migrator_until(backend, i64::MAX)
}

/// [`migrator`] with the migrations up to `last` only (tests build a
/// database as an older gateway left it).
fn migrator_until(backend: Backend, last: i64) -> Migrator {
    let bytes = match backend {
        Backend::Sqlite => "BLOB",
        Backend::Postgres => "BYTEA",
    };
    let mut all: Vec<(i64, &str, &str)> = MIGRATIONS.to_vec();
    all.extend(
        BACKEND_MIGRATIONS
            .iter()
            .map(|(version, description, sqlite, postgres)| {
                let sql = match backend {
                    Backend::Sqlite => *sqlite,
                    Backend::Postgres => *postgres,
                };
                (*version, *description, sql)
            }),
    );
    all.sort_by_key(|(version, ..)| *version);
    all.retain(|(version, ..)| *version <= last);
    Migrator::with_migrations(
        all.iter()
            .map(|(version, description, sql)| {
                let sql: Cow<'static, str> = if sql.contains("{bytes}") {
                    Cow::Owned(sql.replace("{bytes}", bytes))
                } else {
                    Cow::Borrowed(*sql)
                };
                Migration::new(
                    *version,
                    Cow::Borrowed(*description),
                    MigrationType::Simple,
                    sqlx::AssertSqlSafe(sql).into_sql_str(),
                    false,
                )
            })
            .collect(),
    )
}

impl Store {
    /// Makes the connections the pool opens from now on use `url` (a
    /// database URL file read again); open connections keep theirs.
    pub fn set_url(&self, url: &str) -> Result<(), StoreError> {
        let backend = Backend::from_url(url)?;
        if backend != self.backend {
            return Err(StoreError::Connect {
                backend: backend.name(),
                source: sqlx::Error::Configuration(
                    "the database URL names another backend than the store was opened with".into(),
                ),
            });
        }
        let options: sqlx::any::AnyConnectOptions =
            url.parse().map_err(|source| StoreError::Connect {
                backend: backend.name(),
                source,
            })?;
        self.pool.set_connect_options(options);
        Ok(())
    }

    /// Opens the database named by `url` and runs the migrations.
    pub async fn open(url: &str, options: &StoreOptions) -> Result<Self, StoreError> {
        let backend = Backend::from_url(url)?;
        sqlx::any::install_default_drivers();
        // An in-memory SQLite database exists once per connection.
        let max_connections = if backend == Backend::Sqlite && url.contains(":memory:") {
            1
        } else {
            options.max_connections.max(1)
        };
        let memory = url.contains(":memory:");
        // Bounds on what one session can make another wait for: a row lock
        // is waited for at most `lock_timeout`, and a session idle inside a
        // transaction (its replica frozen, or cut off mid-write) is ended
        // by the server after `idle_in_transaction_timeout`, its locks with
        // it. Without them, a SIGSTOPped replica held a turn's row and a
        // delete on another replica waited forever.
        let session_limits = format!(
            "SET lock_timeout = {}; SET idle_in_transaction_session_timeout = {}",
            // At least 1: 0 would turn the limit off.
            millis(options.lock_timeout).max(1),
            millis(options.idle_in_transaction_timeout).max(1)
        );
        // One connection first, so that a database that cannot be opened is
        // reported with its own cause ("unable to open database file",
        // "password authentication failed"), not as a pool time-out.
        let probe = AnyConnection::connect(url)
            .await
            .map_err(|source| StoreError::Connect {
                backend: backend.name(),
                source,
            })?;
        let _ = probe.close().await;
        let pool = AnyPoolOptions::new()
            .max_connections(max_connections)
            .acquire_timeout(options.acquire_timeout)
            .after_connect(move |connection, _| {
                let session_limits = session_limits.clone();
                Box::pin(async move {
                    if backend == Backend::Postgres {
                        sqlx::raw_sql(AssertSqlSafe(session_limits))
                            .execute(&mut *connection)
                            .await?;
                    }
                    if backend == Backend::Sqlite {
                        // Statement journals (a multi-row statement inside
                        // the writer's transaction keeps one) and the
                        // planner's temporary tables in memory, not in a
                        // file created and unlinked each time.
                        sqlx::raw_sql("PRAGMA temp_store = MEMORY")
                            .execute(&mut *connection)
                            .await?;
                    }
                    if backend == Backend::Sqlite && !memory {
                        // With WAL (set below), NORMAL syncs at checkpoints
                        // only: commits survive a crash of the process.
                        sqlx::raw_sql("PRAGMA synchronous = NORMAL")
                            .execute(&mut *connection)
                            .await?;
                        // The writer's commits leave checkpoints to a task
                        // beside it (see `batch`).
                        sqlx::raw_sql(batch::AUTOCHECKPOINT)
                            .execute(&mut *connection)
                            .await?;
                    }
                    Ok(())
                })
            })
            .connect(url)
            .await
            .map_err(|source| StoreError::Connect {
                backend: backend.name(),
                source,
            })?;
        if backend == Backend::Sqlite && !memory {
            // Persistent for the file: readers no longer block the writer.
            // Set once here, while the pool holds its only connection.
            sqlx::raw_sql("PRAGMA journal_mode = WAL")
                .execute(&pool)
                .await?;
        }
        match backend {
            // On a connection of its own, outside `lock_timeout`: a replica
            // starting while another migrates waits for that one's
            // advisory lock (for the whole database) however long its
            // migrations take, instead of failing to start.
            Backend::Postgres => {
                let own = AnyPoolOptions::new()
                    .max_connections(1)
                    .connect(url)
                    .await
                    .map_err(|source| StoreError::Connect {
                        backend: backend.name(),
                        source,
                    })?;
                let migrated = migrator(backend).run(&own).await;
                own.close().await;
                migrated?;
            }
            Backend::Sqlite => migrator(backend).run(&pool).await?,
        }
        tracing::info!(
            backend = backend.name(),
            max_connections,
            "conversation store ready"
        );
        let writes = match backend {
            Backend::Sqlite => batch::Writes::batched(pool.clone(), options.write_batch),
            Backend::Postgres => batch::Writes::direct(pool.clone()),
        };
        Ok(Self {
            pool,
            backend,
            url: url.to_owned(),
            faults: Faults::default(),
            writes,
        })
    }

    /// Runs a write (see [`batch`]) unless faults are injected.
    async fn write<W: batch::Write>(&self, write: W) -> Result<W::Output, StoreError> {
        self.faults.check()?;
        self.writes.run(write).await
    }

    /// The switch that makes this store's writes fail (tests).
    pub fn faults(&self) -> &Faults {
        &self.faults
    }

    /// Whether writes NOTIFY the other replicas (PostgreSQL; an SQLite file
    /// has one process).
    pub(crate) fn notifies(&self) -> bool {
        self.backend == Backend::Postgres
    }

    /// Which database this is.
    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// Closes the pool, waiting for connections in use.
    pub async fn close(&self) {
        self.pool.close().await;
    }
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|elapsed| i64::try_from(elapsed.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// The title of a conversation: its first message, shortened.
pub fn title_from(message: &str, max_chars: usize) -> String {
    let line = message
        .lines()
        .map(str::trim)
        .find(|line| !line.is_empty())
        .unwrap_or("");
    if line.chars().count() <= max_chars {
        return line.to_owned();
    }
    let mut title: String = line.chars().take(max_chars.saturating_sub(1)).collect();
    title.push('…');
    title
}

#[cfg(test)]
mod tests;
