//! The provider abstraction: one trait, one adapter per wire protocol, and
//! the providers a runner is configured with ([`Providers`]).
//!
//! The agent loop speaks only these domain types. Each adapter turns a
//! [`ChatRequest`] into its provider's HTTP request and the provider's stream
//! into [`StreamEvent`]s; the HTTP adapters are one skeleton
//! ([`wire::SseProvider`]) over each API's [`wire::WireProtocol`]. Dropping
//! the returned stream drops the HTTP response, which closes the connection:
//! that is how cancellation reaches the provider.

pub mod anthropic;
mod configured;
pub mod gemini;
pub mod http;
pub mod keys;
pub mod openai;
pub mod scripted;
pub mod sse;
pub mod wire;

pub use configured::{ModelChoice, ProviderEntry, Providers, UnknownProvider};

use std::{pin::Pin, sync::Arc, time::Duration};

use futures::Stream;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A boxed stream of provider events.
pub type EventStream = Pin<Box<dyn Stream<Item = Result<StreamEvent, ProviderError>> + Send>>;

/// One model call, in provider-neutral form.
///
/// The large parts (the system prompt, the conversation, the tools and
/// their schemas) are shared, not owned: a turn's requests, one per model
/// call and a copy per fallback and attempt, point at the turn's one copy
/// for as long as the call streams.
#[derive(Debug, Clone, PartialEq)]
pub struct ChatRequest {
    /// The provider's model name.
    pub model: String,
    /// The system prompt (may be empty).
    pub system: Arc<str>,
    /// The conversation, oldest first.
    pub messages: Arc<[Message]>,
    /// Tools the model may call.
    pub tools: Arc<[ToolSpec]>,
    /// When set, the answer must be JSON satisfying the schema (native API).
    pub output_schema: Option<OutputSchema>,
    /// Output token limit for this call.
    pub max_output_tokens: Option<u32>,
    /// Sampling parameters.
    pub params: SamplingParams,
    /// What a provider that caches prompt prefixes may reuse.
    pub cache: PromptCache,
}

/// What a provider that caches prompt prefixes may reuse across calls
/// (used where the provider's `prompt_cache` is on).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PromptCache {
    /// How many leading bytes of the system prompt are the same for every
    /// turn of the page: on a character boundary, at most its length; 0
    /// when unknown.
    pub stable_system_bytes: usize,
    /// A key grouping requests that share a prefix (OpenAI's
    /// `prompt_cache_key`).
    pub key: Option<Arc<str>>,
}

/// Sampling parameters; `None` leaves the provider's default.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SamplingParams {
    pub temperature: Option<f32>,
    pub top_p: Option<f32>,
    /// `low` / `medium` / `high` for models that take it.
    pub reasoning_effort: Option<String>,
    /// Thinking budget in tokens (Anthropic, Gemini).
    pub thinking_budget: Option<u32>,
}

/// A JSON schema for native structured output.
#[derive(Debug, Clone, PartialEq)]
pub struct OutputSchema {
    /// A name for the schema (OpenAI requires one).
    pub name: String,
    /// The JSON schema.
    pub schema: Value,
}

/// A tool offered to the model.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    /// JSON schema of the input.
    pub input_schema: Value,
}

/// One message of the history, in provider-neutral form.
#[derive(Debug, Clone, PartialEq)]
pub enum Message {
    /// A user message: its text, and the files it carries (each provider
    /// sends them in its own shape: see [`Attachment`]).
    User {
        text: String,
        attachments: Vec<Arc<Attachment>>,
    },
    /// A model message: reasoning blocks first (Anthropic requires thinking
    /// blocks before tool_use when replaying), then text, then tool calls.
    Assistant {
        reasoning: Vec<ReasoningBlock>,
        text: String,
        tool_calls: Vec<ToolCall>,
    },
    /// The results of an assistant message's tool calls, all together.
    ToolResults(Vec<ToolResult>),
}

impl Message {
    /// A user message of `text` alone.
    pub fn user(text: impl Into<String>) -> Self {
        Self::User {
            text: text.into(),
            attachments: Vec::new(),
        }
    }
}

/// The largest image a model takes, on each measure (`None`: no limit).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ImageLimits {
    /// The most bytes of one image.
    pub max_bytes: Option<u64>,
    /// The most pixels of its longer side.
    pub max_edge: Option<u32>,
}

impl ImageLimits {
    /// No limit.
    pub const NONE: Self = Self {
        max_bytes: None,
        max_edge: None,
    };

    /// The stricter of `self` and `other` on each measure.
    pub fn stricter(self, other: Self) -> Self {
        fn least<T: Ord>(a: Option<T>, b: Option<T>) -> Option<T> {
            match (a, b) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            }
        }
        Self {
            max_bytes: least(self.max_bytes, other.max_bytes),
            max_edge: least(self.max_edge, other.max_edge),
        }
    }

    /// Whether an image of `bytes` bytes and `edge` pixels on its longer
    /// side is within the limits.
    pub fn fits(self, bytes: u64, edge: u32) -> bool {
        self.max_bytes.is_none_or(|max| bytes <= max) && self.max_edge.is_none_or(|max| edge <= max)
    }
}

/// What a model takes as input besides text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum InputKind {
    /// Text (every model).
    Text,
    /// Images.
    Image,
    /// PDF documents.
    Pdf,
}

impl InputKind {
    /// Every kind.
    pub const ALL: [InputKind; 3] = [InputKind::Text, InputKind::Image, InputKind::Pdf];

    /// `text`, `image` or `pdf`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Text => "text",
            Self::Image => "image",
            Self::Pdf => "pdf",
        }
    }
}

/// A file a user message carries to the model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attachment {
    /// The file's name, as the user gave it.
    pub name: String,
    /// Its media type, sniffed by the gateway (`image/png`,
    /// `application/pdf`, `text/csv`).
    pub media_type: String,
    /// Its bytes.
    pub data: Vec<u8>,
}

impl Attachment {
    /// What the file is to a model's input: an image, a PDF, or text.
    pub fn kind(&self) -> InputKind {
        let media_type = self.media_type.to_ascii_lowercase();
        if media_type.starts_with("image/") {
            InputKind::Image
        } else if media_type == "application/pdf" {
            InputKind::Pdf
        } else {
            InputKind::Text
        }
    }

    /// The file as text for the model (a text file's bytes, lossily
    /// decoded), introduced by its name: `[file sales.csv, text/csv]`.
    pub fn as_text(&self) -> String {
        format!(
            "[file {}, {}]\n{}",
            self.name,
            self.media_type,
            String::from_utf8_lossy(&self.data)
        )
    }

    /// The line that stands for a file the model cannot take:
    /// `[file q3.pdf, application/pdf, 20480 bytes, not shown]`.
    pub fn described(&self) -> String {
        format!(
            "[file {}, {}, {} bytes, not shown to this model]",
            self.name,
            self.media_type,
            self.data.len()
        )
    }

    /// Its bytes in base64 (standard alphabet, padded), as every provider
    /// takes them.
    pub fn base64(&self) -> String {
        use base64::Engine as _;
        base64::engine::general_purpose::STANDARD.encode(&self.data)
    }
}

/// A reasoning block kept for replay within the turn.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ReasoningBlock {
    /// The (summarised) thinking text.
    pub text: String,
    /// Anthropic's `signature`, which must be sent back unchanged.
    pub signature: Option<String>,
    /// Anthropic's `redacted_thinking` data, sent back unchanged.
    pub redacted: Option<String>,
}

/// A complete tool call from the model.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    /// The provider's id, or a synthesized `call_<n>` when it gave none.
    pub id: String,
    pub name: String,
    /// The parsed arguments (an object).
    pub input: Value,
    /// Opaque data the provider needs echoed back with this call in history
    /// (Gemini's `thoughtSignature`).
    pub provider_data: Option<Value>,
}

/// A tool's answer for the model.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolResult {
    pub call_id: String,
    /// The tool name (Gemini matches `functionResponse` by name).
    pub name: String,
    pub text: String,
    pub is_error: bool,
    /// The images and documents the tool returned, for models that take
    /// them (`text` names each, for those that do not).
    pub attachments: Vec<Arc<Attachment>>,
}

/// What a provider stream yields.
#[derive(Debug, Clone, PartialEq)]
pub enum StreamEvent {
    /// The next piece of answer text (or structured JSON when a schema is set).
    TextDelta(String),
    /// The next piece of reasoning, for display.
    ReasoningDelta(String),
    /// A reasoning block finished; kept for replay in the next request.
    ReasoningBlock(ReasoningBlock),
    /// A tool call whose arguments are complete.
    ToolCall(ToolCall),
    /// Token usage (may arrive more than once; the latest wins).
    Usage(Usage),
    /// The provider's finish signal; the last event of a successful stream.
    Finish(Finish),
}

/// Token usage of one call, the same meaning whichever provider reported it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    /// All prompt tokens: uncached, read from the cache and written to it.
    pub input_tokens: u64,
    /// All generated tokens, reasoning included.
    pub output_tokens: u64,
    /// The part of `input_tokens` read from the provider's cache.
    pub cached_input_tokens: u64,
    /// The part of `input_tokens` written to the provider's cache.
    pub cache_write_tokens: u64,
    /// The part of `output_tokens` spent on reasoning.
    pub reasoning_tokens: u64,
    /// What the call cost, in micro-units of `[pricing] currency`: set by
    /// the runner from the model's prices ([`crate::pricing`]), never by a
    /// provider.
    pub cost_micros: u64,
}

impl std::ops::AddAssign for Usage {
    /// Adds every count (the usage of several calls of a turn).
    fn add_assign(&mut self, other: Self) {
        self.input_tokens = self.input_tokens.saturating_add(other.input_tokens);
        self.output_tokens = self.output_tokens.saturating_add(other.output_tokens);
        self.cached_input_tokens = self
            .cached_input_tokens
            .saturating_add(other.cached_input_tokens);
        self.cache_write_tokens = self
            .cache_write_tokens
            .saturating_add(other.cache_write_tokens);
        self.reasoning_tokens = self.reasoning_tokens.saturating_add(other.reasoning_tokens);
        self.cost_micros = self.cost_micros.saturating_add(other.cost_micros);
    }
}

/// How a model call ended.
#[derive(Debug, Clone, PartialEq)]
pub struct Finish {
    pub reason: FinishReason,
    /// The provider's own value (`stop`, `end_turn`, `STOP`, ...).
    pub raw_reason: String,
    /// The provider's response id, when given.
    pub response_id: Option<String>,
    /// The model the provider says answered, when given.
    pub response_model: Option<String>,
}

/// Every provider's finish reasons, mapped to one enum.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FinishReason {
    EndTurn,
    ToolUse,
    MaxTokens,
    StopSequence,
    ContentFilter,
    Refusal,
    /// Anthropic `pause_turn`: the model wants to continue in another call.
    Pause,
    Other,
}

/// Why a provider call failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ProviderError {
    /// The provider answered with an HTTP error status.
    #[error("provider returned HTTP {status}: {body}")]
    Http {
        status: u16,
        /// The raw body, for diagnosis.
        body: String,
        /// The provider's requested delay (headers or body), if any.
        retry_after: Option<Duration>,
        /// `x-should-retry`, when the provider sent it.
        should_retry: Option<bool>,
    },
    /// Connecting or reading failed.
    #[error("connection to provider failed: {0}")]
    Connection(String),
    /// An error object inside a 200 stream (`overloaded_error`, ...).
    #[error("provider stream error ({kind}): {message}")]
    StreamError {
        kind: String,
        message: String,
        retryable: bool,
        /// The raw event text.
        raw: String,
    },
    /// Data that does not follow the protocol (bad JSON, missing fields).
    #[error("malformed provider data: {reason}")]
    Malformed { reason: String, raw: String },
    /// The stream ended without the provider's finish signal.
    #[error("provider stream ended before it finished")]
    Truncated,
    /// The model cannot do what was asked (for example structured output).
    #[error("{0}")]
    Unsupported(String),
    /// The provider is misconfigured (no key, bad URL).
    #[error("provider configuration: {0}")]
    Config(String),
    /// The provider sent more than a limit allows: one event longer than
    /// `providers.max_event_bytes`, or a whole answer longer than
    /// `providers.max_response_bytes`. The connection is dropped; never
    /// retried (the same request would likely do it again).
    #[error("the provider's {what} exceeded the limit of {limit} bytes")]
    TooLarge {
        /// `event` or `response`.
        what: &'static str,
        /// The limit that was passed, in bytes.
        limit: usize,
    },
}

/// A model API. Implementations must be cheap to share (`Arc<dyn Provider>`).
#[async_trait::async_trait]
pub trait Provider: Send + Sync + std::fmt::Debug {
    /// The configured provider name (for example `openai`), for logs and spans.
    fn name(&self) -> &str;

    /// The `gen_ai.provider.name` of this adapter (`openai`, `anthropic`,
    /// `gcp.gemini`, `parley.scripted`).
    fn system(&self) -> &'static str;

    /// Whether `model` supports native structured output; when false a request
    /// with a schema fails with `FAILED_PRECONDITION` naming the model.
    fn supports_structured_output(&self, model: &str) -> bool;

    /// The largest image the API takes; larger ones are downscaled first
    /// ([`crate::attachments::images`]). No limit by default.
    fn image_limits(&self) -> ImageLimits {
        ImageLimits::NONE
    }

    /// Sends the request and returns the event stream. Errors before the
    /// stream starts (HTTP status, connection) are returned here; errors
    /// during the stream are items of the stream.
    async fn stream(&self, request: ChatRequest) -> Result<EventStream, ProviderError>;
}

/// Refuses a request with a schema when `provider` has no native structured
/// output for its model, before anything is sent.
pub(crate) fn refuse_unsupported_schema(
    provider: &dyn Provider,
    request: &ChatRequest,
) -> Result<(), ProviderError> {
    if request.output_schema.is_some() && !provider.supports_structured_output(&request.model) {
        return Err(ProviderError::Unsupported(format!(
            "model {} of provider {} does not support native structured output",
            request.model,
            provider.name()
        )));
    }
    Ok(())
}
