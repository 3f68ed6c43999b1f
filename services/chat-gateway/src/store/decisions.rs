//! What the user did with a finished turn: their decision on its proposal
//! card (`RecordPayloadDecision`) and their rating (`SubmitFeedback`). Each
//! is a JSON column of the turn's row, replaced by the next one recorded
//! (last write wins, so a retried call changes nothing), and read back with
//! the turn ([`super::TurnRecord`]): by the next turn's history, whose
//! payload manifest shows the decision to the model, and by
//! `GetConversation`.

use futures::future::BoxFuture;
use sqlx::{AnyConnection, AssertSqlSafe, Row};

use super::{
    EventBody, Store, StoreError, StoredDecision, StoredFeedback, TurnState, batch::Write,
};

/// What recording a decision or a rating needs to know of its turn.
#[derive(Debug, Clone, PartialEq)]
pub struct DecidedTurn {
    /// Its state.
    pub state: TurnState,
    /// Its stored final event (base64 `TurnComplete`), once finished.
    pub outcome: Option<String>,
    /// The `traceparent` of the call that began it, when traced.
    pub trace_parent: Option<String>,
    /// The page its message was sent from.
    pub page: String,
}

/// Which column a record goes to.
#[derive(Debug, Clone, Copy)]
enum Column {
    PayloadDecision,
    Feedback,
}

impl Column {
    fn name(self) -> &'static str {
        match self {
            Self::PayloadDecision => "payload_decision",
            Self::Feedback => "feedback",
        }
    }
}

struct RecordWrite {
    column: Column,
    owner: String,
    conversation_id: String,
    turn_id: String,
    json: String,
}

impl Write for RecordWrite {
    type Output = bool;

    fn autocommit(&self) -> bool {
        true
    }

    fn run<'c>(&'c self, conn: &'c mut AnyConnection) -> BoxFuture<'c, Result<bool, StoreError>> {
        Box::pin(async move {
            let sql = format!(
                "UPDATE turns SET {} = $4 WHERE id = $1 AND owner = $2 AND conversation_id = $3",
                self.column.name()
            );
            let done = sqlx::query(AssertSqlSafe(sql))
                .bind(self.turn_id.as_str())
                .bind(self.owner.as_str())
                .bind(self.conversation_id.as_str())
                .bind(self.json.as_str())
                .execute(&mut *conn)
                .await?;
            Ok(done.rows_affected() > 0)
        })
    }
}

impl Store {
    /// Turn `turn_id` of conversation `conversation_id` of this owner, as
    /// recording a decision or rating needs it; `None` when there is no
    /// such turn (or it is another owner's).
    pub async fn decided_turn(
        &self,
        owner: &str,
        conversation_id: &str,
        turn_id: &str,
    ) -> Result<Option<DecidedTurn>, StoreError> {
        let Some(row) = sqlx::query(
            "SELECT state, outcome, trace_parent FROM turns \
             WHERE id = $1 AND owner = $2 AND conversation_id = $3",
        )
        .bind(turn_id)
        .bind(owner)
        .bind(conversation_id)
        .fetch_optional(&self.pool)
        .await?
        else {
            return Ok(None);
        };
        let state: String = row.try_get("state")?;
        let state = TurnState::parse(&state).ok_or_else(|| StoreError::CorruptTurn {
            turn: turn_id.to_owned(),
            state,
        })?;
        let message = sqlx::query(
            "SELECT seq, body FROM events WHERE turn_id = $1 AND kind = 'user_message' \
             ORDER BY seq LIMIT 1",
        )
        .bind(turn_id)
        .fetch_optional(&self.pool)
        .await?;
        let page = match message {
            Some(message) => {
                let body: String = message.try_get("body")?;
                match serde_json::from_str(&body) {
                    Ok(EventBody::UserMessage { page, .. }) => page.page,
                    Ok(_) => String::new(),
                    Err(source) => {
                        return Err(StoreError::CorruptEvent {
                            conversation: conversation_id.to_owned(),
                            seq: message.try_get("seq")?,
                            source,
                        });
                    }
                }
            }
            None => String::new(),
        };
        Ok(Some(DecidedTurn {
            state,
            outcome: row.try_get("outcome")?,
            trace_parent: row.try_get("trace_parent")?,
            page,
        }))
    }

    /// Stores the user's decision on the turn's proposal, replacing an
    /// earlier one; `false` when there is no such turn of this owner.
    pub async fn record_payload_decision(
        &self,
        owner: &str,
        conversation_id: &str,
        turn_id: &str,
        decision: &StoredDecision,
    ) -> Result<bool, StoreError> {
        self.record(
            Column::PayloadDecision,
            owner,
            conversation_id,
            turn_id,
            decision,
        )
        .await
    }

    /// Stores the user's rating of the turn, replacing an earlier one;
    /// `false` when there is no such turn of this owner.
    pub async fn record_feedback(
        &self,
        owner: &str,
        conversation_id: &str,
        turn_id: &str,
        feedback: &StoredFeedback,
    ) -> Result<bool, StoreError> {
        self.record(Column::Feedback, owner, conversation_id, turn_id, feedback)
            .await
    }

    async fn record(
        &self,
        column: Column,
        owner: &str,
        conversation_id: &str,
        turn_id: &str,
        value: &impl serde::Serialize,
    ) -> Result<bool, StoreError> {
        let json = serde_json::to_string(value).map_err(StoreError::Encode)?;
        self.write(RecordWrite {
            column,
            owner: owner.to_owned(),
            conversation_id: conversation_id.to_owned(),
            turn_id: turn_id.to_owned(),
            json,
        })
        .await
    }
}
