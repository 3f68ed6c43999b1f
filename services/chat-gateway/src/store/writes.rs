//! The store's conversation writes as [`Write`]s: a turn's start, its end,
//! and deleting a conversation (the lease and wire-log writes are in
//! [`super::turns`]).
//!
//! Each owns its inputs, already encoded (JSON bodies are serialised by the
//! caller, not in the writer's queue), runs portable SQL filtered by owner,
//! and returns before writing anything when the conversation is not this
//! owner's: it may share its transaction with other writes (see
//! [`super::batch`]).

use futures::future::BoxFuture;
use sqlx::{AnyConnection, Arguments, Row};
use tokio::sync::oneshot;

use super::{
    Deletion, EventBody, StoreError, StoredUsage, TurnState, WireBatch,
    batch::{Deferred, Write, run_whole},
    group::{Statements, is_sqlite, on_store_clock},
    quota::{self, Admission, QuotaExceeded},
    search, streams,
};

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

/// Adds to `group` the statements that insert `events` from `first_seq`.
fn insert_events(
    group: &mut Statements,
    conversation_id: &str,
    turn_id: &str,
    first_seq: i64,
    events: &[EncodedEvent],
    now: i64,
) -> Result<(), StoreError> {
    for (seq, event) in (first_seq..).zip(events) {
        group.push(
            "INSERT INTO events (conversation_id, seq, turn_id, kind, body, created_at) \
             VALUES ($1, $2, $3, $4, $5, $6)",
            |values| {
                values.add(conversation_id)?;
                values.add(seq)?;
                values.add(turn_id)?;
                values.add(event.kind)?;
                values.add(event.body.as_str())?;
                values.add(now)
            },
        )?;
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
    /// The turn's parent when it starts a branch (an edit or a
    /// regeneration): a turn id, or `""` for a root; `None` for a message
    /// that continues the current branch.
    pub(crate) branch: Option<String>,
    pub(crate) user_message: EncodedEvent,
    /// The user message's text the search index keeps, if any.
    pub(crate) search_text: Option<String>,
    pub(crate) title: String,
    pub(crate) replica: String,
    /// The first lease's length, ms from now on the store's clock.
    pub(crate) lease_ttl: i64,
    pub(crate) stream_ahead: u64,
    /// The `traceparent` of the call that begins it, when traced.
    pub(crate) trace_parent: Option<String>,
    /// The limits the turn is admitted against, and the caller's tenant.
    pub(crate) admission: Admission,
    /// Whether to take PostgreSQL's advisory locks for the limits.
    pub(crate) postgres: bool,
    pub(crate) now: i64,
    /// Told once the write has decided to start the turn, before its last
    /// statements run and commit (see [`Store::begin_turn_early`]).
    ///
    /// [`Store::begin_turn_early`]: super::Store::begin_turn_early
    pub(crate) decided: Decided,
}

/// Where a [`BeginTurnWrite`] tells that it decided to start its turn: at
/// most once, however often the write runs.
#[derive(Debug, Default)]
pub(crate) struct Decided(std::sync::Mutex<Option<oneshot::Sender<(u32, bool)>>>);

impl Decided {
    /// Tells `tell` the turn's position and whether it is branched.
    pub(crate) fn to(tell: oneshot::Sender<(u32, bool)>) -> Self {
        Self(std::sync::Mutex::new(Some(tell)))
    }

    fn tell(&self, turn_index: i64, branched: bool) {
        let taken = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        if let Some(tell) = taken {
            // Nobody waits any more: the caller went on without it.
            let _ = tell.send((u32::try_from(turn_index).unwrap_or(u32::MAX), branched));
        }
    }
}

/// What [`BeginTurnWrite`] did.
#[derive(Debug)]
pub(crate) enum Begun {
    /// Stored, at this 0-based position; with whether it names its parent
    /// (the conversation has branches) rather than following the turn
    /// before it.
    Started(i64, bool),
    /// The conversation is not this owner's (nothing written).
    NotFound,
    /// This turn is running on the conversation (nothing written).
    Busy(String),
    /// A limit of the user or tenant refused it (nothing written).
    OverQuota(QuotaExceeded),
}

/// Adds to `group` the statement that inserts a wire batch of a turn.
fn insert_wire(
    group: &mut Statements,
    turn_id: &str,
    batch: &WireBatch,
    now: i64,
) -> Result<(), StoreError> {
    group.push(
        "INSERT INTO turn_events (turn_id, first_seq, last_seq, events, created_at) \
         VALUES ($1, $2, $3, $4, $5)",
        |values| {
            values.add(turn_id)?;
            values.add(to_i64(batch.first_seq))?;
            values.add(to_i64(batch.last_seq))?;
            values.add(batch.events.as_str())?;
            values.add(now)
        },
    )
}

pub(crate) fn to_i64(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

/// Tells other replicas (PostgreSQL LISTEN) that `turn_id` has new wire
/// events or ended; delivered when the transaction commits.
pub(crate) async fn notify(
    conn: &mut AnyConnection,
    channel: &str,
    turn_id: &str,
) -> Result<(), StoreError> {
    sqlx::query("SELECT pg_notify($1, $2)")
        .bind(channel)
        .bind(turn_id)
        .execute(&mut *conn)
        .await?;
    Ok(())
}

impl Write for BeginTurnWrite {
    type Output = Begun;

    fn run<'c>(&'c self, conn: &'c mut AnyConnection) -> BoxFuture<'c, Result<Begun, StoreError>> {
        Box::pin(run_whole(self, conn))
    }

    /// The inserts are left to run with the COMMIT.
    fn run_deferring<'c>(
        &'c self,
        conn: &'c mut AnyConnection,
    ) -> BoxFuture<'c, Result<Deferred<Begun>, StoreError>> {
        let unwritten = |output| Deferred {
            output: Some(output),
            tail: None,
        };
        Box::pin(async move {
            // The conversation's current leaf, read with the check that no
            // turn runs on it (one statement): the new turn's parent.
            let mut current_leaf = None;
            if !self.create {
                // Checked before anything is written (the write may share
                // its transaction); PostgreSQL replicas racing past it meet
                // the unique index on running turns instead.
                let row = sqlx::query(
                    "SELECT c.current_leaf, (SELECT t.id FROM turns t \
                     WHERE t.conversation_id = c.id AND t.state = 'running') AS running \
                     FROM conversations c WHERE c.id = $1 AND c.owner = $2",
                )
                .bind(self.conversation_id.as_str())
                .bind(self.owner.as_str())
                .fetch_optional(&mut *conn)
                .await?;
                let Some(row) = row else {
                    return Ok(unwritten(Begun::NotFound));
                };
                if let Some(running) = row.try_get::<Option<String>, _>("running")? {
                    return Ok(unwritten(Begun::Busy(running)));
                }
                current_leaf = row.try_get::<Option<String>, _>("current_leaf")?;
            }
            // A conversation that never branched keeps its turns' parents
            // implicit (NULL: the turn before); once it has branches, each
            // new turn names its parent and becomes the current leaf.
            let parent = self.branch.clone().or(current_leaf);
            let branched = parent.is_some();
            if let Some(refused) =
                quota::check(conn, &self.owner, &self.admission, self.now, self.postgres).await?
            {
                return Ok(unwritten(Begun::OverQuota(refused)));
            }
            // What is left writes without reading: on SQLite it goes with
            // the COMMIT; on PostgreSQL one statement, two with a request id.
            let sqlite = is_sqlite(conn);
            let mut group = Statements::new(conn);
            if let Some(request_id) = &self.request_id {
                // A turn that failed with a retryable error gives its request
                // id up to the new attempt: before the turn's insert takes
                // it (the unique index on owner and request id).
                group.push(
                    "UPDATE turns SET request_id = NULL \
                     WHERE owner = $1 AND request_id = $2 AND state = 'failed' AND retryable = 1",
                    |values| {
                        values.add(self.owner.as_str())?;
                        values.add(request_id.as_str())
                    },
                )?;
                group.then();
            }
            let (seq, turn_index) = if self.create {
                group.push(
                    "INSERT INTO conversations (id, owner, title, created_at, updated_at, turn_count, last_seq) \
                     VALUES ($1, $2, $3, $4, $4, 1, 1)",
                    |values| {
                        values.add(self.conversation_id.as_str())?;
                        values.add(self.owner.as_str())?;
                        values.add(self.title.as_str())?;
                        values.add(self.now)
                    },
                )?;
                (1_i64, 0_i64)
            } else {
                // A leaf set since the read above (a replica's SwitchBranch)
                // is replaced by this turn, whose parent is then the turn
                // before it: the tree stays whole either way.
                let row = sqlx::query(
                    "UPDATE conversations SET last_seq = last_seq + 1, turn_count = turn_count + 1, updated_at = $3, \
                     current_leaf = CASE WHEN $5 = 0 AND current_leaf IS NULL THEN NULL ELSE $4 END \
                     WHERE id = $1 AND owner = $2 RETURNING last_seq, turn_count",
                )
                .bind(self.conversation_id.as_str())
                .bind(self.owner.as_str())
                .bind(self.now)
                .bind(self.turn_id.as_str())
                .bind(i64::from(branched))
                .fetch_optional(&mut *conn)
                .await?;
                let Some(row) = row else {
                    return Ok(unwritten(Begun::NotFound));
                };
                let turn_count: i64 = row.try_get("turn_count")?;
                (row.try_get("last_seq")?, turn_count - 1)
            };
            let insert = on_store_clock(
                conn,
                "INSERT INTO turns (id, conversation_id, owner, request_id, turn_index, state, outcome, \
                 created_at, finished_at, replica, lease_until, stream_ahead, tenant, trace_parent, parent_turn_id) \
                 VALUES ($1, $2, $3, $4, $5, $6, NULL, $7, NULL, $8, {now} + $9, $10, $11, $12, $13)",
            );
            group.push(insert, |values| {
                values.add(self.turn_id.as_str())?;
                values.add(self.conversation_id.as_str())?;
                values.add(self.owner.as_str())?;
                values.add(self.request_id.as_deref())?;
                values.add(turn_index)?;
                values.add(TurnState::Running.as_str())?;
                values.add(self.now)?;
                values.add(self.replica.as_str())?;
                values.add(self.lease_ttl)?;
                values.add(to_i64(self.stream_ahead))?;
                values.add(self.admission.tenant.as_deref())?;
                values.add(self.trace_parent.as_deref())?;
                values.add(parent.as_deref())
            })?;
            insert_events(
                &mut group,
                &self.conversation_id,
                &self.turn_id,
                seq,
                std::slice::from_ref(&self.user_message),
                self.now,
            )?;
            // The message (and a new conversation's title) into the search
            // index: one statement.
            let mut texts: Vec<(&str, &str)> = Vec::with_capacity(2);
            if self.create && !self.title.is_empty() {
                texts.push(("", self.title.as_str()));
            }
            if let Some(text) = &self.search_text {
                texts.push((self.turn_id.as_str(), text.as_str()));
            }
            search::index_texts(&mut group, &self.conversation_id, &texts)?;
            if self.admission.counts_in_ledger() {
                quota::record_admission(
                    &mut group,
                    &self.turn_id,
                    &self.owner,
                    self.admission.tenant.as_deref(),
                    self.now,
                )?;
            }
            if let Some(stream) = &self.admission.stream {
                streams::insert_lease(
                    &mut group,
                    sqlite,
                    stream,
                    &self.owner,
                    self.admission.tenant.as_deref(),
                    &self.replica,
                )?;
            }
            self.decided.tell(turn_index, branched);
            Ok(Deferred {
                output: Some(Begun::Started(turn_index, branched)),
                tail: Some(group),
            })
        })
    }
}

/// A turn's events and how it ended.
#[derive(Debug)]
pub(crate) struct FinishTurnWrite {
    pub(crate) owner: String,
    pub(crate) conversation_id: String,
    pub(crate) turn_id: String,
    /// The replica that must still hold the turn (`None`: the turn's lease
    /// must have expired — the sweep).
    pub(crate) replica: Option<String>,
    pub(crate) state: TurnState,
    pub(crate) retryable: bool,
    pub(crate) outcome: Option<String>,
    pub(crate) events: Vec<EncodedEvent>,
    /// The answer's text the search index keeps, if any.
    pub(crate) search_text: Option<String>,
    /// The usage the turn's ending records ([`usage_of`] its events): added
    /// to its conversation's total and, input + output, to the daily
    /// token limits.
    pub(crate) usage: StoredUsage,
    /// The turn's last wire events, when the event log is on.
    pub(crate) wire: Option<WireBatch>,
    /// Whether to NOTIFY other replicas (PostgreSQL).
    pub(crate) notify: bool,
    /// Set when the turn pauses instead of ending.
    pub(crate) pause: Option<super::Pause>,
    pub(crate) now: i64,
}

/// The usage an ending's events record (its assistant message's; none
/// for a pause, whose usage is recorded when the turn ends).
pub(crate) fn usage_of(events: &[EventBody]) -> StoredUsage {
    events
        .iter()
        .find_map(|event| match event {
            EventBody::AssistantMessage(message) => message.usage.clone(),
            _ => None,
        })
        .unwrap_or_default()
}

/// The columns a turn's end sets. The placeholders of [`FinishTurnWrite::end_turn`]:
/// `$1` turn, `$2` owner, `$3` state, `$4` outcome, `$5` now, `$6`
/// retryable, `$7` its last wire seq, `$8` the replica that must hold it
/// (or 0, when its lease must have expired on the store's clock: `{now} +
/// $8`), `$9` tokens, `$10`
/// conversation, `$11` how many events the end appends, `$12` a pause's
/// continuation and `$13` how long it waits (both NULL for an end, which
/// clears them), `$14`–`$21` the usage added to the conversation's
/// (`add_usage!`).
macro_rules! set_ended {
    () => {
        "UPDATE turns SET state = $3, outcome = $4, finished_at = $5, retryable = $6, \
         last_event_seq = CASE WHEN $7 > last_event_seq THEN $7 ELSE last_event_seq END, \
         lease_until = NULL, tokens = $9, continuation = $12, \
         input_until = {now} + $13 "
    };
}

/// The conversation's columns a turn's end adds its usage to: `$14` input,
/// `$15` output, `$16` cached input, `$17` cache write, `$18` reasoning
/// tokens, `$19` model calls, `$20` cost (all 0 for a pause), `$21` its
/// currency (empty: unpriced, the conversation's stays).
macro_rules! add_usage {
    () => {
        "input_tokens = input_tokens + $14, output_tokens = output_tokens + $15, \
         cached_input_tokens = cached_input_tokens + $16, \
         cache_write_tokens = cache_write_tokens + $17, \
         reasoning_tokens = reasoning_tokens + $18, model_calls = model_calls + $19, \
         cost_micros = cost_micros + $20, \
         currency = CASE WHEN $21 = '' THEN currency ELSE $21 END "
    };
}

/// The turn, while it runs and is held as `$held` says.
macro_rules! running_turn {
    ($held:literal) => {
        concat!(
            "WHERE id = $1 AND owner = $2 AND conversation_id = $10 AND state = 'running' AND ",
            $held
        )
    };
}

/// Ends the turn and takes the seqs of its events from its conversation,
/// in one query: `last_seq` (no row: the turn is not running or not held
/// so, and nothing was written). SQLite: the conversation first, only
/// while the turn is as expected, then the turn, only when the
/// conversation was (`changes()`); the writer is alone, so both read the
/// same. PostgreSQL: one statement, the turn's row lock first (`ended`),
/// and `ended` counts it, so a turn ended without its conversation is told
/// apart (and rolled back).
macro_rules! end_turn_sql {
    (sqlite, $held:literal) => {
        concat!(
            "UPDATE conversations SET last_seq = last_seq + $11, updated_at = $5, ",
            add_usage!(),
            "WHERE id = $10 AND owner = $2 AND EXISTS (SELECT 1 FROM turns ",
            running_turn!($held),
            ") RETURNING last_seq;\n",
            set_ended!(),
            running_turn!($held),
            " AND changes() = 1"
        )
    };
    (postgres, $held:literal) => {
        concat!(
            "WITH ended AS (",
            set_ended!(),
            running_turn!($held),
            " RETURNING id), \
             seqs AS (UPDATE conversations SET last_seq = last_seq + $11, updated_at = $5, ",
            add_usage!(),
            "WHERE id = $10 AND owner = $2 AND EXISTS (SELECT 1 FROM ended) RETURNING last_seq) \
             SELECT (SELECT count(*) FROM ended) AS ended, (SELECT last_seq FROM seqs) AS last_seq"
        )
    };
}

impl FinishTurnWrite {
    /// Input + output tokens, for the daily token limits.
    fn tokens(&self) -> i64 {
        to_i64(
            self.usage
                .input_tokens
                .saturating_add(self.usage.output_tokens),
        )
    }

    /// How many events the end appends (the seqs it takes).
    fn appended(&self) -> i64 {
        i64::try_from(self.events.len()).unwrap_or(i64::MAX)
    }

    /// Marks the turn finished if it is still running and held as this
    /// write expects, and moves its conversation's `last_seq` on past the
    /// events it appends: that `last_seq`, or `None` when nothing changed.
    async fn end_turn(&self, conn: &mut AnyConnection) -> Result<Option<i64>, StoreError> {
        let last_seq = self.wire.as_ref().map_or(0, |wire| to_i64(wire.last_seq));
        let sqlite = is_sqlite(conn);
        let template = match (sqlite, &self.replica) {
            (true, Some(_)) => end_turn_sql!(sqlite, "replica = $8"),
            (true, None) => {
                end_turn_sql!(sqlite, "(lease_until IS NULL OR lease_until < {now} + $8)")
            }
            (false, Some(_)) => end_turn_sql!(postgres, "replica = $8"),
            (false, None) => end_turn_sql!(
                postgres,
                "(lease_until IS NULL OR lease_until < {now} + $8)"
            ),
        };
        let query = on_store_clock(conn, template);
        let query = sqlx::query(sqlx::AssertSqlSafe(query.as_str()))
            .bind(self.turn_id.as_str())
            .bind(self.owner.as_str())
            .bind(self.state.as_str())
            .bind(self.outcome.as_deref())
            .bind(self.now)
            .bind(i64::from(self.retryable))
            .bind(last_seq);
        let query = match &self.replica {
            Some(replica) => query.bind(replica.as_str()),
            None => query.bind(0_i64),
        }
        .bind(self.tokens())
        .bind(self.conversation_id.as_str())
        .bind(self.appended())
        .bind(self.pause.as_ref().map(|pause| pause.continuation.as_str()))
        .bind(self.pause.as_ref().map(|pause| pause.wait_ms));
        let usage = &self.usage;
        let query = query
            .bind(to_i64(usage.input_tokens))
            .bind(to_i64(usage.output_tokens))
            .bind(to_i64(usage.cached_input_tokens))
            .bind(to_i64(usage.cache_write_tokens))
            .bind(to_i64(usage.reasoning_tokens))
            .bind(i64::from(usage.model_calls))
            .bind(usage.cost_micros.max(0))
            .bind(usage.currency.as_str());
        // Every row (not `fetch_optional`): on SQLite the statement after
        // the one that returns a row must run too.
        let rows = query.fetch_all(&mut *conn).await?;
        let Some(row) = rows.first() else {
            return Ok(None);
        };
        if sqlite {
            return Ok(Some(row.try_get("last_seq")?));
        }
        let ended: i64 = row.try_get("ended")?;
        match row.try_get::<Option<i64>, _>("last_seq")? {
            Some(last_seq) if ended == 1 => Ok(Some(last_seq)),
            None if ended == 0 => Ok(None),
            // The turn's row exists, so its conversation does (cascade).
            _ => Err(StoreError::Database(sqlx::Error::RowNotFound)),
        }
    }
}

impl Write for FinishTurnWrite {
    /// False when the turn is not this writer's to end any more: the
    /// conversation was deleted, or another replica ended the turn after
    /// its lease expired (nothing written).
    type Output = bool;

    fn run<'c>(&'c self, conn: &'c mut AnyConnection) -> BoxFuture<'c, Result<bool, StoreError>> {
        Box::pin(run_whole(self, conn))
    }

    /// The inserts are left to run with the COMMIT.
    fn run_deferring<'c>(
        &'c self,
        conn: &'c mut AnyConnection,
    ) -> BoxFuture<'c, Result<Deferred<bool>, StoreError>> {
        Box::pin(async move {
            let Some(last_seq) = self.end_turn(conn).await? else {
                return Ok(Deferred {
                    output: Some(false),
                    tail: None,
                });
            };
            let count = self.appended();
            // The rest writes without reading: on SQLite it goes with the
            // COMMIT; on PostgreSQL one statement.
            let mut group = Statements::new(conn);
            insert_events(
                &mut group,
                &self.conversation_id,
                &self.turn_id,
                last_seq - count + 1,
                &self.events,
                self.now,
            )?;
            if let Some(wire) = &self.wire {
                insert_wire(&mut group, &self.turn_id, wire, self.now)?;
            }
            if let Some(text) = &self.search_text {
                search::index_texts(
                    &mut group,
                    &self.conversation_id,
                    &[(self.turn_id.as_str(), text.as_str())],
                )?;
            }
            quota::record_spend(
                &mut group,
                &self.turn_id,
                self.tokens(),
                self.usage.cost_micros.max(0),
            )?;
            if self.notify {
                // PostgreSQL only; the same statement as the inserts.
                group.push("SELECT pg_notify($1, $2)", |values| {
                    values.add(super::TURN_EVENTS_CHANNEL)?;
                    values.add(self.turn_id.as_str())
                })?;
            }
            Ok(Deferred {
                output: Some(true),
                tail: Some(group),
            })
        })
    }
}

/// A conversation with its turns and events, unless a turn still runs on
/// it: deleting that turn's row would free its user's running-turn slot
/// while its replica still runs it.
#[derive(Debug)]
pub(crate) struct DeleteWrite {
    pub(crate) owner: String,
    pub(crate) conversation_id: String,
}

impl Write for DeleteWrite {
    /// Nothing is deleted unless [`Deletion::Deleted`].
    type Output = Deletion;

    fn run<'c>(
        &'c self,
        conn: &'c mut AnyConnection,
    ) -> BoxFuture<'c, Result<Deletion, StoreError>> {
        Box::pin(async move {
            // The conversation's row lock first (PostgreSQL): a turn being
            // begun on it commits before the check below, or finds the
            // conversation gone.
            let owned = sqlx::query(
                "UPDATE conversations SET updated_at = updated_at WHERE id = $1 AND owner = $2",
            )
            .bind(self.conversation_id.as_str())
            .bind(self.owner.as_str())
            .execute(&mut *conn)
            .await?
            .rows_affected();
            if owned == 0 {
                return Ok(Deletion::NotFound);
            }
            let running = sqlx::query(
                "SELECT id FROM turns WHERE conversation_id = $1 AND state = 'running'",
            )
            .bind(self.conversation_id.as_str())
            .fetch_optional(&mut *conn)
            .await?;
            if let Some(row) = running {
                return Ok(Deletion::TurnRunning {
                    turn_id: row.try_get("id")?,
                });
            }
            // The objects of its attachments are deleted once this
            // commits (before the rows go: the foreign key cascades).
            sqlx::query(
                "INSERT INTO attachment_purges (attachment_id, object_key, upload_ref, created_at) \
                 SELECT id, object_key, upload_ref, $2 FROM attachments \
                 WHERE conversation_id = $1 AND object_key IS NOT NULL \
                 ON CONFLICT (attachment_id) DO NOTHING",
            )
            .bind(self.conversation_id.as_str())
            .bind(super::now_ms())
            .execute(&mut *conn)
            .await?;
            sqlx::query("DELETE FROM search_texts WHERE conversation_id = $1")
                .bind(self.conversation_id.as_str())
                .execute(&mut *conn)
                .await?;
            sqlx::query("DELETE FROM conversations WHERE id = $1 AND owner = $2")
                .bind(self.conversation_id.as_str())
                .bind(self.owner.as_str())
                .execute(&mut *conn)
                .await?;
            // The foreign keys cascade; these also clean up where they are off.
            sqlx::query(
                "DELETE FROM attachment_chunks WHERE attachment_id IN \
                 (SELECT id FROM attachments WHERE conversation_id = $1)",
            )
            .bind(self.conversation_id.as_str())
            .execute(&mut *conn)
            .await?;
            sqlx::query("DELETE FROM attachments WHERE conversation_id = $1")
                .bind(self.conversation_id.as_str())
                .execute(&mut *conn)
                .await?;
            sqlx::query(
                "DELETE FROM turn_events WHERE turn_id IN (SELECT id FROM turns WHERE conversation_id = $1)",
            )
            .bind(self.conversation_id.as_str())
            .execute(&mut *conn)
            .await?;
            sqlx::query("DELETE FROM events WHERE conversation_id = $1")
                .bind(self.conversation_id.as_str())
                .execute(&mut *conn)
                .await?;
            sqlx::query("DELETE FROM turns WHERE conversation_id = $1")
                .bind(self.conversation_id.as_str())
                .execute(&mut *conn)
                .await?;
            Ok(Deletion::Deleted)
        })
    }
}
