//! `UploadAttachment` and `DownloadAttachment`: files streamed into and
//! out of the store in chunks, so a file never sits in memory whole (the
//! bytes go where `attachments.store` says, [`crate::blobs`]; the rows
//! are the conversation store's either way).
//!
//! An upload's media type is sniffed from its first bytes (magic numbers,
//! else text), never taken from the client, and must be one its page
//! allows; its size is held to `attachments.max_bytes` as the bytes
//! arrive, and the owner's total to `attachments.per_user_bytes` when it
//! ends. Whatever ends an upload early (a refusal, the client going away,
//! `attachments.upload_timeout`) deletes what it stored.

use futures::StreamExt as _;
use parley_proto::gateway::v1::{
    self as gw, download_attachment_response::Part as DownPart,
    upload_attachment_request::Part as UpPart,
};
use sha2::{Digest, Sha256};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Status, Streaming};

pub use crate::blobs::CHUNK_BYTES;
pub use crate::config::AttachmentsConfig;
use crate::{
    auth::Principal,
    blobs::{BlobWriter, Blobs},
    engine::Engine,
    error::GatewayError,
    service::validate,
    store::{
        StoredAttachmentRef,
        attachments::{FinishedUpload, NewUpload, StoredAttachment},
    },
};

/// How many first bytes the media type is sniffed from.
const SNIFF_BYTES: usize = 8 * 1024;

/// Longest file name, in bytes.
const MAX_NAME: usize = 255;

/// Download chunks read ahead of the client.
const DOWNLOAD_AHEAD: usize = 2;

/// The stream of a download.
pub type DownloadStream = ReceiverStream<Result<gw::DownloadAttachmentResponse, Status>>;

/// The media type of a file named `name` whose bytes begin with `head`
/// (all of them when shorter than [`SNIFF_BYTES`]): its magic number's,
/// else `text/csv` or `text/plain` for UTF-8 text without NUL bytes (by the
/// name), else `application/octet-stream`.
pub fn sniff(name: &str, head: &[u8]) -> String {
    if let Some(kind) = infer::get(head) {
        return kind.mime_type().to_owned();
    }
    let text = match std::str::from_utf8(head) {
        Ok(_) => true,
        // Cut inside a character at the end of the sniffed part: still text.
        Err(error) => error.error_len().is_none() && head.len() >= SNIFF_BYTES,
    };
    if text && !head.contains(&0) && !head.is_empty() {
        let lower = name.to_ascii_lowercase();
        if lower.ends_with(".csv") {
            return "text/csv".into();
        }
        if lower.ends_with(".md") || lower.ends_with(".markdown") {
            return "text/markdown".into();
        }
        return "text/plain".into();
    }
    "application/octet-stream".into()
}

/// A file name checked: 1 to [`MAX_NAME`] bytes, no path separators or
/// control characters.
fn checked_name(name: &str) -> Result<&str, GatewayError> {
    let name = name.trim();
    let problem = if name.is_empty() {
        Some("is empty".to_owned())
    } else if name.len() > MAX_NAME {
        Some(format!("is longer than {MAX_NAME} bytes"))
    } else if name
        .chars()
        .any(|c| c == '/' || c == '\\' || c.is_control())
    {
        Some("must be a file name, without `/`, `\\` or control characters".to_owned())
    } else {
        None
    };
    match problem {
        Some(problem) => Err(GatewayError::invalid(
            "INVALID_ATTACHMENT",
            "metadata.name",
            problem,
        )),
        None => Ok(name),
    }
}

/// The wire form of a stored attachment.
pub fn to_wire(stored: &StoredAttachment) -> gw::Attachment {
    gw::Attachment {
        id: stored.id.clone(),
        name: stored.name.clone(),
        media_type: stored.media_type.clone(),
        size_bytes: stored.size_bytes,
        sha256: stored.sha256.clone(),
        created_at: Some(crate::convert::timestamp(stored.created_at)),
    }
}

/// A new attachment id: `att_` and 32 hex digits.
fn new_id() -> String {
    format!("att_{}", uuid::Uuid::new_v4().simple())
}

/// What an upload has written so far. Dropped before it ends (an error
/// returned, the RPC's future dropped), it deletes what it wrote: its row,
/// chunks and object.
struct Upload {
    blobs: Blobs,
    id: String,
    writer: Box<dyn BlobWriter>,
    pending: Vec<u8>,
    size: u64,
    hash: Sha256,
    /// Stored (or deleted already): nothing to clean up.
    ended: bool,
}

impl Drop for Upload {
    fn drop(&mut self) {
        if self.ended {
            return;
        }
        let blobs = self.blobs.clone();
        let id = std::mem::take(&mut self.id);
        let object = self.writer.object();
        tokio::spawn(async move {
            if let Err(error) = blobs.abort(&id, object).await {
                // The sweep deletes it later.
                tracing::warn!(%error, attachment = %id, "cannot delete an unfinished upload");
            }
        });
    }
}

impl Upload {
    /// Takes `bytes`, storing every full chunk.
    async fn take(&mut self, bytes: &[u8], max: u64) -> Result<(), GatewayError> {
        self.size = self.size.saturating_add(bytes.len() as u64);
        if self.size > max {
            return Err(too_large(max));
        }
        self.hash.update(bytes);
        self.pending.extend_from_slice(bytes);
        while self.pending.len() >= CHUNK_BYTES {
            let rest = self.pending.split_off(CHUNK_BYTES);
            let chunk = std::mem::replace(&mut self.pending, rest);
            self.store_chunk(chunk).await?;
        }
        Ok(())
    }

    async fn store_chunk(&mut self, chunk: Vec<u8>) -> Result<(), GatewayError> {
        if !self.writer.put(chunk).await? {
            return Err(expired());
        }
        Ok(())
    }
}

fn expired() -> GatewayError {
    GatewayError::invalid(
        "UPLOAD_EXPIRED",
        "chunk",
        "the upload took longer than attachments.upload_timeout",
    )
}

fn too_large(max: u64) -> GatewayError {
    GatewayError::invalid(
        "ATTACHMENT_TOO_LARGE",
        "chunk",
        format!("the file is larger than attachments.max_bytes ({max} bytes)"),
    )
}

/// `UploadAttachment` and `DownloadAttachment` on an engine's store.
pub struct Attachments<'a>(pub &'a Engine);

impl Attachments<'_> {
    /// Stores the file `principal` streams, as its first message describes.
    pub async fn upload(
        &self,
        principal: &Principal,
        mut stream: Streaming<gw::UploadAttachmentRequest>,
    ) -> Result<gw::Attachment, Status> {
        let limits = self.0.attachments();
        let upload = async {
            let metadata = match stream.message().await? {
                Some(gw::UploadAttachmentRequest {
                    part: Some(UpPart::Metadata(metadata)),
                }) => metadata,
                _ => {
                    return Err(GatewayError::invalid(
                        "INVALID_ATTACHMENT",
                        "metadata",
                        "the first message of an upload is its metadata",
                    )
                    .into());
                }
            };
            let page = validate::page(metadata.page.as_ref(), "metadata.page", self.0.config())?;
            let resolved = self.0.registry().resolve(&validate::page_ref(&page));
            let file = NewFile {
                name: &metadata.name,
                declared_size: metadata.size_bytes,
                page: &page.page,
                resolved: &resolved,
            };
            self.receive(principal, file, &mut stream, limits).await
        };
        match tokio::time::timeout(limits.upload_timeout, upload).await {
            Ok(result) => result,
            Err(_) => Err(Status::deadline_exceeded(format!(
                "the upload took longer than attachments.upload_timeout ({} s)",
                limits.upload_timeout.as_secs()
            ))),
        }
    }

    /// Stores the files a message of `start` sends inline, as uploads
    /// would be, and returns every file it attaches by id, in order.
    pub async fn store_inline(
        &self,
        start: &crate::turn::StartTurn,
        files: Vec<validate::AttachmentInput>,
    ) -> Result<Vec<String>, Status> {
        let limits = self.0.attachments();
        let mut ids = Vec::with_capacity(files.len());
        for input in files {
            match input {
                validate::AttachmentInput::Stored(id) => ids.push(id),
                validate::AttachmentInput::Inline { name, data } => {
                    let file = NewFile {
                        name: &name,
                        declared_size: data.len() as u64,
                        page: &start.page.page,
                        resolved: &start.resolved,
                    };
                    let mut bytes = Inline(Some(data));
                    let stored = self
                        .receive(&start.principal, file, &mut bytes, limits)
                        .await?;
                    ids.push(stored.id);
                }
            }
        }
        Ok(ids)
    }

    async fn receive(
        &self,
        principal: &Principal,
        file: NewFile<'_>,
        stream: &mut impl Chunks,
        limits: &AttachmentsConfig,
    ) -> Result<gw::Attachment, Status> {
        let store = self.0.store();
        let name = checked_name(file.name)?.to_owned();
        let resolved = file.resolved;
        if resolved.attachments.is_empty() {
            return Err(GatewayError::invalid(
                "ATTACHMENT_TYPE_NOT_ALLOWED",
                "metadata.page",
                format!("page `{}` takes no attachments", file.page),
            )
            .into());
        }
        if file.declared_size > limits.max_bytes {
            return Err(too_large(limits.max_bytes).into());
        }
        let owner = principal.owner();
        // What the owner keeps and is uploading now (each upload counts the
        // bytes it stored so far): uploads at once are bounded, and the
        // bytes checked again when this one ends.
        let (used, uploading) = store
            .attachment_use(owner)
            .await
            .map_err(GatewayError::from)?;
        if uploading >= u64::from(limits.uploads_per_user) {
            return Err(GatewayError::AttachmentQuota {
                setting: "uploads_per_user",
                limit: u64::from(limits.uploads_per_user),
            }
            .into());
        }
        if limits.per_user_bytes > 0
            && used.saturating_add(file.declared_size) > limits.per_user_bytes
        {
            return Err(GatewayError::AttachmentQuota {
                setting: "per_user_bytes",
                limit: limits.per_user_bytes,
            }
            .into());
        }
        // The first bytes, for the media type.
        let mut head = Vec::new();
        let mut ended = false;
        while head.len() < SNIFF_BYTES {
            match stream.next().await? {
                Some(bytes) => {
                    head.extend_from_slice(&bytes);
                    if head.len() as u64 > limits.max_bytes {
                        return Err(too_large(limits.max_bytes).into());
                    }
                }
                None => {
                    ended = true;
                    break;
                }
            }
        }
        if head.is_empty() {
            return Err(
                GatewayError::invalid("INVALID_ATTACHMENT", "chunk", "the file is empty").into(),
            );
        }
        let media_type = sniff(&name, &head[..head.len().min(SNIFF_BYTES)]);
        if !resolved.allows_attachment(&media_type) {
            return Err(GatewayError::invalid(
                "ATTACHMENT_TYPE_NOT_ALLOWED",
                "chunk",
                format!(
                    "the file's bytes are {media_type}, which page `{}` does not take (it takes {})",
                    file.page,
                    resolved.attachments.join(", ")
                ),
            )
            .into());
        }
        let id = new_id();
        let blobs = self.0.blobs();
        let object_key = blobs.uploads().object_key(&id);
        store
            .begin_upload(&NewUpload {
                id: &id,
                owner,
                name: &name,
                media_type: &media_type,
                object_key: object_key.as_deref(),
            })
            .await
            .map_err(GatewayError::from)?;
        let mut upload = Upload {
            blobs: blobs.clone(),
            id: id.clone(),
            writer: blobs.uploads().writer(&id, object_key),
            pending: Vec::with_capacity(CHUNK_BYTES),
            size: 0,
            hash: Sha256::new(),
            ended: false,
        };
        upload.take(&head, limits.max_bytes).await?;
        drop(head);
        if !ended {
            while let Some(bytes) = stream.next().await? {
                upload.take(&bytes, limits.max_bytes).await?;
            }
        }
        if file.declared_size > 0 && upload.size != file.declared_size {
            return Err(GatewayError::invalid(
                "INVALID_ATTACHMENT",
                "metadata.size_bytes",
                format!(
                    "says {} bytes, but {} were sent",
                    file.declared_size, upload.size
                ),
            )
            .into());
        }
        if !upload.pending.is_empty() {
            let last = std::mem::take(&mut upload.pending);
            upload.store_chunk(last).await?;
        }
        // The bytes are whole and durable before the row says ready.
        upload.writer.finish().await.map_err(GatewayError::from)?;
        let sha256 = format!("{:x}", upload.hash.clone().finalize());
        let finished = store
            .finish_upload(owner, &id, upload.size, &sha256, limits.per_user_bytes)
            .await
            .map_err(GatewayError::from)?;
        match finished {
            FinishedUpload::Ready(stored) => {
                upload.ended = true;
                tracing::info!(attachment = %stored.id, media_type = %stored.media_type, size = stored.size_bytes, "attachment stored");
                Ok(to_wire(&stored))
            }
            FinishedUpload::OverQuota { limit } => {
                // The row is gone; its object, if any, goes now.
                upload.ended = true;
                blobs.purge_attachment(&id).await;
                Err(GatewayError::AttachmentQuota {
                    setting: "per_user_bytes",
                    limit,
                }
                .into())
            }
            // Swept meanwhile: the drop deletes what was written.
            FinishedUpload::Missing => Err(expired().into()),
        }
    }

    /// The files `ids` a message of `start` attaches: each the caller's
    /// (`ATTACHMENT_NOT_FOUND` otherwise) and of a type the page takes
    /// (`ATTACHMENT_TYPE_NOT_ALLOWED`).
    pub async fn resolve(
        &self,
        start: &crate::turn::StartTurn,
        ids: &[String],
    ) -> Result<Vec<StoredAttachmentRef>, GatewayError> {
        let mut out = Vec::with_capacity(ids.len());
        let mut total: u64 = 0;
        let budget = self.0.attachments().max_message_bytes;
        for (i, id) in ids.iter().enumerate() {
            let stored = self
                .0
                .store()
                .attachment(start.principal.owner(), id)
                .await?
                .ok_or(GatewayError::AttachmentNotFound)?;
            if !start.resolved.allows_attachment(&stored.media_type) {
                return Err(GatewayError::invalid(
                    "ATTACHMENT_TYPE_NOT_ALLOWED",
                    &format!("attachments[{i}].id"),
                    format!(
                        "`{}` is {}, which page `{}` does not take",
                        stored.name, stored.media_type, start.page.page
                    ),
                ));
            }
            total = total.saturating_add(stored.size_bytes);
            if total > budget {
                return Err(GatewayError::invalid(
                    "ATTACHMENT_TOO_LARGE",
                    "attachments",
                    format!(
                        "the files of one message may add up to attachments.max_message_bytes ({budget} bytes)"
                    ),
                ));
            }
            out.push(StoredAttachmentRef {
                id: stored.id,
                name: stored.name,
                media_type: stored.media_type,
                size_bytes: stored.size_bytes,
                sha256: stored.sha256,
                created_at: stored.created_at,
            });
        }
        Ok(out)
    }

    /// Streams `principal`'s attachment `id`: its metadata, then its bytes.
    pub async fn download(
        &self,
        principal: &Principal,
        id: &str,
    ) -> Result<DownloadStream, Status> {
        validate::id(id, "attachment_id")?;
        if id.is_empty() {
            return Err(GatewayError::invalid("INVALID_ID", "attachment_id", "is empty").into());
        }
        let stored = self
            .0
            .store()
            .attachment(principal.owner(), id)
            .await
            .map_err(GatewayError::from)?
            .ok_or(GatewayError::AttachmentNotFound)?;
        let mut chunks = self
            .0
            .blobs()
            .read(&stored.id, stored.object_key.as_deref(), stored.size_bytes)
            .await
            .map_err(GatewayError::from)?;
        let (tx, rx) = mpsc::channel(DOWNLOAD_AHEAD);
        tokio::spawn(async move {
            let first = gw::DownloadAttachmentResponse {
                part: Some(DownPart::Metadata(to_wire(&stored))),
            };
            if tx.send(Ok(first)).await.is_err() {
                return;
            }
            while let Some(chunk) = chunks.next().await {
                let chunk = chunk
                    .map(|chunk| gw::DownloadAttachmentResponse {
                        part: Some(DownPart::Chunk(chunk)),
                    })
                    .map_err(|error| Status::from(GatewayError::from(error)));
                let failed = chunk.is_err();
                if tx.send(chunk).await.is_err() || failed {
                    return;
                }
            }
        });
        Ok(ReceiverStream::new(rx))
    }
}

/// A file about to be stored: its name, the size its sender declared (0:
/// not declared), and the page it is for.
struct NewFile<'a> {
    name: &'a str,
    declared_size: u64,
    page: &'a str,
    resolved: &'a crate::registry::ResolvedPage,
}

/// Where a file's bytes come from: an upload's messages, or a message's
/// inline file.
trait Chunks: Send {
    /// The next bytes; `None` at the end.
    fn next(&mut self) -> impl Future<Output = Result<Option<Vec<u8>>, Status>> + Send;
}

impl Chunks for Streaming<gw::UploadAttachmentRequest> {
    /// The next bytes of an upload; `None` at its end. A metadata message
    /// after the first is refused.
    async fn next(&mut self) -> Result<Option<Vec<u8>>, Status> {
        match self.message().await? {
            None => Ok(None),
            Some(gw::UploadAttachmentRequest {
                part: Some(UpPart::Chunk(bytes)),
            }) => Ok(Some(bytes)),
            Some(_) => Err(GatewayError::invalid(
                "INVALID_ATTACHMENT",
                "metadata",
                "only the first message of an upload is its metadata",
            )
            .into()),
        }
    }
}

/// A file sent inline: its bytes in one piece.
struct Inline(Option<Vec<u8>>);

impl Chunks for Inline {
    async fn next(&mut self) -> Result<Option<Vec<u8>>, Status> {
        Ok(self.0.take())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn types_come_from_the_bytes_not_the_name() {
        let png = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR";
        assert_eq!(sniff("photo.png", png), "image/png");
        // A ZIP named .png is a ZIP.
        assert_eq!(
            sniff("photo.png", b"PK\x03\x04\x14\0\0\0"),
            "application/zip"
        );
        assert_eq!(
            sniff("report.pdf", b"%PDF-1.7\n%\xe2\xe3"),
            "application/pdf"
        );
        assert_eq!(sniff("data.csv", b"name,age\nann,31\n"), "text/csv");
        assert_eq!(sniff("notes.txt", "héllo\n".as_bytes()), "text/plain");
        assert_eq!(sniff("notes.txt", b"bin\0ary"), "application/octet-stream");
        assert_eq!(
            sniff("x.txt", &[0xff, 0xfe, 0x00]),
            "application/octet-stream"
        );
    }

    #[test]
    fn names_are_file_names() {
        assert_eq!(checked_name(" a.png ").expect("valid"), "a.png");
        for bad in ["", "../etc/passwd", "a\\b", "a\nb", &"x".repeat(256)] {
            assert!(checked_name(bad).is_err(), "{bad:?}");
        }
    }
}
