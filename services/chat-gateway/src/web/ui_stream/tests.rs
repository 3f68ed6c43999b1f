//! The UI message stream against the AI SDK's documented part shapes
//! (ai-sdk.dev, "Stream Protocols", and the SDK's chunk schema, which
//! refuses any field it does not list): each documented example is
//! written here as the expectation, with its example values replaced by
//! Parley's.

use parley_proto::{
    gateway::v1::{self as gw, chat_event::Event},
    json::to_struct,
    parser::v1 as parser,
};
use serde_json::{Value, json};

use super::{
    events::UiStream,
    http_status,
    parts::{DONE, Part},
    request::{self, Ask, BodyError},
};

fn event(event: Event) -> gw::ChatEvent {
    gw::ChatEvent {
        seq: 0,
        event: Some(event),
    }
}

fn status(phase: gw::TurnPhase) -> gw::ChatEvent {
    event(Event::Status(gw::TurnStatus {
        phase: phase as i32,
        message: String::new(),
        conversation_id: "c1".into(),
        turn_id: "t1".into(),
    }))
}

fn json_of(parts: &[Part]) -> Vec<Value> {
    parts.iter().map(Part::to_json).collect()
}

fn object(value: Value) -> prost_types::Struct {
    to_struct(value.as_object().expect("an object"))
}

/// A stream that has started (its `start` and status parts read).
fn started() -> UiStream {
    let mut ui = UiStream::new();
    ui.event(&status(gw::TurnPhase::Started));
    ui
}

#[test]
fn the_first_status_starts_the_message_with_the_turn_id_then_a_step() {
    let mut ui = UiStream::new();
    let parts = json_of(&ui.event(&status(gw::TurnPhase::Started)));
    // Documented: data: {"type":"start","messageId":"..."}
    // and {"type":"start-step"}; messageMetadata is the schema's.
    assert_eq!(
        parts,
        vec![
            json!({"type": "start", "messageId": "t1", "messageMetadata": {"conversationId": "c1"}}),
            json!({"type": "start-step"}),
            json!({"type": "data-parley-status", "data": {"phase": "started", "message": "", "conversationId": "c1", "turnId": "t1"}, "transient": true}),
        ]
    );
    // Later statuses are status data only.
    let later = json_of(&ui.event(&status(gw::TurnPhase::Thinking)));
    assert_eq!(later.len(), 1);
    assert_eq!(later[0]["type"], "data-parley-status");
    assert_eq!(later[0]["data"]["phase"], "thinking");
}

#[test]
fn a_continuation_keeps_the_message_of_its_turn() {
    let mut ui = UiStream::continuing("t0".into());
    let parts = json_of(&ui.event(&event(Event::Status(gw::TurnStatus {
        phase: gw::TurnPhase::RunningTools as i32,
        ..Default::default()
    }))));
    assert_eq!(
        parts[0],
        json!({"type": "start", "messageId": "t0", "messageMetadata": {}})
    );
}

#[test]
fn text_deltas_are_one_block_with_start_delta_and_end() {
    let mut ui = started();
    let first = json_of(&ui.event(&event(Event::TextDelta("Hello".into()))));
    // Documented: {"type":"text-start","id":"msg_…"},
    // {"type":"text-delta","id":"msg_…","delta":"Hello"}.
    assert_eq!(
        first,
        vec![
            json!({"type": "text-start", "id": "text-1"}),
            json!({"type": "text-delta", "id": "text-1", "delta": "Hello"}),
        ]
    );
    let second = json_of(&ui.event(&event(Event::TextDelta(", world".into()))));
    assert_eq!(
        second,
        vec![json!({"type": "text-delta", "id": "text-1", "delta": ", world"})]
    );
    // Documented: {"type":"text-end","id":"msg_…"}, then finish-step and
    // {"type":"finish"}.
    assert_eq!(
        json_of(&ui.end()),
        vec![
            json!({"type": "text-end", "id": "text-1"}),
            json!({"type": "finish-step"}),
            json!({"type": "finish"}),
        ]
    );
    assert!(ui.end().is_empty(), "finish is sent once");
}

#[test]
fn reasoning_is_its_own_block_closed_when_the_text_begins() {
    let mut ui = started();
    let parts = json_of(&ui.event(&event(Event::ReasoningDelta(
        "This is some reasoning".into(),
    ))));
    // Documented: {"type":"reasoning-start","id":"reasoning_123"},
    // {"type":"reasoning-delta","id":"reasoning_123","delta":"This is some reasoning"}.
    assert_eq!(
        parts,
        vec![
            json!({"type": "reasoning-start", "id": "reasoning-1"}),
            json!({"type": "reasoning-delta", "id": "reasoning-1", "delta": "This is some reasoning"}),
        ]
    );
    let parts = json_of(&ui.event(&event(Event::TextDelta("Answer".into()))));
    // Documented: {"type":"reasoning-end","id":"reasoning_123"}.
    assert_eq!(
        parts,
        vec![
            json!({"type": "reasoning-end", "id": "reasoning-1"}),
            json!({"type": "text-start", "id": "text-2"}),
            json!({"type": "text-delta", "id": "text-2", "delta": "Answer"}),
        ]
    );
}

#[test]
fn a_tool_call_is_its_input_then_its_output_and_the_next_model_call_a_new_step() {
    let mut ui = started();
    ui.event(&event(Event::TextDelta("Looking".into())));
    let start = json_of(&ui.event(&event(Event::ToolStart(gw::ToolStart {
        call_id: "call_1".into(),
        name: "getWeatherInformation".into(),
        input: Some(object(json!({"city": "San Francisco"}))),
    }))));
    // Documented: {"type":"tool-input-start","toolCallId":"call_…","toolName":"getWeatherInformation"}
    // and {"type":"tool-input-available","toolCallId":"call_…","toolName":"getWeatherInformation","input":{"city":"San Francisco"}};
    // `dynamic` is the schema's (a tool the client does not declare).
    assert_eq!(
        start,
        vec![
            json!({"type": "text-end", "id": "text-1"}),
            json!({"type": "tool-input-start", "toolCallId": "call_1", "toolName": "getWeatherInformation", "dynamic": true}),
            json!({"type": "tool-input-available", "toolCallId": "call_1", "toolName": "getWeatherInformation", "input": {"city": "San Francisco"}, "dynamic": true}),
        ]
    );
    let progress = json_of(&ui.event(&event(Event::ToolProgress(gw::ToolProgress {
        call_id: "call_1".into(),
        stage: "fetch".into(),
        message: "asking the weather service".into(),
        fraction: Some(0.5),
    }))));
    // Documented data part: {"type":"data-weather","data":{…}} (with an id,
    // the newest replaces the one before).
    assert_eq!(
        progress,
        vec![json!({
            "type": "data-parley-tool-progress",
            "id": "call_1",
            "data": {"toolCallId": "call_1", "stage": "fetch", "message": "asking the weather service", "fraction": 0.5},
        })]
    );
    let done = json_of(
        &ui.event(&event(Event::ToolComplete(Box::new(gw::ToolComplete {
            call_id: "call_1".into(),
            name: "getWeatherInformation".into(),
            success: true,
            duration: Some(prost_types::Duration {
                seconds: 0,
                nanos: 12_000_000,
            }),
            result_text: "sunny".into(),
            payload: None,
            error: String::new(),
        })))),
    );
    // Documented: {"type":"tool-output-available","toolCallId":"call_…","output":{…}}.
    assert_eq!(
        done,
        vec![json!({
            "type": "tool-output-available",
            "toolCallId": "call_1",
            "output": {"text": "sunny", "durationMs": 12},
            "dynamic": true,
        })]
    );
    // The model writes again: a new step.
    let next = json_of(&ui.event(&event(Event::TextDelta("Sunny.".into()))));
    assert_eq!(
        next,
        vec![
            json!({"type": "finish-step"}),
            json!({"type": "start-step"}),
            json!({"type": "text-start", "id": "text-2"}),
            json!({"type": "text-delta", "id": "text-2", "delta": "Sunny."}),
        ]
    );
}

#[test]
fn a_failed_tool_call_is_a_tool_output_error() {
    let mut ui = started();
    let parts = json_of(
        &ui.event(&event(Event::ToolComplete(Box::new(gw::ToolComplete {
            call_id: "call_2".into(),
            name: "lookup_rows".into(),
            success: false,
            error: "the table does not exist".into(),
            ..Default::default()
        })))),
    );
    // A completion with no start seen first still gets its input parts.
    assert_eq!(
        parts,
        vec![
            json!({"type": "tool-input-start", "toolCallId": "call_2", "toolName": "lookup_rows", "dynamic": true}),
            json!({"type": "tool-input-available", "toolCallId": "call_2", "toolName": "lookup_rows", "input": {}, "dynamic": true}),
            // Schema: {type:'tool-output-error', toolCallId, errorText, dynamic?}.
            json!({"type": "tool-output-error", "toolCallId": "call_2", "errorText": "the table does not exist", "dynamic": true}),
        ]
    );
}

#[test]
fn an_approval_request_is_the_sdks_tool_approval_request_and_its_summary() {
    let mut ui = started();
    let parts = json_of(
        &ui.event(&event(Event::ApprovalRequest(gw::ToolApprovalRequest {
            call_id: "call_3".into(),
            tool: "delete_rows".into(),
            arguments: Some(object(json!({"ids": [1, 2]}))),
            summary: "Delete 2 rows".into(),
            expires_at: Some(prost_types::Timestamp {
                seconds: 1_800_000_000,
                nanos: 0,
            }),
        }))),
    );
    assert_eq!(
        parts,
        vec![
            json!({"type": "tool-input-start", "toolCallId": "call_3", "toolName": "delete_rows", "dynamic": true}),
            json!({"type": "tool-input-available", "toolCallId": "call_3", "toolName": "delete_rows", "input": {"ids": [1, 2]}, "dynamic": true}),
            // Schema (AI SDK 6): {type:'tool-approval-request', approvalId, toolCallId}.
            json!({"type": "tool-approval-request", "approvalId": "call_3", "toolCallId": "call_3"}),
            json!({
                "type": "data-parley-approval-request",
                "id": "call_3",
                "data": {"toolCallId": "call_3", "toolName": "delete_rows", "summary": "Delete 2 rows", "expiresAt": "2027-01-15T08:00:00Z"},
            }),
        ]
    );
    // The turn pauses: the stream ends with the step and the message.
    ui.event(&status(gw::TurnPhase::AwaitingInput));
    assert_eq!(
        json_of(&ui.end()),
        vec![json!({"type": "finish-step"}), json!({"type": "finish"})]
    );
}

#[test]
fn a_client_tool_call_is_a_tool_input_the_sdks_on_tool_call_sees() {
    let mut ui = started();
    let parts = json_of(&ui.event(&event(Event::ClientToolCall(gw::ClientToolCall {
        call_id: "call_4".into(),
        tool: "ask_user_to_pick_rows".into(),
        arguments: Some(object(json!({"table": "orders"}))),
        expires_at: None,
    }))));
    assert_eq!(
        parts,
        vec![
            json!({"type": "tool-input-start", "toolCallId": "call_4", "toolName": "ask_user_to_pick_rows", "dynamic": true}),
            json!({"type": "tool-input-available", "toolCallId": "call_4", "toolName": "ask_user_to_pick_rows", "input": {"table": "orders"}, "dynamic": true}),
            json!({"type": "data-parley-client-tool-call", "id": "call_4", "data": {"toolCallId": "call_4", "toolName": "ask_user_to_pick_rows", "expiresAt": null}}),
        ]
    );
}

#[test]
fn payload_partials_suggestions_and_actions_are_parley_data_parts() {
    let mut ui = started();
    let partial = json_of(&ui.event(&event(Event::PayloadPartial(Box::new(
        gw::PayloadPartial {
            r#type: "schema_proposal".into(),
            data: Some(object(json!({"table": "orders"}))),
            complete_paths: vec!["/table".into()],
            revision: 2,
            offset: 40,
            diagnostic: None,
        },
    )))));
    assert_eq!(
        partial,
        vec![json!({
            "type": "data-parley-payload-partial",
            "id": "payload-40",
            "data": {"type": "schema_proposal", "data": {"table": "orders"}, "completePaths": ["/table"], "revision": 2, "offset": 40, "diagnostic": null},
        })]
    );
    let values = json_of(
        &ui.event(&event(Event::SuggestedValues(parser::SuggestedValues {
            values: vec![parser::SuggestedValue {
                label: "Orders".into(),
                value: "Show orders".into(),
            }],
        }))),
    );
    assert_eq!(
        values,
        vec![json!({
            "type": "data-parley-suggested-values",
            "id": "suggested-values",
            "data": {"values": [{"label": "Orders", "value": "Show orders"}]},
        })]
    );
    let actions = json_of(
        &ui.event(&event(Event::SuggestedActions(parser::SuggestedActions {
            actions: vec![parser::SuggestedAction {
                label: "Close".into(),
                action: "close_chat".into(),
                handler: parser::ActionHandler::Client as i32,
                params: None,
            }],
        }))),
    );
    assert_eq!(
        actions,
        vec![json!({
            "type": "data-parley-suggested-actions",
            "id": "suggested-actions",
            "data": {"actions": [{"label": "Close", "action": "close_chat", "handler": "client", "params": {}}]},
        })]
    );
}

#[test]
fn complete_closes_the_text_and_sends_the_final_payload_summary_and_finish() {
    let mut ui = started();
    ui.event(&event(Event::TextDelta("Here it is.".into())));
    let parts = json_of(&ui.event(&event(Event::Complete(Box::new(gw::TurnComplete {
        success: true,
        message: "Here it is.".into(),
        custom_payload: Some(parser::Payload {
            r#type: "schema_proposal".into(),
            data: Some(object(json!({"table": "orders"}))),
            typed: None,
        }),
        conversation_id: "c1".into(),
        turn_id: "t1".into(),
        state: gw::TurnState::Completed as i32,
        stop_reason: "end_turn".into(),
        ..Default::default()
    })))));
    assert_eq!(
        parts,
        vec![
            json!({"type": "text-end", "id": "text-1"}),
            json!({"type": "data-parley-payload", "id": "payload", "data": {"type": "schema_proposal", "data": {"table": "orders"}}}),
            json!({
                "type": "data-parley-complete",
                "id": "complete",
                "data": {"success": true, "state": "completed", "stopReason": "end_turn", "conversationId": "c1", "turnId": "t1", "usage": null, "diagnostics": []},
            }),
            json!({"type": "finish-step"}),
            json!({"type": "finish"}),
        ]
    );
    assert!(ui.finished());
}

#[test]
fn a_turn_error_is_parley_details_first_then_the_sdks_error_part() {
    let mut ui = started();
    let parts = json_of(&ui.event(&event(Event::Error(gw::TurnError {
        reason: "RUNNER_UNAVAILABLE".into(),
        message: "the model is unavailable".into(),
        retryable: true,
        retry_after: Some(prost_types::Duration {
            seconds: 2,
            nanos: 0,
        }),
    }))));
    assert_eq!(
        parts,
        vec![
            json!({"type": "data-parley-error", "id": "error", "data": {"reason": "RUNNER_UNAVAILABLE", "message": "the model is unavailable", "retryable": true, "retryAfterMs": 2000}}),
            // Documented: {"type":"error","errorText":"error message"}.
            json!({"type": "error", "errorText": "the model is unavailable"}),
        ]
    );
}

#[test]
fn a_stream_that_breaks_ends_with_an_error_and_finish() {
    let mut ui = started();
    let parts = json_of(&ui.failed("SLOW_CONSUMER", "the stream was not read"));
    assert_eq!(
        parts[1],
        json!({"type": "error", "errorText": "the stream was not read"})
    );
    assert_eq!(parts.last(), Some(&json!({"type": "finish"})));
}

#[test]
fn each_part_is_one_server_sent_event_and_done_ends_the_stream() {
    // Documented: `data: {json}` and a blank line; `data: [DONE]`.
    assert_eq!(Part::Finish.to_sse(), "data: {\"type\":\"finish\"}\n\n");
    assert_eq!(DONE, "data: [DONE]\n\n");
}

/// Every part we send has only the fields the SDK's strict chunk schema
/// allows for its type.
#[test]
fn no_part_carries_a_field_the_sdk_schema_does_not_list() {
    let allowed = |kind: &str| -> &'static [&'static str] {
        match kind {
            "start" => &["type", "messageId", "messageMetadata"],
            "start-step" | "finish-step" | "finish" => &["type"],
            "text-start" | "text-end" | "reasoning-start" | "reasoning-end" => &["type", "id"],
            "text-delta" | "reasoning-delta" => &["type", "id", "delta"],
            "tool-input-start" => &["type", "toolCallId", "toolName", "dynamic"],
            "tool-input-available" => &["type", "toolCallId", "toolName", "input", "dynamic"],
            "tool-output-available" => &["type", "toolCallId", "output", "dynamic"],
            "tool-output-error" => &["type", "toolCallId", "errorText", "dynamic"],
            "tool-approval-request" => &["type", "approvalId", "toolCallId"],
            "error" => &["type", "errorText"],
            data if data.starts_with("data-parley-") => &["type", "id", "data", "transient"],
            other => panic!("unexpected part type {other}"),
        }
    };
    let mut ui = UiStream::new();
    let mut all = Vec::new();
    for e in [
        status(gw::TurnPhase::Started),
        event(Event::ReasoningDelta("r".into())),
        event(Event::TextDelta("t".into())),
        event(Event::StructuredDelta("{".into())),
        event(Event::StructuredPartial(gw::StructuredPartial::default())),
        event(Event::ToolStart(gw::ToolStart {
            call_id: "a".into(),
            name: "n".into(),
            input: None,
        })),
        event(Event::ToolProgress(gw::ToolProgress::default())),
        event(Event::ToolComplete(Box::new(gw::ToolComplete {
            call_id: "a".into(),
            success: true,
            ..Default::default()
        }))),
        event(Event::ApprovalRequest(gw::ToolApprovalRequest {
            call_id: "b".into(),
            ..Default::default()
        })),
        event(Event::ClientToolCall(gw::ClientToolCall {
            call_id: "c".into(),
            ..Default::default()
        })),
        event(Event::PayloadPartial(Box::default())),
        event(Event::StepReset(gw::StepReset::default())),
        event(Event::Error(gw::TurnError::default())),
        event(Event::Complete(Box::new(gw::TurnComplete {
            structured: Some(parser::StructuredResult::default()),
            suggested_values: vec![parser::SuggestedValue::default()],
            suggested_actions: vec![parser::SuggestedAction::default()],
            usage: Some(gw::Usage::default()),
            ..Default::default()
        }))),
    ] {
        all.extend(json_of(&ui.event(&e)));
    }
    assert!(all.len() > 20);
    for part in &all {
        let kind = part["type"].as_str().expect("a type");
        for field in part.as_object().expect("an object").keys() {
            assert!(
                allowed(kind).contains(&field.as_str()),
                "{kind} has `{field}`: {part}"
            );
        }
    }
}

// ---- request bodies ----

#[test]
fn a_submitted_message_is_its_text_parts_with_its_id_as_the_request_id() {
    // The body DefaultChatTransport posts, with an extra `page` from `body`.
    let body = request::parse(
        json!({
            "id": "chat-1",
            "messages": [
                {"id": "m0", "role": "user", "parts": [{"type": "text", "text": "old"}]},
                {"id": "t0", "role": "assistant", "parts": [{"type": "text", "text": "answer"}]},
                {"id": "m1", "role": "user", "parts": [{"type": "text", "text": "Show"}, {"type": "file", "url": "x", "mediaType": "image/png"}, {"type": "text", "text": "the tables"}]},
            ],
            "trigger": "submit-message",
            "page": {"page": "tables_list", "state": {"selected": 2}},
            "somethingElse": true,
        })
        .to_string()
        .as_bytes(),
    )
    .expect("a body");
    assert_eq!(
        body.ask().expect("an ask"),
        Ask::Send {
            text: "Show\nthe tables".into(),
            request_id: "m1".into(),
        }
    );
    let page = body.page.expect("a page").to_wire();
    assert_eq!(page.page, "tables_list");
    assert!(page.state.expect("state").fields.contains_key("selected"));
}

#[test]
fn regenerate_names_the_answer_to_run_again_or_none() {
    let body = |message_id: Value| {
        request::parse(
            json!({"id": "c", "messages": [], "trigger": "regenerate-message", "messageId": message_id})
                .to_string()
                .as_bytes(),
        )
        .expect("a body")
        .ask()
        .expect("an ask")
    };
    assert_eq!(
        body(json!("t9")),
        Ask::Regenerate {
            turn_id: Some("t9".into())
        }
    );
    assert_eq!(body(Value::Null), Ask::Regenerate { turn_id: None });
}

#[test]
fn an_assistant_message_with_responses_continues_its_turn() {
    let body = request::parse(
        json!({
            "id": "c",
            "messages": [
                {"id": "m1", "role": "user", "parts": [{"type": "text", "text": "go"}]},
                {"id": "t1", "role": "assistant", "parts": [
                    {"type": "step-start"},
                    {"type": "dynamic-tool", "toolName": "old", "toolCallId": "call_0", "state": "output-available", "input": {}, "output": {"text": "x"}},
                    {"type": "step-start"},
                    {"type": "dynamic-tool", "toolName": "lookup", "toolCallId": "call_1", "state": "output-available", "input": {}, "output": {"text": "server ran it"}},
                    {"type": "dynamic-tool", "toolName": "delete_rows", "toolCallId": "call_3", "state": "approval-responded", "input": {}, "approval": {"id": "call_3", "approved": false, "reason": "not now"}},
                    {"type": "data-parley-approval-request", "id": "call_3", "data": {"toolCallId": "call_3"}},
                    {"type": "dynamic-tool", "toolName": "pick", "toolCallId": "call_4", "state": "output-available", "input": {}, "output": ["a"]},
                    {"type": "data-parley-client-tool-call", "id": "call_4", "data": {"toolCallId": "call_4"}},
                ]},
            ],
            "trigger": "submit-message",
        })
        .to_string()
        .as_bytes(),
    )
    .expect("a body");
    let Ask::Decide { turn_id, decisions } = body.ask().expect("an ask") else {
        panic!("not a decision");
    };
    assert_eq!(turn_id, "t1");
    use gw::tool_decision::Decision;
    assert_eq!(
        decisions,
        vec![
            gw::ToolDecision {
                call_id: "call_3".into(),
                decision: Some(Decision::Reject(gw::ToolRejection {
                    reason: "not now".into()
                })),
            },
            gw::ToolDecision {
                call_id: "call_4".into(),
                decision: Some(Decision::Result(gw::ClientToolResult {
                    output: Some(object(json!({"value": ["a"]}))),
                    error: String::new(),
                })),
            },
        ]
    );
}

#[test]
fn bodies_that_are_not_what_use_chat_sends_are_refused_with_the_field() {
    let error =
        |text: &str| request::parse(text.as_bytes()).and_then(|body| body.ask().map(|_| ()));
    assert!(matches!(error("{not json"), Err(BodyError::Json(_))));
    assert!(matches!(
        error(r#"{"messages": []}"#),
        Err(BodyError::Json(_))
    ));
    assert!(matches!(
        error(r#"{"id": "", "messages": []}"#),
        Err(BodyError::MissingId)
    ));
    assert!(matches!(
        error(r#"{"id": "c", "messages": []}"#),
        Err(BodyError::NoMessage)
    ));
    let trigger = error(r#"{"id": "c", "messages": [], "trigger": "resume"}"#);
    let Err(trigger) = trigger else {
        panic!("an unknown trigger is refused");
    };
    assert!(matches!(&trigger, BodyError::Trigger(t) if t == "resume"));
    assert_eq!(trigger.field(), "trigger");
    assert!(matches!(
        error(r#"{"id": "c", "messages": [{"id": "t", "role": "assistant", "parts": []}]}"#),
        Err(BodyError::NoDecisions)
    ));
}

#[test]
fn grpc_codes_become_their_http_statuses() {
    use axum::http::StatusCode;
    use tonic::Code;
    for (code, status) in [
        (Code::InvalidArgument, StatusCode::BAD_REQUEST),
        (Code::FailedPrecondition, StatusCode::BAD_REQUEST),
        (Code::Unauthenticated, StatusCode::UNAUTHORIZED),
        (Code::PermissionDenied, StatusCode::FORBIDDEN),
        (Code::NotFound, StatusCode::NOT_FOUND),
        (Code::ResourceExhausted, StatusCode::TOO_MANY_REQUESTS),
        (Code::Unavailable, StatusCode::SERVICE_UNAVAILABLE),
        (Code::DeadlineExceeded, StatusCode::GATEWAY_TIMEOUT),
        (Code::Internal, StatusCode::INTERNAL_SERVER_ERROR),
    ] {
        assert_eq!(http_status(code), status, "{code:?}");
    }
    assert_eq!(super::body_limit(32 * 1024), 2 * 1024 * 1024);
    assert_eq!(super::body_limit(1024), super::MIN_BODY_BYTES);
}

#[tokio::test]
async fn a_refusal_is_json_with_its_code_reason_and_when_to_retry() {
    use axum::response::IntoResponse;
    let response = super::HttpError::from(crate::error::GatewayError::TooManyTurns).into_response();
    assert_eq!(response.status(), 429);
    assert_eq!(response.headers()["content-type"], "application/json");
    assert_eq!(response.headers()["retry-after"], "1");
    let body = axum::body::to_bytes(response.into_body(), 4096)
        .await
        .expect("the body");
    let body: Value = serde_json::from_slice(&body).expect("JSON");
    assert_eq!(
        body,
        json!({"code": "RESOURCE_EXHAUSTED", "reason": "TOO_MANY_TURNS", "message": "too many turns are running; retry shortly"})
    );
    let not_found =
        super::HttpError::from(crate::error::GatewayError::ConversationNotFound).into_response();
    assert_eq!(not_found.status(), 404);
    assert!(not_found.headers().get("retry-after").is_none());
}

// ---- the SSE body ----

/// The next chunk of an SSE body, as text.
async fn next_chunk(body: &mut axum::body::BodyDataStream) -> Option<String> {
    use futures::StreamExt;
    let chunk = body.next().await?.expect("a chunk");
    Some(String::from_utf8(chunk.to_vec()).expect("utf-8"))
}

#[tokio::test(start_paused = true)]
async fn a_silent_stream_sends_keep_alive_comments_and_ends_with_done() {
    let (events, received) = tokio::sync::mpsc::channel(4);
    let stream: crate::durable::EventStream =
        Box::pin(tokio_stream::wrappers::ReceiverStream::new(received));
    let response = super::event_stream(stream, UiStream::new());
    assert_eq!(response.headers()["x-vercel-ai-ui-message-stream"], "v1");
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    let mut body = response.into_body().into_data_stream();
    events
        .send(Ok(status(gw::TurnPhase::Started)))
        .await
        .expect("send");
    let first = next_chunk(&mut body).await.expect("the first parts");
    let (first_part, _) = first.split_once("\n\n").expect("one event");
    let first_part: Value =
        serde_json::from_str(first_part.strip_prefix("data: ").expect("data")).expect("JSON");
    assert_eq!(first_part["type"], "start");
    // The model thinks; time passes (paused time runs ahead when idle).
    assert_eq!(
        next_chunk(&mut body).await.as_deref(),
        Some(": keep-alive\n\n")
    );
    events
        .send(Err(tonic::Status::resource_exhausted(
            "the stream was not read",
        )))
        .await
        .expect("send");
    let last = next_chunk(&mut body).await.expect("the end");
    assert!(
        last.contains("\"errorText\":\"the stream was not read\"")
            && last.ends_with("data: {\"type\":\"finish\"}\n\ndata: [DONE]\n\n"),
        "{last}"
    );
    assert_eq!(next_chunk(&mut body).await, None);
}
