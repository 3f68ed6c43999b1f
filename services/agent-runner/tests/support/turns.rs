//! Helpers for the loop and service tests: a provider wrapper that records
//! requests and stream drops, and builders for turns and runners. Every
//! run also checks the stream invariants (seq 1..n without gaps, one final
//! event, final text = concatenated text deltas).

use std::{
    sync::{
        Arc, Mutex,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use agent_runner::{
    agent_loop::Runner,
    events::{Event, EventKind, EventSink, Finished, Phase, TurnError},
    provider::{
        ChatRequest, EventStream, Message, Provider, ProviderError,
        scripted::{Script, ScriptedProvider},
    },
    provider::{ModelChoice, Providers},
    retry::RetryPolicy,
    tools::ToolRuntime,
    turn::{Limits, ToolDef, ToolEndpoint, Turn},
};
use futures::StreamExt;
use serde_json::Value;
use tokio::sync::{Notify, mpsc};
use tokio_util::sync::CancellationToken;

/// Wraps a provider: records every request and notices when a stream it
/// returned is dropped.
#[derive(Debug)]
pub struct Recording {
    inner: Arc<dyn Provider>,
    pub requests: Mutex<Vec<ChatRequest>>,
    pub dropped: Arc<AtomicUsize>,
    pub dropped_notify: Arc<Notify>,
}

impl Recording {
    pub fn new(inner: Arc<dyn Provider>) -> Arc<Self> {
        Arc::new(Self {
            inner,
            requests: Mutex::default(),
            dropped: Arc::default(),
            dropped_notify: Arc::default(),
        })
    }

    pub fn calls(&self) -> usize {
        self.requests.lock().expect("lock").len()
    }

    pub fn request(&self, index: usize) -> ChatRequest {
        self.requests.lock().expect("lock")[index].clone()
    }
}

struct DropFlag(Arc<AtomicUsize>, Arc<Notify>);

impl Drop for DropFlag {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
        self.1.notify_waiters();
        self.1.notify_one();
    }
}

#[async_trait::async_trait]
impl Provider for Recording {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn system(&self) -> &'static str {
        self.inner.system()
    }
    fn supports_structured_output(&self, model: &str) -> bool {
        self.inner.supports_structured_output(model)
    }
    async fn stream(&self, request: ChatRequest) -> Result<EventStream, ProviderError> {
        self.requests.lock().expect("lock").push(request.clone());
        let stream = self.inner.stream(request).await?;
        let flag = DropFlag(self.dropped.clone(), self.dropped_notify.clone());
        Ok(Box::pin(stream.map(move |item| {
            let _keep = &flag;
            item
        })))
    }
}

/// A scripted provider named `scripted`, recorded.
pub fn scripted(script: &str) -> Arc<Recording> {
    let script = Script::from_toml(script).expect("test script parses");
    Recording::new(Arc::new(ScriptedProvider::new("scripted", script)))
}

/// A fast retry policy (tests use paused time anyway).
pub fn retry() -> RetryPolicy {
    RetryPolicy {
        max_attempts: 3,
        ..RetryPolicy::default()
    }
}

/// A runner with one provider named `scripted` and the built-in tools.
pub fn runner(provider: Arc<Recording>) -> Runner {
    Runner {
        providers: Arc::new(Providers::single("scripted", provider, "scripted-demo")),
        tools: ToolRuntime::with_builtins(),
        retry: retry(),
        prices: Default::default(),
    }
}

/// A turn with one user message and default limits.
pub fn turn(user: &str) -> Turn {
    Turn {
        system: "You are a test.".into(),
        messages: vec![Message::user(user)],
        tools: Vec::new(),
        model: ModelChoice {
            provider: String::new(),
            model: String::new(),
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
        mid_answer_failover: false,
        context: None,
        decisions: Vec::new(),
        iterations_done: 0,
        cache: Default::default(),
        inputs: Vec::new(),
        windows: Vec::new(),
        image_limits: Default::default(),
    }
}

pub fn builtin(name: &str, builtin: &str) -> ToolDef {
    ToolDef {
        name: name.into(),
        description: String::new(),
        input_schema: Value::Null,
        endpoint: ToolEndpoint::Builtin(builtin.into()),
        timeout: None,
        needs_approval: false,
    }
}

pub fn remote(name: &str, address: &str, schema: Value, timeout: Option<Duration>) -> ToolDef {
    ToolDef {
        name: name.into(),
        description: format!("test tool {name}"),
        input_schema: schema,
        endpoint: ToolEndpoint::Grpc(address.into()),
        timeout,
        needs_approval: false,
    }
}

/// Runs a turn to its end and returns every event, checking the invariants.
pub async fn run(runner: &Runner, turn: Turn) -> Vec<Event> {
    let prepared = runner.prepare(turn).expect("turn is valid");
    let (tx, mut rx) = mpsc::channel(1024);
    runner
        .run(prepared, EventSink::new(tx), CancellationToken::new())
        .await;
    let mut events = Vec::new();
    while let Ok(event) = rx.try_recv() {
        events.push(*event);
    }
    check_invariants(&events);
    events
}

/// seq 1..n without gaps; exactly one final event, last; final text equals
/// the concatenated text deltas (less what a `StepReset` voided).
pub fn check_invariants(events: &[Event]) {
    for (i, event) in events.iter().enumerate() {
        assert_eq!(event.seq, i as u64 + 1, "seq gap at {i}: {events:#?}");
    }
    let finals = events
        .iter()
        .filter(|e| matches!(e.kind, EventKind::Finished(_) | EventKind::Error(_)))
        .count();
    assert_eq!(finals, 1, "exactly one final event: {events:#?}");
    assert!(matches!(
        events.last().map(|e| &e.kind),
        Some(EventKind::Finished(_) | EventKind::Error(_))
    ));
    let text = text_of(events);
    match &events.last().expect("events").kind {
        EventKind::Finished(finished) => assert_eq!(finished.text, text),
        EventKind::Error(error) => assert_eq!(error.partial_text, text),
        _ => unreachable!(),
    }
}

/// The concatenated text deltas, without those a `StepReset` voided (the
/// text of its model call, since the call's `ModelCall` status).
pub fn text_of(events: &[Event]) -> String {
    let mut text = String::new();
    let mut call_start = 0;
    for event in events {
        match &event.kind {
            EventKind::TextDelta(delta) => text.push_str(delta),
            EventKind::Status(status) if status.phase == Phase::ModelCall => {
                call_start = text.len()
            }
            EventKind::StepReset(_) => text.truncate(call_start),
            _ => {}
        }
    }
    text
}

pub fn finished(events: &[Event]) -> &Finished {
    match &events.last().expect("events").kind {
        EventKind::Finished(finished) => finished,
        other => panic!("expected Finished, got {other:?}"),
    }
}

pub fn error(events: &[Event]) -> &TurnError {
    match &events.last().expect("events").kind {
        EventKind::Error(error) => error,
        other => panic!("expected Error, got {other:?}"),
    }
}

/// The events matching `pick`.
pub fn pick<'a, T>(events: &'a [Event], pick: impl Fn(&'a EventKind) -> Option<T>) -> Vec<T> {
    events.iter().filter_map(|e| pick(&e.kind)).collect()
}
