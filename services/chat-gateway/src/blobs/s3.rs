//! Attachment bytes in an S3-compatible object store: one object per
//! attachment, `<prefix><attachment id>`.
//!
//! Requests are signed (AWS Signature V4, as presigned URLs) by `rusty-s3`,
//! which only builds and signs them, and sent with the process's reqwest
//! client (rustls with ring): no second HTTP or TLS stack in the build.
//!
//! An upload keeps at most one part in memory ([`PART_BYTES`], S3's
//! smallest part): a file that fits in one part is one `PutObject`; a
//! larger one a multipart upload, whose id is recorded on the upload's
//! row before its first part is sent, completed before the row becomes
//! ready. A download is one `GetObject` streamed in [`CHUNK_BYTES`]
//! chunks. No log line or error holds a signed URL or a credential.

use std::time::Duration;

use futures::{StreamExt as _, future::BoxFuture};
use rusty_s3::{Bucket, Credentials, S3Action as _, UrlStyle, actions::CreateMultipartUpload};

use super::{BlobStore, BlobWriter, CHUNK_BYTES, ChunkStream};
use parley_grpc::config::{ConfigError, invalid};

use crate::{
    config::S3Config,
    secret::{Reloadable, SharedSecret},
    store::{
        Store, StoreError,
        attachments::{ObjectPurge, UploadObject},
    },
};

pub use crate::config::attachments::PART_BYTES;

/// How long a signed request stays valid (it is sent at once).
const SIGNED_FOR: Duration = Duration::from_secs(15 * 60);

/// Most bytes of an error response read, for its code.
const ERROR_BODY_BYTES: usize = 4096;

/// The object store of `[attachments.s3]`.
pub struct S3Blobs {
    bucket: Bucket,
    prefix: String,
    client: reqwest::Client,
    timeout: Duration,
    key_id: Reloadable,
    secret: Reloadable,
    token: Option<Reloadable>,
    store: Store,
}

impl std::fmt::Debug for S3Blobs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("S3Blobs")
            .field("bucket", &self.bucket.name())
            .field("prefix", &self.prefix)
            .finish_non_exhaustive()
    }
}

fn failed(action: &'static str, detail: impl Into<String>) -> StoreError {
    StoreError::ObjectStore {
        action,
        detail: detail.into(),
    }
}

fn slot(source: crate::config::attachments::CredentialSource) -> Reloadable {
    Reloadable {
        key: source.key.to_owned(),
        env: source.env,
        file: source.file,
        slot: SharedSecret::default(),
    }
}

impl S3Blobs {
    /// The client of `config` (validated), its credentials read now; the
    /// message names the key, the variable or the file, never a value.
    pub fn new(config: &S3Config, store: Store) -> Result<Self, ConfigError> {
        let endpoint = config.endpoint_url();
        let url: reqwest::Url = endpoint
            .parse()
            .map_err(|error| invalid("attachments.s3.endpoint", format!("{error}")))?;
        let style = if config.path_style {
            UrlStyle::Path
        } else {
            UrlStyle::VirtualHost
        };
        let bucket = Bucket::new(url, style, config.bucket.clone(), config.region.clone())
            .map_err(|error| invalid("attachments.s3.endpoint", error.to_string()))?;
        let (key_id, secret, token) = config.credentials();
        let (key_id, secret, token) = (slot(key_id), slot(secret), token.map(slot));
        let lookup = |name: &str| std::env::var(name).ok();
        for source in [Some(&key_id), Some(&secret), token.as_ref()]
            .into_iter()
            .flatten()
        {
            source
                .load(lookup)
                .map_err(|problem| invalid(source.key.clone(), problem))?;
        }
        // Another part of the process may have installed one first.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = reqwest::Client::builder()
            .connect_timeout(config.timeout)
            .read_timeout(config.timeout)
            .user_agent(concat!("parley-chat-gateway/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|error| invalid("attachments.s3", format!("http client: {error}")))?;
        Ok(Self {
            bucket,
            prefix: config.prefix.clone(),
            client,
            timeout: config.timeout,
            key_id,
            secret,
            token,
            store,
        })
    }

    /// Reads the credentials again (SIGHUP); one that cannot be read keeps
    /// its value.
    pub fn reload_secrets(&self) {
        let lookup = |name: &str| std::env::var(name).ok();
        for source in [Some(&self.key_id), Some(&self.secret), self.token.as_ref()]
            .into_iter()
            .flatten()
        {
            source.reload(lookup);
        }
    }

    fn credentials(&self) -> Credentials {
        let read = |source: &Reloadable| source.slot.with_exposed(str::to_owned);
        match &self.token {
            Some(token) => {
                Credentials::new_with_token(read(&self.key_id), read(&self.secret), read(token))
            }
            None => Credentials::new(read(&self.key_id), read(&self.secret)),
        }
    }

    /// Sends a signed request; a status other than 2xx is an error naming
    /// the action, the status and S3's error code, except a 404 whose code
    /// is one of `gone` (what was asked for is not there): `None`. A
    /// missing bucket is always an error.
    async fn send(
        &self,
        action: &'static str,
        request: reqwest::RequestBuilder,
        gone: &[&str],
    ) -> Result<Option<reqwest::Response>, StoreError> {
        let response = request
            .send()
            .await
            .map_err(|error| failed(action, error.without_url().to_string()))?;
        let status = response.status();
        if status.is_success() {
            return Ok(Some(response));
        }
        let (detail, code) = error_of(status, response).await;
        if status == reqwest::StatusCode::NOT_FOUND
            && code.as_deref().is_some_and(|code| gone.contains(&code))
        {
            return Ok(None);
        }
        Err(failed(action, detail))
    }

    /// [`S3Blobs::send`] for a request that must find what it asks for.
    async fn sent(
        &self,
        action: &'static str,
        request: reqwest::RequestBuilder,
    ) -> Result<reqwest::Response, StoreError> {
        self.send(action, request, &[])
            .await?
            .ok_or_else(|| failed(action, "not found"))
    }

    fn timed(&self, request: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        request.timeout(self.timeout)
    }

    async fn put_object(&self, key: &str, body: Vec<u8>) -> Result<(), StoreError> {
        let credentials = self.credentials();
        let url = self
            .bucket
            .put_object(Some(&credentials), key)
            .sign(SIGNED_FOR);
        self.sent("PutObject", self.timed(self.client.put(url).body(body)))
            .await?;
        Ok(())
    }

    async fn create_multipart(&self, key: &str) -> Result<String, StoreError> {
        const ACTION: &str = "CreateMultipartUpload";
        let credentials = self.credentials();
        let url = self
            .bucket
            .create_multipart_upload(Some(&credentials), key)
            .sign(SIGNED_FOR);
        let response = self.sent(ACTION, self.timed(self.client.post(url))).await?;
        let body = response
            .text()
            .await
            .map_err(|error| failed(ACTION, error.without_url().to_string()))?;
        let parsed = CreateMultipartUpload::parse_response(&body)
            .map_err(|error| failed(ACTION, format!("unreadable response: {error}")))?;
        Ok(parsed.upload_id().to_owned())
    }

    async fn upload_part(
        &self,
        key: &str,
        upload_id: &str,
        number: u16,
        body: Vec<u8>,
    ) -> Result<String, StoreError> {
        const ACTION: &str = "UploadPart";
        let credentials = self.credentials();
        let url = self
            .bucket
            .upload_part(Some(&credentials), key, number, upload_id)
            .sign(SIGNED_FOR);
        let response = self
            .sent(ACTION, self.timed(self.client.put(url).body(body)))
            .await?;
        response
            .headers()
            .get(reqwest::header::ETAG)
            .and_then(|etag| etag.to_str().ok())
            .map(str::to_owned)
            .ok_or_else(|| failed(ACTION, "no ETag in the response"))
    }

    async fn complete_multipart(
        &self,
        key: &str,
        upload_id: &str,
        etags: &[String],
    ) -> Result<(), StoreError> {
        const ACTION: &str = "CompleteMultipartUpload";
        let credentials = self.credentials();
        let complete = self.bucket.complete_multipart_upload(
            Some(&credentials),
            key,
            upload_id,
            etags.iter().map(String::as_str),
        );
        let url = complete.sign(SIGNED_FOR);
        let body = complete.body();
        let response = self
            .sent(ACTION, self.timed(self.client.post(url).body(body)))
            .await?;
        // S3 may answer 200 and still fail, with an error document (the
        // success document's root is named differently by S3-compatible
        // servers, so only the error is looked for).
        let body = response
            .text()
            .await
            .map_err(|error| failed(ACTION, error.without_url().to_string()))?;
        if body.contains("<Error>") {
            return Err(failed(
                ACTION,
                format!(
                    "refused: {}",
                    error_code(&body).unwrap_or("an error document")
                ),
            ));
        }
        Ok(())
    }

    async fn abort_multipart(&self, key: &str, upload_id: &str) -> Result<(), StoreError> {
        let credentials = self.credentials();
        let url = self
            .bucket
            .abort_multipart_upload(Some(&credentials), key, upload_id)
            .sign(SIGNED_FOR);
        // Gone already (aborted, or completed): nothing to abort.
        self.send(
            "AbortMultipartUpload",
            self.timed(self.client.delete(url)),
            &["NoSuchUpload"],
        )
        .await?;
        Ok(())
    }

    async fn delete_object(&self, key: &str) -> Result<(), StoreError> {
        let credentials = self.credentials();
        let url = self
            .bucket
            .delete_object(Some(&credentials), key)
            .sign(SIGNED_FOR);
        self.send(
            "DeleteObject",
            self.timed(self.client.delete(url)),
            &["NoSuchKey"],
        )
        .await?;
        Ok(())
    }
}

/// `HTTP <status>: <S3 error code>`, from an error response, and the
/// code.
async fn error_of(
    status: reqwest::StatusCode,
    response: reqwest::Response,
) -> (String, Option<String>) {
    let mut body = Vec::new();
    let mut stream = response.bytes_stream();
    while let Some(Ok(bytes)) = stream.next().await {
        body.extend_from_slice(&bytes);
        if body.len() >= ERROR_BODY_BYTES {
            break;
        }
    }
    let text = String::from_utf8_lossy(&body);
    match error_code(&text) {
        Some(code) => (
            format!("HTTP {}: {code}", status.as_u16()),
            Some(code.to_owned()),
        ),
        None => (format!("HTTP {}", status.as_u16()), None),
    }
}

/// The `<Code>` of an S3 error document.
fn error_code(body: &str) -> Option<&str> {
    let start = body.find("<Code>")? + "<Code>".len();
    let end = body[start..].find("</Code>")? + start;
    let code = &body[start..end];
    (code.len() <= 64 && code.chars().all(|c| c.is_ascii_alphanumeric() || c == '.'))
        .then_some(code)
}

/// One upload's object, written as its bytes arrive.
struct S3Writer {
    blobs: std::sync::Arc<S3Blobs>,
    id: String,
    key: String,
    /// The multipart upload, once the bytes pass one part.
    upload_id: Option<String>,
    /// The parts sent, by number.
    etags: Vec<String>,
    /// The bytes of the next part.
    pending: Vec<u8>,
}

impl S3Writer {
    /// Sends the pending bytes as the next part, creating the multipart
    /// upload first (recorded on the row before any part is sent); false
    /// when the upload is gone.
    async fn send_part(&mut self) -> Result<bool, StoreError> {
        let upload_id = match &self.upload_id {
            Some(upload_id) => upload_id.clone(),
            None => {
                let upload_id = self.blobs.create_multipart(&self.key).await?;
                self.upload_id = Some(upload_id.clone());
                if !self
                    .blobs
                    .store
                    .record_upload_ref(&self.id, &upload_id)
                    .await?
                {
                    return Ok(false);
                }
                upload_id
            }
        };
        let number = u16::try_from(self.etags.len() + 1)
            .map_err(|_| failed("UploadPart", "more than 10 000 parts"))?;
        let part = std::mem::replace(&mut self.pending, Vec::with_capacity(PART_BYTES));
        let etag = self
            .blobs
            .upload_part(&self.key, &upload_id, number, part)
            .await?;
        self.etags.push(etag);
        Ok(true)
    }
}

impl BlobWriter for S3Writer {
    fn put(&mut self, chunk: Vec<u8>) -> BoxFuture<'_, Result<bool, StoreError>> {
        Box::pin(async move {
            // The row counts the bytes first (the owner's quota, and a
            // swept upload found gone).
            if !self.blobs.store.grow_upload(&self.id, chunk.len()).await? {
                return Ok(false);
            }
            self.pending.extend_from_slice(&chunk);
            if self.pending.len() >= PART_BYTES {
                return self.send_part().await;
            }
            Ok(true)
        })
    }

    fn finish(&mut self) -> BoxFuture<'_, Result<(), StoreError>> {
        Box::pin(async move {
            match self.upload_id.clone() {
                None => {
                    let body = std::mem::take(&mut self.pending);
                    self.blobs.put_object(&self.key, body).await
                }
                Some(upload_id) => {
                    if !self.pending.is_empty() && !self.send_part().await? {
                        return Err(failed("UploadPart", "the upload is gone"));
                    }
                    self.blobs
                        .complete_multipart(&self.key, &upload_id, &self.etags)
                        .await
                }
            }
        })
    }

    fn object(&self) -> Option<UploadObject> {
        Some(UploadObject {
            key: self.key.clone(),
            upload_ref: self.upload_id.clone(),
        })
    }
}

/// The state of a download: the response's bytes, cut into chunks.
struct Download<S> {
    body: S,
    pending: Vec<u8>,
    /// Bytes received so far, and the size the row records.
    seen: u64,
    size: u64,
    ended: bool,
}

impl<S, B> Download<S>
where
    S: futures::Stream<Item = reqwest::Result<B>> + Unpin,
    B: AsRef<[u8]>,
{
    async fn next(&mut self) -> Option<Result<Vec<u8>, StoreError>> {
        loop {
            if self.pending.len() >= CHUNK_BYTES || (self.ended && !self.pending.is_empty()) {
                let rest = if self.pending.len() > CHUNK_BYTES {
                    self.pending.split_off(CHUNK_BYTES)
                } else {
                    Vec::new()
                };
                return Some(Ok(std::mem::replace(&mut self.pending, rest)));
            }
            if self.ended {
                return None;
            }
            match self.body.next().await {
                Some(Ok(bytes)) => {
                    let bytes = bytes.as_ref();
                    self.seen += bytes.len() as u64;
                    if self.seen > self.size {
                        self.ended = true;
                        self.pending.clear();
                        return Some(Err(failed(
                            "GetObject",
                            "the object is larger than its attachment",
                        )));
                    }
                    self.pending.extend_from_slice(bytes);
                }
                Some(Err(error)) => {
                    self.ended = true;
                    self.pending.clear();
                    return Some(Err(failed("GetObject", error.without_url().to_string())));
                }
                None => {
                    self.ended = true;
                    if self.seen != self.size {
                        self.pending.clear();
                        return Some(Err(failed(
                            "GetObject",
                            "the object is shorter than its attachment",
                        )));
                    }
                }
            }
        }
    }
}

impl BlobStore for std::sync::Arc<S3Blobs> {
    fn object_key(&self, id: &str) -> Option<String> {
        Some(format!("{}{id}", self.prefix))
    }

    fn writer(&self, id: &str, object_key: Option<String>) -> Box<dyn BlobWriter> {
        let key = object_key.unwrap_or_else(|| format!("{}{id}", self.prefix));
        Box::new(S3Writer {
            blobs: self.clone(),
            id: id.to_owned(),
            key,
            upload_id: None,
            etags: Vec::new(),
            pending: Vec::new(),
        })
    }

    fn read(
        &self,
        _id: &str,
        object_key: Option<&str>,
        size: u64,
    ) -> BoxFuture<'static, Result<ChunkStream, StoreError>> {
        let blobs = self.clone();
        let key = object_key.unwrap_or_default().to_owned();
        Box::pin(async move {
            let credentials = blobs.credentials();
            let url = blobs
                .bucket
                .get_object(Some(&credentials), &key)
                .sign(SIGNED_FOR);
            // No total timeout: the bytes flow as the reader takes them,
            // each read bounded by the client's read timeout.
            let Some(response) = blobs
                .send("GetObject", blobs.client.get(url), &["NoSuchKey"])
                .await?
            else {
                return Ok(futures::stream::empty().boxed());
            };
            let download = Download {
                body: response.bytes_stream().boxed(),
                pending: Vec::new(),
                seen: 0,
                size,
                ended: false,
            };
            Ok(
                futures::stream::unfold(download, |mut download| async move {
                    download.next().await.map(|chunk| (chunk, download))
                })
                .boxed(),
            )
        })
    }

    fn purge<'a>(&'a self, purge: &'a ObjectPurge) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            if let Some(upload_id) = &purge.upload_ref {
                self.abort_multipart(&purge.object_key, upload_id).await?;
            }
            self.delete_object(&purge.object_key).await
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_codes_are_read_from_s3_error_documents_and_nothing_else() {
        assert_eq!(
            error_code(
                "<?xml version=\"1.0\"?><Error><Code>NoSuchUpload</Code><Message>x</Message></Error>"
            ),
            Some("NoSuchUpload")
        );
        assert_eq!(error_code("<Code>has spaces</Code>"), None);
        assert_eq!(error_code("plain text"), None);
    }
}
