//! The Chat Completions request body: messages, tools, limits and the
//! `response_format` of native structured output.

use serde_json::{Map, Value, json};

use super::Flavor;
use crate::provider::{
    ChatRequest, Message, ToolSpec,
    wire::body::{parameters, put},
};

/// Builds the streaming Chat Completions body for `request`; with
/// `prompt_cache`, with its `prompt_cache_key` (OpenAI caches long prefixes
/// by itself; the key keeps the requests of one page and conversation on
/// the same cache).
pub(crate) fn body(request: &ChatRequest, flavor: Flavor, prompt_cache: bool) -> Value {
    let mut body = Map::new();
    body.insert("model".into(), json!(request.model));
    body.insert("messages".into(), Value::Array(messages(request)));
    body.insert("stream".into(), json!(true));
    body.insert("stream_options".into(), json!({ "include_usage": true }));
    if !request.tools.is_empty() {
        let tools = request.tools.iter().map(tool).collect();
        body.insert("tools".into(), Value::Array(tools));
    }
    if let Some(limit) = request.max_output_tokens {
        // Reasoning models reject the legacy `max_tokens`; servers that
        // predate `max_completion_tokens` (Ollama, older llama.cpp) ignore
        // it, so compatible servers get both.
        body.insert("max_completion_tokens".into(), json!(limit));
        if flavor == Flavor::Compatible {
            body.insert("max_tokens".into(), json!(limit));
        }
    }
    let params = &request.params;
    put(&mut body, "temperature", params.temperature);
    put(&mut body, "top_p", params.top_p);
    put(
        &mut body,
        "reasoning_effort",
        params.reasoning_effort.as_deref(),
    );
    if let Some(schema) = &request.output_schema {
        body.insert(
            "response_format".into(),
            json!({
                "type": "json_schema",
                "json_schema": {
                    "name": schema_name(&schema.name),
                    "schema": schema.schema,
                    "strict": true,
                }
            }),
        );
    }
    if prompt_cache && let Some(key) = &request.cache.key {
        body.insert("prompt_cache_key".into(), json!(key));
    }
    Value::Object(body)
}

/// OpenAI allows `[a-zA-Z0-9_-]{1,64}` as a schema name.
fn schema_name(name: &str) -> String {
    let cleaned: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .take(64)
        .collect();
    if cleaned.is_empty() {
        "response".into()
    } else {
        cleaned
    }
}

fn tool(spec: &ToolSpec) -> Value {
    json!({
        "type": "function",
        "function": {
            "name": spec.name,
            "description": spec.description,
            "parameters": parameters(spec),
        }
    })
}

/// A user message with files, as content parts: its text, then each file
/// (an image as an `image_url` data URL, a PDF as a `file` part with its
/// name, a text file as text).
fn user_parts(text: &str, attachments: &[std::sync::Arc<crate::provider::Attachment>]) -> Value {
    let mut parts = Vec::with_capacity(attachments.len() + 1);
    if !text.is_empty() {
        parts.push(json!({ "type": "text", "text": text }));
    }
    parts.extend(attachments.iter().map(|file| file_part(file)));
    Value::Array(parts)
}

fn file_part(file: &crate::provider::Attachment) -> Value {
    use crate::provider::InputKind;
    match file.kind() {
        InputKind::Image => json!({
            "type": "image_url",
            "image_url": { "url": format!("data:{};base64,{}", file.media_type, file.base64()) },
        }),
        InputKind::Pdf => json!({
            "type": "file",
            "file": {
                "filename": file.name,
                "file_data": format!("data:{};base64,{}", file.media_type, file.base64()),
            },
        }),
        InputKind::Text => json!({ "type": "text", "text": file.as_text() }),
    }
}

/// The files tool calls returned, as one user message after the tool
/// messages (a tool message's content is text only in Chat Completions):
/// for each call with files, a text part naming the call, then its files.
fn tool_files(results: &[crate::provider::ToolResult]) -> Option<Value> {
    let mut parts = Vec::new();
    for result in results.iter().filter(|r| !r.attachments.is_empty()) {
        parts.push(json!({
            "type": "text",
            "text": format!("The files the tool call {} ({}) returned:", result.call_id, result.name),
        }));
        parts.extend(result.attachments.iter().map(|file| file_part(file)));
    }
    (!parts.is_empty()).then(|| json!({ "role": "user", "content": parts }))
}

fn messages(request: &ChatRequest) -> Vec<Value> {
    let mut out = Vec::with_capacity(request.messages.len() + 1);
    if !request.system.is_empty() {
        out.push(json!({ "role": "system", "content": request.system }));
    }
    for message in request.messages.iter() {
        match message {
            Message::User { text, attachments } if attachments.is_empty() => {
                out.push(json!({ "role": "user", "content": text }));
            }
            Message::User { text, attachments } => {
                out.push(json!({ "role": "user", "content": user_parts(text, attachments) }));
            }
            // Chat Completions takes no reasoning back: it is dropped.
            Message::Assistant {
                text, tool_calls, ..
            } => {
                let mut m = Map::new();
                m.insert("role".into(), json!("assistant"));
                if tool_calls.is_empty() {
                    m.insert("content".into(), json!(text));
                } else {
                    let content = if text.is_empty() {
                        Value::Null
                    } else {
                        json!(text)
                    };
                    m.insert("content".into(), content);
                    let calls = tool_calls
                        .iter()
                        .map(|call| {
                            json!({
                                "id": call.id,
                                "type": "function",
                                "function": {
                                    "name": call.name,
                                    "arguments": call.input.to_string(),
                                }
                            })
                        })
                        .collect();
                    m.insert("tool_calls".into(), Value::Array(calls));
                }
                out.push(Value::Object(m));
            }
            Message::ToolResults(results) => {
                for result in results {
                    // The protocol has no error flag: say it in the content.
                    let content = if result.is_error {
                        format!("Error: {}", result.text)
                    } else {
                        result.text.clone()
                    };
                    out.push(json!({
                        "role": "tool",
                        "tool_call_id": result.call_id,
                        "content": content,
                    }));
                }
                out.extend(tool_files(results));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::{OutputSchema, SamplingParams, ToolCall, ToolResult};

    fn request() -> ChatRequest {
        ChatRequest {
            model: "gpt-4.1".into(),
            system: "be brief".into(),
            messages: vec![
                Message::user("weather?"),
                Message::Assistant {
                    reasoning: vec![],
                    text: String::new(),
                    tool_calls: vec![ToolCall {
                        id: "call_1".into(),
                        name: "get_weather".into(),
                        input: json!({"city": "Paris"}),
                        provider_data: None,
                    }],
                },
                Message::ToolResults(vec![ToolResult {
                    call_id: "call_1".into(),
                    name: "get_weather".into(),
                    text: "no data".into(),
                    is_error: true,
                    attachments: Vec::new(),
                }]),
            ]
            .into(),
            tools: vec![ToolSpec {
                name: "get_weather".into(),
                description: "weather".into(),
                input_schema: Value::Null,
            }]
            .into(),
            output_schema: Some(OutputSchema {
                name: "my schema!".into(),
                schema: json!({"type": "object"}),
            }),
            max_output_tokens: Some(100),
            params: SamplingParams::default(),
            cache: Default::default(),
        }
    }

    #[test]
    fn history_tools_and_schema() {
        let body = body(&request(), Flavor::OpenAi, false);
        assert_eq!(
            body["messages"][0],
            json!({"role": "system", "content": "be brief"})
        );
        assert_eq!(body["messages"][2]["content"], Value::Null);
        assert_eq!(
            body["messages"][2]["tool_calls"][0]["function"]["arguments"],
            json!("{\"city\":\"Paris\"}")
        );
        assert_eq!(body["messages"][3]["content"], json!("Error: no data"));
        assert_eq!(
            body["tools"][0]["function"]["parameters"]["type"],
            json!("object")
        );
        assert_eq!(
            body["response_format"]["json_schema"]["name"],
            json!("my_schema_")
        );
        assert_eq!(body["max_completion_tokens"], json!(100));
        assert!(body.get("max_tokens").is_none());
        assert!(body.get("temperature").is_none());
    }

    #[test]
    fn compatible_servers_also_get_max_tokens() {
        let body = body(&request(), Flavor::Compatible, false);
        assert_eq!(body["max_tokens"], json!(100));
        assert_eq!(body["max_completion_tokens"], json!(100));
    }

    #[test]
    fn prompt_cache_key_is_sent_only_where_configured() {
        let mut with_key = request();
        with_key.cache.key = Some("p1-0f3a9c".into());
        let on = body(&with_key, Flavor::OpenAi, true);
        assert_eq!(on["prompt_cache_key"], "p1-0f3a9c");
        let off = body(&with_key, Flavor::Compatible, false);
        assert!(off.get("prompt_cache_key").is_none(), "{off}");
        let none = body(&request(), Flavor::OpenAi, true);
        assert!(none.get("prompt_cache_key").is_none());
    }
}
