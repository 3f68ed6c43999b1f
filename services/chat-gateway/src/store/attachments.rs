//! Files users upload, kept in the store in chunks (migration 15).
//!
//! An upload is an `uploading` row, then its chunks, each written on its
//! own as it arrives (nothing holds a transaction, or the SQLite writer,
//! while the client sends), then one transaction that checks the owner's
//! quota and marks it `ready`. Readers see only ready rows, so an upload
//! cut short is never half-read: the gateway deletes it when the stream
//! fails, and the sweep ([`Store::sweep_uploads`]) deletes those whose
//! gateway died before it could.
//!
//! The rows are the same when the bytes are an object in an object store
//! (migration 16, [`crate::blobs`]): the row then names the object
//! (`object_key`, and the multipart upload while one is open), only its
//! size grows with each chunk, and every transaction that deletes such a
//! row writes an [`ObjectPurge`] that the gateway carries out once it has
//! committed (and every replica retries until it succeeds).

use futures::future::BoxFuture;
use sqlx::{AnyConnection, Row, any::AnyRow};

use super::{Store, StoreError, batch::Write, group::is_sqlite, writes::to_i64};

/// A stored attachment's metadata.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredAttachment {
    /// Its id.
    pub id: String,
    /// The file's name.
    pub name: String,
    /// The sniffed media type.
    pub media_type: String,
    /// Its size in bytes.
    pub size_bytes: u64,
    /// The SHA-256 of its bytes, lowercase hex.
    pub sha256: String,
    /// When its upload completed, Unix ms.
    pub created_at: i64,
    /// The conversation it was first sent in, if any.
    pub conversation_id: Option<String>,
    /// The object holding its bytes; `None`: they are in the store's
    /// chunks.
    pub object_key: Option<String>,
}

/// An object to delete: the bytes of an attachment row that is gone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectPurge {
    /// The attachment the object held.
    pub attachment_id: String,
    /// The object's key.
    pub object_key: String,
    /// The multipart upload to abort, when one may still be open.
    pub upload_ref: Option<String>,
    /// Failed tries so far.
    pub attempts: u64,
}

/// How ending an upload went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FinishedUpload {
    /// Stored and readable.
    Ready(StoredAttachment),
    /// The owner's ready attachments and this one would pass `limit`
    /// bytes: nothing is kept.
    OverQuota {
        /// `attachments.per_user_bytes`.
        limit: u64,
    },
    /// The upload is gone (swept, or never begun).
    Missing,
}

/// A new upload of `owner`.
#[derive(Debug, Clone)]
pub struct NewUpload<'a> {
    /// The attachment's id.
    pub id: &'a str,
    /// Its owner.
    pub owner: &'a str,
    /// The file's name.
    pub name: &'a str,
    /// The sniffed media type.
    pub media_type: &'a str,
    /// The object its bytes go to; `None`: the store's chunks.
    pub object_key: Option<&'a str>,
}

struct BeginUpload {
    id: String,
    owner: String,
    name: String,
    media_type: String,
    object_key: Option<String>,
    now: i64,
}

impl Write for BeginUpload {
    type Output = ();

    fn autocommit(&self) -> bool {
        true
    }

    fn run<'c>(&'c self, conn: &'c mut AnyConnection) -> BoxFuture<'c, Result<(), StoreError>> {
        Box::pin(async move {
            sqlx::query(
                "INSERT INTO attachments (id, owner, conversation_id, name, media_type, size_bytes, sha256, state, created_at, object_key) \
                 VALUES ($1, $2, NULL, $3, $4, 0, '', 'uploading', $5, $6)",
            )
            .bind(self.id.as_str())
            .bind(self.owner.as_str())
            .bind(self.name.as_str())
            .bind(self.media_type.as_str())
            .bind(self.now)
            .bind(self.object_key.as_deref())
            .execute(&mut *conn)
            .await?;
            Ok(())
        })
    }
}

struct PutChunk {
    id: String,
    seq: i64,
    len: usize,
    /// The chunk's bytes; `None` when they go to an object (only the size
    /// grows).
    data: Option<Vec<u8>>,
}

impl Write for PutChunk {
    /// False when the upload is gone (swept).
    type Output = bool;

    fn run<'c>(&'c self, conn: &'c mut AnyConnection) -> BoxFuture<'c, Result<bool, StoreError>> {
        Box::pin(async move {
            let grown = sqlx::query(
                "UPDATE attachments SET size_bytes = size_bytes + $2 WHERE id = $1 AND state = 'uploading'",
            )
            .bind(self.id.as_str())
            .bind(i64::try_from(self.len).unwrap_or(i64::MAX))
            .execute(&mut *conn)
            .await?
            .rows_affected();
            if grown == 0 {
                return Ok(false);
            }
            let Some(data) = &self.data else {
                return Ok(true);
            };
            sqlx::query(
                "INSERT INTO attachment_chunks (attachment_id, seq, data) VALUES ($1, $2, $3)",
            )
            .bind(self.id.as_str())
            .bind(self.seq)
            .bind(data.as_slice())
            .execute(&mut *conn)
            .await?;
            Ok(true)
        })
    }
}

struct FinishUpload {
    id: String,
    owner: String,
    size: u64,
    sha256: String,
    limit: u64,
    now: i64,
}

impl Write for FinishUpload {
    type Output = FinishedUpload;

    fn run<'c>(
        &'c self,
        conn: &'c mut AnyConnection,
    ) -> BoxFuture<'c, Result<FinishedUpload, StoreError>> {
        Box::pin(async move {
            if !is_sqlite(conn) {
                // One owner's uploads end one at a time across replicas, so
                // two cannot both fit under the quota the pair passes.
                sqlx::query("SELECT pg_advisory_xact_lock(hashtext($1))")
                    .bind(format!("parley attachments {}", self.owner))
                    .execute(&mut *conn)
                    .await?;
            }
            let used: i64 = sqlx::query(
                "SELECT CAST(coalesce(sum(size_bytes), 0) AS BIGINT) AS used FROM attachments WHERE owner = $1 AND state = 'ready'",
            )
            .bind(self.owner.as_str())
            .fetch_one(&mut *conn)
            .await?
            .try_get("used")?;
            if self.limit > 0
                && u64::try_from(used).unwrap_or(0).saturating_add(self.size) > self.limit
            {
                delete_upload(conn, &self.id, None, self.now).await?;
                return Ok(FinishedUpload::OverQuota { limit: self.limit });
            }
            let row = sqlx::query(
                "UPDATE attachments SET state = 'ready', sha256 = $3, created_at = $4 \
                 WHERE id = $1 AND owner = $2 AND state = 'uploading' AND size_bytes = $5 \
                 RETURNING id, name, media_type, size_bytes, sha256, created_at, conversation_id, object_key",
            )
            .bind(self.id.as_str())
            .bind(self.owner.as_str())
            .bind(self.sha256.as_str())
            .bind(self.now)
            .bind(to_i64(self.size))
            .fetch_optional(&mut *conn)
            .await?;
            match row {
                Some(row) => Ok(FinishedUpload::Ready(attachment_from_row(&row)?)),
                None => Ok(FinishedUpload::Missing),
            }
        })
    }
}

/// Deletes upload `id` and its chunks (where foreign keys are off too);
/// when its bytes are an object (as its row says, or `known` when the row
/// is gone already), writes the purge of that object. Whether a purge was
/// written.
async fn delete_upload(
    conn: &mut AnyConnection,
    id: &str,
    known: Option<&UploadObject>,
    now: i64,
) -> Result<bool, StoreError> {
    let row = sqlx::query("SELECT object_key, upload_ref FROM attachments WHERE id = $1")
        .bind(id)
        .fetch_optional(&mut *conn)
        .await?;
    let mut object = match row {
        Some(row) => row
            .try_get::<Option<String>, _>("object_key")?
            .map(|key| -> Result<UploadObject, StoreError> {
                Ok(UploadObject {
                    key,
                    upload_ref: row.try_get("upload_ref")?,
                })
            })
            .transpose()?,
        None => None,
    };
    if let Some(known) = known {
        let object = object.get_or_insert_with(|| known.clone());
        if object.upload_ref.is_none() {
            object.upload_ref.clone_from(&known.upload_ref);
        }
    }
    if let Some(object) = &object {
        sqlx::query(
            "INSERT INTO attachment_purges (attachment_id, object_key, upload_ref, created_at) \
             VALUES ($1, $2, $3, $4) ON CONFLICT (attachment_id) DO NOTHING",
        )
        .bind(id)
        .bind(object.key.as_str())
        .bind(object.upload_ref.as_deref())
        .bind(now)
        .execute(&mut *conn)
        .await?;
    }
    sqlx::query("DELETE FROM attachment_chunks WHERE attachment_id = $1")
        .bind(id)
        .execute(&mut *conn)
        .await?;
    sqlx::query("DELETE FROM attachments WHERE id = $1")
        .bind(id)
        .execute(&mut *conn)
        .await?;
    Ok(object.is_some())
}

/// The object an upload writes, as its writer knows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UploadObject {
    /// The object's key.
    pub key: String,
    /// The multipart upload, once created.
    pub upload_ref: Option<String>,
}

struct AbortUpload {
    id: String,
    known: Option<UploadObject>,
    now: i64,
}

impl Write for AbortUpload {
    /// Whether an object purge was written.
    type Output = bool;

    fn run<'c>(&'c self, conn: &'c mut AnyConnection) -> BoxFuture<'c, Result<bool, StoreError>> {
        Box::pin(delete_upload(conn, &self.id, self.known.as_ref(), self.now))
    }
}

struct RecordUploadRef {
    id: String,
    upload_ref: String,
}

impl Write for RecordUploadRef {
    /// False when the upload is gone (swept).
    type Output = bool;

    fn autocommit(&self) -> bool {
        true
    }

    fn run<'c>(&'c self, conn: &'c mut AnyConnection) -> BoxFuture<'c, Result<bool, StoreError>> {
        Box::pin(async move {
            let recorded = sqlx::query(
                "UPDATE attachments SET upload_ref = $2 WHERE id = $1 AND state = 'uploading'",
            )
            .bind(self.id.as_str())
            .bind(self.upload_ref.as_str())
            .execute(&mut *conn)
            .await?
            .rows_affected();
            Ok(recorded > 0)
        })
    }
}

struct PurgeDone {
    attachment_id: String,
    /// The purge failed: count the try instead.
    failed: bool,
}

impl Write for PurgeDone {
    type Output = ();

    fn autocommit(&self) -> bool {
        true
    }

    fn run<'c>(&'c self, conn: &'c mut AnyConnection) -> BoxFuture<'c, Result<(), StoreError>> {
        Box::pin(async move {
            let sql = if self.failed {
                "UPDATE attachment_purges SET attempts = attempts + 1 WHERE attachment_id = $1"
            } else {
                "DELETE FROM attachment_purges WHERE attachment_id = $1"
            };
            sqlx::query(sql)
                .bind(self.attachment_id.as_str())
                .execute(&mut *conn)
                .await?;
            Ok(())
        })
    }
}

struct LinkAttachments {
    owner: String,
    conversation_id: String,
    ids: Vec<String>,
}

impl Write for LinkAttachments {
    type Output = ();

    fn autocommit(&self) -> bool {
        true
    }

    fn run<'c>(&'c self, conn: &'c mut AnyConnection) -> BoxFuture<'c, Result<(), StoreError>> {
        Box::pin(async move {
            for id in &self.ids {
                sqlx::query(
                    "UPDATE attachments SET conversation_id = $1 \
                     WHERE id = $2 AND owner = $3 AND conversation_id IS NULL",
                )
                .bind(self.conversation_id.as_str())
                .bind(id.as_str())
                .bind(self.owner.as_str())
                .execute(&mut *conn)
                .await?;
            }
            Ok(())
        })
    }
}

/// Most attachments one sweep deletes.
const SWEEP_BATCH: i64 = 100;

/// Deletes the attachments `select` picks (their ids, oldest first, given
/// `$1` = `before` and `$2` = the batch size), a batch at a time, each as
/// an abandoned upload is: row, chunks, and its object purged.
struct SweepAttachments {
    select: &'static str,
    before: i64,
    now: i64,
}

/// Uploads never finished, begun before `$1`.
const ABANDONED_UPLOADS: &str = "SELECT id FROM attachments WHERE state = 'uploading' \
     AND created_at < $1 ORDER BY created_at LIMIT $2";

/// Finished attachments no message carries, created before `$1`.
const UNATTACHED: &str = "SELECT id FROM attachments WHERE state = 'ready' \
     AND conversation_id IS NULL AND created_at < $1 ORDER BY created_at LIMIT $2";

impl Write for SweepAttachments {
    /// How many attachments were deleted.
    type Output = u64;

    fn run<'c>(&'c self, conn: &'c mut AnyConnection) -> BoxFuture<'c, Result<u64, StoreError>> {
        Box::pin(async move {
            let ids: Vec<String> = sqlx::query(self.select)
                .bind(self.before)
                .bind(SWEEP_BATCH)
                .fetch_all(&mut *conn)
                .await?
                .iter()
                .map(|row| row.try_get("id"))
                .collect::<Result<_, _>>()?;
            for id in &ids {
                delete_upload(conn, id, None, self.now).await?;
            }
            Ok(ids.len() as u64)
        })
    }
}

fn attachment_from_row(row: &AnyRow) -> Result<StoredAttachment, StoreError> {
    Ok(StoredAttachment {
        id: row.try_get("id")?,
        name: row.try_get("name")?,
        media_type: row.try_get("media_type")?,
        size_bytes: u64::try_from(row.try_get::<i64, _>("size_bytes")?).unwrap_or(0),
        sha256: row.try_get("sha256")?,
        created_at: row.try_get("created_at")?,
        conversation_id: row.try_get("conversation_id")?,
        object_key: row.try_get("object_key")?,
    })
}

impl Store {
    /// Starts an upload: its row, not yet readable.
    pub async fn begin_upload(&self, upload: &NewUpload<'_>) -> Result<(), StoreError> {
        self.write(BeginUpload {
            id: upload.id.to_owned(),
            owner: upload.owner.to_owned(),
            name: upload.name.to_owned(),
            media_type: upload.media_type.to_owned(),
            object_key: upload.object_key.map(str::to_owned),
            now: super::now_ms(),
        })
        .await
    }

    /// Stores chunk `seq` of upload `id`; false when the upload is gone.
    pub async fn put_chunk(&self, id: &str, seq: u64, data: Vec<u8>) -> Result<bool, StoreError> {
        self.write(PutChunk {
            id: id.to_owned(),
            seq: to_i64(seq),
            len: data.len(),
            data: Some(data),
        })
        .await
    }

    /// Counts `len` more bytes of upload `id`, whose bytes go to an
    /// object; false when the upload is gone.
    pub async fn grow_upload(&self, id: &str, len: usize) -> Result<bool, StoreError> {
        self.write(PutChunk {
            id: id.to_owned(),
            seq: 0,
            len,
            data: None,
        })
        .await
    }

    /// Records the multipart upload that writes upload `id`'s object;
    /// false when the upload is gone.
    pub async fn record_upload_ref(&self, id: &str, upload_ref: &str) -> Result<bool, StoreError> {
        self.write(RecordUploadRef {
            id: id.to_owned(),
            upload_ref: upload_ref.to_owned(),
        })
        .await
    }

    /// Ends upload `id` of `owner` as `size` bytes hashing to `sha256`,
    /// unless the owner's ready attachments and it pass `limit` bytes (0:
    /// none), which deletes it.
    pub async fn finish_upload(
        &self,
        owner: &str,
        id: &str,
        size: u64,
        sha256: &str,
        limit: u64,
    ) -> Result<FinishedUpload, StoreError> {
        self.write(FinishUpload {
            id: id.to_owned(),
            owner: owner.to_owned(),
            size,
            sha256: sha256.to_owned(),
            limit,
            now: super::now_ms(),
        })
        .await
    }

    /// Makes `owner`'s attachments `ids` belong to `conversation_id`, the
    /// first conversation they are sent in: they are deleted with it.
    pub async fn link_attachments(
        &self,
        owner: &str,
        conversation_id: &str,
        ids: Vec<String>,
    ) -> Result<(), StoreError> {
        if ids.is_empty() {
            return Ok(());
        }
        self.write(LinkAttachments {
            owner: owner.to_owned(),
            conversation_id: conversation_id.to_owned(),
            ids,
        })
        .await
    }

    /// Where the bytes of ready attachment `id` are, whoever owns it (the
    /// turn reads the files of a message already checked): `Some(None)`
    /// in the store's chunks, `Some(Some(key))` in that object; `None` for
    /// an attachment that is gone.
    pub async fn attachment_location(
        &self,
        id: &str,
    ) -> Result<Option<Option<String>>, StoreError> {
        let row =
            sqlx::query("SELECT object_key FROM attachments WHERE id = $1 AND state = 'ready'")
                .bind(id)
                .fetch_optional(&self.pool)
                .await?;
        row.map(|row| row.try_get::<Option<String>, _>("object_key"))
            .transpose()
            .map_err(Into::into)
    }

    /// Where the bytes of each of the ready attachments `ids` are (as
    /// [`Self::attachment_location`]), in one query; an id that is gone is
    /// absent from the map.
    pub async fn attachment_locations(
        &self,
        ids: &[&str],
    ) -> Result<std::collections::HashMap<String, Option<String>>, StoreError> {
        let mut located = std::collections::HashMap::with_capacity(ids.len());
        // Bounded like every IN list: a message's files, a few turns'.
        for batch in ids.chunks(100) {
            let placeholders: Vec<String> = (1..=batch.len()).map(|i| format!("${i}")).collect();
            let sql = format!(
                "SELECT id, object_key FROM attachments WHERE state = 'ready' AND id IN ({})",
                placeholders.join(", ")
            );
            // Only numbered placeholders are formatted in; the ids are bound.
            let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
            for id in batch {
                query = query.bind(*id);
            }
            for row in query.fetch_all(&self.pool).await? {
                located.insert(
                    row.try_get::<String, _>("id")?,
                    row.try_get::<Option<String>, _>("object_key")?,
                );
            }
        }
        Ok(located)
    }

    /// Deletes upload `id` and what it stored; when its bytes are an
    /// object (its row says so, or `known` does for a row already gone),
    /// writes that object's purge, and says whether it did.
    pub async fn abort_upload(
        &self,
        id: &str,
        known: Option<UploadObject>,
    ) -> Result<bool, StoreError> {
        self.write(AbortUpload {
            id: id.to_owned(),
            known,
            now: super::now_ms(),
        })
        .await
    }

    /// Deletes the uploads begun before `before` (Unix ms) that never
    /// ended (their gateway died), at most a batch, writing the purges of
    /// their objects; how many went.
    pub async fn sweep_uploads(&self, before: i64) -> Result<u64, StoreError> {
        self.write(SweepAttachments {
            select: ABANDONED_UPLOADS,
            before,
            now: super::now_ms(),
        })
        .await
    }

    /// Deletes finished attachments created before `before` (Unix ms) that
    /// no message ever carried (`attachments.unattached_ttl`): they would
    /// hold their owner's quota for good, and nothing lists them. A batch
    /// at a time; returns how many.
    pub async fn sweep_unattached(&self, before: i64) -> Result<u64, StoreError> {
        self.write(SweepAttachments {
            select: UNATTACHED,
            before,
            now: super::now_ms(),
        })
        .await
    }

    /// The object purges waiting, oldest first, at most `limit`; with
    /// `id`, only that attachment's.
    pub async fn object_purges(
        &self,
        id: Option<&str>,
        limit: u32,
    ) -> Result<Vec<ObjectPurge>, StoreError> {
        const COLUMNS: &str =
            "SELECT attachment_id, object_key, upload_ref, attempts FROM attachment_purges";
        let rows = match id {
            Some(id) => {
                sqlx::query(sqlx::AssertSqlSafe(format!(
                    "{COLUMNS} WHERE attachment_id = $1"
                )))
                .bind(id)
                .fetch_all(&self.pool)
                .await?
            }
            None => {
                sqlx::query(sqlx::AssertSqlSafe(format!(
                    "{COLUMNS} ORDER BY created_at LIMIT $1"
                )))
                .bind(i64::from(limit))
                .fetch_all(&self.pool)
                .await?
            }
        };
        rows.iter()
            .map(|row| {
                Ok(ObjectPurge {
                    attachment_id: row.try_get("attachment_id")?,
                    object_key: row.try_get("object_key")?,
                    upload_ref: row.try_get("upload_ref")?,
                    attempts: u64::try_from(row.try_get::<i64, _>("attempts")?).unwrap_or(0),
                })
            })
            .collect()
    }

    /// Records how a purge went: done deletes it, failed counts the try.
    pub async fn purge_done(&self, attachment_id: &str, failed: bool) -> Result<(), StoreError> {
        self.write(PurgeDone {
            attachment_id: attachment_id.to_owned(),
            failed,
        })
        .await
    }

    /// The bytes of `owner`'s ready attachments.
    pub async fn attachment_bytes(&self, owner: &str) -> Result<u64, StoreError> {
        let used: i64 = sqlx::query(
            "SELECT CAST(coalesce(sum(size_bytes), 0) AS BIGINT) AS used FROM attachments WHERE owner = $1 AND state = 'ready'",
        )
        .bind(owner)
        .fetch_one(&self.pool)
        .await?
        .try_get("used")?;
        Ok(u64::try_from(used).unwrap_or(0))
    }

    /// The bytes of all of `owner`'s attachments, ready or still uploading,
    /// and how many uploads of theirs have not ended.
    pub async fn attachment_use(&self, owner: &str) -> Result<(u64, u64), StoreError> {
        let row = sqlx::query(
            "SELECT CAST(coalesce(sum(size_bytes), 0) AS BIGINT) AS used, \
             CAST(coalesce(sum(CASE WHEN state = 'uploading' THEN 1 ELSE 0 END), 0) AS BIGINT) AS uploading \
             FROM attachments WHERE owner = $1",
        )
        .bind(owner)
        .fetch_one(&self.pool)
        .await?;
        let count = |column: &str| -> Result<u64, StoreError> {
            Ok(u64::try_from(row.try_get::<i64, _>(column)?).unwrap_or(0))
        };
        Ok((count("used")?, count("uploading")?))
    }

    /// `owner`'s ready attachment `id`; `None` for an unknown id, another
    /// owner's, or an upload not yet ended.
    pub async fn attachment(
        &self,
        owner: &str,
        id: &str,
    ) -> Result<Option<StoredAttachment>, StoreError> {
        let row = sqlx::query(
            "SELECT id, name, media_type, size_bytes, sha256, created_at, conversation_id, object_key \
             FROM attachments WHERE id = $1 AND owner = $2 AND state = 'ready'",
        )
        .bind(id)
        .bind(owner)
        .fetch_optional(&self.pool)
        .await?;
        row.as_ref().map(attachment_from_row).transpose()
    }

    /// Chunk `seq` of attachment `id` (read after [`Store::attachment`]
    /// found it the caller's); `None` past its last.
    pub async fn attachment_chunk(
        &self,
        id: &str,
        seq: u64,
    ) -> Result<Option<Vec<u8>>, StoreError> {
        let row =
            sqlx::query("SELECT data FROM attachment_chunks WHERE attachment_id = $1 AND seq = $2")
                .bind(id)
                .bind(to_i64(seq))
                .fetch_optional(&self.pool)
                .await?;
        row.map(|row| row.try_get::<Vec<u8>, _>("data"))
            .transpose()
            .map_err(Into::into)
    }

    /// How many uploads have not ended (tests).
    pub async fn uploads_in_progress(&self) -> Result<u64, StoreError> {
        let count: i64 =
            sqlx::query("SELECT count(*) AS n FROM attachments WHERE state = 'uploading'")
                .fetch_one(&self.pool)
                .await?
                .try_get("n")?;
        Ok(u64::try_from(count).unwrap_or(0))
    }

    /// How many uploads have an object store's multipart upload recorded
    /// (tests: one cut short is swept with its parts).
    pub async fn uploads_with_parts(&self) -> Result<u64, StoreError> {
        let count: i64 = sqlx::query(
            "SELECT count(*) AS n FROM attachments WHERE state = 'uploading' AND upload_ref IS NOT NULL",
        )
        .fetch_one(&self.pool)
        .await?
        .try_get("n")?;
        Ok(u64::try_from(count).unwrap_or(0))
    }

    /// How many chunk rows the store holds (tests: nothing left behind).
    pub async fn attachment_chunk_rows(&self) -> Result<u64, StoreError> {
        let count: i64 = sqlx::query("SELECT count(*) AS n FROM attachment_chunks")
            .fetch_one(&self.pool)
            .await?
            .try_get("n")?;
        Ok(u64::try_from(count).unwrap_or(0))
    }
}
