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
