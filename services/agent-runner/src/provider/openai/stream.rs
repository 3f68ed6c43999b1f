//! Decoding a Chat Completions stream (`chat.completion.chunk` events ending
//! with `data: [DONE]`) into [`StreamEvent`]s, tolerant of the quirks of the
//! OpenAI-compatible servers listed in `PROVIDERS.md`.
//!
//! Text and reasoning are yielded as they arrive. Tool calls, the reasoning
//! block, usage and the finish are yielded when the stream ends, because
//! call fragments (and vLLM's usage) may keep coming until then.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::Value;

use super::{
    think::ThinkSplitter,
    tools::{ToolCalls, WireToolCall},
};
use crate::provider::{
    FinishReason, ProviderError, StreamEvent, Usage,
    http::truncate_raw,
    sse::Flow,
    wire::decode::{Answer, JsonDecoder, JsonEvent, Step, push_reasoning},
};

/// The state of one Chat Completions stream.
#[derive(Debug, Default)]
pub struct OpenAiDecoder {
    think: ThinkSplitter,
    reasoning: String,
    calls: ToolCalls,
    usage: Option<Usage>,
    finish_reason: Option<String>,
    refused: bool,
    answer: Answer,
}

/// One `chat.completion.chunk`. Its strings are borrowed from the event's
/// data where they have no escapes: a chunk's id, model and text are read
/// for every token, and only the first id and model are kept.
#[derive(Debug, Deserialize)]
pub struct Chunk<'a> {
    #[serde(borrow)]
    id: Option<Text<'a>>,
    #[serde(borrow)]
    model: Option<Text<'a>>,
    #[serde(default, borrow)]
    choices: Option<Vec<Choice<'a>>>,
    usage: Option<WireUsage>,
    error: Option<Value>,
    #[serde(borrow)]
    object: Option<Text<'a>>,
}

/// A JSON string borrowed from the data where it has no escapes. (serde
/// borrows a `Cow<str>` field only when it is not inside an `Option`.)
#[derive(Debug)]
struct Text<'a>(Cow<'a, str>);

impl std::ops::Deref for Text<'_> {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Text<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor<'a>(std::marker::PhantomData<Text<'a>>);
        impl<'de: 'a, 'a> serde::de::Visitor<'de> for Visitor<'a> {
            type Value = Text<'a>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E>(self, text: &'de str) -> Result<Self::Value, E> {
                Ok(Text(Cow::Borrowed(text)))
            }
            fn visit_str<E>(self, text: &str) -> Result<Self::Value, E> {
                Ok(Text(Cow::Owned(text.to_owned())))
            }
            fn visit_string<E>(self, text: String) -> Result<Self::Value, E> {
                Ok(Text(Cow::Owned(text)))
            }
        }
        deserializer.deserialize_str(Visitor(std::marker::PhantomData))
    }
}

#[derive(Debug, Deserialize)]
struct Choice<'a> {
    index: Option<u64>,
    #[serde(borrow)]
    delta: Option<Delta<'a>>,
    #[serde(borrow)]
    finish_reason: Option<Text<'a>>,
}

#[derive(Debug, Deserialize)]
struct Delta<'a> {
    #[serde(borrow)]
    content: Option<Text<'a>>,
    refusal: Option<String>,
    reasoning: Option<String>,
    reasoning_content: Option<String>,
    tool_calls: Option<Vec<WireToolCall>>,
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

impl JsonDecoder for OpenAiDecoder {
    const PROVIDER: &'static str = "openai";
    const END_MARKER: Option<&'static str> = Some("[DONE]");
    type Chunk<'a> = Chunk<'a>;

    fn on_chunk(&mut self, chunk: Chunk, event: JsonEvent, out: &mut Vec<StreamEvent>) -> Step {
        let data = event.data;
        if let Some(error) = stream_error(&chunk, event.name, data) {
            return Err(error);
        }
        // Azure opens with a chunk whose id and model are empty.
        let non_empty = |s: Option<Text>| s.filter(|s| !s.0.is_empty()).map(|s| s.0.into_owned());
        let answer = &mut self.answer;
        answer.response_id = answer.response_id.take().or_else(|| non_empty(chunk.id));
        answer.response_model = answer
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
                if &*reason == "error" {
                    return Err(ProviderError::StreamError {
                        kind: "error".into(),
                        message: "the provider ended the answer with finish_reason \"error\""
                            .into(),
                        retryable: true,
                        raw: truncate_raw(data),
                    });
                }
                self.finish_reason
                    .get_or_insert_with(|| reason.0.into_owned());
            }
        }
        Ok(Flow::Continue)
    }

    fn on_end_marker(&mut self, out: &mut Vec<StreamEvent>) -> Result<(), ProviderError> {
        self.finish(out)
    }

    fn on_close(&mut self, out: &mut Vec<StreamEvent>) -> Result<(), ProviderError> {
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
    fn delta(&mut self, delta: Delta<'_>, out: &mut Vec<StreamEvent>) -> Result<(), ProviderError> {
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
        push_reasoning(&mut self.reasoning, out);
        let cut = raw == "length";
        let calls = self.calls.finish(cut)?;
        self.answer.tool_calls = calls.len();
        out.extend(calls.into_iter().map(StreamEvent::ToolCall));
        // An end of turn after a refusal is a refusal (after tool calls, a
        // tool use).
        let reason = match finish_reason(&raw) {
            FinishReason::EndTurn if self.refused && self.answer.tool_calls == 0 => {
                FinishReason::Refusal
            }
            reason => reason,
        };
        self.answer.finish(self.usage, raw, reason, out);
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
            // Chat Completions reports no cache writes (caching is automatic).
            cache_write_tokens: 0,
            reasoning_tokens: u
                .completion_tokens_details
                .and_then(|d| d.reasoning_tokens)
                .unwrap_or(0),
            // Priced by the runner (`crate::pricing`).
            cost_micros: 0,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::sse::{Decoder, SseEvent};

    #[test]
    fn a_chunk_borrows_its_strings_unless_they_have_escapes() {
        let data = r#"{"id":"chatcmpl-1","model":"m","object":"chat.completion.chunk",
            "choices":[{"index":0,"delta":{"content":"caf\u00e9 "},"finish_reason":null}]}"#;
        let chunk: Chunk = serde_json::from_str(data).expect("a chunk");
        assert!(matches!(
            chunk.id.map(|t| t.0),
            Some(Cow::Borrowed("chatcmpl-1"))
        ));
        assert!(matches!(chunk.object.map(|t| t.0), Some(Cow::Borrowed(_))));
        let choice = chunk
            .choices
            .into_iter()
            .flatten()
            .next()
            .expect("a choice");
        let content = choice.delta.and_then(|d| d.content).expect("content");
        assert!(matches!(content.0, Cow::Owned(ref text) if text == "café "));
        assert!(choice.finish_reason.is_none());
    }

    #[test]
    fn text_is_decoded_with_and_without_escapes() {
        let mut decoder = OpenAiDecoder::default();
        let mut out = Vec::new();
        for data in [
            r#"{"choices":[{"delta":{"content":"a\"b"}}]}"#,
            r#"{"choices":[{"delta":{"content":" plain"},"finish_reason":"stop"}]}"#,
        ] {
            let event = SseEvent {
                event: Cow::Borrowed("message"),
                data: data.to_owned(),
            };
            decoder.on_event(&event, &mut out).expect("decoded");
        }
        let text: String = out
            .iter()
            .filter_map(|e| match e {
                StreamEvent::TextDelta(t) => Some(t.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(text, "a\"b plain");
        assert_eq!(decoder.finish_reason.as_deref(), Some("stop"));
    }
}
