//! Turns that pause for the user's approval or for tools the app runs, and
//! their continuations, through the service as a gateway drives it: the
//! first `Run` ends with `input_required`; the continuation is the same
//! request with the pause's messages appended, `iterations_done` and the
//! decisions. The scripted model echoes the tool results it was given
//! (`echo = "tool_results"`), and the recorded requests show what it saw.

mod support;

use std::sync::{Arc, Mutex};

use agent_runner::{
    agent_loop::Runner,
    allow::{Allowed, AllowedEndpoints, AllowedModels},
    provider::{Message, Providers},
    service::RunnerService,
    tools::{CallContext, LocalTool, ProgressSender, ToolFailure, ToolOutput, ToolRuntime},
    turn::Limits,
};
use futures::StreamExt;
use parley_proto::{
    json::{from_struct_value, to_struct_wrapped},
    runner::v1::{
        self as pb, RunEvent, RunRequest, agent_runner_client::AgentRunnerClient,
        agent_runner_server::AgentRunner, run_event::Event as Ev, tool_decision::Decision,
    },
};
use serde_json::{Value, json};
use support::turns::{Recording, retry, scripted};
use tonic::{Code, Request};
use tonic_types::StatusExt;

/// The model's side of every test, chosen by the user's message.
const SCRIPT: &str = r#"
chunk_chars = 1000

[[turns]]
match = { exact = "delete row 3" }
steps = [
  { reasoning = "The user wants row 3 gone; check the sum first." },
  { text = "Let me check first." },
  { tool_call = { name = "calc", input = { expression = "1+2" }, id = "c1", provider_data = { thoughtSignature = "sig-c1" } } },
  { tool_call = { name = "delete_rows", input = { ids = [3] }, id = "d1" } },
  { echo = "tool_results" },
]

[[turns]]
match = { exact = "pick rows" }
steps = [
  { tool_call = { name = "pick_rows", input = { table = "orders" }, id = "p1" } },
  { echo = "tool_results" },
]

[[turns]]
match = { exact = "all three" }
steps = [
  { tool_call = { name = "calc", input = { expression = "2*3" }, id = "c1" } },
  { tool_call = { name = "delete_rows", input = { ids = [1] }, id = "d1" } },
  { tool_call = { name = "pick_rows", input = { table = "orders" }, id = "p1" } },
  { echo = "tool_results" },
]

[[turns]]
match = { exact = "twice" }
steps = [
  { tool_call = { name = "delete_rows", input = { ids = [1] }, id = "d1" } },
  { text = "And the next one." },
  { tool_call = { name = "delete_rows", input = { ids = [2] }, id = "d2" } },
  { echo = "tool_results" },
]

[[turns]]
match = { exact = "bad input" }
steps = [
  { tool_call = { name = "delete_rows", input = { ids = "all" }, id = "d1" } },
  { echo = "tool_results" },
]

[[turns]]
match = { exact = "in the text" }
steps = [
  { text = "Deleting.\n\n```json\n{\"type\": \"delete_rows\", \"parameters\": {\"ids\": [4]}}\n```" },
  { echo = "tool_results" },
]

[default]
steps = [{ text = "No script for that." }]
"#;

/// `delete_rows`: a tool with effects, which the tests declare as needing
/// approval; it records every input it ran with.
#[derive(Debug, Default)]
struct DeleteRows {
    inputs: Mutex<Vec<Value>>,
}

impl DeleteRows {
    fn inputs(&self) -> Vec<Value> {
        self.inputs.lock().expect("lock").clone()
    }
}

#[async_trait::async_trait]
impl LocalTool for DeleteRows {
    fn name(&self) -> &str {
        "delete_rows"
    }
    fn description(&self) -> &str {
        "deletes rows by id"
    }
    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {"ids": {"type": "array", "items": {"type": "integer"}}},
            "required": ["ids"]
        })
    }
    async fn run(
        &self,
        input: Value,
        _ctx: CallContext,
        _progress: ProgressSender,
    ) -> Result<ToolOutput, ToolFailure> {
        self.inputs.lock().expect("lock").push(input.clone());
        Ok(ToolOutput {
            text: format!("deleted {}", input["ids"]),
            payload: None,
            attachments: Vec::new(),
        })
    }
}

struct Setup {
    svc: RunnerService,
    provider: Arc<Recording>,
    deletes: Arc<DeleteRows>,
}

fn setup() -> Setup {
    let provider = scripted(SCRIPT);
    let deletes = Arc::new(DeleteRows::default());
    let mut tools = ToolRuntime::with_builtins();
    tools.register(deletes.clone());
    let runner = Runner {
        providers: Arc::new(Providers::single(
            "scripted",
            provider.clone(),
            "scripted-demo",
        )),
        tools,
        retry: retry(),
        prices: Default::default(),
    };
    let allowed = Allowed {
        endpoints: AllowedEndpoints::parse(["127.0.0.1:*"]).expect("endpoints"),
        models: AllowedModels::parse(["scripted/*"], &["scripted"]).expect("models"),
        routes: Default::default(),
        prices: Default::default(),
    };
    let svc = RunnerService::new(Arc::new(runner), Limits::default(), 4, 256).with_allowed(allowed);
    Setup {
        svc,
        provider,
        deletes,
    }
}

fn builtin(name: &str, builtin: &str, needs_approval: bool) -> pb::ToolDefinition {
    pb::ToolDefinition {
        name: name.into(),
        endpoint: Some(pb::ToolEndpoint {
            kind: Some(pb::tool_endpoint::Kind::Builtin(builtin.into())),
        }),
        needs_approval,
        ..Default::default()
    }
}

/// `pick_rows`, which the app runs; its output must list `rows`.
fn pick_rows() -> pb::ToolDefinition {
    pb::ToolDefinition {
        name: "pick_rows".into(),
        description: "asks the user to pick rows".into(),
        input_schema: Some(to_struct_wrapped(&json!({
            "type": "object",
            "properties": {"table": {"type": "string"}},
            "required": ["table"]
        }))),
        endpoint: Some(pb::ToolEndpoint {
            kind: Some(pb::tool_endpoint::Kind::Client(pb::ClientTool {
                output_schema: Some(to_struct_wrapped(&json!({
                    "type": "object",
                    "properties": {"rows": {"type": "array", "items": {"type": "integer"}}},
                    "required": ["rows"]
                }))),
            })),
        }),
        ..Default::default()
    }
}

/// A first request: `text` from the user, the auto `calc`, the
/// approval-needing `delete_rows` and the app's `pick_rows`.
fn request(text: &str) -> RunRequest {
    RunRequest {
        messages: vec![pb::Message {
            role: pb::Role::User as i32,
            text: text.into(),
            ..Default::default()
        }],
        tools: vec![
            builtin("calc", "calculator", false),
            builtin("delete_rows", "delete_rows", true),
            pick_rows(),
        ],
        conversation_id: "conv-1".into(),
        turn_id: "turn-1".into(),
        ..Default::default()
    }
}

/// The continuation of `request` after `input`, as a gateway builds it.
fn continued(
    request: &RunRequest,
    input: &pb::InputRequired,
    decisions: Vec<pb::ToolDecision>,
) -> RunRequest {
    let mut next = request.clone();
    next.messages.extend(input.messages.iter().cloned());
    next.iterations_done = input.iteration;
    next.decisions = decisions;
    next
}

fn decision(call_id: &str, decision: Decision) -> pb::ToolDecision {
    pb::ToolDecision {
        call_id: call_id.into(),
        decision: Some(decision),
    }
}

fn approve(call_id: &str, arguments: Option<Value>) -> pb::ToolDecision {
    decision(
        call_id,
        Decision::Approve(pb::ToolApproval {
            arguments: arguments.as_ref().map(to_struct_wrapped),
        }),
    )
}

fn reject(call_id: &str, reason: &str) -> pb::ToolDecision {
    decision(
        call_id,
        Decision::Reject(pb::ToolRejection {
            reason: reason.into(),
        }),
    )
}

fn output(call_id: &str, output: Value) -> pb::ToolDecision {
    decision(
        call_id,
        Decision::Result(pb::ClientToolResult {
            output: Some(to_struct_wrapped(&output)),
            error: String::new(),
        }),
    )
}

fn failed(call_id: &str, error: &str) -> pb::ToolDecision {
    decision(
        call_id,
        Decision::Result(pb::ClientToolResult {
            output: None,
            error: error.into(),
        }),
    )
}

/// Runs `request` to its last event, checking the stream's invariants:
/// seq 1..n, exactly one final event (`finished`, `error` or
/// `input_required`), last, whose text is the text deltas'.
async fn run(svc: &RunnerService, request: RunRequest) -> Vec<RunEvent> {
    let stream = svc
        .run(Request::new(request))
        .await
        .map_err(|status| format!("{status:?}"))
        .expect("accepted")
        .into_inner();
    let events: Vec<RunEvent> = stream.map(|item| item.expect("event")).collect().await;
    check(&events);
    events
}

fn check(events: &[RunEvent]) {
    for (i, event) in events.iter().enumerate() {
        assert_eq!(event.seq, i as u64 + 1, "seq gap at {i}: {events:#?}");
    }
    let last = |event: &RunEvent| {
        matches!(
            event.event,
            Some(Ev::Finished(_) | Ev::Error(_) | Ev::InputRequired(_))
        )
    };
    assert_eq!(events.iter().filter(|e| last(e)).count(), 1, "{events:#?}");
    let text: String = events
        .iter()
        .filter_map(|e| match &e.event {
            Some(Ev::TextDelta(delta)) => Some(delta.as_str()),
            _ => None,
        })
        .collect();
    match events.last().and_then(|e| e.event.as_ref()) {
        Some(Ev::Finished(finished)) => assert_eq!(finished.text, text),
        Some(Ev::Error(error)) => assert_eq!(error.partial_text, text),
        Some(Ev::InputRequired(input)) => assert_eq!(input.text, text),
        other => panic!("the last event is not final: {other:?}"),
    }
}

fn paused(events: &[RunEvent]) -> pb::InputRequired {
    match events.last().and_then(|e| e.event.clone()) {
        Some(Ev::InputRequired(input)) => input,
        other => panic!("expected input_required, got {other:?}"),
    }
}

fn finished(events: &[RunEvent]) -> pb::Finished {
    match events.last().and_then(|e| e.event.clone()) {
        Some(Ev::Finished(finished)) => *finished,
        other => panic!("expected finished, got {other:?}"),
    }
}

fn starts(events: &[RunEvent]) -> Vec<pb::ToolStart> {
    events
        .iter()
        .filter_map(|e| match &e.event {
            Some(Ev::ToolStart(start)) => Some(start.clone()),
            _ => None,
        })
        .collect()
}

fn completes(events: &[RunEvent]) -> Vec<pb::ToolComplete> {
    events
        .iter()
        .filter_map(|e| match &e.event {
            Some(Ev::ToolComplete(complete)) => Some((**complete).clone()),
            _ => None,
        })
        .collect()
}

/// The waiting calls: (id, reason).
fn pending(input: &pb::InputRequired) -> Vec<(String, pb::PendingReason)> {
    input
        .pending
        .iter()
        .map(|p| {
            (
                p.call.as_ref().map(|c| c.id.clone()).unwrap_or_default(),
                pb::PendingReason::try_from(p.reason).expect("a reason"),
            )
        })
        .collect()
}

/// The tool results of the `n`th model request: (id, is_error, text).
fn results_seen(provider: &Recording, n: usize) -> Vec<(String, bool, String)> {
    match provider.request(n).messages.last() {
        Some(Message::ToolResults(results)) => results
            .iter()
            .map(|r| (r.call_id.clone(), r.is_error, r.text.clone()))
            .collect(),
        other => panic!("the request does not end with tool results: {other:?}"),
    }
}

/// Pauses "delete row 3": the model asked for `calc` (ran) and
/// `delete_rows` (waits).
async fn pause_delete(setup: &Setup) -> (RunRequest, pb::InputRequired) {
    let first = request("delete row 3");
    let events = run(&setup.svc, first.clone()).await;
    (first, paused(&events))
}

#[tokio::test]
async fn a_call_that_needs_approval_pauses_the_turn_after_the_rounds_other_calls() {
    let setup = setup();
    let first = request("delete row 3");
    let events = run(&setup.svc, first).await;
    let input = paused(&events);
    assert!(
        !events
            .iter()
            .any(|e| matches!(e.event, Some(Ev::Finished(_)))),
        "a paused turn does not finish"
    );
    assert_eq!(input.iteration, 1);
    assert_eq!(
        pending(&input),
        [("d1".to_owned(), pb::PendingReason::Approval)]
    );
    let call = input.pending[0].call.clone().expect("call");
    assert_eq!(
        (
            call.name.as_str(),
            call.input.as_ref().map(from_struct_value)
        ),
        ("delete_rows", Some(json!({"ids": [3]})))
    );
    // The auto tool of the same round ran; the waiting one did not.
    let ran: Vec<String> = starts(&events).into_iter().map(|s| s.call_id).collect();
    assert_eq!(ran, ["c1"]);
    assert_eq!(completes(&events)[0].result_text, "1+2 = 3");
    assert!(setup.deletes.inputs().is_empty());
    // What the continuation appends: the model's message with every call,
    // then the result of the call that ran.
    assert_eq!(input.messages.len(), 2, "{:#?}", input.messages);
    let answer = &input.messages[0];
    assert_eq!(answer.role, pb::Role::Assistant as i32);
    assert_eq!(answer.text, "Let me check first.");
    let ids: Vec<&str> = answer.tool_calls.iter().map(|c| c.id.as_str()).collect();
    assert_eq!(ids, ["c1", "d1"]);
    let result = input.messages[1]
        .tool_result
        .clone()
        .expect("a tool result");
    assert_eq!(
        (
            result.call_id.as_str(),
            result.text.as_str(),
            result.is_error
        ),
        ("c1", "1+2 = 3", false)
    );
    assert_eq!(input.text, "Let me check first.");
    let usage = input.usage.expect("usage");
    assert!(
        usage.input_tokens > 0 && usage.output_tokens > 0,
        "{usage:?}"
    );
    assert_eq!(setup.provider.calls(), 1);
}

#[tokio::test]
async fn an_approved_call_runs_and_the_turn_goes_on() {
    let setup = setup();
    let (first, input) = pause_delete(&setup).await;
    let events = run(
        &setup.svc,
        continued(&first, &input, vec![approve("d1", None)]),
    )
    .await;
    assert_eq!(setup.deletes.inputs(), [json!({"ids": [3]})]);
    let start = starts(&events);
    assert_eq!(
        (start.len(), start[0].call_id.as_str()),
        (1, "d1"),
        "only the approved call starts"
    );
    let complete = &completes(&events)[0];
    assert!(complete.success, "{complete:?}");
    // The model saw both results, in its calls' order.
    assert_eq!(
        results_seen(&setup.provider, 1),
        [
            ("c1".to_owned(), false, "1+2 = 3".to_owned()),
            ("d1".to_owned(), false, "deleted [3]".to_owned()),
        ]
    );
    let done = finished(&events);
    assert_eq!(
        done.text, "\n\ncalc: 1+2 = 3\ndelete_rows: deleted [3]",
        "the answer goes on after the pause's text, a blank line between"
    );
    assert_eq!(done.iterations, 2, "the pause's model call counts");
    let iterations: Vec<u32> = events
        .iter()
        .filter_map(|e| match &e.event {
            Some(Ev::Status(status)) if status.phase == pb::Phase::ModelCall as i32 => {
                Some(status.iteration)
            }
            _ => None,
        })
        .collect();
    assert_eq!(iterations, [2]);
}

#[tokio::test]
async fn edited_arguments_replace_the_models_and_are_checked_against_the_schema() {
    let setup = setup();
    let (first, input) = pause_delete(&setup).await;
    let edited = continued(
        &first,
        &input,
        vec![approve("d1", Some(json!({"ids": [7]})))],
    );
    let events = run(&setup.svc, edited).await;
    assert_eq!(setup.deletes.inputs(), [json!({"ids": [7]})]);
    assert_eq!(
        starts(&events)[0].input.as_ref().map(from_struct_value),
        Some(json!({"ids": [7]}))
    );
    assert_eq!(results_seen(&setup.provider, 1)[1].2, "deleted [7]");

    // Arguments that break the tool's schema do not run: the model is
    // told, as for its own invalid input.
    let broken = continued(
        &first,
        &input,
        vec![approve("d1", Some(json!({"ids": "all"})))],
    );
    let events = run(&setup.svc, broken).await;
    assert_eq!(setup.deletes.inputs().len(), 1, "nothing more ran");
    let complete = &completes(&events)[0];
    assert_eq!(
        (complete.success, complete.error_reason.as_str()),
        (false, "INVALID_INPUT")
    );
    let (_, is_error, text) = results_seen(&setup.provider, 2)[1].clone();
    assert!(is_error && text.contains("INVALID_INPUT"), "{text}");
    finished(&events);
}

#[tokio::test]
async fn a_rejection_reaches_the_model_with_its_reason() {
    let setup = setup();
    let (first, input) = pause_delete(&setup).await;
    let events = run(
        &setup.svc,
        continued(&first, &input, vec![reject("d1", "wrong table")]),
    )
    .await;
    assert!(
        setup.deletes.inputs().is_empty(),
        "a rejected call never runs"
    );
    assert!(
        starts(&events).is_empty(),
        "no tool_start for a rejected call"
    );
    let complete = &completes(&events)[0];
    assert_eq!(
        (
            complete.call_id.as_str(),
            complete.success,
            complete.error_reason.as_str()
        ),
        ("d1", false, "REJECTED")
    );
    assert!(complete.error.contains("wrong table"), "{complete:?}");
    // The model's next request carries the rejection and its reason.
    let (id, is_error, text) = results_seen(&setup.provider, 1)[1].clone();
    assert_eq!((id.as_str(), is_error), ("d1", true));
    assert!(
        text.contains("declined") && text.contains("wrong table"),
        "{text}"
    );
    let done = finished(&events);
    assert!(done.text.contains("wrong table"), "{}", done.text);
}

#[tokio::test]
async fn a_client_tools_result_is_the_calls_result_checked_against_its_output_schema() {
    let setup = setup();
    let first = request("pick rows");
    let input = paused(&run(&setup.svc, first.clone()).await);
    assert_eq!(
        pending(&input),
        [("p1".to_owned(), pb::PendingReason::Client)]
    );
    assert_eq!(
        input.messages.len(),
        1,
        "no call ran: the model's message only"
    );

    let events = run(
        &setup.svc,
        continued(&first, &input, vec![output("p1", json!({"rows": [1, 2]}))]),
    )
    .await;
    assert!(starts(&events).is_empty(), "the app ran it, not the runner");
    let complete = &completes(&events)[0];
    assert!(complete.success, "{complete:?}");
    assert_eq!(complete.result_text, r#"{"rows":[1,2]}"#);
    assert_eq!(
        results_seen(&setup.provider, 1),
        [("p1".to_owned(), false, r#"{"rows":[1,2]}"#.to_owned())]
    );
    assert_eq!(finished(&events).text, r#"pick_rows: {"rows":[1,2]}"#);

    // The app's error.
    let events = run(
        &setup.svc,
        continued(
            &first,
            &input,
            vec![failed("p1", "the user closed the picker")],
        ),
    )
    .await;
    let complete = &completes(&events)[0];
    assert_eq!(
        (complete.success, complete.error_reason.as_str()),
        (false, "TOOL_ERROR")
    );
    let (_, is_error, text) = results_seen(&setup.provider, 2)[0].clone();
    assert!(
        is_error && text.contains("the user closed the picker"),
        "{text}"
    );

    // An output the schema does not allow.
    let events = run(
        &setup.svc,
        continued(&first, &input, vec![output("p1", json!({"row": 1}))]),
    )
    .await;
    let complete = &completes(&events)[0];
    assert_eq!(
        (complete.success, complete.error_reason.as_str()),
        (false, "INVALID_OUTPUT")
    );
    let (_, is_error, text) = results_seen(&setup.provider, 3)[0].clone();
    assert!(
        is_error && text.contains("the app's output does not satisfy the tool's output schema"),
        "{text}"
    );
    finished(&events);
}

#[tokio::test]
async fn a_mixed_round_runs_the_auto_call_and_waits_for_the_others() {
    let setup = setup();
    let first = request("all three");
    let events = run(&setup.svc, first.clone()).await;
    let input = paused(&events);
    assert_eq!(
        pending(&input),
        [
            ("d1".to_owned(), pb::PendingReason::Approval),
            ("p1".to_owned(), pb::PendingReason::Client),
        ]
    );
    let ran: Vec<String> = starts(&events).into_iter().map(|s| s.call_id).collect();
    assert_eq!(ran, ["c1"]);
    let events = run(
        &setup.svc,
        continued(
            &first,
            &input,
            vec![output("p1", json!({"rows": [4]})), approve("d1", None)],
        ),
    )
    .await;
    assert_eq!(setup.deletes.inputs(), [json!({"ids": [1]})]);
    let seen: Vec<(String, bool)> = results_seen(&setup.provider, 1)
        .into_iter()
        .map(|(id, is_error, _)| (id, is_error))
        .collect();
    assert_eq!(
        seen,
        [
            ("c1".to_owned(), false),
            ("d1".to_owned(), false),
            ("p1".to_owned(), false)
        ],
        "every result, in the model's order"
    );
    assert_eq!(
        finished(&events).text,
        "calc: 2*3 = 6\ndelete_rows: deleted [1]\npick_rows: {\"rows\":[4]}"
    );
}

#[tokio::test]
async fn a_continuation_may_pause_again_and_counts_its_model_calls() {
    let setup = setup();
    let first = request("twice");
    let input = paused(&run(&setup.svc, first.clone()).await);
    let second = continued(&first, &input, vec![approve("d1", None)]);
    let events = run(&setup.svc, second.clone()).await;
    let again = paused(&events);
    assert_eq!(again.iteration, 2);
    assert_eq!(
        pending(&again),
        [("d2".to_owned(), pb::PendingReason::Approval)]
    );
    // This run's messages: the settled result, then the model's message.
    let roles: Vec<i32> = again.messages.iter().map(|m| m.role).collect();
    assert_eq!(roles, [pb::Role::Tool as i32, pb::Role::Assistant as i32]);
    assert_eq!(
        again.messages[0]
            .tool_result
            .as_ref()
            .map(|r| r.call_id.as_str()),
        Some("d1")
    );
    assert_eq!(again.text, "And the next one.");

    // As a gateway does: the request so far, without its decisions.
    let mut so_far = second;
    so_far.decisions.clear();
    let events = run(
        &setup.svc,
        continued(&so_far, &again, vec![approve("d2", None)]),
    )
    .await;
    assert_eq!(
        setup.deletes.inputs(),
        [json!({"ids": [1]}), json!({"ids": [2]})]
    );
    let done = finished(&events);
    assert_eq!(done.iterations, 3);
    assert_eq!(done.text, "\n\ndelete_rows: deleted [2]");
}

#[tokio::test]
async fn the_pauses_model_calls_count_against_max_iterations() {
    let setup = setup();
    let mut first = request("twice");
    first.limits = Some(pb::Limits {
        max_iterations: 2,
        ..Default::default()
    });
    let input = paused(&run(&setup.svc, first.clone()).await);
    let events = run(
        &setup.svc,
        continued(&first, &input, vec![approve("d1", None)]),
    )
    .await;
    let done = finished(&events);
    assert_eq!(
        (done.stop_reason, done.iterations),
        (pb::StopReason::MaxIterations as i32, 2),
        "the second model call is the last: it does not pause"
    );

    let mut spent = continued(&first, &input, vec![approve("d1", None)]);
    spent.iterations_done = 2;
    let status = setup
        .svc
        .run(Request::new(spent))
        .await
        .err()
        .expect("refused");
    let fields: Vec<String> = status
        .get_details_bad_request()
        .expect("violations")
        .field_violations
        .into_iter()
        .map(|v| v.field)
        .collect();
    assert_eq!(fields, ["iterations_done"]);
}

#[tokio::test]
async fn decisions_that_do_not_match_the_pending_calls_are_refused_with_their_fields() {
    let setup = setup();
    let first = request("all three");
    let input = paused(&run(&setup.svc, first.clone()).await);
    let refused = |decisions: Vec<pb::ToolDecision>| {
        let request = continued(&first, &input, decisions);
        let svc = setup.svc.clone();
        async move {
            let status = svc.run(Request::new(request)).await.err().expect("refused");
            assert_eq!(status.code(), Code::InvalidArgument);
            assert_eq!(
                parley_grpc::status::reason(&status).as_deref(),
                Some("INVALID_REQUEST")
            );
            status
                .get_details_bad_request()
                .expect("violations")
                .field_violations
                .into_iter()
                .map(|v| v.field)
                .collect::<Vec<String>>()
        }
    };
    // A call that is not pending (c1 ran), a second decision, a missing one.
    assert_eq!(
        refused(vec![
            approve("c1", None),
            approve("d1", None),
            reject("d1", ""),
        ])
        .await,
        ["decisions[0].call_id", "decisions[2].call_id", "decisions"]
    );
    // A decision that says nothing.
    assert_eq!(
        refused(vec![
            pb::ToolDecision {
                call_id: "d1".into(),
                decision: None,
            },
            output("p1", json!({"rows": []})),
        ])
        .await,
        ["decisions[0].decision", "decisions"]
    );
    // An approval of the app's tool, a result for the runner's.
    assert_eq!(
        refused(vec![output("d1", json!({})), approve("p1", None)]).await,
        ["decisions[0].result", "decisions[1].approve"]
    );
    // Decisions where nothing is pending.
    let mut fresh = request("all three");
    fresh.decisions = vec![approve("d1", None)];
    let status = setup
        .svc
        .run(Request::new(fresh))
        .await
        .err()
        .expect("refused");
    assert_eq!(status.code(), Code::InvalidArgument);
    assert_eq!(
        setup.provider.calls(),
        1,
        "no refused continuation called the model"
    );
}

#[tokio::test]
async fn reasoning_and_provider_data_cross_the_pause_unchanged() {
    let setup = setup();
    let (first, input) = pause_delete(&setup).await;
    let answer = &input.messages[0];
    assert_eq!(answer.reasoning.len(), 1);
    let block = &answer.reasoning[0];
    assert_eq!(
        block.text,
        "The user wants row 3 gone; check the sum first."
    );
    assert!(!block.signature.is_empty(), "the signature is kept");
    assert_eq!(
        answer.tool_calls[0]
            .provider_data
            .as_ref()
            .map(from_struct_value),
        Some(json!({"thoughtSignature": "sig-c1"}))
    );
    let first_answer = |n: usize| {
        setup
            .provider
            .request(n)
            .messages
            .iter()
            .find_map(|m| match m {
                Message::Assistant {
                    reasoning,
                    tool_calls,
                    ..
                } => Some((reasoning.clone(), tool_calls.clone())),
                _ => None,
            })
            .expect("the model's message")
    };
    run(
        &setup.svc,
        continued(&first, &input, vec![reject("d1", "")]),
    )
    .await;
    let (reasoning, calls) = first_answer(1);
    assert_eq!(reasoning.len(), 1);
    assert_eq!(reasoning[0].text, block.text);
    assert_eq!(
        reasoning[0].signature.as_deref(),
        Some(block.signature.as_str())
    );
    assert_eq!(
        calls[0].provider_data,
        Some(json!({"thoughtSignature": "sig-c1"}))
    );
    assert_eq!(calls[1].provider_data, None);
}

#[tokio::test]
async fn a_call_written_into_the_text_waits_too() {
    let setup = setup();
    let mut first = request("in the text");
    first.text_tool_calls = true;
    let input = paused(&run(&setup.svc, first.clone()).await);
    assert_eq!(
        pending(&input),
        [("text_call_1_1".to_owned(), pb::PendingReason::Approval)]
    );
    assert_eq!(input.text, "Deleting.", "the call is not text");
    let events = run(
        &setup.svc,
        continued(&first, &input, vec![approve("text_call_1_1", None)]),
    )
    .await;
    let start = &starts(&events)[0];
    assert_eq!(start.source, pb::ToolCallSource::Text as i32);
    assert_eq!(setup.deletes.inputs(), [json!({"ids": [4]})]);
    finished(&events);
}

#[tokio::test]
async fn a_call_whose_input_breaks_the_schema_is_answered_at_once_instead_of_waiting() {
    let setup = setup();
    let events = run(&setup.svc, request("bad input")).await;
    let complete = &completes(&events)[0];
    assert_eq!(complete.error_reason, "INVALID_INPUT");
    assert!(finished(&events).text.contains("INVALID_INPUT"));
    assert!(setup.deletes.inputs().is_empty());
}

#[tokio::test]
async fn a_fenced_continuation_asks_before_it_runs_the_approved_calls() {
    let setup = setup();
    let (first, input) = pause_delete(&setup).await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let address = listener.local_addr().expect("address");
    let routes = tonic::service::Routes::new(
        parley_proto::runner::v1::agent_runner_server::AgentRunnerServer::new(setup.svc.clone()),
    );
    let options =
        parley_grpc::ServeOptions::new("agent-runner-test", vec!["parley.runner.v1.AgentRunner"]);
    tokio::spawn(parley_grpc::serve(
        listener,
        routes,
        options,
        std::future::pending(),
    ));
    let mut client = AgentRunnerClient::connect(format!("http://{address}"))
        .await
        .expect("connect");
    let (send, requests) = tokio::sync::mpsc::channel(4);
    send.send(pb::RunFencedRequest {
        message: Some(pb::run_fenced_request::Message::Start(continued(
            &first,
            &input,
            vec![approve("d1", None)],
        ))),
    })
    .await
    .expect("send");
    let mut stream = client
        .run_fenced(tokio_stream::wrappers::ReceiverStream::new(requests))
        .await
        .expect("run")
        .into_inner();
    let mut events = Vec::new();
    while let Some(item) = stream.next().await {
        let event = item.expect("event");
        if let Some(Ev::DispatchPending(pending)) = &event.event {
            assert_eq!(pending.iteration, 1, "the pause's model call");
            assert_eq!(pending.call_ids, ["d1"]);
            assert!(setup.deletes.inputs().is_empty(), "nothing ran before");
            send.send(pb::RunFencedRequest {
                message: Some(pb::run_fenced_request::Message::Decision(
                    pb::DispatchDecision {
                        iteration: pending.iteration,
                        allowed: true,
                    },
                )),
            })
            .await
            .expect("decide");
        }
        events.push(event);
    }
    check(&events);
    assert_eq!(setup.deletes.inputs(), [json!({"ids": [3]})]);
    finished(&events);
}
