//! HTTP plumbing shared by the adapters: a provider's HTTP configuration
//! (with the [`ResponseLimits`] of one answer), the client builder, the POST
//! that starts a stream, and the mapping of a non-2xx answer to
//! [`ProviderError::Http`] with the provider's requested delay.
//!
//! The delay comes from, in order: `retry-after-ms` (milliseconds),
//! `retry-after` (seconds or an HTTP date), and Gemini's
//! `error.details[].retryDelay` in the body (`"34.4s"`). Every request
//! carries the W3C `traceparent` of the model call's span. A value above
//! [`MAX_RETRY_AFTER`] is treated as absent; the retry policy then falls back
//! to its own backoff.

use std::{
    fmt,
    time::{Duration, SystemTime},
};

use futures::StreamExt;
use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use serde_json::Value;

use super::{ProviderError, keys::ApiKeys};

/// How much of a provider's error body (or raw stream text) an error keeps.
pub const MAX_RAW_BYTES: usize = 4096;
/// How much of an error body is read before giving up on the rest.
pub const MAX_ERROR_BODY_READ: usize = 64 * 1024;
/// A provider delay above this is ignored (treated as not given).
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);
/// How long reading an error body (or a non-stream 200 body) may take.
pub const ERROR_BODY_TIMEOUT: Duration = Duration::from_secs(10);

/// How to reach one configured provider over HTTP.
#[derive(Clone)]
pub struct HttpProviderConfig {
    /// The configured name, e.g. `openai`, `ollama`; used in logs and errors.
    pub name: String,
    /// The API root, e.g. `https://api.openai.com/v1`,
    /// `http://127.0.0.1:11434/v1`, `https://api.anthropic.com`,
    /// `https://generativelanguage.googleapis.com/v1beta`. A query string
    /// (Azure's `?api-version=`) is kept after the endpoint path.
    pub base_url: String,
    /// The API keys, taken in turn (see [`ApiKeys`]); none for local
    /// servers that need none. Each is read at each request (SIGHUP may
    /// replace it: `api_key_file`, `api_keys_file`), exposed only where
    /// the adapter builds its auth header; `Debug` shows their names, and
    /// they are zeroized on drop.
    pub api_keys: ApiKeys,
    /// Headers sent with every request (OpenRouter's `HTTP-Referer`, ...).
    pub extra_headers: Vec<(String, String)>,
    /// Time allowed for the TCP + TLS connect.
    pub connect_timeout: Duration,
    /// Provider-level switch for native structured output (default true).
    pub structured_output: bool,
    /// Models known not to support native structured output: exact names,
    /// or prefixes written with a trailing `*`.
    pub no_structured_output_models: Vec<String>,
    /// How much one answer may hold.
    pub limits: ResponseLimits,
    /// Whether requests carry the provider's prompt-cache hints (Anthropic
    /// `cache_control` breakpoints, OpenAI `prompt_cache_key`).
    pub prompt_cache: bool,
}

impl HttpProviderConfig {
    /// A configuration with no key, no extra headers, a 10 s connect timeout
    /// and structured output on.
    pub fn new(name: impl Into<String>, base_url: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            base_url: base_url.into(),
            api_keys: ApiKeys::default(),
            extra_headers: Vec::new(),
            connect_timeout: Duration::from_secs(10),
            structured_output: true,
            no_structured_output_models: Vec::new(),
            limits: ResponseLimits::DEFAULT,
            prompt_cache: false,
        }
    }

    /// The URL of `path` under the base URL, keeping a query string of the
    /// base URL after it (`https://h/x?api-version=1` + `chat/completions`
    /// → `https://h/x/chat/completions?api-version=1`).
    pub fn endpoint(&self, path: &str) -> String {
        let (base, query) = match self.base_url.split_once('?') {
            Some((base, query)) => (base, Some(query)),
            None => (self.base_url.as_str(), None),
        };
        let mut url = format!(
            "{}/{}",
            base.trim_end_matches('/'),
            path.trim_start_matches('/')
        );
        if let Some(query) = query.filter(|q| !q.is_empty()) {
            url.push(if url.contains('?') { '&' } else { '?' });
            url.push_str(query);
        }
        url
    }

    /// Whether `model` may use native structured output: the provider switch
    /// is on and neither the configured list nor the adapter's built-in list
    /// `builtin` names it.
    pub fn structured_output_allowed(&self, model: &str, builtin: &[&str]) -> bool {
        self.structured_output
            && !self
                .no_structured_output_models
                .iter()
                .any(|p| model_matches(p, model))
            && !builtin.iter().any(|p| model_matches(p, model))
    }
}

impl fmt::Debug for HttpProviderConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let header_names: Vec<&str> = self.extra_headers.iter().map(|(k, _)| k.as_str()).collect();
        f.debug_struct("HttpProviderConfig")
            .field("name", &self.name)
            .field("base_url", &self.base_url)
            .field("api_keys", &self.api_keys)
            .field("extra_headers", &header_names)
            .field("connect_timeout", &self.connect_timeout)
            .field("structured_output", &self.structured_output)
            .field(
                "no_structured_output_models",
                &self.no_structured_output_models,
            )
            .field("limits", &self.limits)
            .finish()
    }
}

/// How much one model call's answer may hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResponseLimits {
    /// The longest line, and the longest event (its `event:` and `data:`
    /// fields), in bytes.
    pub max_event_bytes: usize,
    /// The most bytes of one answer's body.
    pub max_response_bytes: usize,
}

impl ResponseLimits {
    /// 1 MiB per event, 16 MiB per answer.
    pub const DEFAULT: Self = Self {
        max_event_bytes: 1024 * 1024,
        max_response_bytes: 16 * 1024 * 1024,
    };
}

impl Default for ResponseLimits {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// Whether `pattern` (an exact name, or a prefix ending in `*`) names `model`.
pub fn model_matches(pattern: &str, model: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some(prefix) => model.starts_with(prefix),
        None => pattern == model,
    }
}

/// Builds the HTTP client of one provider: rustls with the ring provider,
/// the platform's certificates, the connect timeout and the extra headers.
/// No total timeout: the agent loop bounds first token, idle and total time.
pub fn client(cfg: &HttpProviderConfig) -> Result<reqwest::Client, ProviderError> {
    // Another part of the process may have installed a provider first; that
    // one is used then, which is what we want.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut headers = HeaderMap::new();
    for (name, value) in &cfg.extra_headers {
        let name = HeaderName::from_bytes(name.as_bytes())
            .map_err(|e| ProviderError::Config(format!("header name {name:?}: {e}")))?;
        let value = HeaderValue::from_str(value)
            .map_err(|e| ProviderError::Config(format!("header {name} value: {e}")))?;
        headers.insert(name, value);
    }
    reqwest::Client::builder()
        .connect_timeout(cfg.connect_timeout)
        .tcp_nodelay(true)
        .user_agent(concat!("parley-agent-runner/", env!("CARGO_PKG_VERSION")))
        .default_headers(headers)
        .build()
        .map_err(|e| ProviderError::Config(format!("http client: {}", error_chain(&e))))
}

/// A secret header value, marked sensitive so it never shows in debug logs.
pub(crate) fn secret_header(value: &str) -> Result<HeaderValue, ProviderError> {
    let mut value = HeaderValue::from_str(value)
        .map_err(|_| ProviderError::Config("api key is not a valid header value".into()))?;
    value.set_sensitive(true);
    Ok(value)
}

/// POSTs `body` as JSON and returns the response once its status is 2xx.
/// Any other status becomes [`ProviderError::Http`]; a failure to connect or
/// send becomes [`ProviderError::Connection`].
pub(crate) async fn post_json(
    client: &reqwest::Client,
    url: &str,
    headers: HeaderMap,
    body: &Value,
) -> Result<reqwest::Response, ProviderError> {
    let bytes = serde_json::to_vec(body)
        .map_err(|e| ProviderError::Config(format!("request body: {e}")))?;
    // The `chat` span is current here: the provider sees its trace context.
    let mut headers = headers;
    parley_grpc::telemetry::propagation::inject_current(&mut headers);
    let response = client
        .post(url)
        .headers(headers)
        .header(CONTENT_TYPE, "application/json")
        .header(ACCEPT, "text/event-stream")
        .body(bytes)
        .send()
        .await
        .map_err(|e| connection_error(&e))?;
    if !response.status().is_success() {
        return Err(status_error(response).await);
    }
    let is_json = response
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim_start().starts_with("application/json"));
    if is_json {
        // A 200 with one JSON document: the server ignored `stream: true`
        // (or the URL points at a non-streaming endpoint).
        let body = read_limited(response, MAX_ERROR_BODY_READ).await;
        return Err(ProviderError::Malformed {
            reason: "provider answered 200 with application/json instead of an event stream".into(),
            raw: truncate_raw(&body),
        });
    }
    Ok(response)
}

/// Maps a transport failure to [`ProviderError::Connection`] with its causes.
pub(crate) fn connection_error(error: &reqwest::Error) -> ProviderError {
    ProviderError::Connection(error_chain(error))
}

/// An error and its sources, joined by `: `.
fn error_chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

/// Reads a non-2xx response into [`ProviderError::Http`].
pub(crate) async fn status_error(response: reqwest::Response) -> ProviderError {
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let body = read_limited(response, MAX_ERROR_BODY_READ).await;
    let retry_after = retry_after_from_headers(&headers, SystemTime::now())
        .or_else(|| retry_delay_from_body(&body));
    tracing::debug!(
        status,
        ?retry_after,
        "provider answered with an error status"
    );
    ProviderError::Http {
        status,
        body: truncate_raw(&body),
        retry_after,
        should_retry: should_retry(&headers),
    }
}

/// Reads at most `limit` bytes of the body (lossy UTF-8) for at most
/// [`ERROR_BODY_TIMEOUT`]; a read error or the time limit ends the read
/// with what arrived so far.
async fn read_limited(response: reqwest::Response, limit: usize) -> String {
    let mut bytes = Vec::new();
    let mut body = response.bytes_stream();
    let read = async {
        while let Some(Ok(chunk)) = body.next().await {
            let room = limit.saturating_sub(bytes.len());
            bytes.extend_from_slice(&chunk[..chunk.len().min(room)]);
            if bytes.len() >= limit {
                break;
            }
        }
    };
    if tokio::time::timeout(ERROR_BODY_TIMEOUT, read)
        .await
        .is_err()
    {
        tracing::debug!("gave up waiting for the rest of a provider error body");
    }
    String::from_utf8_lossy(&bytes).into_owned()
}

/// `text` cut to [`MAX_RAW_BYTES`] at a character boundary, marked when cut.
pub fn truncate_raw(text: &str) -> String {
    if text.len() <= MAX_RAW_BYTES {
        return text.to_owned();
    }
    let end = text.floor_char_boundary(MAX_RAW_BYTES);
    format!("{}…[{} bytes cut]", &text[..end], text.len() - end)
}

/// The delay requested by `retry-after-ms` or `retry-after`, if sane.
pub fn retry_after_from_headers(headers: &HeaderMap, now: SystemTime) -> Option<Duration> {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
    };
    if let Some(ms) = header("retry-after-ms").and_then(|v| v.parse::<f64>().ok()) {
        return sane(ms / 1000.0);
    }
    let value = header("retry-after")?;
    if let Ok(seconds) = value.parse::<f64>() {
        return sane(seconds);
    }
    let at = httpdate::parse_http_date(value).ok()?;
    let wait = at.duration_since(now).unwrap_or(Duration::ZERO);
    (wait <= MAX_RETRY_AFTER).then_some(wait)
}

/// Gemini's `google.rpc.RetryInfo` delay in an error body, if sane.
pub fn retry_delay_from_body(body: &str) -> Option<Duration> {
    let value: Value = serde_json::from_str(body).ok()?;
    let details = value.get("error")?.get("details")?.as_array()?;
    details.iter().find_map(|detail| {
        let delay = detail.get("retryDelay")?.as_str()?;
        sane(delay.trim().strip_suffix('s')?.parse::<f64>().ok()?)
    })
}

/// `x-should-retry: true|false`, when present.
pub fn should_retry(headers: &HeaderMap) -> Option<bool> {
    match headers.get("x-should-retry")?.to_str().ok()?.trim() {
        "true" => Some(true),
        "false" => Some(false),
        _ => None,
    }
}

/// A delay in seconds, unless negative, not finite, or above the cap.
fn sane(seconds: f64) -> Option<Duration> {
    if !seconds.is_finite() || seconds < 0.0 || seconds > MAX_RETRY_AFTER.as_secs_f64() {
        return None;
    }
    Some(Duration::from_secs_f64(seconds))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (k, v) in pairs {
            map.insert(*k, HeaderValue::from_str(v).expect("valid header"));
        }
        map
    }

    #[test]
    fn retry_after_ms_wins_over_seconds() {
        let h = headers(&[("retry-after-ms", "1500"), ("retry-after", "7")]);
        assert_eq!(
            retry_after_from_headers(&h, SystemTime::now()),
            Some(Duration::from_millis(1500))
        );
    }

    #[test]
    fn retry_after_seconds_and_dates() {
        let now = httpdate::parse_http_date("Wed, 21 Oct 2026 07:28:00 GMT").expect("valid date");
        let h = headers(&[("retry-after", "20")]);
        assert_eq!(
            retry_after_from_headers(&h, now),
            Some(Duration::from_secs(20))
        );
        let h = headers(&[("retry-after", "Wed, 21 Oct 2026 07:28:30 GMT")]);
        assert_eq!(
            retry_after_from_headers(&h, now),
            Some(Duration::from_secs(30))
        );
        let past = headers(&[("retry-after", "Wed, 21 Oct 2026 07:27:00 GMT")]);
        assert_eq!(retry_after_from_headers(&past, now), Some(Duration::ZERO));
    }

    #[test]
    fn absurd_or_garbage_delays_are_ignored() {
        let now = SystemTime::now();
        for value in ["3600", "-1", "soon", "NaN", "inf"] {
            let h = headers(&[("retry-after", value)]);
            assert_eq!(retry_after_from_headers(&h, now), None, "{value}");
        }
        let h = headers(&[("retry-after-ms", "600000")]);
        assert_eq!(retry_after_from_headers(&h, now), None);
        assert_eq!(retry_after_from_headers(&HeaderMap::new(), now), None);
    }

    #[test]
    fn gemini_retry_info_in_body() {
        let body = r#"{"error":{"code":429,"status":"RESOURCE_EXHAUSTED","details":[
            {"@type":"type.googleapis.com/google.rpc.QuotaFailure"},
            {"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"34.4s"}]}}"#;
        assert_eq!(
            retry_delay_from_body(body),
            Some(Duration::from_secs_f64(34.4))
        );
        assert_eq!(
            retry_delay_from_body(r#"{"error":{"details":[{"retryDelay":"120s"}]}}"#),
            None
        );
        assert_eq!(retry_delay_from_body("not json"), None);
    }

    #[test]
    fn should_retry_header() {
        assert_eq!(
            should_retry(&headers(&[("x-should-retry", "false")])),
            Some(false)
        );
        assert_eq!(
            should_retry(&headers(&[("x-should-retry", "true")])),
            Some(true)
        );
        assert_eq!(should_retry(&headers(&[("x-should-retry", "maybe")])), None);
    }

    #[test]
    fn endpoint_keeps_query_and_joins_slashes() {
        let cfg = HttpProviderConfig::new(
            "azure",
            "https://h.example/openai/deployments/d/?api-version=2024-10-21",
        );
        assert_eq!(
            cfg.endpoint("chat/completions"),
            "https://h.example/openai/deployments/d/chat/completions?api-version=2024-10-21"
        );
        let cfg = HttpProviderConfig::new("g", "http://127.0.0.1:1/v1beta/");
        assert_eq!(
            cfg.endpoint("/models/m:streamGenerateContent?alt=sse"),
            "http://127.0.0.1:1/v1beta/models/m:streamGenerateContent?alt=sse"
        );
    }

    #[test]
    fn model_patterns() {
        let mut cfg = HttpProviderConfig::new("ollama", "http://x");
        cfg.no_structured_output_models = vec!["llama2*".into(), "phi".into()];
        assert!(!cfg.structured_output_allowed("llama2:13b", &[]));
        assert!(!cfg.structured_output_allowed("phi", &[]));
        assert!(cfg.structured_output_allowed("phi3", &[]));
        assert!(!cfg.structured_output_allowed("gpt-3.5-turbo", &["gpt-3.5*"]));
        cfg.structured_output = false;
        assert!(!cfg.structured_output_allowed("phi3", &[]));
    }

    #[test]
    fn truncation_keeps_char_boundaries() {
        let long = "é".repeat(MAX_RAW_BYTES);
        let cut = truncate_raw(&long);
        assert!(cut.len() < long.len());
        assert!(cut.ends_with("bytes cut]"));
        assert_eq!(truncate_raw("short"), "short");
    }

    #[test]
    fn debug_redacts_the_key() {
        let mut cfg = HttpProviderConfig::new("openai", "https://api.openai.com/v1");
        cfg.api_keys = "sk-secret".into();
        cfg.extra_headers = vec![("x-title".into(), "private".into())];
        let text = format!("{cfg:?}");
        assert!(
            !text.contains("sk-secret") && !text.contains("private"),
            "{text}"
        );
    }
}
