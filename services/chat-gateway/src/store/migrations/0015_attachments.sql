-- Files users upload (UploadAttachment), kept in the conversation store in
-- chunks, so that no file has to sit in memory whole. Portable SQL, like
-- 0001, except the chunks' byte column: `{bytes}` is BLOB on SQLite and
-- BYTEA on PostgreSQL (store.rs puts in the backend's name).
--
-- An upload writes its row as `uploading`, then its chunks as they arrive,
-- each write committed on its own (no transaction spans the client's
-- stream); the write that ends it checks the size, the hash and the
-- owner's quota and marks it `ready` in one transaction. Only ready rows
-- are read; an upload whose gateway died is deleted by the sweep once it
-- is older than `attachments.upload_timeout`.
CREATE TABLE attachments (
    id              TEXT   NOT NULL PRIMARY KEY,
    owner           TEXT   NOT NULL,
    -- The conversation it was first sent in (deleted with it); NULL until
    -- then.
    conversation_id TEXT   REFERENCES conversations (id) ON DELETE CASCADE,
    name            TEXT   NOT NULL,
    media_type      TEXT   NOT NULL,
    -- Bytes stored so far; the whole file's once ready.
    size_bytes      BIGINT NOT NULL,
    -- Lowercase hex; empty until ready.
    sha256          TEXT   NOT NULL,
    -- uploading or ready.
    state           TEXT   NOT NULL,
    created_at      BIGINT NOT NULL
);

-- The owner's bytes (the per-user quota) and their uploads.
CREATE INDEX attachments_by_owner ON attachments (owner, state);
CREATE INDEX attachments_by_conversation ON attachments (conversation_id);
-- Uploads left behind, for the sweep.
CREATE INDEX attachments_uploading ON attachments (created_at) WHERE state = 'uploading';

CREATE TABLE attachment_chunks (
    attachment_id TEXT   NOT NULL REFERENCES attachments (id) ON DELETE CASCADE,
    -- 0-based, in order.
    seq           BIGINT NOT NULL,
    data          {bytes} NOT NULL,
    PRIMARY KEY (attachment_id, seq)
);
