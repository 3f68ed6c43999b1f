//! Several API keys per provider against a replay server: a key the
//! provider rate-limits or refuses hands the same request to the next key
//! at once (no wait), and later requests skip it; a failure that says
//! nothing about the key stays with the retry policy.

mod support;

use std::time::{Duration, Instant};

use agent_runner::provider::{
    Provider, ProviderError,
    anthropic::AnthropicProvider,
    gemini::GeminiProvider,
    http::HttpProviderConfig,
    keys::{ApiKey, ApiKeys},
    openai::OpenAiProvider,
};
use parley_grpc::secret::SharedSecret;
use support::{
    events::{drain, request},
    replay::{ReplayServer, Reply, fixture},
};

/// Keys named `names`, each holding `sk-` and its name.
fn keys(names: &[&str]) -> ApiKeys {
    ApiKeys::new(
        names
            .iter()
            .map(|name| ApiKey {
                name: (*name).to_owned(),
                secret: SharedSecret::new(format!("sk-{name}")),
            })
            .collect(),
    )
}

/// The key header of every request the server saw.
fn sent(server: &ReplayServer, header: &str) -> Vec<String> {
    server
        .requests()
        .iter()
        .map(|r| r.header(header).unwrap_or_default().to_owned())
        .collect()
}

fn openai(server: &ReplayServer, names: &[&str]) -> OpenAiProvider {
    let mut cfg = HttpProviderConfig::new("openai-keys", server.url("/v1"));
    cfg.api_keys = keys(names);
    OpenAiProvider::new(cfg).expect("provider builds")
}

#[tokio::test]
async fn a_429_moves_the_request_to_the_next_key_at_once_and_later_requests_skip_it() {
    let server = ReplayServer::start(vec![
        Reply::json(429, fixture("openai/rate_limited.json")).header("retry-after", "60"),
        Reply::sse_fixture("openai/text.sse"),
        Reply::sse_fixture("openai/text.sse"),
    ])
    .await;
    let provider = openai(&server, &["KEY_1", "KEY_2"]);
    let started = Instant::now();
    let stream = provider
        .stream(request("gpt-4o"))
        .await
        .expect("key 2 answers");
    assert_eq!(drain(stream).await.text(), "Hello there, how can I help?");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "the 429's 60 s were not waited out: {:?}",
        started.elapsed()
    );
    let stream = provider
        .stream(request("gpt-4o"))
        .await
        .expect("key 2 again");
    assert_eq!(drain(stream).await.text(), "Hello there, how can I help?");
    assert_eq!(
        sent(&server, "authorization"),
        ["Bearer sk-KEY_1", "Bearer sk-KEY_2", "Bearer sk-KEY_2"]
    );
}

#[tokio::test]
async fn a_refused_key_is_set_aside_for_the_next() {
    let server = ReplayServer::start(vec![
        Reply::json(401, fixture("anthropic/unauthorized.json")).header("x-should-retry", "false"),
        Reply::sse_fixture("anthropic/text.sse"),
        Reply::sse_fixture("anthropic/text.sse"),
        Reply::sse_fixture("anthropic/text.sse"),
    ])
    .await;
    let mut cfg = HttpProviderConfig::new("anthropic-keys", server.url(""));
    cfg.api_keys = keys(&["ANT_1", "ANT_2"]);
    let provider = AnthropicProvider::new(cfg).expect("provider builds");
    for _ in 0..3 {
        let stream = provider
            .stream(request("claude-sonnet-4-5"))
            .await
            .expect("key 2 answers");
        assert_eq!(drain(stream).await.text(), "Hello! It is sunny.");
    }
    assert_eq!(
        sent(&server, "x-api-key"),
        ["sk-ANT_1", "sk-ANT_2", "sk-ANT_2", "sk-ANT_2"]
    );
}

#[tokio::test]
async fn geminis_invalid_key_answer_moves_to_the_next_key() {
    let server = ReplayServer::start(vec![
        Reply::json(400, fixture("gemini/invalid_key.json")),
        Reply::sse_fixture("gemini/text.sse"),
    ])
    .await;
    let mut cfg = HttpProviderConfig::new("gemini-keys", server.url("/v1beta"));
    cfg.api_keys = keys(&["GEM_1", "GEM_2"]);
    let provider = GeminiProvider::new(cfg).expect("provider builds");
    let stream = provider
        .stream(request("gemini-2.5-flash"))
        .await
        .expect("key 2 answers");
    assert!(!drain(stream).await.text().is_empty());
    assert_eq!(sent(&server, "x-goog-api-key"), ["sk-GEM_1", "sk-GEM_2"]);
}

#[tokio::test]
async fn when_every_key_is_rate_limited_the_last_429_is_the_answer() {
    let server = ReplayServer::start(vec![
        Reply::json(429, fixture("openai/rate_limited.json")).header("retry-after", "5"),
        Reply::json(429, fixture("openai/rate_limited.json")).header("retry-after", "7"),
        Reply::sse_fixture("openai/text.sse"),
    ])
    .await;
    let provider = openai(&server, &["KEY_1", "KEY_2"]);
    let Err(error) = provider.stream(request("gpt-4o")).await else {
        panic!("both keys are rate-limited")
    };
    assert!(
        matches!(
            error,
            ProviderError::Http {
                status: 429,
                retry_after: Some(delay),
                ..
            } if delay == Duration::from_secs(7)
        ),
        "the retry policy waits out the last key's delay: {error:?}"
    );
    // The next request goes to the key whose cooldown ends first.
    let stream = provider.stream(request("gpt-4o")).await.expect("answers");
    drain(stream).await;
    assert_eq!(
        sent(&server, "authorization"),
        ["Bearer sk-KEY_1", "Bearer sk-KEY_2", "Bearer sk-KEY_1"]
    );
}

#[tokio::test]
async fn a_failure_that_says_nothing_about_the_key_is_left_to_the_retry_policy() {
    let server = ReplayServer::start(vec![
        Reply::json(503, fixture("gemini/overloaded_503.json")),
        Reply::sse_fixture("openai/text.sse"),
        Reply::sse_fixture("openai/text.sse"),
    ])
    .await;
    let provider = openai(&server, &["KEY_1", "KEY_2"]);
    let Err(error) = provider.stream(request("gpt-4o")).await else {
        panic!("the 503 is the answer")
    };
    assert!(
        matches!(error, ProviderError::Http { status: 503, .. }),
        "{error:?}"
    );
    // Key 1 was not set aside: the requests keep taking turns.
    for _ in 0..2 {
        let stream = provider.stream(request("gpt-4o")).await.expect("answers");
        drain(stream).await;
    }
    assert_eq!(
        sent(&server, "authorization"),
        ["Bearer sk-KEY_1", "Bearer sk-KEY_2", "Bearer sk-KEY_1"]
    );
}
