//! The store's reads (portable SQL over `sqlx::any`, each filtered by
//! owner) and its write methods, which hand [`super::writes`] to the
//! store's writer.

use sqlx::{Row, any::AnyRow};

use super::{
    BeginTurn, ConversationSummary, FinishTurn, ListCursor, NewTurn, Store, StoreError,
    StoredEvent, StoredUsage, TurnRecord, TurnState, now_ms,
    wire::to_u64,
    writes::{
        BeginTurnWrite, Begun, Decided, DeleteWrite, EncodedEvent, FinishTurnWrite, usage_of,
    },
};

/// The columns [`turn_from_row`] reads, from `turns`. A running turn's
/// `last_event_seq` is its newest stored batch's `last_seq`: the event log
/// adds batches without writing the turn's row (`wire::AppendWire`), and
/// the turn's end or pause writes the column (and the prune keeps a
/// running turn's batches).
pub(crate) const TURN_COLUMNS: &str = "id, conversation_id, turn_index, state, outcome, replica, retryable, \
     CASE WHEN turns.state = 'running' THEN COALESCE((SELECT e.last_seq FROM turn_events e \
     WHERE e.turn_id = turns.id ORDER BY e.first_seq DESC LIMIT 1), turns.last_event_seq) \
     ELSE turns.last_event_seq END AS last_event_seq, \
     payload_decision, feedback, parent_turn_id";

/// The turns of the branch that ends at turn `$1` of owner `$2` in
/// conversation `$3`, at most `$4` of them walking up from it: `branch`
/// (id). A NULL parent is the turn before (migration 0017); `''`, none.
/// Each step is one lookup by primary key (and, for a turn from before
/// branches, one by position): an `OR` of the two in the join made SQLite
/// scan the conversation's turns at every step (`benches/history.rs`, 500
/// stored turns: 12.0 ms a history with it, 1.09 ms now, where the query
/// by position takes 0.96 ms).
macro_rules! with_branch {
    ($rest:literal) => {
        concat!(
            "WITH RECURSIVE branch (id, parent_turn_id, turn_index, depth) AS ( \
                 SELECT id, parent_turn_id, turn_index, 1 FROM turns \
                 WHERE id = $1 AND owner = $2 AND conversation_id = $3 \
                 UNION ALL \
                 SELECT t.id, t.parent_turn_id, t.turn_index, b.depth + 1 FROM branch b \
                 JOIN turns t ON t.id = COALESCE(b.parent_turn_id, \
                     (SELECT p.id FROM turns p WHERE p.conversation_id = $3 \
                      AND p.turn_index = b.turn_index - 1)) \
                 WHERE b.depth < $4) ",
            $rest
        )
    };
}

/// The events of the last `$3` turns of conversation `$1` of owner `$2`,
/// oldest first. Read by turn (`events_by_turn`), so it costs the same for
/// a conversation of any length: selecting by conversation as well made
/// the planner go over every event the conversation ever had (sqlite3
/// 3.40, 5 000 turns: 3.6 ms per turn's history, now 0.17 ms). A turn's
/// events are its conversation's, and the turns are the owner's.
pub(crate) const RECENT_EVENTS: &str = "SELECT e.seq, e.turn_id, e.created_at, e.body FROM events e \
     WHERE e.turn_id IN ( \
         SELECT t.id FROM turns t WHERE t.conversation_id = $1 AND t.owner = $2 \
         ORDER BY t.turn_index DESC LIMIT $3) \
     ORDER BY e.seq";

fn is_unique_violation(error: &sqlx::Error) -> bool {
    matches!(error, sqlx::Error::Database(db) if db.is_unique_violation())
}

fn to_u32(value: i64) -> u32 {
    u32::try_from(value.max(0)).unwrap_or(u32::MAX)
}

pub(crate) fn turn_from_row(row: &AnyRow) -> Result<TurnRecord, StoreError> {
    let id: String = row.try_get("id")?;
    let state: String = row.try_get("state")?;
    let parsed = TurnState::parse(&state).ok_or_else(|| StoreError::CorruptTurn {
        turn: id.clone(),
        state,
    })?;
    Ok(TurnRecord {
        conversation_id: row.try_get("conversation_id")?,
        turn_index: to_u32(row.try_get("turn_index")?),
        state: parsed,
        outcome: row.try_get("outcome")?,
        replica: row.try_get("replica")?,
        retryable: row.try_get::<i64, _>("retryable")? != 0,
        last_event_seq: u64::try_from(row.try_get::<i64, _>("last_event_seq")?).unwrap_or(0),
        payload_decision: json_column(row, &id, "payload_decision")?,
        feedback: json_column(row, &id, "feedback")?,
        parent_turn_id: row.try_get("parent_turn_id")?,
        id,
    })
}

/// A nullable JSON column of turn `turn`, decoded.
fn json_column<T: serde::de::DeserializeOwned>(
    row: &AnyRow,
    turn: &str,
    column: &'static str,
) -> Result<Option<T>, StoreError> {
    let Some(text) = row.try_get::<Option<String>, _>(column)? else {
        return Ok(None);
    };
    serde_json::from_str(&text)
        .map(Some)
        .map_err(|source| StoreError::CorruptColumn {
            turn: turn.to_owned(),
            column,
            source,
        })
}

/// A SELECT of the conversations' columns [`summary_from_row`] reads,
/// then `$rest` (the WHERE and what follows).
macro_rules! select_summaries {
    ($rest:literal) => {
        concat!(
            "SELECT id, title, created_at, updated_at, turn_count, input_tokens, output_tokens, \
             cached_input_tokens, cache_write_tokens, reasoning_tokens, model_calls, \
             cost_micros, currency, current_leaf, \
             metadata, pinned, archived \
             FROM conversations ",
            $rest
        )
    };
}

/// The SELECT of [`summary_from_row`]'s columns, up to `FROM conversations`.
pub(crate) const SELECT_SUMMARIES: &str = select_summaries!("");

pub(crate) fn summary_from_row(row: &AnyRow) -> Result<ConversationSummary, StoreError> {
    let id: String = row.try_get("id")?;
    let metadata: String = row.try_get("metadata")?;
    let metadata =
        serde_json::from_str(&metadata).map_err(|source| StoreError::CorruptConversation {
            conversation: id.clone(),
            column: "metadata",
            source,
        })?;
    let count = |column: &str| -> Result<u64, StoreError> { Ok(to_u64(row.try_get(column)?)) };
    Ok(ConversationSummary {
        id,
        title: row.try_get("title")?,
        created_at: row.try_get("created_at")?,
        updated_at: row.try_get("updated_at")?,
        turn_count: to_u32(row.try_get("turn_count")?),
        current_leaf: row.try_get("current_leaf")?,
        usage: StoredUsage {
            input_tokens: count("input_tokens")?,
            output_tokens: count("output_tokens")?,
            cached_input_tokens: count("cached_input_tokens")?,
            cache_write_tokens: count("cache_write_tokens")?,
            reasoning_tokens: count("reasoning_tokens")?,
            model_calls: to_u32(row.try_get("model_calls")?),
            model: String::new(),
            cost_micros: row.try_get("cost_micros")?,
            currency: row.try_get("currency")?,
        },
        metadata,
        pinned: row.try_get::<i64, _>("pinned")? != 0,
        archived: row.try_get::<i64, _>("archived")? != 0,
    })
}

impl Store {
    /// Stores a new turn and its user message in one transaction, creating
    /// the conversation when asked, unless a turn is running on the
    /// conversation (on any replica: the database allows one). A request id
    /// whose turn failed with a retryable error is handed to the new turn;
    /// any other request id this owner already used stores nothing and
    /// returns the earlier turn.
    pub async fn begin_turn(&self, new: &NewTurn<'_>) -> Result<BeginTurn, StoreError> {
        self.begin(new, Decided::default()).await
    }

    /// [`Store::begin_turn`], telling `started` (the turn's position, and
    /// whether it is branched) as soon as the store has decided to start
    /// the turn, before that decision commits, where nothing but a failed
    /// commit can change it: on SQLite, whose one writer decides inside its
    /// transaction, for a turn without a request id (another call's
    /// request id meets the unique index only at the insert, which runs
    /// with the commit). Elsewhere `started` is dropped untold. The result
    /// comes, as ever, once the turn is committed: a caller that acts on
    /// `started` releases nothing before it, and undoes what it started
    /// when the result is not a start.
    pub async fn begin_turn_early(
        &self,
        new: &NewTurn<'_>,
        started: tokio::sync::oneshot::Sender<(u32, bool)>,
    ) -> Result<BeginTurn, StoreError> {
        let final_decision = self.backend() == super::Backend::Sqlite && new.request_id.is_none();
        let decided = if final_decision {
            Decided::to(started)
        } else {
            Decided::default()
        };
        self.begin(new, decided).await
    }

    async fn begin(&self, new: &NewTurn<'_>, decided: Decided) -> Result<BeginTurn, StoreError> {
        let write = BeginTurnWrite {
            owner: new.owner.to_owned(),
            conversation_id: new.conversation_id.to_owned(),
            create: new.create,
            turn_id: new.turn_id.to_owned(),
            request_id: new.request_id.map(str::to_owned),
            branch: new.parent.map(str::to_owned),
            user_message: EncodedEvent::new(new.user_message)?,
            search_text: super::search::indexed_text(new.user_message),
            title: new.title.to_owned(),
            replica: new.replica.to_owned(),
            lease_ttl: new.lease_ttl_ms.min(super::turns::MAX_LEASE_MS),
            stream_ahead: new.stream_ahead,
            // The trace of the call that begins the turn (the current
            // span's), for the span events of its decision and rating.
            trace_parent: parley_grpc::telemetry::propagation::current_traceparent(),
            admission: new.admission.clone(),
            postgres: self.backend() == super::Backend::Postgres,
            now: now_ms(),
            decided,
        };
        let error = match self.write(write).await {
            Ok(Begun::Started(turn_index, branched)) => {
                return Ok(BeginTurn::Started {
                    turn_index: to_u32(turn_index),
                    branched,
                });
            }
            Ok(Begun::NotFound) => return Ok(BeginTurn::NotFound),
            Ok(Begun::OverQuota(refused)) => return Ok(BeginTurn::OverQuota(refused)),
            Ok(Begun::Busy(turn_id)) => {
                // A request id already used wins over a busy conversation:
                // the caller replays or follows it.
                if let Some(request_id) = new.request_id
                    && let Some(existing) = self.turn_by_request(new.owner, request_id).await?
                    && !(existing.state == TurnState::Failed && existing.retryable)
                {
                    return Ok(BeginTurn::DuplicateRequest(Box::new(existing)));
                }
                return Ok(BeginTurn::Busy { turn_id });
            }
            Err(error) => error,
        };
        // Another call won a race: the same request id, or (PostgreSQL
        // replicas) another turn on the same conversation.
        if let StoreError::Database(database) = &error
            && is_unique_violation(database)
        {
            if let Some(request_id) = new.request_id
                && let Some(existing) = self.turn_by_request(new.owner, request_id).await?
                && existing.id != new.turn_id
            {
                return Ok(BeginTurn::DuplicateRequest(Box::new(existing)));
            }
            if let Some(running) = self.running_turn(new.owner, new.conversation_id).await? {
                return Ok(BeginTurn::Busy {
                    turn_id: running.id,
                });
            }
        }
        Err(error)
    }

    /// Appends a turn's events, its last wire events, and records how it
    /// ended, in one transaction. Returns false when the turn is no longer
    /// this replica's to end (the conversation was deleted, or another
    /// replica ended the turn after its lease expired): nothing is written.
    pub async fn finish_turn(&self, finish: FinishTurn<'_>) -> Result<bool, StoreError> {
        let write = FinishTurnWrite {
            owner: finish.owner.to_owned(),
            conversation_id: finish.conversation_id.to_owned(),
            turn_id: finish.turn_id.to_owned(),
            replica: Some(finish.replica.to_owned()),
            state: finish.state,
            retryable: finish.retryable,
            outcome: finish.outcome,
            usage: usage_of(&finish.events),
            search_text: finish.events.iter().find_map(super::search::indexed_text),
            events: finish
                .events
                .iter()
                .map(EncodedEvent::new)
                .collect::<Result<_, _>>()?,
            wire: finish.wire,
            notify: self.notifies(),
            pause: finish.pause,
            now: now_ms(),
        };
        self.write(write).await
    }

    /// The turn of `owner` (`$1`) that `condition` on `value` (`$2`) picks.
    async fn one_turn(
        &self,
        condition: &'static str,
        owner: &str,
        value: &str,
    ) -> Result<Option<TurnRecord>, StoreError> {
        let row = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {TURN_COLUMNS} FROM turns WHERE owner = $1 AND {condition}"
        )))
        .bind(owner)
        .bind(value)
        .fetch_optional(&self.pool)
        .await?;
        row.as_ref().map(turn_from_row).transpose()
    }

    /// The turn running on a conversation of this owner, if any.
    pub async fn running_turn(
        &self,
        owner: &str,
        conversation_id: &str,
    ) -> Result<Option<TurnRecord>, StoreError> {
        self.one_turn(
            "conversation_id = $2 AND state = 'running'",
            owner,
            conversation_id,
        )
        .await
    }

    /// The latest turn of a conversation of this owner, if any.
    pub async fn latest_turn(
        &self,
        owner: &str,
        conversation_id: &str,
    ) -> Result<Option<TurnRecord>, StoreError> {
        self.one_turn(
            "conversation_id = $2 ORDER BY turn_index DESC LIMIT 1",
            owner,
            conversation_id,
        )
        .await
    }

    /// The turn this owner started with `request_id`, if any.
    pub async fn turn_by_request(
        &self,
        owner: &str,
        request_id: &str,
    ) -> Result<Option<TurnRecord>, StoreError> {
        self.one_turn("request_id = $2", owner, request_id).await
    }

    /// One turn of this owner.
    pub async fn turn(&self, owner: &str, turn_id: &str) -> Result<Option<TurnRecord>, StoreError> {
        self.one_turn("id = $2", owner, turn_id).await
    }

    /// The last `max_turns` turns of a conversation of this owner, oldest
    /// first: those whose events [`Store::recent_events`] reads.
    pub async fn recent_turns(
        &self,
        owner: &str,
        conversation_id: &str,
        max_turns: u32,
    ) -> Result<Vec<TurnRecord>, StoreError> {
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {TURN_COLUMNS} FROM turns WHERE owner = $1 AND conversation_id = $2 \
             ORDER BY turn_index DESC LIMIT $3",
        )))
        .bind(owner)
        .bind(conversation_id)
        .bind(i64::from(max_turns))
        .fetch_all(&self.pool)
        .await?;
        let mut turns = rows
            .iter()
            .map(turn_from_row)
            .collect::<Result<Vec<_>, _>>()?;
        turns.reverse();
        Ok(turns)
    }

    /// The turns of a conversation of this owner, oldest first.
    pub async fn turns(
        &self,
        owner: &str,
        conversation_id: &str,
    ) -> Result<Vec<TurnRecord>, StoreError> {
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {TURN_COLUMNS} FROM turns WHERE owner = $1 AND conversation_id = $2 ORDER BY turn_index",
        )))
        .bind(owner)
        .bind(conversation_id)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(turn_from_row).collect()
    }

    /// A conversation of this owner.
    pub async fn conversation(
        &self,
        owner: &str,
        id: &str,
    ) -> Result<Option<ConversationSummary>, StoreError> {
        let row = sqlx::query(select_summaries!("WHERE id = $1 AND owner = $2"))
            .bind(id)
            .bind(owner)
            .fetch_optional(&self.pool)
            .await?;
        row.as_ref().map(summary_from_row).transpose()
    }

    /// The whole log of a conversation of this owner, oldest first (empty
    /// when it does not exist for this owner).
    pub async fn events(
        &self,
        owner: &str,
        conversation_id: &str,
    ) -> Result<Vec<StoredEvent>, StoreError> {
        let rows = sqlx::query(
            "SELECT e.seq, e.turn_id, e.created_at, e.body FROM events e \
             JOIN conversations c ON c.id = e.conversation_id \
             WHERE c.id = $1 AND c.owner = $2 ORDER BY e.seq",
        )
        .bind(conversation_id)
        .bind(owner)
        .fetch_all(&self.pool)
        .await?;
        decode_events(conversation_id, &rows)
    }

    /// The log of the last `max_turns` turns of a conversation of this
    /// owner, oldest first: what the model's history is rebuilt from.
    pub async fn recent_events(
        &self,
        owner: &str,
        conversation_id: &str,
        max_turns: u32,
    ) -> Result<Vec<StoredEvent>, StoreError> {
        let rows = sqlx::query(RECENT_EVENTS)
            .bind(conversation_id)
            .bind(owner)
            .bind(i64::from(max_turns))
            .fetch_all(&self.pool)
            .await?;
        decode_events(conversation_id, &rows)
    }

    /// The last `max_turns` turns of the branch of a conversation of this
    /// owner that ends at turn `leaf`, oldest first, with their log: what
    /// the model's history is rebuilt from once the conversation has
    /// branches ([`Store::recent_turns`] and [`Store::recent_events`]
    /// before).
    pub async fn branch_history(
        &self,
        owner: &str,
        conversation_id: &str,
        leaf: &str,
        max_turns: u32,
    ) -> Result<(Vec<TurnRecord>, Vec<StoredEvent>), StoreError> {
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "{} SELECT {TURN_COLUMNS} FROM turns WHERE id IN (SELECT id FROM branch) ORDER BY turn_index",
            with_branch!("")
        )))
        .bind(leaf)
        .bind(owner)
        .bind(conversation_id)
        .bind(i64::from(max_turns))
        .fetch_all(&self.pool)
        .await?;
        let turns = rows
            .iter()
            .map(turn_from_row)
            .collect::<Result<Vec<_>, _>>()?;
        let rows = sqlx::query(with_branch!(
            "SELECT e.seq, e.turn_id, e.created_at, e.body FROM events e \
             WHERE e.turn_id IN (SELECT id FROM branch) ORDER BY e.seq"
        ))
        .bind(leaf)
        .bind(owner)
        .bind(conversation_id)
        .bind(i64::from(max_turns))
        .fetch_all(&self.pool)
        .await?;
        Ok((turns, decode_events(conversation_id, &rows)?))
    }

    /// This owner's conversations that are not archived, newest first,
    /// after `cursor` ([`Store::list_filtered`] without other filters).
    pub async fn list(
        &self,
        owner: &str,
        limit: u32,
        cursor: Option<&ListCursor>,
    ) -> Result<(Vec<ConversationSummary>, Option<ListCursor>), StoreError> {
        self.list_filtered(owner, &super::search::ListFilter::default(), limit, cursor)
            .await
    }

    /// Deletes a conversation of this owner with its turns and events,
    /// unless it does not exist for this owner or a turn still runs on it.
    pub async fn delete(&self, owner: &str, id: &str) -> Result<super::Deletion, StoreError> {
        self.write(DeleteWrite {
            owner: owner.to_owned(),
            conversation_id: id.to_owned(),
        })
        .await
    }
}

pub(crate) fn decode_events(
    conversation_id: &str,
    rows: &[AnyRow],
) -> Result<Vec<StoredEvent>, StoreError> {
    rows.iter()
        .map(|row| {
            let seq: i64 = row.try_get("seq")?;
            let body: String = row.try_get("body")?;
            let body = serde_json::from_str(&body).map_err(|source| StoreError::CorruptEvent {
                conversation: conversation_id.to_owned(),
                seq,
                source,
            })?;
            Ok(StoredEvent {
                seq,
                turn_id: row.try_get("turn_id")?,
                created_at: row.try_get("created_at")?,
                body,
            })
        })
        .collect()
}
