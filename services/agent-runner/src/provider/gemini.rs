//! The Gemini adapter: `POST models/{model}:streamGenerateContent?alt=sse`
//! with the key in `x-goog-api-key`.
//!
//! `request` builds the body, `schema` normalises JSON schemas to the
//! OpenAPI subset Gemini accepts (and says what it dropped), `stream`
//! decodes the chunks.

mod request;
mod schema;
mod stream;

use std::borrow::Cow;

use reqwest::header::HeaderName;

use super::{
    ChatRequest,
    http::HttpProviderConfig,
    wire::{SseProvider, WireProtocol},
};

pub use schema::{NormalizedSchema, dropped_schema_keywords, normalize_schema};

/// Models without `responseSchema`, always refused (besides the configured
/// list).
pub const NO_STRUCTURED_OUTPUT: &[&str] = &["gemini-1.0*", "gemini-pro", "gemini-pro-vision"];

/// A Gemini Developer API (or compatible) endpoint.
pub type GeminiProvider = SseProvider<Gemini>;

/// The `streamGenerateContent` protocol.
#[derive(Debug, Clone, Copy)]
pub struct Gemini;

impl GeminiProvider {
    /// The request body this adapter sends for `request`, and the schema
    /// keywords it had to drop (`responseSchema: additionalProperties at /`,
    /// `tool get_weather: format "email" at /properties/to`).
    pub fn request_body(&self, request: &ChatRequest) -> (serde_json::Value, Vec<String>) {
        let built = request::body(request);
        (built.body, built.dropped)
    }
}

impl WireProtocol for Gemini {
    type Decoder = stream::GeminiDecoder;
    const SYSTEM: &'static str = "gcp.gemini";
    /// Gemini takes inline images up to 7 MB (and scales large ones itself).
    const IMAGE_LIMITS: super::ImageLimits = super::ImageLimits {
        max_bytes: Some(7 * 1000 * 1000),
        max_edge: None,
    };
    const NO_STRUCTURED_OUTPUT: &'static [&'static str] = NO_STRUCTURED_OUTPUT;

    fn new(_cfg: &HttpProviderConfig) -> Self {
        Self
    }

    fn structured_output_model<'a>(&self, model: &'a str) -> &'a str {
        model.strip_prefix("models/").unwrap_or(model)
    }

    fn url(&self, cfg: &HttpProviderConfig, model: &str) -> String {
        let path = if model.starts_with("models/") || model.starts_with("tunedModels/") {
            model.to_owned()
        } else {
            format!("models/{model}")
        };
        cfg.endpoint(&format!("{path}:streamGenerateContent?alt=sse"))
    }

    fn key_header<'k>(&self, key: &'k str) -> (HeaderName, Cow<'k, str>) {
        (HeaderName::from_static("x-goog-api-key"), key.into())
    }

    /// The body, with a warning naming the schema keywords Gemini does not
    /// accept and that were dropped.
    fn body(&self, cfg: &HttpProviderConfig, request: &ChatRequest) -> serde_json::Value {
        let built = request::body(request);
        if !built.dropped.is_empty() {
            tracing::warn!(
                provider = %cfg.name,
                model = %request.model,
                dropped = ?built.dropped,
                "schema keywords gemini does not accept were dropped"
            );
        }
        built.body
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_and_model_prefixes() {
        let p = GeminiProvider::at("https://generativelanguage.googleapis.com/v1beta");
        let expected = "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse";
        assert_eq!(p.url("gemini-2.5-flash"), expected);
        assert_eq!(p.url("models/gemini-2.5-flash"), expected);
        p.assert_structured_output(&["models/gemini-2.5-pro"], &["gemini-1.0-pro"]);
    }
}
