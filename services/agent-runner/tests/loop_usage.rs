//! A turn's usage: every count of every model call, summed over the agent
//! loop, from replayed transcripts of providers that report cache reads,
//! cache writes and reasoning (two tool rounds, then the answer), each call
//! priced from the model's list prices.

mod support;

use std::sync::Arc;

use agent_runner::{
    agent_loop::Runner,
    events::EventKind,
    pricing::{PriceTable, Prices, PricesConfig},
    provider::{
        Provider, Providers, Usage, anthropic::AnthropicProvider, gemini::GeminiProvider,
        http::HttpProviderConfig, openai::OpenAiProvider,
    },
    tools::ToolRuntime,
};
use support::{
    replay::{ReplayServer, Reply},
    turns::{builtin, finished, pick, retry, run, turn},
};

/// A table pricing `name/model` at `prices` (per million tokens: input,
/// cached input, cache write, output).
fn priced(name: &str, model: &str, prices: [f64; 4]) -> Arc<PriceTable> {
    let [input, cached, write, output] = prices;
    let prices = Prices::from_config(
        &PricesConfig {
            input,
            cached_input: Some(cached),
            cache_write: Some(write),
            output,
        },
        "models.test.prices",
    )
    .expect("valid prices");
    Arc::new(
        PriceTable::new("USD".into(), [(format!("{name}/{model}"), prices, "test")])
            .expect("one price"),
    )
}

/// Runs "what time is it?" over three replayed calls of `name`'s
/// `loop_call{1,2,3}.sse`, `model` priced at `prices`, and returns the
/// per-call usage events and the turn's total.
async fn three_calls(
    name: &str,
    model: &str,
    prices: [f64; 4],
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
        prices: priced(name, model, prices),
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
        cost_micros: calls.iter().map(|u| u.cost_micros).sum(),
    }
}

#[tokio::test]
async fn anthropic_cache_writes_and_reads_are_summed_over_three_calls() {
    // Claude Sonnet 4.5's list prices: 3.00 in, 0.30 cache read, 3.75
    // cache write (5 minutes), 15.00 out.
    let prices = [3.00, 0.30, 3.75, 15.00];
    let (calls, total) = three_calls("anthropic", "claude-sonnet-4-5", prices, |server| {
        let mut cfg = HttpProviderConfig::new("anthropic", server.url(""));
        cfg.api_keys = "sk-ant-test".into();
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
                // 12 × 3 + 2000 × 3.75 + 40 × 15
                cost_micros: 36 + 7_500 + 600,
            },
            Usage {
                input_tokens: 30 + 2000 + 60,
                output_tokens: 35,
                cached_input_tokens: 2000,
                cache_write_tokens: 60,
                reasoning_tokens: 0,
                // 30 × 3 + 2000 × 0.30 + 60 × 3.75 + 35 × 15
                cost_micros: 90 + 600 + 225 + 525,
            },
            Usage {
                input_tokens: 25 + 2060,
                output_tokens: 80,
                cached_input_tokens: 2060,
                cache_write_tokens: 0,
                reasoning_tokens: 0,
                // 25 × 3 + 2060 × 0.30 + 80 × 15
                cost_micros: 75 + 618 + 1_200,
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
    assert_eq!(total.cost_micros, 11_469);
}

#[tokio::test]
async fn openai_cached_and_reasoning_tokens_are_summed_over_three_calls() {
    // o4-mini's list prices: 1.10 in, 0.275 cached, 4.40 out.
    let prices = [1.10, 0.275, 1.10, 4.40];
    let (calls, total) = three_calls("openai", "o4-mini", prices, |server| {
        let mut cfg = HttpProviderConfig::new("openai", server.url("/v1"));
        cfg.api_keys = "sk-test-key".into();
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
            // 212 × 1.10 + 1408 × 0.275 + 150 × 4.40 = 1280.4
            cost_micros: 1_280,
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
            // 2574 + 1280.4 + 998.8, each call rounded.
            cost_micros: 2_574 + 1_280 + 999,
        }
    );
}

#[tokio::test]
async fn gemini_cached_and_thought_tokens_are_summed_over_three_calls() {
    // Gemini 2.5 Flash's list prices: 0.30 in, 0.03 cached, 2.50 out
    // (implicit caching writes nothing).
    let prices = [0.30, 0.03, 0.30, 2.50];
    let (calls, total) = three_calls("gemini", "gemini-2.5-flash", prices, |server| {
        let mut cfg = HttpProviderConfig::new("gemini", server.url("/v1beta"));
        cfg.api_keys = "gemini-test-key".into();
        Arc::new(GeminiProvider::new(cfg).expect("provider builds"))
    })
    .await;
    assert_eq!(
        calls,
        vec![
            Usage {
                input_tokens: 1200,
                output_tokens: 12 + 40,
                cached_input_tokens: 0,
                cache_write_tokens: 0,
                reasoning_tokens: 40,
                // 1200 × 0.30 + 52 × 2.50
                cost_micros: 360 + 130,
            },
            Usage {
                input_tokens: 1260,
                output_tokens: 12 + 30,
                cached_input_tokens: 1024,
                cache_write_tokens: 0,
                reasoning_tokens: 30,
                // 236 × 0.30 + 1024 × 0.03 + 42 × 2.50 = 206.52
                cost_micros: 207,
            },
            Usage {
                input_tokens: 1310,
                output_tokens: 8,
                cached_input_tokens: 1024,
                cache_write_tokens: 0,
                reasoning_tokens: 0,
                // 286 × 0.30 + 1024 × 0.03 + 8 × 2.50 = 136.52
                cost_micros: 137,
            },
        ]
    );
    assert_eq!(total, sum(&calls));
    assert_eq!(total.cost_micros, 834);
}
