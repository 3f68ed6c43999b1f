//! The Anthropic Messages adapter against replayed wire transcripts.

mod support;

use agent_runner::provider::{
    ChatRequest, FinishReason, Message, OutputSchema, Provider, ProviderError, ReasoningBlock,
    ToolCall, ToolResult, Usage, anthropic::AnthropicProvider, http::HttpProviderConfig,
};
use serde_json::json;
use support::{
    events::{Drained, drain, follow_up, request, time_tool, weather_tool},
    replay::{ReplayServer, Reply, fixture},
};

fn provider(server: &ReplayServer) -> AnthropicProvider {
    let mut cfg = HttpProviderConfig::new("anthropic", server.url(""));
    cfg.api_keys = "sk-ant-test".into();
    AnthropicProvider::new(cfg).expect("provider builds")
}

async fn replay(reply: Reply, req: ChatRequest) -> (Drained, ReplayServer) {
    let server = ReplayServer::start(vec![reply]).await;
    let stream = provider(&server).stream(req).await.expect("stream starts");
    (drain(stream).await, server)
}

#[tokio::test]
async fn plain_text_with_ping_padding_and_cache_usage() {
    let (out, server) = replay(
        Reply::sse_fixture("anthropic/text.sse").chunked(1),
        request("claude-sonnet-4-5"),
    )
    .await;
    assert_eq!(out.text(), "Hello! It is sunny.");
    assert_eq!(
        out.usages(),
        vec![Usage {
            input_tokens: 25 + 2048 + 12,
            output_tokens: 15,
            cached_input_tokens: 2048,
            cache_write_tokens: 12,
            reasoning_tokens: 0,
            cost_micros: 0,
        }]
    );
    let finish = out.finish();
    assert_eq!(
        (finish.reason, finish.raw_reason.as_str()),
        (FinishReason::EndTurn, "end_turn")
    );
    assert_eq!(
        finish.response_id.as_deref(),
        Some("msg_01XFDUDYJgAACzvnptvVoYEL")
    );
    assert_eq!(
        finish.response_model.as_deref(),
        Some("claude-sonnet-4-5-20250929")
    );

    let sent = server.single_request();
    assert_eq!(sent.target, "/v1/messages");
    assert_eq!(sent.header("x-api-key"), Some("sk-ant-test"));
    assert_eq!(sent.header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(sent.header("authorization"), None);
    let body = sent.json();
    assert_eq!(body["model"], "claude-sonnet-4-5");
    assert_eq!(
        body["max_tokens"], 4096,
        "max_tokens is required: a default is sent"
    );
    assert_eq!(body["stream"], true);
    assert_eq!(body["system"], "You are terse.");
    assert_eq!(
        body["messages"],
        json!([{"role": "user", "content": [{"type": "text", "text": "What is the weather in Paris?"}]}])
    );
}

#[tokio::test]
async fn a_cache_write_counts_once_though_message_delta_repeats_the_usage() {
    let (out, _server) = replay(
        Reply::sse_fixture("anthropic/cache_write.sse").chunked(5),
        request("claude-sonnet-4-5"),
    )
    .await;
    assert_eq!(out.text(), "Written to the cache.");
    assert_eq!(
        out.usages(),
        vec![Usage {
            input_tokens: 3 + 1800,
            output_tokens: 57,
            cached_input_tokens: 0,
            cache_write_tokens: 1800,
            reasoning_tokens: 0,
            cost_micros: 0,
        }],
        "input is the whole prompt: the uncached tokens plus the cache write"
    );
}

#[tokio::test]
async fn a_tool_use_split_over_input_json_deltas() {
    let mut req = request("claude-sonnet-4-5");
    req.tools = vec![weather_tool()].into();
    req.max_output_tokens = Some(1024);
    let (out, server) = replay(
        Reply::sse_fixture("anthropic/tool_use_split.sse").chunked(3),
        req,
    )
    .await;
    assert_eq!(out.text(), "Okay, let's check the weather.");
    let calls = out.tool_calls();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].id, "toolu_01T1x1fJ34qAmk2tNTrN7Up6");
    assert_eq!(calls[0].name, "get_weather");
    assert_eq!(
        calls[0].input,
        json!({"location": "San Francisco, CA", "unit": "fahrenheit"})
    );
    assert_eq!(out.finish().reason, FinishReason::ToolUse);
    let body = server.single_request().json();
    assert_eq!(body["max_tokens"], 1024);
    assert_eq!(
        body["tools"],
        json!([{"name": "get_weather", "description": "Current weather for a place.", "input_schema": weather_tool().input_schema}])
    );
}

#[tokio::test]
async fn parallel_tool_uses_including_one_without_arguments() {
    let mut req = request("claude-sonnet-4-5");
    req.tools = vec![weather_tool(), time_tool()].into();
    let (out, _server) = replay(Reply::sse_fixture("anthropic/parallel_tool_use.sse"), req).await;
    let calls: Vec<_> = out
        .tool_calls()
        .into_iter()
        .map(|c| (c.name, c.input))
        .collect();
    assert_eq!(
        calls,
        vec![
            ("get_weather".into(), json!({"location": "Paris"})),
            ("get_time".into(), json!({"tz": "Europe/Paris"})),
            ("list_tools".into(), json!({})),
        ]
    );
    assert_eq!(out.finish().raw_reason, "tool_use");
}

#[tokio::test]
async fn thinking_with_signature_and_redacted_thinking_are_kept_for_replay() {
    let mut req = request("claude-sonnet-4-5");
    req.tools = vec![weather_tool()].into();
    req.params.thinking_budget = Some(2048);
    let (out, server) = replay(
        Reply::sse_fixture("anthropic/thinking_tool_use.sse").chunked(11),
        req,
    )
    .await;
    assert_eq!(
        out.reasoning(),
        "The user wants the weather. I will call get_weather."
    );
    assert_eq!(
        out.reasoning_blocks(),
        vec![
            ReasoningBlock {
                text: "The user wants the weather. I will call get_weather.".into(),
                signature: Some(
                    "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds6ZKHVnKyA==".into()
                ),
                redacted: None,
            },
            ReasoningBlock {
                text: String::new(),
                signature: None,
                redacted: Some(
                    "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpP".into()
                ),
            },
        ]
    );
    assert_eq!(out.tool_calls()[0].input, json!({"location": "Paris"}));
    let body = server.single_request().json();
    assert_eq!(
        body["thinking"],
        json!({"type": "enabled", "budget_tokens": 2048})
    );
    assert_eq!(body["max_tokens"], 2048 + 4096);

    // The next request replays the thinking blocks before the tool_use and
    // every result in one user message.
    let next = follow_up("claude-sonnet-4-5", &out, "service down", true);
    let server = ReplayServer::start(vec![Reply::sse_fixture("anthropic/text.sse")]).await;
    drain(provider(&server).stream(next).await.expect("stream starts"))
        .await
        .finish();
    let body = server.single_request().json();
    let assistant = &body["messages"][1];
    assert_eq!(assistant["role"], "assistant");
    let kinds: Vec<_> = assistant["content"]
        .as_array()
        .expect("blocks")
        .iter()
        .map(|b| b["type"].clone())
        .collect();
    assert_eq!(
        kinds,
        vec![
            json!("thinking"),
            json!("redacted_thinking"),
            json!("tool_use")
        ]
    );
    assert_eq!(
        body["messages"][2],
        json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_01CswdEQBMshySk6Y9DFKrfq", "content": "service down", "is_error": true}]})
    );
}

#[tokio::test]
async fn native_structured_output_through_output_config() {
    let schema = json!({"type": "object", "properties": {"name": {"type": "string"}, "born": {"type": "integer"}}, "required": ["name", "born"], "additionalProperties": false});
    let mut req = request("claude-sonnet-4-5");
    req.output_schema = Some(OutputSchema {
        name: "person".into(),
        schema: schema.clone(),
    });
    let (out, server) = replay(Reply::sse_fixture("anthropic/structured.sse"), req).await;
    let value: serde_json::Value = serde_json::from_str(&out.text()).expect("JSON answer");
    assert_eq!(value, json!({"name": "Ada Lovelace", "born": 1815}));
    let sent = server.single_request();
    assert_eq!(
        sent.json()["output_config"],
        json!({"format": {"type": "json_schema", "schema": schema}})
    );
    assert_eq!(
        sent.header("anthropic-beta"),
        None,
        "no beta header for the GA API"
    );
}

#[tokio::test]
async fn structured_output_refused_for_older_models() {
    let server = ReplayServer::start(vec![]).await;
    let mut req = request("claude-3-5-haiku-latest");
    req.output_schema = Some(OutputSchema {
        name: "x".into(),
        schema: json!({"type": "object"}),
    });
    let result = provider(&server).stream(req).await;
    assert!(
        matches!(result, Err(ProviderError::Unsupported(m)) if m.contains("claude-3-5-haiku-latest"))
    );
    assert!(server.requests().is_empty());
}

#[tokio::test]
async fn http_529_overloaded_has_no_retry_delay() {
    let server = ReplayServer::start(vec![Reply::json(
        529,
        fixture("anthropic/overloaded_529.json"),
    )])
    .await;
    assert!(matches!(
        provider(&server).stream(request("m")).await,
        Err(ProviderError::Http {
            status: 529,
            retry_after: None,
            ..
        })
    ));
}

#[tokio::test]
async fn a_tool_input_cut_by_max_tokens_is_never_final() {
    let (out, _server) = replay(
        Reply::sse_fixture("anthropic/max_tokens_cut_tool.sse"),
        request("m"),
    )
    .await;
    assert!(out.tool_calls().is_empty());
    assert_eq!(out.finish().reason, FinishReason::MaxTokens);
}

#[tokio::test]
async fn tool_calls_from_history_keep_their_ids() {
    let mut req = request("claude-sonnet-4-5");
    let mut messages = req.messages.to_vec();
    messages.push(Message::Assistant {
        reasoning: vec![],
        text: "Checking.".into(),
        tool_calls: vec![ToolCall {
            id: "toolu_x".into(),
            name: "get_weather".into(),
            input: json!({"location": "Paris"}),
            provider_data: None,
        }],
    });
    messages.push(Message::ToolResults(vec![ToolResult {
        call_id: "toolu_x".into(),
        name: "get_weather".into(),
        text: "18°C".into(),
        is_error: false,
        attachments: Vec::new(),
    }]));
    req.messages = messages.into();
    let (_, server) = replay(Reply::sse_fixture("anthropic/text.sse"), req).await;
    let body = server.single_request().json();
    assert_eq!(
        body["messages"][1]["content"],
        json!([{"type": "text", "text": "Checking."}, {"type": "tool_use", "id": "toolu_x", "name": "get_weather", "input": {"location": "Paris"}}])
    );
    assert_eq!(
        body["messages"][2]["content"],
        json!([{"type": "tool_result", "tool_use_id": "toolu_x", "content": "18°C"}])
    );
}
