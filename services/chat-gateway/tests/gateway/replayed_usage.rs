//! What a turn used and cost, through the whole stack: the gateway, the real
//! runner configured with each provider kind (OpenAI-compatible, Anthropic,
//! Gemini) in front of a server that replays that provider's documented
//! stream shape with cache and reasoning counts (the runner's
//! `loop_call{1,2,3}.sse` fixtures: two `current_time` rounds, then the
//! answer), priced by a route. `complete.usage` sums the three calls.

use std::sync::{
    Arc,
    atomic::{AtomicUsize, Ordering},
};

use agent_runner::{config::ProviderConfig, pricing::PricesConfig, routes::RouteConfig};
use parley_proto::gateway::v1 as gw;
use tokio::{
    io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader},
    net::{TcpListener, TcpStream},
};

use crate::{
    harness::{Harness, Options, chat, chat_request},
    real_stack::{real_runner_with, runner_config},
};

/// A server answering its n-th request with `bodies[n]` as an event
/// stream (whatever the path: each provider's own).
async fn replaying(bodies: Vec<String>) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let bodies = Arc::new(bodies);
    let next = Arc::new(AtomicUsize::new(0));
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            let index = next.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(answer(socket, bodies.get(index).cloned()));
        }
    });
    format!("http://{addr}")
}

/// Reads one request and answers `body` (a 500 when there is none).
async fn answer(socket: TcpStream, body: Option<String>) {
    let mut reader = BufReader::new(socket);
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
        if let Some((name, value)) = line.split_once(':')
            && name.trim().eq_ignore_ascii_case("content-length")
        {
            length = value.trim().parse().unwrap_or(0);
        }
    }
    let mut request = vec![0; length];
    if reader.read_exact(&mut request).await.is_err() {
        return;
    }
    let response = match body {
        Some(body) => format!(
            "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n{body}"
        ),
        None => {
            "HTTP/1.1 500 Internal Server Error\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
                .to_owned()
        }
    };
    let mut socket = reader.into_inner();
    let _ = socket.write_all(response.as_bytes()).await;
    let _ = socket.shutdown().await;
}

/// Runs "what time is it?" on a runner whose only provider, `kind`
/// (`model`, priced at `prices` per million tokens), is replayed, and
/// returns the turn's usage.
async fn replayed(kind: &str, root: &str, model: &str, prices: [f64; 4]) -> gw::Usage {
    let fixtures = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../agent-runner/tests/fixtures")
        .join(kind);
    let bodies = (1..=3)
        .map(|n| {
            std::fs::read_to_string(fixtures.join(format!("loop_call{n}.sse"))).expect("fixture")
        })
        .collect();
    let url = replaying(bodies).await;
    let mut config = runner_config();
    let provider: ProviderConfig = toml::from_str(&format!(
        "kind = \"{kind}\"\nbase_url = \"{url}{root}\"\ndefault_model = \"{model}\"\nprompt_cache = false"
    ))
    .expect("a provider table");
    config.providers.insert("replayed".into(), provider);
    config.default_provider = "replayed".into();
    let [input, cached, write, output] = prices;
    config.models.routes.insert(
        "priced".into(),
        RouteConfig {
            primary: format!("replayed/{model}"),
            fallbacks: Vec::new(),
            context_window: None,
            max_output_tokens: None,
            input: Vec::new(),
            prices: Some(PricesConfig {
                input,
                cached_input: Some(cached),
                cache_write: Some(write),
                output,
            }),
            max_image_bytes: None,
            max_image_edge: None,
        },
    );
    let mut stack = Harness::start(Options {
        runner_url: Some(real_runner_with(config).await),
        ..Options::default()
    })
    .await;
    let turn = chat(
        &mut stack.client,
        chat_request("", "What time is it?", "tables_list"),
    )
    .await;
    assert!(turn.complete.success, "{kind}: {:?}", turn.error);
    assert_eq!(
        turn.complete.message, "Twice checked: it is noon.",
        "{kind}"
    );
    stack.stop().await;
    turn.complete.usage.expect("usage")
}

#[tokio::test]
async fn anthropic_cache_reads_and_writes_are_counted_and_priced_over_three_calls() {
    let usage = replayed(
        "anthropic",
        "",
        "claude-sonnet-4-5",
        [3.00, 0.30, 3.75, 15.00],
    )
    .await;
    assert_eq!(
        usage,
        gw::Usage {
            input_tokens: 6187,
            output_tokens: 40 + 35 + 80,
            model_calls: 3,
            // The snapshot the provider says answered.
            model: "claude-sonnet-4-5-20250929".into(),
            cached_input_tokens: 4060,
            cache_write_tokens: 2060,
            reasoning_tokens: 0,
            // 8136 + 1440 + 1893 micro-dollars, as the runner's replay test.
            cost_micros: 11_469,
            currency: "USD".into(),
        }
    );
}

#[tokio::test]
async fn openai_cached_and_reasoning_tokens_are_counted_and_priced_over_three_calls() {
    let usage = replayed("openai", "/v1", "o4-mini", [1.10, 0.275, 1.10, 4.40]).await;
    assert_eq!(
        usage,
        gw::Usage {
            input_tokens: 1500 + 1620 + 1700,
            output_tokens: 210 + 150 + 90,
            model_calls: 3,
            model: "o4-mini-2025-04-16".into(),
            cached_input_tokens: 1408 + 1536,
            cache_write_tokens: 0,
            reasoning_tokens: 192 + 128 + 64,
            cost_micros: 2_574 + 1_280 + 999,
            currency: "USD".into(),
        }
    );
}

#[tokio::test]
async fn gemini_cached_and_thought_tokens_are_counted_and_priced_over_three_calls() {
    let usage = replayed(
        "gemini",
        "/v1beta",
        "gemini-2.5-flash",
        [0.30, 0.03, 0.30, 2.50],
    )
    .await;
    assert_eq!(
        usage,
        gw::Usage {
            input_tokens: 1200 + 1260 + 1310,
            output_tokens: 52 + 42 + 8,
            model_calls: 3,
            model: "gemini-2.5-flash".into(),
            cached_input_tokens: 2048,
            cache_write_tokens: 0,
            reasoning_tokens: 70,
            cost_micros: 490 + 207 + 137,
            currency: "USD".into(),
        }
    );
}
