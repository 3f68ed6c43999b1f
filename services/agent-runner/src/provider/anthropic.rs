//! The Anthropic Messages adapter: `POST /v1/messages` with `stream: true`,
//! `x-api-key` and `anthropic-version`.
//!
//! `request` builds the body (history replay with signed thinking blocks,
//! native structured output through `output_config.format`); `stream`
//! decodes the named SSE events.

mod request;
mod stream;

use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use secrecy::ExposeSecret;

use super::{
    ChatRequest, EventStream, Provider, ProviderError,
    http::{self, HttpProviderConfig},
    sse::{self, SseRequest},
};

pub use request::DEFAULT_MAX_TOKENS;

/// The API version header every request carries.
pub const API_VERSION: &str = "2023-06-01";

/// Models without native structured output, always refused (besides the
/// configured list): the Claude 3 family and the first Claude 4 releases.
pub const NO_STRUCTURED_OUTPUT: &[&str] = &[
    "claude-2*",
    "claude-instant*",
    "claude-3*",
    "claude-sonnet-4-0",
    "claude-sonnet-4-2025*",
    "claude-opus-4-0",
    "claude-opus-4-2025*",
];

/// An Anthropic Messages endpoint.
#[derive(Debug)]
pub struct AnthropicProvider {
    cfg: HttpProviderConfig,
    client: reqwest::Client,
}

impl AnthropicProvider {
    /// Builds the adapter and its HTTP client.
    pub fn new(cfg: HttpProviderConfig) -> Result<Self, ProviderError> {
        let client = http::client(&cfg)?;
        Ok(Self { cfg, client })
    }

    /// The request body this adapter sends for `request`.
    pub fn request_body(&self, request: &ChatRequest) -> serde_json::Value {
        request::body(request)
    }

    /// `{base}/v1/messages`, or `{base}/messages` when the base already ends
    /// in `/v1`.
    fn url(&self) -> String {
        let base = self.cfg.base_url.split('?').next().unwrap_or("");
        if base.trim_end_matches('/').ends_with("/v1") {
            self.cfg.endpoint("messages")
        } else {
            self.cfg.endpoint("v1/messages")
        }
    }

    fn headers(&self) -> Result<HeaderMap, ProviderError> {
        let mut headers = HeaderMap::new();
        headers.insert(
            HeaderName::from_static("anthropic-version"),
            HeaderValue::from_static(API_VERSION),
        );
        if let Some(key) = self.cfg.api_key.get() {
            let key = key.expose_secret();
            headers.insert(
                HeaderName::from_static("x-api-key"),
                http::secret_header(key)?,
            );
        }
        Ok(headers)
    }
}

#[async_trait::async_trait]
impl Provider for AnthropicProvider {
    fn name(&self) -> &str {
        &self.cfg.name
    }

    fn system(&self) -> &'static str {
        "anthropic"
    }

    fn supports_structured_output(&self, model: &str) -> bool {
        self.cfg
            .structured_output_allowed(model, NO_STRUCTURED_OUTPUT)
    }

    async fn stream(&self, request: ChatRequest) -> Result<EventStream, ProviderError> {
        super::refuse_unsupported_schema(self, &request)?;
        let request = SseRequest {
            client: &self.client,
            provider: &self.cfg.name,
            model: &request.model,
            url: self.url(),
            headers: self.headers()?,
            body: self.request_body(&request),
            limits: self.cfg.limits,
        };
        sse::stream_sse(request, stream::AnthropicDecoder::default()).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_with_or_without_v1() {
        let p = |base: &str| {
            AnthropicProvider::new(HttpProviderConfig::new("anthropic", base))
                .expect("builds")
                .url()
        };
        assert_eq!(
            p("https://api.anthropic.com"),
            "https://api.anthropic.com/v1/messages"
        );
        assert_eq!(
            p("https://proxy.example/anthropic/v1/"),
            "https://proxy.example/anthropic/v1/messages"
        );
    }

    #[test]
    fn structured_output_model_list() {
        let p = AnthropicProvider::new(HttpProviderConfig::new(
            "anthropic",
            "https://api.anthropic.com",
        ))
        .expect("builds");
        assert!(p.supports_structured_output("claude-sonnet-4-5"));
        assert!(p.supports_structured_output("claude-opus-4-1-20250805"));
        assert!(!p.supports_structured_output("claude-3-5-haiku-latest"));
        assert!(!p.supports_structured_output("claude-sonnet-4-20250514"));
    }
}
