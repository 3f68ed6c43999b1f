-- Attachment bytes in an object store (`attachments.store = "s3"`). The
-- metadata rows stay here in both modes; a row records where its bytes
-- are, so a gateway switched from one store to the other still reads the
-- files written before.
--
-- `object_key`: the object holding the bytes (NULL: the bytes are the
-- row's `attachment_chunks`). Set when the upload begins, before any byte
-- is written, so whatever deletes the row knows what to delete.
ALTER TABLE attachments ADD COLUMN object_key TEXT;
-- The object store's multipart upload of an upload in progress, recorded
-- as soon as it is created and before any part is sent, so that the sweep
-- can abort it when the gateway writing it died.
ALTER TABLE attachments ADD COLUMN upload_ref TEXT;

-- Objects to delete. The transaction that deletes attachment rows (a
-- conversation deleted, an upload refused, ended early or swept) writes
-- one row here for each row whose bytes are an object; after it commits,
-- the gateway deletes the objects (aborting a multipart upload still
-- open) and then these rows. One that fails stays and every replica's
-- prune tick tries it again, so an object is never forgotten.
CREATE TABLE attachment_purges (
    attachment_id TEXT   NOT NULL PRIMARY KEY,
    object_key    TEXT   NOT NULL,
    upload_ref    TEXT,
    created_at    BIGINT NOT NULL,
    -- Failed tries so far (logged, for operators).
    attempts      BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX attachment_purges_by_age ON attachment_purges (created_at);
