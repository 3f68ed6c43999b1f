//! The parts of the AI SDK's UI message stream (ai-sdk.dev, "Stream
//! Protocols"), as values ([`Part`]) and as the JSON the SDK reads.
//!
//! The AI SDK checks every part against a strict schema (an unknown field
//! fails the whole stream), so [`Part::to_json`] writes exactly the
//! documented fields and nothing else; Parley's own facts travel as
//! `data-parley-<kind>` parts (`{type, id?, data, transient?}`), which the
//! SDK keeps in the message (one per `id`, the newest replacing the one
//! before) or, when `transient`, hands only to `onData`.

use serde_json::{Map, Value, json};

/// One part of the UI message stream.
#[derive(Debug, Clone, PartialEq)]
pub enum Part {
    /// A new assistant message.
    Start {
        /// The message id: the Parley turn id (when the stream knows it).
        message_id: Option<String>,
        /// `messageMetadata`: `{conversationId}`.
        metadata: Value,
    },
    /// A model call begins.
    StartStep,
    /// A model call ended.
    FinishStep,
    /// A text block begins.
    TextStart {
        /// The block.
        id: String,
    },
    /// More text of a block.
    TextDelta {
        /// The block.
        id: String,
        /// The text.
        delta: String,
    },
    /// A text block ended.
    TextEnd {
        /// The block.
        id: String,
    },
    /// A reasoning block begins.
    ReasoningStart {
        /// The block.
        id: String,
    },
    /// More reasoning of a block.
    ReasoningDelta {
        /// The block.
        id: String,
        /// The text.
        delta: String,
    },
    /// A reasoning block ended.
    ReasoningEnd {
        /// The block.
        id: String,
    },
    /// A tool call begins.
    ToolInputStart {
        /// The call.
        tool_call_id: String,
        /// The tool.
        tool_name: String,
    },
    /// A tool call's whole input.
    ToolInputAvailable {
        /// The call.
        tool_call_id: String,
        /// The tool.
        tool_name: String,
        /// Its arguments.
        input: Value,
    },
    /// A tool call's result.
    ToolOutputAvailable {
        /// The call.
        tool_call_id: String,
        /// The result.
        output: Value,
    },
    /// A tool call failed.
    ToolOutputError {
        /// The call.
        tool_call_id: String,
        /// Why.
        error_text: String,
    },
    /// A tool call waits for the user's approval (AI SDK 6).
    ToolApprovalRequest {
        /// The approval (Parley's call id).
        approval_id: String,
        /// The call.
        tool_call_id: String,
    },
    /// `data-parley-<name>`: a Parley fact the SDK has no part for.
    Data {
        /// What follows `data-parley-`.
        name: &'static str,
        /// The SDK keeps one data part per type and id: the newest wins.
        id: Option<String>,
        /// The fact.
        data: Value,
        /// Only for `onData`, not kept in the message.
        transient: bool,
    },
    /// The turn failed.
    Error {
        /// The message shown to the user.
        error_text: String,
    },
    /// The message is complete.
    Finish,
}

impl Part {
    /// The part as the AI SDK's schema wants it: exactly its documented
    /// fields.
    pub fn to_json(&self) -> Value {
        match self {
            Self::Start {
                message_id: Some(message_id),
                metadata,
            } => json!({"type": "start", "messageId": message_id, "messageMetadata": metadata}),
            Self::Start {
                message_id: None,
                metadata,
            } => json!({"type": "start", "messageMetadata": metadata}),
            Self::StartStep => json!({"type": "start-step"}),
            Self::FinishStep => json!({"type": "finish-step"}),
            Self::TextStart { id } => json!({"type": "text-start", "id": id}),
            Self::TextDelta { id, delta } => {
                json!({"type": "text-delta", "id": id, "delta": delta})
            }
            Self::TextEnd { id } => json!({"type": "text-end", "id": id}),
            Self::ReasoningStart { id } => json!({"type": "reasoning-start", "id": id}),
            Self::ReasoningDelta { id, delta } => {
                json!({"type": "reasoning-delta", "id": id, "delta": delta})
            }
            Self::ReasoningEnd { id } => json!({"type": "reasoning-end", "id": id}),
            Self::ToolInputStart {
                tool_call_id,
                tool_name,
            } => json!({
                "type": "tool-input-start",
                "toolCallId": tool_call_id,
                "toolName": tool_name,
                "dynamic": true,
            }),
            Self::ToolInputAvailable {
                tool_call_id,
                tool_name,
                input,
            } => json!({
                "type": "tool-input-available",
                "toolCallId": tool_call_id,
                "toolName": tool_name,
                "input": input,
                "dynamic": true,
            }),
            Self::ToolOutputAvailable {
                tool_call_id,
                output,
            } => json!({
                "type": "tool-output-available",
                "toolCallId": tool_call_id,
                "output": output,
                "dynamic": true,
            }),
            Self::ToolOutputError {
                tool_call_id,
                error_text,
            } => json!({
                "type": "tool-output-error",
                "toolCallId": tool_call_id,
                "errorText": error_text,
                "dynamic": true,
            }),
            Self::ToolApprovalRequest {
                approval_id,
                tool_call_id,
            } => json!({
                "type": "tool-approval-request",
                "approvalId": approval_id,
                "toolCallId": tool_call_id,
            }),
            Self::Data {
                name,
                id,
                data,
                transient,
            } => {
                let mut part = Map::new();
                part.insert("type".into(), format!("data-parley-{name}").into());
                if let Some(id) = id {
                    part.insert("id".into(), id.clone().into());
                }
                part.insert("data".into(), data.clone());
                if *transient {
                    part.insert("transient".into(), true.into());
                }
                Value::Object(part)
            }
            Self::Error { error_text } => json!({"type": "error", "errorText": error_text}),
            Self::Finish => json!({"type": "finish"}),
        }
    }

    /// The part as one server-sent event: `data: {json}\n\n`.
    pub fn to_sse(&self) -> String {
        format!("data: {}\n\n", self.to_json())
    }

    pub(super) fn data(name: &'static str, id: Option<&str>, data: Value) -> Self {
        Self::Data {
            name,
            id: id.map(str::to_owned),
            data,
            transient: false,
        }
    }

    pub(super) fn transient(name: &'static str, data: Value) -> Self {
        Self::Data {
            name,
            id: None,
            data,
            transient: true,
        }
    }
}

/// The event that ends the stream: `data: [DONE]`.
pub const DONE: &str = "data: [DONE]\n\n";
