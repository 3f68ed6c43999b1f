//! `[attachments]`: the limits of uploaded files, and where their bytes
//! are kept (`store`: the conversation store, or an S3-compatible object
//! store configured in `[attachments.s3]`; see [`crate::blobs`]).

use std::{path::PathBuf, time::Duration};

use parley_grpc::config::{ConfigError, duration, invalid, positive, positive_duration};
use serde::{Deserialize, Serialize};

/// The largest `attachments.max_inline_bytes`: room in a 4 MiB `Chat`
/// request for the message, the page state and the schema.
pub const MAX_INLINE_BYTES: u64 = 3 * 1024 * 1024;

/// The most parts of an S3 multipart upload.
const MAX_PARTS: u64 = 10_000;

/// The size of an S3 multipart upload's parts (S3's smallest, but for the
/// last): the most an upload holds in memory ([`crate::blobs::s3`]).
pub const PART_BYTES: usize = 5 * 1024 * 1024;

/// `[attachments]`: the limits of uploaded files and where they are kept.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AttachmentsConfig {
    /// The largest file, in bytes.
    pub max_bytes: u64,
    /// The most bytes of attachments one user may keep (0: no limit).
    pub per_user_bytes: u64,
    /// The most uploads one user may have running at once (across
    /// replicas, as the store counts them).
    pub uploads_per_user: u32,
    /// The most bytes of files one message may carry to the model (they
    /// travel in the runner request, so this counts toward
    /// `upstream.runner_max_request_bytes`).
    pub max_message_bytes: u64,
    /// The most bytes of files one `Chat` request may carry inline
    /// (`AttachmentRef.inline`), all of them together; under the 4 MiB a
    /// request may be.
    pub max_inline_bytes: u64,
    /// The longest an upload may take; one older is deleted, and one whose
    /// gateway died is swept once twice this has passed.
    #[serde(with = "duration")]
    pub upload_timeout: Duration,
    /// How long a finished file may wait to be sent with a message; one
    /// never sent is deleted after this (it holds its owner's quota, and
    /// no call lists it).
    #[serde(with = "duration")]
    pub unattached_ttl: Duration,
    /// Where new uploads' bytes go: `db` (the conversation store) or `s3`
    /// (`[attachments.s3]`). Files already stored are read from where
    /// they were written.
    pub store: AttachmentStore,
    /// `[attachments.s3]`: the object store (for `store = "s3"`, and to
    /// read and delete the files of an earlier `s3` period).
    #[serde(skip_serializing_if = "S3Config::is_unset")]
    pub s3: S3Config,
}

impl Default for AttachmentsConfig {
    fn default() -> Self {
        Self {
            max_bytes: 20 * 1024 * 1024,
            per_user_bytes: 1024 * 1024 * 1024,
            uploads_per_user: 4,
            max_message_bytes: 24 * 1024 * 1024,
            max_inline_bytes: 1024 * 1024,
            upload_timeout: Duration::from_secs(600),
            unattached_ttl: Duration::from_secs(24 * 3600),
            store: AttachmentStore::Db,
            s3: S3Config::default(),
        }
    }
}

/// `attachments.store`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AttachmentStore {
    /// In the conversation store, in chunks (SQLite BLOB, PostgreSQL
    /// `bytea`).
    #[default]
    Db,
    /// In an S3-compatible object store, `[attachments.s3]`.
    S3,
}

/// `[attachments.s3]`: an S3-compatible object store. Credentials come
/// from environment variables or files, never from this file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct S3Config {
    /// The service's URL, for S3-compatible servers (MinIO, Ceph, R2...);
    /// unset: AWS, `https://s3.<region>.amazonaws.com`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    /// The region requests are signed for.
    pub region: String,
    /// The bucket (created beforehand; the gateway never creates one).
    pub bucket: String,
    /// Prepended to every object's key (`<prefix><attachment id>`).
    pub prefix: String,
    /// Path-style URLs (`<endpoint>/<bucket>/<key>`), as most
    /// S3-compatible servers and any endpoint given by IP address need;
    /// otherwise virtual-hosted (`<bucket>.<host>/<key>`).
    pub path_style: bool,
    /// The environment variable holding the access key id; unset (and no
    /// file): `AWS_ACCESS_KEY_ID`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub access_key_id_env: Option<String>,
    /// A file holding the access key id (a mounted Secret).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub access_key_id_file: Option<PathBuf>,
    /// The environment variable holding the secret access key; unset (and
    /// no file): `AWS_SECRET_ACCESS_KEY`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub secret_access_key_env: Option<String>,
    /// A file holding the secret access key.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub secret_access_key_file: Option<PathBuf>,
    /// The environment variable holding a session token (temporary
    /// credentials); unset and no file: none is sent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_token_env: Option<String>,
    /// A file holding a session token.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_token_file: Option<PathBuf>,
    /// The longest one request may take (connection included); a download
    /// may take longer while its bytes keep coming, each read within it.
    #[serde(with = "duration")]
    pub timeout: Duration,
}

impl Default for S3Config {
    fn default() -> Self {
        Self {
            endpoint: None,
            region: "us-east-1".into(),
            bucket: String::new(),
            prefix: "attachments/".into(),
            path_style: false,
            access_key_id_env: None,
            access_key_id_file: None,
            secret_access_key_env: None,
            secret_access_key_file: None,
            session_token_env: None,
            session_token_file: None,
            timeout: Duration::from_secs(30),
        }
    }
}

/// Where one credential comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CredentialSource {
    /// The configuration key, for messages.
    pub key: &'static str,
    /// The environment variable, when the credential is given by one.
    pub env: Option<String>,
    /// The file, when given by one.
    pub file: Option<PathBuf>,
}

impl S3Config {
    /// Whether no object store is configured (no bucket).
    pub fn is_unset(&self) -> bool {
        self.bucket.is_empty()
    }

    /// The endpoint: `endpoint`, else AWS's for `region`.
    pub fn endpoint_url(&self) -> String {
        match &self.endpoint {
            Some(endpoint) => endpoint.clone(),
            None => format!("https://s3.{}.amazonaws.com", self.region),
        }
    }

    fn source(
        key: &'static str,
        env: Option<&String>,
        file: Option<&PathBuf>,
        default_env: Option<&str>,
    ) -> Option<CredentialSource> {
        match (env, file) {
            (None, None) => default_env.map(|env| CredentialSource {
                key,
                env: Some(env.to_owned()),
                file: None,
            }),
            (env, file) => Some(CredentialSource {
                key,
                env: env.cloned(),
                file: file.cloned(),
            }),
        }
    }

    /// Where the access key id, the secret access key and the session
    /// token (if any) come from.
    pub fn credentials(&self) -> (CredentialSource, CredentialSource, Option<CredentialSource>) {
        let required = |source: Option<CredentialSource>| {
            source.unwrap_or_else(|| unreachable!("a default variable is given"))
        };
        (
            required(Self::source(
                "attachments.s3.access_key_id_env / access_key_id_file",
                self.access_key_id_env.as_ref(),
                self.access_key_id_file.as_ref(),
                Some("AWS_ACCESS_KEY_ID"),
            )),
            required(Self::source(
                "attachments.s3.secret_access_key_env / secret_access_key_file",
                self.secret_access_key_env.as_ref(),
                self.secret_access_key_file.as_ref(),
                Some("AWS_SECRET_ACCESS_KEY"),
            )),
            Self::source(
                "attachments.s3.session_token_env / session_token_file",
                self.session_token_env.as_ref(),
                self.session_token_file.as_ref(),
                None,
            ),
        )
    }

    /// Checks what can be checked without connecting (the credentials are
    /// read when the gateway builds its client).
    fn validate(&self, max_bytes: u64) -> Result<(), ConfigError> {
        let bucket = &self.bucket;
        let named = (3..=63).contains(&bucket.len())
            && bucket
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.')
            && !bucket.starts_with(['-', '.'])
            && !bucket.ends_with(['-', '.']);
        if !named {
            return Err(invalid(
                "attachments.s3.bucket",
                format!(
                    "`{bucket}` is not a bucket name (3 to 63 lowercase letters, digits, `-` and `.`)"
                ),
            ));
        }
        if self.region.trim().is_empty() {
            return Err(invalid("attachments.s3.region", "is empty"));
        }
        let endpoint = self.endpoint_url();
        let url: reqwest::Url = endpoint.parse().map_err(|error| {
            invalid(
                "attachments.s3.endpoint",
                format!("`{endpoint}` is not a URL: {error}"),
            )
        })?;
        match (url.scheme(), url.host_str()) {
            ("http" | "https", Some(_)) => {}
            _ => {
                return Err(invalid(
                    "attachments.s3.endpoint",
                    format!("`{endpoint}` must be an http:// or https:// URL with a host"),
                ));
            }
        };
        if !url.username().is_empty() || url.password().is_some() {
            return Err(invalid(
                "attachments.s3.endpoint",
                "holds credentials: give them with access_key_id_env / _file and secret_access_key_env / _file",
            ));
        }
        if !self.path_style && url.domain().is_none() {
            return Err(invalid(
                "attachments.s3.path_style",
                "must be true for an endpoint given by IP address (a bucket cannot be its subdomain)",
            ));
        }
        if self.prefix.starts_with('/')
            || self.prefix.len() > 512
            || self.prefix.chars().any(char::is_control)
        {
            return Err(invalid(
                "attachments.s3.prefix",
                "must not start with `/`, hold control characters or pass 512 bytes",
            ));
        }
        let (key_id, secret, token) = self.credentials();
        for source in [Some(key_id), Some(secret), token].into_iter().flatten() {
            if source.env.is_some() && source.file.is_some() {
                return Err(invalid(
                    source.key,
                    "set the variable or the file, not both",
                ));
            }
        }
        positive_duration("attachments.s3.timeout", self.timeout)?;
        let largest = PART_BYTES as u64 * MAX_PARTS;
        if max_bytes > largest {
            return Err(invalid(
                "attachments.max_bytes",
                format!(
                    "an object of {MAX_PARTS} parts of {PART_BYTES} bytes holds at most {largest} bytes"
                ),
            ));
        }
        Ok(())
    }
}

impl AttachmentsConfig {
    /// Checks every value.
    pub fn validate(&self) -> Result<(), ConfigError> {
        positive("attachments.max_bytes", self.max_bytes)?;
        if self.max_inline_bytes > MAX_INLINE_BYTES {
            return Err(invalid(
                "attachments.max_inline_bytes",
                format!(
                    "must be at most {MAX_INLINE_BYTES} bytes (a Chat request is at most 4 MiB with its message and state)"
                ),
            ));
        }
        positive(
            "attachments.uploads_per_user",
            u64::from(self.uploads_per_user),
        )?;
        positive_duration("attachments.upload_timeout", self.upload_timeout)?;
        positive_duration("attachments.unattached_ttl", self.unattached_ttl)?;
        if self.s3.is_unset() {
            if self.store == AttachmentStore::S3 {
                return Err(invalid(
                    "attachments.s3.bucket",
                    "attachments.store = \"s3\" needs [attachments.s3] with a bucket",
                ));
            }
            return Ok(());
        }
        self.s3.validate(self.max_bytes)
    }
}
