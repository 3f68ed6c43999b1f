//! The runner's GenAI spans and metrics, by the OpenTelemetry GenAI
//! conventions (names pinned in `parley_grpc::telemetry::semconv`).
//!
//! - `invoke_agent`: one per turn, around the whole loop;
//! - `chat {model}`: one per model call attempt (a retry is a new span), with
//!   the provider, models, response id, finish reasons, token usage and time
//!   to first chunk; the provider HTTP request carries its context;
//! - `execute_tool {name}`: one per tool call, with `error.type` on failure.
//!
//! Message contents, prompts and tool arguments go on spans only when
//! content capture is switched on (`telemetry::capture_content`).

use std::time::Duration;

use parley_grpc::telemetry::{capture_content, metrics, semconv as sc};
use serde_json::{Value, json};
use tokio::time::Instant;
use tracing::{Span, field::Empty};
use tracing_opentelemetry::OpenTelemetrySpanExt;

use crate::provider::{ChatRequest, Finish, Message, ToolCall, Usage};

/// The `invoke_agent` span of a turn.
pub fn agent_span(
    provider: &'static str,
    model: &str,
    conversation_id: &str,
    turn_id: &str,
    structured: bool,
) -> Span {
    tracing::info_span!(
        "invoke_agent",
        otel.name = sc::OP_INVOKE_AGENT,
        otel.kind = "internal",
        { sc::GEN_AI_OPERATION_NAME } = sc::OP_INVOKE_AGENT,
        { sc::GEN_AI_PROVIDER_NAME } = provider,
        { sc::GEN_AI_REQUEST_MODEL } = model,
        { sc::GEN_AI_CONVERSATION_ID } = (!conversation_id.is_empty()).then_some(conversation_id),
        { sc::PARLEY_TURN_ID } = (!turn_id.is_empty()).then_some(turn_id),
        { sc::GEN_AI_OUTPUT_TYPE } = structured.then_some("json"),
        { sc::GEN_AI_USAGE_INPUT_TOKENS } = Empty,
        { sc::GEN_AI_USAGE_OUTPUT_TOKENS } = Empty,
        { sc::ERROR_TYPE } = Empty,
    )
}

/// How a turn ended, on its span and in `parley_turns_total`.
pub fn turn_ended(span: &Span, outcome: &str, reason: &str) {
    if !reason.is_empty() && outcome != "cancelled" {
        span.record(sc::ERROR_TYPE, reason);
        span.set_status(opentelemetry::trace::Status::error(reason.to_owned()));
    }
    metrics().turns.with_label_values(&[outcome, reason]).inc();
}

/// One model call attempt: its span and its measurements.
#[derive(Debug)]
pub struct ChatCall {
    span: Span,
    started: Instant,
    provider: &'static str,
    model: String,
    first_chunk: bool,
    done: bool,
}

impl ChatCall {
    /// Opens the `chat {model}` span of `request`, sent to `provider`.
    pub fn start(provider: &'static str, request: &ChatRequest, conversation_id: &str) -> Self {
        let span = tracing::info_span!(
            "chat",
            otel.name = format!("{} {}", sc::OP_CHAT, request.model),
            otel.kind = "client",
            { sc::GEN_AI_OPERATION_NAME } = sc::OP_CHAT,
            { sc::GEN_AI_PROVIDER_NAME } = provider,
            { sc::GEN_AI_REQUEST_MODEL } = request.model.as_str(),
            { sc::GEN_AI_REQUEST_MAX_TOKENS } = request.max_output_tokens.map(i64::from),
            { sc::GEN_AI_CONVERSATION_ID } =
                (!conversation_id.is_empty()).then_some(conversation_id),
            { sc::GEN_AI_OUTPUT_TYPE } = request.output_schema.as_ref().map(|_| "json"),
            { sc::GEN_AI_RESPONSE_MODEL } = Empty,
            { sc::GEN_AI_RESPONSE_ID } = Empty,
            { sc::GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK } = Empty,
            { sc::GEN_AI_USAGE_INPUT_TOKENS } = Empty,
            { sc::GEN_AI_USAGE_OUTPUT_TOKENS } = Empty,
            { sc::GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS } = Empty,
            { sc::GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS } = Empty,
            { sc::ERROR_TYPE } = Empty,
        );
        if capture_content() {
            if !request.system.is_empty() {
                span.set_attribute(
                    sc::GEN_AI_SYSTEM_INSTRUCTIONS,
                    json!([{"type": "text", "content": request.system}]).to_string(),
                );
            }
            span.set_attribute(
                sc::GEN_AI_INPUT_MESSAGES,
                input_messages(&request.messages).to_string(),
            );
        }
        Self {
            span,
            started: Instant::now(),
            provider,
            model: request.model.clone(),
            first_chunk: false,
            done: false,
        }
    }

    /// The span, to instrument the call with.
    pub fn span(&self) -> &Span {
        &self.span
    }

    fn labels(&self) -> [&str; 3] {
        [
            sc::OP_CHAT,
            self.provider,
            metrics().models.admit(&self.model),
        ]
    }

    /// The first streamed chunk arrived.
    pub fn first_chunk(&mut self) {
        if std::mem::replace(&mut self.first_chunk, true) {
            return;
        }
        let seconds = self.started.elapsed().as_secs_f64();
        self.span
            .record(sc::GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK, seconds);
        metrics()
            .time_to_first_chunk
            .with_label_values(&self.labels())
            .observe(seconds);
    }

    /// The call finished with `finish`, having used `usage`, called
    /// `tool_calls` and written `text`.
    pub fn succeeded(
        mut self,
        finish: &Finish,
        usage: Option<Usage>,
        tool_calls: &[ToolCall],
        text: &str,
    ) {
        self.done = true;
        if let Some(model) = &finish.response_model {
            self.span.record(sc::GEN_AI_RESPONSE_MODEL, model.as_str());
        }
        if let Some(id) = &finish.response_id {
            self.span.record(sc::GEN_AI_RESPONSE_ID, id.as_str());
        }
        if !finish.raw_reason.is_empty() {
            self.span.set_attribute(
                sc::GEN_AI_RESPONSE_FINISH_REASONS,
                opentelemetry::Value::Array(
                    vec![opentelemetry::StringValue::from(finish.raw_reason.clone())].into(),
                ),
            );
        }
        let labels = self.labels();
        if let Some(usage) = usage {
            self.span
                .record(sc::GEN_AI_USAGE_INPUT_TOKENS, usage.input_tokens);
            self.span
                .record(sc::GEN_AI_USAGE_OUTPUT_TOKENS, usage.output_tokens);
            self.span.record(
                sc::GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS,
                usage.cached_input_tokens,
            );
            self.span.record(
                sc::GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS,
                usage.cache_write_tokens,
            );
            let tokens = &metrics().token_usage;
            for (kind, count) in [
                ("input", usage.input_tokens),
                ("output", usage.output_tokens),
            ] {
                tokens
                    .with_label_values(&[labels[0], labels[1], labels[2], kind])
                    .observe(count as f64);
            }
        }
        if capture_content() {
            let mut parts = Vec::new();
            if !text.is_empty() {
                parts.push(json!({"type": "text", "content": text}));
            }
            for call in tool_calls {
                parts.push(json!({"type": "tool_call", "id": call.id, "name": call.name, "arguments": call.input}));
            }
            let message =
                json!([{"role": "assistant", "parts": parts, "finish_reason": finish.raw_reason}]);
            self.span
                .set_attribute(sc::GEN_AI_OUTPUT_MESSAGES, message.to_string());
        }
        self.observe_duration("");
    }

    /// The attempt failed: `kind` is its `error.type`
    /// (`AttemptError::kind`), `short` its span status message.
    pub fn failed(mut self, kind: &str, short: &str) {
        self.done = true;
        self.span.record(sc::ERROR_TYPE, kind);
        self.span
            .set_status(opentelemetry::trace::Status::error(short.to_owned()));
        self.observe_duration(kind);
    }

    fn observe_duration(&self, error_type: &str) {
        let labels = self.labels();
        metrics()
            .operation_duration
            .with_label_values(&[labels[0], labels[1], labels[2], error_type])
            .observe(self.started.elapsed().as_secs_f64());
    }
}

impl Drop for ChatCall {
    fn drop(&mut self) {
        if !self.done {
            // Cancelled or out of time while the model was streaming.
            self.span.record(sc::ERROR_TYPE, "CANCELLED");
            self.observe_duration("CANCELLED");
        }
    }
}

/// The messages of a request in the GenAI content format.
fn input_messages(messages: &[Message]) -> Value {
    let list: Vec<Value> = messages
        .iter()
        .map(|message| match message {
            Message::User { text, .. } => {
                json!({"role": "user", "parts": [{"type": "text", "content": text}]})
            }
            Message::Assistant {
                text, tool_calls, ..
            } => {
                let mut parts = vec![json!({"type": "text", "content": text})];
                parts.extend(tool_calls.iter().map(|call| {
                    json!({"type": "tool_call", "id": call.id, "name": call.name, "arguments": call.input})
                }));
                json!({"role": "assistant", "parts": parts})
            }
            Message::ToolResults(results) => {
                let parts: Vec<Value> = results
                    .iter()
                    .map(|result| json!({"type": "tool_call_response", "id": result.call_id, "response": result.text}))
                    .collect();
                json!({"role": "tool", "parts": parts})
            }
        })
        .collect();
    Value::Array(list)
}

/// The `execute_tool {name}` span of one tool call.
pub fn tool_span(name: &str, call_id: &str, remote: Option<bool>, input: &Value) -> Span {
    let span = tracing::info_span!(
        "execute_tool",
        otel.name = format!("{} {name}", sc::OP_EXECUTE_TOOL),
        otel.kind = "internal",
        { sc::GEN_AI_OPERATION_NAME } = sc::OP_EXECUTE_TOOL,
        { sc::GEN_AI_TOOL_NAME } = name,
        { sc::GEN_AI_TOOL_CALL_ID } = call_id,
        { sc::GEN_AI_TOOL_TYPE } =
            remote.map(|remote| if remote { "extension" } else { "function" }),
        { sc::ERROR_TYPE } = Empty,
    );
    if capture_content() {
        span.set_attribute(sc::GEN_AI_TOOL_CALL_ARGUMENTS, input.to_string());
    }
    span
}

/// How a tool call ended: span attributes and the duration metric.
/// `metric_name` is the tool's name, or `_OTHER` for a name the turn does
/// not know (the model chose it: not a label).
pub fn tool_ended(
    span: &Span,
    metric_name: &str,
    failure: Option<&str>,
    result: &str,
    duration: Duration,
) {
    if let Some(reason) = failure {
        span.record(sc::ERROR_TYPE, reason);
        span.set_status(opentelemetry::trace::Status::error(reason.to_owned()));
    }
    if capture_content() {
        span.set_attribute(sc::GEN_AI_TOOL_CALL_RESULT, result.to_owned());
    }
    let m = metrics();
    m.tool_duration
        .with_label_values(&[m.tools.admit(metric_name), failure.unwrap_or("ok")])
        .observe(duration.as_secs_f64());
}

/// A retried model call.
pub fn retried(provider: &str, reason: &str) {
    metrics()
        .retries
        .with_label_values(&[provider, reason])
        .inc();
}

/// A call to `provider`'s `model`, which no route prices.
pub fn unpriced_call(provider: &str, model: &str) {
    let m = metrics();
    m.unpriced_calls
        .with_label_values(&[provider, m.models.admit(model)])
        .inc();
}

/// A fall back from `provider` to the next model.
pub fn fell_back(provider: &str, reason: &str) {
    metrics()
        .fallbacks
        .with_label_values(&[provider, reason])
        .inc();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::{ToolCall, ToolResult};

    #[test]
    fn captured_messages_follow_the_genai_parts_format() {
        let messages = vec![
            Message::user("hi"),
            Message::Assistant {
                reasoning: Vec::new(),
                text: "let me look".into(),
                tool_calls: vec![ToolCall {
                    id: "c1".into(),
                    name: "lookup".into(),
                    input: json!({"q": "x"}),
                    provider_data: None,
                }],
            },
            Message::ToolResults(vec![ToolResult {
                call_id: "c1".into(),
                name: "lookup".into(),
                text: "found".into(),
                is_error: false,
                attachments: Vec::new(),
            }]),
        ];
        let value = input_messages(&messages);
        assert_eq!(
            value[0],
            json!({"role": "user", "parts": [{"type": "text", "content": "hi"}]})
        );
        assert_eq!(value[1]["parts"][1]["type"], "tool_call");
        assert_eq!(value[1]["parts"][1]["arguments"], json!({"q": "x"}));
        assert_eq!(
            value[2],
            json!({"role": "tool", "parts": [{"type": "tool_call_response", "id": "c1", "response": "found"}]})
        );
    }
}
