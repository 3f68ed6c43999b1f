//! The `streamGenerateContent` request body: `systemInstruction`, `contents`
//! with roles `user` / `model`, function declarations, and the
//! `generationConfig` (limits, thinking, `responseMimeType` +
//! `responseSchema`).
//!
//! Schemas go through [`normalize_schema`]; what it dropped is returned with
//! the body. Function calls are replayed with the `thoughtSignature` (and
//! the provider's own call id, when it gave one) kept in
//! [`ToolCall::provider_data`]; function responses go back by name.

use std::collections::HashMap;

use serde_json::{Map, Value, json};

use super::schema::normalize_schema;
use crate::provider::{
    ChatRequest, Message, ToolCall, ToolSpec,
    wire::body::{alternating, call_input, put},
};

/// Keys of [`ToolCall::provider_data`] for Gemini.
pub(crate) const SIGNATURE_KEY: &str = "thoughtSignature";
pub(crate) const ID_KEY: &str = "id";

/// A body and the schema keywords dropped to build it.
#[derive(Debug)]
pub(crate) struct Built {
    pub body: Value,
    pub dropped: Vec<String>,
}

/// Builds the body for `request`.
pub(crate) fn body(request: &ChatRequest) -> Built {
    let mut dropped = Vec::new();
    let mut body = Map::new();
    if !request.system.is_empty() {
        body.insert(
            "systemInstruction".into(),
            json!({ "parts": [{ "text": request.system }] }),
        );
    }
    body.insert("contents".into(), Value::Array(contents(&request.messages)));
    if !request.tools.is_empty() {
        let declarations: Vec<Value> = request
            .tools
            .iter()
            .map(|spec| declaration(spec, &mut dropped))
            .collect();
        body.insert(
            "tools".into(),
            json!([{ "functionDeclarations": declarations }]),
        );
    }
    let mut config = Map::new();
    put(&mut config, "maxOutputTokens", request.max_output_tokens);
    let params = &request.params;
    put(&mut config, "temperature", params.temperature);
    put(&mut config, "topP", params.top_p);
    let mut thinking = Map::new();
    if let Some(budget) = params.thinking_budget {
        thinking.insert("thinkingBudget".into(), json!(budget));
        thinking.insert("includeThoughts".into(), json!(true));
    }
    if let Some(level) = &params.reasoning_effort {
        thinking.insert("thinkingLevel".into(), json!(level));
        thinking.insert("includeThoughts".into(), json!(true));
    }
    if !thinking.is_empty() {
        config.insert("thinkingConfig".into(), Value::Object(thinking));
    }
    if let Some(schema) = &request.output_schema {
        let normalized = normalize_schema(&schema.schema);
        dropped.extend(
            normalized
                .dropped
                .into_iter()
                .map(|d| format!("responseSchema: {d}")),
        );
        config.insert("responseMimeType".into(), json!("application/json"));
        config.insert("responseSchema".into(), normalized.schema);
    }
    if !config.is_empty() {
        body.insert("generationConfig".into(), Value::Object(config));
    }
    Built {
        body: Value::Object(body),
        dropped,
    }
}

fn declaration(spec: &ToolSpec, dropped: &mut Vec<String>) -> Value {
    let mut decl = json!({ "name": spec.name, "description": spec.description });
    let normalized = normalize_schema(&spec.input_schema);
    dropped.extend(
        normalized
            .dropped
            .into_iter()
            .map(|d| format!("tool {}: {d}", spec.name)),
    );
    // Gemini rejects an object schema with no properties: a tool without
    // arguments is declared without parameters.
    let has_properties = normalized
        .schema
        .get("properties")
        .and_then(Value::as_object)
        .is_some_and(|p| !p.is_empty());
    if has_properties {
        decl["parameters"] = normalized.schema;
    }
    decl
}

fn contents(history: &[Message]) -> Vec<Value> {
    // call id → the provider's own function-call id, for the responses.
    let mut provider_ids: HashMap<&str, &str> = HashMap::new();
    let turns = history.iter().map(|message| match message {
        Message::User { text, attachments } => {
            // Each file first, as Gemini's examples do: images and PDFs as
            // `inline_data`, text files as text; then the message's text.
            let mut parts: Vec<Value> = attachments.iter().map(|file| file_part(file)).collect();
            if !text.is_empty() || parts.is_empty() {
                parts.push(json!({ "text": text }));
            }
            ("user", parts)
        }
        // Thought summaries are not sent back; the signatures that matter
        // ride on the function calls.
        Message::Assistant {
            text, tool_calls, ..
        } => {
            let mut parts = Vec::new();
            if !text.is_empty() {
                parts.push(json!({ "text": text }));
            }
            for call in tool_calls {
                if let Some(id) = provider_data_str(call, ID_KEY) {
                    provider_ids.insert(call.id.as_str(), id);
                }
                parts.push(function_call(call));
            }
            ("model", parts)
        }
        Message::ToolResults(results) => (
            "user",
            results
                .iter()
                .map(|r| {
                    let response = if r.is_error {
                        json!({ "error": r.text })
                    } else {
                        json!({ "result": r.text })
                    };
                    let mut call = json!({ "name": r.name, "response": response });
                    if let Some(id) = provider_ids.get(r.call_id.as_str()) {
                        call["id"] = json!(id);
                    }
                    json!({ "functionResponse": call })
                })
                // The files the calls returned, after the responses.
                .chain(
                    results
                        .iter()
                        .flat_map(|r| r.attachments.iter().map(|file| file_part(file))),
                )
                .collect(),
        ),
    });
    alternating(turns, "parts")
}

/// A file as a part: an image or a PDF as `inline_data`, text as text.
fn file_part(file: &crate::provider::Attachment) -> Value {
    use crate::provider::InputKind;
    match file.kind() {
        InputKind::Image | InputKind::Pdf => json!({
            "inline_data": { "mime_type": file.media_type, "data": file.base64() },
        }),
        InputKind::Text => json!({ "text": file.as_text() }),
    }
}

fn provider_data_str<'a>(call: &'a ToolCall, key: &str) -> Option<&'a str> {
    call.provider_data.as_ref()?.get(key)?.as_str()
}

fn function_call(call: &ToolCall) -> Value {
    let mut inner = json!({ "name": call.name, "args": call_input(call) });
    if let Some(id) = provider_data_str(call, ID_KEY) {
        inner["id"] = json!(id);
    }
    let mut part = json!({ "functionCall": inner });
    if let Some(signature) = provider_data_str(call, SIGNATURE_KEY) {
        part[SIGNATURE_KEY] = json!(signature);
    }
    part
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::{OutputSchema, SamplingParams, ToolResult};

    #[test]
    fn replay_echoes_signatures_and_answers_by_name() {
        let request = ChatRequest {
            model: "gemini-2.5-flash".into(),
            system: "".into(),
            messages: vec![
                Message::user("weather?"),
                Message::Assistant {
                    reasoning: vec![],
                    text: String::new(),
                    tool_calls: vec![
                        ToolCall {
                            id: "call_a".into(),
                            name: "get_weather".into(),
                            input: json!({"location": "Paris"}),
                            provider_data: Some(json!({"thoughtSignature": "sig-1"})),
                        },
                        ToolCall {
                            id: "call_b".into(),
                            name: "get_time".into(),
                            input: json!({}),
                            provider_data: Some(json!({"id": "fc-7"})),
                        },
                    ],
                },
                Message::ToolResults(vec![
                    ToolResult {
                        call_id: "call_a".into(),
                        name: "get_weather".into(),
                        text: "sunny".into(),
                        is_error: false,
                        attachments: Vec::new(),
                    },
                    ToolResult {
                        call_id: "call_b".into(),
                        name: "get_time".into(),
                        text: "clock broken".into(),
                        is_error: true,
                        attachments: Vec::new(),
                    },
                ]),
            ]
            .into(),
            tools: vec![ToolSpec {
                name: "get_time".into(),
                description: "time".into(),
                input_schema: json!({"type": "object", "properties": {}}),
            }]
            .into(),
            output_schema: Some(OutputSchema {
                name: "x".into(),
                schema: json!({"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": false}),
            }),
            max_output_tokens: None,
            params: SamplingParams::default(),
            cache: Default::default(),
        };
        let built = body(&request);
        let b = &built.body;
        assert!(b.get("systemInstruction").is_none());
        assert_eq!(
            b["contents"][1],
            json!({"role": "model", "parts": [
                {"functionCall": {"name": "get_weather", "args": {"location": "Paris"}}, "thoughtSignature": "sig-1"},
                {"functionCall": {"name": "get_time", "args": {}, "id": "fc-7"}}
            ]})
        );
        assert_eq!(
            b["contents"][2],
            json!({"role": "user", "parts": [
                {"functionResponse": {"name": "get_weather", "response": {"result": "sunny"}}},
                {"functionResponse": {"name": "get_time", "response": {"error": "clock broken"}, "id": "fc-7"}}
            ]})
        );
        assert_eq!(
            b["tools"][0]["functionDeclarations"][0],
            json!({"name": "get_time", "description": "time"})
        );
        assert_eq!(
            b["generationConfig"]["responseMimeType"],
            "application/json"
        );
        assert_eq!(
            built.dropped,
            vec!["responseSchema: additionalProperties at /"]
        );
    }
}
