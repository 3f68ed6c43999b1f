//! W3C trace context (`traceparent`, `tracestate`) in HTTP headers.
//!
//! gRPC metadata and reqwest requests are both an [`http::HeaderMap`], so one
//! extractor and one injector serve the server layer (incoming calls), the
//! client layer (calls to the runner, the parser and tool servers) and the
//! provider HTTP requests. With tracing off there is no active span, and
//! injecting writes nothing.

use http::{HeaderMap, HeaderName, HeaderValue};
use opentelemetry::{
    Context,
    propagation::{Extractor, Injector, TextMapPropagator},
    trace::TraceContextExt,
};
use opentelemetry_sdk::propagation::TraceContextPropagator;

struct Extract<'a>(&'a HeaderMap);

impl Extractor for Extract<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|value| value.to_str().ok())
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(HeaderName::as_str).collect()
    }
}

struct Inject<'a>(&'a mut HeaderMap);

impl Injector for Inject<'_> {
    fn set(&mut self, key: &str, value: String) {
        if let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(key.as_bytes()),
            HeaderValue::from_str(&value),
        ) {
            self.0.insert(name, value);
        }
    }
}

/// The remote parent carried by `headers`, or an empty context (a malformed
/// `traceparent` is ignored, as the W3C spec says).
pub fn extract(headers: &HeaderMap) -> Context {
    TraceContextPropagator::new().extract(&Extract(headers))
}

/// Writes the trace context of `cx` into `headers`; nothing when `cx` has no
/// valid span.
pub fn inject(cx: &Context, headers: &mut HeaderMap) {
    if cx.span().span_context().is_valid() {
        TraceContextPropagator::new().inject_context(cx, &mut Inject(headers));
    }
}

/// Writes the trace context of the current span into `headers` (provider
/// HTTP requests, made inside the `chat` span).
pub fn inject_current(headers: &mut HeaderMap) {
    inject(&Context::current(), headers);
}

/// The `traceparent` of the current `tracing` span, when it is traced: kept
/// with what it began (a turn), so that later calls about it can record on
/// its trace.
pub fn current_traceparent() -> Option<String> {
    use tracing_opentelemetry::OpenTelemetrySpanExt;
    let mut headers = HeaderMap::new();
    inject(&tracing::Span::current().context(), &mut headers);
    headers
        .get("traceparent")
        .and_then(|value| value.to_str().ok())
        .map(str::to_owned)
}

/// The remote parent a stored `traceparent` names; an empty context when it
/// is malformed.
pub fn from_traceparent(traceparent: &str) -> Context {
    let mut headers = HeaderMap::new();
    if let Ok(value) = HeaderValue::from_str(traceparent) {
        headers.insert("traceparent", value);
    }
    extract(&headers)
}

#[cfg(test)]
mod tests {
    use opentelemetry::trace::{SpanContext, SpanId, TraceFlags, TraceId, TraceState};

    use super::*;

    #[test]
    fn a_traceparent_survives_a_round_trip() {
        let mut headers = HeaderMap::new();
        headers.insert(
            "traceparent",
            HeaderValue::from_static("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"),
        );
        headers.insert("tracestate", HeaderValue::from_static("vendor=x"));
        let cx = extract(&headers);
        let span = cx.span();
        let remote = span.span_context();
        assert!(remote.is_valid() && remote.is_remote());
        assert_eq!(
            remote.trace_id().to_string(),
            "4bf92f3577b34da6a3ce929d0e0e4736"
        );
        let mut out = HeaderMap::new();
        inject(&cx, &mut out);
        assert_eq!(out.get("traceparent"), headers.get("traceparent"));
        assert_eq!(out.get("tracestate"), headers.get("tracestate"));
    }

    #[test]
    fn malformed_or_absent_context_injects_nothing() {
        let mut headers = HeaderMap::new();
        headers.insert("traceparent", HeaderValue::from_static("00-garbage"));
        let mut out = HeaderMap::new();
        inject(&extract(&headers), &mut out);
        inject_current(&mut out);
        assert!(out.is_empty(), "{out:?}");
        let valid = SpanContext::new(
            TraceId::from(1_u128),
            SpanId::from(2_u64),
            TraceFlags::SAMPLED,
            false,
            TraceState::default(),
        );
        inject(&Context::new().with_remote_span_context(valid), &mut out);
        assert!(out.contains_key("traceparent"));
    }

    #[test]
    fn a_stored_traceparent_names_its_span_and_garbage_names_none() {
        let stored = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let cx = from_traceparent(stored);
        assert_eq!(
            cx.span().span_context().span_id().to_string(),
            "00f067aa0ba902b7"
        );
        assert!(
            !from_traceparent("00-garbage\n")
                .span()
                .span_context()
                .is_valid()
        );
        assert_eq!(current_traceparent(), None, "no span, no traceparent");
    }
}
