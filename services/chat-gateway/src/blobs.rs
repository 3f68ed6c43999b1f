//! Where attachment bytes live: the conversation store's chunks (the
//! default, `attachments.store = "db"`) or an S3-compatible object store
//! (`"s3"`, [`s3`]), behind one small trait, [`BlobStore`].
//!
//! Only the bytes move. The metadata rows (owner, name, type, size, hash,
//! state, conversation) stay in the conversation store in both modes, so
//! ownership, quotas, listing and the cascade with a conversation are one
//! code path ([`crate::store::attachments`]). The store is the source of
//! truth across replicas:
//!
//! - an upload's row names its object before any byte is written, and the
//!   object store's multipart upload as soon as it exists, so whoever
//!   deletes the row (the gateway on an error, another replica's sweep
//!   after a SIGKILL) knows what to delete;
//! - a row becomes `ready` only after its object is complete, so nothing
//!   half-written is ever read and no upload is reported done before both
//!   are committed;
//! - every transaction that deletes rows whose bytes are objects writes
//!   their purges; the objects are deleted after it commits, and a purge
//!   that fails stays in the store for the prune tick of any replica to
//!   retry ([`Blobs::purge_pending`]).
//!
//! Each row records where its bytes are, so a gateway switched from one
//! store to the other still reads what was written before.

pub mod s3;

use std::sync::Arc;

use futures::{StreamExt as _, future::BoxFuture, stream::BoxStream};

use crate::store::{
    Store, StoreError,
    attachments::{ObjectPurge, UploadObject},
};

/// The size of the chunks attachment bytes are written and read in (the
/// store's rows, the download's messages).
pub const CHUNK_BYTES: usize = 256 * 1024;

/// Purges tried at once (after a deletion, on a prune tick).
pub const PURGE_BATCH: u32 = 100;

/// An attachment's bytes, in chunks of at most [`CHUNK_BYTES`], in order.
pub type ChunkStream = BoxStream<'static, Result<Vec<u8>, StoreError>>;

/// Where attachment bytes are kept.
pub trait BlobStore: Send + Sync + std::fmt::Debug {
    /// The object the bytes of new upload `id` go to (recorded on its row
    /// when it begins); `None` when they are the row's chunks.
    fn object_key(&self, id: &str) -> Option<String>;

    /// Writes the bytes of upload `id`, whose row has begun.
    fn writer(&self, id: &str, object_key: Option<String>) -> Box<dyn BlobWriter>;

    /// The bytes of ready attachment `id` (at `object_key`), `size` bytes;
    /// an empty stream when they are gone.
    fn read(
        &self,
        id: &str,
        object_key: Option<&str>,
        size: u64,
    ) -> BoxFuture<'static, Result<ChunkStream, StoreError>>;

    /// Deletes the object of a deleted row (aborting its multipart upload
    /// when one may be open); deleting what is already gone succeeds.
    fn purge<'a>(&'a self, purge: &'a ObjectPurge) -> BoxFuture<'a, Result<(), StoreError>>;
}

/// The bytes of one upload, written as they arrive.
pub trait BlobWriter: Send {
    /// Writes the next chunk ([`CHUNK_BYTES`], the last one shorter);
    /// false when the upload is gone (swept).
    fn put(&mut self, chunk: Vec<u8>) -> BoxFuture<'_, Result<bool, StoreError>>;

    /// Makes what was written whole and durable; the row becomes ready
    /// only after this.
    fn finish(&mut self) -> BoxFuture<'_, Result<(), StoreError>>;

    /// The object written so far, for the purge of an upload that does not
    /// end; `None` for the store's chunks (deleted with the row).
    fn object(&self) -> Option<UploadObject>;
}

/// The conversation store's chunks (migration 15).
#[derive(Debug, Clone)]
pub struct DbBlobs {
    store: Store,
}

struct DbWriter {
    store: Store,
    id: String,
    seq: u64,
}

impl BlobWriter for DbWriter {
    fn put(&mut self, chunk: Vec<u8>) -> BoxFuture<'_, Result<bool, StoreError>> {
        Box::pin(async move {
            let stored = self.store.put_chunk(&self.id, self.seq, chunk).await?;
            self.seq += 1;
            Ok(stored)
        })
    }

    fn finish(&mut self) -> BoxFuture<'_, Result<(), StoreError>> {
        Box::pin(async { Ok(()) })
    }

    fn object(&self) -> Option<UploadObject> {
        None
    }
}

impl BlobStore for DbBlobs {
    fn object_key(&self, _id: &str) -> Option<String> {
        None
    }

    fn writer(&self, id: &str, _object_key: Option<String>) -> Box<dyn BlobWriter> {
        Box::new(DbWriter {
            store: self.store.clone(),
            id: id.to_owned(),
            seq: 0,
        })
    }

    fn read(
        &self,
        id: &str,
        _object_key: Option<&str>,
        _size: u64,
    ) -> BoxFuture<'static, Result<ChunkStream, StoreError>> {
        let store = self.store.clone();
        let id = id.to_owned();
        Box::pin(async move {
            // One chunk row at a time, as the reader takes them.
            let chunks = futures::stream::try_unfold(0_u64, move |seq| {
                let store = store.clone();
                let id = id.clone();
                async move {
                    Ok(store
                        .attachment_chunk(&id, seq)
                        .await?
                        .map(|chunk| (chunk, seq + 1)))
                }
            });
            Ok(chunks.boxed())
        })
    }

    fn purge<'a>(&'a self, _purge: &'a ObjectPurge) -> BoxFuture<'a, Result<(), StoreError>> {
        // Chunks go with their row, in its transaction.
        Box::pin(async { Ok(()) })
    }
}

/// The attachment bytes of this gateway: new uploads go to the configured
/// store, and each attachment is read from (and purged in) the store its
/// row names. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Blobs {
    store: Store,
    db: Arc<DbBlobs>,
    /// The object store, when `[attachments.s3]` is configured.
    s3: Option<Arc<s3::S3Blobs>>,
    /// Whether new uploads go to the object store.
    uploads_to_s3: bool,
}

impl Blobs {
    /// Bytes in the conversation store only.
    pub fn db(store: Store) -> Self {
        Self {
            db: Arc::new(DbBlobs {
                store: store.clone(),
            }),
            store,
            s3: None,
            uploads_to_s3: false,
        }
    }

    /// With the object store `s3`, where new uploads go when
    /// `uploads_to_s3`; each attachment is read from where it was written.
    pub fn with_s3(store: Store, s3: s3::S3Blobs, uploads_to_s3: bool) -> Self {
        Self {
            s3: Some(Arc::new(s3)),
            uploads_to_s3,
            ..Self::db(store)
        }
    }

    /// The conversation store.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// The object store, if configured.
    pub fn s3(&self) -> Option<&Arc<s3::S3Blobs>> {
        self.s3.as_ref()
    }

    /// Where new uploads go.
    pub fn uploads(&self) -> &dyn BlobStore {
        match &self.s3 {
            Some(s3) if self.uploads_to_s3 => s3,
            _ => self.db.as_ref(),
        }
    }

    /// The store holding bytes at `object_key` (`None`: the chunks).
    fn holding(&self, object_key: Option<&str>) -> Result<&dyn BlobStore, StoreError> {
        match (object_key, &self.s3) {
            (None, _) => Ok(self.db.as_ref()),
            (Some(_), Some(s3)) => Ok(s3),
            (Some(_), None) => Err(not_configured()),
        }
    }

    /// The bytes of ready attachment `id` (`size` bytes, at `object_key`),
    /// as a stream of chunks.
    pub async fn read(
        &self,
        id: &str,
        object_key: Option<&str>,
        size: u64,
    ) -> Result<ChunkStream, StoreError> {
        self.holding(object_key)?.read(id, object_key, size).await
    }

    /// The whole of attachment `id` (`size` bytes, as recorded), read into
    /// one buffer of that size (a file is held once); empty when it is gone
    /// (deleted with its conversation since).
    pub async fn read_all(&self, id: &str, size: u64) -> Result<Vec<u8>, StoreError> {
        let Some(object_key) = self.store.attachment_location(id).await? else {
            return Ok(Vec::new());
        };
        let mut chunks = self.read(id, object_key.as_deref(), size).await?;
        let mut data = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
        while let Some(chunk) = chunks.next().await {
            data.extend_from_slice(&chunk?);
        }
        Ok(data)
    }

    /// Deletes upload `id`, which did not end: its row and chunks, and
    /// its object (`object`, as its writer knows it, or as its row names
    /// it). An object that cannot be deleted now stays purged for later.
    pub async fn abort(&self, id: &str, object: Option<UploadObject>) -> Result<(), StoreError> {
        if self.store.abort_upload(id, object).await? {
            self.purge_attachment(id).await;
        }
        Ok(())
    }

    /// Carries out attachment `id`'s purge now, if it has one.
    pub async fn purge_attachment(&self, id: &str) {
        match self.store.object_purges(Some(id), 1).await {
            Ok(purges) => {
                self.carry_out(&purges).await;
            }
            Err(error) => {
                tracing::warn!(%error, attachment = %id, "cannot read an object purge; the prune tick retries it");
            }
        }
    }

    /// Carries out the purges waiting (oldest first, at most
    /// [`PURGE_BATCH`]); how many objects were deleted. Without an object
    /// store configured, any purge waiting is reported and kept.
    pub async fn purge_pending(&self) -> Result<u64, StoreError> {
        let purges = self.store.object_purges(None, PURGE_BATCH).await?;
        Ok(self.carry_out(&purges).await)
    }

    async fn carry_out(&self, purges: &[ObjectPurge]) -> u64 {
        let Some(s3) = &self.s3 else {
            if !purges.is_empty() {
                tracing::warn!(
                    waiting = purges.len(),
                    "attachment objects wait to be deleted, but [attachments.s3] is not configured"
                );
            }
            return 0;
        };
        let mut done = 0;
        for purge in purges {
            let result = s3.purge(purge).await;
            let failed = result.is_err();
            if let Err(error) = result {
                tracing::warn!(
                    %error,
                    attachment = %purge.attachment_id,
                    attempts = purge.attempts + 1,
                    "cannot delete an attachment's object; the prune tick retries it"
                );
            } else {
                done += 1;
            }
            if let Err(error) = self.store.purge_done(&purge.attachment_id, failed).await {
                tracing::warn!(%error, attachment = %purge.attachment_id, "cannot record an object purge");
            }
        }
        done
    }

    /// Reads the object store's credentials again (SIGHUP).
    pub fn reload_secrets(&self) {
        if let Some(s3) = &self.s3 {
            s3.reload_secrets();
        }
    }
}

fn not_configured() -> StoreError {
    StoreError::ObjectStore {
        action: "read",
        detail: "the attachment is in an object store, but [attachments.s3] is not configured"
            .into(),
    }
}
