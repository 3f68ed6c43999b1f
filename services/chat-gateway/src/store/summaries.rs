//! What the store keeps after a turn, beside its answer: the rolling
//! summaries of turns a model no longer sees (migration 0019), and a
//! conversation's title written by a model.

use futures::future::BoxFuture;
use sqlx::{AnyConnection, Row};

use super::{
    Store, StoreError,
    batch::Write,
    group::{Statements, is_sqlite},
    now_ms, search,
};

/// A stored summary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Summary {
    /// The last turn it covers.
    pub turn_id: String,
    /// That turn's position in the conversation.
    pub turn_index: u32,
    /// The summary.
    pub text: String,
}

struct SummaryWrite {
    owner: String,
    conversation_id: String,
    summary: Summary,
    now: i64,
}

impl Write for SummaryWrite {
    type Output = bool;

    fn autocommit(&self) -> bool {
        true
    }

    /// Only for a turn of this owner's conversation; a summary of the same
    /// turn written first (by another replica) stays.
    fn run<'c>(&'c self, conn: &'c mut AnyConnection) -> BoxFuture<'c, Result<bool, StoreError>> {
        Box::pin(async move {
            let done = sqlx::query(
                "INSERT INTO summaries (turn_id, conversation_id, owner, turn_index, text, created_at) \
                 SELECT t.id, t.conversation_id, t.owner, t.turn_index, $4, $5 FROM turns t \
                 WHERE t.id = $1 AND t.owner = $2 AND t.conversation_id = $3 \
                 ON CONFLICT (turn_id) DO NOTHING",
            )
            .bind(self.summary.turn_id.as_str())
            .bind(self.owner.as_str())
            .bind(self.conversation_id.as_str())
            .bind(self.summary.text.as_str())
            .bind(self.now)
            .execute(&mut *conn)
            .await?;
            Ok(done.rows_affected() > 0)
        })
    }
}

struct TitleWrite {
    owner: String,
    conversation_id: String,
    from: String,
    to: String,
}

impl Write for TitleWrite {
    type Output = bool;

    fn autocommit(&self) -> bool {
        true
    }

    fn run<'c>(&'c self, conn: &'c mut AnyConnection) -> BoxFuture<'c, Result<bool, StoreError>> {
        Box::pin(async move {
            // The title's row in the search index changes with it.
            if !is_sqlite(conn) {
                let changed: i64 = sqlx::query(search::RETITLE_POSTGRES)
                    .bind(self.conversation_id.as_str())
                    .bind(self.owner.as_str())
                    .bind(self.from.as_str())
                    .bind(self.to.as_str())
                    .bind(search::clip(&self.to))
                    .fetch_one(&mut *conn)
                    .await?
                    .try_get("n")?;
                return Ok(changed > 0);
            }
            let done = sqlx::query(
                "UPDATE conversations SET title = $4 WHERE id = $1 AND owner = $2 AND title = $3",
            )
            .bind(self.conversation_id.as_str())
            .bind(self.owner.as_str())
            .bind(self.from.as_str())
            .bind(self.to.as_str())
            .execute(&mut *conn)
            .await?;
            if done.rows_affected() == 0 {
                return Ok(false);
            }
            let mut group = Statements::new(conn);
            search::replace_title(&mut group, &self.conversation_id, &self.to)?;
            group.fetch_all(conn).await?;
            Ok(true)
        })
    }
}

impl Store {
    /// Stores `summary` of a conversation of this owner; `false` when the
    /// turn is not theirs or a summary of it exists already.
    pub async fn write_summary(
        &self,
        owner: &str,
        conversation_id: &str,
        summary: Summary,
    ) -> Result<bool, StoreError> {
        self.write(SummaryWrite {
            owner: owner.to_owned(),
            conversation_id: conversation_id.to_owned(),
            summary,
            now: now_ms(),
        })
        .await
    }

    /// The summaries of a conversation of this owner, newest covered turn
    /// first.
    pub async fn summaries(
        &self,
        owner: &str,
        conversation_id: &str,
    ) -> Result<Vec<Summary>, StoreError> {
        let rows = sqlx::query(
            "SELECT turn_id, turn_index, text FROM summaries \
             WHERE owner = $1 AND conversation_id = $2 ORDER BY turn_index DESC",
        )
        .bind(owner)
        .bind(conversation_id)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|row| {
                Ok(Summary {
                    turn_id: row.try_get("turn_id")?,
                    turn_index: u32::try_from(row.try_get::<i64, _>("turn_index")?.max(0))
                        .unwrap_or(u32::MAX),
                    text: row.try_get("text")?,
                })
            })
            .collect()
    }

    /// Replaces a conversation's title `from` (the one it was given) with
    /// `to`; `false` when the title is no longer `from` (the user renamed
    /// it) or the conversation is gone.
    pub async fn retitle(
        &self,
        owner: &str,
        conversation_id: &str,
        from: &str,
        to: &str,
    ) -> Result<bool, StoreError> {
        self.write(TitleWrite {
            owner: owner.to_owned(),
            conversation_id: conversation_id.to_owned(),
            from: from.to_owned(),
            to: to.to_owned(),
        })
        .await
    }
}
