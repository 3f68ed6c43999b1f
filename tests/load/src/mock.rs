//! The mock provider: an OpenAI-compatible `POST /v1/chat/completions` that
//! streams the same answer to every request — a first token after
//! `first_token`, then one chunk every `gap`, then the finish reason, the
//! usage and `[DONE]` — the way a real model paces its output, without its
//! cost or its variance. Every chunk is built once at start-up; a stream
//! costs one timer per chunk.

use std::{convert::Infallible, sync::Arc, time::Duration};

use axum::{
    Router,
    body::{Body, Bytes},
    extract::State,
    http::{HeaderValue, header},
    response::{IntoResponse, Response},
    routing::post,
    serve::ListenerExt,
};
use serde_json::json;
use tokio::net::TcpListener;

/// How the mock model answers.
#[derive(Debug, Clone)]
pub struct MockConfig {
    /// Time from the request to the first content chunk.
    pub first_token: Duration,
    /// Content chunks per answer.
    pub chunks: usize,
    /// Pause between two content chunks.
    pub gap: Duration,
    /// The text of each content chunk.
    pub chunk_text: String,
}

impl MockConfig {
    /// How long one answer takes, request to `[DONE]`.
    pub fn answer_time(&self) -> Duration {
        self.first_token + self.gap * self.chunks.saturating_sub(1) as u32
    }
}

/// The pre-encoded SSE frames of the answer.
#[derive(Debug)]
struct Answer {
    config: MockConfig,
    /// The first content chunk (it carries the assistant role).
    first: Bytes,
    /// Every later content chunk.
    next: Bytes,
    /// The finish reason, the usage and `[DONE]`, in one write.
    end: Bytes,
}

impl Answer {
    fn new(config: MockConfig) -> Self {
        let chunk = |delta: serde_json::Value, finish: serde_json::Value| {
            let body = json!({
                "id": "chatcmpl-parley-load",
                "object": "chat.completion.chunk",
                "created": 0,
                "model": "parley-load-mock",
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            });
            format!("data: {body}\n\n")
        };
        let first = chunk(
            json!({"role": "assistant", "content": config.chunk_text}),
            serde_json::Value::Null,
        );
        let next = chunk(
            json!({"content": config.chunk_text}),
            serde_json::Value::Null,
        );
        let completion_tokens = config.chunks;
        let usage = json!({
            "id": "chatcmpl-parley-load",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": "parley-load-mock",
            "choices": [],
            "usage": {
                "prompt_tokens": 50,
                "completion_tokens": completion_tokens,
                "total_tokens": 50 + completion_tokens,
            },
        });
        let end = format!(
            "{}data: {usage}\n\ndata: [DONE]\n\n",
            chunk(json!({}), json!("stop"))
        );
        Self {
            config,
            first: Bytes::from(first),
            next: Bytes::from(next),
            end: Bytes::from(end),
        }
    }

    /// The frames of one answer, each written when its time comes.
    fn stream(self: Arc<Self>) -> Body {
        let frames = futures::stream::unfold(0usize, move |index| {
            let answer = Arc::clone(&self);
            async move {
                let chunks = answer.config.chunks;
                let frame = if index == 0 {
                    tokio::time::sleep(answer.config.first_token).await;
                    if chunks == 0 {
                        answer.end.clone()
                    } else {
                        answer.first.clone()
                    }
                } else if index < chunks {
                    tokio::time::sleep(answer.config.gap).await;
                    answer.next.clone()
                } else if index == chunks {
                    answer.end.clone()
                } else {
                    return None;
                };
                let next = if chunks == 0 { usize::MAX } else { index + 1 };
                Some((Ok::<_, Infallible>(frame), next))
            }
        });
        Body::from_stream(frames)
    }
}

async fn completions(State(answer): State<Arc<Answer>>, _body: Bytes) -> Response {
    let mut response = answer.stream().into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}

/// Serves the mock on `listener` until the process ends (Nagle off on every
/// accepted socket, as a provider's edge does).
pub async fn serve(listener: TcpListener, config: MockConfig) -> std::io::Result<()> {
    let answer = Arc::new(Answer::new(config));
    let app = Router::new()
        .route("/v1/chat/completions", post(completions))
        .route("/chat/completions", post(completions))
        .with_state(answer);
    let listener = listener.tap_io(|socket| {
        // Best effort: a socket that refuses it still works, only slower.
        let _ = socket.set_nodelay(true);
    });
    axum::serve(listener, app).await
}
