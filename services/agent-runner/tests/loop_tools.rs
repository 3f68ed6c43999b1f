//! The loop end to end with the scripted provider and a test ToolService:
//! progress, success, failure, timeout, invalid input, unknown tool,
//! overlapping parallel calls, max iterations, structured output and tool
//! calls written into the text.

mod support;

use std::time::Duration;

use agent_runner::{
    events::{CallSource, EventKind, StopReason},
    provider::Message,
};
use serde_json::json;
use support::turns::*;

fn query_schema() -> serde_json::Value {
    json!({"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]})
}

#[tokio::test]
async fn a_tool_round_reports_every_outcome_and_feeds_results_back() {
    let (address, record) = parley_testkit::tools::start(2).await;
    let provider = scripted(
        r#"
        [[turns]]
        match = { contains = "find" }
        steps = [
          { text = "Looking." },
          { tool_call = { name = "search", input = { query = "egfr" }, id = "c1" } },
          { tool_call = { name = "fail", input = { query = "x" }, id = "c2" } },
          { tool_call = { name = "search", input = { query = 7 }, id = "c3" } },
          { tool_call = { name = "rm_rf", input = {}, id = "c4" } },
          { tool_call = { name = "calc", input = { expression = "6*7" }, id = "c5" } },
          { text = "Here is what I found." },
        ]
        "#,
    );
    let runner = runner(provider.clone());
    let mut turn = turn("find egfr papers");
    turn.tools = vec![
        remote("search", &address, query_schema(), None),
        remote("fail", &address, query_schema(), None),
        builtin("calc", "calculator"),
    ];
    let events = run(&runner, turn).await;

    let starts = pick(&events, |k| match k {
        EventKind::ToolStart(s) => Some((s.call_id.clone(), s.source)),
        _ => None,
    });
    assert_eq!(starts.len(), 5);
    assert!(
        starts
            .iter()
            .all(|(_, source)| *source == CallSource::Native)
    );
    let progress = pick(&events, |k| match k {
        EventKind::ToolProgress(p) => Some((p.call_id.clone(), p.stage.clone())),
        _ => None,
    });
    assert!(progress.contains(&("c1".into(), "searching".into())));
    assert!(progress.contains(&("c1".into(), "ranking".into())));
    assert!(progress.contains(&("c5".into(), "evaluating".into())));
    let completes = pick(&events, |k| match k {
        EventKind::ToolComplete(c) => Some((
            c.call_id.clone(),
            (c.success, c.error_reason.clone(), c.result_text.clone()),
        )),
        _ => None,
    });
    let outcome = |id: &str| {
        completes
            .iter()
            .find(|(c, _)| c == id)
            .map(|(_, o)| o.clone())
            .expect("completed")
    };
    assert_eq!(outcome("c1"), (true, String::new(), "3 results".into()));
    assert_eq!(
        (outcome("c2").0, outcome("c2").1.as_str()),
        (false, "TOOL_ERROR")
    );
    assert!(outcome("c2").2.contains("the index is offline"));
    assert_eq!(
        (outcome("c3").0, outcome("c3").1.as_str()),
        (false, "INVALID_INPUT")
    );
    assert_eq!(
        (outcome("c4").0, outcome("c4").1.as_str()),
        (false, "UNKNOWN_TOOL")
    );
    assert_eq!(outcome("c5"), (true, String::new(), "6*7 = 42".into()));
    // A tool's progress never follows its completion.
    let complete_at = events
        .iter()
        .position(|e| matches!(&e.kind, EventKind::ToolComplete(c) if c.call_id == "c1"));
    let last_progress_at = events
        .iter()
        .rposition(|e| matches!(&e.kind, EventKind::ToolProgress(p) if p.call_id == "c1"));
    assert!(last_progress_at < complete_at);
    // The payload passes through.
    assert!(events.iter().any(|e| matches!(&e.kind, EventKind::ToolComplete(c) if c.payload.as_ref().is_some_and(|p| p.r#type == "search_results"))));

    // Invalid and unknown calls never reached the server.
    assert_eq!(record.names(), vec!["search".to_owned(), "fail".to_owned()]);
    let served = record.calls.lock().expect("lock")[0].clone();
    assert_eq!(
        (
            served.user_id.as_str(),
            served.user_issuer.as_str(),
            served.conversation_id.as_str()
        ),
        ("user-1", "static", "conv-1")
    );

    // The second model call saw the assistant's calls and all five results, in order.
    assert_eq!(provider.calls(), 2);
    let second = provider.request(1);
    match &second.messages[1..] {
        [
            Message::Assistant {
                text, tool_calls, ..
            },
            Message::ToolResults(results),
        ] => {
            assert_eq!(text, "Looking.");
            assert_eq!(tool_calls.len(), 5);
            let ids: Vec<&str> = results.iter().map(|r| r.call_id.as_str()).collect();
            assert_eq!(ids, vec!["c1", "c2", "c3", "c4", "c5"]);
            let errors: Vec<bool> = results.iter().map(|r| r.is_error).collect();
            assert_eq!(errors, vec![false, true, true, true, false]);
        }
        other => panic!("unexpected history {other:?}"),
    }
    let done = finished(&events);
    assert_eq!(done.text, "Looking.\n\nHere is what I found.");
    assert_eq!(
        (done.stop_reason, done.iterations),
        (StopReason::EndTurn, 2)
    );
}

#[tokio::test]
async fn a_slow_tool_times_out_and_is_cancelled_on_the_server() {
    let (address, record) = parley_testkit::tools::start(2).await;
    let provider = scripted(
        "[default]\nsteps = [{ tool_call = { name = \"hang\", input = {}, id = \"h1\" } }, { text = \"Gave up waiting.\" }]",
    );
    let runner = runner(provider);
    let mut turn = turn("wait");
    turn.tools = vec![remote(
        "hang",
        &address,
        json!({"type": "object"}),
        Some(Duration::from_millis(300)),
    )];
    let events = run(&runner, turn).await;
    let complete = pick(&events, |k| match k {
        EventKind::ToolComplete(c) => Some(c.clone()),
        _ => None,
    });
    assert_eq!(complete[0].error_reason, "TIMEOUT");
    assert!(!complete[0].success);
    assert_eq!(finished(&events).text, "Gave up waiting.");
    // The server sees the call reset (bounded wait; no timing assertion).
    let seen = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            if !record.cancelled.lock().expect("lock").is_empty() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    assert!(seen.is_ok(), "the tool server never saw the cancellation");
}

#[tokio::test]
async fn parallel_calls_overlap_up_to_the_limit() {
    let (address, _record) = parley_testkit::tools::start(2).await;
    let script = "[default]\nsteps = [{ tool_call = { name = \"meet\", id = \"a\" } }, { tool_call = { name = \"meet\", id = \"b\" } }, { text = \"ok\" }]";
    let results = |events: &[agent_runner::events::Event]| {
        pick(events, |k| match k {
            EventKind::ToolComplete(c) => Some(c.result_text.clone()),
            _ => None,
        })
    };

    let mut parallel = turn("meet");
    parallel.tools = vec![remote("meet", &address, json!({"type": "object"}), None)];
    parallel.limits.max_parallel_tools = 2;
    let events = run(&runner(scripted(script)), parallel.clone()).await;
    assert_eq!(results(&events), vec!["met".to_owned(), "met".to_owned()]);

    // One at a time, the two calls can never meet: the first times out.
    let (address, _record) = parley_testkit::tools::start(2).await;
    let mut serial = parallel;
    serial.tools = vec![remote(
        "meet",
        &address,
        json!({"type": "object"}),
        Some(Duration::from_millis(300)),
    )];
    serial.limits.max_parallel_tools = 1;
    let events = run(&runner(scripted(script)), serial).await;
    let reasons = pick(&events, |k| match k {
        EventKind::ToolComplete(c) => Some(c.error_reason.clone()),
        _ => None,
    });
    assert_eq!(reasons, vec!["TIMEOUT".to_owned(), "TIMEOUT".to_owned()]);
}

#[tokio::test]
async fn max_iterations_finishes_normally_without_running_the_last_calls() {
    let provider = scripted(
        r#"
        [default]
        steps = [
          { text = "one" }, { tool_call = { name = "calc", input = { expression = "1" } } },
          { text = "two" }, { tool_call = { name = "calc", input = { expression = "2" } } },
          { text = "three" }, { tool_call = { name = "calc", input = { expression = "3" } } },
          { text = "done" },
        ]
        "#,
    );
    let runner = runner(provider.clone());
    let mut turn = turn("loop");
    turn.tools = vec![builtin("calc", "calculator")];
    turn.limits.max_iterations = 2;
    let events = run(&runner, turn).await;
    let done = finished(&events);
    assert_eq!(
        (done.stop_reason, done.iterations),
        (StopReason::MaxIterations, 2)
    );
    assert_eq!(done.text, "one\n\ntwo");
    assert_eq!(provider.calls(), 2);
    let ran = pick(&events, |k| {
        matches!(k, EventKind::ToolComplete(_)).then_some(())
    });
    assert_eq!(ran.len(), 1, "the calls of the last iteration do not run");
}

#[tokio::test]
async fn structured_output_streams_as_structured_deltas_and_validates() {
    let schema =
        json!({"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]});
    let provider = scripted(
        r#"
        [[turns]]
        match = { contains = "good" }
        steps = [{ structured = '{"name": "Alice"}' }]
        [[turns]]
        match = { contains = "cut" }
        steps = [{ structured = '{"name": "Al' }]
        [[turns]]
        match = { contains = "wrong" }
        steps = [{ structured = { nom = "Alice" } }]
        "#,
    );
    let runner = runner(provider.clone());
    let run_with = |text: &str| {
        let mut t = turn(text);
        t.output_schema = Some(schema.clone());
        t.output_schema_name = "contact".into();
        t
    };

    let events = run(&runner, run_with("good")).await;
    let deltas: String = pick(&events, |k| match k {
        EventKind::StructuredDelta(d) => Some(d.clone()),
        _ => None,
    })
    .concat();
    assert_eq!(deltas, r#"{"name": "Alice"}"#);
    let done = finished(&events);
    assert_eq!(done.text, "", "structured answers are not text");
    let result = done.structured.as_ref().expect("structured result");
    assert!(result.valid && result.value.is_some());
    let sent = provider.request(0);
    assert_eq!(
        sent.output_schema.as_ref().map(|s| s.name.as_str()),
        Some("contact")
    );

    let cut = run(&runner, run_with("cut")).await;
    let result = finished(&cut)
        .structured
        .clone()
        .expect("structured result");
    assert!(!result.valid && result.value.is_none());
    assert_eq!(result.raw, r#"{"name": "Al"#, "the raw text is kept");

    let wrong = run(&runner, run_with("wrong")).await;
    let result = finished(&wrong)
        .structured
        .clone()
        .expect("structured result");
    assert!(!result.valid && result.value.is_some() && !result.error.is_empty());
}

#[tokio::test]
async fn tool_calls_written_into_the_text_run_when_registered() {
    let provider = scripted(
        r#"
        chunk_chars = 5
        [default]
        steps = [
          { text = "Let me add that up.\n\n```json\n{\"type\": \"calc\", \"id\": \"x1\", \"parameters\": {\"expression\": \"2+3\"}}\n```\n\n```json\n{\"type\": \"terminal_execute\", \"parameters\": {\"command\": \"ls\"}}\n```" },
          { tool_call = { name = "calc", input = { expression = "0" }, id = "never" } },
          { text = "It is 5." },
        ]
        "#,
    );
    let runner = runner(provider.clone());
    let mut turn = turn("add");
    turn.tools = vec![builtin("calc", "calculator")];
    turn.text_tool_calls = true;
    let events = run(&runner, turn).await;
    let starts = pick(&events, |k| match k {
        EventKind::ToolStart(s) => Some((s.name.clone(), s.source, s.input.clone())),
        _ => None,
    });
    assert!(
        starts.contains(&(
            "calc".into(),
            CallSource::Text,
            json!({"expression": "2+3"})
        )),
        "{starts:?}"
    );
    assert!(
        starts.iter().all(|(name, _, _)| name == "calc"),
        "unregistered names never run: {starts:?}"
    );
    let results = pick(&events, |k| match k {
        EventKind::ToolComplete(c) => Some(c.result_text.clone()),
        _ => None,
    });
    assert!(results.contains(&"2+3 = 5".to_owned()));
    let text = finished(&events).text.clone();
    assert!(text.starts_with("Let me add that up."), "{text}");
    assert!(
        !text.contains("\"calc\""),
        "the recognised call is removed: {text}"
    );
    assert!(
        text.contains("terminal_execute"),
        "an unregistered tool's JSON stays text: {text}"
    );
}
