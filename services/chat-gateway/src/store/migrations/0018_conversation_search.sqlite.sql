-- Titles, metadata and full-text search (SQLite's text; PostgreSQL's is
-- 0018_conversation_search.postgres.sql: the search index is the one thing
-- the two backends cannot say alike). The columns added to `conversations`
-- are the same portable SQL on both.
--
-- `metadata`: the application's labels, a JSON object of strings (at most
-- 16 entries, checked by the gateway). `pinned`, `archived`: 0 or 1.
ALTER TABLE conversations ADD COLUMN metadata TEXT NOT NULL DEFAULT '{}';
ALTER TABLE conversations ADD COLUMN pinned BIGINT NOT NULL DEFAULT 0;
ALTER TABLE conversations ADD COLUMN archived BIGINT NOT NULL DEFAULT 0;

-- The texts searched: one row per indexed text, inserted by the write that
-- stores it (a turn's user message by begin_turn, its answer by
-- finish_turn, both keyed by the turn), and the conversation's title
-- (`turn_id` = ''; replaced by UpdateConversation). Rows are only inserted
-- on a turn's path, never updated: an FTS5 row costs its text's tokens.
CREATE TABLE search_texts (
    -- The FTS5 index's rowid.
    id              INTEGER PRIMARY KEY,
    conversation_id TEXT    NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    -- The turn whose message or answer this is; '' for the title.
    turn_id         TEXT    NOT NULL,
    -- The text (its first 65 536 characters).
    body            TEXT    NOT NULL
);
CREATE INDEX search_texts_by_conversation ON search_texts (conversation_id, turn_id);
CREATE INDEX search_texts_by_turn ON search_texts (turn_id);

-- The index over `body` (an external-content FTS5 table: the text is
-- stored once, in `search_texts`), kept in step by these triggers.
-- Tokenizer: unicode61 (whole words, case-folded, diacritics removed, no
-- stemming).
CREATE VIRTUAL TABLE search_index USING fts5 (body, content = 'search_texts', content_rowid = 'id');

CREATE TRIGGER search_texts_insert AFTER INSERT ON search_texts BEGIN
    INSERT INTO search_index (rowid, body) VALUES (new.id, new.body);
END;
CREATE TRIGGER search_texts_delete AFTER DELETE ON search_texts BEGIN
    INSERT INTO search_index (search_index, rowid, body) VALUES ('delete', old.id, old.body);
END;
CREATE TRIGGER search_texts_update AFTER UPDATE ON search_texts BEGIN
    INSERT INTO search_index (search_index, rowid, body) VALUES ('delete', old.id, old.body);
    INSERT INTO search_index (rowid, body) VALUES (new.id, new.body);
END;

-- What was stored before: every conversation's title and every turn's
-- user message and answer text.
INSERT INTO search_texts (conversation_id, turn_id, body)
SELECT id, '', substr(title, 1, 65536) FROM conversations WHERE title <> '';
INSERT INTO search_texts (conversation_id, turn_id, body)
SELECT conversation_id, turn_id, substr(json_extract(body, '$.text'), 1, 65536) FROM events
WHERE kind IN ('user_message', 'assistant_message') AND json_extract(body, '$.text') <> ''
ORDER BY conversation_id, seq;
