//! Reading conversations back: the log becomes `ConversationMessage`s, and
//! list positions and conversation pages become opaque page tokens.
//!
//! A conversation is read a page of turns at a time, newest page first. Its
//! token names the conversation it belongs to and the turn the next page
//! ends before; a token for another conversation is refused, and the reads
//! are the caller's own (filtered by owner), so a forged token reads
//! nothing of anyone else.

use std::collections::HashMap;

use base64::{Engine, engine::general_purpose::URL_SAFE_NO_PAD};
use parley_proto::{gateway::v1 as gw, json};

use crate::{
    convert,
    error::GatewayError,
    store::{ConversationSummary, EventBody, ListCursor, StoredEvent, TurnRecord, TurnState},
    turn::pause::{self, Continuation},
};

/// Default and largest list page sizes.
pub const DEFAULT_PAGE_SIZE: u32 = 50;
/// The largest page size; larger requests are capped.
pub const MAX_PAGE_SIZE: u32 = 200;

/// A summary on the wire.
pub fn summary_to_wire(summary: &ConversationSummary) -> gw::Conversation {
    gw::Conversation {
        id: summary.id.clone(),
        title: summary.title.clone(),
        created_at: Some(convert::timestamp(summary.created_at)),
        updated_at: Some(convert::timestamp(summary.updated_at)),
        turn_count: summary.turn_count,
        metadata: summary
            .metadata
            .iter()
            .map(|(key, value)| (key.clone(), value.clone()))
            .collect(),
        pinned: summary.pinned,
        archived: summary.archived,
    }
}

/// The opaque token for a list position.
pub fn encode_page_token(cursor: &ListCursor) -> String {
    URL_SAFE_NO_PAD.encode(format!("{}:{}", cursor.updated_at, cursor.id))
}

/// Turns per `GetConversation` page when the request sets none.
pub const DEFAULT_TURN_PAGE_SIZE: u32 = 50;
/// The most turns per `GetConversation` page; larger requests are capped.
pub const MAX_TURN_PAGE_SIZE: u32 = 200;

/// The page size a `GetConversation` request asks for, defaulted and capped.
pub fn turn_page_size(requested: u32) -> u32 {
    match requested {
        0 => DEFAULT_TURN_PAGE_SIZE,
        size => size.min(MAX_TURN_PAGE_SIZE),
    }
}

/// What marks a conversation page token (list tokens have no such prefix).
const TURN_TOKEN_PREFIX: &str = "turns:";

/// The opaque token for the page of `conversation_id` that ends before
/// turn `before`.
pub fn encode_turn_page_token(conversation_id: &str, before: u32) -> String {
    URL_SAFE_NO_PAD.encode(format!("{TURN_TOKEN_PREFIX}{before}:{conversation_id}"))
}

/// Reads a conversation page token back: the turn its page ends before.
/// A token that is not one, or is another conversation's, is refused.
pub fn decode_turn_page_token(token: &str, conversation_id: &str) -> Result<u32, GatewayError> {
    let invalid = || {
        GatewayError::invalid(
            "INVALID_PAGE_TOKEN",
            "page_token",
            "is not a token from a previous response for this conversation",
        )
    };
    let bytes = URL_SAFE_NO_PAD.decode(token).map_err(|_| invalid())?;
    let text = String::from_utf8(bytes).map_err(|_| invalid())?;
    let rest = text.strip_prefix(TURN_TOKEN_PREFIX).ok_or_else(invalid)?;
    let (before, id) = rest.split_once(':').ok_or_else(invalid)?;
    if id != conversation_id {
        return Err(invalid());
    }
    before.parse().map_err(|_| invalid())
}

/// Reads a page token back.
pub fn decode_page_token(token: &str) -> Result<ListCursor, GatewayError> {
    let invalid = || {
        GatewayError::invalid(
            "INVALID_PAGE_TOKEN",
            "page_token",
            "is not a token from a previous response",
        )
    };
    let bytes = URL_SAFE_NO_PAD.decode(token).map_err(|_| invalid())?;
    let text = String::from_utf8(bytes).map_err(|_| invalid())?;
    let (updated_at, id) = text.split_once(':').ok_or_else(invalid)?;
    let updated_at = updated_at.parse().map_err(|_| invalid())?;
    if id.is_empty() {
        return Err(invalid());
    }
    Ok(ListCursor {
        updated_at,
        id: id.to_owned(),
    })
}

/// The messages of a conversation, oldest first: each turn's user message,
/// then its assistant message (with the turn's tool calls and reasoning),
/// or a `RUNNING` placeholder for a turn still in progress, or an
/// `AWAITING_INPUT` one for a paused turn (filled in by [`paused`]).
pub fn messages(events: &[StoredEvent], turns: &[TurnRecord]) -> Vec<gw::ConversationMessage> {
    let records: HashMap<&str, &TurnRecord> =
        turns.iter().map(|turn| (turn.id.as_str(), turn)).collect();
    let mut out: Vec<gw::ConversationMessage> = Vec::new();
    let mut tools: Vec<gw::ToolRecord> = Vec::new();
    let mut reasoning = String::new();
    let mut current_turn = String::new();
    let mut answered = true;
    let flush_running =
        |out: &mut Vec<gw::ConversationMessage>, turn: &str, answered: bool, at: i64| {
            let state = match records.get(turn).map(|record| record.state) {
                Some(TurnState::Running) => gw::TurnState::Running,
                Some(TurnState::AwaitingInput) => gw::TurnState::AwaitingInput,
                _ => return,
            };
            if !answered {
                out.push(gw::ConversationMessage {
                    turn_id: turn.to_owned(),
                    role: gw::MessageRole::Assistant as i32,
                    created_at: Some(convert::timestamp(at)),
                    state: state as i32,
                    ..Default::default()
                });
            }
        };
    let mut last_at = 0;
    for event in events {
        if event.turn_id != current_turn {
            flush_running(&mut out, &current_turn, answered, last_at);
            current_turn = event.turn_id.clone();
            answered = false;
            tools.clear();
            reasoning.clear();
        }
        last_at = event.created_at;
        match &event.body {
            EventBody::UserMessage {
                text,
                page,
                attachments,
                ..
            } => out.push(gw::ConversationMessage {
                turn_id: event.turn_id.clone(),
                role: gw::MessageRole::User as i32,
                text: text.clone(),
                created_at: Some(convert::timestamp(event.created_at)),
                page: Some(convert::page_to_wire(page)),
                attachments: attachments
                    .iter()
                    .map(|file| gw::Attachment {
                        id: file.id.clone(),
                        name: file.name.clone(),
                        media_type: file.media_type.clone(),
                        size_bytes: file.size_bytes,
                        sha256: file.sha256.clone(),
                        created_at: Some(convert::timestamp(file.created_at)),
                    })
                    .collect(),
                ..Default::default()
            }),
            EventBody::Reasoning { text } => reasoning.push_str(text),
            EventBody::ToolCall {
                call_id,
                name,
                input,
            } => tools.push(gw::ToolRecord {
                call_id: call_id.clone(),
                name: name.clone(),
                input: (!input.is_null()).then(|| json::to_struct_wrapped(input)),
                ..Default::default()
            }),
            EventBody::ToolResult {
                call_id,
                name,
                success,
                duration_ms,
                output,
                payload,
                error,
            } => {
                let record = match tools.iter_mut().find(|record| &record.call_id == call_id) {
                    Some(record) => record,
                    None => {
                        tools.push(gw::ToolRecord {
                            call_id: call_id.clone(),
                            name: name.clone(),
                            ..Default::default()
                        });
                        let last = tools.len() - 1;
                        &mut tools[last]
                    }
                };
                record.success = *success;
                record.duration = Some(convert::duration_ms(*duration_ms));
                record.output = output.clone();
                record.payload = payload.as_ref().map(convert::payload_to_wire);
                record.error = error.clone();
            }
            EventBody::AssistantMessage(answer) => {
                let mut message =
                    convert::assistant_to_wire(&event.turn_id, event.created_at, answer);
                message.tool_history = std::mem::take(&mut tools);
                message.reasoning = std::mem::take(&mut reasoning);
                if let Some(record) = records.get(event.turn_id.as_str()) {
                    message.payload_decision = record
                        .payload_decision
                        .as_ref()
                        .map(convert::decision_to_wire);
                    message.feedback = record.feedback.as_ref().map(convert::feedback_to_wire);
                }
                out.push(message);
                answered = true;
            }
        }
    }
    flush_running(&mut out, &current_turn, answered, last_at);
    out
}

/// Fills in the placeholder of a paused turn from its `continuation`: the
/// answer so far, the tools that ran, the usage so far, and the calls that
/// wait.
pub fn paused(message: &mut gw::ConversationMessage, continuation: &Continuation) {
    let before = continuation.before();
    message.text = before.parsed.message;
    message.reasoning = before.reasoning;
    message.tool_history = before.tools;
    message.usage = before.usage;
    let expires_at = pause::from_unix_ms(continuation.expires_at_ms);
    for event in pause::requests(continuation.pending(), expires_at) {
        match event {
            gw::chat_event::Event::ApprovalRequest(request) => {
                message.approval_requests.push(request);
            }
            gw::chat_event::Event::ClientToolCall(call) => message.client_tool_calls.push(call),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::store::{AssistantMessage, StoredPage};

    #[test]
    fn page_tokens_round_trip_and_garbage_is_refused() {
        let cursor = ListCursor {
            updated_at: 1_700_000_000_123,
            id: "0190-abc".into(),
        };
        assert_eq!(
            decode_page_token(&encode_page_token(&cursor)).expect("valid"),
            cursor
        );
        for bad in [
            "",
            "!!!",
            &URL_SAFE_NO_PAD.encode("nocolon"),
            &URL_SAFE_NO_PAD.encode("x:id"),
        ] {
            assert_eq!(
                decode_page_token(bad).expect_err(bad).reason(),
                "INVALID_PAGE_TOKEN"
            );
        }
    }

    #[test]
    fn conversation_page_tokens_hold_for_their_conversation_only() {
        let token = encode_turn_page_token("conv-a", 7);
        assert_eq!(decode_turn_page_token(&token, "conv-a").expect("valid"), 7);
        let list_token = encode_page_token(&ListCursor {
            updated_at: 7,
            id: "conv-a".into(),
        });
        for (bad, conversation) in [
            (token.as_str(), "conv-b"),
            ("", "conv-a"),
            ("%%%", "conv-a"),
            (list_token.as_str(), "conv-a"),
            (&URL_SAFE_NO_PAD.encode("turns:x:conv-a"), "conv-a"),
            (&URL_SAFE_NO_PAD.encode("turns:-1:conv-a"), "conv-a"),
        ] {
            assert_eq!(
                decode_turn_page_token(bad, conversation)
                    .expect_err(bad)
                    .reason(),
                "INVALID_PAGE_TOKEN"
            );
        }
        assert_eq!(turn_page_size(0), DEFAULT_TURN_PAGE_SIZE);
        assert_eq!(turn_page_size(5), 5);
        assert_eq!(turn_page_size(100_000), MAX_TURN_PAGE_SIZE);
    }

    #[test]
    fn tool_events_join_their_answer_and_running_turns_show() {
        let user = |text: &str| EventBody::UserMessage {
            text: text.into(),
            page: StoredPage {
                page: "tables_list".into(),
                ..Default::default()
            },
            response_schema: None,
            request_id: None,
            action: None,
            attachments: Vec::new(),
        };
        let event = |seq, turn: &str, body| StoredEvent {
            seq,
            turn_id: turn.into(),
            created_at: seq * 1000,
            body,
        };
        let events = vec![
            event(1, "t1", user("hi")),
            event(2, "t1", EventBody::Reasoning { text: "hmm".into() }),
            event(
                3,
                "t1",
                EventBody::ToolCall {
                    call_id: "c".into(),
                    name: "n".into(),
                    input: json!({"a": 1}),
                },
            ),
            event(
                4,
                "t1",
                EventBody::ToolResult {
                    call_id: "c".into(),
                    name: "n".into(),
                    success: true,
                    duration_ms: 1500,
                    output: "ok".into(),
                    payload: None,
                    error: String::new(),
                },
            ),
            event(
                5,
                "t1",
                EventBody::AssistantMessage(AssistantMessage {
                    text: "hello".into(),
                    payload: None,
                    suggested_values: vec![],
                    suggested_actions: vec![],
                    structured: None,
                    usage: None,
                    state: TurnState::Completed,
                    stop_reason: "end_turn".into(),
                    error: None,
                }),
            ),
            event(6, "t2", user("more")),
        ];
        let turns = vec![
            TurnRecord {
                id: "t1".into(),
                conversation_id: "c".into(),
                turn_index: 0,
                state: TurnState::Completed,
                outcome: None,
                replica: None,
                retryable: false,
                last_event_seq: 0,
                payload_decision: None,
                feedback: None,
                parent_turn_id: None,
            },
            TurnRecord {
                id: "t2".into(),
                conversation_id: "c".into(),
                turn_index: 1,
                state: TurnState::Running,
                outcome: None,
                replica: None,
                retryable: false,
                last_event_seq: 0,
                payload_decision: None,
                feedback: None,
                parent_turn_id: None,
            },
        ];
        let messages = messages(&events, &turns);
        assert_eq!(messages.len(), 4);
        assert_eq!(
            messages[0].page.as_ref().map(|p| p.page.as_str()),
            Some("tables_list")
        );
        assert_eq!(messages[1].text, "hello");
        assert_eq!(messages[1].reasoning, "hmm");
        assert_eq!(messages[1].tool_history.len(), 1);
        assert_eq!(messages[1].tool_history[0].output, "ok");
        assert_eq!(
            messages[1].tool_history[0].duration,
            Some(prost_types::Duration {
                seconds: 1,
                nanos: 500_000_000
            })
        );
        assert_eq!(messages[3].state, gw::TurnState::Running as i32);
        assert_eq!(messages[3].role, gw::MessageRole::Assistant as i32);
    }
}
