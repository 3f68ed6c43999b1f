//! A turn that pauses for the user's decisions on its tool calls, and its
//! continuation.
//!
//! When the runner ends a run with `input_required`, the turn sends one
//! `approval_request` or `client_tool_call` per waiting call, then an
//! `AWAITING_INPUT` status, and stores a [`Continuation`]: the runner
//! request it sent, what the runner said the continuation needs, and the
//! answer so far. No replica holds the turn while it waits. A
//! `SubmitToolDecisions` on any replica takes it back and runs the
//! continuation ([`Resume`]): the same request with the pause's messages
//! appended and the decisions attached; the runner stays stateless. A
//! pause that expires, or that the user leaves by sending a new message,
//! is closed without another model call: the waiting calls are recorded as
//! not run ([`unanswered`]).

use std::time::{Duration, SystemTime};

use base64::{Engine as _, engine::general_purpose::STANDARD};
use parley_proto::{
    gateway::v1::{self as gw, chat_event::Event},
    json,
    parser::v1::ParseResponse,
    runner::v1 as runner,
};
use prost::Message as _;

/// What a paused turn stores for its continuation (prost-encoded, base64,
/// in `turns.continuation`; the store does not read it).
#[derive(Clone, PartialEq, prost::Message)]
pub struct Continuation {
    /// The runner request of the turn so far: the first run's, with the
    /// messages of earlier pauses appended; no decisions.
    #[prost(message, optional, tag = "1")]
    pub request: Option<runner::RunRequest>,
    /// What the runner's pause said: the waiting calls and the messages
    /// the continuation appends.
    #[prost(message, optional, tag = "2")]
    pub input: Option<runner::InputRequired>,
    /// The user message of the turn.
    #[prost(string, tag = "3")]
    pub message: String,
    /// Where the user was (the stored page, as JSON).
    #[prost(string, tag = "4")]
    pub page: String,
    /// The turn's output schema, as JSON; empty when none.
    #[prost(string, tag = "5")]
    pub response_schema: String,
    /// Whether mid-answer failover is on for the turn.
    #[prost(bool, tag = "6")]
    pub mid_answer_failover: bool,
    /// The parse of the answer's text so far.
    #[prost(message, optional, tag = "7")]
    pub parsed: Option<ParseResponse>,
    /// The answer's raw text so far (the model's, markers included).
    #[prost(string, tag = "8")]
    pub raw_text: String,
    /// The tool calls that ran so far.
    #[prost(message, repeated, tag = "9")]
    pub tools: Vec<gw::ToolRecord>,
    /// The reasoning so far.
    #[prost(string, tag = "10")]
    pub reasoning: String,
    /// The usage so far.
    #[prost(message, optional, tag = "11")]
    pub usage: Option<gw::Usage>,
    /// When the pause expires, Unix ms (as told to the client).
    #[prost(int64, tag = "12")]
    pub expires_at_ms: i64,
    /// The server action the message was rendered from, when any.
    #[prost(string, tag = "13")]
    pub action: String,
}

impl Continuation {
    /// As stored.
    pub fn encode_base64(&self) -> String {
        STANDARD.encode(self.encode_to_vec())
    }

    /// From the store; `None` when it is not one.
    pub fn decode_base64(text: &str) -> Option<Self> {
        let bytes = STANDARD.decode(text).ok()?;
        Self::decode(bytes.as_slice()).ok()
    }

    /// The waiting calls.
    pub fn pending(&self) -> &[runner::PendingToolCall] {
        self.input.as_ref().map_or(&[], |input| &input.pending)
    }

    /// The answer so far, for the continuation's run to build on.
    pub fn before(&self) -> Before {
        Before {
            raw_text: self.raw_text.clone(),
            parsed: self.parsed.clone().unwrap_or_default(),
            tools: self.tools.clone(),
            reasoning: self.reasoning.clone(),
            usage: self.usage.clone(),
        }
    }

    /// The runner request that continues the turn with `decisions`: the
    /// request so far, the pause's messages appended, the pause's model
    /// calls counted.
    pub fn continued_request(&self, decisions: Vec<runner::ToolDecision>) -> runner::RunRequest {
        let mut request = self.request.clone().unwrap_or_default();
        if let Some(input) = &self.input {
            request.messages.extend(input.messages.iter().cloned());
            request.iterations_done = input.iteration;
        }
        request.decisions = decisions;
        request
    }
}

/// The answer of a turn before its latest pause.
#[derive(Debug, Clone, Default)]
pub struct Before {
    /// The model's raw text.
    pub raw_text: String,
    /// Its parse.
    pub parsed: ParseResponse,
    /// The tool calls that ran.
    pub tools: Vec<gw::ToolRecord>,
    /// The reasoning.
    pub reasoning: String,
    /// The usage.
    pub usage: Option<gw::Usage>,
}

/// A paused turn, continued: the request to send and the answer so far.
#[derive(Debug, Clone)]
pub struct Resume {
    /// The continuation's runner request.
    pub request: runner::RunRequest,
    /// The answer before the pause.
    pub before: Before,
}

/// Longest call summary shown to the user, in characters.
const SUMMARY_CHARS: usize = 200;

/// A one-line description of a call: `tool(key: value, ...)`, clipped.
pub fn summary(call: &runner::ToolCall) -> String {
    let arguments = call
        .input
        .as_ref()
        .map(|input| {
            json::from_struct(input)
                .iter()
                .map(|(key, value)| format!("{key}: {value}"))
                .collect::<Vec<_>>()
                .join(", ")
        })
        .unwrap_or_default();
    let line = format!("{}({arguments})", call.name);
    if line.chars().count() <= SUMMARY_CHARS {
        return line;
    }
    let mut clipped: String = line.chars().take(SUMMARY_CHARS - 1).collect();
    clipped.push('…');
    clipped
}

/// The events that announce the waiting calls, in the model's order.
pub fn requests(pending: &[runner::PendingToolCall], expires_at: SystemTime) -> Vec<Event> {
    let expires_at = Some(prost_types::Timestamp::from(expires_at));
    pending
        .iter()
        .filter_map(|pending| {
            let call = pending.call.as_ref()?;
            Some(match runner::PendingReason::try_from(pending.reason) {
                Ok(runner::PendingReason::Client) => Event::ClientToolCall(gw::ClientToolCall {
                    call_id: call.id.clone(),
                    tool: call.name.clone(),
                    arguments: call.input.clone(),
                    expires_at,
                }),
                _ => Event::ApprovalRequest(gw::ToolApprovalRequest {
                    call_id: call.id.clone(),
                    tool: call.name.clone(),
                    arguments: call.input.clone(),
                    summary: summary(call),
                    expires_at,
                }),
            })
        })
        .collect()
}

/// Unix ms of `at`.
pub fn unix_ms(at: SystemTime) -> i64 {
    at.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |since| {
            i64::try_from(since.as_millis()).unwrap_or(i64::MAX)
        })
}

/// The time `ms` after the Unix epoch.
pub fn from_unix_ms(ms: i64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_millis(u64::try_from(ms).unwrap_or(0))
}

/// The waiting calls of a pause that is closed without decisions, as tool
/// records that did not run, `why` being the reason (for example `no
/// answer from the user`).
pub fn unanswered(pending: &[runner::PendingToolCall], why: &str) -> Vec<gw::ToolRecord> {
    pending
        .iter()
        .filter_map(|pending| pending.call.as_ref())
        .map(|call| gw::ToolRecord {
            call_id: call.id.clone(),
            name: call.name.clone(),
            input: call.input.clone(),
            success: false,
            duration: None,
            output: String::new(),
            payload: None,
            error: why.to_owned(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(name: &str, input: serde_json::Value) -> runner::ToolCall {
        runner::ToolCall {
            id: "call_1".into(),
            name: name.into(),
            input: input.as_object().map(json::to_struct),
            provider_data: None,
        }
    }

    #[test]
    fn a_continuation_round_trips_and_continues_with_the_pause_appended() {
        let continuation = Continuation {
            request: Some(runner::RunRequest {
                system_prompt: "sys".into(),
                messages: vec![runner::Message {
                    role: runner::Role::User as i32,
                    text: "delete row 3".into(),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            input: Some(runner::InputRequired {
                iteration: 2,
                messages: vec![runner::Message {
                    role: runner::Role::Assistant as i32,
                    tool_calls: vec![call("delete_rows", serde_json::json!({"ids": [3]}))],
                    ..Default::default()
                }],
                ..Default::default()
            }),
            raw_text: "Let me do that.".into(),
            ..Default::default()
        };
        let stored = Continuation::decode_base64(&continuation.encode_base64()).expect("decodes");
        assert_eq!(stored, continuation);
        let decision = runner::ToolDecision {
            call_id: "call_1".into(),
            decision: Some(runner::tool_decision::Decision::Reject(
                runner::ToolRejection {
                    reason: "not that one".into(),
                },
            )),
        };
        let request = stored.continued_request(vec![decision.clone()]);
        assert_eq!(
            request.messages.len(),
            2,
            "the pause's model message follows"
        );
        assert_eq!(request.iterations_done, 2);
        assert_eq!(request.decisions, vec![decision]);
        assert!(Continuation::decode_base64("not base64!").is_none());
    }

    #[test]
    fn a_summary_names_the_tool_and_its_arguments_and_is_clipped() {
        let line = summary(&call(
            "delete_rows",
            serde_json::json!({"table": "orders", "ids": [3, 7]}),
        ));
        assert_eq!(line, r#"delete_rows(ids: [3,7], table: "orders")"#);
        let long = summary(&call("t", serde_json::json!({"text": "x".repeat(500)})));
        assert_eq!(long.chars().count(), SUMMARY_CHARS);
        assert!(long.ends_with('…'));
    }
}
