//! The store's reads and write of [`super::search`]: the filtered list,
//! the ranked search and `UpdateConversation`'s write.

use std::collections::BTreeMap;

use futures::future::BoxFuture;
use sqlx::{AnyConnection, Arguments, AssertSqlSafe, Encode, Row, Type, any::AnyArguments};

use super::{
    ConversationSummary, ListCursor, Store, StoreError,
    batch::Write,
    group::Statements,
    queries::{SELECT_SUMMARIES, summary_from_row},
    search::{
        Archived, ConversationUpdate, ListFilter, MAX_METADATA_ENTRIES, Updated, replace_title,
    },
};

/// A query's text and its values, each placeholder numbered as it is bound.
#[derive(Default)]
struct Query {
    text: String,
    values: AnyArguments,
}

impl Query {
    /// Binds `value` and returns its placeholder.
    fn bind<'q, T>(&mut self, value: T) -> Result<String, StoreError>
    where
        T: 'q + Encode<'q, sqlx::Any> + Type<sqlx::Any>,
    {
        self.values
            .add(value)
            .map_err(|error| StoreError::Database(sqlx::Error::Encode(error)))?;
        Ok(format!("${}", self.values.len()))
    }

    /// The conditions of `filter` on conversation `c`, each after `AND`.
    fn filter(&mut self, filter: &ListFilter, sqlite: bool) -> Result<(), StoreError> {
        match filter.archived {
            Archived::Exclude => self.text.push_str(" AND c.archived = 0"),
            Archived::Only => self.text.push_str(" AND c.archived = 1"),
            Archived::Include => {}
        }
        if filter.pinned_only {
            self.text.push_str(" AND c.pinned = 1");
        }
        for (key, value) in &filter.metadata {
            let condition = if sqlite {
                // Keys hold no `"` (checked): a quoted path member.
                let path = self.bind(format!("$.\"{key}\""))?;
                let value = self.bind(value.as_str())?;
                format!(" AND json_extract(c.metadata, {path}) = {value}")
            } else {
                let key = self.bind(key.as_str())?;
                let value = self.bind(value.as_str())?;
                format!(" AND (CAST(c.metadata AS jsonb) ->> CAST({key} AS TEXT)) = {value}")
            };
            self.text.push_str(&condition);
        }
        Ok(())
    }
}

impl Store {
    /// This owner's conversations that pass `filter`, newest first, after
    /// `cursor`; at most `limit`, and the cursor of the next page when
    /// there is one.
    pub async fn list_filtered(
        &self,
        owner: &str,
        filter: &ListFilter,
        limit: u32,
        cursor: Option<&ListCursor>,
    ) -> Result<(Vec<ConversationSummary>, Option<ListCursor>), StoreError> {
        let sqlite = self.backend() == super::Backend::Sqlite;
        let mut query = Query::default();
        let owner = query.bind(owner)?;
        query.text = format!("{SELECT_SUMMARIES}c WHERE c.owner = {owner}");
        query.filter(filter, sqlite)?;
        if let Some(cursor) = cursor {
            let updated_at = query.bind(cursor.updated_at)?;
            let id = query.bind(cursor.id.as_str())?;
            query.text.push_str(&format!(
                " AND (c.updated_at < {updated_at} OR (c.updated_at = {updated_at} AND c.id < {id}))"
            ));
        }
        let limit_value = query.bind(i64::from(limit) + 1)?;
        query.text.push_str(&format!(
            " ORDER BY c.updated_at DESC, c.id DESC LIMIT {limit_value}"
        ));
        let rows = sqlx::query_with(AssertSqlSafe(query.text), query.values)
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

    /// This owner's conversations that pass `filter` and have a text (a
    /// message, an answer or the title) holding every one of `terms`
    /// ([`query_terms`]), best match first, then newest: at most `limit`
    /// from position `offset`, and the offset of the next page when there
    /// is one. Ranks move as the index changes, so pages are positions in
    /// the ranking at the time each is read.
    pub async fn search(
        &self,
        owner: &str,
        terms: &[String],
        filter: &ListFilter,
        limit: u32,
        offset: u32,
    ) -> Result<(Vec<ConversationSummary>, Option<u32>), StoreError> {
        if terms.is_empty() {
            return Ok((Vec::new(), None));
        }
        let sqlite = self.backend() == super::Backend::Sqlite;
        let mut query = Query::default();
        let owner = query.bind(owner)?;
        // Only the current branch of a conversation that has branches: its
        // titles, and its texts of turns on the branch up from its leaf.
        let current = format!(
            "AND (s.turn_id = '' \
             OR s.conversation_id IN (SELECT id FROM conversations WHERE owner = {owner} AND current_leaf IS NULL) \
             OR s.turn_id IN (SELECT id FROM on_branch))"
        );
        // The best text of each of the owner's conversations that match.
        let matches = if sqlite {
            // Every term a quoted FTS5 string (terms hold no `"`; doubled
            // anyway), all of them required.
            let expression = terms
                .iter()
                .map(|term| format!("\"{}\"", term.replace('"', "\"\"")))
                .collect::<Vec<_>>()
                .join(" ");
            let expression = query.bind(expression)?;
            format!(
                "SELECT s.conversation_id, MAX(-i.rank) AS score FROM search_index i \
                 JOIN search_texts s ON s.id = i.rowid \
                 WHERE search_index MATCH {expression} \
                 AND s.conversation_id IN (SELECT id FROM conversations WHERE owner = {owner}) \
                 {current} GROUP BY s.conversation_id"
            )
        } else {
            let words = query.bind(terms.join(" "))?;
            format!(
                "SELECT s.conversation_id, MAX(ts_rank(s.document, q.query)) AS score \
                 FROM search_texts s, plainto_tsquery('simple', {words}) AS q (query) \
                 WHERE s.document @@ q.query \
                 AND s.conversation_id IN (SELECT id FROM conversations WHERE owner = {owner}) \
                 {current} GROUP BY s.conversation_id"
            )
        };
        // The turns on the current branches of the owner's conversations
        // that have branches (migration 0017: a NULL parent is the turn
        // before), each step a lookup by key as in `with_branch!`.
        query.text = format!(
            "WITH RECURSIVE on_branch (id, parent_turn_id, turn_index, conversation_id) AS ( \
                 SELECT t.id, t.parent_turn_id, t.turn_index, t.conversation_id \
                 FROM conversations c JOIN turns t ON t.id = c.current_leaf \
                 WHERE c.owner = {owner} AND c.current_leaf IS NOT NULL \
                 UNION ALL \
                 SELECT t.id, t.parent_turn_id, t.turn_index, t.conversation_id FROM on_branch b \
                 JOIN turns t ON t.id = COALESCE(b.parent_turn_id, \
                     (SELECT p.id FROM turns p WHERE p.conversation_id = b.conversation_id \
                      AND p.turn_index = b.turn_index - 1))) \
             {SELECT_SUMMARIES}c JOIN ({matches}) m ON m.conversation_id = c.id \
             WHERE c.owner = {owner}"
        );
        query.filter(filter, sqlite)?;
        let limit_value = query.bind(i64::from(limit) + 1)?;
        let offset_value = query.bind(i64::from(offset))?;
        query.text.push_str(&format!(
            " ORDER BY m.score DESC, c.updated_at DESC, c.id DESC \
             LIMIT {limit_value} OFFSET {offset_value}"
        ));
        let rows = sqlx::query_with(AssertSqlSafe(query.text), query.values)
            .fetch_all(&self.pool)
            .await?;
        let mut conversations = rows
            .iter()
            .map(summary_from_row)
            .collect::<Result<Vec<_>, _>>()?;
        let next = (conversations.len() > limit as usize).then(|| {
            conversations.truncate(limit as usize);
            offset.saturating_add(limit)
        });
        Ok((conversations, next))
    }

    /// Changes a conversation of this owner as `update` asks (its title
    /// indexed again when it changes); its `updated_at` stays.
    pub async fn update_conversation(
        &self,
        owner: &str,
        conversation_id: &str,
        update: ConversationUpdate,
    ) -> Result<Updated, StoreError> {
        let done = self
            .write(UpdateWrite {
                owner: owner.to_owned(),
                conversation_id: conversation_id.to_owned(),
                update,
            })
            .await?;
        if let Some(refused) = done {
            return Ok(refused);
        }
        Ok(match self.conversation(owner, conversation_id).await? {
            Some(summary) => Updated::Done(Box::new(summary)),
            None => Updated::NotFound,
        })
    }
}

/// The write of [`Store::update_conversation`].
#[derive(Debug)]
struct UpdateWrite {
    owner: String,
    conversation_id: String,
    update: ConversationUpdate,
}

impl Write for UpdateWrite {
    /// `None` once written; else why nothing was.
    type Output = Option<Updated>;

    fn run<'c>(
        &'c self,
        conn: &'c mut AnyConnection,
    ) -> BoxFuture<'c, Result<Option<Updated>, StoreError>> {
        Box::pin(async move {
            // The row's lock first (PostgreSQL), so that two merges of
            // metadata do not lose one another's entries.
            let row = sqlx::query(
                "UPDATE conversations SET pinned = pinned WHERE id = $1 AND owner = $2 \
                 RETURNING metadata",
            )
            .bind(self.conversation_id.as_str())
            .bind(self.owner.as_str())
            .fetch_optional(&mut *conn)
            .await?;
            let Some(row) = row else {
                return Ok(Some(Updated::NotFound));
            };
            let stored: String = row.try_get("metadata")?;
            let mut metadata: BTreeMap<String, String> =
                serde_json::from_str(&stored).map_err(|source| {
                    StoreError::CorruptConversation {
                        conversation: self.conversation_id.clone(),
                        column: "metadata",
                        source,
                    }
                })?;
            let update = &self.update;
            for key in &update.remove_metadata {
                metadata.remove(key);
            }
            metadata.extend(
                update
                    .set_metadata
                    .iter()
                    .map(|(key, value)| (key.clone(), value.clone())),
            );
            if metadata.len() > MAX_METADATA_ENTRIES {
                return Ok(Some(Updated::TooManyEntries(metadata.len())));
            }
            let metadata = serde_json::to_string(&metadata).map_err(StoreError::Encode)?;
            let mut group = Statements::new(conn);
            group.push(
                "UPDATE conversations SET title = COALESCE(CAST($3 AS TEXT), title), metadata = $4, \
                 pinned = COALESCE(CAST($5 AS BIGINT), pinned), \
                 archived = COALESCE(CAST($6 AS BIGINT), archived) \
                 WHERE id = $1 AND owner = $2",
                |values| {
                    values.add(self.conversation_id.as_str())?;
                    values.add(self.owner.as_str())?;
                    values.add(update.title.as_deref())?;
                    values.add(metadata.as_str())?;
                    values.add(update.pinned.map(i64::from))?;
                    values.add(update.archived.map(i64::from))
                },
            )?;
            if let Some(title) = &update.title {
                group.then();
                replace_title(&mut group, &self.conversation_id, title)?;
            }
            group.fetch_all(conn).await?;
            Ok(None)
        })
    }
}
