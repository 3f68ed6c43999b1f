//! Request conversion: violations and defaults.

use parley_proto::runner::v1 as pb;
use prost_types::Struct;

use super::*;

fn user(text: &str) -> pb::Message {
    pb::Message {
        role: Role::User as i32,
        text: text.into(),
        ..Default::default()
    }
}

fn fields(violations: &[Violation]) -> Vec<&str> {
    violations.iter().map(|v| v.field.as_str()).collect()
}

#[test]
fn an_empty_request_is_refused() {
    let violations = turn_from_request(pb::RunRequest::default(), &Limits::default(), None)
        .expect_err("should fail");
    assert_eq!(fields(&violations), vec!["messages"]);
}

#[test]
fn reports_every_problem_with_its_field() {
    let request = pb::RunRequest {
        messages: vec![
            user("hi"),
            pb::Message {
                role: Role::Unspecified as i32,
                ..Default::default()
            },
            pb::Message {
                role: Role::Tool as i32,
                tool_result: Some(pb::ToolResult {
                    call_id: "nope".into(),
                    ..Default::default()
                }),
                ..Default::default()
            },
        ],
        tools: vec![pb::ToolDefinition {
            name: "t".into(),
            ..Default::default()
        }],
        model: Some(pb::ModelRef {
            parameters: Some(pb::ModelParameters {
                temperature: Some(9.0),
                ..Default::default()
            }),
            ..Default::default()
        }),
        limits: Some(pb::Limits {
            tool_timeout: Some(prost_types::Duration {
                seconds: -1,
                nanos: 0,
            }),
            ..Default::default()
        }),
        ..Default::default()
    };
    let violations = turn_from_request(request, &Limits::default(), None).expect_err("should fail");
    assert_eq!(
        fields(&violations),
        vec![
            "messages[1].role",
            "messages[2].tool_result.call_id",
            "tools[0].endpoint",
            "model.parameters.temperature",
            "limits.tool_timeout",
        ]
    );
}

#[test]
fn a_bad_output_schema_is_refused() {
    let schema = parley_proto::json::to_struct_wrapped(&serde_json::json!({"type": 12}));
    let request = pb::RunRequest {
        messages: vec![user("x")],
        output_schema: Some(schema),
        ..Default::default()
    };
    let violations = turn_from_request(request, &Limits::default(), None).expect_err("should fail");
    assert_eq!(fields(&violations), vec!["output_schema"]);
}

#[test]
fn tool_results_join_and_defaults_apply() {
    let call = |id: &str| pb::ToolCall {
        id: id.into(),
        name: "calc".into(),
        input: Some(Struct::default()),
        provider_data: None,
    };
    let result = |id: &str| pb::Message {
        role: Role::Tool as i32,
        tool_result: Some(pb::ToolResult {
            call_id: id.into(),
            name: "calc".into(),
            text: "2".into(),
            is_error: false,
            attachments: Vec::new(),
        }),
        ..Default::default()
    };
    let request = pb::RunRequest {
        messages: vec![
            user("1+1 and 2+2?"),
            pb::Message {
                role: Role::Assistant as i32,
                tool_calls: vec![call("a"), call("b")],
                ..Default::default()
            },
            result("a"),
            result("b"),
        ],
        limits: Some(pb::Limits {
            max_iterations: 3,
            ..Default::default()
        }),
        ..Default::default()
    };
    let defaults = Limits::default();
    let turn = turn_from_request(request, &defaults, Some(Duration::from_secs(5)))
        .expect("should succeed");
    assert_eq!(turn.messages.len(), 3);
    assert!(matches!(&turn.messages[2], Message::ToolResults(results) if results.len() == 2));
    assert_eq!(turn.limits.max_iterations, 3);
    assert_eq!(turn.limits.tool_timeout, defaults.tool_timeout);
    assert_eq!(
        turn.limits.total_timeout,
        Duration::from_millis(4750),
        "the gRPC deadline caps the turn"
    );
}

#[test]
fn model_names_that_could_leave_the_provider_path_are_refused() {
    for (model, refused) in [
        ("gemini/../../admin", true),
        ("x#frag", true),
        ("x?alt=json", true),
        ("a%2e%2e", true),
        ("a b", true),
        ("gemini-2.5-flash", false),
        ("models/gemini-2.5-pro", false),
        ("llama3.1:8b", false),
        ("openai/gpt-4o_mini", false),
        ("", false),
    ] {
        let request = pb::RunRequest {
            messages: vec![user("hi")],
            model: Some(pb::ModelRef {
                model: model.into(),
                ..Default::default()
            }),
            fallbacks: vec![pb::ModelRef {
                model: model.into(),
                ..Default::default()
            }],
            ..Default::default()
        };
        let result = turn_from_request(request, &Limits::default(), None);
        if refused {
            let violations = result.expect_err(model);
            assert_eq!(
                fields(&violations),
                vec!["model.model", "fallbacks[0].model"],
                "{model}"
            );
        } else {
            assert!(result.is_ok(), "{model}: {result:?}");
        }
    }
    let long = "m".repeat(MAX_MODEL_NAME_BYTES + 1);
    assert!(check_model_name(&long).is_err());
}

fn assistant(calls: Vec<pb::ToolCall>) -> pb::Message {
    pb::Message {
        role: Role::Assistant as i32,
        tool_calls: calls,
        ..Default::default()
    }
}

fn call(id: &str, name: &str) -> pb::ToolCall {
    pb::ToolCall {
        id: id.into(),
        name: name.into(),
        input: Some(Struct::default()),
        provider_data: None,
    }
}

fn tool_result(id: &str) -> pb::Message {
    pb::Message {
        role: Role::Tool as i32,
        tool_result: Some(pb::ToolResult {
            call_id: id.into(),
            name: "t".into(),
            text: id.into(),
            is_error: false,
            attachments: Vec::new(),
        }),
        ..Default::default()
    }
}

fn decision(id: &str, decision: tool_decision::Decision) -> pb::ToolDecision {
    pb::ToolDecision {
        call_id: id.into(),
        decision: Some(decision),
    }
}

#[test]
fn client_tools_and_approvals_are_declared() {
    let schema = serde_json::json!({"type": "object", "required": ["rows"]});
    let tools = tool_defs(vec![
        pb::ToolDefinition {
            name: "pick".into(),
            endpoint: Some(pb::ToolEndpoint {
                kind: Some(Kind::Client(pb::ClientTool {
                    output_schema: Some(parley_proto::json::to_struct_wrapped(&schema)),
                })),
            }),
            ..Default::default()
        },
        pb::ToolDefinition {
            name: "delete".into(),
            endpoint: Some(pb::ToolEndpoint {
                kind: Some(Kind::Builtin("calculator".into())),
            }),
            needs_approval: true,
            ..Default::default()
        },
    ])
    .expect("valid");
    assert_eq!(
        tools[0].endpoint,
        ToolEndpoint::Client {
            output_schema: Some(schema)
        }
    );
    assert!(!tools[0].needs_approval);
    assert!(tools[1].needs_approval);
}

#[test]
fn reasoning_and_provider_data_reach_the_model_and_go_back_out_the_same() {
    let data = serde_json::json!({"thoughtSignature": "c2ln"});
    let mut made = call("a", "t");
    made.provider_data = Some(parley_proto::json::to_struct_wrapped(&data));
    let mut answer = assistant(vec![made]);
    answer.text = "Checking.".into();
    answer.reasoning = vec![
        pb::ReasoningBlock {
            text: "think".into(),
            signature: "sig".into(),
            redacted: String::new(),
        },
        pb::ReasoningBlock {
            redacted: "opaque".into(),
            ..Default::default()
        },
    ];
    let messages = vec![user("hi"), answer, tool_result("a")];
    let request = pb::RunRequest {
        messages: messages.clone(),
        ..Default::default()
    };
    let turn = turn_from_request(request, &Limits::default(), None).expect("valid");
    match &turn.messages[1] {
        Message::Assistant {
            reasoning,
            tool_calls,
            ..
        } => {
            assert_eq!(
                reasoning,
                &[
                    ReasoningBlock {
                        text: "think".into(),
                        signature: Some("sig".into()),
                        redacted: None,
                    },
                    ReasoningBlock {
                        text: String::new(),
                        signature: None,
                        redacted: Some("opaque".into()),
                    },
                ]
            );
            assert_eq!(tool_calls[0].provider_data, Some(data));
        }
        other => panic!("not the model's message: {other:?}"),
    }
    // Back to the wire as a pause sends them: the same messages.
    assert_eq!(crate::convert::event::messages(&turn.messages), messages);
}

#[test]
fn tool_results_are_put_in_the_calls_order() {
    let request = pb::RunRequest {
        messages: vec![
            user("go"),
            assistant(vec![call("b", "t"), call("a", "t"), call("c", "t")]),
            tool_result("a"),
            tool_result("c"),
            tool_result("b"),
        ],
        ..Default::default()
    };
    let turn = turn_from_request(request, &Limits::default(), None).expect("valid");
    match &turn.messages[2] {
        Message::ToolResults(results) => {
            let ids: Vec<&str> = results.iter().map(|r| r.call_id.as_str()).collect();
            assert_eq!(ids, ["b", "a", "c"]);
        }
        other => panic!("not tool results: {other:?}"),
    }
}

#[test]
fn decisions_must_answer_each_pending_call_once() {
    let paused = || {
        vec![
            user("go"),
            assistant(vec![call("a", "t"), call("b", "t"), call("c", "t")]),
            tool_result("a"),
        ]
    };
    let approve = |arguments: Option<serde_json::Value>| {
        tool_decision::Decision::Approve(pb::ToolApproval {
            arguments: arguments
                .as_ref()
                .map(parley_proto::json::to_struct_wrapped),
        })
    };
    let request = pb::RunRequest {
        messages: paused(),
        decisions: vec![
            decision("b", approve(Some(serde_json::json!({"x": 1})))),
            decision(
                "c",
                tool_decision::Decision::Result(pb::ClientToolResult {
                    output: None,
                    error: "closed".into(),
                }),
            ),
        ],
        iterations_done: 2,
        ..Default::default()
    };
    let turn = turn_from_request(request, &Limits::default(), None).expect("valid");
    assert_eq!(turn.iterations_done, 2);
    assert_eq!(
        turn.decisions,
        [
            Decision {
                call_id: "b".into(),
                verdict: Verdict::Approve {
                    arguments: Some(serde_json::json!({"x": 1}))
                },
            },
            Decision {
                call_id: "c".into(),
                verdict: Verdict::Failed("closed".into()),
            },
        ]
    );

    let request = pb::RunRequest {
        messages: paused(),
        decisions: vec![
            decision("a", approve(None)),
            decision("b", approve(None)),
            decision("b", approve(None)),
            pb::ToolDecision {
                call_id: "c".into(),
                decision: None,
            },
        ],
        iterations_done: 3,
        limits: Some(pb::Limits {
            max_iterations: 3,
            ..Default::default()
        }),
        ..Default::default()
    };
    let violations = turn_from_request(request, &Limits::default(), None).expect_err("invalid");
    assert_eq!(
        fields(&violations),
        [
            "iterations_done",
            "decisions[0].call_id",
            "decisions[2].call_id",
            "decisions[3].decision",
            "decisions",
        ]
    );
    assert!(
        violations[1].description.contains("pending: b, c"),
        "{violations:?}"
    );
}

#[test]
fn prompt_cache_hints_must_fit_the_prompt() {
    let request = |stable: u32, key: &str| pb::RunRequest {
        system_prompt: "Stable part.\n\n## CURRENT CONTEXT\nJobs — é".into(),
        system_prompt_stable_bytes: stable,
        prompt_cache_key: key.into(),
        messages: vec![user("hi")],
        ..Default::default()
    };
    let turn = turn_from_request(request(14, "parley-0f3a"), &Limits::default(), None)
        .expect("valid hints");
    assert_eq!(turn.cache.stable_system_bytes, 14);
    assert_eq!(turn.cache.key.as_deref(), Some("parley-0f3a"));
    let none = turn_from_request(request(0, ""), &Limits::default(), None).expect("no hints");
    assert_eq!(none.cache, crate::provider::PromptCache::default());

    let len = u32::try_from(request(0, "").system_prompt.len()).expect("short");
    for (stable, key, field) in [
        (len + 1, "", "system_prompt_stable_bytes"),
        // Inside the two bytes of the final `é`.
        (len - 1, "", "system_prompt_stable_bytes"),
        (0, "with space", "prompt_cache_key"),
        (0, &"k".repeat(65), "prompt_cache_key"),
    ] {
        let violations =
            turn_from_request(request(stable, key), &Limits::default(), None).expect_err(field);
        assert_eq!(fields(&violations), vec![field]);
    }
}
