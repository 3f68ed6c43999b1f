//! The consent loop through the wire: a turn that pauses for approvals and
//! for tools the app runs, continues with `SubmitToolDecisions` (here, on
//! another replica, after a SIGKILL), and is closed when it expires, when
//! the user moves on or cancels it.

use std::time::Duration;

use parley_proto::{
    gateway::v1::{
        self as gw, ChatEvent, chat_event::Event, chat_gateway_client::ChatGatewayClient,
    },
    json,
    runner::v1::{self as runner, run_event},
};
use tonic::{Code, Streaming, transport::Channel};

use crate::{
    auth::{hs256, secured},
    durable::{last_answer, resume},
    harness::{
        Harness, Options, chat_request, collect, drain,
        fake_runner::{Reply, Step, finished},
        process::{GatewayProcess, ProcessConfig},
        reason, start_upstreams, with_token,
    },
    postgres,
};

/// A call the model made.
fn call(id: &str, name: &str, input: serde_json::Value) -> runner::ToolCall {
    runner::ToolCall {
        id: id.into(),
        name: name.into(),
        input: input.as_object().map(json::to_struct),
        provider_data: None,
    }
}

/// The runner's pause after model call 1, its calls waiting as `pending`
/// says (`client`: the app runs it).
fn paused(text: &str, pending: &[(runner::ToolCall, bool)]) -> Reply {
    let calls: Vec<runner::ToolCall> = pending.iter().map(|(call, _)| call.clone()).collect();
    Reply::Steps(vec![
        Step::Send(run_event::Event::TextDelta(text.into())),
        Step::Send(run_event::Event::InputRequired(runner::InputRequired {
            iteration: 1,
            pending: pending
                .iter()
                .map(|(call, client)| runner::PendingToolCall {
                    call: Some(call.clone()),
                    reason: if *client {
                        runner::PendingReason::Client
                    } else {
                        runner::PendingReason::Approval
                    } as i32,
                })
                .collect(),
            messages: vec![runner::Message {
                role: runner::Role::Assistant as i32,
                text: text.into(),
                tool_calls: calls,
                ..Default::default()
            }],
            usage: Some(runner::Usage {
                input_tokens: 100,
                output_tokens: 10,
                ..Default::default()
            }),
            text: text.into(),
        })),
    ])
}

/// The continuation's answer.
fn answer(text: &str) -> Reply {
    Reply::Steps(vec![
        Step::Send(run_event::Event::TextDelta(text.into())),
        Step::Send(finished(text)),
    ])
}

fn search() -> runner::ToolCall {
    call(
        "call_search",
        "lookup_rows",
        serde_json::json!({"table_id": "t1", "query": "Berlin"}),
    )
}

fn pick() -> runner::ToolCall {
    call(
        "call_pick",
        "ask_user_to_pick_rows",
        serde_json::json!({"table_id": "t1", "prompt": "Which rows?"}),
    )
}

fn approve(call_id: &str, arguments: Option<serde_json::Value>) -> gw::ToolDecision {
    gw::ToolDecision {
        call_id: call_id.into(),
        decision: Some(gw::tool_decision::Decision::Approve(gw::ToolApproval {
            arguments: arguments.and_then(|a| a.as_object().map(json::to_struct)),
        })),
    }
}

fn reject(call_id: &str, reason: &str) -> gw::ToolDecision {
    gw::ToolDecision {
        call_id: call_id.into(),
        decision: Some(gw::tool_decision::Decision::Reject(gw::ToolRejection {
            reason: reason.into(),
        })),
    }
}

fn result(call_id: &str, output: serde_json::Value, error: &str) -> gw::ToolDecision {
    gw::ToolDecision {
        call_id: call_id.into(),
        decision: Some(gw::tool_decision::Decision::Result(gw::ClientToolResult {
            output: output.as_object().map(json::to_struct),
            error: error.into(),
        })),
    }
}

fn submit(
    conversation_id: &str,
    turn_id: &str,
    decisions: Vec<gw::ToolDecision>,
) -> gw::SubmitToolDecisionsRequest {
    gw::SubmitToolDecisionsRequest {
        conversation_id: conversation_id.into(),
        turn_id: turn_id.into(),
        decisions,
        request_id: String::new(),
    }
}

/// A paused turn's stream, read to its end: every event, and the ids.
struct Pause {
    events: Vec<ChatEvent>,
    conversation_id: String,
    turn_id: String,
}

impl Pause {
    fn last_seq(&self) -> u64 {
        self.events.last().map_or(0, |event| event.seq)
    }
}

/// Reads a stream that must pause: seq 1.. without gaps, no `complete`,
/// the waiting calls announced, then the `AWAITING_INPUT` status last.
async fn read_pause(stream: Streaming<ChatEvent>) -> Pause {
    let events = drain(stream).await;
    let seqs: Vec<u64> = events.iter().map(|event| event.seq).collect();
    assert_eq!(seqs, (1..=events.len() as u64).collect::<Vec<_>>());
    assert!(
        !events
            .iter()
            .any(|event| matches!(event.event, Some(Event::Complete(_)))),
        "a paused turn sends no complete: {events:?}"
    );
    let Some(Event::Status(last)) = events.last().and_then(|event| event.event.clone()) else {
        panic!("the pause's status comes last: {events:?}");
    };
    assert_eq!(last.phase, gw::TurnPhase::AwaitingInput as i32);
    Pause {
        conversation_id: last.conversation_id,
        turn_id: last.turn_id,
        events,
    }
}

async fn chat_and_pause(
    client: &mut ChatGatewayClient<Channel>,
    request: impl tonic::IntoRequest<gw::ChatRequest>,
) -> Pause {
    read_pause(client.chat(request).await.expect("chat").into_inner()).await
}

/// The last `complete` of a continuation's stream, whose seqs continue the
/// pause's.
async fn continued(stream: Streaming<ChatEvent>, after_seq: u64) -> gw::TurnComplete {
    let events = drain(stream).await;
    let seqs: Vec<u64> = events.iter().map(|event| event.seq).collect();
    assert_eq!(
        seqs,
        (after_seq + 1..=after_seq + events.len() as u64).collect::<Vec<_>>(),
        "the continuation's seqs follow the pause's"
    );
    match events.last().and_then(|event| event.event.clone()) {
        Some(Event::Complete(complete)) => *complete,
        other => panic!("a complete last, not {other:?}"),
    }
}

/// Submits `decisions` for `pause` and reads the continuation to its
/// `complete`.
async fn decide(
    client: &mut ChatGatewayClient<Channel>,
    pause: &Pause,
    decisions: Vec<gw::ToolDecision>,
) -> gw::TurnComplete {
    let stream = client
        .submit_tool_decisions(submit(&pause.conversation_id, &pause.turn_id, decisions))
        .await
        .expect("decisions accepted")
        .into_inner();
    continued(stream, pause.last_seq()).await
}

fn decisions_seen(seen: &crate::harness::fake_runner::Seen) -> Vec<runner::ToolDecision> {
    seen.request.decisions.clone()
}

#[tokio::test]
async fn an_approved_call_continues_the_turn_with_the_decision_and_the_pause_in_the_request() {
    let mut stack = Harness::start(Options::default()).await;
    stack
        .runner
        .push(paused("Let me search.", &[(search(), false)]));
    let pause = chat_and_pause(
        &mut stack.client,
        chat_request("", "Find Berlin", "table_view"),
    )
    .await;
    let requests: Vec<gw::ToolApprovalRequest> = pause
        .events
        .iter()
        .filter_map(|event| match &event.event {
            Some(Event::ApprovalRequest(request)) => Some(request.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(requests.len(), 1, "{:?}", pause.events);
    assert_eq!(requests[0].call_id, "call_search");
    assert_eq!(requests[0].tool, "lookup_rows");
    assert!(
        requests[0].summary.starts_with("lookup_rows("),
        "{:?}",
        requests[0]
    );
    assert!(requests[0].expires_at.is_some());

    // The stored turn waits, held by no replica; reading the conversation
    // shows the answer so far and what it waits for.
    let waiting = answer_of(&mut stack.client, &pause.conversation_id, &pause.turn_id)
        .await
        .expect("the paused turn's message");
    assert_eq!(waiting.state, gw::TurnState::AwaitingInput as i32);
    assert_eq!(waiting.text, "Let me search.");
    assert_eq!(waiting.approval_requests, requests);
    assert!(waiting.client_tool_calls.is_empty());
    // Resuming it replays it through its pause, then ends.
    let replayed =
        drain(resume(&mut stack.client, &pause.conversation_id, &pause.turn_id, 0).await).await;
    assert_eq!(replayed, pause.events);

    stack.runner.push(answer(" Found 2 rows."));
    let complete = decide(
        &mut stack.client,
        &pause,
        vec![approve("call_search", None)],
    )
    .await;
    assert!(complete.success, "{complete:?}");
    assert_eq!(complete.turn_id, pause.turn_id);
    assert_eq!(complete.message, "Let me search. Found 2 rows.");
    let usage = complete.usage.expect("usage");
    assert_eq!(usage.input_tokens, 220, "both runs' usage: {usage:?}");

    let seen = stack.runner.seen();
    assert_eq!(seen.len(), 2);
    let first = &seen[0].request;
    let second = &seen[1].request;
    assert_eq!(second.system_prompt, first.system_prompt);
    assert_eq!(
        second.messages.len(),
        first.messages.len() + 1,
        "the pause's model message is appended"
    );
    assert_eq!(second.iterations_done, 1);
    assert_eq!(
        decisions_seen(&seen[1]),
        vec![runner::ToolDecision {
            call_id: "call_search".into(),
            decision: Some(runner::tool_decision::Decision::Approve(
                runner::ToolApproval { arguments: None }
            )),
        }]
    );
    let tool = first
        .tools
        .iter()
        .find(|tool| tool.name == "lookup_rows")
        .expect("the page's tool");
    assert!(tool.needs_approval, "the registry's `approval: always`");

    // The turn is over: a second submission is refused.
    let again = stack
        .client
        .submit_tool_decisions(submit(
            &pause.conversation_id,
            &pause.turn_id,
            vec![approve("call_search", None)],
        ))
        .await
        .expect_err("already decided");
    assert_eq!(
        (again.code(), reason(&again).as_str()),
        (Code::FailedPrecondition, "TURN_NOT_AWAITING_INPUT")
    );
    stack.stop().await;
}

/// The stored answer of `turn_id`, once there is one.
async fn answer_of(
    client: &mut ChatGatewayClient<Channel>,
    conversation_id: &str,
    turn_id: &str,
) -> Option<gw::ConversationMessage> {
    client
        .get_conversation(gw::GetConversationRequest {
            conversation_id: conversation_id.into(),
            ..Default::default()
        })
        .await
        .expect("get")
        .into_inner()
        .messages
        .into_iter()
        .find(|message| {
            message.turn_id == turn_id && message.role == gw::MessageRole::Assistant as i32
        })
}

/// The stored answer of `turn_id`, once its turn has ended.
async fn ended_answer(
    client: &mut ChatGatewayClient<Channel>,
    conversation_id: &str,
    turn_id: &str,
) -> Option<gw::ConversationMessage> {
    answer_of(client, conversation_id, turn_id)
        .await
        .filter(|message| message.state != gw::TurnState::AwaitingInput as i32)
}

#[tokio::test]
async fn rejections_client_results_and_edited_arguments_reach_the_runner_checked() {
    let mut stack = Harness::start(Options::default()).await;
    let mut request = chat_request("", "Pick and search", "table_view");
    request.client_tools = vec![gw::ClientToolDefinition {
        name: "confirm_in_app".into(),
        description: "Shows a confirmation dialog.".into(),
        input_schema: None,
        output_schema: None,
    }];
    let confirm = call("call_confirm", "confirm_in_app", serde_json::json!({}));
    stack.runner.push(paused(
        "One moment.",
        &[(search(), false), (pick(), true), (confirm, true)],
    ));
    let pause = chat_and_pause(&mut stack.client, request).await;
    let client_calls = pause
        .events
        .iter()
        .filter(|event| matches!(event.event, Some(Event::ClientToolCall(_))))
        .count();
    assert_eq!(client_calls, 2, "{:?}", pause.events);
    let sent = &stack.runner.seen()[0].request;
    let declared = sent
        .tools
        .iter()
        .find(|tool| tool.name == "confirm_in_app")
        .expect("the request's client tool goes to the runner");
    assert!(matches!(
        declared.endpoint.as_ref().and_then(|e| e.kind.clone()),
        Some(runner::tool_endpoint::Kind::Client(_))
    ));

    let refuse = |decisions| submit(&pause.conversation_id, &pause.turn_id, decisions);
    let mut client = stack.client.clone();
    let refused = |request: gw::SubmitToolDecisionsRequest| {
        let mut client = client.clone();
        async move {
            client
                .submit_tool_decisions(request)
                .await
                .expect_err("refused")
        }
    };
    // A decision missing, an unknown call, the wrong kind, edited arguments
    // outside the tool's schema: refused, and the turn still waits.
    let missing = refused(refuse(vec![reject("call_search", "no")])).await;
    assert_eq!(reason(&missing), "INVALID_DECISIONS", "{missing:?}");
    assert_eq!(missing.code(), Code::InvalidArgument);
    let unknown = refused(refuse(vec![approve("call_nope", None)])).await;
    assert_eq!(reason(&unknown), "INVALID_DECISIONS");
    let wrong_kind = refused(refuse(vec![
        approve("call_pick", None),
        approve("call_search", None),
        result("call_confirm", serde_json::json!({}), ""),
    ]))
    .await;
    assert_eq!(reason(&wrong_kind), "INVALID_DECISIONS");
    let edited = refused(refuse(vec![
        approve(
            "call_search",
            Some(serde_json::json!({"query": "no table id"})),
        ),
        result("call_pick", serde_json::json!({"row_ids": [1]}), ""),
        result("call_confirm", serde_json::json!({}), ""),
    ]))
    .await;
    assert_eq!(reason(&edited), "INVALID_TOOL_ARGUMENTS", "{edited:?}");
    assert_eq!(stack.runner.seen().len(), 1, "nothing ran");

    stack.runner.push(answer(" Done."));
    let decisions = vec![
        reject("call_search", "not in Berlin"),
        result("call_pick", serde_json::json!({"row_ids": [3, 7]}), ""),
        result(
            "call_confirm",
            serde_json::json!({}),
            "the user closed the dialog",
        ),
    ];
    let complete = continued(
        client
            .submit_tool_decisions(refuse(decisions))
            .await
            .expect("submitted")
            .into_inner(),
        pause.last_seq(),
    )
    .await;
    assert!(complete.success, "{complete:?}");
    let seen = stack.runner.seen();
    let sent: Vec<_> = decisions_seen(&seen[1])
        .into_iter()
        .map(|decision| (decision.call_id, decision.decision))
        .collect();
    assert_eq!(
        sent,
        vec![
            (
                "call_search".into(),
                Some(runner::tool_decision::Decision::Reject(
                    runner::ToolRejection {
                        reason: "not in Berlin".into()
                    }
                ))
            ),
            (
                "call_pick".into(),
                Some(runner::tool_decision::Decision::Result(
                    runner::ClientToolResult {
                        output: serde_json::json!({"row_ids": [3, 7]})
                            .as_object()
                            .map(json::to_struct),
                        error: String::new(),
                    }
                ))
            ),
            (
                "call_confirm".into(),
                Some(runner::tool_decision::Decision::Result(
                    runner::ClientToolResult {
                        output: serde_json::json!({}).as_object().map(json::to_struct),
                        error: "the user closed the dialog".into(),
                    }
                ))
            ),
        ]
    );
    stack.stop().await;
}

#[tokio::test]
async fn edited_arguments_that_fit_the_schema_go_to_the_runner() {
    let mut stack = Harness::start(Options::default()).await;
    stack
        .runner
        .push(paused("Searching.", &[(search(), false)]));
    let pause = chat_and_pause(
        &mut stack.client,
        chat_request("", "Find Berlin", "table_view"),
    )
    .await;
    stack.runner.push(answer(" Found Munich."));
    let edited = serde_json::json!({"table_id": "t1", "query": "Munich"});
    let complete = decide(
        &mut stack.client,
        &pause,
        vec![approve("call_search", Some(edited.clone()))],
    )
    .await;
    assert!(complete.success);
    let seen = stack.runner.seen();
    assert_eq!(
        decisions_seen(&seen[1])[0].decision,
        Some(runner::tool_decision::Decision::Approve(
            runner::ToolApproval {
                arguments: edited.as_object().map(json::to_struct),
            }
        ))
    );
    stack.stop().await;
}

#[tokio::test]
async fn a_paused_turn_is_closed_by_a_new_message_a_cancel_or_its_expiry() {
    let mut stack = Harness::start(Options {
        tweak: |config| config.turns.input_ttl = Duration::from_secs(1),
        ..Options::default()
    })
    .await;

    // A new message while a turn waits: the waiting turn is closed first,
    // its call recorded as not run, and the new turn runs.
    stack
        .runner
        .push(paused("Shall I search?", &[(search(), false)]));
    let pause = chat_and_pause(
        &mut stack.client,
        chat_request("", "Find Berlin", "table_view"),
    )
    .await;
    stack.runner.push(answer("Sure, something else."));
    let next = collect(
        stack
            .client
            .chat(chat_request(
                &pause.conversation_id,
                "Never mind",
                "table_view",
            ))
            .await
            .expect("a new message")
            .into_inner(),
    )
    .await;
    assert!(next.complete.success);
    let closed =
        drain(resume(&mut stack.client, &pause.conversation_id, &pause.turn_id, 0).await).await;
    let Some(Event::Complete(closed)) = closed.last().and_then(|event| event.event.clone()) else {
        panic!("the closed turn ends with complete: {closed:?}");
    };
    assert_eq!(closed.state, gw::TurnState::Completed as i32, "{closed:?}");
    assert_eq!(closed.stop_reason, "no_answer");
    assert_eq!(closed.message, "Shall I search?");
    let not_run = closed
        .tool_history
        .iter()
        .find(|tool| tool.call_id == "call_search")
        .expect("the waiting call is in the history");
    assert!(!not_run.success);
    assert!(not_run.error.contains("new message"), "{not_run:?}");
    // The next turn's history holds the closed turn.
    let third = &stack.runner.seen()[1].request;
    assert!(
        third
            .messages
            .iter()
            .any(|m| m.text.contains("Shall I search?")),
        "{:?}",
        third.messages
    );

    // CancelTurn on a waiting turn cancels it.
    stack
        .runner
        .push(paused("Shall I search again?", &[(search(), false)]));
    let pause = chat_and_pause(
        &mut stack.client,
        chat_request(&pause.conversation_id, "Find Paris", "table_view"),
    )
    .await;
    let cancelled = stack
        .client
        .cancel_turn(gw::CancelTurnRequest {
            conversation_id: pause.conversation_id.clone(),
            turn_id: String::new(),
        })
        .await
        .expect("cancel")
        .into_inner();
    assert!(cancelled.cancelled);
    assert_eq!(cancelled.turn_id, pause.turn_id);
    let answer_now = last_answer(&mut stack.client, &pause.conversation_id).await;
    assert_eq!(answer_now.state, gw::TurnState::Cancelled as i32);

    // Unanswered, a pause expires (`turns.input_ttl`, 1 s here) and any
    // replica closes it.
    stack
        .runner
        .push(paused("Search Rome?", &[(search(), false)]));
    let pause = chat_and_pause(
        &mut stack.client,
        chat_request(&pause.conversation_id, "Find Rome", "table_view"),
    )
    .await;
    let expired = tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            if let Some(answer) =
                ended_answer(&mut stack.client, &pause.conversation_id, &pause.turn_id).await
            {
                return answer;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await
    .expect("closed once expired");
    assert_eq!(expired.state, gw::TurnState::Completed as i32);
    assert_eq!(expired.stop_reason, "no_answer");
    let late = stack
        .client
        .submit_tool_decisions(submit(
            &pause.conversation_id,
            &pause.turn_id,
            vec![approve("call_search", None)],
        ))
        .await
        .expect_err("expired");
    assert_eq!(reason(&late), "TURN_NOT_AWAITING_INPUT");
    stack.stop().await;
}

#[tokio::test]
async fn only_the_owner_may_decide_and_a_retried_submission_attaches() {
    let mut stack = secured().await;
    let alice = hs256("alice", "parley", 600);
    let mallory = hs256("mallory", "parley", 600);
    stack.runner.push(paused("Search?", &[(search(), false)]));
    let pause = chat_and_pause(
        &mut stack.client,
        with_token(chat_request("", "Find Berlin", "table_view"), &alice),
    )
    .await;
    let theirs = stack
        .client
        .submit_tool_decisions(with_token(
            submit(
                &pause.conversation_id,
                &pause.turn_id,
                vec![approve("call_search", None)],
            ),
            &mallory,
        ))
        .await
        .expect_err("not mallory's");
    assert_eq!(theirs.code(), Code::NotFound, "{theirs:?}");

    stack.runner.push(answer(" Found it."));
    let mut request = submit(
        &pause.conversation_id,
        &pause.turn_id,
        vec![approve("call_search", None)],
    );
    request.request_id = "decide-1".into();
    let first = continued(
        stack
            .client
            .submit_tool_decisions(with_token(request.clone(), &alice))
            .await
            .expect("submitted")
            .into_inner(),
        pause.last_seq(),
    )
    .await;
    assert!(first.success);
    // The same submission again (a client that lost the answer) follows
    // the turn from its start instead of failing.
    let retried = collect(
        stack
            .client
            .submit_tool_decisions(with_token(request, &alice))
            .await
            .expect("a retried submission attaches")
            .into_inner(),
    )
    .await;
    assert_eq!(retried.complete.message, first.message);
    assert_eq!(stack.runner.seen().len(), 2, "nothing ran twice");
    stack.stop().await;
}

#[tokio::test]
async fn a_paused_turn_outlives_a_sigkilled_gateway_and_continues_after_its_restart() {
    let options = Options::default();
    let (runner, runner_addr, parser_addr, _parser) = start_upstreams(&options).await;
    let dir = tempfile::tempdir().expect("temp dir");
    let config = ProcessConfig {
        database_url: format!("sqlite://{}?mode=rwc", dir.path().join("g.db").display()),
        runner: runner_addr,
        parser: parser_addr,
        lease_renew: Duration::from_secs(2),
        lease_ttl: Duration::from_secs(10),
        stream_ahead: 32,
        per_user_concurrent_turns: 0,
    };
    let mut first = GatewayProcess::start(&config, dir.path(), "first").await;
    runner.push(paused("Search?", &[(search(), false)]));
    let pause = chat_and_pause(
        &mut first.client,
        chat_request("", "Find Berlin", "table_view"),
    )
    .await;
    first.kill().await;

    let mut second = GatewayProcess::start(&config, dir.path(), "second").await;
    runner.push(answer(" Found it."));
    let complete = decide(
        &mut second.client,
        &pause,
        vec![approve("call_search", None)],
    )
    .await;
    assert!(complete.success, "{complete:?}");
    assert_eq!(complete.message, "Search? Found it.");
}

#[tokio::test]
async fn a_turn_paused_on_one_replica_continues_on_the_other() {
    let Some((database_url, schema)) =
        postgres::fresh_schema("consent::a_turn_paused_on_one_replica_continues_on_the_other")
            .await
    else {
        return;
    };
    let options = Options::default();
    let (runner, runner_addr, parser_addr, _parser) = start_upstreams(&options).await;
    let dir = tempfile::tempdir().expect("temp dir");
    let config = ProcessConfig {
        database_url,
        runner: runner_addr,
        parser: parser_addr,
        lease_renew: Duration::from_millis(200),
        lease_ttl: Duration::from_secs(1),
        stream_ahead: 32,
        per_user_concurrent_turns: 0,
    };
    let mut a = GatewayProcess::start(&config, dir.path(), "a").await;
    let mut b = GatewayProcess::start(&config, dir.path(), "b").await;
    runner.push(paused("Search?", &[(search(), false)]));
    let pause = chat_and_pause(&mut a.client, chat_request("", "Find Berlin", "table_view")).await;

    // B replays the pause exactly, then continues the turn.
    let replayed =
        drain(resume(&mut b.client, &pause.conversation_id, &pause.turn_id, 0).await).await;
    assert_eq!(replayed, pause.events, "B replays the pause as A sent it");
    runner.push(answer(" Found it."));
    let complete = decide(&mut b.client, &pause, vec![approve("call_search", None)]).await;
    assert!(complete.success, "{complete:?}");
    // A sees the end too.
    let on_a = last_answer(&mut a.client, &pause.conversation_id).await;
    assert_eq!(on_a.state, gw::TurnState::Completed as i32);
    drop(a);
    drop(b);
    postgres::drop_schema(&schema).await;
}

#[tokio::test]
async fn paused_turns_are_bounded_per_user_and_may_block_new_messages() {
    let mut stack = Harness::start(Options {
        tweak: |config| {
            config.turns.per_user.awaiting = 1;
            config.turns.block_on_pending = true;
        },
        ..Options::default()
    })
    .await;
    stack.runner.push(paused("Search?", &[(search(), false)]));
    let pause = chat_and_pause(
        &mut stack.client,
        chat_request("", "Find Berlin", "table_view"),
    )
    .await;

    // With `turns.block_on_pending`, a new message waits for the decision...
    let blocked = stack
        .client
        .chat(chat_request(
            &pause.conversation_id,
            "And Paris?",
            "table_view",
        ))
        .await
        .expect_err("blocked");
    assert_eq!(
        (blocked.code(), reason(&blocked).as_str()),
        (Code::FailedPrecondition, "TURN_AWAITING_INPUT")
    );

    // ...and a second paused turn of the same user is one too many: that
    // turn fails instead of pausing, its call not run.
    stack
        .runner
        .push(paused("Search again?", &[(search(), false)]));
    let second = collect(
        stack
            .client
            .chat(chat_request("", "Find Rome", "table_view"))
            .await
            .expect("chat")
            .into_inner(),
    )
    .await;
    assert!(!second.complete.success);
    assert_eq!(
        second.error.map(|error| error.reason).as_deref(),
        Some("TOO_MANY_PAUSED_TURNS")
    );
    assert!(!second.complete.tool_history[0].success);

    // `cancel_running` closes the waiting turn and runs the new message.
    stack.runner.push(answer("Paris it is."));
    let mut request = chat_request(&pause.conversation_id, "And Paris?", "table_view");
    request.cancel_running = true;
    let next = collect(stack.client.chat(request).await.expect("chat").into_inner()).await;
    assert!(next.complete.success);
    let closed = ended_answer(&mut stack.client, &pause.conversation_id, &pause.turn_id)
        .await
        .expect("closed");
    assert_eq!(closed.state, gw::TurnState::Cancelled as i32);
    stack.stop().await;
}
