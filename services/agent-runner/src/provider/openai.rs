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

use std::borrow::Cow;

use reqwest::header::{AUTHORIZATION, HeaderName};

use super::{
    ChatRequest,
    http::HttpProviderConfig,
    wire::{SseProvider, WireProtocol},
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
pub type OpenAiProvider = SseProvider<OpenAi>;

/// The Chat Completions protocol of one server kind.
#[derive(Debug, Clone, Copy)]
pub struct OpenAi {
    flavor: Flavor,
}

impl OpenAiProvider {
    /// The server kind guessed from the base URL.
    pub fn flavor(&self) -> Flavor {
        self.wire().flavor
    }

    /// The request body this adapter sends for `request`.
    pub fn request_body(&self, request: &ChatRequest) -> serde_json::Value {
        request::body(request, self.wire().flavor, self.config().prompt_cache)
    }
}

impl WireProtocol for OpenAi {
    type Decoder = stream::OpenAiDecoder;
    const SYSTEM: &'static str = "openai";
    /// OpenAI takes images up to 20 MB (and scales large ones itself).
    const IMAGE_LIMITS: super::ImageLimits = super::ImageLimits {
        max_bytes: Some(20 * 1000 * 1000),
        max_edge: None,
    };
    const NO_STRUCTURED_OUTPUT: &'static [&'static str] = NO_STRUCTURED_OUTPUT;

    fn new(cfg: &HttpProviderConfig) -> Self {
        Self {
            flavor: Flavor::from_base_url(&cfg.base_url),
        }
    }

    fn url(&self, cfg: &HttpProviderConfig, _model: &str) -> String {
        cfg.endpoint("chat/completions")
    }

    /// Azure's `api-key`; everyone else's `Authorization: Bearer`.
    fn key_header<'k>(&self, key: &'k str) -> (HeaderName, Cow<'k, str>) {
        match self.flavor {
            Flavor::Azure => (HeaderName::from_static("api-key"), key.into()),
            _ => (AUTHORIZATION, format!("Bearer {key}").into()),
        }
    }

    fn body(&self, cfg: &HttpProviderConfig, request: &ChatRequest) -> serde_json::Value {
        request::body(request, self.flavor, cfg.prompt_cache)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flavors_from_urls() {
        for (url, flavor) in [
            ("https://api.openai.com/v1", Flavor::OpenAi),
            (
                "https://x.openai.azure.com/openai/v1?api-version=preview",
                Flavor::Azure,
            ),
            ("https://openrouter.ai/api/v1", Flavor::OpenRouter),
            ("http://127.0.0.1:11434/v1", Flavor::Compatible),
        ] {
            assert_eq!(Flavor::from_base_url(url), flavor, "{url}");
        }
    }

    #[test]
    fn builtin_structured_output_list() {
        OpenAiProvider::at("https://api.openai.com/v1").assert_structured_output(
            &["gpt-4o", "gpt-4.1-mini"],
            &["gpt-4-turbo", "gpt-3.5-turbo"],
        );
    }
}
