//! The OpenAI Chat Completions adapter, for OpenAI itself and every
//! OpenAI-compatible server (Azure, OpenRouter, Ollama `/v1`, vLLM,
//! llama.cpp, SGLang, LM Studio).
//!
//! `request` builds the body, `stream` decodes the chunks, `tools`
//! assembles tool-call fragments and `think` separates `<think>` reasoning
//! written into the content. The few differences between servers that show
//! in the request (the key header, the token-limit field) follow the
//! [`Flavor`] guessed from the base URL.

mod request;
mod stream;
mod think;
mod tools;

use reqwest::header::{AUTHORIZATION, HeaderMap, HeaderName};
use secrecy::ExposeSecret;

use super::{
    ChatRequest, EventStream, Provider, ProviderError,
    http::{self, HttpProviderConfig},
    sse::{self, SseRequest},
};

/// Models that cannot do `response_format: json_schema`, always refused
/// (besides the configured list).
pub const NO_STRUCTURED_OUTPUT: &[&str] = &[
    "gpt-3.5*",
    "gpt-4",
    "gpt-4-*",
    "gpt-4o-2024-05-13",
    "o1-mini*",
    "o1-preview*",
];

/// Which kind of server the base URL points at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavor {
    /// api.openai.com: `max_completion_tokens` only.
    OpenAi,
    /// Azure OpenAI: the key goes in `api-key`.
    Azure,
    /// OpenRouter: OpenAI's request shape.
    OpenRouter,
    /// Any other compatible server: both token-limit fields.
    Compatible,
}

impl Flavor {
    /// Guesses the flavor from the configured base URL.
    pub fn from_base_url(base_url: &str) -> Self {
        let host = base_url
            .split("://")
            .nth(1)
            .unwrap_or(base_url)
            .split(['/', '?', ':'])
            .next()
            .unwrap_or("")
            .to_ascii_lowercase();
        if host == "api.openai.com" {
            Flavor::OpenAi
        } else if host.ends_with(".azure.com") || host.ends_with(".azure-api.net") {
            Flavor::Azure
        } else if host == "openrouter.ai" || host.ends_with(".openrouter.ai") {
            Flavor::OpenRouter
        } else {
            Flavor::Compatible
        }
    }
}

/// An OpenAI-compatible Chat Completions endpoint.
#[derive(Debug)]
pub struct OpenAiProvider {
    cfg: HttpProviderConfig,
    client: reqwest::Client,
    flavor: Flavor,
}

impl OpenAiProvider {
    /// Builds the adapter and its HTTP client.
    pub fn new(cfg: HttpProviderConfig) -> Result<Self, ProviderError> {
        let client = http::client(&cfg)?;
        let flavor = Flavor::from_base_url(&cfg.base_url);
        Ok(Self {
            cfg,
            client,
            flavor,
        })
    }

    /// The server kind guessed from the base URL.
    pub fn flavor(&self) -> Flavor {
        self.flavor
    }

    /// The request body this adapter sends for `request`.
    pub fn request_body(&self, request: &ChatRequest) -> serde_json::Value {
        request::body(request, self.flavor)
    }

    fn headers(&self) -> Result<HeaderMap, ProviderError> {
        let mut headers = HeaderMap::new();
        if let Some(key) = self.cfg.api_key.get() {
            let key = key.expose_secret();
            match self.flavor {
                Flavor::Azure => {
                    headers.insert(
                        HeaderName::from_static("api-key"),
                        http::secret_header(key)?,
                    );
                }
                _ => {
                    headers.insert(
                        AUTHORIZATION,
                        http::secret_header(&format!("Bearer {key}"))?,
                    );
                }
            }
        }
        Ok(headers)
    }
}

#[async_trait::async_trait]
impl Provider for OpenAiProvider {
    fn name(&self) -> &str {
        &self.cfg.name
    }

    fn system(&self) -> &'static str {
        "openai"
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
            url: self.cfg.endpoint("chat/completions"),
            headers: self.headers()?,
            body: self.request_body(&request),
            limits: self.cfg.limits,
        };
        sse::stream_sse(request, stream::OpenAiDecoder::default()).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flavors_from_urls() {
        assert_eq!(
            Flavor::from_base_url("https://api.openai.com/v1"),
            Flavor::OpenAi
        );
        assert_eq!(
            Flavor::from_base_url("https://x.openai.azure.com/openai/v1?api-version=preview"),
            Flavor::Azure
        );
        assert_eq!(
            Flavor::from_base_url("https://openrouter.ai/api/v1"),
            Flavor::OpenRouter
        );
        assert_eq!(
            Flavor::from_base_url("http://127.0.0.1:11434/v1"),
            Flavor::Compatible
        );
    }

    #[test]
    fn builtin_structured_output_list() {
        let p = OpenAiProvider::new(HttpProviderConfig::new(
            "openai",
            "https://api.openai.com/v1",
        ))
        .expect("client builds");
        assert!(p.supports_structured_output("gpt-4o"));
        assert!(p.supports_structured_output("gpt-4.1-mini"));
        assert!(!p.supports_structured_output("gpt-4-turbo"));
        assert!(!p.supports_structured_output("gpt-3.5-turbo"));
    }
}
