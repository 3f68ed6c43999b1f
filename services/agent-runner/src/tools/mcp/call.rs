//! One `tools/call`: checked, traced, its progress forwarded, its result
//! mapped for the model and the UI.

use parley_proto::parser::v1::Payload;
use rmcp::{
    model::{
        CallToolRequest, CallToolRequestParams, CallToolResult, CancelledNotificationParam,
        ClientRequest, ContentBlock, RequestId, RequestMetaObject, ResourceContents, ServerResult,
    },
    service::{Peer, PeerRequestOptions, RoleClient, ServiceError},
};
use serde_json::{Map, Value, json};
use std::sync::{Arc, atomic::Ordering};

use super::server::{McpServer, ServerState, Snapshot};
use crate::provider::Attachment;
use crate::tools::{
    CallContext, FailureReason, ProgressSender, ToolFailure, ToolOutput, ToolSource,
};

/// The payload type of results with images, audio or resources.
pub const CONTENT_PAYLOAD: &str = "mcp_content";

/// A tool of a configured MCP server as a turn's tool source.
#[derive(Debug, Clone)]
pub struct McpSource {
    /// The server.
    pub server: Arc<McpServer>,
    /// The server's name for the tool.
    pub tool: String,
}

#[async_trait::async_trait]
impl ToolSource for McpSource {
    fn is_remote(&self) -> bool {
        true
    }

    async fn call(
        &self,
        _name: &str,
        input: &Value,
        ctx: CallContext,
        progress: ProgressSender,
    ) -> Result<ToolOutput, ToolFailure> {
        call(&self.server, &self.tool, input, &ctx, &progress).await
    }
}

/// Calls `tool` on `server` with `input`; see the module doc of `mcp`.
pub async fn call(
    server: &McpServer,
    tool: &str,
    input: &Value,
    ctx: &CallContext,
    progress: &ProgressSender,
) -> Result<ToolOutput, ToolFailure> {
    let snapshot = server.snapshot();
    let name = server.name();
    let peer = match (&snapshot.state, &snapshot.peer) {
        (ServerState::Ready, Some(peer)) => peer.clone(),
        (state, _) => {
            let why = if snapshot.error.is_empty() {
                String::new()
            } else {
                format!(" ({})", snapshot.error)
            };
            let state = match state {
                ServerState::Connecting => "starting",
                _ => "down",
            };
            return Err(ToolFailure::new(
                FailureReason::Unavailable,
                format!(
                    "the MCP server `{name}` is {state}{why}; its tools cannot be called until it is back"
                ),
            ));
        }
    };
    let Some(definition) = snapshot.tools.get(tool) else {
        return Err(ToolFailure::new(
            FailureReason::Unavailable,
            format!("the MCP server `{name}` does not offer a tool `{tool}`"),
        ));
    };
    // The server's schema as it is now, even if the turn was prepared with
    // an older one.
    let problems: Vec<String> = definition
        .validator
        .iter_errors(input)
        .take(8)
        .map(|error| format!("{}: {error}", error.instance_path()))
        .collect();
    if !problems.is_empty() {
        return Err(ToolFailure::new(
            FailureReason::InvalidInput,
            format!("invalid input: {}", problems.join("; ")),
        ));
    }
    let Value::Object(arguments) = input.clone() else {
        return Err(ToolFailure::new(
            FailureReason::InvalidInput,
            "invalid input: the arguments must be an object",
        ));
    };

    tracing::debug!(call_id = %ctx.call_id, server = %name, tool, "MCP tools/call");
    let params = CallToolRequestParams::new(tool.to_owned()).with_arguments(arguments);
    let mut options = PeerRequestOptions::no_options();
    let mut meta = RequestMetaObject::new();
    trace_context(&mut meta);
    options.meta = Some(meta);
    // The SDK gives every request its own progress token, known once the
    // request is queued; notifications that reach the handler before the
    // route is added wait for it (see `progress`).
    let handle = peer
        .send_request_with_option(
            ClientRequest::CallToolRequest(CallToolRequest::new(params)),
            options,
        )
        .await
        .map_err(|error| failure(server, &snapshot, error))?;
    // Dropping this future (the tool's time-out, a cancelled turn) sends
    // notifications/cancelled for the request.
    let mut guard = CancelOnDrop {
        peer: peer.clone(),
        id: Some(handle.id.clone()),
    };
    let (_route, early) = snapshot
        .progress
        .add(handle.progress_token.clone(), progress.clone());
    for report in early {
        report.report(progress).await;
    }
    let response = handle.await_response().await;
    guard.id = None;
    match response {
        Ok(ServerResult::CallToolResult(result)) => {
            output(name, tool, result, server.config().max_output_bytes)
        }
        Ok(_) => Err(ToolFailure::new(
            FailureReason::ToolError,
            format!("the MCP server `{name}` answered tools/call with something else"),
        )),
        Err(error) => Err(failure(server, &snapshot, error)),
    }
}

/// Sends notifications/cancelled for a request abandoned before its answer.
struct CancelOnDrop {
    peer: Peer<RoleClient>,
    id: Option<RequestId>,
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        let Some(id) = self.id.take() else {
            return;
        };
        let peer = self.peer.clone();
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                let _ = peer
                    .notify_cancelled(CancelledNotificationParam::new(
                        Some(id),
                        Some("the turn was cancelled or the tool timed out".to_owned()),
                    ))
                    .await;
            });
        }
    }
}

/// `traceparent` and `tracestate` of the current span (`execute_tool`) in
/// `_meta`, where servers that trace read them; nothing when tracing is off.
fn trace_context(meta: &mut RequestMetaObject) {
    let mut headers = http_headers();
    parley_grpc::telemetry::propagation::inject_current(&mut headers);
    for key in ["traceparent", "tracestate"] {
        if let Some(value) = headers.get(key).and_then(|v| v.to_str().ok()) {
            meta.0
                .0
                .insert(key.to_owned(), Value::String(value.to_owned()));
        }
    }
}

fn http_headers() -> reqwest::header::HeaderMap {
    reqwest::header::HeaderMap::new()
}

/// `snapshot` is the connection's: a transport error has it replaced.
fn failure(server: &McpServer, snapshot: &Snapshot, error: ServiceError) -> ToolFailure {
    let name = server.name();
    match error {
        ServiceError::McpError(error) => ToolFailure::new(
            FailureReason::ToolError,
            format!(
                "the MCP server `{name}` refused the call: {} (code {})",
                error.message, error.code.0
            ),
        ),
        ServiceError::TransportSend(_) | ServiceError::TransportClosed => {
            snapshot.broken.cancel();
            let message = if snapshot.oversized.load(Ordering::Relaxed) {
                format!(
                    "the MCP server `{name}` sent a message over {} bytes (max_output_bytes and the JSON-RPC envelope); the connection was closed and is being restarted",
                    server.max_message()
                )
            } else {
                format!(
                    "the MCP server `{name}` went away during the call ({error}: it exited, dropped the connection or sent a message over max_output_bytes); it is being restarted"
                )
            };
            ToolFailure::new(FailureReason::Unavailable, message)
        }
        ServiceError::Cancelled { .. } => {
            ToolFailure::new(FailureReason::Cancelled, "the tool call was cancelled")
        }
        ServiceError::Timeout { .. } => {
            ToolFailure::new(FailureReason::Timeout, "the tool did not finish in time")
        }
        other => ToolFailure::new(
            FailureReason::ToolError,
            format!("the MCP server `{name}` failed the call: {other}"),
        ),
    }
}

/// Maps a result: `isError` → a tool error with its text; otherwise the
/// text is `structuredContent` as JSON when present, else the text blocks;
/// other blocks go to an `mcp_content` payload and are named in the text.
pub fn output(
    server: &str,
    tool: &str,
    result: CallToolResult,
    max_bytes: usize,
) -> Result<ToolOutput, ToolFailure> {
    let mut texts: Vec<String> = Vec::new();
    let mut others: Vec<Value> = Vec::new();
    let mut files: Vec<Arc<Attachment>> = Vec::new();
    let mut size = 0usize;
    for block in result.content {
        match block {
            ContentBlock::Text(text) => {
                size = size.saturating_add(text.text.len());
                texts.push(text.text);
            }
            other => {
                let value = serde_json::to_value(&other).unwrap_or(Value::Null);
                size = size.saturating_add(value.to_string().len());
                match for_the_model(tool, files.len() + 1, &other) {
                    Some(file) => {
                        texts.push(file_line(&other, &file));
                        files.push(Arc::new(file));
                    }
                    None => texts.push(describe(&other)),
                }
                others.push(value);
            }
        }
    }
    let structured = result
        .structured_content
        .map(|value| serde_json::to_string(&value).unwrap_or_default());
    size = size.saturating_add(structured.as_ref().map_or(0, String::len));
    if size > max_bytes {
        return Err(ToolFailure::new(
            FailureReason::ToolError,
            format!(
                "the result is {size} bytes, more than this server's max_output_bytes ({max_bytes})"
            ),
        ));
    }
    if result.is_error == Some(true) {
        let message = texts.join("\n");
        return Err(ToolFailure::new(
            FailureReason::ToolError,
            if message.trim().is_empty() {
                "the tool reported an error without a message".to_owned()
            } else {
                message
            },
        ));
    }
    let text = match structured {
        Some(json) => json,
        None => texts.join("\n"),
    };
    let payload = (!others.is_empty()).then(|| {
        let mut data = Map::new();
        data.insert("server".into(), json!(server));
        data.insert("tool".into(), json!(tool));
        data.insert("content".into(), Value::Array(others));
        Payload {
            r#type: CONTENT_PAYLOAD.to_owned(),
            data: Some(parley_proto::json::to_struct(&data)),
            typed: None,
        }
    });
    Ok(ToolOutput {
        text,
        payload,
        attachments: files,
    })
}

/// The file an image block, or an image or PDF resource, gives the model
/// (named `{tool}-{n}.{ext}`, or after the resource's URI); `None` for
/// other blocks and for data that is not base64.
fn for_the_model(tool: &str, n: usize, block: &ContentBlock) -> Option<Attachment> {
    use base64::Engine as _;
    let (data, media_type, name) = match block {
        ContentBlock::Image(image) => {
            let extension = image.mime_type.rsplit('/').next().unwrap_or("bin");
            (
                &image.data,
                image.mime_type.as_str(),
                format!("{tool}-{n}.{extension}"),
            )
        }
        ContentBlock::Resource(embedded) => match &embedded.resource {
            ResourceContents::BlobResourceContents {
                uri,
                mime_type: Some(mime_type),
                blob,
                ..
            } => {
                let name = uri
                    .rsplit('/')
                    .find(|segment| !segment.is_empty())
                    .unwrap_or(uri);
                (blob, mime_type.as_str(), name.to_owned())
            }
            _ => return None,
        },
        _ => return None,
    };
    let media_type = media_type.to_ascii_lowercase();
    if !(media_type.starts_with("image/") || media_type == "application/pdf") {
        return None;
    }
    let data = base64::engine::general_purpose::STANDARD
        .decode(data.trim())
        .ok()
        .filter(|data| !data.is_empty())?;
    Some(Attachment {
        name,
        media_type,
        data,
    })
}

/// How a block given to the model as a file is named in its text.
fn file_line(block: &ContentBlock, file: &Attachment) -> String {
    let kind = if matches!(block, ContentBlock::Image(_)) {
        "image"
    } else {
        "file"
    };
    format!(
        "[{kind} {}, {}, {} bytes, shown to the user]",
        file.name,
        file.media_type,
        file.data.len()
    )
}

/// How a non-text block is named in the model's text.
fn describe(block: &ContentBlock) -> String {
    match block {
        ContentBlock::Text(text) => text.text.clone(),
        ContentBlock::Image(image) => format!(
            "[image {}, {} bytes of base64, shown to the user]",
            image.mime_type,
            image.data.len()
        ),
        ContentBlock::Audio(audio) => format!(
            "[audio {}, {} bytes of base64, given to the user]",
            audio.mime_type,
            audio.data.len()
        ),
        ContentBlock::Resource(_) => "[an embedded resource, given to the user]".to_owned(),
        ContentBlock::ResourceLink(link) => format!("[a link to the resource {}]", link.uri),
        _ => "[content of a kind this runner does not know, given to the user]".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(value: Value) -> CallToolResult {
        serde_json::from_value(value).expect("a CallToolResult")
    }

    #[test]
    fn structured_content_is_the_result() {
        let out = output(
            "s",
            "t",
            result(json!({"content": [{"type": "text", "text": "{\"a\": 1}"}], "structuredContent": {"a": 1}})),
            1000,
        )
        .expect("ok");
        assert_eq!(out.text, r#"{"a":1}"#);
        assert!(out.payload.is_none());
    }

    #[test]
    fn text_blocks_are_joined_and_errors_are_tool_errors() {
        let out = output(
            "s",
            "t",
            result(json!({"content": [{"type": "text", "text": "one"}, {"type": "text", "text": "two"}]})),
            1000,
        )
        .expect("ok");
        assert_eq!(out.text, "one\ntwo");
        let failure = output(
            "s",
            "t",
            result(json!({"content": [{"type": "text", "text": "no such city"}], "isError": true})),
            1000,
        )
        .expect_err("an error");
        assert_eq!(failure.reason, FailureReason::ToolError);
        assert_eq!(failure.message, "no such city");
    }

    #[test]
    fn images_are_kept_typed_in_the_payload() {
        let out = output(
            "s",
            "t",
            result(json!({"content": [
                {"type": "text", "text": "a chart"},
                {"type": "image", "data": "aGVsbG8=", "mimeType": "image/png"}
            ]})),
            1000,
        )
        .expect("ok");
        assert_eq!(
            out.text,
            "a chart\n[image t-1.png, image/png, 5 bytes, shown to the user]"
        );
        let payload = out.payload.expect("a payload");
        assert_eq!(payload.r#type, CONTENT_PAYLOAD);
        let data = parley_proto::json::from_struct(&payload.data.expect("data"));
        assert_eq!(data["content"][0]["mimeType"], "image/png");
        assert_eq!(data["content"][0]["data"], "aGVsbG8=");
        // The model gets the image itself too.
        assert_eq!(out.attachments.len(), 1);
        assert_eq!(out.attachments[0].name, "t-1.png");
        assert_eq!(out.attachments[0].media_type, "image/png");
        assert_eq!(out.attachments[0].data, b"hello");
    }

    #[test]
    fn pdf_resources_reach_the_model_and_other_blocks_are_named() {
        let out = output(
            "s",
            "report",
            result(json!({"content": [
                {"type": "resource", "resource": {"uri": "file:///tmp/q3.pdf", "mimeType": "application/pdf", "blob": "JVBERi0="}},
                {"type": "resource", "resource": {"uri": "file:///tmp/a.txt", "mimeType": "text/plain", "text": "hi"}},
                {"type": "image", "data": "not base64!", "mimeType": "image/png"},
                {"type": "audio", "data": "aGVsbG8=", "mimeType": "audio/wav"}
            ]})),
            10_000,
        )
        .expect("ok");
        assert_eq!(
            out.text,
            "[file q3.pdf, application/pdf, 5 bytes, shown to the user]\n\
             [an embedded resource, given to the user]\n\
             [image image/png, 11 bytes of base64, shown to the user]\n\
             [audio audio/wav, 8 bytes of base64, given to the user]"
        );
        assert_eq!(out.attachments.len(), 1, "the PDF alone");
        assert_eq!(out.attachments[0].data, b"%PDF-");
        assert_eq!(
            out.payload.expect("the UI keeps all four").r#type,
            CONTENT_PAYLOAD
        );
    }

    #[test]
    fn a_result_over_the_limit_fails() {
        let failure = output(
            "s",
            "t",
            result(json!({"content": [{"type": "text", "text": "x".repeat(101)}]})),
            100,
        )
        .expect_err("too large");
        assert!(failure.message.contains("101 bytes"), "{}", failure.message);
    }
}
