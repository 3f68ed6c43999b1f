//! What a load stream talks to, and one turn against each: the gateway's
//! `Chat`, the runner's `Run`, or an OpenAI-compatible
//! `/chat/completions` (the mock itself, or another proxy measured beside
//! Parley). A turn reports when its first text arrived and when it ended.

use std::time::{Duration, Instant};

use axum::body::Bytes;
use parley_proto::{
    gateway::v1::{ChatRequest, PageContext, chat_event, chat_gateway_client::ChatGatewayClient},
    runner::v1::{
        Message, ModelRef, Role, RunRequest, agent_runner_client::AgentRunnerClient, run_event,
    },
};
use tokio_stream::StreamExt;
use tonic::{
    Request,
    metadata::{Ascii, MetadataValue},
    transport::{Channel, Endpoint},
};
use tonic_types::StatusExt;

/// How one turn went.
#[derive(Debug, Clone, Copy)]
pub struct Timing {
    /// From the call to the first text delta (none when the answer had no
    /// text).
    pub first_token: Option<Duration>,
    /// From the call to the end of the answer.
    pub total: Duration,
    /// Text deltas received.
    pub deltas: u32,
}

/// Why a turn failed, as a short label for the error table:
/// `CODE/REASON` for gRPC errors, `http STATUS` or `transport` otherwise.
#[derive(Debug, Clone, PartialEq, Eq, Hash, thiserror::Error)]
#[error("{0}")]
pub struct TurnError(pub String);

impl TurnError {
    fn status(status: &tonic::Status) -> Self {
        let reason = status
            .get_error_details()
            .error_info()
            .map(|info| info.reason.clone())
            .unwrap_or_default();
        Self(format!("{:?}/{reason}", status.code()))
    }
}

/// A target and the request each of its turns sends.
#[derive(Debug, Clone)]
pub enum Target {
    /// The chat-gateway: `ChatGateway/Chat`, each turn in a new conversation.
    Gateway {
        client: ChatGatewayClient<Channel>,
        token: Option<MetadataValue<Ascii>>,
        page: String,
        message: String,
    },
    /// The agent-runner: `AgentRunner/Run` with one user message.
    Runner {
        client: AgentRunnerClient<Channel>,
        model: ModelRef,
        message: String,
    },
    /// The chat-gateway's `Chat` over Connect with proto3 JSON, each turn
    /// in a new conversation.
    Connect {
        http: reqwest::Client,
        url: String,
        body: Bytes,
        token: Option<String>,
    },
    /// An OpenAI-compatible chat completions endpoint, streaming.
    OpenAi {
        http: reqwest::Client,
        url: String,
        body: Bytes,
        api_key: Option<String>,
    },
}

/// A gRPC channel to `url` with Nagle off, as the services' own clients.
pub async fn channel(url: &str) -> anyhow::Result<Channel> {
    let endpoint = Endpoint::from_shared(url.to_owned())?
        .tcp_nodelay(true)
        .connect_timeout(Duration::from_secs(5));
    Ok(endpoint.connect().await?)
}

/// The HTTP client of the openai target: rustls (ring) for https://, Nagle
/// off, enough idle connections for every stream.
pub fn http_client(streams: usize) -> anyhow::Result<reqwest::Client> {
    // Installing twice (one client per connection) is harmless.
    let _ = rustls::crypto::ring::default_provider().install_default();
    Ok(reqwest::Client::builder()
        .tcp_nodelay(true)
        .pool_max_idle_per_host(streams.max(1))
        .build()?)
}

/// The OpenAI-compatible request: one user message, streamed, with usage.
pub fn openai_body(model: &str, message: &str) -> Bytes {
    let body = serde_json::json!({
        "model": model,
        "stream": true,
        "stream_options": {"include_usage": true},
        "messages": [{"role": "user", "content": message}],
    });
    Bytes::from(body.to_string())
}

/// A Connect `Chat` request: the `ChatRequest` in proto3 JSON, in its
/// envelope (a flags byte, a 4-byte big-endian length).
pub fn connect_body(page: &str, message: &str) -> Bytes {
    let mut request = serde_json::json!({ "message": message });
    if !page.is_empty() {
        request["page"] = serde_json::json!({ "page": page });
    }
    let json = request.to_string().into_bytes();
    let mut body = Vec::with_capacity(5 + json.len());
    body.push(0);
    body.extend_from_slice(&u32::try_from(json.len()).unwrap_or(u32::MAX).to_be_bytes());
    body.extend_from_slice(&json);
    Bytes::from(body)
}

impl Target {
    /// One turn, timed from the call.
    pub async fn turn(&self) -> Result<Timing, TurnError> {
        let start = Instant::now();
        match self {
            Self::Gateway {
                client,
                token,
                page,
                message,
            } => {
                let mut request = Request::new(ChatRequest {
                    message: message.clone(),
                    page: (!page.is_empty()).then(|| PageContext {
                        page: page.clone(),
                        ..Default::default()
                    }),
                    ..Default::default()
                });
                if let Some(token) = token {
                    request
                        .metadata_mut()
                        .insert("authorization", token.clone());
                }
                let stream = client
                    .clone()
                    .chat(request)
                    .await
                    .map_err(|status| TurnError::status(&status))?
                    .into_inner();
                follow(start, stream, |event| match event.event {
                    Some(chat_event::Event::TextDelta(_)) => Seen::Text,
                    Some(chat_event::Event::Complete(_)) => Seen::End,
                    Some(chat_event::Event::Error(error)) => {
                        Seen::Failed(format!("turn/{}", error.reason))
                    }
                    _ => Seen::Other,
                })
                .await
            }
            Self::Runner {
                client,
                model,
                message,
            } => {
                let request = RunRequest {
                    messages: vec![Message {
                        role: Role::User as i32,
                        text: message.clone(),
                        ..Default::default()
                    }],
                    model: Some(model.clone()),
                    ..Default::default()
                };
                let stream = client
                    .clone()
                    .run(request)
                    .await
                    .map_err(|status| TurnError::status(&status))?
                    .into_inner();
                follow(start, stream, |event| match event.event {
                    Some(run_event::Event::TextDelta(_)) => Seen::Text,
                    Some(run_event::Event::Finished(_)) => Seen::End,
                    Some(run_event::Event::Error(error)) => {
                        Seen::Failed(format!("run/{}", error.reason))
                    }
                    _ => Seen::Other,
                })
                .await
            }
            Self::Connect {
                http,
                url,
                body,
                token,
            } => {
                let mut request = http
                    .post(url)
                    .header("content-type", "application/connect+json")
                    .header("connect-protocol-version", "1")
                    .body(body.clone());
                if let Some(token) = token {
                    request = request.bearer_auth(token);
                }
                let mut envelopes = Envelopes::default();
                http_stream(start, request, |chunk| envelopes.push(chunk), "complete").await
            }
            Self::OpenAi {
                http,
                url,
                body,
                api_key,
            } => {
                let mut request = http
                    .post(url)
                    .header("content-type", "application/json")
                    .body(body.clone());
                if let Some(key) = api_key {
                    request = request.bearer_auth(key);
                }
                let mut lines = SseLines::default();
                http_stream(start, request, |chunk| lines.push(chunk), "[DONE]").await
            }
        }
    }
}

/// What one streamed event means for the timing of a turn.
#[derive(Debug, PartialEq, Eq)]
enum Seen {
    /// Text for the user (a text delta, a chunk with content).
    Text,
    /// The turn's last event.
    End,
    /// The turn failed, with a label for the error table.
    Failed(String),
    /// Anything else.
    Other,
}

/// Sends `request` and times its streamed body from `start`, each piece
/// read split into events by `split`, until the event that ends the turn
/// (`last` names it in the error of a body that ends before it).
async fn http_stream(
    start: Instant,
    request: reqwest::RequestBuilder,
    mut split: impl FnMut(&[u8]) -> Vec<Seen>,
    last: &str,
) -> Result<Timing, TurnError> {
    let response = request
        .send()
        .await
        .map_err(|_| TurnError("transport".into()))?;
    if !response.status().is_success() {
        return Err(TurnError(format!("http {}", response.status().as_u16())));
    }
    let mut timing = Timing::new();
    let mut body = response.bytes_stream();
    while let Some(chunk) = body.next().await {
        let chunk = chunk.map_err(|_| TurnError("transport".into()))?;
        for seen in split(&chunk) {
            if let Some(outcome) = timing.see(start, seen) {
                return outcome;
            }
        }
    }
    Err(TurnError(format!("the stream ended before {last}")))
}

/// Times a gRPC event stream from `start` to its last event.
async fn follow<E>(
    start: Instant,
    mut stream: tonic::Streaming<E>,
    classify: impl Fn(E) -> Seen,
) -> Result<Timing, TurnError> {
    let mut timing = Timing::new();
    while let Some(event) = stream.next().await {
        let event = event.map_err(|status| TurnError::status(&status))?;
        if let Some(outcome) = timing.see(start, classify(event)) {
            return outcome;
        }
    }
    Err(TurnError("the stream ended before its last event".into()))
}

impl Timing {
    /// Counts `seen`; the turn's outcome once it is over.
    fn see(&mut self, start: Instant, seen: Seen) -> Option<Result<Timing, TurnError>> {
        match seen {
            Seen::Text => self.delta(start),
            Seen::End => return Some(Ok(self.end(start))),
            Seen::Failed(label) => return Some(Err(TurnError(label))),
            Seen::Other => {}
        }
        None
    }

    fn new() -> Self {
        Self {
            first_token: None,
            total: Duration::ZERO,
            deltas: 0,
        }
    }

    fn delta(&mut self, start: Instant) {
        if self.first_token.is_none() {
            self.first_token = Some(start.elapsed());
        }
        self.deltas += 1;
    }

    fn end(&mut self, start: Instant) -> Self {
        self.total = start.elapsed();
        *self
    }
}

/// Splits a byte stream into SSE `data:` lines, each seen as text (a chunk
/// with non-empty `delta.content`), the end (`[DONE]`) or other (role,
/// finish reason, usage); a line cut between two network reads is kept
/// until its end arrives.
#[derive(Debug, Default)]
struct SseLines {
    pending: Vec<u8>,
}

impl SseLines {
    fn push(&mut self, bytes: &[u8]) -> Vec<Seen> {
        self.pending.extend_from_slice(bytes);
        let mut events = Vec::new();
        let mut consumed = 0;
        while let Some(end) = self.pending[consumed..].iter().position(|&b| b == b'\n') {
            let line = &self.pending[consumed..consumed + end];
            consumed += end + 1;
            let Some(data) = line.strip_prefix(b"data:") else {
                continue;
            };
            let data = data.trim_ascii();
            events.push(if data == b"[DONE]" {
                Seen::End
            } else if has_content(data) {
                Seen::Text
            } else {
                Seen::Other
            });
        }
        self.pending.drain(..consumed);
        events
    }
}

/// Splits a Connect stream into its envelopes, each seen as text (a
/// `textDelta` event), the end (`complete`), a failure (an `error` event,
/// or the end message's error) or other; an envelope cut between two
/// network reads is kept until it is whole.
#[derive(Debug, Default)]
struct Envelopes {
    pending: Vec<u8>,
}

impl Envelopes {
    fn push(&mut self, bytes: &[u8]) -> Vec<Seen> {
        self.pending.extend_from_slice(bytes);
        let mut events = Vec::new();
        let mut consumed = 0;
        while let Some(prefix) = self.pending.get(consumed..consumed + 5) {
            let length = u32::from_be_bytes([prefix[1], prefix[2], prefix[3], prefix[4]]) as usize;
            let flags = prefix[0];
            let Some(message) = self.pending.get(consumed + 5..consumed + 5 + length) else {
                break;
            };
            let event = serde_json::from_slice::<serde_json::Value>(message).unwrap_or_default();
            consumed += 5 + length;
            events.push(if flags & 0x02 != 0 {
                let code = event.pointer("/error/code").and_then(|code| code.as_str());
                Seen::Failed(format!(
                    "connect/{}",
                    code.unwrap_or("ended before complete")
                ))
            } else if event.get("textDelta").is_some() {
                Seen::Text
            } else if event.get("complete").is_some() {
                Seen::End
            } else if let Some(reason) = event.pointer("/error/reason") {
                Seen::Failed(format!("turn/{}", reason.as_str().unwrap_or_default()))
            } else {
                Seen::Other
            });
        }
        self.pending.drain(..consumed);
        events
    }
}

/// Whether a chunk's first choice carries text.
fn has_content(data: &[u8]) -> bool {
    let Ok(chunk) = serde_json::from_slice::<serde_json::Value>(data) else {
        return false;
    };
    chunk
        .pointer("/choices/0/delta/content")
        .and_then(|content| content.as_str())
        .is_some_and(|content| !content.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connect_envelopes_cut_anywhere_give_the_same_events() {
        let mut stream = Vec::new();
        for (flags, message) in [
            (
                0u8,
                r#"{"seq":"1","status":{"phase":"TURN_PHASE_STARTED"}}"#,
            ),
            (0, r#"{"seq":"2","textDelta":"Hi"}"#),
            (0, r#"{"seq":"3","complete":{"success":true}}"#),
            (2, "{}"),
        ] {
            stream.push(flags);
            stream.extend_from_slice(&(message.len() as u32).to_be_bytes());
            stream.extend_from_slice(message.as_bytes());
        }
        let whole = Envelopes::default().push(&stream);
        assert_eq!(whole[..3], [Seen::Other, Seen::Text, Seen::End]);
        for cut in 1..stream.len() {
            let mut envelopes = Envelopes::default();
            let mut events = envelopes.push(&stream[..cut]);
            events.extend(envelopes.push(&stream[cut..]));
            assert_eq!(events, whole, "cut at {cut}");
        }
        let failed = Envelopes::default()
            .push(b"\x02\x00\x00\x00\x20{\"error\":{\"code\":\"unavailable\"}}x");
        assert_eq!(failed, [Seen::Failed("connect/unavailable".into())]);
    }

    #[test]
    fn sse_lines_cut_anywhere_give_the_same_events() {
        let stream = concat!(
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\n\n",
            ": keep-alive\n\n",
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"}}]}\n\n",
            "data: {\"choices\":[],\"usage\":{\"total_tokens\":3}}\n\n",
            "data: [DONE]\n\n",
        )
        .as_bytes();
        let whole = SseLines::default().push(stream);
        assert_eq!(whole, [Seen::Other, Seen::Text, Seen::Other, Seen::End]);
        for cut in 1..stream.len() {
            let mut lines = SseLines::default();
            let mut events = lines.push(&stream[..cut]);
            events.extend(lines.push(&stream[cut..]));
            assert_eq!(events, whole, "cut at {cut}");
        }
    }
}
