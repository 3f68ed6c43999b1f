//! One turn end to end: clean text, typed complete, tools, history,
//! structured output, parser fallback and runner failures.

use parley_proto::{
    gateway::v1::{self as gw, chat_event::Event},
    parser::v1::{DiagnosticKind, SuggestedValue, payload::Typed},
    runner::v1::{self as runner, run_event},
};
use prost_types::Duration;

use crate::harness::{
    Harness, Options, ParserMode, chat, chat_request,
    fake_runner::{Reply, Step, deltas, finished, text_reply},
};

const PROPOSAL: &str = r#"{"mode": "create", "reasoning": "Track applications", "table_name": "Job Applications", "table_description": "Tracks job applications", "operations": [{"action": "add", "column": {"name": "Company", "type": "text", "required": true}}, {"action": "add", "column": {"name": "Status", "type": "select", "options": ["Applied", "Interview"]}}], "sample_rows": [{"Company": "Acme", "Status": "Applied"}, {"Company": "Globex", "Status": "Interview"}]}"#;

/// The scripted answer: prose, a bold-colon proposal marker, suggestions.
fn answer() -> String {
    format!(
        "Here is a table to track your applications.\n\n**SCHEMA_PROPOSAL:** {PROPOSAL}\n\nSUGGESTED_VALUES: [{{\"label\": \"Add rows\", \"value\": \"Add some sample rows\"}}]"
    )
}

fn assert_clean(turn: &crate::harness::Turn) {
    for event in &turn.events {
        if let Some(Event::TextDelta(text)) = &event.event {
            for leak in ["SCHEMA", "PROPOSAL", "SUGGESTED", "{", "}", "**"] {
                assert!(!text.contains(leak), "delta {text:?} leaks {leak:?}");
            }
        }
    }
    assert_eq!(
        turn.text, turn.complete.message,
        "the deltas add up to the final message"
    );
}

#[tokio::test]
async fn markers_never_reach_the_client_and_complete_is_typed() {
    for size in [1, 7, 64] {
        let mut stack = Harness::start(Options::default()).await;
        stack.runner.push(deltas(&answer(), size));
        let turn = chat(
            &mut stack.client,
            chat_request("", "Track my job applications", "tables_list"),
        )
        .await;
        assert_clean(&turn);
        let complete = &turn.complete;
        assert!(complete.success, "{complete:?}");
        assert_eq!(
            complete.message.trim_end(),
            "Here is a table to track your applications."
        );
        assert_eq!(complete.state, gw::TurnState::Completed as i32);
        assert_eq!(complete.stop_reason, "end_turn");
        let payload = complete.custom_payload.as_ref().expect("a custom payload");
        assert_eq!(payload.r#type, "schema_proposal");
        let Some(Typed::SchemaProposal(proposal)) = &payload.typed else {
            panic!("typed view: {payload:?}")
        };
        assert_eq!(proposal.table_name.as_deref(), Some("Job Applications"));
        assert_eq!(proposal.operations.len(), 2);
        assert_eq!(
            complete.suggested_values,
            vec![SuggestedValue {
                label: "Add rows".into(),
                value: "Add some sample rows".into()
            }]
        );
        let usage = complete.usage.as_ref().expect("usage");
        assert_eq!(
            (
                usage.input_tokens,
                usage.output_tokens,
                usage.model.as_str()
            ),
            (120, 30, "scripted-test")
        );
        assert!(
            complete
                .diagnostics
                .iter()
                .all(|d| d.kind != DiagnosticKind::ParserFallback as i32)
        );

        // The runner got an assembled request from the authenticated user.
        let seen = stack.runner.seen();
        let request = &seen[0].request;
        assert_eq!(request.user_id, "dev");
        assert!(
            request.system_prompt.contains("SCHEMA_PROPOSAL"),
            "the page's payload types are taught"
        );
        assert_eq!(request.messages.len(), 1);
        assert_eq!(request.messages[0].text, "Track my job applications");
        assert_eq!(request.conversation_id, turn.conversation_id());

        // And it is stored.
        let stored = stack
            .client
            .get_conversation(gw::GetConversationRequest {
                conversation_id: turn.conversation_id(),
                ..Default::default()
            })
            .await
            .expect("get")
            .into_inner();
        assert_eq!(stored.messages.len(), 2);
        assert_eq!(stored.messages[1].text, complete.message);
        assert_eq!(stored.messages[1].custom_payload.as_ref(), Some(payload));
        assert_eq!(
            stored.messages[1].suggested_values,
            complete.suggested_values
        );
        assert_eq!(
            stored.conversation.expect("summary").title,
            "Track my job applications"
        );
        stack.stop().await;
    }
}

/// A tool call the model wrote into its text reaches the gateway only when
/// the runner did not run it (`turns.text_tool_calls` off, the default):
/// then it is the model's text, and the user reads it rather than losing it.
#[tokio::test]
async fn a_tool_call_written_in_the_text_is_never_silently_removed() {
    let mut stack = Harness::start(Options::default()).await;
    let call = r#"{"tool": "current_time", "input": {}}"#;
    let text = format!("Let me check the time. {call}");
    stack.runner.push(text_reply(&[text.as_str()]));
    let turn = chat(
        &mut stack.client,
        chat_request("", "What time is it?", "tables_list"),
    )
    .await;
    assert!(turn.complete.success, "{:?}", turn.complete);
    assert!(turn.text.contains(call), "streamed: {:?}", turn.text);
    assert!(
        turn.complete.message.contains(call),
        "stored: {:?}",
        turn.complete.message
    );
}

#[tokio::test]
async fn text_written_before_a_tool_call_reaches_the_client_before_it() {
    // All at once, as a fast runner sends them: the sidecar's answers for
    // the text must not fall behind the tool's events.
    for parser in [ParserMode::Up, ParserMode::Down] {
        let mut stack = Harness::start(Options {
            parser,
            ..Options::default()
        })
        .await;
        stack.runner.push(Reply::Steps(vec![
            Step::Send(run_event::Event::TextDelta("Let me look ".into())),
            Step::Send(run_event::Event::TextDelta("that up. ".into())),
            Step::Send(run_event::Event::Status(runner::Status {
                phase: runner::Phase::Tools as i32,
                message: "Running lookup_rows".into(),
                ..Default::default()
            })),
            Step::Send(run_event::Event::ToolStart(runner::ToolStart {
                call_id: "call_1".into(),
                name: "lookup_rows".into(),
                ..Default::default()
            })),
            Step::Send(run_event::Event::ToolComplete(Box::new(
                runner::ToolComplete {
                    call_id: "call_1".into(),
                    name: "lookup_rows".into(),
                    success: true,
                    result_text: "1 row matches".into(),
                    ..Default::default()
                },
            ))),
            Step::Send(run_event::Event::TextDelta("Acme is in row 5.".into())),
            Step::Send(finished("Let me look that up. Acme is in row 5.")),
        ]));
        let turn = chat(
            &mut stack.client,
            chat_request("", "Where is Acme?", "table_view"),
        )
        .await;
        let order: Vec<String> = turn
            .events
            .iter()
            .filter_map(|event| match &event.event {
                Some(Event::TextDelta(text)) => Some(format!("text {text:?}")),
                Some(Event::ToolStart(_)) => Some("tool_start".into()),
                Some(Event::ToolComplete(_)) => Some("tool_complete".into()),
                _ => None,
            })
            .collect();
        assert_eq!(
            order,
            [
                "text \"Let me look that up.\"",
                "tool_start",
                "tool_complete",
                "text \" Acme is in row 5.\""
            ],
            "{parser:?}"
        );
        assert_clean(&turn);
        stack.stop().await;
    }
}

#[tokio::test]
async fn tool_events_pass_through_and_are_kept() {
    let mut stack = Harness::start(Options::default()).await;
    let input = parley_proto::json::to_struct_wrapped(&serde_json::json!({"query": "Acme"}));
    stack.runner.push(Reply::Steps(vec![
        Step::Send(run_event::Event::Status(runner::Status {
            phase: runner::Phase::Tools as i32,
            message: "Running lookup_rows".into(),
            ..Default::default()
        })),
        Step::Send(run_event::Event::ToolStart(runner::ToolStart {
            call_id: "call_1".into(),
            name: "lookup_rows".into(),
            input: Some(input.clone()),
            source: runner::ToolCallSource::Native as i32,
        })),
        Step::Send(run_event::Event::ToolProgress(runner::ToolProgress {
            call_id: "call_1".into(),
            stage: "searching".into(),
            message: "Searching rows".into(),
            fraction: Some(0.5),
        })),
        Step::Send(run_event::Event::ToolComplete(Box::new(
            runner::ToolComplete {
                call_id: "call_1".into(),
                name: "lookup_rows".into(),
                success: true,
                duration: Some(Duration {
                    seconds: 0,
                    nanos: 250_000_000,
                }),
                result_text: "1 row matches".into(),
                ..Default::default()
            },
        ))),
        Step::Send(run_event::Event::ReasoningDelta(
            "The user wants Acme.".into(),
        )),
        Step::Send(run_event::Event::TextDelta("Acme is in row 5.".into())),
        Step::Send(finished("Acme is in row 5.")),
    ]));
    let turn = chat(
        &mut stack.client,
        chat_request("", "Where is Acme?", "table_view"),
    )
    .await;
    let kinds: Vec<&str> = turn
        .events
        .iter()
        .map(|event| match &event.event {
            Some(Event::Status(_)) => "status",
            Some(Event::ToolStart(_)) => "tool_start",
            Some(Event::ToolProgress(_)) => "tool_progress",
            Some(Event::ToolComplete(_)) => "tool_complete",
            Some(Event::ReasoningDelta(_)) => "reasoning",
            Some(Event::TextDelta(_)) => "text",
            Some(Event::Complete(_)) => "complete",
            _ => "other",
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "status",
            "status",
            "tool_start",
            "tool_progress",
            "tool_complete",
            "reasoning",
            "text",
            "complete"
        ]
    );
    let Some(Event::Status(status)) = &turn.events[1].event else {
        unreachable!()
    };
    assert_eq!(status.phase, gw::TurnPhase::RunningTools as i32);
    let record = &turn.complete.tool_history[0];
    assert_eq!(
        (record.name.as_str(), record.output.as_str(), record.success),
        ("lookup_rows", "1 row matches", true)
    );
    assert_eq!(record.input.as_ref(), Some(&input));

    let stored = stack
        .client
        .get_conversation(gw::GetConversationRequest {
            conversation_id: turn.conversation_id(),
            ..Default::default()
        })
        .await
        .expect("get")
        .into_inner();
    let answer = &stored.messages[1];
    assert_eq!(answer.tool_history, turn.complete.tool_history);
    assert_eq!(answer.reasoning, "The user wants Acme.");
    stack.stop().await;
}

#[tokio::test]
async fn the_next_turn_gets_the_history_and_the_payload_manifest() {
    let mut stack = Harness::start(Options::default()).await;
    stack.runner.push(deltas(&answer(), 16));
    let first = chat(
        &mut stack.client,
        chat_request("", "Track my job applications", "tables_list"),
    )
    .await;
    stack.runner.push(text_reply(&["Sure."]));
    let second = chat(
        &mut stack.client,
        chat_request(&first.conversation_id(), "Rename it", "tables_list"),
    )
    .await;
    assert_eq!(second.conversation_id(), first.conversation_id());

    let request = stack.runner.seen()[1].request.clone();
    let texts: Vec<(i32, &str)> = request
        .messages
        .iter()
        .map(|m| (m.role, m.text.as_str()))
        .collect();
    assert_eq!(
        texts,
        vec![
            (runner::Role::User as i32, "Track my job applications"),
            (
                runner::Role::Assistant as i32,
                first.complete.message.trim_end()
            ),
            (runner::Role::User as i32, "Rename it"),
        ]
    );
    assert!(
        request.system_prompt.contains("PAYLOAD MANIFEST"),
        "{}",
        request.system_prompt
    );
    assert!(request.system_prompt.contains("Job Applications"));
    stack.stop().await;
}

/// Two turns of a conversation on one page, the user elsewhere in the
/// table each time: the runner is told where the stable part of the
/// system prompt ends, it is the same bytes both times, and the cache key
/// is the conversation's.
#[tokio::test]
async fn the_turns_of_a_page_send_the_same_cacheable_prompt_prefix() {
    let mut stack = Harness::start(Options::default()).await;
    let ask = |state: serde_json::Value| {
        let mut request = chat_request("", "What is in this table?", "table_view");
        if let Some(page) = request.page.as_mut() {
            page.state = Some(parley_proto::json::to_struct_wrapped(&state));
        }
        request
    };
    stack.runner.push(text_reply(&["Two rows."]));
    let first = chat(
        &mut stack.client,
        ask(serde_json::json!({"table": {"name": "Jobs", "row_count": 2}})),
    )
    .await;
    stack.runner.push(text_reply(&["Three now."]));
    let mut second = ask(serde_json::json!({"table": {"name": "Jobs", "row_count": 3}}));
    second.conversation_id = first.conversation_id();
    chat(&mut stack.client, second).await;
    let seen = stack.runner.seen();
    let (a, b) = (&seen[0].request, &seen[1].request);
    let stable = a.system_prompt_stable_bytes as usize;
    assert!(stable > 0 && stable < a.system_prompt.len());
    assert_eq!(a.system_prompt_stable_bytes, b.system_prompt_stable_bytes);
    assert_eq!(a.system_prompt[..stable], b.system_prompt[..stable]);
    assert_ne!(a.system_prompt, b.system_prompt, "the UI state differs");
    assert!(a.system_prompt[stable..].starts_with("## CURRENT CONTEXT"));
    assert!(!a.prompt_cache_key.is_empty());
    assert_eq!(a.prompt_cache_key, b.prompt_cache_key);
    stack.stop().await;
}

#[tokio::test]
async fn structured_answers_stream_and_come_back_as_assistant_text() {
    let mut stack = Harness::start(Options::default()).await;
    let schema = serde_json::json!({"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]});
    let value = serde_json::json!({"name": "Ada"});
    stack.runner.push(Reply::Steps(vec![
        Step::Send(run_event::Event::StructuredDelta("{\"name\": ".into())),
        Step::Send(run_event::Event::StructuredDelta("\"Ada\"}".into())),
        Step::Send(run_event::Event::Finished(Box::new(runner::Finished {
            stop_reason: runner::StopReason::EndTurn as i32,
            structured: Some(parley_proto::parser::v1::StructuredResult {
                value: Some(parley_proto::json::to_value(&value)),
                raw: "{\"name\": \"Ada\"}".into(),
                valid: true,
                error: String::new(),
            }),
            ..Default::default()
        }))),
    ]));
    let mut request = chat_request("", "Extract the contact", "tables_list");
    request.response_schema = Some(parley_proto::json::to_struct_wrapped(&schema));
    let turn = chat(&mut stack.client, request).await;
    let structured_deltas: String = turn
        .events
        .iter()
        .filter_map(|event| match &event.event {
            Some(Event::StructuredDelta(text)) => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(structured_deltas, "{\"name\": \"Ada\"}");
    let structured = turn.complete.structured.as_ref().expect("structured");
    assert!(structured.valid);
    assert_eq!(
        structured
            .value
            .as_ref()
            .map(parley_proto::json::from_value),
        Some(value)
    );
    let seen = stack.runner.seen();
    assert_eq!(
        seen[0]
            .request
            .output_schema
            .as_ref()
            .map(parley_proto::json::from_struct_value),
        Some(schema)
    );

    // The next request has no schema; the earlier answer is assistant JSON text.
    let second = chat(
        &mut stack.client,
        chat_request(&turn.conversation_id(), "Now in French", "tables_list"),
    )
    .await;
    assert!(second.complete.success);
    let next = &stack.runner.seen()[1].request;
    assert_eq!(next.output_schema, None);
    assert_eq!(next.messages[1].text, "{\"name\":\"Ada\"}");
    stack.stop().await;
}

#[tokio::test]
async fn a_parser_sidecar_that_is_down_is_replaced_in_process() {
    let mut stack = Harness::start(Options {
        parser: ParserMode::Down,
        ..Options::default()
    })
    .await;
    stack.runner.push(deltas(&answer(), 5));
    let turn = chat(
        &mut stack.client,
        chat_request("", "Track my job applications", "tables_list"),
    )
    .await;
    assert_clean(&turn);
    assert!(turn.complete.success);
    assert_eq!(
        turn.complete
            .custom_payload
            .as_ref()
            .map(|p| p.r#type.as_str()),
        Some("schema_proposal")
    );
    let fallback: Vec<_> = turn
        .complete
        .diagnostics
        .iter()
        .filter(|d| d.kind == DiagnosticKind::ParserFallback as i32)
        .collect();
    assert_eq!(fallback.len(), 1, "{:?}", turn.complete.diagnostics);
    stack.stop().await;
}

#[tokio::test]
async fn a_parser_stream_that_breaks_mid_turn_continues_in_process() {
    // The answer's first sentence passes the sidecar (plain text); its
    // stream carries four answers for the rest: it breaks before the
    // first, in the middle and before the final parse.
    for breaks_after in [0, 1, 3] {
        let mut stack = Harness::start(Options {
            parser: ParserMode::BreaksAfter(breaks_after),
            ..Options::default()
        })
        .await;
        stack.runner.push(deltas(&answer(), 3));
        let turn = chat(
            &mut stack.client,
            chat_request("", "Track my job applications", "tables_list"),
        )
        .await;
        assert_clean(&turn);
        assert_eq!(
            turn.complete.message.trim_end(),
            "Here is a table to track your applications."
        );
        assert_eq!(turn.complete.suggested_values.len(), 1);
        assert!(
            turn.complete
                .diagnostics
                .iter()
                .any(|d| d.kind == DiagnosticKind::ParserFallback as i32),
            "after {breaks_after}: {:?}",
            turn.complete.diagnostics
        );
        stack.stop().await;
    }
}

#[tokio::test]
async fn a_runner_error_ends_with_an_error_event_and_a_helpful_failed_complete() {
    let mut stack = Harness::start(Options::default()).await;
    stack.runner.push(Reply::Steps(vec![
        Step::Send(run_event::Event::TextDelta("Let me look".into())),
        Step::Send(run_event::Event::Error(runner::Error {
            code: tonic::Code::ResourceExhausted as i32,
            reason: "RATE_LIMITED".into(),
            message: "the provider answered 429".into(),
            retryable: true,
            partial_text: "Let me look".into(),
            provider_detail: "429 Too Many Requests".into(),
            retry_after: Some(Duration {
                seconds: 3,
                nanos: 0,
            }),
        })),
    ]));
    let turn = chat(
        &mut stack.client,
        chat_request("", "Summarise my tables", "tables_list"),
    )
    .await;
    let error = turn.error.as_ref().expect("an error event");
    assert_eq!(
        (error.reason.as_str(), error.retryable),
        ("RATE_LIMITED", true)
    );
    assert_eq!(
        error.retry_after,
        Some(Duration {
            seconds: 3,
            nanos: 0
        })
    );
    let kinds: Vec<bool> = turn
        .events
        .iter()
        .map(|e| matches!(e.event, Some(Event::Error(_))))
        .collect();
    assert_eq!(
        kinds.iter().rposition(|k| *k),
        Some(turn.events.len() - 2),
        "error right before complete"
    );
    let complete = &turn.complete;
    assert!(!complete.success);
    assert_eq!(complete.state, gw::TurnState::Failed as i32);
    assert!(
        complete.message.starts_with("Let me look\n\n"),
        "{}",
        complete.message
    );
    assert!(
        complete.message.contains("3 seconds"),
        "{}",
        complete.message
    );
    assert!(complete.suggested_values.contains(&SuggestedValue {
        label: "Try again".into(),
        value: "Summarise my tables".into()
    }));

    let stored = stack
        .client
        .get_conversation(gw::GetConversationRequest {
            conversation_id: turn.conversation_id(),
            ..Default::default()
        })
        .await
        .expect("get")
        .into_inner();
    assert_eq!(stored.messages[1].state, gw::TurnState::Failed as i32);
    assert_eq!(stored.messages[1].text, "Let me look");
    assert_eq!(stored.messages[1].stop_reason, "error");
    let stored_error = stored.messages[1]
        .error
        .as_ref()
        .expect("the failure is kept");
    assert_eq!(
        (stored_error.reason.as_str(), stored_error.retryable),
        ("RATE_LIMITED", true)
    );
    stack.stop().await;
}

#[tokio::test]
async fn an_unreachable_runner_is_runner_unavailable() {
    let mut stack = Harness::start(Options {
        runner_down: true,
        ..Options::default()
    })
    .await;
    let turn = chat(&mut stack.client, chat_request("", "Hello", "tables_list")).await;
    let error = turn.error.expect("error event");
    assert_eq!(
        (error.reason.as_str(), error.retryable),
        ("RUNNER_UNAVAILABLE", true)
    );
    // The transport's words ("tcp connect error", addresses) stay in the log.
    assert_eq!(error.message, "the agent-runner could not be reached");
    assert!(!turn.complete.success);
    assert!(turn.complete.message.contains("cannot be reached"));
    assert_eq!(turn.complete.suggested_values[0].label, "Try again");
    stack.stop().await;
}

#[tokio::test]
async fn a_runner_refusal_keeps_its_reason_and_is_not_retryable() {
    // A page that lets requests choose `scripted/x`.
    let registry = chat_gateway::registry::Registry::from_str(
        "version: 1\npages:\n  tables_list:\n    models_allowed: [scripted/x]\n",
        "allows.yaml",
    )
    .expect("a valid registry");
    let mut stack = Harness::start(Options {
        registry: Some(registry),
        ..Options::default()
    })
    .await;
    stack.runner.push(Reply::Fail(parley_grpc::status::error(
        tonic::Code::FailedPrecondition,
        "STRUCTURED_OUTPUT_UNSUPPORTED",
        "model x cannot do structured output",
    )));
    let mut request = chat_request("", "Extract", "tables_list");
    request.model = "scripted/x".into();
    let turn = chat(&mut stack.client, request).await;
    let error = turn.error.expect("error event");
    assert_eq!(
        (error.reason.as_str(), error.retryable),
        ("STRUCTURED_OUTPUT_UNSUPPORTED", false)
    );
    assert!(turn.complete.suggested_values.is_empty());
    let model = stack.runner.seen()[0]
        .request
        .model
        .clone()
        .expect("model override passed on");
    assert_eq!(
        (model.provider.as_str(), model.model.as_str()),
        ("scripted", "x")
    );
    stack.stop().await;
}

#[tokio::test]
async fn a_failed_summary_leaves_the_turn_successful_and_the_next_one_whole() {
    let mut stack = Harness::start(Options {
        tweak: |config| {
            config.turns.history_strategy = chat_gateway::config::HistoryStrategy::Summarize;
        },
        ..Options::default()
    })
    .await;
    let client = &mut stack.client;
    stack.runner.push(text_reply(&["One."]));
    let first = chat(client, chat_request("", "First", "tables_list")).await;
    let conversation = first.conversation_id();
    // The model's window left the first turn out.
    let run_event::Event::Finished(mut done) = finished("Two.") else {
        unreachable!("finished is a Finished event");
    };
    done.history_turns_left_out = 1;
    stack.runner.push(Reply::Steps(vec![
        Step::Send(run_event::Event::TextDelta("Two.".into())),
        Step::Send(run_event::Event::Finished(done)),
    ]));
    // The summary call fails.
    stack
        .runner
        .push(Reply::Fail(tonic::Status::unavailable("the model is down")));
    let second = chat(client, chat_request(&conversation, "Second", "tables_list")).await;
    assert!(second.complete.success, "{:?}", second.error);
    // The summary call came, with the left-out turn in it.
    let summary = tokio::time::timeout(std::time::Duration::from_secs(10), async {
        loop {
            if let Some(seen) = stack.runner.seen().into_iter().find(|seen| {
                seen.request
                    .system_prompt
                    .starts_with("You keep the memory")
            }) {
                return seen;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("a summary call");
    let asked = &summary.request.messages[0].text;
    assert!(
        asked.contains("User: First") && asked.contains("Assistant: One."),
        "{asked}"
    );
    assert!(!asked.contains("Second"), "{asked}");
    // Nothing was stored: the next turn gets the whole history, no summary.
    stack.runner.push(text_reply(&["Three."]));
    let third = chat(client, chat_request(&conversation, "Third", "tables_list")).await;
    assert!(third.complete.success);
    let last = stack.runner.seen().last().cloned().expect("a request");
    assert_eq!(last.request.messages.len(), 5);
    assert!(
        !last
            .request
            .system_prompt
            .contains("Earlier in this conversation")
    );
    stack.stop().await;
}

#[tokio::test]
async fn a_new_conversation_is_titled_once_by_the_title_model() {
    let mut stack = Harness::start(Options {
        tweak: |config| {
            config.turns.title_model = "scripted/titler".into();
        },
        ..Options::default()
    })
    .await;
    let client = &mut stack.client;
    stack
        .runner
        .push(text_reply(&["Here is a table for your applications."]));
    stack
        .runner
        .push(text_reply(&["\"Job application tracker.\""]));
    let first = chat(
        client,
        chat_request(
            "",
            "Help me create a job tracker for my applications",
            "tables_list",
        ),
    )
    .await;
    let conversation = first.conversation_id();
    let title = tokio::time::timeout(std::time::Duration::from_secs(10), async {
        loop {
            let got = client
                .get_conversation(gw::GetConversationRequest {
                    conversation_id: conversation.clone(),
                    ..Default::default()
                })
                .await
                .expect("get")
                .into_inner();
            let title = got.conversation.expect("conversation").title;
            if title != "Help me create a job tracker for my applications" {
                return title;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("titled");
    assert_eq!(title, "Job application tracker");
    let seen = stack.runner.seen();
    let call = &seen[1].request;
    assert!(
        call.system_prompt.starts_with("Write a title"),
        "{}",
        call.system_prompt
    );
    assert_eq!(
        call.model
            .as_ref()
            .map(|m| (m.provider.as_str(), m.model.as_str())),
        Some(("scripted", "titler"))
    );
    assert!(
        call.messages[0]
            .text
            .contains("Here is a table for your applications.")
    );
    assert!(call.tools.is_empty());
    // The next turn asks for no title.
    stack.runner.push(text_reply(&["Sure."]));
    chat(client, chat_request(&conversation, "Thanks", "tables_list")).await;
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    assert_eq!(stack.runner.seen().len(), 3);
    stack.stop().await;
}
