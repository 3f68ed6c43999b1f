//! The OpenTelemetry spans a test's code makes, without a collector.

use std::sync::{Arc, Mutex, PoisonError};

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::{
    error::OTelSdkResult,
    trace::{SdkTracerProvider, SpanData, SpanExporter},
};
use tracing_subscriber::layer::SubscriberExt;

/// One ended span: its name and W3C ids (lowercase hex).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CapturedSpan {
    /// The OpenTelemetry span name (`execute_tool weather`).
    pub name: String,
    /// 32 hex digits.
    pub trace_id: String,
    /// 16 hex digits.
    pub span_id: String,
    /// The parent's span id, 16 hex digits (zeros for a root span).
    pub parent_span_id: String,
    /// The names of its span events, in order.
    pub events: Vec<String>,
    /// The trace ids of the spans it links to.
    pub links: Vec<String>,
}

impl CapturedSpan {
    /// The `traceparent` a child of this span would be sent with
    /// (sampled).
    pub fn traceparent(&self) -> String {
        format!("00-{}-{}-01", self.trace_id, self.span_id)
    }
}

#[derive(Debug, Clone, Default)]
struct Collect(Arc<Mutex<Vec<CapturedSpan>>>);

impl SpanExporter for Collect {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        let mut spans = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        spans.extend(batch.into_iter().map(|span| {
            CapturedSpan {
                name: span.name.into_owned(),
                trace_id: span.span_context.trace_id().to_string(),
                span_id: span.span_context.span_id().to_string(),
                parent_span_id: span.parent_span_id.to_string(),
                events: span
                    .events
                    .iter()
                    .map(|event| event.name.clone().into_owned())
                    .collect(),
                links: span
                    .links
                    .iter()
                    .map(|link| link.span_context.trace_id().to_string())
                    .collect(),
            }
        }));
        Ok(())
    }
}

/// Spans ended on this thread while the guard of [`SpanCapture::install`]
/// lives: in a current-thread runtime, those of every task, servers
/// included. Unlike the binaries' telemetry it needs no endpoint and
/// does not look at `tracing_enabled` (RPC spans, which do, stay off).
/// Use it in a test binary of its own (or in every test of the
/// binary): a test thread without a subscriber can register a span's
/// callsite as never wanted, for this thread's subscriber too.
#[derive(Debug)]
pub struct SpanCapture {
    spans: Collect,
    _provider: SdkTracerProvider,
}

impl SpanCapture {
    /// Installs the capture on this thread until the guard is dropped.
    pub fn install() -> (Self, tracing::subscriber::DefaultGuard) {
        let spans = Collect::default();
        let provider = SdkTracerProvider::builder()
            .with_simple_exporter(spans.clone())
            .build();
        let layer = tracing_opentelemetry::layer().with_tracer(provider.tracer("test"));
        let subscriber = tracing_subscriber::registry()
            .with(tracing_subscriber::filter::LevelFilter::INFO)
            .with(layer);
        let guard = tracing::subscriber::set_default(subscriber);
        (
            Self {
                spans,
                _provider: provider,
            },
            guard,
        )
    }

    /// The spans ended so far.
    pub fn spans(&self) -> Vec<CapturedSpan> {
        self.spans
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}
