//! The Gemini adapter against replayed `streamGenerateContent?alt=sse`
//! transcripts (CRLF framing, no end marker).

mod support;

use agent_runner::provider::{
    ChatRequest, FinishReason, OutputSchema, Provider, ProviderError, Usage,
    gemini::{GeminiProvider, dropped_schema_keywords},
    http::HttpProviderConfig,
};
use serde_json::json;
use support::{
    events::{Drained, drain, follow_up, request, time_tool, weather_tool},
    replay::{ReplayServer, Reply, fixture},
};

fn provider(server: &ReplayServer) -> GeminiProvider {
    let mut cfg = HttpProviderConfig::new("gemini", server.url("/v1beta"));
    cfg.api_keys = "AIza-test".into();
    GeminiProvider::new(cfg).expect("provider builds")
}

async fn replay(reply: Reply, req: ChatRequest) -> (Drained, ReplayServer) {
    let server = ReplayServer::start(vec![reply]).await;
    let stream = provider(&server).stream(req).await.expect("stream starts");
    (drain(stream).await, server)
}

#[test]
fn the_crlf_framing_is_in_the_fixture_bytes() {
    let bytes = fixture("gemini/text.sse");
    assert!(
        bytes.windows(4).any(|w| w == b"}\r\n\r"),
        "fixture lost its CRLF framing"
    );
}

#[tokio::test]
async fn plain_text_with_cumulative_usage() {
    let (out, server) = replay(
        Reply::sse_fixture("gemini/text.sse").chunked(1),
        request("gemini-2.5-flash"),
    )
    .await;
    assert_eq!(out.text(), "The weather in Paris is mild and sunny.");
    assert_eq!(
        out.usages(),
        vec![Usage {
            input_tokens: 12,
            output_tokens: 10,
            cached_input_tokens: 4,
            cache_write_tokens: 0,
            reasoning_tokens: 0,
            cost_micros: 0,
        }],
        "usage is cumulative: only the last counts, reported once"
    );
    let finish = out.finish();
    assert_eq!(
        (finish.reason, finish.raw_reason.as_str()),
        (FinishReason::EndTurn, "STOP")
    );
    assert_eq!(
        finish.response_id.as_deref(),
        Some("mjJQabv1Ma2p1MkP2cqkgAQ")
    );
    assert_eq!(finish.response_model.as_deref(), Some("gemini-2.5-flash"));

    let sent = server.single_request();
    assert_eq!(
        sent.target,
        "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
    );
    assert_eq!(sent.header("x-goog-api-key"), Some("AIza-test"));
    assert_eq!(sent.header("authorization"), None);
    let body = sent.json();
    assert_eq!(
        body["systemInstruction"],
        json!({"parts": [{"text": "You are terse."}]})
    );
    assert_eq!(
        body["contents"],
        json!([{"role": "user", "parts": [{"text": "What is the weather in Paris?"}]}])
    );
    assert!(body.get("generationConfig").is_none());
}

#[tokio::test]
async fn an_implicit_cache_hit_and_thoughts_are_parts_of_the_totals() {
    let (out, _server) = replay(
        Reply::sse_fixture("gemini/cached_thinking.sse").chunked(3),
        request("gemini-2.5-flash"),
    )
    .await;
    assert_eq!(out.text(), "The sum is 42.");
    assert_eq!(
        out.usages(),
        vec![Usage {
            input_tokens: 4096,
            output_tokens: 6 + 75,
            cached_input_tokens: 3072,
            cache_write_tokens: 0,
            reasoning_tokens: 75,
            cost_micros: 0,
        }],
        "promptTokenCount holds the cached tokens; thoughts are counted apart from candidates"
    );
}

#[tokio::test]
async fn a_function_call_with_thought_and_signature_read_byte_by_byte() {
    let mut req = request("gemini-2.5-flash");
    req.tools = vec![weather_tool()].into();
    req.max_output_tokens = Some(800);
    req.params.thinking_budget = Some(1024);
    let (out, server) = replay(
        Reply::sse_fixture("gemini/function_call.sse").chunked(1),
        req,
    )
    .await;
    assert_eq!(
        out.reasoning(),
        "**Checking the forecast**\nThe user asks for Paris weather."
    );
    let calls = out.tool_calls();
    assert_eq!(calls.len(), 1);
    assert!(
        calls[0].id.starts_with("call_"),
        "no id from Gemini: one is synthesized"
    );
    assert_eq!(calls[0].name, "get_weather");
    assert_eq!(
        calls[0].input,
        json!({"location": "Paris, France", "unit": "celsius"})
    );
    assert_eq!(
        calls[0].provider_data,
        Some(json!({"thoughtSignature": "CiQB0e2Kb7zcAbsn/v9oJ1mUeW5a2tH1x0Rk3Lq+uPr0b0C0Xg=="}))
    );
    assert_eq!(out.usages()[0].reasoning_tokens, 20);
    let finish = out.finish();
    assert_eq!(
        (finish.reason, finish.raw_reason.as_str()),
        (FinishReason::ToolUse, "STOP")
    );

    let body = server.single_request().json();
    let declaration = &body["tools"][0]["functionDeclarations"][0];
    assert_eq!(declaration["name"], "get_weather");
    assert_eq!(
        declaration["parameters"],
        json!({
            "type": "object",
            "properties": {
                "location": {"type": "string"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"], "format": "enum"}
            },
            "required": ["location"]
        }),
        "additionalProperties is dropped for Gemini"
    );
    assert_eq!(body["generationConfig"]["maxOutputTokens"], 800);
    assert_eq!(
        body["generationConfig"]["thinkingConfig"],
        json!({"thinkingBudget": 1024, "includeThoughts": true})
    );

    // The next request echoes the signature and answers by name.
    let next = follow_up("gemini-2.5-flash", &out, "18°C, sunny", false);
    let server = ReplayServer::start(vec![Reply::sse_fixture("gemini/text.sse")]).await;
    drain(provider(&server).stream(next).await.expect("stream starts"))
        .await
        .finish();
    let body = server.single_request().json();
    assert_eq!(
        body["contents"][1],
        json!({"role": "model", "parts": [{
            "functionCall": {"name": "get_weather", "args": {"location": "Paris, France", "unit": "celsius"}},
            "thoughtSignature": "CiQB0e2Kb7zcAbsn/v9oJ1mUeW5a2tH1x0Rk3Lq+uPr0b0C0Xg=="
        }]})
    );
    assert_eq!(
        body["contents"][2],
        json!({"role": "user", "parts": [{"functionResponse": {"name": "get_weather", "response": {"result": "18°C, sunny"}}}]})
    );
}

#[tokio::test]
async fn two_parallel_function_calls_in_one_chunk() {
    let mut req = request("gemini-2.5-flash");
    req.tools = vec![weather_tool(), time_tool()].into();
    let (out, _server) = replay(
        Reply::sse_fixture("gemini/parallel_calls.sse").chunked(9),
        req,
    )
    .await;
    let calls = out.tool_calls();
    let summary: Vec<_> = calls
        .iter()
        .map(|c| (c.name.as_str(), c.input.clone()))
        .collect();
    assert_eq!(
        summary,
        vec![
            ("get_weather", json!({"location": "Paris"})),
            ("get_time", json!({"tz": "Europe/Paris"}))
        ]
    );
    assert_ne!(calls[0].id, calls[1].id);
    assert!(calls[1].provider_data.is_none());
    assert_eq!(out.finish().reason, FinishReason::ToolUse);
}

#[tokio::test]
async fn thought_parts_are_reasoning() {
    let (out, _server) = replay(
        Reply::sse_fixture("gemini/thinking.sse"),
        request("gemini-2.5-pro"),
    )
    .await;
    assert_eq!(out.reasoning(), "**Adding numbers**\nTwo plus two is four.");
    assert_eq!(out.reasoning_blocks().len(), 1);
    assert_eq!(out.text(), "4");
    assert_eq!(
        out.usages(),
        vec![Usage {
            input_tokens: 9,
            output_tokens: 53,
            cached_input_tokens: 0,
            cache_write_tokens: 0,
            reasoning_tokens: 52,
            cost_micros: 0,
        }]
    );
}

#[tokio::test]
async fn structured_output_normalises_the_schema_and_says_what_was_dropped() {
    let schema = json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "born": {"type": "integer", "exclusiveMinimum": 0},
            "email": {"type": ["string", "null"], "format": "email"}
        },
        "required": ["name", "born"],
        "additionalProperties": false
    });
    let mut dropped = dropped_schema_keywords(&schema);
    dropped.sort();
    assert_eq!(
        dropped,
        vec![
            "$schema at /",
            "additionalProperties at /",
            "exclusiveMinimum at /properties/born",
            "format \"email\" at /properties/email",
        ]
    );
    let mut req = request("gemini-2.5-flash");
    req.output_schema = Some(OutputSchema {
        name: "person".into(),
        schema: schema.clone(),
    });
    let (_, dropped_by_request) = {
        let server = ReplayServer::start(vec![]).await;
        provider(&server).request_body(&req)
    };
    assert_eq!(dropped_by_request.len(), 4);
    assert!(
        dropped_by_request
            .iter()
            .all(|d| d.starts_with("responseSchema: "))
    );

    let (out, server) = replay(Reply::sse_fixture("gemini/structured.sse"), req).await;
    let value: serde_json::Value = serde_json::from_str(&out.text()).expect("JSON answer");
    assert_eq!(value, json!({"name": "Ada Lovelace", "born": 1815}));
    let config = &server.single_request().json()["generationConfig"];
    assert_eq!(config["responseMimeType"], "application/json");
    assert_eq!(
        config["responseSchema"],
        json!({
            "type": "object",
            "properties": {
                "name": {"type": "string"},
                "born": {"type": "integer"},
                "email": {"type": "string", "nullable": true}
            },
            "required": ["name", "born"]
        })
    );
}

#[tokio::test]
async fn structured_output_refused_for_listed_models() {
    let server = ReplayServer::start(vec![]).await;
    let mut cfg = HttpProviderConfig::new("gemini", server.url("/v1beta"));
    cfg.structured_output = false;
    let provider = GeminiProvider::new(cfg).expect("provider builds");
    let mut req = request("gemini-2.5-flash");
    req.output_schema = Some(OutputSchema {
        name: "x".into(),
        schema: json!({"type": "object"}),
    });
    assert!(
        matches!(provider.stream(req).await, Err(ProviderError::Unsupported(m)) if m.contains("gemini-2.5-flash"))
    );
    assert!(server.requests().is_empty());
}

#[tokio::test]
async fn http_503_is_an_http_error() {
    let server = ReplayServer::start(vec![Reply::json(
        503,
        fixture("gemini/overloaded_503.json"),
    )])
    .await;
    assert!(matches!(
        provider(&server).stream(request("m")).await,
        Err(ProviderError::Http { status: 503, .. })
    ));
}

#[tokio::test]
async fn finish_reasons_keep_the_raw_value() {
    let cases = [
        (
            "gemini/max_tokens.sse",
            FinishReason::MaxTokens,
            "MAX_TOKENS",
        ),
        (
            "gemini/blocked_prompt.sse",
            FinishReason::ContentFilter,
            "PROHIBITED_CONTENT",
        ),
        (
            "gemini/malformed_function_call.sse",
            FinishReason::Other,
            "MALFORMED_FUNCTION_CALL",
        ),
    ];
    for (path, reason, raw) in cases {
        let (out, _server) = replay(Reply::sse_fixture(path), request("m")).await;
        let finish = out.finish();
        assert_eq!(
            (finish.reason, finish.raw_reason.as_str()),
            (reason, raw),
            "{path}"
        );
    }
}
