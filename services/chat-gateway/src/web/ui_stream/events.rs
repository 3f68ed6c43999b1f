//! A turn's `ChatEvent`s as UI message stream parts: a pure, stateful
//! translation ([`UiStream`]) with no I/O, so each mapping is tested by
//! itself against the shapes the AI SDK documents.
//!
//! What maps to what:
//! - the turn's first status: `start` (`messageId` = the turn id,
//!   `messageMetadata.conversationId`) and `start-step`; every status also
//!   as a transient `data-parley-status`;
//! - text and reasoning deltas: `text-*` and `reasoning-*` blocks
//!   (`text-1`, `reasoning-2`, … numbered per stream), a block closed when
//!   another kind of output begins;
//! - tool start / complete: `tool-input-start` and `tool-input-available`,
//!   then `tool-output-available` (`{text, durationMs, payload?}`) or
//!   `tool-output-error`, all `dynamic` (the tools are Parley's, not the
//!   client's); progress as `data-parley-tool-progress` (id = call id); a
//!   model call after tools ran is a new step (`finish-step`,
//!   `start-step`);
//! - an approval request: the call's `tool-input-*` parts, the SDK's
//!   `tool-approval-request` (`approvalId` = call id, AI SDK 6) and a
//!   `data-parley-approval-request` with the summary and expiry; a tool the
//!   application runs: its `tool-input-*` parts (the SDK's `onToolCall`)
//!   and a `data-parley-client-tool-call`;
//! - payload partials, suggestions, actions, structured output, step
//!   resets: `data-parley-*` parts (see [`UiStream::event`]);
//! - a turn error: `data-parley-error` then the SDK's `error` part (the SDK
//!   stops reading at an `error`, so Parley's details go first);
//! - `complete`: the open blocks closed, the final payload, suggestions,
//!   actions and structured value, `data-parley-complete`, `finish-step`
//!   and `finish`.

use std::collections::HashSet;

use parley_proto::{
    gateway::v1::{self as gw, chat_event::Event},
    json::{from_struct_value, from_value},
    parser::v1 as parser,
};
use serde_json::{Value, json};

use super::parts::Part;

/// The open text or reasoning block.
#[derive(Debug, Clone, PartialEq)]
enum Block {
    Text(String),
    Reasoning(String),
}

/// One turn's stream of parts, built event by event.
#[derive(Debug, Default)]
pub struct UiStream {
    /// The turn, when known before its first event (a continuation).
    turn_id: Option<String>,
    started: bool,
    step_open: bool,
    /// Tools completed in this step: the next model output is a new step.
    tools_ran: bool,
    block: Option<Block>,
    blocks: u32,
    /// Calls whose `tool-input-*` parts were sent.
    calls: HashSet<String>,
    finished: bool,
}

impl UiStream {
    /// A stream before its first event.
    pub fn new() -> Self {
        Self::default()
    }

    /// The stream of a paused turn that continues: its message is the
    /// turn's own, whatever the first event says.
    pub fn continuing(turn_id: String) -> Self {
        Self {
            turn_id: Some(turn_id),
            ..Self::default()
        }
    }

    /// Whether `finish` was sent.
    pub fn finished(&self) -> bool {
        self.finished
    }

    /// The parts of one event.
    pub fn event(&mut self, event: &gw::ChatEvent) -> Vec<Part> {
        let mut parts = Vec::new();
        let Some(event) = event.event.as_ref() else {
            return parts;
        };
        if !self.started {
            let (turn_id, conversation_id) = match event {
                Event::Status(status) => (status.turn_id.as_str(), status.conversation_id.as_str()),
                _ => ("", ""),
            };
            let message_id = self
                .turn_id
                .clone()
                .or_else(|| Some(turn_id.to_owned()).filter(|id| !id.is_empty()));
            let mut metadata = json!({});
            if !conversation_id.is_empty() {
                metadata["conversationId"] = conversation_id.into();
            }
            parts.push(Part::Start {
                message_id,
                metadata,
            });
            self.started = true;
        }
        match event {
            Event::Status(status) => {
                self.open_step(&mut parts);
                parts.push(Part::transient("status", status_data(status)));
            }
            Event::TextDelta(delta) => {
                let id = self.block(&mut parts, false);
                parts.push(Part::TextDelta {
                    id,
                    delta: delta.clone(),
                });
            }
            Event::ReasoningDelta(delta) => {
                let id = self.block(&mut parts, true);
                parts.push(Part::ReasoningDelta {
                    id,
                    delta: delta.clone(),
                });
            }
            Event::StructuredDelta(delta) => {
                self.model_output(&mut parts);
                parts.push(Part::transient("structured-delta", json!({"delta": delta})));
            }
            Event::StructuredPartial(partial) => parts.push(Part::data(
                "structured",
                Some("structured"),
                json!({
                    "value": partial.data.as_ref().map_or(Value::Null, from_value),
                    "completePaths": partial.complete_paths,
                    "revision": partial.revision,
                    "final": false,
                }),
            )),
            Event::ToolStart(start) => {
                self.model_output(&mut parts);
                let input = start.input.as_ref().map_or(json!({}), from_struct_value);
                self.tool_input(&mut parts, &start.call_id, &start.name, input);
            }
            Event::ToolProgress(progress) => {
                let mut data = json!({
                    "toolCallId": progress.call_id,
                    "stage": progress.stage,
                    "message": progress.message,
                });
                if let Some(fraction) = progress.fraction {
                    data["fraction"] = json!(fraction);
                }
                parts.push(Part::data("tool-progress", Some(&progress.call_id), data));
            }
            Event::ToolComplete(complete) => {
                self.tool_input(&mut parts, &complete.call_id, &complete.name, json!({}));
                self.tools_ran = true;
                parts.push(tool_output(complete));
            }
            Event::ApprovalRequest(request) => {
                self.model_output(&mut parts);
                let input = request
                    .arguments
                    .as_ref()
                    .map_or(json!({}), from_struct_value);
                self.tool_input(&mut parts, &request.call_id, &request.tool, input);
                parts.push(Part::ToolApprovalRequest {
                    approval_id: request.call_id.clone(),
                    tool_call_id: request.call_id.clone(),
                });
                parts.push(Part::data(
                    "approval-request",
                    Some(&request.call_id),
                    json!({
                        "toolCallId": request.call_id,
                        "toolName": request.tool,
                        "summary": request.summary,
                        "expiresAt": request.expires_at.as_ref().map(timestamp),
                    }),
                ));
            }
            Event::ClientToolCall(call) => {
                self.model_output(&mut parts);
                let input = call.arguments.as_ref().map_or(json!({}), from_struct_value);
                self.tool_input(&mut parts, &call.call_id, &call.tool, input);
                parts.push(Part::data(
                    "client-tool-call",
                    Some(&call.call_id),
                    json!({
                        "toolCallId": call.call_id,
                        "toolName": call.tool,
                        "expiresAt": call.expires_at.as_ref().map(timestamp),
                    }),
                ));
            }
            Event::PayloadPartial(partial) => parts.push(Part::data(
                "payload-partial",
                Some(&format!("payload-{}", partial.offset)),
                json!({
                    "type": partial.r#type,
                    "data": partial.data.as_ref().map(from_struct_value),
                    "completePaths": partial.complete_paths,
                    "revision": partial.revision,
                    "offset": partial.offset,
                    "diagnostic": partial.diagnostic.as_ref().map(diagnostic),
                }),
            )),
            Event::SuggestedValues(values) => {
                parts.push(suggested_values(&values.values));
            }
            Event::SuggestedActions(actions) => {
                parts.push(suggested_actions(&actions.actions));
            }
            Event::StepReset(reset) => {
                self.close_block(&mut parts);
                parts.push(Part::data(
                    "step-reset",
                    Some(&format!("step-reset-{}", reset.step)),
                    json!({
                        "step": reset.step,
                        "reason": reset.reason,
                        "message": reset.message,
                    }),
                ));
            }
            Event::Error(error) => {
                self.close_block(&mut parts);
                parts.push(Part::data(
                    "error",
                    Some("error"),
                    json!({
                        "reason": error.reason,
                        "message": error.message,
                        "retryable": error.retryable,
                        "retryAfterMs": error.retry_after.as_ref().map(duration_ms),
                    }),
                ));
                parts.push(Part::Error {
                    error_text: error.message.clone(),
                });
            }
            Event::Complete(complete) => {
                self.close_block(&mut parts);
                parts.extend(final_parts(complete));
                parts.extend(self.end());
            }
        }
        parts
    }

    /// The parts that end the stream when its events ran out without a
    /// `complete` (a turn that paused for input, a stream cut short): the
    /// open block and step closed, then `finish` (once).
    pub fn end(&mut self) -> Vec<Part> {
        let mut parts = Vec::new();
        if self.finished {
            return parts;
        }
        self.close_block(&mut parts);
        if self.step_open {
            parts.push(Part::FinishStep);
            self.step_open = false;
        }
        parts.push(Part::Finish);
        self.finished = true;
        parts
    }

    /// The parts of a stream that broke with `code` and `message` (a
    /// gRPC status in the middle of the stream, such as `SLOW_CONSUMER`):
    /// a `data-parley-error`, the SDK's `error`, then the end.
    pub fn failed(&mut self, reason: &str, message: &str) -> Vec<Part> {
        let mut parts = Vec::new();
        self.close_block(&mut parts);
        parts.push(Part::data(
            "error",
            Some("error"),
            json!({
                "reason": reason,
                "message": message,
                "retryable": true,
                "retryAfterMs": Value::Null,
            }),
        ));
        parts.push(Part::Error {
            error_text: message.to_owned(),
        });
        parts.extend(self.end());
        parts
    }

    fn open_step(&mut self, parts: &mut Vec<Part>) {
        if !self.step_open && !self.finished {
            parts.push(Part::StartStep);
            self.step_open = true;
        }
    }

    /// The model writes again: after tools ran, that is a new step.
    fn model_output(&mut self, parts: &mut Vec<Part>) {
        if self.tools_ran {
            self.close_block(parts);
            if self.step_open {
                parts.push(Part::FinishStep);
                self.step_open = false;
            }
            self.tools_ran = false;
        }
        self.open_step(parts);
    }

    /// The id of the open block of the kind asked for, opening one (and
    /// closing the other kind's) when needed.
    fn block(&mut self, parts: &mut Vec<Part>, reasoning: bool) -> String {
        self.model_output(parts);
        match (&self.block, reasoning) {
            (Some(Block::Text(id)), false) | (Some(Block::Reasoning(id)), true) => {
                return id.clone();
            }
            _ => {}
        }
        self.close_block(parts);
        self.blocks += 1;
        if reasoning {
            let id = format!("reasoning-{}", self.blocks);
            parts.push(Part::ReasoningStart { id: id.clone() });
            self.block = Some(Block::Reasoning(id.clone()));
            id
        } else {
            let id = format!("text-{}", self.blocks);
            parts.push(Part::TextStart { id: id.clone() });
            self.block = Some(Block::Text(id.clone()));
            id
        }
    }

    fn close_block(&mut self, parts: &mut Vec<Part>) {
        match self.block.take() {
            Some(Block::Text(id)) => parts.push(Part::TextEnd { id }),
            Some(Block::Reasoning(id)) => parts.push(Part::ReasoningEnd { id }),
            None => {}
        }
    }

    /// A call's `tool-input-start` and `tool-input-available`, once per call.
    fn tool_input(&mut self, parts: &mut Vec<Part>, call_id: &str, name: &str, input: Value) {
        if !self.calls.insert(call_id.to_owned()) {
            return;
        }
        self.close_block(parts);
        self.open_step(parts);
        parts.push(Part::ToolInputStart {
            tool_call_id: call_id.to_owned(),
            tool_name: name.to_owned(),
        });
        parts.push(Part::ToolInputAvailable {
            tool_call_id: call_id.to_owned(),
            tool_name: name.to_owned(),
            input,
        });
    }
}

/// `TURN_PHASE_RUNNING_TOOLS` → `running_tools`: an enum value's name
/// without its prefix, in lower case.
fn enum_name(name: &str, prefix: &str) -> String {
    name.strip_prefix(prefix)
        .unwrap_or(name)
        .to_ascii_lowercase()
}

fn status_data(status: &gw::TurnStatus) -> Value {
    let phase = gw::TurnPhase::try_from(status.phase).unwrap_or_default();
    json!({
        "phase": enum_name(phase.as_str_name(), "TURN_PHASE_"),
        "message": status.message,
        "conversationId": status.conversation_id,
        "turnId": status.turn_id,
    })
}

fn tool_output(complete: &gw::ToolComplete) -> Part {
    if !complete.success {
        return Part::ToolOutputError {
            tool_call_id: complete.call_id.clone(),
            error_text: complete.error.clone(),
        };
    }
    let mut output = json!({
        "text": complete.result_text,
        "durationMs": complete.duration.as_ref().map(duration_ms),
    });
    if let Some(payload) = &complete.payload {
        output["payload"] = payload_json(payload);
    }
    Part::ToolOutputAvailable {
        tool_call_id: complete.call_id.clone(),
        output,
    }
}

/// What `complete` adds before `finish`: the validated payload, the final
/// suggestions and actions, the structured value, and the turn's summary.
fn final_parts(complete: &gw::TurnComplete) -> Vec<Part> {
    let mut parts = Vec::new();
    if let Some(payload) = &complete.custom_payload {
        parts.push(Part::data(
            "payload",
            Some("payload"),
            payload_json(payload),
        ));
    }
    if !complete.suggested_values.is_empty() {
        parts.push(suggested_values(&complete.suggested_values));
    }
    if !complete.suggested_actions.is_empty() {
        parts.push(suggested_actions(&complete.suggested_actions));
    }
    if let Some(structured) = &complete.structured {
        parts.push(Part::data(
            "structured",
            Some("structured"),
            json!({
                "value": structured.value.as_ref().map_or(Value::Null, from_value),
                "raw": structured.raw,
                "valid": structured.valid,
                "error": structured.error,
                "final": true,
            }),
        ));
    }
    let state = gw::TurnState::try_from(complete.state).unwrap_or_default();
    let usage = complete.usage.as_ref().map(|usage| {
        json!({
            "inputTokens": usage.input_tokens,
            "outputTokens": usage.output_tokens,
            "cachedInputTokens": usage.cached_input_tokens,
            "reasoningTokens": usage.reasoning_tokens,
            "modelCalls": usage.model_calls,
            "model": usage.model,
            "costMicros": usage.cost_micros,
            "currency": usage.currency,
        })
    });
    parts.push(Part::data(
        "complete",
        Some("complete"),
        json!({
            "success": complete.success,
            "state": enum_name(state.as_str_name(), "TURN_STATE_"),
            "stopReason": complete.stop_reason,
            "conversationId": complete.conversation_id,
            "turnId": complete.turn_id,
            "usage": usage,
            "diagnostics": complete.diagnostics.iter().map(diagnostic).collect::<Vec<_>>(),
        }),
    ));
    parts
}

fn suggested_values(values: &[parser::SuggestedValue]) -> Part {
    let values: Vec<Value> = values
        .iter()
        .map(|value| json!({"label": value.label, "value": value.value}))
        .collect();
    Part::data(
        "suggested-values",
        Some("suggested-values"),
        json!({"values": values}),
    )
}

fn suggested_actions(actions: &[parser::SuggestedAction]) -> Part {
    let actions: Vec<Value> = actions
        .iter()
        .map(|action| {
            let handler = match parser::ActionHandler::try_from(action.handler) {
                Ok(parser::ActionHandler::Server) => "server",
                _ => "client",
            };
            json!({
                "label": action.label,
                "action": action.action,
                "handler": handler,
                "params": action.params.as_ref().map_or(json!({}), from_struct_value),
            })
        })
        .collect();
    Part::data(
        "suggested-actions",
        Some("suggested-actions"),
        json!({"actions": actions}),
    )
}

fn payload_json(payload: &parser::Payload) -> Value {
    json!({
        "type": payload.r#type,
        "data": payload.data.as_ref().map_or(json!({}), from_struct_value),
    })
}

fn diagnostic(diagnostic: &parser::Diagnostic) -> Value {
    let kind = parser::DiagnosticKind::try_from(diagnostic.kind).unwrap_or_default();
    json!({
        "kind": enum_name(kind.as_str_name(), "DIAGNOSTIC_KIND_"),
        "element": diagnostic.element,
        "reason": diagnostic.reason,
        "offset": diagnostic.offset,
    })
}

fn duration_ms(duration: &prost_types::Duration) -> u64 {
    crate::convert::duration_to_ms(duration)
}

/// RFC 3339, as JavaScript's `Date` reads it.
fn timestamp(timestamp: &prost_types::Timestamp) -> String {
    timestamp.to_string()
}
