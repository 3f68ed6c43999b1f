//! The Messages API request body: top-level `system`, alternating
//! user/assistant messages with content blocks, tools, thinking, and native
//! structured output through `output_config.format`.
//!
//! History replay follows the API's rules: an assistant turn carries its
//! signed thinking blocks first, then its text, then its `tool_use` blocks;
//! all results of one turn go back in one user message of `tool_result`
//! blocks (with `is_error`). Consecutive messages of one role are merged.

use serde_json::{Map, Value, json};

use crate::provider::{
    ChatRequest, Message, ReasoningBlock, ToolSpec,
    wire::body::{alternating, call_input, parameters, put},
};

/// `max_tokens` is required; this is used when the request sets none.
pub const DEFAULT_MAX_TOKENS: u32 = 4096;

/// Builds the streaming Messages body for `request`; with `prompt_cache`,
/// with its cache breakpoints ([`cache_breakpoints`]).
pub(crate) fn body(request: &ChatRequest, prompt_cache: bool) -> Value {
    let mut body = Map::new();
    let params = &request.params;
    let thinking = params.thinking_budget.filter(|b| *b > 0);
    let max_tokens = match (request.max_output_tokens, thinking) {
        (Some(limit), _) => limit,
        // Thinking counts against max_tokens, which must exceed the budget.
        (None, Some(budget)) => budget.saturating_add(DEFAULT_MAX_TOKENS),
        (None, None) => DEFAULT_MAX_TOKENS,
    };
    body.insert("model".into(), json!(request.model));
    body.insert("max_tokens".into(), json!(max_tokens));
    body.insert("stream".into(), json!(true));
    if !request.system.is_empty() {
        body.insert("system".into(), json!(request.system));
    }
    body.insert("messages".into(), Value::Array(messages(&request.messages)));
    if prompt_cache {
        cache_breakpoints(&mut body, request);
    }
    if !request.tools.is_empty() {
        body.insert("tools".into(), request.tools.iter().map(tool).collect());
    }
    if let Some(budget) = thinking {
        body.insert(
            "thinking".into(),
            json!({ "type": "enabled", "budget_tokens": budget }),
        );
    }
    match (params.temperature, thinking) {
        (Some(t), None) => {
            body.insert("temperature".into(), json!(t));
        }
        (Some(_), Some(_)) => {
            tracing::debug!("temperature is not sent with extended thinking");
        }
        _ => {}
    }
    put(&mut body, "top_p", params.top_p);
    if let Some(schema) = &request.output_schema {
        body.insert(
            "output_config".into(),
            json!({ "format": { "type": "json_schema", "schema": schema.schema } }),
        );
    }
    Value::Object(body)
}

/// Anthropic caches a prompt's prefix up to a block marked
/// `"cache_control": {"type": "ephemeral"}` (tools, then system, then
/// messages; at most four marks). Two marks: the end of the system prompt's
/// stable part, the same for every turn of the page (with the tools before
/// it), and the last block of the last message, so each model call of a
/// turn's tool loop, and the next turn, reads the conversation so far from
/// the cache. The system prompt becomes text blocks for that: the stable
/// part, then the rest.
fn cache_breakpoints(body: &mut Map<String, Value>, request: &ChatRequest) {
    let mark = || json!({ "type": "ephemeral" });
    let stable = request.cache.stable_system_bytes;
    if stable > 0
        && let Some((head, tail)) = request.system.split_at_checked(stable)
    {
        let mut blocks = vec![json!({ "type": "text", "text": head, "cache_control": mark() })];
        if !tail.is_empty() {
            blocks.push(json!({ "type": "text", "text": tail }));
        }
        body.insert("system".into(), Value::Array(blocks));
    }
    let last_block = body
        .get_mut("messages")
        .and_then(Value::as_array_mut)
        .and_then(|messages| messages.last_mut())
        .and_then(|message| message.get_mut("content"))
        .and_then(Value::as_array_mut)
        .and_then(|content| content.last_mut())
        .and_then(Value::as_object_mut);
    // Thinking blocks cannot be marked; an assistant prefill ending in one
    // is left unmarked.
    if let Some(block) = last_block
        && !matches!(
            block.get("type").and_then(Value::as_str),
            Some("thinking" | "redacted_thinking")
        )
    {
        block.insert("cache_control".into(), mark());
    }
}

fn tool(spec: &ToolSpec) -> Value {
    json!({ "name": spec.name, "description": spec.description, "input_schema": parameters(spec) })
}

/// A user message with files, as content blocks: each file first (an
/// image as an `image` block, a PDF as a `document` block, both base64; a
/// text file as text), as Anthropic advises, then the text.
fn user_blocks(
    text: &str,
    attachments: &[std::sync::Arc<crate::provider::Attachment>],
) -> Vec<Value> {
    let mut blocks: Vec<Value> = attachments.iter().map(|file| file_block(file)).collect();
    if !text.is_empty() {
        blocks.push(json!({ "type": "text", "text": text }));
    }
    blocks
}

fn file_block(file: &crate::provider::Attachment) -> Value {
    use crate::provider::InputKind;
    match file.kind() {
        InputKind::Image => json!({
            "type": "image",
            "source": { "type": "base64", "media_type": file.media_type, "data": file.base64() },
        }),
        InputKind::Pdf => json!({
            "type": "document",
            "source": { "type": "base64", "media_type": file.media_type, "data": file.base64() },
            "title": file.name,
        }),
        InputKind::Text => json!({ "type": "text", "text": file.as_text() }),
    }
}

/// A tool result: its text, and with files, content blocks (the text,
/// then each file, which a `tool_result` may hold).
fn tool_result(result: &crate::provider::ToolResult) -> Value {
    let content = if result.attachments.is_empty() {
        json!(result.text)
    } else {
        let mut blocks = vec![json!({ "type": "text", "text": result.text })];
        blocks.extend(result.attachments.iter().map(|file| file_block(file)));
        Value::Array(blocks)
    };
    let mut block = json!({
        "type": "tool_result",
        "tool_use_id": result.call_id,
        "content": content,
    });
    if result.is_error {
        block["is_error"] = json!(true);
    }
    block
}

fn messages(history: &[Message]) -> Vec<Value> {
    let turns = history.iter().map(|message| match message {
        Message::User { text, attachments } if attachments.is_empty() => {
            ("user", vec![json!({ "type": "text", "text": text })])
        }
        Message::User { text, attachments } => ("user", user_blocks(text, attachments)),
        Message::Assistant {
            reasoning,
            text,
            tool_calls,
        } => {
            let mut blocks: Vec<Value> = reasoning.iter().filter_map(thinking_block).collect();
            if !text.is_empty() {
                blocks.push(json!({ "type": "text", "text": text }));
            }
            blocks.extend(tool_calls.iter().map(|call| {
                json!({
                    "type": "tool_use",
                    "id": call.id,
                    "name": call.name,
                    "input": call_input(call),
                })
            }));
            ("assistant", blocks)
        }
        Message::ToolResults(results) => ("user", results.iter().map(tool_result).collect()),
    });
    alternating(turns, "content")
}

/// A thinking block to replay; blocks without a signature (another
/// provider's reasoning) cannot be verified by the API and are left out.
fn thinking_block(block: &ReasoningBlock) -> Option<Value> {
    if let Some(data) = &block.redacted {
        return Some(json!({ "type": "redacted_thinking", "data": data }));
    }
    let signature = block.signature.as_ref()?;
    Some(json!({ "type": "thinking", "thinking": block.text, "signature": signature }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::{OutputSchema, SamplingParams, ToolCall, ToolResult};

    fn call(id: &str) -> ToolCall {
        ToolCall {
            id: id.into(),
            name: "get_weather".into(),
            input: json!({"location": id}),
            provider_data: None,
        }
    }

    fn result(id: &str, is_error: bool) -> ToolResult {
        ToolResult {
            call_id: id.into(),
            name: "get_weather".into(),
            text: format!("result {id}"),
            is_error,
            attachments: Vec::new(),
        }
    }

    #[test]
    fn replay_orders_thinking_text_and_tool_use_and_groups_results() {
        let request = ChatRequest {
            model: "claude-sonnet-4-5".into(),
            system: "".into(),
            messages: vec![
                Message::user("hi"),
                Message::Assistant {
                    reasoning: vec![
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
                        ReasoningBlock {
                            text: "foreign".into(),
                            signature: None,
                            redacted: None,
                        },
                    ],
                    text: "Checking.".into(),
                    tool_calls: vec![call("a"), call("b")],
                },
                Message::ToolResults(vec![result("a", false), result("b", true)]),
                Message::user("and?"),
            ]
            .into(),
            tools: vec![].into(),
            output_schema: None,
            max_output_tokens: None,
            params: SamplingParams::default(),
            cache: Default::default(),
        };
        let body = body(&request, false);
        assert!(body.get("system").is_none());
        assert_eq!(body["max_tokens"], DEFAULT_MAX_TOKENS);
        let messages = body["messages"].as_array().expect("messages");
        assert_eq!(
            messages.len(),
            3,
            "results and the next user text merge: {messages:?}"
        );
        let assistant = messages[1]["content"].as_array().expect("blocks");
        let kinds: Vec<_> = assistant
            .iter()
            .map(|b| b["type"].as_str().unwrap_or(""))
            .collect();
        assert_eq!(
            kinds,
            [
                "thinking",
                "redacted_thinking",
                "text",
                "tool_use",
                "tool_use"
            ]
        );
        assert_eq!(assistant[0]["signature"], "sig");
        let user = messages[2]["content"].as_array().expect("blocks");
        assert_eq!(user[0]["tool_use_id"], "a");
        assert!(user[0].get("is_error").is_none());
        assert_eq!(user[1]["is_error"], true);
        assert_eq!(user[2]["text"], "and?");
    }

    #[test]
    fn thinking_structured_output_and_limits() {
        let mut request = ChatRequest {
            model: "m".into(),
            system: "sys".into(),
            messages: vec![Message::user("x")].into(),
            tools: vec![].into(),
            output_schema: Some(OutputSchema {
                name: "n".into(),
                schema: json!({"type": "object"}),
            }),
            max_output_tokens: None,
            params: SamplingParams {
                temperature: Some(0.2),
                thinking_budget: Some(2000),
                ..SamplingParams::default()
            },
            cache: Default::default(),
        };
        let b = body(&request, false);
        assert_eq!(b["system"], "sys");
        assert_eq!(b["max_tokens"], 2000 + DEFAULT_MAX_TOKENS);
        assert_eq!(
            b["thinking"],
            json!({"type": "enabled", "budget_tokens": 2000})
        );
        assert!(b.get("temperature").is_none());
        assert_eq!(b["output_config"]["format"]["type"], "json_schema");
        request.params.thinking_budget = None;
        request.max_output_tokens = Some(10);
        let b = body(&request, false);
        assert_eq!(b["temperature"], json!(0.2_f32));
        assert_eq!(b["max_tokens"], 10);
    }

    /// The body of a second model call of a turn, with the cache hints on:
    /// the shape Anthropic's prompt-caching documentation gives, a
    /// `system` array of text blocks whose stable one carries
    /// `cache_control`, and the conversation's last block marked.
    #[test]
    fn prompt_cache_marks_the_stable_system_part_and_the_last_message() {
        let system = "You are the assistant of an app.\n\n## CURRENT CONTEXT\ntable Jobs";
        let stable = system.find("## CURRENT").expect("the per-turn part");
        let mut request = ChatRequest {
            model: "claude-sonnet-4-5".into(),
            system: system.into(),
            messages: vec![
                Message::user("weather?"),
                Message::Assistant {
                    reasoning: vec![],
                    text: String::new(),
                    tool_calls: vec![call("a")],
                },
                Message::ToolResults(vec![result("a", false)]),
            ]
            .into(),
            tools: vec![].into(),
            output_schema: None,
            max_output_tokens: None,
            params: SamplingParams::default(),
            cache: crate::provider::PromptCache {
                stable_system_bytes: stable,
                key: Some("k".into()),
            },
        };
        let b = body(&request, true);
        assert_eq!(
            b["system"],
            json!([
                {"type": "text", "text": "You are the assistant of an app.\n\n", "cache_control": {"type": "ephemeral"}},
                {"type": "text", "text": "## CURRENT CONTEXT\ntable Jobs"}
            ])
        );
        let messages = b["messages"].as_array().expect("messages");
        let last = messages.last().expect("a last message");
        assert_eq!(
            last["content"],
            json!([{
                "type": "tool_result", "tool_use_id": "a", "content": "result a",
                "cache_control": {"type": "ephemeral"}
            }])
        );
        let marks = b.to_string().matches("cache_control").count();
        assert_eq!(marks, 2, "{b}");
        assert!(
            b.get("prompt_cache_key").is_none(),
            "not an Anthropic field"
        );

        // A whole stable prompt is one marked block; off, nothing is marked.
        request.cache.stable_system_bytes = system.len();
        let whole = body(&request, true);
        assert_eq!(whole["system"].as_array().map(Vec::len), Some(1));
        assert_eq!(whole["system"][0]["cache_control"]["type"], "ephemeral");
        let off = body(&request, false);
        assert_eq!(off["system"], system);
        assert!(!off.to_string().contains("cache_control"));
        // No stable part known: the system prompt stays a string, the
        // conversation is still marked.
        request.cache.stable_system_bytes = 0;
        let unknown = body(&request, true);
        assert_eq!(unknown["system"], system);
        assert_eq!(unknown.to_string().matches("cache_control").count(), 1);
    }
}
