//! Decoding a `streamGenerateContent?alt=sse` stream (one
//! `GenerateContentResponse` per `data:` event, CRLF framing, no end marker)
//! into [`StreamEvent`]s.
//!
//! Text parts are deltas; `thought: true` parts are reasoning. Function
//! calls arrive whole and are yielded at once; the Developer API gives them
//! no ids, so one is synthesized, and a `thoughtSignature` is kept in
//! [`ToolCall::provider_data`] to be echoed back. `finishReason` comes on the
//! last chunk and `usageMetadata` is cumulative, so both are yielded when the
//! connection closes; a close without a `finishReason` is a truncation.

use serde_json::{Map, Value, json};

use super::request::{ID_KEY, SIGNATURE_KEY};
use crate::provider::{
    FinishReason, ProviderError, StreamEvent, ToolCall, Usage,
    http::truncate_raw,
    sse::{Flow, synthesize_call_id},
    wire::decode::{Answer, JsonDecoder, JsonEvent, Step, push_reasoning},
};

/// The state of one Gemini stream.
#[derive(Debug, Default)]
pub struct GeminiDecoder {
    thoughts: String,
    usage: Option<Usage>,
    finish_reason: Option<String>,
    /// The prompt was blocked (`promptFeedback.blockReason`).
    blocked: bool,
    answer: Answer,
}

impl JsonDecoder for GeminiDecoder {
    const PROVIDER: &'static str = "gemini";
    type Chunk<'a> = Value;

    fn on_chunk(&mut self, value: Value, event: JsonEvent, out: &mut Vec<StreamEvent>) -> Step {
        let data = event.data;
        if let Some(error) = value.get("error") {
            return Err(stream_error(error, data));
        }
        if self.answer.response_id.is_none() {
            self.answer.response_id = value
                .get("responseId")
                .and_then(Value::as_str)
                .map(Into::into);
        }
        if self.answer.response_model.is_none() {
            self.answer.response_model = value
                .get("modelVersion")
                .and_then(Value::as_str)
                .map(Into::into);
        }
        if let Some(usage) = value.get("usageMetadata") {
            self.usage = Some(usage_from(usage));
        }
        if let Some(reason) = value
            .get("promptFeedback")
            .and_then(|f| f.get("blockReason"))
            .and_then(Value::as_str)
        {
            self.blocked = true;
            self.finish_reason = Some(reason.to_owned());
        }
        let candidate = value
            .get("candidates")
            .and_then(Value::as_array)
            .and_then(|c| c.first());
        let Some(candidate) = candidate else {
            return Ok(Flow::Continue);
        };
        let parts = candidate
            .get("content")
            .and_then(|c| c.get("parts"))
            .and_then(Value::as_array);
        for part in parts.into_iter().flatten() {
            self.part(part, data, out)?;
        }
        if let Some(reason) = candidate.get("finishReason").and_then(Value::as_str) {
            self.finish_reason = Some(reason.to_owned());
        }
        Ok(Flow::Continue)
    }

    fn on_close(&mut self, out: &mut Vec<StreamEvent>) -> Result<(), ProviderError> {
        let Some(raw) = self.finish_reason.clone() else {
            return Err(ProviderError::Truncated);
        };
        push_reasoning(&mut self.thoughts, out);
        let reason = if self.blocked {
            FinishReason::ContentFilter
        } else {
            finish_reason(&raw)
        };
        self.answer.finish(self.usage, raw, reason, out);
        Ok(())
    }
}

impl GeminiDecoder {
    fn part(
        &mut self,
        part: &Value,
        raw: &str,
        out: &mut Vec<StreamEvent>,
    ) -> Result<(), ProviderError> {
        if let Some(call) = part.get("functionCall") {
            let name = call.get("name").and_then(Value::as_str).unwrap_or("");
            if name.is_empty() {
                return Err(ProviderError::Malformed {
                    reason: "gemini function call without a name".into(),
                    raw: truncate_raw(raw),
                });
            }
            let input = match call.get("args") {
                Some(args @ Value::Object(_)) => args.clone(),
                None | Some(Value::Null) => json!({}),
                Some(other) => other.clone(),
            };
            let given_id = call
                .get("id")
                .and_then(Value::as_str)
                .filter(|id| !id.is_empty());
            let mut data = Map::new();
            if let Some(signature) = part.get(SIGNATURE_KEY).and_then(Value::as_str) {
                data.insert(SIGNATURE_KEY.into(), json!(signature));
            }
            if let Some(id) = given_id {
                data.insert(ID_KEY.into(), json!(id));
            }
            self.answer.tool_calls += 1;
            out.push(StreamEvent::ToolCall(ToolCall {
                id: given_id.map_or_else(synthesize_call_id, str::to_owned),
                name: name.to_owned(),
                input,
                provider_data: (!data.is_empty()).then_some(Value::Object(data)),
            }));
            return Ok(());
        }
        let Some(text) = part.get("text").and_then(Value::as_str) else {
            return Ok(()); // inline data, executable code, ...: not handled
        };
        if text.is_empty() {
            return Ok(());
        }
        if part.get("thought").and_then(Value::as_bool) == Some(true) {
            self.thoughts.push_str(text);
            out.push(StreamEvent::ReasoningDelta(text.to_owned()));
        } else {
            out.push(StreamEvent::TextDelta(text.to_owned()));
        }
        Ok(())
    }
}

fn usage_from(usage: &Value) -> Usage {
    let field = |key: &str| usage.get(key).and_then(Value::as_u64).unwrap_or(0);
    let thoughts = field("thoughtsTokenCount");
    Usage {
        input_tokens: field("promptTokenCount").saturating_add(field("toolUsePromptTokenCount")),
        output_tokens: field("candidatesTokenCount").saturating_add(thoughts),
        cached_input_tokens: field("cachedContentTokenCount"),
        // Implicit caching reports no writes.
        cache_write_tokens: 0,
        reasoning_tokens: thoughts,
        // Priced by the runner (`crate::pricing`).
        cost_micros: 0,
    }
}

/// Maps a Gemini `finishReason`.
fn finish_reason(raw: &str) -> FinishReason {
    match raw {
        "STOP" => FinishReason::EndTurn,
        "MAX_TOKENS" => FinishReason::MaxTokens,
        "SAFETY"
        | "RECITATION"
        | "BLOCKLIST"
        | "PROHIBITED_CONTENT"
        | "SPII"
        | "IMAGE_SAFETY"
        | "IMAGE_PROHIBITED_CONTENT"
        | "IMAGE_RECITATION" => FinishReason::ContentFilter,
        _ => FinishReason::Other,
    }
}

/// An error object inside the stream.
fn stream_error(error: &Value, raw: &str) -> ProviderError {
    let code = error.get("code").and_then(Value::as_u64);
    let status = error.get("status").and_then(Value::as_str).unwrap_or("");
    let retryable = matches!(code, Some(429 | 500 | 503 | 504))
        || matches!(
            status,
            "RESOURCE_EXHAUSTED" | "UNAVAILABLE" | "INTERNAL" | "DEADLINE_EXCEEDED"
        );
    let kind = if status.is_empty() {
        code.map_or_else(|| "error".to_owned(), |c| c.to_string())
    } else {
        status.to_owned()
    };
    ProviderError::StreamError {
        kind,
        message: error
            .get("message")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned(),
        retryable,
        raw: truncate_raw(raw),
    }
}
