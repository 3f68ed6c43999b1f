//! The Gemini adapter: `POST models/{model}:streamGenerateContent?alt=sse`
//! with the key in `x-goog-api-key`.
//!
//! `request` builds the body, `schema` normalises JSON schemas to the
//! OpenAPI subset Gemini accepts (and says what it dropped), `stream`
//! decodes the chunks.

mod request;
mod schema;
mod stream;

use reqwest::header::{HeaderMap, HeaderName};
use secrecy::ExposeSecret;

use super::{
    ChatRequest, EventStream, Provider, ProviderError,
    http::{self, HttpProviderConfig},
    sse::{self, SseRequest},
};

pub use schema::{NormalizedSchema, dropped_schema_keywords, normalize_schema};

/// Models without `responseSchema`, always refused (besides the configured
/// list).
pub const NO_STRUCTURED_OUTPUT: &[&str] = &["gemini-1.0*", "gemini-pro", "gemini-pro-vision"];

/// A Gemini Developer API (or compatible) endpoint.
#[derive(Debug)]
pub struct GeminiProvider {
    cfg: HttpProviderConfig,
    client: reqwest::Client,
}

impl GeminiProvider {
    /// Builds the adapter and its HTTP client.
    pub fn new(cfg: HttpProviderConfig) -> Result<Self, ProviderError> {
        let client = http::client(&cfg)?;
        Ok(Self { cfg, client })
    }

    /// The request body this adapter sends for `request`, and the schema
    /// keywords it had to drop (`responseSchema: additionalProperties at /`,
    /// `tool get_weather: format "email" at /properties/to`).
    pub fn request_body(&self, request: &ChatRequest) -> (serde_json::Value, Vec<String>) {
        let built = request::body(request);
        (built.body, built.dropped)
    }

    fn url(&self, model: &str) -> String {
        let path = if model.starts_with("models/") || model.starts_with("tunedModels/") {
            model.to_owned()
        } else {
            format!("models/{model}")
        };
        self.cfg
            .endpoint(&format!("{path}:streamGenerateContent?alt=sse"))
    }

    fn headers(&self) -> Result<HeaderMap, ProviderError> {
        let mut headers = HeaderMap::new();
        if let Some(key) = self.cfg.api_key.get() {
            let key = key.expose_secret();
            headers.insert(
                HeaderName::from_static("x-goog-api-key"),
                http::secret_header(key)?,
            );
        }
        Ok(headers)
    }
}

#[async_trait::async_trait]
impl Provider for GeminiProvider {
    fn name(&self) -> &str {
        &self.cfg.name
    }

    fn system(&self) -> &'static str {
        "gcp.gemini"
    }

    fn supports_structured_output(&self, model: &str) -> bool {
        let bare = model.strip_prefix("models/").unwrap_or(model);
        self.cfg
            .structured_output_allowed(bare, NO_STRUCTURED_OUTPUT)
    }

    async fn stream(&self, request: ChatRequest) -> Result<EventStream, ProviderError> {
        super::refuse_unsupported_schema(self, &request)?;
        let (body, dropped) = self.request_body(&request);
        if !dropped.is_empty() {
            tracing::warn!(
                provider = %self.cfg.name,
                model = %request.model,
                dropped = ?dropped,
                "schema keywords gemini does not accept were dropped"
            );
        }
        let request = SseRequest {
            client: &self.client,
            provider: &self.cfg.name,
            model: &request.model,
            url: self.url(&request.model),
            headers: self.headers()?,
            body,
            limits: self.cfg.limits,
        };
        sse::stream_sse(request, stream::GeminiDecoder::default()).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_and_model_prefixes() {
        let p = GeminiProvider::new(HttpProviderConfig::new(
            "gemini",
            "https://generativelanguage.googleapis.com/v1beta",
        ))
        .expect("builds");
        let expected = "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse";
        assert_eq!(p.url("gemini-2.5-flash"), expected);
        assert_eq!(p.url("models/gemini-2.5-flash"), expected);
        assert!(p.supports_structured_output("models/gemini-2.5-pro"));
        assert!(!p.supports_structured_output("gemini-1.0-pro"));
    }
}
