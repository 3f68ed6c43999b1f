//! Unit tests of the scripted provider: segment selection, chunking,
//! failures and the embedded demo script.

use futures::StreamExt;
use serde_json::json;

use super::*;
use crate::provider::{OutputSchema, SamplingParams, ToolResult};

fn request(messages: Vec<Message>) -> ChatRequest {
    ChatRequest {
        model: "scripted-demo".into(),
        system: "".into(),
        messages: messages.into(),
        tools: vec![].into(),
        output_schema: None,
        max_output_tokens: None,
        params: SamplingParams::default(),
        cache: Default::default(),
    }
}

fn user(text: &str) -> Message {
    Message::user(text)
}

async fn collect(
    provider: &ScriptedProvider,
    request: ChatRequest,
) -> Vec<Result<StreamEvent, ProviderError>> {
    match provider.stream(request).await {
        Ok(stream) => stream.collect().await,
        Err(error) => vec![Err(error)],
    }
}

fn provider(toml: &str) -> ScriptedProvider {
    ScriptedProvider::new("scripted", Script::from_toml(toml).expect("should succeed"))
}

#[tokio::test]
async fn streams_text_in_chunks_then_usage_and_finish() {
    let p = provider("chunk_chars = 4\n[default]\nsteps = [{ text = \"Hello world\" }]");
    let events = collect(&p, request(vec![user("hi")])).await;
    let texts: Vec<String> = events
        .iter()
        .filter_map(|e| match e {
            Ok(StreamEvent::TextDelta(t)) => Some(t.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(texts, vec!["Hell", "o wo", "rld"]);
    assert!(matches!(
        events[events.len() - 2],
        Ok(StreamEvent::Usage(_))
    ));
    match &events[events.len() - 1] {
        Ok(StreamEvent::Finish(finish)) => assert_eq!(finish.reason, FinishReason::EndTurn),
        other => panic!("expected finish, got {other:?}"),
    }
}

#[tokio::test]
async fn continues_after_tool_results() {
    let p = provider(
        r#"
        [[turns]]
        match = { contains = "weather" }
        steps = [
          { text = "Checking." },
          { tool_call = { name = "a", input = { x = 1 } } },
          { tool_call = { name = "b" } },
          { text = "Done." },
        ]
        "#,
    );
    let first = collect(&p, request(vec![user("the Weather?")])).await;
    let calls: Vec<ToolCall> = first
        .iter()
        .filter_map(|e| match e {
            Ok(StreamEvent::ToolCall(call)) => Some(call.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[0].input, json!({"x": 1}));
    assert_ne!(calls[0].id, calls[1].id);
    assert!(
        matches!(first.last(), Some(Ok(StreamEvent::Finish(f))) if f.reason == FinishReason::ToolUse)
    );

    let history = vec![
        user("the Weather?"),
        Message::Assistant {
            reasoning: vec![],
            text: "Checking.".into(),
            tool_calls: calls.clone(),
        },
        Message::ToolResults(
            calls
                .iter()
                .map(|c| ToolResult {
                    call_id: c.id.clone(),
                    name: c.name.clone(),
                    text: "ok".into(),
                    is_error: false,
                    attachments: Vec::new(),
                })
                .collect(),
        ),
    ];
    let second = collect(&p, request(history)).await;
    let text: String = second
        .iter()
        .filter_map(|e| match e {
            Ok(StreamEvent::TextDelta(t)) => Some(t.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(text, "Done.");
}

#[tokio::test]
async fn limited_failures_fail_then_pass_and_rearm() {
    let p = provider(
        "[default]\nsteps = [{ fail = { status = 429, retry_after = \"1500ms\", times = 1 } }, { text = \"ok\" }]",
    );
    let first = collect(&p, request(vec![user("x")])).await;
    match &first[0] {
        Err(ProviderError::Http {
            status: 429,
            retry_after,
            ..
        }) => {
            assert_eq!(*retry_after, Some(Duration::from_millis(1500)));
        }
        other => panic!("expected a 429, got {other:?}"),
    }
    let second = collect(&p, request(vec![user("x")])).await;
    assert!(matches!(second[0], Ok(StreamEvent::TextDelta(_))));
    let third = collect(&p, request(vec![user("x")])).await;
    assert!(third[0].is_err(), "the step re-arms once it has passed");
}

#[tokio::test]
async fn failures_after_output_are_mid_stream_errors() {
    let p = provider(
        "[default]\nsteps = [{ text = \"partial\" }, { stream_error = { kind = \"overloaded_error\", message = \"busy\" } }]",
    );
    let events = collect(&p, request(vec![user("x")])).await;
    assert!(matches!(events[0], Ok(StreamEvent::TextDelta(_))));
    match events.last() {
        Some(Err(ProviderError::StreamError {
            kind,
            retryable,
            raw,
            ..
        })) => {
            assert_eq!(kind, "overloaded_error");
            assert!(*retryable);
            assert!(raw.contains("busy"));
        }
        other => panic!("expected a stream error, got {other:?}"),
    }
}

#[tokio::test(start_paused = true)]
async fn delays_use_tokio_time() {
    let p = provider("[default]\nsteps = [{ delay = \"5s\" }, { text = \"late\" }]");
    let start = tokio::time::Instant::now();
    let events = collect(&p, request(vec![user("x")])).await;
    assert!(start.elapsed() >= Duration::from_secs(5));
    assert!(matches!(events[0], Ok(StreamEvent::TextDelta(_))));
}

#[tokio::test]
async fn refuses_schemas_for_models_without_structured_output() {
    let p = provider(
        "no_structured_output_models = [\"plain\"]\n[default]\nsteps = [{ text = \"x\" }]",
    );
    assert!(!p.supports_structured_output("plain"));
    assert!(p.supports_structured_output("scripted-demo"));
    let mut req = request(vec![user("x")]);
    req.model = "plain".into();
    req.output_schema = Some(OutputSchema {
        name: "r".into(),
        schema: json!({"type": "object"}),
    });
    assert!(matches!(
        collect(&p, req).await[0],
        Err(ProviderError::Unsupported(_))
    ));
}

#[tokio::test]
async fn without_a_default_an_unmatched_message_is_a_config_error() {
    let p = provider("[[turns]]\nmatch = { exact = \"a\" }\nsteps = [{ text = \"x\" }]");
    assert!(matches!(
        collect(&p, request(vec![user("b")])).await[0],
        Err(ProviderError::Config(_))
    ));
}

#[tokio::test]
async fn the_embedded_demo_script_plays_every_turn() {
    let p = ScriptedProvider::new(
        "scripted",
        Script::from_toml(EMBEDDED_DEMO_SCRIPT).expect("should succeed"),
    );
    let first = collect(&p, request(vec![user("Create a job tracker")])).await;
    assert!(
        first
            .iter()
            .any(|e| matches!(e, Ok(StreamEvent::ToolCall(c)) if c.name == "current_time"))
    );
    let accepted = collect(&p, request(vec![user("I accepted the table")])).await;
    let text: String = accepted
        .iter()
        .filter_map(|e| match e {
            Ok(StreamEvent::TextDelta(t)) => Some(t.as_str()),
            _ => None,
        })
        .collect();
    assert!(text.contains("SUGGESTED_VALUES:") && text.contains("close_chat"));
    let mut structured = request(vec![user("Extract the job")]);
    structured.output_schema = Some(OutputSchema {
        name: "job".into(),
        schema: json!({"type": "object"}),
    });
    let json_text: String = collect(&p, structured)
        .await
        .iter()
        .filter_map(|e| match e {
            Ok(StreamEvent::TextDelta(t)) => Some(t.clone()),
            _ => None,
        })
        .collect();
    assert!(serde_json::from_str::<serde_json::Value>(&json_text).is_ok());
}

#[tokio::test]
async fn an_echo_step_says_what_the_last_tool_results_told_the_model() {
    let p = provider(
        r#"
        chunk_chars = 1000
        [default]
        steps = [
          { tool_call = { name = "delete_rows", id = "d1", provider_data = { thoughtSignature = "sig" } } },
          { echo = "tool_results" },
        ]
        "#,
    );
    let first = collect(&p, request(vec![user("delete")])).await;
    let call = first
        .iter()
        .find_map(|e| match e {
            Ok(StreamEvent::ToolCall(call)) => Some(call.clone()),
            _ => None,
        })
        .expect("a tool call");
    assert_eq!(call.provider_data, Some(json!({"thoughtSignature": "sig"})));
    let result = |id: &str, text: &str, is_error: bool| ToolResult {
        call_id: id.into(),
        name: "delete_rows".into(),
        text: text.into(),
        is_error,
        attachments: Vec::new(),
    };
    let history = vec![
        user("delete"),
        Message::Assistant {
            reasoning: Vec::new(),
            text: String::new(),
            tool_calls: vec![call],
        },
        Message::ToolResults(vec![
            result("d1", "Error (REJECTED): not that one", true),
            result("d2", "deleted", false),
        ]),
    ];
    let text: String = collect(&p, request(history))
        .await
        .into_iter()
        .filter_map(|e| match e {
            Ok(StreamEvent::TextDelta(t)) => Some(t),
            _ => None,
        })
        .collect();
    assert_eq!(
        text,
        "delete_rows (error): Error (REJECTED): not that one\ndelete_rows: deleted"
    );
    assert!(
        Script::from_toml("[default]\nsteps = [{ echo = \"everything\" }]").is_err(),
        "only tool results can be echoed"
    );
    assert!(
        Script::from_toml(
            "[default]\nsteps = [{ tool_call = { name = \"x\", provider_data = 3 } }]"
        )
        .is_err()
    );
}
