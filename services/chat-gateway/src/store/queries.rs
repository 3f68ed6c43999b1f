//! The store's reads (portable SQL over `sqlx::any`, each filtered by
//! owner) and its write methods, which hand [`super::writes`] to the
//! store's writer.

use sqlx::{Row, any::AnyRow};

use super::{
    BeginTurn, ConversationSummary, FinishTurn, ListCursor, NewTurn, Store, StoreError,
    StoredEvent, TurnRecord, TurnState, now_ms,
    writes::{BeginTurnWrite, DeleteWrite, EncodedEvent, FinishTurnWrite},
};

fn is_unique_violation(error: &sqlx::Error) -> bool {
    matches!(error, sqlx::Error::Database(db) if db.is_unique_violation())
}

fn to_u32(value: i64) -> u32 {
    u32::try_from(value.max(0)).unwrap_or(u32::MAX)
}

fn turn_from_row(row: &AnyRow) -> Result<TurnRecord, StoreError> {
    let id: String = row.try_get("id")?;
    let state: String = row.try_get("state")?;
    let parsed = TurnState::parse(&state).ok_or_else(|| StoreError::CorruptTurn {
        turn: id.clone(),
        state,
    })?;
    Ok(TurnRecord {
        id,
        conversation_id: row.try_get("conversation_id")?,
        turn_index: to_u32(row.try_get("turn_index")?),
        state: parsed,
        outcome: row.try_get("outcome")?,
    })
}

fn summary_from_row(row: &AnyRow) -> Result<ConversationSummary, StoreError> {
    Ok(ConversationSummary {
        id: row.try_get("id")?,
        title: row.try_get("title")?,
        created_at: row.try_get("created_at")?,
        updated_at: row.try_get("updated_at")?,
        turn_count: to_u32(row.try_get("turn_count")?),
    })
}

impl Store {
    /// Stores a new turn and its user message in one transaction, creating
    /// the conversation when asked. A request id this owner already used
    /// stores nothing and returns the earlier turn.
    pub async fn begin_turn(&self, new: &NewTurn<'_>) -> Result<BeginTurn, StoreError> {
        if let Some(request_id) = new.request_id
            && let Some(existing) = self.turn_by_request(new.owner, request_id).await?
        {
            return Ok(BeginTurn::DuplicateRequest(existing));
        }
        let write = BeginTurnWrite {
            owner: new.owner.to_owned(),
            conversation_id: new.conversation_id.to_owned(),
            create: new.create,
            turn_id: new.turn_id.to_owned(),
            request_id: new.request_id.map(str::to_owned),
            user_message: EncodedEvent::new(new.user_message)?,
            title: new.title.to_owned(),
            now: now_ms(),
        };
        let error = match self.writes.run(write).await {
            Ok(Some(turn_index)) => {
                return Ok(BeginTurn::Started {
                    turn_index: to_u32(turn_index),
                });
            }
            Ok(None) => return Ok(BeginTurn::NotFound),
            Err(error) => error,
        };
        // Another call with the same request id won the race.
        if let (StoreError::Database(database), Some(request_id)) = (&error, new.request_id)
            && is_unique_violation(database)
            && let Some(existing) = self.turn_by_request(new.owner, request_id).await?
        {
            return Ok(BeginTurn::DuplicateRequest(existing));
        }
        Err(error)
    }

    /// Appends a turn's events and records how it ended. Returns false when
    /// the conversation no longer exists for this owner (deleted meanwhile).
    pub async fn finish_turn(&self, finish: &FinishTurn<'_>) -> Result<bool, StoreError> {
        let write = FinishTurnWrite {
            owner: finish.owner.to_owned(),
            conversation_id: finish.conversation_id.to_owned(),
            turn_id: finish.turn_id.to_owned(),
            state: finish.state,
            outcome: finish.outcome.clone(),
            events: finish
                .events
                .iter()
                .map(EncodedEvent::new)
                .collect::<Result<_, _>>()?,
            now: now_ms(),
        };
        self.writes.run(write).await
    }

    /// Every turn still marked running, as `(owner, conversation, turn)`.
    /// Maintenance only (start-up recovery): the one query not filtered by
    /// owner, and never reachable from a request.
    pub async fn running_turns(&self) -> Result<Vec<(String, String, String)>, StoreError> {
        let rows = sqlx::query("SELECT owner, conversation_id, id FROM turns WHERE state = $1")
            .bind(TurnState::Running.as_str())
            .fetch_all(&self.pool)
            .await?;
        rows.iter()
            .map(|row| {
                Ok((
                    row.try_get("owner")?,
                    row.try_get("conversation_id")?,
                    row.try_get("id")?,
                ))
            })
            .collect()
    }

    /// The turn this owner started with `request_id`, if any.
    pub async fn turn_by_request(
        &self,
        owner: &str,
        request_id: &str,
    ) -> Result<Option<TurnRecord>, StoreError> {
        let row = sqlx::query(
            "SELECT id, conversation_id, turn_index, state, outcome FROM turns \
             WHERE owner = $1 AND request_id = $2",
        )
        .bind(owner)
        .bind(request_id)
        .fetch_optional(&self.pool)
        .await?;
        row.as_ref().map(turn_from_row).transpose()
    }

    /// One turn of this owner.
    pub async fn turn(&self, owner: &str, turn_id: &str) -> Result<Option<TurnRecord>, StoreError> {
        let row = sqlx::query(
            "SELECT id, conversation_id, turn_index, state, outcome FROM turns \
             WHERE owner = $1 AND id = $2",
        )
        .bind(owner)
        .bind(turn_id)
        .fetch_optional(&self.pool)
        .await?;
        row.as_ref().map(turn_from_row).transpose()
    }

    /// The turns of a conversation of this owner, oldest first.
    pub async fn turns(
        &self,
        owner: &str,
        conversation_id: &str,
    ) -> Result<Vec<TurnRecord>, StoreError> {
        let rows = sqlx::query(
            "SELECT id, conversation_id, turn_index, state, outcome FROM turns \
             WHERE owner = $1 AND conversation_id = $2 ORDER BY turn_index",
        )
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
        let row = sqlx::query(
            "SELECT id, title, created_at, updated_at, turn_count FROM conversations \
             WHERE id = $1 AND owner = $2",
        )
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
        let rows = sqlx::query(
            "SELECT e.seq, e.turn_id, e.created_at, e.body FROM events e \
             JOIN conversations c ON c.id = e.conversation_id \
             WHERE c.id = $1 AND c.owner = $2 AND e.turn_id IN ( \
                 SELECT t.id FROM turns t WHERE t.conversation_id = $1 AND t.owner = $2 \
                 ORDER BY t.turn_index DESC LIMIT $3) \
             ORDER BY e.seq",
        )
        .bind(conversation_id)
        .bind(owner)
        .bind(i64::from(max_turns))
        .fetch_all(&self.pool)
        .await?;
        decode_events(conversation_id, &rows)
    }

    /// This owner's conversations, newest first, after `cursor`; returns at
    /// most `limit` and the cursor of the next page when there is one.
    pub async fn list(
        &self,
        owner: &str,
        limit: u32,
        cursor: Option<&ListCursor>,
    ) -> Result<(Vec<ConversationSummary>, Option<ListCursor>), StoreError> {
        let (updated_at, id) = match cursor {
            Some(cursor) => (cursor.updated_at, cursor.id.as_str()),
            None => (i64::MAX, ""),
        };
        let first_page = cursor.is_none();
        let rows = sqlx::query(
            "SELECT id, title, created_at, updated_at, turn_count FROM conversations \
             WHERE owner = $1 AND ($4 = 1 OR updated_at < $2 OR (updated_at = $2 AND id < $3)) \
             ORDER BY updated_at DESC, id DESC LIMIT $5",
        )
        .bind(owner)
        .bind(updated_at)
        .bind(id)
        .bind(i64::from(first_page))
        .bind(i64::from(limit) + 1)
        .fetch_all(&self.pool)
        .await?;
        let mut conversations = rows
            .iter()
            .map(summary_from_row)
            .collect::<Result<Vec<_>, _>>()?;
        let next = if conversations.len() > limit as usize {
            conversations.truncate(limit as usize);
            conversations.last().map(|last| ListCursor {
                updated_at: last.updated_at,
                id: last.id.clone(),
            })
        } else {
            None
        };
        Ok((conversations, next))
    }

    /// Deletes a conversation of this owner with its turns and events.
    /// Returns false when it does not exist for this owner.
    pub async fn delete(&self, owner: &str, id: &str) -> Result<bool, StoreError> {
        self.writes
            .run(DeleteWrite {
                owner: owner.to_owned(),
                conversation_id: id.to_owned(),
            })
            .await
    }
}

fn decode_events(conversation_id: &str, rows: &[AnyRow]) -> Result<Vec<StoredEvent>, StoreError> {
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
