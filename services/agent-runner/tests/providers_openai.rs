//! The OpenAI-compatible adapter against replayed wire transcripts of
//! OpenAI, Azure, OpenRouter, Ollama, llama.cpp, vLLM and SGLang.

mod support;

use std::time::Duration;

use agent_runner::provider::{
    FinishReason, OutputSchema, Provider, ProviderError, StreamEvent, Usage,
    http::HttpProviderConfig, openai::OpenAiProvider,
};
use serde_json::json;
use support::{
    events::{drain, request, time_tool, weather_tool},
    replay::{End, ReplayServer, Reply},
};

fn provider(server: &ReplayServer) -> OpenAiProvider {
    let mut cfg = HttpProviderConfig::new("openai", server.url("/v1"));
    cfg.api_keys = "sk-test-key".into();
    OpenAiProvider::new(cfg).expect("provider builds")
}

async fn replay(
    reply: Reply,
    req: agent_runner::provider::ChatRequest,
) -> (support::events::Drained, ReplayServer) {
    let server = ReplayServer::start(vec![reply]).await;
    let stream = provider(&server).stream(req).await.expect("stream starts");
    (drain(stream).await, server)
}

#[tokio::test]
async fn plain_text_usage_and_finish() {
    let (out, server) = replay(Reply::sse_fixture("openai/text.sse"), request("gpt-4o")).await;
    assert_eq!(out.text(), "Hello there, how can I help?");
    assert_eq!(
        out.usages(),
        vec![Usage {
            input_tokens: 19,
            output_tokens: 10,
            cached_input_tokens: 4,
            cache_write_tokens: 0,
            reasoning_tokens: 0,
            cost_micros: 0,
        }]
    );
    let finish = out.finish();
    assert_eq!(finish.reason, FinishReason::EndTurn);
    assert_eq!(finish.raw_reason, "stop");
    assert_eq!(
        finish.response_id.as_deref(),
        Some("chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG")
    );
    assert_eq!(finish.response_model.as_deref(), Some("gpt-4o-2024-08-06"));

    let sent = server.single_request();
    assert_eq!(sent.method, "POST");
    assert_eq!(sent.target, "/v1/chat/completions");
    assert_eq!(sent.header("authorization"), Some("Bearer sk-test-key"));
    assert_eq!(sent.header("content-type"), Some("application/json"));
    let body = sent.json();
    assert_eq!(body["model"], "gpt-4o");
    assert_eq!(body["stream"], true);
    assert_eq!(body["stream_options"], json!({"include_usage": true}));
    assert_eq!(
        body["messages"],
        json!([
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": "What is the weather in Paris?"}
        ])
    );
    assert!(body.get("tools").is_none() && body.get("response_format").is_none());
}

#[tokio::test]
async fn a_reasoning_model_with_a_cached_prefix_reports_both_inside_its_totals() {
    let (out, _server) = replay(
        Reply::sse_fixture("openai/cached_reasoning.sse").chunked(7),
        request("o4-mini"),
    )
    .await;
    assert_eq!(out.text(), "The cached prefix saves money.");
    assert_eq!(
        out.usages(),
        vec![Usage {
            input_tokens: 2310,
            output_tokens: 420,
            cached_input_tokens: 2048,
            cache_write_tokens: 0,
            reasoning_tokens: 384,
            cost_micros: 0,
        }],
        "prompt_tokens already holds the cached tokens, completion_tokens the reasoning ones"
    );
}

#[tokio::test]
async fn a_tool_call_split_over_many_fragments_read_byte_by_byte() {
    let mut req = request("gpt-4o");
    req.tools = vec![weather_tool()].into();
    req.max_output_tokens = Some(256);
    req.params.temperature = Some(0.5);
    let (out, server) = replay(
        Reply::sse_fixture("openai/tool_call_split.sse").chunked(1),
        req,
    )
    .await;
    let calls = out.tool_calls();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].id, "call_DdmO9pD3xa9XTPNJ32zg2hcA");
    assert_eq!(calls[0].name, "get_weather");
    assert_eq!(
        calls[0].input,
        json!({"location": "Paris, France", "unit": "celsius"})
    );
    let finish = out.finish();
    assert_eq!(
        (finish.reason, finish.raw_reason.as_str()),
        (FinishReason::ToolUse, "tool_calls")
    );

    let body = server.single_request().json();
    assert_eq!(body["tools"][0]["type"], "function");
    assert_eq!(body["tools"][0]["function"]["name"], "get_weather");
    assert_eq!(
        body["tools"][0]["function"]["parameters"],
        weather_tool().input_schema
    );
    assert_eq!(body["max_completion_tokens"], 256);
    assert_eq!(body["temperature"], 0.5);
}

#[tokio::test]
async fn two_parallel_tool_calls() {
    let mut req = request("gpt-4o");
    req.tools = vec![weather_tool(), time_tool()].into();
    let (out, _server) = replay(
        Reply::sse_fixture("openai/parallel_tool_calls.sse").chunked(7),
        req,
    )
    .await;
    let calls: Vec<_> = out
        .tool_calls()
        .into_iter()
        .map(|c| (c.id, c.name, c.input))
        .collect();
    assert_eq!(
        calls,
        vec![
            (
                "call_9pw1qnYScqvGrCH58HWCvFH6".into(),
                "get_weather".into(),
                json!({"location": "Paris"})
            ),
            (
                "call_Jv6BXAHoLk3tXlVdWzXBTeGS".into(),
                "get_time".into(),
                json!({"tz": "Europe/Paris"})
            ),
        ]
    );
    assert_eq!(out.finish().reason, FinishReason::ToolUse);
}

#[tokio::test]
async fn structured_output_sends_a_strict_json_schema() {
    let schema = json!({
        "type": "object",
        "properties": {"name": {"type": "string"}, "born": {"type": "integer"}},
        "required": ["name", "born"],
        "additionalProperties": false
    });
    let mut req = request("gpt-4o-2024-08-06");
    req.output_schema = Some(OutputSchema {
        name: "person".into(),
        schema: schema.clone(),
    });
    let (out, server) = replay(Reply::sse_fixture("openai/structured.sse").chunked(3), req).await;
    let value: serde_json::Value = serde_json::from_str(&out.text()).expect("the answer is JSON");
    assert_eq!(value, json!({"name": "Ada Lovelace", "born": 1815}));
    assert_eq!(out.finish().reason, FinishReason::EndTurn);
    let body = server.single_request().json();
    assert_eq!(
        body["response_format"],
        json!({"type": "json_schema", "json_schema": {"name": "person", "schema": schema, "strict": true}})
    );
}

#[tokio::test]
async fn structured_output_is_refused_for_listed_models_before_any_request() {
    let server = ReplayServer::start(vec![]).await;
    let mut cfg = HttpProviderConfig::new("ollama", server.url("/v1"));
    cfg.no_structured_output_models = vec!["llama2*".into()];
    let provider = OpenAiProvider::new(cfg).expect("provider builds");
    assert!(!provider.supports_structured_output("llama2:7b"));
    assert!(provider.supports_structured_output("llama3.2"));
    let mut req = request("llama2:7b");
    req.output_schema = Some(OutputSchema {
        name: "x".into(),
        schema: json!({"type": "object"}),
    });
    match provider.stream(req).await {
        Err(ProviderError::Unsupported(message)) => {
            assert!(message.contains("llama2:7b"), "{message}")
        }
        other => panic!("expected Unsupported, got {:?}", other.map(|_| "a stream")),
    }
    assert!(server.requests().is_empty());
}

#[tokio::test]
async fn a_dropped_connection_is_a_connection_error() {
    let reply = Reply::sse_fixture("openai/truncated.sse").end(End::Abort);
    let (out, _server) = replay(reply, request("gpt-4o")).await;
    assert!(
        matches!(out.error(), ProviderError::Connection(_)),
        "{:?}",
        out.error
    );
}

#[tokio::test]
async fn ollama_whole_call_in_one_chunk_and_reasoning_field() {
    let server =
        ReplayServer::start(vec![Reply::sse_fixture("openai/ollama_whole_call.sse")]).await;
    let provider = OpenAiProvider::new(HttpProviderConfig::new("ollama", server.url("/v1")))
        .expect("provider builds");
    let mut req = request("qwen3:8b");
    req.tools = vec![weather_tool()].into();
    req.max_output_tokens = Some(512);
    let out = drain(provider.stream(req).await.expect("stream starts")).await;
    assert_eq!(out.reasoning(), "The user wants weather.");
    assert_eq!(out.reasoning_blocks().len(), 1);
    let calls = out.tool_calls();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].id, "call_x7k2m9qa");
    assert_eq!(calls[0].input, json!({"location": "Paris"}));
    assert_eq!(out.usages()[0].output_tokens, 42);
    assert_eq!(out.finish().reason, FinishReason::ToolUse);

    let sent = server.single_request();
    assert_eq!(
        sent.header("authorization"),
        None,
        "no key configured, none sent"
    );
    let body = sent.json();
    assert_eq!(
        body["max_tokens"], 512,
        "compatible servers get the legacy field too"
    );
    assert_eq!(body["max_completion_tokens"], 512);
}

#[tokio::test]
async fn llamacpp_repeated_names_and_reasoning_content() {
    let (out, _server) = replay(
        Reply::sse_fixture("openai/llamacpp_repeated_name.sse").chunked(1),
        request("m"),
    )
    .await;
    assert_eq!(out.reasoning(), "Need the weather tool.");
    let calls = out.tool_calls();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].name, "get_weather");
    assert_eq!(calls[0].id, "VLLm0gZk7kc1YJpW3dI2yWuvtX4JuwQp");
    assert_eq!(calls[0].input, json!({"location": "Paris"}));
}

#[tokio::test]
async fn llamacpp_think_tags_in_content_become_reasoning() {
    let (out, _server) = replay(
        Reply::sse_fixture("openai/llamacpp_think_tags.sse").chunked(1),
        request("m"),
    )
    .await;
    assert_eq!(out.reasoning(), "Two plus two.");
    assert_eq!(out.text(), "It is 4.");
    assert_eq!(out.finish().reason, FinishReason::EndTurn);
}

#[tokio::test]
async fn vllm_missing_first_arguments_trailing_empty_fragment_and_usage_everywhere() {
    let (out, _server) = replay(Reply::sse_fixture("openai/vllm_quirks.sse"), request("m")).await;
    let calls = out.tool_calls();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].id, "chatcmpl-tool-8d6f0c1b2a3e4f5d");
    assert_eq!(calls[0].input, json!({"location": "Paris"}));
    assert_eq!(out.usages().len(), 1, "usage is reported once, the latest");
    assert_eq!(out.usages()[0].output_tokens, 9);
    assert_eq!(out.finish().raw_reason, "tool_calls");
}

#[tokio::test]
async fn a_second_call_at_index_zero_starts_a_new_call() {
    let (out, _server) = replay(
        Reply::sse_fixture("openai/index0_collision.sse"),
        request("m"),
    )
    .await;
    let calls: Vec<_> = out
        .tool_calls()
        .into_iter()
        .map(|c| (c.id, c.input))
        .collect();
    assert_eq!(
        calls,
        vec![
            ("call_0c1d".into(), json!({"location": "Paris"})),
            ("call_9e8f".into(), json!({"location": "Rome"})),
        ]
    );
}

#[tokio::test]
async fn azure_empty_first_choices_are_skipped() {
    let (out, _server) = replay(
        Reply::sse_fixture("openai/azure_empty_first.sse"),
        request("m"),
    )
    .await;
    assert_eq!(out.text(), "Bonjour");
    let finish = out.finish();
    assert_eq!(finish.response_model.as_deref(), Some("gpt-4o-2024-11-20"));
    assert_eq!(
        finish.response_id.as_deref(),
        Some("chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG")
    );
}

#[tokio::test]
async fn openrouter_comments_then_an_error_chunk() {
    let (out, _server) = replay(
        Reply::sse_fixture("openai/openrouter_comment_error.sse"),
        request("m"),
    )
    .await;
    assert_eq!(out.text(), "Let me check");
    match out.error() {
        ProviderError::StreamError {
            message,
            retryable,
            raw,
            ..
        } => {
            assert_eq!(message, "Provider returned error");
            assert!(
                *retryable,
                "a 502 from the upstream provider is worth a retry"
            );
            assert!(raw.contains("upstream connect error"));
        }
        other => panic!("unexpected {other:?}"),
    }
}

#[tokio::test]
async fn vllm_error_object_is_a_stream_error() {
    let (out, _server) = replay(
        Reply::sse_fixture("openai/vllm_error_object.sse"),
        request("m"),
    )
    .await;
    match out.error() {
        ProviderError::StreamError {
            kind,
            message,
            retryable,
            ..
        } => {
            assert_eq!(kind, "BadRequestError");
            assert!(message.contains("maximum context length"));
            assert!(!*retryable);
        }
        other => panic!("unexpected {other:?}"),
    }
}

#[tokio::test]
async fn refusals_are_text_with_a_refusal_finish() {
    let (out, _server) = replay(Reply::sse_fixture("openai/refusal.sse"), request("gpt-4o")).await;
    assert_eq!(out.text(), "I'm sorry, I can't help with that.");
    let finish = out.finish();
    assert_eq!(
        (finish.reason, finish.raw_reason.as_str()),
        (FinishReason::Refusal, "stop")
    );
}

#[tokio::test]
async fn a_tool_call_cut_by_the_token_limit_is_never_final() {
    let (out, _server) = replay(
        Reply::sse_fixture("openai/length_cut_tool_call.sse"),
        request("gpt-4o"),
    )
    .await;
    assert!(out.tool_calls().is_empty());
    assert_eq!(out.finish().reason, FinishReason::MaxTokens);
}

#[tokio::test]
async fn dropping_the_stream_closes_the_provider_connection() {
    let reply = Reply::sse_fixture("openai/text.sse")
        .chunked(40)
        .delay(Duration::from_millis(20))
        .end(End::Hang);
    let server = ReplayServer::start(vec![reply]).await;
    let mut stream = provider(&server)
        .stream(request("gpt-4o"))
        .await
        .expect("stream starts");
    let first = futures::StreamExt::next(&mut stream).await;
    assert!(
        matches!(first, Some(Ok(StreamEvent::TextDelta(_)))),
        "{first:?}"
    );
    let dropped_at = std::time::Instant::now();
    drop(stream);
    let closed_at = server
        .wait_client_closed(0, Duration::from_secs(5))
        .await
        .expect("the server saw the connection close");
    assert!(closed_at >= dropped_at);
    assert!(!server.connections()[0].reply_finished);
}

#[tokio::test]
async fn a_refused_connection_is_a_connection_error() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind port 0");
    let addr = listener.local_addr().expect("local addr");
    drop(listener);
    let provider = OpenAiProvider::new(HttpProviderConfig::new(
        "openai",
        format!("http://{addr}/v1"),
    ))
    .expect("provider builds");
    match provider.stream(request("gpt-4o")).await {
        Err(ProviderError::Connection(message)) => assert!(!message.is_empty()),
        other => panic!(
            "expected a connection error, got {:?}",
            other.map(|_| "a stream")
        ),
    }
}

#[tokio::test]
async fn a_200_json_document_instead_of_a_stream_is_malformed_with_the_body() {
    let body = r#"{"id":"chatcmpl-1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}]}"#;
    let server = ReplayServer::start(vec![Reply::json(200, body)]).await;
    match provider(&server).stream(request("gpt-4o")).await {
        Err(ProviderError::Malformed { reason, raw }) => {
            assert!(reason.contains("instead of an event stream"), "{reason}");
            assert_eq!(raw, body);
        }
        other => panic!("expected malformed, got {:?}", other.map(|_| "a stream")),
    }
}
