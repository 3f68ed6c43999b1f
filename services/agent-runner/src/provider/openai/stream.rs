//! Decoding a Chat Completions stream (`chat.completion.chunk` events ending
//! with `data: [DONE]`) into [`StreamEvent`]s, tolerant of the quirks of the
//! OpenAI-compatible servers listed in `PROVIDERS.md`.
//!
//! Text and reasoning are yielded as they arrive. Tool calls, the reasoning
//! block, usage and the finish are yielded when the stream ends, because
//! call fragments (and vLLM's usage) may keep coming until then.

use serde::Deserialize;
use serde_json::Value;

use super::{think::ThinkSplitter, tools::ToolCalls};
use crate::provider::{
    Finish, FinishReason, ProviderError, ReasoningBlock, StreamEvent, Usage,
    http::truncate_raw,
    sse::{Decoder, Flow, SseEvent, malformed_json},
};

/// The state of one Chat Completions stream.
#[derive(Debug, Default)]
pub(crate) struct OpenAiDecoder {
    think: ThinkSplitter,
    reasoning: String,
    calls: ToolCalls,
    usage: Option<Usage>,
    finish_reason: Option<String>,
    refused: bool,
    response_id: Option<String>,
    response_model: Option<String>,
}

#[derive(Debug, Deserialize)]
struct Chunk {
    id: Option<String>,
    model: Option<String>,
    #[serde(default)]
    choices: Option<Vec<Choice>>,
    usage: Option<WireUsage>,
    error: Option<Value>,
    object: Option<String>,
}

#[derive(Debug, Deserialize)]
struct Choice {
    index: Option<u64>,
    delta: Option<Delta>,
    finish_reason: Option<String>,
}

#[derive(Debug, Deserialize)]
struct Delta {
    content: Option<String>,
    refusal: Option<String>,
    reasoning: Option<String>,
    reasoning_content: Option<String>,
    tool_calls: Option<Vec<WireToolCall>>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct WireToolCall {
    pub index: Option<u64>,
    pub id: Option<String>,
    pub function: Option<WireFunction>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct WireFunction {
    pub name: Option<String>,
    /// A string piece, or (some servers) the whole arguments object.
    pub arguments: Option<Value>,
}

#[derive(Debug, Deserialize)]
struct WireUsage {
    prompt_tokens: Option<u64>,
    completion_tokens: Option<u64>,
    prompt_tokens_details: Option<PromptDetails>,
    completion_tokens_details: Option<CompletionDetails>,
}

#[derive(Debug, Deserialize)]
struct PromptDetails {
    cached_tokens: Option<u64>,
}

#[derive(Debug, Deserialize)]
struct CompletionDetails {
    reasoning_tokens: Option<u64>,
}

impl Decoder for OpenAiDecoder {
    fn on_event(
        &mut self,
        event: &SseEvent,
        out: &mut Vec<StreamEvent>,
    ) -> Result<Flow, ProviderError> {
        let data = event.data.trim();
        if data == "[DONE]" {
            self.finish(out)?;
            return Ok(Flow::Done);
        }
        if data.is_empty() {
            return Ok(Flow::Continue);
        }
        let chunk: Chunk =
            serde_json::from_str(data).map_err(|e| malformed_json("openai", &e, data))?;
        if let Some(error) = stream_error(&chunk, &event.event, data) {
            return Err(error);
        }
        // Azure opens with a chunk whose id and model are empty.
        let non_empty = |s: Option<String>| s.filter(|s| !s.is_empty());
        self.response_id = self.response_id.take().or_else(|| non_empty(chunk.id));
        self.response_model = self
            .response_model
            .take()
            .or_else(|| non_empty(chunk.model));
        if let Some(usage) = chunk.usage {
            self.usage = Some(usage.into());
        }
        for choice in chunk.choices.unwrap_or_default() {
            if choice.index.unwrap_or(0) != 0 {
                continue;
            }
            if let Some(delta) = choice.delta {
                self.delta(delta, out)?;
            }
            if let Some(reason) = choice.finish_reason.filter(|r| !r.is_empty()) {
                if reason == "error" {
                    return Err(ProviderError::StreamError {
                        kind: "error".into(),
                        message: "the provider ended the answer with finish_reason \"error\""
                            .into(),
                        retryable: true,
                        raw: truncate_raw(data),
                    });
                }
                self.finish_reason.get_or_insert(reason);
            }
        }
        Ok(Flow::Continue)
    }

    fn on_end(&mut self, out: &mut Vec<StreamEvent>) -> Result<(), ProviderError> {
        // Some servers close without `[DONE]`; a finish_reason is still a
        // complete answer. Without one the answer was cut.
        if self.finish_reason.is_none() {
            return Err(ProviderError::Truncated);
        }
        tracing::debug!("openai-compatible stream closed without [DONE]");
        self.finish(out)
    }
}

impl OpenAiDecoder {
    fn delta(&mut self, delta: Delta, out: &mut Vec<StreamEvent>) -> Result<(), ProviderError> {
        for piece in [delta.reasoning_content, delta.reasoning]
            .into_iter()
            .flatten()
        {
            self.push_reasoning(piece, out);
        }
        if let Some(content) = delta.content.filter(|c| !c.is_empty()) {
            let split = self.think.push(&content);
            self.push_split(split, out);
        }
        if let Some(refusal) = delta.refusal.filter(|r| !r.is_empty()) {
            self.refused = true;
            out.push(StreamEvent::TextDelta(refusal));
        }
        for (position, call) in delta.tool_calls.unwrap_or_default().into_iter().enumerate() {
            self.calls.push(position, call);
        }
        Ok(())
    }

    fn push_reasoning(&mut self, piece: String, out: &mut Vec<StreamEvent>) {
        if piece.is_empty() {
            return;
        }
        self.reasoning.push_str(&piece);
        out.push(StreamEvent::ReasoningDelta(piece));
    }

    fn push_split(&mut self, split: super::think::Split, out: &mut Vec<StreamEvent>) {
        self.push_reasoning(split.reasoning, out);
        if !split.text.is_empty() {
            out.push(StreamEvent::TextDelta(split.text));
        }
    }

    /// Yields everything held until the end, then the finish.
    fn finish(&mut self, out: &mut Vec<StreamEvent>) -> Result<(), ProviderError> {
        let Some(raw) = self.finish_reason.clone() else {
            return Err(ProviderError::Truncated);
        };
        let split = self.think.finish();
        self.push_split(split, out);
        if !self.reasoning.is_empty() {
            out.push(StreamEvent::ReasoningBlock(ReasoningBlock {
                text: std::mem::take(&mut self.reasoning),
                signature: None,
                redacted: None,
            }));
        }
        let cut = raw == "length";
        let calls = self.calls.finish(cut)?;
        let had_calls = !calls.is_empty();
        out.extend(calls.into_iter().map(StreamEvent::ToolCall));
        if let Some(usage) = self.usage {
            out.push(StreamEvent::Usage(usage));
        }
        let mut reason = finish_reason(&raw);
        if had_calls && reason == FinishReason::EndTurn {
            reason = FinishReason::ToolUse;
        }
        if self.refused && reason == FinishReason::EndTurn {
            reason = FinishReason::Refusal;
        }
        out.push(StreamEvent::Finish(Finish {
            reason,
            raw_reason: raw,
            response_id: self.response_id.clone(),
            response_model: self.response_model.clone(),
        }));
        Ok(())
    }
}

/// Maps an OpenAI-style `finish_reason`.
pub(crate) fn finish_reason(raw: &str) -> FinishReason {
    match raw {
        "stop" | "end_turn" => FinishReason::EndTurn,
        "length" | "max_tokens" => FinishReason::MaxTokens,
        "tool_calls" | "function_call" => FinishReason::ToolUse,
        "content_filter" => FinishReason::ContentFilter,
        _ => FinishReason::Other,
    }
}

impl From<WireUsage> for Usage {
    fn from(u: WireUsage) -> Self {
        Usage {
            input_tokens: u.prompt_tokens.unwrap_or(0),
            output_tokens: u.completion_tokens.unwrap_or(0),
            cached_input_tokens: u
                .prompt_tokens_details
                .and_then(|d| d.cached_tokens)
                .unwrap_or(0),
            reasoning_tokens: u
                .completion_tokens_details
                .and_then(|d| d.reasoning_tokens)
                .unwrap_or(0),
        }
    }
}

/// An error object inside the stream: OpenAI/SGLang `{"error": {...}}`,
/// vLLM `{"object": "error", ...}`, OpenRouter's top-level `error` beside
/// `finish_reason: "error"`, or an `event: error`.
fn stream_error(chunk: &Chunk, event_name: &str, raw: &str) -> Option<ProviderError> {
    let (kind, message, code) = match (&chunk.error, chunk.object.as_deref()) {
        (Some(error), _) => describe(error),
        (None, Some("error")) => {
            let value: Value = serde_json::from_str(raw).unwrap_or(Value::Null);
            describe(&value)
        }
        (None, _) if event_name == "error" => ("error".to_owned(), raw.to_owned(), None),
        _ => return None,
    };
    Some(ProviderError::StreamError {
        retryable: retryable(&kind, code),
        kind,
        message,
        raw: truncate_raw(raw),
    })
}

/// (kind, message, numeric code) of an error object or string.
fn describe(error: &Value) -> (String, String, Option<u64>) {
    if let Some(text) = error.as_str() {
        return ("error".into(), text.into(), None);
    }
    let text = |v: Option<&Value>| match v {
        Some(Value::String(s)) => Some(s.clone()),
        Some(Value::Number(n)) => Some(n.to_string()),
        _ => None,
    };
    let code_value = error.get("code");
    let code = code_value.and_then(|c| {
        c.as_u64()
            .or_else(|| c.as_str().and_then(|s| s.parse().ok()))
    });
    let kind = text(error.get("type"))
        .or_else(|| text(code_value))
        .unwrap_or_else(|| "error".into());
    let message = text(error.get("message")).unwrap_or_else(|| error.to_string());
    (kind, message, code)
}

/// Whether a stream error is worth another attempt.
fn retryable(kind: &str, code: Option<u64>) -> bool {
    if let Some(code) = code
        && (code == 408 || code == 429 || (500..600).contains(&code))
    {
        return true;
    }
    let kind = kind.to_ascii_lowercase();
    [
        "overloaded",
        "rate_limit",
        "server_error",
        "timeout",
        "unavailable",
        "internal",
    ]
    .iter()
    .any(|k| kind.contains(k))
}
