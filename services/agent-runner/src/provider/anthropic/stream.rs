//! Decoding a Messages stream (`event: NAME` + `data: {json}`) into
//! [`StreamEvent`]s.
//!
//! `message_start` → per block `content_block_start` /
//! `content_block_delta`* / `content_block_stop` → `message_delta` →
//! `message_stop`, with `ping` anywhere. A tool call is yielded at its
//! block's stop, when its `input_json_delta` pieces are complete; a block
//! that never stops (cut by `max_tokens`, or a dropped stream) is never
//! yielded. Thinking is streamed as reasoning deltas and yielded whole, with
//! its signature, as a [`ReasoningBlock`] for replay. Unknown block and
//! delta types are skipped.

use std::collections::HashMap;

use serde_json::Value;

use crate::provider::{
    FinishReason, ProviderError, ReasoningBlock, StreamEvent, ToolCall, Usage,
    http::truncate_raw,
    sse::{Flow, synthesize_call_id},
    wire::decode::{Answer, JsonDecoder, JsonEvent, Step},
};

/// A content block being received.
#[derive(Debug)]
enum Block {
    Text,
    ToolUse {
        id: String,
        name: String,
        json: String,
    },
    Thinking {
        text: String,
        signature: Option<String>,
    },
    Redacted {
        data: String,
    },
    /// A block type this adapter does not handle (server tools, ...).
    Skipped,
}

/// The latest usage counts the stream reported.
#[derive(Debug, Default)]
struct WireUsage {
    input: Option<u64>,
    cache_read: Option<u64>,
    cache_creation: Option<u64>,
    output: Option<u64>,
}

impl WireUsage {
    /// Input is reported whole: uncached + cache reads + cache writes.
    fn to_usage(&self) -> Option<Usage> {
        let any = self
            .input
            .or(self.cache_read)
            .or(self.cache_creation)
            .or(self.output);
        any.map(|_| Usage {
            input_tokens: self
                .input
                .unwrap_or(0)
                .saturating_add(self.cache_read.unwrap_or(0))
                .saturating_add(self.cache_creation.unwrap_or(0)),
            output_tokens: self.output.unwrap_or(0),
            cached_input_tokens: self.cache_read.unwrap_or(0),
            cache_write_tokens: self.cache_creation.unwrap_or(0),
            reasoning_tokens: 0,
            // Priced by the runner (`crate::pricing`).
            cost_micros: 0,
        })
    }
}

/// The state of one Messages stream.
#[derive(Debug, Default)]
pub struct AnthropicDecoder {
    blocks: HashMap<u64, Block>,
    usage: WireUsage,
    stop_reason: Option<String>,
    answer: Answer,
}

impl JsonDecoder for AnthropicDecoder {
    const PROVIDER: &'static str = "anthropic";
    type Chunk<'a> = Value;

    fn on_chunk(&mut self, value: Value, event: JsonEvent, out: &mut Vec<StreamEvent>) -> Step {
        // The JSON `type` equals the event name; either may be missing on
        // proxies that rewrite the framing.
        let kind = str_at(&value, "type").unwrap_or(event.name);
        match kind {
            "message_start" => self.message_start(&value),
            "content_block_start" | "content_block_delta" | "content_block_stop" => {
                self.block_event(kind, &value, event.data, out)?;
            }
            "message_delta" => self.message_delta(&value),
            "message_stop" => {
                self.finish(out);
                return Ok(Flow::Done);
            }
            "error" => return Err(stream_error(&value, event.data)),
            _ => {} // ping and future event types
        }
        Ok(Flow::Continue)
    }

    fn on_close(&mut self, _out: &mut Vec<StreamEvent>) -> Result<(), ProviderError> {
        Err(ProviderError::Truncated)
    }
}

fn str_at<'a>(value: &'a Value, key: &str) -> Option<&'a str> {
    value.get(key).and_then(Value::as_str)
}

/// A content block event that names a block that never started.
fn never_started(what: &str, at: u64, raw: &str) -> ProviderError {
    ProviderError::Malformed {
        reason: format!("anthropic {what} for content block {at}, which never started"),
        raw: truncate_raw(raw),
    }
}

impl AnthropicDecoder {
    fn message_start(&mut self, value: &Value) {
        let message = value.get("message").unwrap_or(&Value::Null);
        self.answer.response_id = str_at(message, "id").map(Into::into);
        self.answer.response_model = str_at(message, "model").map(Into::into);
        if let Some(usage) = message.get("usage") {
            self.add_usage(usage);
        }
    }

    fn message_delta(&mut self, value: &Value) {
        if let Some(reason) = value.get("delta").and_then(|d| str_at(d, "stop_reason")) {
            self.stop_reason = Some(reason.to_owned());
        }
        if let Some(usage) = value.get("usage") {
            self.add_usage(usage);
        }
    }

    /// Usage fields are cumulative: a later value replaces an earlier one.
    fn add_usage(&mut self, usage: &Value) {
        let field = |key: &str| usage.get(key).and_then(Value::as_u64);
        let u = &mut self.usage;
        for (key, slot) in [
            ("input_tokens", &mut u.input),
            ("cache_read_input_tokens", &mut u.cache_read),
            ("cache_creation_input_tokens", &mut u.cache_creation),
            ("output_tokens", &mut u.output),
        ] {
            if let Some(value) = field(key) {
                *slot = Some(value);
            }
        }
    }

    /// A `content_block_start`, `_delta` or `_stop` event (`kind`), for the
    /// block at its `index`.
    fn block_event(
        &mut self,
        kind: &str,
        value: &Value,
        raw: &str,
        out: &mut Vec<StreamEvent>,
    ) -> Result<(), ProviderError> {
        let Some(at) = value.get("index").and_then(Value::as_u64) else {
            return Err(ProviderError::Malformed {
                reason: "anthropic content block event without an index".into(),
                raw: truncate_raw(raw),
            });
        };
        match kind {
            "content_block_start" => {
                let block = value.get("content_block").unwrap_or(&Value::Null);
                self.blocks.insert(at, block_start(block, out));
            }
            "content_block_delta" => {
                let block = self
                    .blocks
                    .get_mut(&at)
                    .ok_or_else(|| never_started("delta", at, raw))?;
                block_delta(block, value.get("delta").unwrap_or(&Value::Null), out);
            }
            _ => {
                let block = self
                    .blocks
                    .remove(&at)
                    .ok_or_else(|| never_started("stop", at, raw))?;
                self.block_stop(block, out)?;
            }
        }
        Ok(())
    }

    /// A block has stopped: a tool call, or a thinking block, is complete.
    fn block_stop(
        &mut self,
        block: Block,
        out: &mut Vec<StreamEvent>,
    ) -> Result<(), ProviderError> {
        match block {
            Block::ToolUse { id, name, json } => {
                let input = if json.trim().is_empty() {
                    Value::Object(Default::default())
                } else {
                    serde_json::from_str(&json).map_err(|e| ProviderError::Malformed {
                        reason: format!("input of tool call {name:?} is not valid JSON: {e}"),
                        raw: truncate_raw(&json),
                    })?
                };
                self.answer.tool_calls += 1;
                out.push(StreamEvent::ToolCall(ToolCall {
                    id: if id.is_empty() {
                        synthesize_call_id()
                    } else {
                        id
                    },
                    name,
                    input,
                    provider_data: None,
                }));
            }
            Block::Thinking { text, signature } => {
                out.push(StreamEvent::ReasoningBlock(ReasoningBlock {
                    text,
                    signature,
                    redacted: None,
                }));
            }
            Block::Redacted { data } => {
                out.push(StreamEvent::ReasoningBlock(ReasoningBlock {
                    text: String::new(),
                    signature: None,
                    redacted: Some(data),
                }));
            }
            Block::Text | Block::Skipped => {}
        }
        Ok(())
    }

    fn finish(&mut self, out: &mut Vec<StreamEvent>) {
        let raw = self.stop_reason.clone().unwrap_or_default();
        let reason = finish_reason(&raw);
        self.answer.finish(self.usage.to_usage(), raw, reason, out);
    }
}

/// The block a `content_block_start` opens (its first text or thinking
/// already yielded).
fn block_start(block: &Value, out: &mut Vec<StreamEvent>) -> Block {
    match str_at(block, "type").unwrap_or("") {
        "text" => {
            if let Some(text) = str_at(block, "text").filter(|t| !t.is_empty()) {
                out.push(StreamEvent::TextDelta(text.to_owned()));
            }
            Block::Text
        }
        "tool_use" => {
            // `input` is `{}` at the start; the real input follows as
            // JSON pieces. A non-empty start input is kept as the base.
            let json = match block.get("input") {
                Some(Value::Object(map)) if !map.is_empty() => {
                    Value::Object(map.clone()).to_string()
                }
                _ => String::new(),
            };
            Block::ToolUse {
                id: str_at(block, "id").unwrap_or("").to_owned(),
                name: str_at(block, "name").unwrap_or("").to_owned(),
                json,
            }
        }
        "thinking" => {
            let text = str_at(block, "thinking").unwrap_or("").to_owned();
            if !text.is_empty() {
                out.push(StreamEvent::ReasoningDelta(text.clone()));
            }
            Block::Thinking {
                text,
                signature: str_at(block, "signature")
                    .filter(|s| !s.is_empty())
                    .map(Into::into),
            }
        }
        "redacted_thinking" => Block::Redacted {
            data: str_at(block, "data").unwrap_or("").to_owned(),
        },
        other => {
            tracing::debug!(
                block_type = other,
                "skipping an unknown anthropic content block"
            );
            Block::Skipped
        }
    }
}

/// A `content_block_delta`'s `delta` for `block`.
fn block_delta(block: &mut Block, delta: &Value, out: &mut Vec<StreamEvent>) {
    match (str_at(delta, "type").unwrap_or(""), block) {
        ("text_delta", Block::Text) => {
            if let Some(text) = str_at(delta, "text").filter(|t| !t.is_empty()) {
                out.push(StreamEvent::TextDelta(text.to_owned()));
            }
        }
        ("input_json_delta", Block::ToolUse { json, .. }) => {
            json.push_str(str_at(delta, "partial_json").unwrap_or(""));
        }
        ("thinking_delta", Block::Thinking { text, .. }) => {
            if let Some(piece) = str_at(delta, "thinking").filter(|t| !t.is_empty()) {
                text.push_str(piece);
                out.push(StreamEvent::ReasoningDelta(piece.to_owned()));
            }
        }
        ("signature_delta", Block::Thinking { signature, .. }) => {
            let piece = str_at(delta, "signature").unwrap_or("");
            signature.get_or_insert_with(String::new).push_str(piece);
        }
        (kind, _) => {
            tracing::debug!(delta_type = kind, "skipping an anthropic delta");
        }
    }
}

/// Maps an Anthropic `stop_reason`.
fn finish_reason(raw: &str) -> FinishReason {
    match raw {
        "end_turn" => FinishReason::EndTurn,
        "tool_use" => FinishReason::ToolUse,
        "max_tokens" | "model_context_window_exceeded" => FinishReason::MaxTokens,
        "stop_sequence" => FinishReason::StopSequence,
        "pause_turn" => FinishReason::Pause,
        "refusal" => FinishReason::Refusal,
        _ => FinishReason::Other,
    }
}

/// An `event: error` after the 200.
fn stream_error(value: &Value, raw: &str) -> ProviderError {
    let error = value.get("error").unwrap_or(&Value::Null);
    let kind = str_at(error, "type").unwrap_or("error").to_owned();
    let retryable = matches!(
        kind.as_str(),
        "overloaded_error" | "api_error" | "rate_limit_error" | "timeout_error"
    );
    ProviderError::StreamError {
        message: str_at(error, "message").unwrap_or("").to_owned(),
        kind,
        retryable,
        raw: truncate_raw(raw),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::sse::{Decoder, SseEvent};

    fn feed(
        decoder: &mut AnthropicDecoder,
        lines: &[&str],
    ) -> Result<Vec<StreamEvent>, ProviderError> {
        let mut out = Vec::new();
        for line in lines {
            let event = SseEvent {
                event: "message".into(),
                data: (*line).into(),
            };
            decoder.on_event(&event, &mut out)?;
        }
        Ok(out)
    }

    #[test]
    fn usage_counts_cache_reads_and_writes_as_input() {
        let mut d = AnthropicDecoder::default();
        let out = feed(
            &mut d,
            &[
                r#"{"type":"message_start","message":{"id":"msg_1","model":"m","usage":{"input_tokens":10,"cache_creation_input_tokens":5,"cache_read_input_tokens":100,"output_tokens":1}}}"#,
                r#"{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":42}}"#,
                r#"{"type":"message_stop"}"#,
            ],
        )
        .expect("valid stream");
        assert_eq!(
            out[0],
            StreamEvent::Usage(Usage {
                input_tokens: 115,
                output_tokens: 42,
                cached_input_tokens: 100,
                cache_write_tokens: 5,
                reasoning_tokens: 0,
                cost_micros: 0,
            })
        );
    }

    #[test]
    fn deltas_for_unknown_blocks_are_malformed_but_unknown_types_are_skipped() {
        let mut d = AnthropicDecoder::default();
        let err = feed(
            &mut d,
            &[
                r#"{"type":"content_block_delta","index":3,"delta":{"type":"text_delta","text":"x"}}"#,
            ],
        );
        assert!(matches!(err, Err(ProviderError::Malformed { .. })));
        let mut d = AnthropicDecoder::default();
        let out = feed(
            &mut d,
            &[
                r#"{"type":"content_block_start","index":0,"content_block":{"type":"server_tool_use","id":"srvtoolu_1","name":"web_search","input":{}}}"#,
                r#"{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"q\":1}"}}"#,
                r#"{"type":"content_block_stop","index":0}"#,
                r#"{"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}"#,
                r#"{"type":"content_block_delta","index":1,"delta":{"type":"citations_delta","citation":{}}}"#,
                r#"{"type":"some_future_event"}"#,
            ],
        )
        .expect("skipped, not failed");
        assert!(out.is_empty(), "{out:?}");
    }
}
