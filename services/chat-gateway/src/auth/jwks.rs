//! An issuer's published keys (a JWKS, RFC 7517), from a URL or a file:
//! fetched at start, again every `jwks_refresh` and when a token names a
//! `kid` the set lacks (at most once per `auth.jwks_min_interval`). A fetch
//! that fails (unreachable, too slow, too large, not a key set, no usable
//! key) keeps the last good set. Only keys of the issuer's configured
//! algorithm are kept (RSA for RS256, P-256 for ES256, Ed25519 for EdDSA),
//! so a published symmetric key can never verify anything.
//!
//! Tokens are checked synchronously (a tonic interceptor), so the call
//! that brings an unknown `kid` is refused (`INVALID_TOKEN`) and only asks
//! for the fetch; calls after it succeeds are accepted. Identity providers
//! publish a new key before they sign with it, so the periodic refresh
//! normally has it first.

use std::{collections::HashMap, path::PathBuf, sync::Arc, time::Duration};

use jsonwebtoken::{
    Algorithm, DecodingKey,
    jwk::{AlgorithmParameters, EllipticCurve, Jwk, KeyAlgorithm, PublicKeyUse},
};
use tokio::{io::AsyncReadExt, time::Instant};
use tokio_util::sync::CancellationToken;

/// Where a key set comes from.
#[derive(Debug, Clone)]
pub enum Source {
    /// An `http://` or `https://` URL.
    Url(String),
    /// A file.
    File(PathBuf),
}

/// The bounds of a fetch.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Longest fetch.
    pub timeout: Duration,
    /// Largest document.
    pub max_bytes: usize,
    /// Periodic refresh.
    pub refresh: Duration,
    /// Least time between two fetches an unknown `kid` asks for.
    pub min_interval: Duration,
}

/// Why a fetch failed.
#[derive(Debug, thiserror::Error)]
pub enum JwksError {
    /// The request failed (connection, TLS, time-out).
    #[error("the request failed: {0}")]
    Request(String),
    /// A status other than 2xx.
    #[error("the server answered HTTP {0}")]
    Status(u16),
    /// Longer than `auth.jwks_timeout`.
    #[error("no complete answer within {0:?} (auth.jwks_timeout)")]
    Timeout(Duration),
    /// Larger than `auth.jwks_max_bytes`.
    #[error("the key set is larger than {0} bytes (auth.jwks_max_bytes)")]
    TooLarge(usize),
    /// The file could not be read.
    #[error("cannot read the file: {0}")]
    File(String),
    /// Not a JWKS document.
    #[error("not a JWKS document: {0}")]
    Parse(String),
    /// No key of the configured algorithm.
    #[error("no usable {0:?} key in the set")]
    NoKeys(Algorithm),
}

/// One issuer's key set.
pub struct Jwks {
    source: Source,
    algorithm: Algorithm,
    limits: Limits,
    client: Option<reqwest::Client>,
    /// Keys by `kid` (a key without one under "").
    keys: std::sync::RwLock<Arc<HashMap<String, DecodingKey>>>,
    wake: tokio::sync::Notify,
}

impl std::fmt::Debug for Jwks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Jwks")
            .field("source", &self.source)
            .field("algorithm", &self.algorithm)
            .field("keys", &self.current().len())
            .finish()
    }
}

impl Jwks {
    /// An empty set of `algorithm` keys from `source`; [`Jwks::fetch`]
    /// fills it.
    pub fn new(source: Source, algorithm: Algorithm, limits: Limits) -> Result<Self, String> {
        let client = match &source {
            Source::Url(url) => {
                if !(url.starts_with("https://") || url.starts_with("http://")) {
                    return Err(format!(
                        "jwks_url `{url}` must be an http:// or https:// URL"
                    ));
                }
                // Another part of the process may have installed one first.
                let _ = rustls::crypto::ring::default_provider().install_default();
                Some(
                    reqwest::Client::builder()
                        .connect_timeout(limits.timeout)
                        .timeout(limits.timeout)
                        .user_agent(concat!("parley-chat-gateway/", env!("CARGO_PKG_VERSION")))
                        .build()
                        .map_err(|error| format!("jwks_url: http client: {error}"))?,
                )
            }
            Source::File(_) => None,
        };
        Ok(Self {
            source,
            algorithm,
            limits,
            client,
            keys: std::sync::RwLock::new(Arc::new(HashMap::new())),
            wake: tokio::sync::Notify::new(),
        })
    }

    fn current(&self) -> Arc<HashMap<String, DecodingKey>> {
        self.keys
            .read()
            .map(|keys| keys.clone())
            .unwrap_or_else(|poisoned| poisoned.into_inner().clone())
    }

    /// The key a token with `kid` is verified with: the key of that `kid`,
    /// or for a token without one the only key of the set. An unknown `kid`
    /// asks the refresher for a fetch.
    pub fn key(&self, kid: Option<&str>) -> Option<DecodingKey> {
        let keys = self.current();
        let found = match kid {
            Some(kid) => keys.get(kid).cloned(),
            None if keys.len() == 1 => keys.values().next().cloned(),
            None => None,
        };
        if found.is_none() && kid.is_some() {
            self.wake.notify_one();
        }
        found
    }

    /// Fetches the set and replaces the current one; on failure the
    /// current one stays. Returns how many keys it holds now.
    pub async fn fetch(&self) -> Result<usize, JwksError> {
        let document = tokio::time::timeout(self.limits.timeout, self.document())
            .await
            .map_err(|_| JwksError::Timeout(self.limits.timeout))??;
        let keys = self.parse(&document)?;
        let count = keys.len();
        let keys = Arc::new(keys);
        match self.keys.write() {
            Ok(mut current) => *current = keys,
            Err(poisoned) => *poisoned.into_inner() = keys,
        }
        Ok(count)
    }

    fn request_error(&self, error: reqwest::Error) -> JwksError {
        if error.is_timeout() {
            JwksError::Timeout(self.limits.timeout)
        } else {
            JwksError::Request(error.without_url().to_string())
        }
    }

    async fn document(&self) -> Result<Vec<u8>, JwksError> {
        let max = self.limits.max_bytes;
        match (&self.source, &self.client) {
            (Source::Url(url), Some(client)) => {
                let mut response = client
                    .get(url)
                    .header("accept", "application/json")
                    .send()
                    .await
                    .map_err(|error| self.request_error(error))?;
                if !response.status().is_success() {
                    return Err(JwksError::Status(response.status().as_u16()));
                }
                if response
                    .content_length()
                    .is_some_and(|length| length > max as u64)
                {
                    return Err(JwksError::TooLarge(max));
                }
                let mut body = Vec::new();
                while let Some(chunk) = response
                    .chunk()
                    .await
                    .map_err(|error| self.request_error(error))?
                {
                    if body.len() + chunk.len() > max {
                        return Err(JwksError::TooLarge(max));
                    }
                    body.extend_from_slice(&chunk);
                }
                Ok(body)
            }
            (Source::File(path), _) => {
                let file = tokio::fs::File::open(path)
                    .await
                    .map_err(|error| JwksError::File(format!("{}: {error}", path.display())))?;
                let mut body = Vec::new();
                file.take(max as u64 + 1)
                    .read_to_end(&mut body)
                    .await
                    .map_err(|error| JwksError::File(format!("{}: {error}", path.display())))?;
                if body.len() > max {
                    return Err(JwksError::TooLarge(max));
                }
                Ok(body)
            }
            (Source::Url(_), None) => Err(JwksError::Request("no HTTP client".into())),
        }
    }

    /// The usable keys of a JWKS document; keys of other types, curves,
    /// algorithms or uses are skipped.
    fn parse(&self, document: &[u8]) -> Result<HashMap<String, DecodingKey>, JwksError> {
        #[derive(serde::Deserialize)]
        struct Document {
            keys: Vec<serde_json::Value>,
        }
        let document: Document = serde_json::from_slice(document)
            .map_err(|error| JwksError::Parse(error.to_string()))?;
        let mut keys = HashMap::new();
        for value in document.keys {
            let Ok(jwk) = serde_json::from_value::<Jwk>(value) else {
                continue;
            };
            if !self.usable(&jwk) {
                continue;
            }
            if let Ok(key) = DecodingKey::from_jwk(&jwk) {
                keys.insert(jwk.common.key_id.clone().unwrap_or_default(), key);
            }
        }
        if keys.is_empty() {
            return Err(JwksError::NoKeys(self.algorithm));
        }
        Ok(keys)
    }

    fn usable(&self, jwk: &Jwk) -> bool {
        if matches!(
            jwk.common.public_key_use,
            Some(PublicKeyUse::Encryption | PublicKeyUse::Other(_))
        ) {
            return false;
        }
        let (family, algorithm) = match (&jwk.algorithm, self.algorithm) {
            (AlgorithmParameters::RSA(_), Algorithm::RS256) => (true, KeyAlgorithm::RS256),
            (AlgorithmParameters::EllipticCurve(ec), Algorithm::ES256) => {
                (ec.curve == EllipticCurve::P256, KeyAlgorithm::ES256)
            }
            (AlgorithmParameters::OctetKeyPair(okp), Algorithm::EdDSA) => {
                (okp.curve == EllipticCurve::Ed25519, KeyAlgorithm::EdDSA)
            }
            _ => return false,
        };
        family
            && jwk
                .common
                .key_algorithm
                .is_none_or(|declared| declared == algorithm)
    }

    /// Fetches again every `refresh`, and when [`Jwks::key`] met an unknown
    /// `kid` (not sooner than `min_interval` after the last fetch), until
    /// `stop` is cancelled; `issuer` names it in the log.
    pub async fn refresh(self: Arc<Self>, issuer: String, stop: CancellationToken) {
        let mut last = Instant::now();
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                () = tokio::time::sleep_until(last + self.limits.refresh) => {}
                () = self.wake.notified() => {
                    tokio::select! {
                        () = stop.cancelled() => return,
                        () = tokio::time::sleep_until(
                            last + self.limits.min_interval.min(self.limits.refresh)
                        ) => {}
                    }
                }
            }
            last = Instant::now();
            match self.fetch().await {
                Ok(keys) => tracing::debug!(%issuer, keys, "JWKS fetched"),
                Err(error) => tracing::warn!(
                    %issuer,
                    %error,
                    keys = self.current().len(),
                    "JWKS fetch failed; the last good key set stays in use"
                ),
            }
        }
    }
}
