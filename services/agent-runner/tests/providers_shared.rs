//! The scenarios every HTTP adapter must handle the same way, driven from
//! one table: a [`ProviderCase`] per provider says how to build it against a
//! replay server and which fixture (in its own wire format) plays each
//! scenario, with what it must yield. Each provider's own quirks stay in
//! `providers_<name>.rs`.

mod support;

use std::{sync::Arc, time::Duration};

use agent_runner::provider::{
    FinishReason, Provider, ProviderError, anthropic::AnthropicProvider, gemini::GeminiProvider,
    http::HttpProviderConfig, openai::OpenAiProvider,
};
use support::{
    events::{Drained, drain, request},
    replay::{ReplayServer, Reply, fixture},
};

/// What a piece of text from the wire must look like.
#[derive(Debug, Clone, Copy)]
enum Expect {
    Is(&'static str),
    Contains(&'static str),
    StartsWith(&'static str),
    EndsWith(&'static str),
}

impl Expect {
    fn check(self, case: &str, what: &str, actual: &str) {
        let ok = match self {
            Expect::Is(expected) => actual == expected,
            Expect::Contains(part) => actual.contains(part),
            Expect::StartsWith(prefix) => actual.starts_with(prefix),
            Expect::EndsWith(suffix) => actual.ends_with(suffix),
        };
        assert!(ok, "{case}: {what} {actual:?} is not {self:?}");
    }
}

/// A provider's error object in the middle of a stream, after some text.
struct MidStreamError {
    reply: fn() -> Reply,
    text: &'static str,
    kind: &'static str,
    message: Expect,
    raw: Expect,
}

/// An HTTP error status before the stream starts.
struct HttpError {
    reply: fn() -> Reply,
    retry_after: Option<Duration>,
    should_retry: Option<bool>,
    body_contains: &'static str,
}

/// One provider's answers to the shared scenarios.
struct ProviderCase {
    name: &'static str,
    model: &'static str,
    provider: fn(&ReplayServer) -> Box<dyn Provider>,
    /// The text of its `text.sse` fixture, the answer after a retry.
    answer: &'static str,
    mid_stream_error: MidStreamError,
    rate_limited: HttpError,
    unauthorized: HttpError,
    /// A stream that ends without its end marker, and the text before it.
    truncated: (fn() -> Reply, &'static str),
    /// A stream with a bad JSON event after `Hi`, and its raw text.
    malformed: (fn() -> Reply, Expect),
}

fn cases() -> [ProviderCase; 3] {
    [
        ProviderCase {
            name: "openai",
            model: "gpt-4o",
            provider: |server| {
                let mut cfg = HttpProviderConfig::new("openai", server.url("/v1"));
                cfg.api_keys = "sk-test-key".into();
                Box::new(OpenAiProvider::new(cfg).expect("provider builds"))
            },
            answer: "Hello there, how can I help?",
            mid_stream_error: MidStreamError {
                reply: || Reply::sse_fixture("openai/midstream_error.sse"),
                text: "Partial",
                kind: "server_error",
                message: Expect::Contains("server had an error"),
                raw: Expect::StartsWith("{\"error\":"),
            },
            rate_limited: HttpError {
                reply: || {
                    Reply::json(429, fixture("openai/rate_limited.json"))
                        .header("retry-after", "1")
                        .header("retry-after-ms", "1024")
                        .header("x-should-retry", "true")
                },
                retry_after: Some(Duration::from_millis(1024)),
                should_retry: Some(true),
                body_contains: "rate_limit_exceeded",
            },
            unauthorized: HttpError {
                reply: || {
                    Reply::json(401, fixture("openai/unauthorized.json"))
                        .header("x-should-retry", "false")
                },
                retry_after: None,
                should_retry: Some(false),
                body_contains: "invalid_api_key",
            },
            truncated: (
                || Reply::sse_fixture("openai/truncated.sse").chunked(5),
                "The answer is forty",
            ),
            malformed: (
                || Reply::sse_fixture("openai/malformed.sse").chunked(2),
                Expect::EndsWith("\"delta\":{\"content\":\"the"),
            ),
        },
        ProviderCase {
            name: "anthropic",
            model: "claude-sonnet-4-5",
            provider: |server| {
                let mut cfg = HttpProviderConfig::new("anthropic", server.url(""));
                cfg.api_keys = "sk-ant-test".into();
                Box::new(AnthropicProvider::new(cfg).expect("provider builds"))
            },
            answer: "Hello! It is sunny.",
            mid_stream_error: MidStreamError {
                reply: || Reply::sse_fixture("anthropic/overloaded.sse"),
                text: "Let me",
                kind: "overloaded_error",
                message: Expect::Is("Overloaded"),
                raw: Expect::Contains("overloaded_error"),
            },
            rate_limited: HttpError {
                reply: || {
                    Reply::json(429, fixture("anthropic/rate_limited.json"))
                        .header("retry-after", "15")
                        .header("x-should-retry", "true")
                },
                retry_after: Some(Duration::from_secs(15)),
                should_retry: Some(true),
                body_contains: "rate_limit_error",
            },
            unauthorized: HttpError {
                reply: || {
                    Reply::json(401, fixture("anthropic/unauthorized.json"))
                        .header("x-should-retry", "false")
                },
                retry_after: None,
                should_retry: Some(false),
                body_contains: "authentication_error",
            },
            truncated: (|| Reply::sse_fixture("anthropic/truncated.sse"), "All good"),
            malformed: (
                || Reply::sse_fixture("anthropic/malformed.sse").chunked(1),
                Expect::EndsWith("\"text\":\"oops}"),
            ),
        },
        ProviderCase {
            name: "gemini",
            model: "gemini-2.5-flash",
            provider: |server| {
                let mut cfg = HttpProviderConfig::new("gemini", server.url("/v1beta"));
                cfg.api_keys = "AIza-test".into();
                Box::new(GeminiProvider::new(cfg).expect("provider builds"))
            },
            answer: "The weather in Paris is mild and sunny.",
            mid_stream_error: MidStreamError {
                reply: || Reply::sse_fixture("gemini/midstream_error.sse"),
                text: "Partial",
                kind: "UNAVAILABLE",
                message: Expect::Contains("overloaded"),
                raw: Expect::Contains("\"code\": 503"),
            },
            rate_limited: HttpError {
                reply: || Reply::json(429, fixture("gemini/rate_limited.json")),
                retry_after: Some(Duration::from_millis(34_400)),
                should_retry: None,
                body_contains: "RESOURCE_EXHAUSTED",
            },
            unauthorized: HttpError {
                reply: || Reply::json(401, fixture("gemini/unauthorized.json")),
                retry_after: None,
                should_retry: None,
                body_contains: "UNAUTHENTICATED",
            },
            truncated: (
                || Reply::sse_fixture("gemini/truncated.sse"),
                "The weather in Paris",
            ),
            malformed: (
                || Reply::sse_fixture("gemini/malformed.sse").chunked(4),
                Expect::Is("{\"candidates\": [{\"content\": {\"parts\": [{\"text\": \"th"),
            ),
        },
    ]
}

impl ProviderCase {
    async fn replay(&self, reply: Reply) -> Drained {
        let server = ReplayServer::start(vec![reply]).await;
        let stream = (self.provider)(&server)
            .stream(request(self.model))
            .await
            .expect("stream starts");
        drain(stream).await
    }

    /// Asserts that the next call on `provider` fails with `expected`.
    async fn expect_http_error(&self, provider: &dyn Provider, status: u16, expected: &HttpError) {
        let name = self.name;
        match provider.stream(request(self.model)).await {
            Err(ProviderError::Http {
                status: got,
                retry_after,
                should_retry,
                body,
            }) => {
                assert_eq!(got, status, "{name}");
                assert_eq!(retry_after, expected.retry_after, "{name}");
                assert_eq!(should_retry, expected.should_retry, "{name}");
                assert!(body.contains(expected.body_contains), "{name}: {body}");
            }
            other => panic!(
                "{name}: expected HTTP {status}, got {:?}",
                other.map(|_| "a stream")
            ),
        }
    }
}

#[tokio::test]
async fn an_error_object_mid_stream_is_a_retryable_stream_error() {
    for case in cases() {
        let expected = &case.mid_stream_error;
        let out = case.replay((expected.reply)()).await;
        assert_eq!(out.text(), expected.text, "{}", case.name);
        match out.error() {
            ProviderError::StreamError {
                kind,
                message,
                retryable,
                raw,
            } => {
                assert_eq!(kind, expected.kind, "{}", case.name);
                expected.message.check(case.name, "message", message);
                assert!(*retryable, "{}", case.name);
                expected.raw.check(case.name, "raw", raw);
            }
            other => panic!("{}: unexpected {other:?}", case.name),
        }
    }
}

/// With `mid_answer_failover`, the whole loop over the real adapter: the
/// provider's error object after some text resets the step, the retry
/// answers, and only the retry's text is the answer.
#[tokio::test]
async fn with_failover_a_mid_stream_error_resets_the_step_and_the_retry_answers() {
    use agent_runner::{
        agent_loop::Runner,
        events::{EventKind, EventSink},
        provider::{Message, ModelChoice, Providers},
        retry::RetryPolicy,
        tools::ToolRuntime,
        turn::{Limits, Turn},
    };
    use tokio_util::sync::CancellationToken;

    for case in cases() {
        let name = case.name;
        let server = ReplayServer::start(vec![
            (case.mid_stream_error.reply)(),
            Reply::sse_fixture(&format!("{name}/text.sse")),
        ])
        .await;
        let provider: Arc<dyn Provider> = Arc::from((case.provider)(&server));
        let runner = Runner {
            providers: Arc::new(Providers::single(name, provider, case.model)),
            tools: ToolRuntime::with_builtins(),
            // No wait between attempts: the test covers what is sent.
            retry: RetryPolicy {
                base_delay: Duration::ZERO,
                ..RetryPolicy::default()
            },
            prices: Default::default(),
        };
        let turn = Turn {
            system: "".into(),
            messages: vec![Message::user("hi")],
            tools: Vec::new(),
            model: ModelChoice {
                provider: name.into(),
                model: case.model.into(),
                params: Default::default(),
            },
            fallbacks: Vec::new(),
            output_schema: None,
            output_schema_name: String::new(),
            limits: Limits::default(),
            conversation_id: "conv-1".into(),
            turn_id: "turn-1".into(),
            user_id: "user-1".into(),
            user_issuer: "static".into(),
            tenant: String::new(),
            text_tool_calls: false,
            mid_answer_failover: true,
            context: None,
            decisions: Vec::new(),
            iterations_done: 0,
            cache: Default::default(),
            inputs: Vec::new(),
            windows: Vec::new(),
            image_limits: Default::default(),
        };
        let prepared = runner.prepare(turn).expect("turn is valid");
        let (tx, mut rx) = tokio::sync::mpsc::channel(1024);
        runner
            .run(prepared, EventSink::new(tx), CancellationToken::new())
            .await;
        let mut kinds = Vec::new();
        while let Ok(event) = rx.try_recv() {
            kinds.push(event.kind);
        }
        let reset = kinds
            .iter()
            .position(|k| matches!(k, EventKind::StepReset(_)))
            .unwrap_or_else(|| panic!("{name}: no step reset in {kinds:#?}"));
        let texts = |kinds: &[EventKind]| -> String {
            kinds
                .iter()
                .filter_map(|k| match k {
                    EventKind::TextDelta(text) => Some(text.as_str()),
                    _ => None,
                })
                .collect()
        };
        assert_eq!(texts(&kinds[..reset]), case.mid_stream_error.text, "{name}");
        let EventKind::StepReset(step) = &kinds[reset] else {
            unreachable!()
        };
        assert_eq!(
            (step.iteration, step.reason.as_str()),
            (1, "PROVIDER_STREAM_ERROR"),
            "{name}"
        );
        assert_eq!(texts(&kinds[reset..]), case.answer, "{name}");
        let Some(EventKind::Finished(finished)) = kinds.last() else {
            panic!("{name}: {kinds:#?}")
        };
        assert_eq!(finished.text, case.answer, "{name}: only the retry's text");
        let usages = kinds
            .iter()
            .filter(|k| matches!(k, EventKind::Usage(_)))
            .count();
        assert_eq!(usages, 2, "{name}: both calls count");
        assert_eq!(server.requests().len(), 2, "{name}");
    }
}

#[tokio::test]
async fn http_429_carries_the_retry_delay_then_the_next_attempt_succeeds() {
    for case in cases() {
        let server = ReplayServer::start(vec![
            (case.rate_limited.reply)(),
            Reply::sse_fixture(&format!("{}/text.sse", case.name)),
        ])
        .await;
        let provider = (case.provider)(&server);
        case.expect_http_error(provider.as_ref(), 429, &case.rate_limited)
            .await;
        let out = drain(
            provider
                .stream(request(case.model))
                .await
                .expect("retry starts"),
        )
        .await;
        assert_eq!(out.text(), case.answer, "{}", case.name);
        assert_eq!(out.finish().reason, FinishReason::EndTurn, "{}", case.name);
        assert_eq!(server.requests().len(), 2, "{}", case.name);
    }
}

#[tokio::test]
async fn http_401_is_not_retryable() {
    for case in cases() {
        let server = ReplayServer::start(vec![(case.unauthorized.reply)()]).await;
        let provider = (case.provider)(&server);
        case.expect_http_error(provider.as_ref(), 401, &case.unauthorized)
            .await;
    }
}

#[tokio::test]
async fn a_stream_without_its_end_is_truncated() {
    for case in cases() {
        let (reply, text) = case.truncated;
        let out = case.replay(reply()).await;
        assert_eq!(out.text(), text, "{}", case.name);
        assert!(
            matches!(out.error(), ProviderError::Truncated),
            "{}: {:?}",
            case.name,
            out.error
        );
    }
}

#[tokio::test]
async fn a_bad_json_event_is_malformed_with_the_raw_text() {
    for case in cases() {
        let (reply, expected) = case.malformed;
        let out = case.replay(reply()).await;
        assert_eq!(out.text(), "Hi", "{}", case.name);
        match out.error() {
            ProviderError::Malformed { raw, .. } => expected.check(case.name, "raw", raw),
            other => panic!("{}: unexpected {other:?}", case.name),
        }
    }
}
