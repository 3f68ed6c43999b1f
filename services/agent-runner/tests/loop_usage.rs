//! A turn's usage: every count of every model call, summed over the agent
//! loop, from replayed transcripts of providers that report cache reads,
//! cache writes and reasoning (two tool rounds, then the answer).

mod support;

use std::sync::Arc;

use agent_runner::{
    agent_loop::Runner,
    events::EventKind,
    provider::{
        Provider, Providers, Usage, anthropic::AnthropicProvider, http::HttpProviderConfig,
        openai::OpenAiProvider,
    },
    tools::ToolRuntime,
};
use support::{
    replay::{ReplayServer, Reply},
    turns::{builtin, finished, pick, retry, run, turn},
};

/// Runs "what time is it?" over three replayed calls of `name`'s
/// `loop_call{1,2,3}.sse` and returns the per-call usage events and the
/// turn's total.
async fn three_calls(
    name: &str,
    model: &str,
    provider: impl FnOnce(&ReplayServer) -> Arc<dyn Provider>,
) -> (Vec<Usage>, Usage) {
    let replies = (1..=3)
        .map(|n| Reply::sse_fixture(&format!("{name}/loop_call{n}.sse")))
        .collect();
    let server = ReplayServer::start(replies).await;
    let runner = Runner {
        providers: Arc::new(Providers::single(name, provider(&server), model)),
        tools: ToolRuntime::with_builtins(),
        retry: retry(),
    };
    let mut turn = turn("what time is it?");
    turn.tools = vec![builtin("current_time", "current_time")];
    let events = run(&runner, turn).await;
    assert_eq!(server.requests().len(), 3, "{name}: three model calls");
    let finished = finished(&events);
    assert_eq!(finished.text, "Twice checked: it is noon.", "{name}");
    let calls = pick(&events, |kind| match kind {
        EventKind::Usage(report) => Some(report.usage),
        _ => None,
    });
    (calls, finished.usage)
}

/// The field-by-field sum of `calls`, written out (not with `+=`, which the
/// loop itself uses).
fn sum(calls: &[Usage]) -> Usage {
    Usage {
        input_tokens: calls.iter().map(|u| u.input_tokens).sum(),
        output_tokens: calls.iter().map(|u| u.output_tokens).sum(),
        cached_input_tokens: calls.iter().map(|u| u.cached_input_tokens).sum(),
        cache_write_tokens: calls.iter().map(|u| u.cache_write_tokens).sum(),
        reasoning_tokens: calls.iter().map(|u| u.reasoning_tokens).sum(),
    }
}

#[tokio::test]
async fn anthropic_cache_writes_and_reads_are_summed_over_three_calls() {
    let (calls, total) = three_calls("anthropic", "claude-sonnet-4-5", |server| {
        let mut cfg = HttpProviderConfig::new("anthropic", server.url(""));
        cfg.api_key = "sk-ant-test".into();
        Arc::new(AnthropicProvider::new(cfg).expect("provider builds"))
    })
    .await;
    assert_eq!(
        calls,
        vec![
            Usage {
                input_tokens: 12 + 2000,
                output_tokens: 40,
                cached_input_tokens: 0,
                cache_write_tokens: 2000,
                reasoning_tokens: 0,
            },
            Usage {
                input_tokens: 30 + 2000 + 60,
                output_tokens: 35,
                cached_input_tokens: 2000,
                cache_write_tokens: 60,
                reasoning_tokens: 0,
            },
            Usage {
                input_tokens: 25 + 2060,
                output_tokens: 80,
                cached_input_tokens: 2060,
                cache_write_tokens: 0,
                reasoning_tokens: 0,
            },
        ]
    );
    assert_eq!(total, sum(&calls));
    assert_eq!(
        (
            total.input_tokens,
            total.cached_input_tokens,
            total.cache_write_tokens
        ),
        (6187, 4060, 2060)
    );
}

#[tokio::test]
async fn openai_cached_and_reasoning_tokens_are_summed_over_three_calls() {
    let (calls, total) = three_calls("openai", "o4-mini", |server| {
        let mut cfg = HttpProviderConfig::new("openai", server.url("/v1"));
        cfg.api_key = "sk-test-key".into();
        Arc::new(OpenAiProvider::new(cfg).expect("provider builds"))
    })
    .await;
    assert_eq!(calls.len(), 3);
    assert_eq!(
        calls[1],
        Usage {
            input_tokens: 1620,
            output_tokens: 150,
            cached_input_tokens: 1408,
            cache_write_tokens: 0,
            reasoning_tokens: 128,
        }
    );
    assert_eq!(total, sum(&calls));
    assert_eq!(
        total,
        Usage {
            input_tokens: 1500 + 1620 + 1700,
            output_tokens: 210 + 150 + 90,
            cached_input_tokens: 1408 + 1536,
            cache_write_tokens: 0,
            reasoning_tokens: 192 + 128 + 64,
        }
    );
}
