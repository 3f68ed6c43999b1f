//! Files in a user message, as each provider's documentation shows them,
//! asserted on the request bodies sent (our own contents): OpenAI Chat
//! Completions `image_url` data URLs and `file` parts, Anthropic `image`
//! and `document` blocks, Gemini `inline_data` parts; text files as text.
//! Files a tool returned: Anthropic's `tool_result` content blocks, a user
//! message after OpenAI's tool messages (whose content is text only), and
//! Gemini `inline_data` parts after the `functionResponse`.

mod support;

use std::sync::Arc;

use agent_runner::provider::{
    Attachment, ChatRequest, Message, Provider, ToolCall, ToolResult, anthropic::AnthropicProvider,
    gemini::GeminiProvider, http::HttpProviderConfig, openai::OpenAiProvider,
};
use serde_json::{Value, json};
use support::{
    events::{drain, request},
    replay::{ReplayServer, Reply},
};

/// A tiny PNG's first bytes, a PDF's and a CSV, each short enough that the
/// expected base64 is written out below.
fn files() -> Vec<Arc<Attachment>> {
    [
        ("dot.png", "image/png", b"\x89PNG\r\n\x1a\n".to_vec()),
        ("q3.pdf", "application/pdf", b"%PDF-1.7\n".to_vec()),
        ("sales.csv", "text/csv", b"month,total\njan,10\n".to_vec()),
    ]
    .into_iter()
    .map(|(name, media_type, data)| {
        Arc::new(Attachment {
            name: name.into(),
            media_type: media_type.into(),
            data,
        })
    })
    .collect()
}

const PNG_B64: &str = "iVBORw0KGgo=";
const PDF_B64: &str = "JVBERi0xLjcK";
const CSV_TEXT: &str = "[file sales.csv, text/csv]\nmonth,total\njan,10\n";

fn with_files(model: &str) -> ChatRequest {
    let mut request = request(model);
    request.messages = vec![Message::User {
        text: "What do these show?".into(),
        attachments: files(),
    }]
    .into();
    request
}

/// A tool call whose result carries the PNG and the PDF.
fn with_tool_files(model: &str) -> ChatRequest {
    let mut request = request(model);
    let files = files();
    request.messages = vec![
        Message::user("Chart Q3"),
        Message::Assistant {
            reasoning: Vec::new(),
            text: String::new(),
            tool_calls: vec![ToolCall {
                id: "call_1".into(),
                name: "chart".into(),
                input: json!({}),
                provider_data: None,
            }],
        },
        Message::ToolResults(vec![ToolResult {
            call_id: "call_1".into(),
            name: "chart".into(),
            text: "[image dot.png, image/png, 8 bytes, shown to the user]".into(),
            is_error: false,
            attachments: files[..2].to_vec(),
        }]),
    ]
    .into();
    request
}

/// The body `provider` sends for `request`.
async fn sent(
    fixture: &str,
    root: &str,
    request: ChatRequest,
    provider: impl Fn(String) -> Box<dyn Provider>,
) -> Value {
    let server = ReplayServer::start(vec![Reply::sse_fixture(fixture)]).await;
    let provider = provider(server.url(root));
    let stream = provider.stream(request).await.expect("stream starts");
    drain(stream).await;
    server.single_request().json()
}

fn openai(url: String) -> Box<dyn Provider> {
    let mut cfg = HttpProviderConfig::new("openai", url);
    cfg.api_keys = "sk-test-key".into();
    Box::new(OpenAiProvider::new(cfg).expect("provider builds"))
}

fn anthropic(url: String) -> Box<dyn Provider> {
    let mut cfg = HttpProviderConfig::new("anthropic", url);
    cfg.api_keys = "sk-ant-test".into();
    cfg.prompt_cache = false;
    Box::new(AnthropicProvider::new(cfg).expect("provider builds"))
}

fn gemini(url: String) -> Box<dyn Provider> {
    let mut cfg = HttpProviderConfig::new("gemini", url);
    cfg.api_keys = "gemini-test-key".into();
    Box::new(GeminiProvider::new(cfg).expect("provider builds"))
}

#[tokio::test]
async fn openai_takes_image_urls_file_parts_and_text() {
    let body = sent("openai/text.sse", "/v1", with_files("m"), openai).await;
    assert_eq!(
        body["messages"][1],
        json!({
            "role": "user",
            "content": [
                { "type": "text", "text": "What do these show?" },
                { "type": "image_url", "image_url": { "url": format!("data:image/png;base64,{PNG_B64}") } },
                { "type": "file", "file": { "filename": "q3.pdf", "file_data": format!("data:application/pdf;base64,{PDF_B64}") } },
                { "type": "text", "text": CSV_TEXT },
            ],
        })
    );
}

#[tokio::test]
async fn anthropic_takes_image_and_document_blocks_before_the_text() {
    let body = sent("anthropic/text.sse", "", with_files("m"), anthropic).await;
    assert_eq!(
        body["messages"][0],
        json!({
            "role": "user",
            "content": [
                { "type": "image", "source": { "type": "base64", "media_type": "image/png", "data": PNG_B64 } },
                { "type": "document", "source": { "type": "base64", "media_type": "application/pdf", "data": PDF_B64 }, "title": "q3.pdf" },
                { "type": "text", "text": CSV_TEXT },
                { "type": "text", "text": "What do these show?" },
            ],
        })
    );
}

#[tokio::test]
async fn gemini_takes_inline_data_parts_before_the_text() {
    let body = sent("gemini/text.sse", "/v1beta", with_files("m"), gemini).await;
    assert_eq!(
        body["contents"][0],
        json!({
            "role": "user",
            "parts": [
                { "inline_data": { "mime_type": "image/png", "data": PNG_B64 } },
                { "inline_data": { "mime_type": "application/pdf", "data": PDF_B64 } },
                { "text": CSV_TEXT },
                { "text": "What do these show?" },
            ],
        })
    );
}

#[tokio::test]
async fn openai_gets_a_tools_files_in_a_user_message_after_the_tool_messages() {
    let body = sent("openai/text.sse", "/v1", with_tool_files("m"), openai).await;
    let messages = body["messages"].as_array().expect("messages");
    assert_eq!(
        messages.len(),
        5,
        "system, user, assistant, tool, user: {messages:?}"
    );
    assert_eq!(
        messages[3],
        json!({
            "role": "tool",
            "tool_call_id": "call_1",
            "content": "[image dot.png, image/png, 8 bytes, shown to the user]",
        })
    );
    assert_eq!(
        messages[4],
        json!({
            "role": "user",
            "content": [
                { "type": "text", "text": "The files the tool call call_1 (chart) returned:" },
                { "type": "image_url", "image_url": { "url": format!("data:image/png;base64,{PNG_B64}") } },
                { "type": "file", "file": { "filename": "q3.pdf", "file_data": format!("data:application/pdf;base64,{PDF_B64}") } },
            ],
        })
    );
}

#[tokio::test]
async fn anthropic_gets_a_tools_files_inside_its_tool_result() {
    let body = sent("anthropic/text.sse", "", with_tool_files("m"), anthropic).await;
    assert_eq!(
        body["messages"][2],
        json!({
            "role": "user",
            "content": [{
                "type": "tool_result",
                "tool_use_id": "call_1",
                "content": [
                    { "type": "text", "text": "[image dot.png, image/png, 8 bytes, shown to the user]" },
                    { "type": "image", "source": { "type": "base64", "media_type": "image/png", "data": PNG_B64 } },
                    { "type": "document", "source": { "type": "base64", "media_type": "application/pdf", "data": PDF_B64 }, "title": "q3.pdf" },
                ],
            }],
        })
    );
}

#[tokio::test]
async fn gemini_gets_a_tools_files_as_inline_data_after_the_function_response() {
    let body = sent("gemini/text.sse", "/v1beta", with_tool_files("m"), gemini).await;
    assert_eq!(
        body["contents"][2],
        json!({
            "role": "user",
            "parts": [
                { "functionResponse": { "name": "chart", "response": { "result": "[image dot.png, image/png, 8 bytes, shown to the user]" } } },
                { "inline_data": { "mime_type": "image/png", "data": PNG_B64 } },
                { "inline_data": { "mime_type": "application/pdf", "data": PDF_B64 } },
            ],
        })
    );
}
