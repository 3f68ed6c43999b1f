-- Titles, metadata and full-text search (PostgreSQL's text; SQLite's is
-- 0018_conversation_search.sqlite.sql, which explains the tables). The
-- columns added to `conversations` are the same portable SQL on both.
ALTER TABLE conversations ADD COLUMN metadata TEXT NOT NULL DEFAULT '{}';
ALTER TABLE conversations ADD COLUMN pinned BIGINT NOT NULL DEFAULT 0;
ALTER TABLE conversations ADD COLUMN archived BIGINT NOT NULL DEFAULT 0;

-- One row per indexed text, as on SQLite; `document` is its tsvector
-- ('simple' configuration: whole words, lower-cased, no stemming, like
-- SQLite's unicode61), computed by the server on insert, under a GIN
-- index. A generated column: PostgreSQL 12 or later.
CREATE TABLE search_texts (
    conversation_id TEXT     NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    -- The turn whose message or answer this is; '' for the title.
    turn_id         TEXT     NOT NULL,
    -- The text (its first 65 536 characters).
    body            TEXT     NOT NULL,
    document        tsvector GENERATED ALWAYS AS (to_tsvector('simple'::regconfig, body)) STORED
);
CREATE INDEX search_texts_by_conversation ON search_texts (conversation_id, turn_id);
CREATE INDEX search_texts_by_turn ON search_texts (turn_id);
CREATE INDEX search_texts_document ON search_texts USING GIN (document);

-- What was stored before: every conversation's title and every turn's
-- user message and answer text.
INSERT INTO search_texts (conversation_id, turn_id, body)
SELECT id, '', left(title, 65536) FROM conversations WHERE title <> '';
INSERT INTO search_texts (conversation_id, turn_id, body)
SELECT conversation_id, turn_id, left(body::jsonb ->> 'text', 65536) FROM events
WHERE kind IN ('user_message', 'assistant_message') AND body::jsonb ->> 'text' <> '';
