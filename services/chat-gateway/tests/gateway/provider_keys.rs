//! Several API keys of one provider, through the whole stack: the gateway,
//! the real runner configured with two key files, and a mock
//! OpenAI-compatible server that rate-limits the first key (429,
//! `retry-after: 60`) and answers the second. A turn succeeds without
//! waiting the minute out, and the next turn goes straight to the second
//! key while the first cools down.

use std::{
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use agent_runner::config::ProviderConfig;
use tokio::{
    io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader},
    net::{TcpListener, TcpStream},
};

use crate::{
    harness::{Harness, Options, chat, chat_request},
    real_stack::{real_runner_with, runner_config},
};

/// The key the mock rate-limits.
const LIMITED_KEY: &str = "sk-parley-test-limited";
/// The key the mock answers.
const GOOD_KEY: &str = "sk-parley-test-good";
/// What the model says.
const ANSWER: &str = "Hello from the second key.";

/// A mock `POST /v1/chat/completions` recording each request's
/// `Authorization` header.
struct MockOpenAi {
    url: String,
    seen: Arc<Mutex<Vec<String>>>,
}

impl MockOpenAi {
    async fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let seen = Arc::new(Mutex::new(Vec::new()));
        let record = seen.clone();
        tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                tokio::spawn(answer(socket, record.clone()));
            }
        });
        Self {
            url: format!("http://{addr}/v1"),
            seen,
        }
    }

    /// The `Authorization` headers seen so far, in order.
    fn seen(&self) -> Vec<String> {
        self.seen.lock().expect("lock").clone()
    }
}

/// Reads one request (headers, then `content-length` bytes of body) and
/// answers it by its key: 429 with `retry-after: 60` for
/// [`LIMITED_KEY`], a streamed answer otherwise; then closes.
async fn answer(socket: TcpStream, seen: Arc<Mutex<Vec<String>>>) {
    let mut reader = BufReader::new(socket);
    let mut authorization = String::new();
    let mut length = 0usize;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).await.unwrap_or(0) == 0 {
            return;
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':') {
            match name.trim().to_ascii_lowercase().as_str() {
                "authorization" => authorization = value.trim().to_owned(),
                "content-length" => length = value.trim().parse().unwrap_or(0),
                _ => {}
            }
        }
    }
    let mut body = vec![0; length];
    if reader.read_exact(&mut body).await.is_err() {
        return;
    }
    seen.lock().expect("lock").push(authorization.clone());
    let response = if authorization == format!("Bearer {LIMITED_KEY}") {
        let body = r#"{"error":{"message":"Rate limit reached for requests","type":"requests","param":null,"code":"rate_limit_exceeded"}}"#;
        format!(
            "HTTP/1.1 429 Too Many Requests\r\ncontent-type: application/json\r\n\
             retry-after: 60\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        )
    } else {
        let chunk = |delta: &str, finish: &str| {
            format!(
                "data: {{\"id\":\"chatcmpl-keys\",\"object\":\"chat.completion.chunk\",\"created\":0,\
                 \"model\":\"gpt-keys\",\"choices\":[{{\"index\":0,\"delta\":{delta},\
                 \"finish_reason\":{finish}}}]}}\n\n"
            )
        };
        format!(
            "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n{}{}data: [DONE]\n\n",
            chunk(
                &format!("{{\"role\":\"assistant\",\"content\":\"{ANSWER}\"}}"),
                "null"
            ),
            chunk("{}", "\"stop\""),
        )
    };
    let mut socket = reader.into_inner();
    let _ = socket.write_all(response.as_bytes()).await;
    let _ = socket.shutdown().await;
}

#[tokio::test]
async fn a_rate_limited_key_hands_the_turn_to_the_next_and_is_skipped_while_it_cools() {
    let mock = MockOpenAi::start().await;
    let keys = tempfile::tempdir().expect("tempdir");
    let first = keys.path().join("openai-key-1");
    let second = keys.path().join("openai-key-2");
    std::fs::write(&first, format!("{LIMITED_KEY}\n")).expect("key 1");
    std::fs::write(&second, format!("{GOOD_KEY}\n")).expect("key 2");
    let mut config = runner_config();
    let mut provider: ProviderConfig = toml::from_str(&format!(
        "kind = \"openai\"\nbase_url = \"{}\"\ndefault_model = \"gpt-keys\"",
        mock.url
    ))
    .expect("a provider table");
    provider.api_keys_file = Some(vec![first, second]);
    config.providers.insert("keyed".into(), provider);
    config.default_provider = "keyed".into();
    let mut stack = Harness::start(Options {
        runner_url: Some(real_runner_with(config).await),
        ..Options::default()
    })
    .await;

    let started = Instant::now();
    let turn = chat(
        &mut stack.client,
        chat_request("", "Say hello", "tables_list"),
    )
    .await;
    assert!(turn.complete.success, "{:?}", turn.complete);
    assert_eq!(turn.text, ANSWER);
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "the 429's minute was not waited out: {:?}",
        started.elapsed()
    );
    assert_eq!(
        mock.seen(),
        [
            format!("Bearer {LIMITED_KEY}"),
            format!("Bearer {GOOD_KEY}")
        ],
        "key 1 was tried, then the same call went to key 2"
    );

    let again = chat(
        &mut stack.client,
        chat_request(&turn.conversation_id(), "Again", "tables_list"),
    )
    .await;
    assert!(again.complete.success, "{:?}", again.complete);
    assert_eq!(
        mock.seen(),
        [
            format!("Bearer {LIMITED_KEY}"),
            format!("Bearer {GOOD_KEY}"),
            format!("Bearer {GOOD_KEY}"),
        ],
        "the second turn went straight to key 2 while key 1 cools down"
    );

    let metrics = parley_grpc::telemetry::metrics();
    let requests = |key: &str, outcome: &str| {
        metrics
            .provider_key_requests
            .with_label_values(&["keyed", key, outcome])
            .get()
    };
    assert_eq!(requests("openai-key-1", "rate_limited"), 1);
    assert_eq!(requests("openai-key-2", "ok"), 2);
    let rendered = metrics.render();
    assert!(
        !rendered.contains(LIMITED_KEY) && !rendered.contains(GOOD_KEY),
        "no key value in the metrics"
    );
    stack.stop().await;
}
