//! Conversions between the wire types (`parley.*.v1`) and the gateway's
//! stored domain types, kept in one place so the rest of the crate does not
//! care how either side spells a field.

use base64::{Engine, engine::general_purpose::STANDARD};
use parley_proto::{
    gateway::v1 as gw,
    json,
    parser::v1::{self as parser, ActionHandler},
};
use prost::Message;
use prost_types::Timestamp;
use serde_json::{Map, Value};

use crate::store::model::{
    AssistantMessage, EventBody, StoredDecision, StoredFeedback, StoredPage, StoredPayload,
    StoredStructured, StoredSuggestedAction, StoredSuggestedValue, StoredUsage, TurnState,
};

/// Unix milliseconds as a protobuf `Timestamp`.
pub fn timestamp(ms: i64) -> Timestamp {
    #[allow(clippy::cast_possible_truncation)]
    let nanos = (ms.rem_euclid(1000) * 1_000_000) as i32;
    Timestamp {
        seconds: ms.div_euclid(1000),
        nanos,
    }
}

/// Milliseconds as a protobuf `Duration`.
pub fn duration_ms(ms: u64) -> prost_types::Duration {
    let seconds = i64::try_from(ms / 1000).unwrap_or(i64::MAX);
    #[allow(clippy::cast_possible_truncation)]
    let nanos = ((ms % 1000) * 1_000_000) as i32;
    prost_types::Duration { seconds, nanos }
}

/// A protobuf `Duration` in milliseconds (negative durations count as 0).
pub fn duration_to_ms(duration: &prost_types::Duration) -> u64 {
    let seconds = u64::try_from(duration.seconds).unwrap_or(0);
    let nanos = u64::try_from(duration.nanos).unwrap_or(0);
    seconds
        .saturating_mul(1000)
        .saturating_add(nanos / 1_000_000)
}

/// A request's page as stored with the user message.
pub fn page_to_stored(page: Option<&gw::PageContext>) -> StoredPage {
    let Some(page) = page else {
        return StoredPage::default();
    };
    StoredPage {
        page: page.page.clone(),
        tab: page.tab.clone(),
        subtab: page.subtab.clone(),
        stream_id: page.stream_id.clone(),
        state: page.state.as_ref().map(json::from_struct_value),
    }
}

/// A stored page as the wire `PageContext`.
pub fn page_to_wire(page: &StoredPage) -> gw::PageContext {
    gw::PageContext {
        page: page.page.clone(),
        tab: page.tab.clone(),
        subtab: page.subtab.clone(),
        state: page.state.as_ref().map(json::to_struct_wrapped),
        stream_id: page.stream_id.clone(),
    }
}

/// A wire payload as stored: JSON for people, the exact encoding for replay.
pub fn payload_to_stored(payload: &parser::Payload) -> StoredPayload {
    StoredPayload {
        payload_type: payload.r#type.clone(),
        data: payload
            .data
            .as_ref()
            .map_or_else(|| Value::Object(Map::new()), json::from_struct_value),
        wire: Some(STANDARD.encode(payload.encode_to_vec())),
    }
}

/// A stored payload as the wire `Payload` (typed view included when stored).
pub fn payload_to_wire(payload: &StoredPayload) -> parser::Payload {
    if let Some(decoded) = payload
        .wire
        .as_deref()
        .and_then(|wire| STANDARD.decode(wire).ok())
        .and_then(|bytes| parser::Payload::decode(bytes.as_slice()).ok())
    {
        return decoded;
    }
    parser::Payload {
        r#type: payload.payload_type.clone(),
        data: Some(json::to_struct_wrapped(&payload.data)),
        typed: None,
    }
}

fn handler_name(handler: i32) -> &'static str {
    match ActionHandler::try_from(handler) {
        Ok(ActionHandler::Server) => "server",
        _ => "client",
    }
}

fn handler_from_name(name: &str) -> i32 {
    match name {
        "server" => ActionHandler::Server as i32,
        _ => ActionHandler::Client as i32,
    }
}

/// A wire structured result as stored.
pub fn structured_to_stored(structured: &parser::StructuredResult) -> StoredStructured {
    StoredStructured {
        value: structured.value.as_ref().map(json::from_value),
        raw: structured.raw.clone(),
        valid: structured.valid,
        error: structured.error.clone(),
    }
}

/// A stored structured result on the wire.
pub fn structured_to_wire(structured: &StoredStructured) -> parser::StructuredResult {
    parser::StructuredResult {
        value: structured.value.as_ref().map(json::to_value),
        raw: structured.raw.clone(),
        valid: structured.valid,
        error: structured.error.clone(),
    }
}

/// The wire state of a stored turn state.
pub fn state_to_wire(state: TurnState) -> gw::TurnState {
    match state {
        TurnState::Running => gw::TurnState::Running,
        TurnState::Completed => gw::TurnState::Completed,
        TurnState::Cancelled => gw::TurnState::Cancelled,
        TurnState::Failed => gw::TurnState::Failed,
        TurnState::AwaitingInput => gw::TurnState::AwaitingInput,
    }
}

/// The assistant message stored for a final `complete`; `text` is what the
/// user saw streamed (the partial answer for a cancelled or failed turn).
pub fn complete_to_stored(
    complete: &gw::TurnComplete,
    text: String,
    state: TurnState,
    error: Option<&gw::TurnError>,
) -> AssistantMessage {
    AssistantMessage {
        text,
        payload: complete.custom_payload.as_ref().map(payload_to_stored),
        suggested_values: complete
            .suggested_values
            .iter()
            .map(|v| StoredSuggestedValue {
                label: v.label.clone(),
                value: v.value.clone(),
            })
            .collect(),
        suggested_actions: complete
            .suggested_actions
            .iter()
            .map(|a| StoredSuggestedAction {
                label: a.label.clone(),
                action: a.action.clone(),
                handler: handler_name(a.handler).to_owned(),
                params: a.params.as_ref().map(json::from_struct_value),
            })
            .collect(),
        structured: complete.structured.as_ref().map(structured_to_stored),
        usage: complete.usage.as_ref().map(usage_to_stored),
        state,
        stop_reason: complete.stop_reason.clone(),
        error: error.map(|e| crate::store::model::StoredError {
            reason: e.reason.clone(),
            message: e.message.clone(),
            retryable: e.retryable,
        }),
    }
}

/// A turn's usage as stored.
pub fn usage_to_stored(usage: &gw::Usage) -> StoredUsage {
    StoredUsage {
        input_tokens: usage.input_tokens,
        output_tokens: usage.output_tokens,
        model_calls: usage.model_calls,
        model: usage.model.clone(),
        cached_input_tokens: usage.cached_input_tokens,
        cache_write_tokens: usage.cache_write_tokens,
        reasoning_tokens: usage.reasoning_tokens,
        cost_micros: usage.cost_micros,
        currency: usage.currency.clone(),
    }
}

/// The wire message of a stored usage.
pub fn usage_to_wire(usage: &StoredUsage) -> gw::Usage {
    gw::Usage {
        input_tokens: usage.input_tokens,
        output_tokens: usage.output_tokens,
        model_calls: usage.model_calls,
        model: usage.model.clone(),
        cached_input_tokens: usage.cached_input_tokens,
        cache_write_tokens: usage.cache_write_tokens,
        reasoning_tokens: usage.reasoning_tokens,
        cost_micros: usage.cost_micros,
        currency: usage.currency.clone(),
    }
}

/// The wire message of a stored assistant message (tool history and
/// reasoning are filled in by the caller, which has the turn's other events).
pub fn assistant_to_wire(
    turn_id: &str,
    created_at: i64,
    message: &AssistantMessage,
) -> gw::ConversationMessage {
    gw::ConversationMessage {
        turn_id: turn_id.to_owned(),
        role: gw::MessageRole::Assistant as i32,
        text: message.text.clone(),
        created_at: Some(timestamp(created_at)),
        state: state_to_wire(message.state) as i32,
        custom_payload: message.payload.as_ref().map(payload_to_wire),
        suggested_values: message
            .suggested_values
            .iter()
            .map(|v| parser::SuggestedValue {
                label: v.label.clone(),
                value: v.value.clone(),
            })
            .collect(),
        suggested_actions: message
            .suggested_actions
            .iter()
            .map(|a| parser::SuggestedAction {
                label: a.label.clone(),
                action: a.action.clone(),
                handler: handler_from_name(&a.handler),
                params: a.params.as_ref().map(json::to_struct_wrapped),
            })
            .collect(),
        tool_history: Vec::new(),
        structured: message.structured.as_ref().map(structured_to_wire),
        reasoning: String::new(),
        page: None,
        error: message.error.as_ref().map(|e| gw::TurnError {
            reason: e.reason.clone(),
            message: e.message.clone(),
            retryable: e.retryable,
            retry_after: None,
        }),
        stop_reason: message.stop_reason.clone(),
        usage: message.usage.as_ref().map(usage_to_wire),
        ..Default::default()
    }
}

/// A turn's tool calls as stored events: each call, then its result.
pub fn tool_events(tools: &[gw::ToolRecord]) -> Vec<EventBody> {
    let mut events = Vec::with_capacity(tools.len() * 2);
    for record in tools {
        events.push(EventBody::ToolCall {
            call_id: record.call_id.clone(),
            name: record.name.clone(),
            input: record
                .input
                .as_ref()
                .map_or(Value::Null, json::from_struct_value),
        });
        events.push(EventBody::ToolResult {
            call_id: record.call_id.clone(),
            name: record.name.clone(),
            success: record.success,
            duration_ms: record.duration.as_ref().map_or(0, duration_to_ms),
            output: record.output.clone(),
            payload: record.payload.as_ref().map(payload_to_stored),
            error: record.error.clone(),
        });
    }
    events
}

/// Encodes a `complete` for the turns table (idempotent replay).
pub fn encode_outcome(complete: &gw::TurnComplete) -> String {
    STANDARD.encode(complete.encode_to_vec())
}

/// Decodes a stored outcome; `None` when it is absent or unreadable.
pub fn decode_outcome(outcome: &str) -> Option<gw::TurnComplete> {
    let bytes = STANDARD.decode(outcome).ok()?;
    gw::TurnComplete::decode(bytes.as_slice()).ok()
}

/// The ids every status carries.
#[derive(Debug, Clone)]
pub struct TurnIds {
    /// The conversation.
    pub conversation_id: String,
    /// The turn.
    pub turn_id: String,
}

impl TurnIds {
    /// A status event with these ids.
    pub fn status(
        &self,
        phase: gw::TurnPhase,
        message: impl Into<String>,
    ) -> gw::chat_event::Event {
        gw::chat_event::Event::Status(gw::TurnStatus {
            phase: phase as i32,
            message: message.into(),
            conversation_id: self.conversation_id.clone(),
            turn_id: self.turn_id.clone(),
        })
    }
}

/// A stored decision on a proposal, as `GetConversation` returns it.
pub fn decision_to_wire(stored: &StoredDecision) -> gw::PayloadDecisionRecord {
    use crate::store::UserDecision;
    let decision = match stored.decision {
        UserDecision::Accepted => gw::PayloadDecision::Accepted,
        UserDecision::Dismissed => gw::PayloadDecision::Dismissed,
        UserDecision::Edited => gw::PayloadDecision::Edited,
    };
    gw::PayloadDecisionRecord {
        decision: decision as i32,
        applied_data: stored.applied_data.as_ref().map(json::to_struct_wrapped),
        note: stored.note.clone(),
        decided_at: Some(timestamp(stored.decided_at)),
    }
}

/// A stored rating, as `GetConversation` returns it.
pub fn feedback_to_wire(stored: &StoredFeedback) -> gw::Feedback {
    gw::Feedback {
        rating: stored.rating,
        comment: stored.comment.clone(),
        tags: stored.tags.clone(),
        submitted_at: Some(timestamp(stored.submitted_at)),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn payloads_keep_their_typed_view_when_stored() {
        let wire = parser::Payload {
            r#type: "schema_proposal".into(),
            data: Some(json::to_struct_wrapped(&json!({"reasoning": "r"}))),
            typed: Some(parser::payload::Typed::SchemaProposal(
                parser::SchemaProposal {
                    reasoning: "r".into(),
                    ..Default::default()
                },
            )),
        };
        let stored = payload_to_stored(&wire);
        assert_eq!(stored.data, json!({"reasoning": "r"}));
        assert_eq!(payload_to_wire(&stored), wire);
        let without_wire = StoredPayload {
            wire: None,
            ..stored
        };
        assert_eq!(payload_to_wire(&without_wire).typed, None);
    }

    #[test]
    fn times_convert_exactly() {
        assert_eq!(
            timestamp(1_500),
            Timestamp {
                seconds: 1,
                nanos: 500_000_000
            }
        );
        assert_eq!(duration_to_ms(&duration_ms(12_345)), 12_345);
    }

    #[test]
    fn outcomes_round_trip() {
        let complete = gw::TurnComplete {
            success: true,
            message: "hi".into(),
            ..Default::default()
        };
        assert_eq!(decode_outcome(&encode_outcome(&complete)), Some(complete));
        assert_eq!(decode_outcome("%%%"), None);
    }

    #[test]
    fn usage_keeps_every_count_when_stored_and_old_rows_read_back() {
        let usage = gw::Usage {
            input_tokens: 4270,
            output_tokens: 333,
            model_calls: 3,
            model: "claude-sonnet-4-5".into(),
            cached_input_tokens: 3900,
            cache_write_tokens: 120,
            reasoning_tokens: 64,
            cost_micros: 2_171_400,
            currency: "EUR".into(),
        };
        let stored = usage_to_stored(&usage);
        let json = serde_json::to_string(&stored).expect("encodes");
        let read: StoredUsage = serde_json::from_str(&json).expect("decodes");
        assert_eq!(usage_to_wire(&read), usage);
        let old: StoredUsage = serde_json::from_str(
            r#"{"input_tokens":5,"output_tokens":2,"model_calls":1,"model":"m"}"#,
        )
        .expect("a usage stored before the cache counts reads back");
        assert_eq!(
            (
                old.input_tokens,
                old.cached_input_tokens,
                old.cache_write_tokens,
                old.reasoning_tokens
            ),
            (5, 0, 0, 0)
        );
    }
}
