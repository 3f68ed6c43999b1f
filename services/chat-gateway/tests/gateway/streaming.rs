//! What reaches the client while the model writes: a payload
//! card growing (`payload_partial`) and taken down when it fails at the
//! end, the suggestions as soon as their list closed, a structured answer
//! growing (`structured_partial`), and mid-answer failover (`step_reset`).

use agent_runner::{app::RunnerApp, config::ProviderConfig};
use parley_proto::{
    gateway::v1::{self as gw, chat_event::Event},
    json,
    parser::v1::DiagnosticKind,
    runner::v1::{self as runner, run_event},
};
use serde_json::{Value, json};

use crate::harness::{
    Harness, Options, ParserMode, chat, chat_request, drain,
    fake_runner::{Reply, Step, finished},
    incoming,
};

const PROPOSAL: &str = r#"{"mode": "create", "reasoning": "Track applications", "table_name": "Job Applications", "table_description": "Tracks job applications", "operations": [{"action": "add", "column": {"name": "Company", "type": "text", "required": true}}, {"action": "add", "column": {"name": "Status", "type": "select", "options": ["Applied", "Interview"]}}], "sample_rows": [{"Company": "Acme", "Status": "Applied"}]}"#;

/// `create` without the table's name, description and rows: the schema
/// refuses it once it is whole.
const INVALID_PROPOSAL: &str = r#"{"mode": "create", "reasoning": "Track applications", "operations": [{"action": "add", "column": {"name": "Company", "type": "text"}}]}"#;

fn answer(proposal: &str) -> String {
    format!(
        "Here is a table for your applications.\n\nSCHEMA_PROPOSAL: {proposal}\n\nSUGGESTED_VALUES: [{{\"label\": \"Add rows\", \"value\": \"Add some sample rows\"}}]"
    )
}

/// `text` streamed in deltas of `size` characters. After each one the model
/// "thinks" (an empty reasoning delta): the gateway hands out everything
/// written before a reasoning event first, so each delta's effect reaches
/// the client before the next delta, without relying on timing.
fn flushed_deltas(text: &str, size: usize) -> Reply {
    let chars: Vec<char> = text.chars().collect();
    let mut steps = vec![Step::Send(run_event::Event::Status(runner::Status {
        phase: runner::Phase::ModelCall as i32,
        message: "Thinking...".into(),
        iteration: 1,
        model: None,
    }))];
    for chunk in chars.chunks(size) {
        steps.push(Step::Send(run_event::Event::TextDelta(
            chunk.iter().collect(),
        )));
        steps.push(Step::Send(run_event::Event::ReasoningDelta(String::new())));
    }
    steps.push(Step::Send(finished(text)));
    Reply::Steps(steps)
}

/// The payload partials of a turn, in order.
fn partials(turn: &crate::harness::Turn) -> Vec<(u64, gw::PayloadPartial)> {
    turn.events
        .iter()
        .filter_map(|event| match &event.event {
            Some(Event::PayloadPartial(partial)) => Some((event.seq, (**partial).clone())),
            _ => None,
        })
        .collect()
}

fn data(partial: &gw::PayloadPartial) -> Option<Value> {
    partial.data.as_ref().map(json::from_struct_value)
}

/// Whether `later` extends `earlier`: members and items only added, a
/// string only growing at its end, anything else unchanged.
fn extends(earlier: &Value, later: &Value) -> bool {
    match (earlier, later) {
        (Value::Object(a), Value::Object(b)) => a
            .iter()
            .all(|(key, value)| b.get(key).is_some_and(|next| extends(value, next))),
        (Value::Array(a), Value::Array(b)) => {
            a.len() <= b.len() && a.iter().zip(b).all(|(x, y)| extends(x, y))
        }
        (Value::String(a), Value::String(b)) => b.starts_with(a.as_str()),
        (a, b) => a == b,
    }
}

/// Checks the rules of one payload's partials: revisions 1, 2, 3...; each
/// value extends the one before; a value at a complete path never changes.
fn check_growing(shown: &[(u64, gw::PayloadPartial)]) {
    for (n, (_, partial)) in shown.iter().enumerate() {
        assert_eq!(partial.revision as usize, n + 1, "{shown:#?}");
        assert_eq!(partial.r#type, "schema_proposal");
    }
    let values: Vec<(Value, Vec<String>)> = shown
        .iter()
        .filter_map(|(_, p)| Some((data(p)?, p.complete_paths.clone())))
        .collect();
    for pair in values.windows(2) {
        let ((before, paths), (after, _)) = (&pair[0], &pair[1]);
        assert!(extends(before, after), "{before} -> {after}");
        for path in paths {
            assert_eq!(
                before.pointer(path),
                after.pointer(path),
                "{path} was complete in {before} and changed in {after}"
            );
        }
    }
}

#[tokio::test]
async fn a_proposal_streamed_in_small_chunks_grows_then_arrives_whole() {
    for parser in [
        ParserMode::Up,
        ParserMode::Down,
        // The library takes over mid-payload: what it repeats is skipped.
        ParserMode::BreaksAfter(25),
    ] {
        let mut stack = Harness::start(Options {
            parser,
            ..Options::default()
        })
        .await;
        stack.runner.push(flushed_deltas(&answer(PROPOSAL), 9));
        let turn = chat(
            &mut stack.client,
            chat_request("", "Track my job applications", "tables_list"),
        )
        .await;
        assert!(turn.complete.success, "{parser:?}: {:?}", turn.complete);
        let shown = partials(&turn);
        assert!(
            shown.len() >= 10,
            "{parser:?}: the card grows: {} partials",
            shown.len()
        );
        assert!(
            shown.iter().all(|(_, p)| p.offset == shown[0].1.offset),
            "one payload"
        );
        check_growing(&shown);
        let (last_seq, last) = shown.last().expect("partials");
        assert_eq!(last.complete_paths, [""], "{parser:?}: shown whole last");
        let payload = turn.complete.custom_payload.as_ref().expect("a payload");
        assert_eq!(
            data(last),
            payload.data.as_ref().map(json::from_struct_value),
            "{parser:?}: the last partial is the validated payload"
        );
        assert_eq!(
            data(last),
            serde_json::from_str::<Value>(PROPOSAL).ok(),
            "{parser:?}"
        );
        // Before the answer ended: before the last text and the suggestions.
        let seq_of = |pick: fn(&Event) -> bool| {
            turn.events
                .iter()
                .filter(|e| e.event.as_ref().is_some_and(pick))
                .map(|e| e.seq)
                .collect::<Vec<_>>()
        };
        let values = seq_of(|e| matches!(e, Event::SuggestedValues(_)));
        assert_eq!(values.len(), 1, "{parser:?}: suggestions once");
        assert!(*last_seq < values[0], "{parser:?}");
        let complete_seq = seq_of(|e| matches!(e, Event::Complete(_)))[0];
        assert!(values[0] < complete_seq);
        let Some(Event::SuggestedValues(list)) = turn
            .events
            .iter()
            .find(|e| e.seq == values[0])
            .and_then(|e| e.event.clone())
        else {
            unreachable!()
        };
        assert_eq!(list.values, turn.complete.suggested_values, "{parser:?}");
        assert_eq!(turn.text, turn.complete.message, "{parser:?}");
    }
}

#[tokio::test]
async fn a_proposal_invalid_at_the_end_is_taken_down() {
    for parser in [ParserMode::Up, ParserMode::Down] {
        let mut stack = Harness::start(Options {
            parser,
            ..Options::default()
        })
        .await;
        stack
            .runner
            .push(flushed_deltas(&answer(INVALID_PROPOSAL), 11));
        let turn = chat(
            &mut stack.client,
            chat_request("", "Track my job applications", "tables_list"),
        )
        .await;
        assert!(turn.complete.success);
        assert_eq!(turn.complete.custom_payload, None);
        let shown = partials(&turn);
        assert!(shown.len() >= 3, "{parser:?}: it was shown growing");
        check_growing(&shown);
        let (_, last) = shown.last().expect("partials");
        assert_eq!(last.data, None, "{parser:?}: taken down last");
        assert!(last.complete_paths.is_empty());
        let diagnostic = last.diagnostic.as_ref().expect("why");
        assert_eq!(
            diagnostic.kind,
            DiagnosticKind::SchemaViolation as i32,
            "{parser:?}"
        );
        assert_eq!(diagnostic.offset, last.offset);
        assert!(
            turn.complete
                .diagnostics
                .iter()
                .any(|d| d.kind == DiagnosticKind::SchemaViolation as i32),
            "complete lists it too"
        );
    }
}

#[tokio::test]
async fn a_structured_answer_grows_besides_its_raw_text() {
    let mut stack = Harness::start(Options::default()).await;
    let raw = r#"{"name": "Ada", "skills": ["math", "poetry"]}"#;
    let mut steps = Vec::new();
    for piece in [
        r#"{"name": "A"#,
        r#"da", "skills": ["ma"#,
        r#"th", "poetry"]}"#,
    ] {
        steps.push(Step::Send(run_event::Event::StructuredDelta(piece.into())));
        // A flush: structured deltas that queued up travel as one.
        steps.push(Step::Send(run_event::Event::ReasoningDelta(String::new())));
    }
    let run_event::Event::Finished(mut done) = finished("") else {
        unreachable!()
    };
    done.structured = Some(parley_proto::parser::v1::StructuredResult {
        value: Some(json::to_value(
            &serde_json::from_str::<Value>(raw).expect("json"),
        )),
        raw: raw.into(),
        valid: true,
        error: String::new(),
    });
    steps.push(Step::Send(run_event::Event::Finished(done)));
    stack.runner.push(Reply::Steps(steps));
    let mut request = chat_request("", "Who?", "tables_list");
    request.response_schema = Some(json::to_struct_wrapped(&json!({"type": "object"})));
    let turn = chat(&mut stack.client, request).await;
    let shown: Vec<(u32, Value, Vec<String>)> = turn
        .events
        .iter()
        .filter_map(|e| match &e.event {
            Some(Event::StructuredPartial(p)) => Some((
                p.revision,
                json::from_value(p.data.as_ref()?),
                p.complete_paths.clone(),
            )),
            _ => None,
        })
        .collect();
    assert_eq!(
        shown,
        [
            (1, json!({"name": "A"}), vec![]),
            (
                2,
                json!({"name": "Ada", "skills": ["ma"]}),
                vec!["/name".to_owned()]
            ),
            (
                3,
                json!({"name": "Ada", "skills": ["math", "poetry"]}),
                vec![String::new()]
            ),
        ]
    );
    assert!(turn.complete.structured.as_ref().is_some_and(|s| s.valid));
}

/// A fake runner's model call: its `ModelCall` status, then `text`.
fn call(iteration: u32, text: &[&str]) -> Vec<Step> {
    let mut steps = vec![Step::Send(run_event::Event::Status(runner::Status {
        phase: runner::Phase::ModelCall as i32,
        message: "Thinking...".into(),
        iteration,
        model: None,
    }))];
    for piece in text {
        steps.push(Step::Send(run_event::Event::TextDelta((*piece).into())));
        steps.push(Step::Send(run_event::Event::ReasoningDelta(String::new())));
    }
    steps
}

#[tokio::test]
async fn a_step_reset_discards_the_steps_text_and_cards_from_what_is_stored() {
    let mut stack = Harness::start(Options::default()).await;
    let mut steps = call(
        1,
        &[
            "Here is a table.\n\nSCHEMA_PROPOSAL: {\"mode\": \"cr",
            "eate\", \"operations\": [",
        ],
    );
    steps.push(Step::Send(run_event::Event::Usage(runner::Usage {
        input_tokens: 100,
        output_tokens: 5,
        ..Default::default()
    })));
    steps.push(Step::Send(run_event::Event::StepReset(runner::StepReset {
        iteration: 1,
        reason: "PROVIDER_STREAM_ERROR".into(),
        message: "The model call failed midway; trying again".into(),
    })));
    let retry = "I can do that. What columns do you need?";
    steps.extend(call(1, &[retry]).into_iter().skip(1));
    steps.push(Step::Send(run_event::Event::Usage(runner::Usage {
        input_tokens: 100,
        output_tokens: 10,
        ..Default::default()
    })));
    steps.push(Step::Send(finished(retry)));
    stack.runner.push(Reply::Steps(steps));
    let mut request = chat_request("", "Track my job applications", "tables_list");
    request.mid_answer_failover = true;
    let turn = chat(&mut stack.client, request).await;
    assert!(
        stack.runner.seen()[0].request.mid_answer_failover,
        "the opt-in reaches the runner"
    );
    let reset = turn
        .events
        .iter()
        .position(|e| matches!(e.event, Some(Event::StepReset(_))))
        .expect("a step_reset");
    let Some(Event::StepReset(step)) = &turn.events[reset].event else {
        unreachable!()
    };
    assert_eq!(
        (step.step, step.reason.as_str()),
        (1, "PROVIDER_STREAM_ERROR")
    );
    assert!(
        turn.events[..reset]
            .iter()
            .any(|e| matches!(e.event, Some(Event::PayloadPartial(_)))),
        "the card had started"
    );
    assert!(
        !turn.events[reset..]
            .iter()
            .any(|e| matches!(e.event, Some(Event::PayloadPartial(_)))),
        "nothing to take down after the reset: the client discarded it"
    );
    let after: String = turn.events[reset..]
        .iter()
        .filter_map(|e| match &e.event {
            Some(Event::TextDelta(text)) => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(after, retry);
    assert!(turn.complete.success);
    assert_eq!(turn.complete.message, retry);
    assert_eq!(turn.complete.custom_payload, None);
    let usage = turn.complete.usage.as_ref().expect("usage");
    assert_eq!(usage.model_calls, 2, "both calls count");
    let stored = stack
        .client
        .get_conversation(gw::GetConversationRequest {
            conversation_id: turn.conversation_id(),
            ..Default::default()
        })
        .await
        .expect("get")
        .into_inner();
    assert_eq!(stored.messages[1].text, retry);
}

/// The real runner playing `script` with the scripted provider, on port 0.
async fn scripted_runner(script: &str) -> (String, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("script.toml");
    std::fs::write(&path, script).expect("script written");
    let mut config = crate::real_stack::runner_config();
    config
        .providers
        .insert("scripted".into(), ProviderConfig::scripted(Some(path)));
    // No wait between attempts: the test is about what is sent.
    config.retry.base_delay = std::time::Duration::ZERO;
    let app = RunnerApp::build(&config, |_| None).expect("runner");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        let _ = tonic::transport::Server::builder()
            .add_routes(app.routes())
            .serve_with_incoming(incoming(listener))
            .await;
    });
    (format!("http://{addr}"), dir)
}

/// A model that fails once after writing half a proposal.
const FLAKY: &str = r#"
chunk_chars = 8

[default]
steps = [
    { text = "Here is a table.\n\nSCHEMA_PROPOSAL: {\"mode\": \"update\", \"operations\": [" },
    { stream_error = { kind = "overloaded_error", message = "Overloaded", retryable = true, times = 1 } },
    { text = "{\"action\": \"remove\", \"column_id\": \"col_notes\"}]}\n\nDone." },
]
"#;

#[tokio::test]
async fn a_mid_answer_stream_error_with_failover_resets_the_step_and_completes() {
    let (runner_url, _dir) = scripted_runner(FLAKY).await;
    let mut stack = Harness::start(Options {
        runner_url: Some(runner_url),
        ..Options::default()
    })
    .await;
    let mut request = chat_request("", "Drop the notes column", "tables_list");
    request.mid_answer_failover = true;
    let turn = chat(&mut stack.client, request).await;
    assert!(turn.complete.success, "{:?}", turn.complete);
    let resets: Vec<&gw::StepReset> = turn
        .events
        .iter()
        .filter_map(|e| match &e.event {
            Some(Event::StepReset(reset)) => Some(reset),
            _ => None,
        })
        .collect();
    assert_eq!(resets.len(), 1, "{:#?}", turn.events);
    assert_eq!(resets[0].reason, "PROVIDER_STREAM_ERROR");
    assert_eq!(turn.complete.message, "Here is a table.\n\nDone.");
    let payload = turn.complete.custom_payload.as_ref().expect("the proposal");
    assert_eq!(payload.r#type, "schema_proposal");
    // What the client keeps (the text after the reset) is the answer.
    let reset_at = turn
        .events
        .iter()
        .position(|e| matches!(e.event, Some(Event::StepReset(_))))
        .expect("reset");
    let kept: String = turn.events[reset_at..]
        .iter()
        .filter_map(|e| match &e.event {
            Some(Event::TextDelta(text)) => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(kept, turn.complete.message);
    assert_eq!(turn.complete.usage.as_ref().map(|u| u.model_calls), Some(2));
}

#[tokio::test]
async fn a_mid_answer_stream_error_without_failover_is_an_error_as_before() {
    let (runner_url, _dir) = scripted_runner(FLAKY).await;
    let mut stack = Harness::start(Options {
        runner_url: Some(runner_url),
        ..Options::default()
    })
    .await;
    let turn = chat(
        &mut stack.client,
        chat_request("", "Drop the notes column", "tables_list"),
    )
    .await;
    assert!(!turn.complete.success);
    assert!(
        !turn
            .events
            .iter()
            .any(|e| matches!(e.event, Some(Event::StepReset(_))))
    );
    let error = turn.error.as_ref().expect("an error event");
    assert_eq!(error.reason, "PROVIDER_STREAM_ERROR");
    assert!(turn.complete.message.starts_with("Here is a table."));
}

/// `table_edit` sets `mid_answer_failover: true` in the example registry:
/// its turns fail over without the request asking, and `DescribePage` says
/// so; `tables_list` does not (the test above: an error, as before).
#[tokio::test]
async fn a_page_that_allows_failover_resets_the_step_without_the_request_asking() {
    let (runner_url, _dir) = scripted_runner(FLAKY).await;
    let mut stack = Harness::start(Options {
        runner_url: Some(runner_url),
        ..Options::default()
    })
    .await;
    let describe = |page: &str| gw::DescribePageRequest {
        page: Some(gw::PageContext {
            page: page.into(),
            ..Default::default()
        }),
        include_system_prompt: false,
    };
    for (page, on) in [("table_edit", true), ("tables_list", false)] {
        let described = stack
            .client
            .describe_page(describe(page))
            .await
            .expect("describe")
            .into_inner();
        assert_eq!(described.mid_answer_failover, on, "{page}");
    }
    let request = chat_request("", "Drop the notes column", "table_edit");
    assert!(!request.mid_answer_failover, "the request does not ask");
    let turn = chat(&mut stack.client, request).await;
    assert!(turn.complete.success, "{:?}", turn.complete);
    let resets = turn
        .events
        .iter()
        .filter(|e| matches!(e.event, Some(Event::StepReset(_))))
        .count();
    assert_eq!(resets, 1, "{:#?}", turn.events);
    assert_eq!(turn.complete.message, "Here is a table.\n\nDone.");
    assert_eq!(turn.complete.usage.as_ref().map(|u| u.model_calls), Some(2));
}

/// The page's setting reaches the runner with the fake one too, and the
/// request's flag still works on a page without it.
#[tokio::test]
async fn the_request_or_the_page_turns_failover_on() {
    let mut stack = Harness::start(Options::default()).await;
    for (page, asked, expected) in [
        ("table_edit", false, true),
        ("tables_list", true, true),
        ("tables_list", false, false),
    ] {
        stack
            .runner
            .push(Reply::Steps(vec![Step::Send(finished("Ok."))]));
        let mut request = chat_request("", "Hello", page);
        request.mid_answer_failover = asked;
        let turn = chat(&mut stack.client, request).await;
        assert!(turn.complete.success);
        let seen = stack.runner.seen();
        let last = seen.last().expect("a run");
        assert_eq!(
            last.request.mid_answer_failover, expected,
            "{page}, request asked: {asked}"
        );
    }
}

/// A proposal whose JSON step 1 began and the failed step 2 went on
/// writing: right after the `step_reset` the card is taken down (no data,
/// no diagnostic), shown again from revision 1 as step 1 left it, and
/// grows to what the successful call wrote; nothing of the failed call
/// reaches `complete`.
#[tokio::test]
async fn a_card_the_failed_step_went_on_writing_is_taken_down_and_restarted() {
    for parser in [ParserMode::Up, ParserMode::Down] {
        let mut stack = Harness::start(Options {
            parser,
            ..Options::default()
        })
        .await;
        let cut = PROPOSAL.find("ack applications").expect("cut");
        let (before, after) = PROPOSAL.split_at(cut);
        let first = format!("Here is a table.\n\nSCHEMA_PROPOSAL: {before}");
        let mut steps = call(1, &[&first]);
        steps.extend(call(2, &["ack apps\", \"table_name\": \"Wrong"]));
        steps.push(Step::Send(run_event::Event::StepReset(runner::StepReset {
            iteration: 2,
            reason: "PROVIDER_STREAM_ERROR".into(),
            message: "The model call failed midway; trying again".into(),
        })));
        let rest = format!("{after}\n\nDone.");
        steps.extend(call(2, &[&rest]).into_iter().skip(1));
        steps.push(Step::Send(finished(&format!("{first}{rest}"))));
        stack.runner.push(Reply::Steps(steps));
        let mut request = chat_request("", "Track my job applications", "tables_list");
        request.mid_answer_failover = true;
        let turn = chat(&mut stack.client, request).await;
        assert!(turn.complete.success, "{:?}", turn.complete);
        let reset = turn
            .events
            .iter()
            .position(|e| matches!(e.event, Some(Event::StepReset(_))))
            .expect("a step_reset");
        let shown = partials(&turn);
        let reset_seq = turn.events[reset].seq;
        let (old, new): (Vec<_>, Vec<_>) = shown.into_iter().partition(|(seq, _)| *seq < reset_seq);
        assert_eq!(
            old.last()
                .and_then(|(_, p)| data(p))
                .and_then(|d| d.get("table_name").cloned()),
            Some(json!("Wrong")),
            "the failed step grew the card: {old:#?}"
        );
        // Right after the reset: the take-down, then the card from 1.
        let (down_seq, down) = &new[0];
        assert_eq!(*down_seq, reset_seq + 1, "{:#?}", turn.events);
        assert!(down.data.is_none() && down.diagnostic.is_none(), "{down:?}");
        assert_eq!(down.revision, old.last().map_or(0, |(_, p)| p.revision) + 1);
        let again = &new[1..];
        check_growing(again);
        assert_eq!(
            again.first().and_then(|(_, p)| data(p)),
            Some(json!({"mode": "create", "reasoning": "Tr"})),
            "shown again as step 1 left it"
        );
        let last = again.last().expect("whole").1.clone();
        assert_eq!(last.complete_paths, [String::new()]);
        let payload = turn.complete.custom_payload.as_ref().expect("the proposal");
        assert_eq!(
            data(&last),
            payload.data.as_ref().map(json::from_struct_value)
        );
        assert_eq!(
            payload.data.as_ref().map(json::from_struct_value),
            Some(serde_json::from_str::<Value>(PROPOSAL).expect("json"))
        );
        assert_eq!(turn.complete.message, "Here is a table.\n\nDone.");
    }
}

/// A structured answer streamed in 300 tiny deltas at once: the deltas
/// that queued up travel as one flush, and each flush carries at most one
/// `structured_partial`, right after its `structured_delta` (no event
/// storm); the raw text adds up and the last value is the answer.
#[tokio::test]
async fn structured_partials_are_one_per_flush() {
    let mut stack = Harness::start(Options::default()).await;
    let items: Vec<String> = (0..60).map(|n| format!("item {n}")).collect();
    let value = json!({"title": "Many", "items": items});
    let raw = value.to_string();
    let chars: Vec<char> = raw.chars().collect();
    let size = chars.len().div_ceil(300);
    let mut steps: Vec<Step> = chars
        .chunks(size)
        .map(|piece| Step::Send(run_event::Event::StructuredDelta(piece.iter().collect())))
        .collect();
    let sent = steps.len();
    let run_event::Event::Finished(mut done) = finished("") else {
        unreachable!()
    };
    done.structured = Some(parley_proto::parser::v1::StructuredResult {
        value: Some(json::to_value(&value)),
        raw: raw.clone(),
        valid: true,
        error: String::new(),
    });
    steps.push(Step::Send(run_event::Event::Finished(done)));
    stack.runner.push(Reply::Steps(steps));
    let mut request = chat_request("", "List them", "tables_list");
    request.response_schema = Some(json::to_struct_wrapped(&json!({"type": "object"})));
    let turn = chat(&mut stack.client, request).await;
    let events: Vec<&Event> = turn
        .events
        .iter()
        .filter_map(|e| e.event.as_ref())
        .collect();
    let mut flushes = 0;
    let mut text = String::new();
    let mut last = None;
    for (n, event) in events.iter().enumerate() {
        match event {
            Event::StructuredDelta(delta) => {
                flushes += 1;
                text.push_str(delta);
            }
            Event::StructuredPartial(partial) => {
                assert!(
                    matches!(events[n - 1], Event::StructuredDelta(_)),
                    "a partial follows its flush's delta: {events:#?}"
                );
                let revision = last.as_ref().map_or(0, |(r, _)| *r);
                assert_eq!(partial.revision, revision + 1);
                last = Some((
                    partial.revision,
                    partial.data.as_ref().map(json::from_value),
                ));
            }
            _ => {}
        }
    }
    assert_eq!(text, raw);
    assert!(flushes <= sent, "{flushes} flushes for {sent} deltas");
    let (revisions, shown) = last.expect("partials");
    assert!(revisions as usize <= flushes);
    assert_eq!(shown, Some(value));
    assert!(turn.complete.structured.as_ref().is_some_and(|s| s.valid));
}

/// The labels of each `suggested_values` event, in order.
fn value_lists(events: &[gw::ChatEvent]) -> Vec<Vec<String>> {
    events
        .iter()
        .filter_map(|e| match &e.event {
            Some(Event::SuggestedValues(list)) => {
                Some(list.values.iter().map(|v| v.label.clone()).collect())
            }
            _ => None,
        })
        .collect()
}

/// A model that writes its suggestions slowly and stops (a gate) before
/// the last one: the first two reach the client, one event as each element
/// closes, while the third is not written yet. Each event is the list so
/// far, never a repeat; the last one is what `complete` carries.
#[tokio::test]
async fn each_suggestion_reaches_the_client_before_the_last_one_is_written() {
    for parser in [ParserMode::Up, ParserMode::Down] {
        let mut stack = Harness::start(Options {
            parser,
            ..Options::default()
        })
        .await;
        let gate = std::sync::Arc::new(tokio::sync::Notify::new());
        let pieces = [
            "Here are some ideas.\n\nSUGGESTED_VALUES: [{\"label\": \"Add rows\", \"value\": \"Add some rows\"}",
            ", {\"label\": \"Rename\", \"value\": \"Rename the table\"}",
            ", {\"label\": \"Share\", \"value\": \"Share it\"}]",
        ];
        let mut steps = call(1, &pieces[..2]);
        steps.push(Step::Gate(gate.clone()));
        steps.extend(call(1, &pieces[2..]).into_iter().skip(1));
        steps.push(Step::Send(finished(&pieces.concat())));
        stack.runner.push(Reply::Steps(steps));
        let mut stream = stack
            .client
            .chat(chat_request("", "Ideas?", "tables_list"))
            .await
            .expect("chat accepted")
            .into_inner();
        let mut events = Vec::new();
        while value_lists(&events).len() < 2 {
            let event = tokio::time::timeout(std::time::Duration::from_secs(10), stream.message())
                .await
                .expect("the first suggestions come while the model waits")
                .expect("stream ok")
                .expect("an event before the end");
            assert!(
                !matches!(event.event, Some(Event::Complete(_))),
                "{events:#?}"
            );
            events.push(event);
        }
        assert_eq!(
            value_lists(&events),
            [vec!["Add rows"], vec!["Add rows", "Rename"]],
            "{parser:?}"
        );
        // The model writes the last one.
        gate.notify_one();
        events.extend(drain(stream).await);
        let lists = value_lists(&events);
        assert_eq!(
            lists,
            [
                vec!["Add rows"],
                vec!["Add rows", "Rename"],
                vec!["Add rows", "Rename", "Share"],
            ]
        );
        let complete = events
            .iter()
            .find_map(|e| match &e.event {
                Some(Event::Complete(complete)) => Some(complete.clone()),
                _ => None,
            })
            .expect("complete");
        let labels: Vec<String> = complete
            .suggested_values
            .iter()
            .map(|v| v.label.clone())
            .collect();
        assert_eq!(
            lists.last(),
            Some(&labels),
            "the last event is the final list"
        );
        assert_eq!(complete.message, "Here are some ideas.");
    }
}

/// A list that breaks at its last item (it has no `value`): the items shown
/// are taken down by an empty list, and `complete` has none.
#[tokio::test]
async fn suggestions_that_turn_out_invalid_are_taken_down() {
    let mut stack = Harness::start(Options::default()).await;
    let pieces = [
        "Ideas.\n\nSUGGESTED_VALUES: [{\"label\": \"Add rows\", \"value\": \"Add some rows\"}",
        ", {\"label\": \"Broken\"}]",
    ];
    let mut steps = call(1, &pieces);
    steps.push(Step::Send(finished(&pieces.concat())));
    stack.runner.push(Reply::Steps(steps));
    let turn = chat(&mut stack.client, chat_request("", "Ideas?", "tables_list")).await;
    let empty: Vec<String> = Vec::new();
    assert_eq!(
        value_lists(&turn.events),
        [vec!["Add rows".to_owned()], empty]
    );
    assert!(turn.complete.suggested_values.is_empty());
    assert!(
        turn.complete
            .diagnostics
            .iter()
            .any(|d| d.kind == DiagnosticKind::SchemaViolation as i32)
    );
}
