//! The one skeleton of every SSE provider: [`SseProvider`] is the
//! [`Provider`] of any [`WireProtocol`].
//!
//! A wire protocol says only what differs between model APIs: the endpoint
//! of a call, its key and version headers, its JSON body, the decoder that
//! maps the answer's events (and the errors inside them) to
//! [`StreamEvent`](super::StreamEvent)s, and the models that never have
//! native structured output. Everything else is here once: the HTTP client
//! built from the provider's [`HttpProviderConfig`], the refusal of a schema
//! the model cannot honour before anything is sent, the API key of each
//! request (the next key at once when one is rate-limited or refused:
//! [`super::keys`]), the POST with the trace context, the error mapping of
//! the HTTP status (with the provider's requested delay), and the limits on
//! one event and one answer ([`sse::stream_sse`]). What the bodies and the decoders share around
//! each API's own fields and events is in [`body`] and [`decode`].

pub mod body;
pub mod decode;

use std::{borrow::Cow, fmt};

use reqwest::header::{HeaderMap, HeaderName};
use serde_json::Value;

use super::{
    ChatRequest, EventStream, Provider, ProviderError,
    http::{self, HttpProviderConfig},
    keys::KeyOutcome,
    sse::{self, Decoder, SseRequest},
};

/// What one model API says on the wire.
pub trait WireProtocol: Send + Sync + fmt::Debug + 'static {
    /// The state of one answer's event stream, fresh for each answer.
    type Decoder: Decoder + Default;

    /// The `gen_ai.provider.name` of the protocol (`openai`, `anthropic`,
    /// `gcp.gemini`).
    const SYSTEM: &'static str;

    /// Models without native structured output, always refused (besides
    /// the configured list): exact names, or prefixes ending in `*`.
    const NO_STRUCTURED_OUTPUT: &'static [&'static str];

    /// The largest image the API takes (its documented limits).
    const IMAGE_LIMITS: super::ImageLimits;

    /// The protocol of one configured provider.
    fn new(cfg: &HttpProviderConfig) -> Self;

    /// The name `model` is matched under against the structured-output
    /// lists.
    fn structured_output_model<'a>(&self, model: &'a str) -> &'a str {
        model
    }

    /// The endpoint of a call to `model`.
    fn url(&self, cfg: &HttpProviderConfig, model: &str) -> String;

    /// The header carrying the API key `key`, and its value (sent marked
    /// sensitive, [`http::secret_header`]); sent when a key is configured.
    fn key_header<'k>(&self, key: &'k str) -> (HeaderName, Cow<'k, str>);

    /// Headers every call carries besides the key (an API version).
    fn fixed_headers(&self, _headers: &mut HeaderMap) {}

    /// The JSON body of `request`.
    fn body(&self, cfg: &HttpProviderConfig, request: &ChatRequest) -> Value;
}

/// A provider speaking the wire protocol `W` over HTTP and server-sent
/// events.
#[derive(Debug)]
pub struct SseProvider<W> {
    cfg: HttpProviderConfig,
    client: reqwest::Client,
    wire: W,
}

impl<W: WireProtocol> SseProvider<W> {
    /// Builds the adapter and its HTTP client.
    pub fn new(cfg: HttpProviderConfig) -> Result<Self, ProviderError> {
        let client = http::client(&cfg)?;
        let wire = W::new(&cfg);
        Ok(Self { cfg, client, wire })
    }

    /// The provider's configuration.
    pub fn config(&self) -> &HttpProviderConfig {
        &self.cfg
    }

    /// The provider's wire protocol.
    pub fn wire(&self) -> &W {
        &self.wire
    }

    /// The endpoint of a call to `model`.
    pub fn url(&self, model: &str) -> String {
        self.wire.url(&self.cfg, model)
    }
}

#[async_trait::async_trait]
impl<W: WireProtocol> Provider for SseProvider<W> {
    fn name(&self) -> &str {
        &self.cfg.name
    }

    fn system(&self) -> &'static str {
        W::SYSTEM
    }

    fn image_limits(&self) -> super::ImageLimits {
        W::IMAGE_LIMITS
    }

    fn supports_structured_output(&self, model: &str) -> bool {
        self.cfg.structured_output_allowed(
            self.wire.structured_output_model(model),
            W::NO_STRUCTURED_OUTPUT,
        )
    }

    /// Sends the request with the provider's next key; when the provider
    /// rate-limits or refuses that key, sends it again at once with the
    /// next ready key not tried yet (see [`super::keys`]), and returns the
    /// last answer once none is left.
    async fn stream(&self, request: ChatRequest) -> Result<EventStream, ProviderError> {
        super::refuse_unsupported_schema(self, &request)?;
        let body = self.wire.body(&self.cfg, &request);
        let url = self.url(&request.model);
        let keys = &self.cfg.api_keys;
        let mut tried = Vec::new();
        let mut key = keys.pick(&tried);
        loop {
            let mut headers = HeaderMap::new();
            self.wire.fixed_headers(&mut headers);
            if let Some(key) = &key {
                let (name, value) = self.wire.key_header(key.expose());
                headers.insert(name, http::secret_header(&value)?);
            }
            let sse_request = SseRequest {
                client: &self.client,
                provider: &self.cfg.name,
                model: &request.model,
                url: &url,
                headers,
                body: &body,
                limits: self.cfg.limits,
            };
            let result = sse::stream_sse(sse_request, W::Decoder::default()).await;
            let Some(sent) = key else {
                return result;
            };
            let outcome = KeyOutcome::of(&result);
            keys.record(&self.cfg.name, sent.index(), outcome);
            if !outcome.moves_on() {
                return result;
            }
            tried.push(sent.index());
            key = keys.pick(&tried);
            if key.is_none() {
                return result;
            }
            tracing::info!(
                provider = %self.cfg.name,
                key = keys.name(sent.index()),
                outcome = outcome.label(),
                "sending the request again at once with the provider's next API key"
            );
        }
    }
}

#[cfg(test)]
impl<W: WireProtocol> SseProvider<W> {
    /// The provider of `W` at `base_url`, otherwise configured by default.
    pub(crate) fn at(base_url: &str) -> Self {
        Self::new(HttpProviderConfig::new(W::SYSTEM, base_url)).expect("the client builds")
    }

    /// Asserts that the `allowed` models get native structured output and
    /// the `refused` ones do not.
    pub(crate) fn assert_structured_output(&self, allowed: &[&str], refused: &[&str]) {
        for model in allowed {
            assert!(self.supports_structured_output(model), "{model} allowed");
        }
        for model in refused {
            assert!(!self.supports_structured_output(model), "{model} refused");
        }
    }
}
