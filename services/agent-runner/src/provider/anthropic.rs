//! The Anthropic Messages adapter: `POST /v1/messages` with `stream: true`,
//! `x-api-key` and `anthropic-version`.
//!
//! `request` builds the body (history replay with signed thinking blocks,
//! native structured output through `output_config.format`); `stream`
//! decodes the named SSE events.

mod request;
mod stream;

use std::borrow::Cow;

use reqwest::header::{HeaderMap, HeaderName, HeaderValue};

use super::{
    ChatRequest,
    http::HttpProviderConfig,
    wire::{SseProvider, WireProtocol},
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
pub type AnthropicProvider = SseProvider<Anthropic>;

/// The Messages protocol.
#[derive(Debug, Clone, Copy)]
pub struct Anthropic;

impl AnthropicProvider {
    /// The request body this adapter sends for `request`.
    pub fn request_body(&self, request: &ChatRequest) -> serde_json::Value {
        request::body(request, self.config().prompt_cache)
    }
}

impl WireProtocol for Anthropic {
    type Decoder = stream::AnthropicDecoder;
    const SYSTEM: &'static str = "anthropic";
    /// Anthropic refuses an image over 5 MB or 8 000 pixels a side.
    const IMAGE_LIMITS: super::ImageLimits = super::ImageLimits {
        max_bytes: Some(5 * 1000 * 1000),
        max_edge: Some(8000),
    };
    const NO_STRUCTURED_OUTPUT: &'static [&'static str] = NO_STRUCTURED_OUTPUT;

    fn new(_cfg: &HttpProviderConfig) -> Self {
        Self
    }

    /// `{base}/v1/messages`, or `{base}/messages` when the base already ends
    /// in `/v1`.
    fn url(&self, cfg: &HttpProviderConfig, _model: &str) -> String {
        let base = cfg.base_url.split('?').next().unwrap_or("");
        if base.trim_end_matches('/').ends_with("/v1") {
            cfg.endpoint("messages")
        } else {
            cfg.endpoint("v1/messages")
        }
    }

    fn key_header<'k>(&self, key: &'k str) -> (HeaderName, Cow<'k, str>) {
        (HeaderName::from_static("x-api-key"), key.into())
    }

    fn fixed_headers(&self, headers: &mut HeaderMap) {
        headers.insert(
            HeaderName::from_static("anthropic-version"),
            HeaderValue::from_static(API_VERSION),
        );
    }

    fn body(&self, cfg: &HttpProviderConfig, request: &ChatRequest) -> serde_json::Value {
        request::body(request, cfg.prompt_cache)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_with_or_without_v1() {
        let p = |base: &str| AnthropicProvider::at(base).url("claude-sonnet-4-5");
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
        AnthropicProvider::at("https://api.anthropic.com").assert_structured_output(
            &["claude-sonnet-4-5", "claude-opus-4-1-20250805"],
            &["claude-3-5-haiku-latest", "claude-sonnet-4-20250514"],
        );
    }
}
