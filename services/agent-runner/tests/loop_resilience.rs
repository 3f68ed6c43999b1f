//! Retries, fallback, errors after the first event, timeouts and the turn
//! deadline, all on paused tokio time with the scripted provider.

mod support;

use std::{sync::Arc, time::Duration};

use agent_runner::{
    agent_loop::Runner,
    events::{EventKind, Phase},
    provider::scripted::{Script, ScriptedProvider},
    provider::{ModelChoice, ProviderEntry, Providers},
    tools::ToolRuntime,
};
use support::turns::*;
use tokio::time::Instant;

fn statuses(events: &[agent_runner::events::Event], phase: Phase) -> Vec<String> {
    pick(events, |k| match k {
        EventKind::Status(s) if s.phase == phase => Some(s.message.clone()),
        _ => None,
    })
}

#[tokio::test(start_paused = true)]
async fn a_429_with_retry_after_is_retried_after_the_delay() {
    let provider = scripted(
        "[default]\nsteps = [{ fail = { status = 429, retry_after = \"2s\", message = \"slow down\", times = 1 } }, { text = \"Hello\" }]",
    );
    let runner = runner(provider.clone());
    let started = Instant::now();
    let events = run(&runner, turn("hi")).await;
    assert!(
        started.elapsed() >= Duration::from_secs(2),
        "waited for retry-after"
    );
    assert_eq!(provider.calls(), 2);
    let retrying = statuses(&events, Phase::Retrying);
    assert_eq!(
        retrying,
        vec!["Retrying after HTTP 429 (attempt 2 of 3)".to_owned()]
    );
    assert_eq!(finished(&events).text, "Hello");
}

#[tokio::test(start_paused = true)]
async fn a_401_is_not_retried() {
    let provider = scripted(
        "[default]\nsteps = [{ fail = { status = 401, message = \"invalid x-api-key\" } }]",
    );
    let runner = runner(provider.clone());
    let events = run(&runner, turn("hi")).await;
    assert_eq!(provider.calls(), 1);
    assert!(statuses(&events, Phase::Retrying).is_empty());
    let error = error(&events);
    assert_eq!(
        (error.reason.as_str(), error.retryable, error.code),
        ("PROVIDER_AUTH", false, tonic::Code::FailedPrecondition)
    );
    assert_eq!(error.provider_detail, "invalid x-api-key");
}

#[tokio::test(start_paused = true)]
async fn retries_are_bounded() {
    let provider = scripted("[default]\nsteps = [{ fail = { status = 503 } }]");
    let runner = runner(provider.clone());
    let events = run(&runner, turn("hi")).await;
    assert_eq!(provider.calls(), 3);
    assert_eq!(statuses(&events, Phase::Retrying).len(), 2);
    let error = error(&events);
    assert_eq!(
        (error.reason.as_str(), error.retryable),
        ("PROVIDER_UNAVAILABLE", true)
    );
}

#[tokio::test(start_paused = true)]
async fn a_fallback_model_answers_when_the_primary_fails_before_its_first_event() {
    let provider = scripted(
        r#"
        [[turns]]
        match = { model = "primary" }
        steps = [{ fail = { status = 529, message = "overloaded" } }]
        [[turns]]
        match = { model = "backup" }
        steps = [{ text = "From the backup." }]
        "#,
    );
    let runner = runner(provider.clone());
    let mut turn = turn("hi");
    turn.model = ModelChoice {
        provider: "scripted".into(),
        model: "primary".into(),
        params: Default::default(),
    };
    turn.fallbacks = vec![ModelChoice {
        provider: String::new(),
        model: "backup".into(),
        params: Default::default(),
    }];
    let events = run(&runner, turn).await;
    let models: Vec<String> = (0..provider.calls())
        .map(|i| provider.request(i).model)
        .collect();
    assert_eq!(models, vec!["primary", "primary", "primary", "backup"]);
    let fallback = statuses(&events, Phase::Fallback);
    assert_eq!(
        fallback,
        vec!["Falling back to scripted/backup after HTTP 529".to_owned()]
    );
    assert_eq!(finished(&events).text, "From the backup.");
    // Usage is reported for the model that answered.
    let usage_models = pick(&events, |k| match k {
        EventKind::Usage(u) => u.model.as_ref().map(|m| m.model.clone()),
        _ => None,
    });
    assert_eq!(usage_models, vec!["backup".to_owned()]);
}

#[tokio::test(start_paused = true)]
async fn a_failure_after_the_first_event_ends_the_turn_with_the_partial_text() {
    let provider = scripted(
        r#"
        [default]
        steps = [{ text = "The answer is" }, { stream_error = { kind = "overloaded_error", message = "Overloaded" } }]
        [[turns]]
        match = { model = "backup" }
        steps = [{ text = "never" }]
        "#,
    );
    let runner = runner(provider.clone());
    let mut turn = turn("hi");
    turn.fallbacks = vec![ModelChoice {
        provider: String::new(),
        model: "backup".into(),
        params: Default::default(),
    }];
    let events = run(&runner, turn).await;
    assert_eq!(
        provider.calls(),
        1,
        "no retry and no fallback once text was sent"
    );
    let error = error(&events);
    assert_eq!(error.partial_text, "The answer is");
    assert!(error.retryable);
    assert_eq!(error.reason, "PROVIDER_STREAM_ERROR");
    assert!(
        error.provider_detail.contains("overloaded_error"),
        "raw provider text: {}",
        error.provider_detail
    );
}

#[tokio::test(start_paused = true)]
async fn the_first_token_timeout_is_retried_then_reported() {
    let provider = scripted("[default]\nsteps = [{ delay = \"60s\" }, { text = \"late\" }]");
    let runner = runner(provider.clone());
    let mut turn = turn("hi");
    turn.limits.first_token_timeout = Duration::from_secs(5);
    let events = run(&runner, turn).await;
    assert_eq!(provider.calls(), 3);
    let error = error(&events);
    assert_eq!(
        (error.reason.as_str(), error.code),
        ("FIRST_TOKEN_TIMEOUT", tonic::Code::DeadlineExceeded)
    );
}

#[tokio::test(start_paused = true)]
async fn an_idle_stream_after_text_is_an_error_with_partial_text() {
    let provider =
        scripted("[default]\nsteps = [{ text = \"Hel\" }, { delay = \"60s\" }, { text = \"lo\" }]");
    let runner = runner(provider.clone());
    let mut turn = turn("hi");
    turn.limits.idle_timeout = Duration::from_secs(2);
    let events = run(&runner, turn).await;
    assert_eq!(provider.calls(), 1);
    let error = error(&events);
    assert_eq!(
        (
            error.reason.as_str(),
            error.partial_text.as_str(),
            error.retryable
        ),
        ("IDLE_TIMEOUT", "Hel", true)
    );
}

#[tokio::test(start_paused = true)]
async fn the_total_timeout_bounds_model_calls_retries_and_tools() {
    let provider = scripted(
        "[default]\nsteps = [{ text = \"thinking\" }, { delay = \"30s\" }, { text = \"!\" }]",
    );
    let runner = runner(provider);
    let mut turn = turn("hi");
    turn.limits.total_timeout = Duration::from_secs(3);
    let started = Instant::now();
    let events = run(&runner, turn).await;
    assert!(started.elapsed() < Duration::from_secs(30));
    let error = error(&events);
    assert_eq!(
        (error.reason.as_str(), error.partial_text.as_str()),
        ("DEADLINE_EXCEEDED", "thinking")
    );
}

#[tokio::test(start_paused = true)]
async fn a_second_provider_serves_as_fallback() {
    let broken = Arc::new(ScriptedProvider::new(
        "broken",
        Script::from_toml(
            "[default]\nsteps = [{ fail = { status = 400, message = \"bad request\" } }]",
        )
        .expect("script"),
    ));
    let working = Arc::new(ScriptedProvider::new(
        "working",
        Script::from_toml("[default]\nsteps = [{ text = \"ok\" }]").expect("script"),
    ));
    let providers = Providers::new(
        [
            (
                "broken".to_owned(),
                ProviderEntry {
                    provider: broken,
                    default_model: "m".into(),
                },
            ),
            (
                "working".to_owned(),
                ProviderEntry {
                    provider: working,
                    default_model: "w".into(),
                },
            ),
        ]
        .into_iter()
        .collect(),
        "broken",
    )
    .expect("providers");
    let runner = Runner {
        providers: Arc::new(providers),
        tools: ToolRuntime::with_builtins(),
        retry: retry(),
        prices: Default::default(),
    };
    let mut turn = turn("hi");
    turn.fallbacks = vec![ModelChoice {
        provider: "working".into(),
        model: String::new(),
        params: Default::default(),
    }];
    let events = run(&runner, turn).await;
    assert!(
        statuses(&events, Phase::Retrying).is_empty(),
        "400 is not retried"
    );
    assert_eq!(statuses(&events, Phase::Fallback).len(), 1);
    assert_eq!(finished(&events).text, "ok");
}

fn resets(events: &[agent_runner::events::Event]) -> Vec<(u32, String)> {
    pick(events, |k| match k {
        EventKind::StepReset(reset) => Some((reset.iteration, reset.reason.clone())),
        _ => None,
    })
}

#[tokio::test(start_paused = true)]
async fn with_failover_a_call_that_fails_midway_runs_again_and_tools_do_not() {
    let provider = scripted(
        r#"
        [default]
        steps = [
            { text = "Checking." },
            { tool_call = { name = "current_time", input = {} } },
            { text = "It is" },
            { stream_error = { kind = "overloaded_error", message = "Overloaded", retryable = true, times = 1 } },
            { text = " noon." },
        ]
        "#,
    );
    let runner = runner(provider.clone());
    let mut turn = turn("what time is it?");
    turn.tools = vec![builtin("current_time", "current_time")];
    turn.mid_answer_failover = true;
    let events = run(&runner, turn).await;
    assert_eq!(provider.calls(), 3, "the second call ran twice");
    assert_eq!(resets(&events), [(2, "PROVIDER_STREAM_ERROR".to_owned())]);
    let tool_starts = pick(&events, |k| match k {
        EventKind::ToolStart(start) => Some(start.name.clone()),
        _ => None,
    });
    assert_eq!(tool_starts, ["current_time"], "the tool ran once");
    let finished = finished(&events);
    assert_eq!(finished.text, "Checking.\n\nIt is noon.");
    // The failed call counts: three usage events, summed in the total.
    let usages = pick(&events, |k| match k {
        EventKind::Usage(report) => Some(report.usage),
        _ => None,
    });
    assert_eq!(usages.len(), 3);
    assert_eq!(
        finished.usage.output_tokens,
        usages.iter().map(|u| u.output_tokens).sum::<u64>()
    );
    // The reset's text went out before it; the retry's after it.
    let reset_at = events
        .iter()
        .position(|e| matches!(e.kind, EventKind::StepReset(_)))
        .expect("a reset");
    let before: String = text_of(&events[..reset_at]);
    assert!(before.ends_with("It is"), "{before:?}");
}

#[tokio::test(start_paused = true)]
async fn with_failover_a_model_that_keeps_failing_midway_falls_back() {
    let provider = scripted(
        r#"
        [default]
        steps = [{ text = "The answer is" }, { stream_error = { kind = "overloaded_error", message = "Overloaded", retryable = true } }]
        [[turns]]
        match = { model = "backup" }
        steps = [{ text = "Forty-two." }]
        "#,
    );
    let runner = runner(provider.clone());
    let mut turn = turn("hi");
    turn.mid_answer_failover = true;
    turn.fallbacks = vec![ModelChoice {
        provider: String::new(),
        model: "backup".into(),
        params: Default::default(),
    }];
    let events = run(&runner, turn).await;
    assert_eq!(provider.calls(), 4, "three attempts, then the fallback");
    assert_eq!(resets(&events).len(), 3);
    assert_eq!(statuses(&events, Phase::Fallback).len(), 1);
    assert_eq!(finished(&events).text, "Forty-two.");
}

#[tokio::test(start_paused = true)]
async fn with_failover_but_nothing_left_to_try_the_error_stays() {
    let provider = scripted(
        r#"
        [default]
        steps = [{ text = "The answer is" }, { stream_error = { kind = "invalid_request_error", message = "bad", retryable = false } }]
        "#,
    );
    let runner = runner(provider.clone());
    let mut turn = turn("hi");
    turn.mid_answer_failover = true;
    let events = run(&runner, turn).await;
    assert_eq!(provider.calls(), 1);
    assert!(
        resets(&events).is_empty(),
        "no reset without another attempt"
    );
    assert_eq!(error(&events).partial_text, "The answer is");
}
