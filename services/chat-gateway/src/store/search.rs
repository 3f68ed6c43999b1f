//! A user's conversations found again: their titles, metadata and
//! pinned/archived flags (`UpdateConversation`), the filtered list, and
//! full-text search over their messages (`ListConversations`).
//!
//! The search index is `search_texts` (migration 0018): one row per indexed
//! text, keyed by conversation and turn: a turn's user message (inserted by
//! the write that begins the turn, in its statement group), its answer
//! (inserted by the write that ends it) and the conversation's title
//! (`turn_id` = `''`). Rows are only ever inserted on a turn's path: one
//! statement more per write, no read, no update of an index row. SQLite
//! indexes them with FTS5 (an external-content table kept in step by
//! triggers) and ranks with bm25; PostgreSQL with a generated `tsvector`
//! column under a GIN index and ranks with `ts_rank`. A conversation's rank
//! is its best matching text's.
//!
//! The reads and the write are in [`super::finding`]. Restricting a
//! search to a conversation's current branch is a join on `turn_id` in the
//! inner query of [`Store::search`](super::Store::search): `s.turn_id = ''` (the
//! title) or a turn of the branch ending at the conversation's current
//! leaf.

use std::collections::BTreeMap;

use sha2::{Digest, Sha256};
use sqlx::Arguments;

use super::{ConversationSummary, EventBody, StoreError, group::Statements};

/// The most characters of a text the index keeps (the rest of a longer
/// answer is not searched).
pub const MAX_INDEXED_CHARS: usize = 65_536;
/// The most metadata entries a conversation holds.
pub const MAX_METADATA_ENTRIES: usize = 16;

/// Which conversations a list holds by their `archived` flag.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum Archived {
    /// The ones not archived (the default).
    #[default]
    Exclude,
    /// Archived ones only.
    Only,
    /// All.
    Include,
}

/// The filters of a list or a search; each that is set must hold.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListFilter {
    /// Entries the conversation's metadata must hold (keys as
    /// `UpdateConversation` allows them: letters, digits, `_.-`).
    pub metadata: BTreeMap<String, String>,
    /// By the `archived` flag.
    pub archived: Archived,
    /// Only pinned ones.
    pub pinned_only: bool,
}

impl ListFilter {
    /// A short fingerprint of the filters and `terms`, for page tokens that
    /// hold for the same request only.
    pub fn fingerprint(&self, terms: &[String]) -> String {
        let mut hash = Sha256::new();
        for term in terms {
            hash.update(term.as_bytes());
            hash.update([0]);
        }
        hash.update([1]);
        for (key, value) in &self.metadata {
            hash.update(key.as_bytes());
            hash.update([0]);
            hash.update(value.as_bytes());
            hash.update([0]);
        }
        hash.update([
            match self.archived {
                Archived::Exclude => 0,
                Archived::Only => 1,
                Archived::Include => 2,
            },
            u8::from(self.pinned_only),
        ]);
        hash.finalize()[..8]
            .iter()
            .map(|byte| format!("{byte:02x}"))
            .collect()
    }
}

/// What `UpdateConversation` changes; `None` (or empty) keeps the value.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConversationUpdate {
    /// The new title (already checked and trimmed).
    pub title: Option<String>,
    /// Metadata entries to set.
    pub set_metadata: BTreeMap<String, String>,
    /// Metadata keys to remove.
    pub remove_metadata: Vec<String>,
    /// The new pinned flag.
    pub pinned: Option<bool>,
    /// The new archived flag.
    pub archived: Option<bool>,
}

/// What [`Store::update_conversation`] did.
#[derive(Debug, Clone, PartialEq)]
pub enum Updated {
    /// Changed (or nothing was asked): the conversation as stored now.
    Done(Box<ConversationSummary>),
    /// The conversation is not this owner's (nothing written).
    NotFound,
    /// The metadata would hold this many entries, more than
    /// [`MAX_METADATA_ENTRIES`] (nothing written).
    TooManyEntries(usize),
}

/// The words of a search query: its runs of letters and digits, each once,
/// in order. Both indexes split texts into such words (and case-fold
/// them), so a query is every one of its words, matched whole.
pub fn query_terms(query: &str) -> Vec<String> {
    let mut terms: Vec<String> = Vec::new();
    for word in query.split(|c: char| !c.is_alphanumeric()) {
        let word = word.to_lowercase();
        if !word.is_empty() && !terms.contains(&word) {
            terms.push(word);
        }
    }
    terms
}

/// The text of a message the index keeps: a user message's or an
/// answer's, its first [`MAX_INDEXED_CHARS`] characters; `None` for other
/// events and empty texts.
pub(crate) fn indexed_text(body: &EventBody) -> Option<String> {
    let text = match body {
        EventBody::UserMessage { text, .. } => text.as_str(),
        EventBody::AssistantMessage(answer) => answer.text.as_str(),
        _ => return None,
    };
    (!text.trim().is_empty()).then(|| clip(text))
}

/// `text`'s first [`MAX_INDEXED_CHARS`] characters.
pub(crate) fn clip(text: &str) -> String {
    match text.char_indices().nth(MAX_INDEXED_CHARS) {
        Some((end, _)) => text[..end].to_owned(),
        None => text.to_owned(),
    }
}

/// Adds to `group` the one statement that indexes `texts` (`(turn_id,
/// text)`, `''` for the title) of a conversation; nothing when there are
/// none.
pub(crate) fn index_texts(
    group: &mut Statements,
    conversation_id: &str,
    texts: &[(&str, &str)],
) -> Result<(), StoreError> {
    if texts.is_empty() {
        return Ok(());
    }
    let mut sql = String::from("INSERT INTO search_texts (conversation_id, turn_id, body) VALUES ");
    for row in 0..texts.len() {
        if row > 0 {
            sql.push_str(", ");
        }
        let first = row * 3 + 1;
        sql.push_str(&format!("(${first}, ${}, ${})", first + 1, first + 2));
    }
    group.push(sql, |values| {
        for (turn_id, text) in texts {
            values.add(conversation_id)?;
            values.add(*turn_id)?;
            values.add(*text)?;
        }
        Ok(())
    })
}

/// Adds to `group` the statements that replace a conversation's title in
/// the index with `title` (on SQLite; on PostgreSQL an autocommit write
/// does it in the statement that changes the title, [`RETITLE_POSTGRES`]).
pub(crate) fn replace_title(
    group: &mut Statements,
    conversation_id: &str,
    title: &str,
) -> Result<(), StoreError> {
    group.push(
        "DELETE FROM search_texts WHERE conversation_id = $1 AND turn_id = ''",
        |values| values.add(conversation_id),
    )?;
    group.then();
    let title = clip(title);
    index_texts(group, conversation_id, &[("", title.as_str())])
}

/// Sets the title of conversation `$1` of owner `$2` to `$4` if it is still
/// `$3`, and its row in the index to `$5` (`$4` clipped), in one statement
/// (PostgreSQL: its parts see one snapshot, so the DELETE leaves the new
/// row alone); returns `n`, how many conversations changed.
pub(crate) const RETITLE_POSTGRES: &str = "WITH t AS (UPDATE conversations SET title = $4 \
     WHERE id = $1 AND owner = $2 AND title = $3 RETURNING id), \
     d AS (DELETE FROM search_texts WHERE turn_id = '' AND conversation_id IN (SELECT id FROM t)), \
     i AS (INSERT INTO search_texts (conversation_id, turn_id, body) SELECT id, '', $5 FROM t) \
     SELECT count(*) AS n FROM t";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_terms_are_words_once_lower_cased() {
        assert_eq!(
            query_terms("  Zebra-crossing, zebra! \"OR\" 42 *"),
            vec!["zebra", "crossing", "or", "42"]
        );
        assert!(query_terms("?!- \"").is_empty());
        assert_eq!(query_terms("Grüße"), vec!["grüße"]);
    }

    #[test]
    fn long_texts_are_clipped_on_a_character() {
        let long = "é".repeat(MAX_INDEXED_CHARS + 3);
        assert_eq!(clip(&long).chars().count(), MAX_INDEXED_CHARS);
        assert_eq!(clip("short"), "short");
    }

    #[test]
    fn fingerprints_tell_requests_apart() {
        let filter = ListFilter::default();
        let terms = vec!["a".to_owned()];
        assert_eq!(filter.fingerprint(&terms), filter.fingerprint(&terms));
        assert_ne!(filter.fingerprint(&terms), filter.fingerprint(&[]));
        let archived = ListFilter {
            archived: Archived::Only,
            ..ListFilter::default()
        };
        assert_ne!(filter.fingerprint(&terms), archived.fingerprint(&terms));
    }
}
