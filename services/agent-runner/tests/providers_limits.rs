//! A provider cannot exhaust the runner: a server of the test's own streams
//! without end (one endless line, one endless event, endless small events)
//! and the call fails with `PROVIDER_RESPONSE_TOO_LARGE`, the connection is
//! dropped, and no retry follows.

use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicUsize, Ordering},
    },
    time::Duration,
};

use agent_runner::{
    model_call::failure::AttemptError,
    provider::{
        ChatRequest, Message, Provider, ProviderError, StreamEvent, http::HttpProviderConfig,
        http::ResponseLimits, openai::OpenAiProvider,
    },
    retry::RetryPolicy,
};
use futures::StreamExt;
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::TcpListener,
};

/// What the endless server saw.
#[derive(Default)]
struct Seen {
    connections: AtomicUsize,
    written: AtomicUsize,
    client_closed: AtomicBool,
}

/// Serves every connection a 200 event stream: `head`, then `chunk` again
/// and again until the client goes away.
async fn endless(head: &'static [u8], chunk: Vec<u8>) -> (String, Arc<Seen>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}/v1", listener.local_addr().expect("addr"));
    let seen = Arc::new(Seen::default());
    let server_seen = seen.clone();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            server_seen.connections.fetch_add(1, Ordering::SeqCst);
            let seen = server_seen.clone();
            let chunk = chunk.clone();
            tokio::spawn(async move {
                let mut buf = vec![0u8; 64 * 1024];
                let mut request = Vec::new();
                while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                    match socket.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => request.extend_from_slice(&buf[..n]),
                    }
                }
                let answer = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\
                    transfer-encoding: chunked\r\n\r\n";
                if socket.write_all(answer).await.is_err() {
                    return;
                }
                let frame = |bytes: &[u8]| {
                    let mut frame = format!("{:x}\r\n", bytes.len()).into_bytes();
                    frame.extend_from_slice(bytes);
                    frame.extend_from_slice(b"\r\n");
                    frame
                };
                if !head.is_empty() && socket.write_all(&frame(head)).await.is_err() {
                    return;
                }
                let body = frame(&chunk);
                loop {
                    if socket.write_all(&body).await.is_err() {
                        seen.client_closed.store(true, Ordering::SeqCst);
                        return;
                    }
                    seen.written.fetch_add(chunk.len(), Ordering::SeqCst);
                }
            });
        }
    });
    (url, seen)
}

fn provider(url: String) -> OpenAiProvider {
    let mut cfg = HttpProviderConfig::new("endless", url);
    cfg.limits = ResponseLimits {
        max_event_bytes: 64 * 1024,
        max_response_bytes: 1024 * 1024,
    };
    OpenAiProvider::new(cfg).expect("provider builds")
}

fn request() -> ChatRequest {
    ChatRequest {
        model: "m".into(),
        system: "".into(),
        messages: vec![Message::user("hi")].into(),
        tools: Vec::new().into(),
        output_schema: None,
        max_output_tokens: None,
        params: Default::default(),
        cache: Default::default(),
    }
}

/// Runs one call against an endless server and checks how it ends.
async fn call_fails_too_large(head: &'static [u8], chunk: Vec<u8>, what: &str) {
    let (url, seen) = endless(head, chunk).await;
    let provider = provider(url);
    let mut stream = provider.stream(request()).await.expect("stream starts");
    let outcome = tokio::time::timeout(Duration::from_secs(60), async {
        while let Some(item) = stream.next().await {
            match item {
                Ok(StreamEvent::TextDelta(_)) | Ok(_) => {}
                Err(error) => return Some(error),
            }
        }
        None
    })
    .await
    .expect("the call ends");
    let error = outcome.expect("the call fails");
    assert!(
        matches!(&error, ProviderError::TooLarge { what: w, .. } if *w == what),
        "{error:?}"
    );
    let policy = RetryPolicy::default();
    let turn = AttemptError::Provider(error).into_turn_error(&policy, String::new(), true);
    assert_eq!(turn.reason, "PROVIDER_RESPONSE_TOO_LARGE");
    assert!(!turn.retryable);
    // The stream is still held here: the runner closed the connection itself.
    tokio::time::timeout(Duration::from_secs(30), async {
        while !seen.client_closed.load(Ordering::SeqCst) {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("the provider sees the connection closed");
    drop(stream);
    assert_eq!(seen.connections.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn an_endless_line_fails_the_call_as_too_large() {
    call_fails_too_large(b"data: ", vec![b'x'; 16 * 1024], "event").await;
}

#[tokio::test]
async fn an_endless_event_of_short_lines_fails_the_call_as_too_large() {
    call_fails_too_large(b"", b"data: xxxxxxxxxxxxxxxx\n".repeat(512), "event").await;
}

#[tokio::test]
async fn endless_small_events_fail_the_call_at_the_response_limit() {
    let event = b": keep-alive\n\ndata: {\"choices\":[]}\n\n".repeat(256);
    call_fails_too_large(b"", event, "response").await;
}
