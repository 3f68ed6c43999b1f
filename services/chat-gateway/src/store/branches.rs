//! The store's side of branches: a conversation's turn tree, the turns
//! and log of a branch page, a turn's user message (what an edit or a
//! regeneration starts from), and switching the current branch. See
//! [`super::tree`] for how the tree is kept.

use futures::future::BoxFuture;
use sqlx::{AnyConnection, AssertSqlSafe, Row};

use super::{
    EventBody, Store, StoreError, StoredEvent, TurnRecord,
    batch::Write,
    tree::{TreeTurn, TurnTree},
};

/// The most ids one `IN (...)` list binds; longer lists go in batches.
const IN_BATCH: usize = 200;

/// What [`Store::switch_branch`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Switched {
    /// The branch ending at the leaf is now current.
    Done,
    /// The conversation does not exist for this owner.
    NotFound,
    /// A turn runs or waits for input on the conversation: nothing changed.
    Busy(String),
}

struct SwitchWrite {
    owner: String,
    conversation_id: String,
    leaf: String,
}

impl Write for SwitchWrite {
    type Output = bool;

    fn autocommit(&self) -> bool {
        true
    }

    /// One statement: the leaf moves only while no turn of the
    /// conversation runs or waits (a turn begun meanwhile on any replica
    /// is either seen here or commits after, as the new leaf).
    fn run<'c>(&'c self, conn: &'c mut AnyConnection) -> BoxFuture<'c, Result<bool, StoreError>> {
        Box::pin(async move {
            let done = sqlx::query(
                "UPDATE conversations SET current_leaf = $3 WHERE id = $1 AND owner = $2 \
                 AND NOT EXISTS (SELECT 1 FROM turns t WHERE t.conversation_id = $1 \
                 AND t.state IN ('running', 'awaiting_input'))",
            )
            .bind(self.conversation_id.as_str())
            .bind(self.owner.as_str())
            .bind(self.leaf.as_str())
            .execute(&mut *conn)
            .await?;
            Ok(done.rows_affected() > 0)
        })
    }
}

impl Store {
    /// The turn tree of a conversation of this owner (empty when it has
    /// no turns or is not theirs): ids, positions and parents only.
    pub async fn turn_tree(
        &self,
        owner: &str,
        conversation_id: &str,
    ) -> Result<TurnTree, StoreError> {
        let rows = sqlx::query(
            "SELECT id, turn_index, parent_turn_id FROM turns \
             WHERE owner = $1 AND conversation_id = $2",
        )
        .bind(owner)
        .bind(conversation_id)
        .fetch_all(&self.pool)
        .await?;
        let turns = rows
            .iter()
            .map(|row| {
                Ok(TreeTurn {
                    id: row.try_get("id")?,
                    turn_index: u32::try_from(row.try_get::<i64, _>("turn_index")?.max(0))
                        .unwrap_or(u32::MAX),
                    parent_turn_id: row.try_get("parent_turn_id")?,
                })
            })
            .collect::<Result<Vec<_>, StoreError>>()?;
        Ok(TurnTree::new(turns))
    }

    /// Turns `ids` of a conversation of this owner (oldest first) and
    /// their log (in order).
    pub async fn turns_with_events(
        &self,
        owner: &str,
        conversation_id: &str,
        ids: &[&str],
    ) -> Result<(Vec<TurnRecord>, Vec<StoredEvent>), StoreError> {
        let mut turns = Vec::with_capacity(ids.len());
        let mut events = Vec::new();
        for batch in ids.chunks(IN_BATCH) {
            // Only numbered placeholders are formatted in; the ids are bound.
            let list = placeholders(3, batch.len());
            let mut query = sqlx::query(AssertSqlSafe(format!(
                "SELECT {} FROM turns WHERE owner = $1 AND conversation_id = $2 AND id IN ({list})",
                super::queries::TURN_COLUMNS
            )))
            .bind(owner)
            .bind(conversation_id);
            for id in batch {
                query = query.bind(*id);
            }
            for row in query.fetch_all(&self.pool).await? {
                turns.push(super::queries::turn_from_row(&row)?);
            }
            let mut query = sqlx::query(AssertSqlSafe(format!(
                "SELECT e.seq, e.turn_id, e.created_at, e.body FROM events e \
                 WHERE e.conversation_id = $1 AND e.turn_id IN ({list}) \
                 AND EXISTS (SELECT 1 FROM conversations c WHERE c.id = $1 AND c.owner = $2)"
            )))
            .bind(conversation_id)
            .bind(owner);
            for id in batch {
                query = query.bind(*id);
            }
            let rows = query.fetch_all(&self.pool).await?;
            events.extend(super::queries::decode_events(conversation_id, &rows)?);
        }
        turns.sort_by_key(|turn| turn.turn_index);
        events.sort_by_key(|event| event.seq);
        Ok((turns, events))
    }

    /// The user message turn `turn_id` of a conversation of this owner
    /// began with (an [`EventBody::UserMessage`]); `None` when there is no
    /// such turn.
    pub async fn user_message(
        &self,
        owner: &str,
        conversation_id: &str,
        turn_id: &str,
    ) -> Result<Option<EventBody>, StoreError> {
        let row = sqlx::query(
            "SELECT e.seq, e.body FROM events e JOIN turns t ON t.id = e.turn_id \
             WHERE e.turn_id = $1 AND t.owner = $2 AND t.conversation_id = $3 \
             AND e.kind = 'user_message' ORDER BY e.seq LIMIT 1",
        )
        .bind(turn_id)
        .bind(owner)
        .bind(conversation_id)
        .fetch_optional(&self.pool)
        .await?;
        let Some(row) = row else {
            return Ok(None);
        };
        let body: String = row.try_get("body")?;
        let event = serde_json::from_str(&body).map_err(|source| StoreError::CorruptEvent {
            conversation: conversation_id.to_owned(),
            seq: row.try_get("seq").unwrap_or_default(),
            source,
        })?;
        Ok(Some(event))
    }

    /// Makes the branch ending at turn `leaf` the current one of a
    /// conversation of this owner, unless a turn runs or waits on it.
    pub async fn switch_branch(
        &self,
        owner: &str,
        conversation_id: &str,
        leaf: &str,
    ) -> Result<Switched, StoreError> {
        let done = self
            .write(SwitchWrite {
                owner: owner.to_owned(),
                conversation_id: conversation_id.to_owned(),
                leaf: leaf.to_owned(),
            })
            .await?;
        if done {
            return Ok(Switched::Done);
        }
        if self.conversation(owner, conversation_id).await?.is_none() {
            return Ok(Switched::NotFound);
        }
        let busy = sqlx::query(
            "SELECT id FROM turns WHERE owner = $1 AND conversation_id = $2 \
             AND state IN ('running', 'awaiting_input')",
        )
        .bind(owner)
        .bind(conversation_id)
        .fetch_optional(&self.pool)
        .await?;
        Ok(match busy {
            Some(row) => Switched::Busy(row.try_get("id")?),
            // Ended between the two reads: the caller may try again.
            None => Switched::Busy(String::new()),
        })
    }
}

/// `$first, $first+1, ...`: `count` numbered placeholders.
fn placeholders(first: usize, count: usize) -> String {
    (first..first + count)
        .map(|i| format!("${i}"))
        .collect::<Vec<_>>()
        .join(", ")
}
