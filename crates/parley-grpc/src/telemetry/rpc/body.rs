//! The end of a call: a response body that records the status and the
//! duration when the stream ends (trailers), or when it is dropped early;
//! on the server side it also settles the status in the trailers at the
//! edge ([`crate::edge`]) before recording it.

use std::{
    pin::Pin,
    task::{Context, Poll},
    time::Instant,
};

use http_body::{Body, Frame, SizeHint};
use opentelemetry::trace::Status;
use prometheus::IntGauge;
use tonic::codegen::Bytes;
use tracing_opentelemetry::OpenTelemetrySpanExt;

use super::grpc_status;
use crate::{
    codes::{code_name, is_server_error},
    edge::{self, CallAudit},
    telemetry::{metrics::metrics, semconv},
};

/// Which end of the call this process is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// The call came in.
    Server,
    /// The call went out.
    Client,
}

/// One call in flight: finished exactly once.
#[derive(Debug)]
pub struct Call {
    side: Side,
    span: tracing::Span,
    started: Instant,
    method: String,
    server_address: String,
    active: Option<IntGauge>,
    status: Option<i32>,
}

impl Call {
    /// A call of `method` that started now, traced by `span` (a disabled
    /// span when tracing is off).
    pub fn start(side: Side, span: tracing::Span, method: &str, server_address: &str) -> Self {
        let active = (side == Side::Server).then(|| {
            let gauge = metrics().rpc_active.with_label_values(&[method]);
            gauge.inc();
            gauge
        });
        Self {
            side,
            span,
            started: Instant::now(),
            method: method.to_owned(),
            server_address: server_address.to_owned(),
            active,
            status: None,
        }
    }

    /// Notes the status once it is known (headers of a trailers-only
    /// response, or the trailers).
    pub fn set_status(&mut self, code: i32) {
        self.status.get_or_insert(code);
    }

    /// Records the outcome: span status and attributes, duration, gauge.
    /// `fallback` is the code when none was seen.
    pub fn finish(self, fallback: i32) {
        self.end(fallback, false);
    }

    /// The body was dropped before its end with no status seen: the server
    /// side's caller went away, or this client stopped reading once it had
    /// what it needed (the gateway drops the runner's stream after
    /// `finished`). Both are CANCELLED; neither is this process failing.
    fn abandon(self) {
        self.end(1, true);
    }

    fn end(mut self, fallback: i32, abandoned: bool) {
        let abandoned = abandoned && self.status.is_none();
        let code = *self.status.get_or_insert(fallback);
        let name = code_name(code);
        let elapsed = self.started.elapsed().as_secs_f64();
        if !self.span.is_disabled() {
            self.span
                .set_attribute(semconv::RPC_RESPONSE_STATUS_CODE, name);
            let error = match self.side {
                Side::Server => is_server_error(code),
                Side::Client => code != 0 && !abandoned,
            };
            if error {
                self.span.set_attribute(semconv::ERROR_TYPE, name);
                self.span.set_status(Status::error(name));
            }
        }
        match self.side {
            Side::Server => metrics()
                .rpc_server_duration
                .with_label_values(&[self.method.as_str(), name])
                .observe(elapsed),
            Side::Client => metrics()
                .rpc_client_duration
                .with_label_values(&[self.method.as_str(), name, self.server_address.as_str()])
                .observe(elapsed),
        }
    }
}

impl Drop for Call {
    fn drop(&mut self) {
        if let Some(gauge) = self.active.take() {
            gauge.dec();
        }
    }
}

/// A response body that finishes its [`Call`] at its end.
#[derive(Debug)]
pub struct TracedBody<B> {
    inner: B,
    call: Option<Call>,
    audit: Option<CallAudit>,
}

impl<B> TracedBody<B> {
    /// Wraps `inner`; the status may already be known from the headers.
    pub fn new(inner: B, call: Call) -> Self {
        Self {
            inner,
            call: Some(call),
            audit: None,
        }
    }

    /// With `audit`, the status in the trailers is settled at the edge
    /// (a served call whose headers carried none).
    pub(crate) fn settling(mut self, audit: Option<CallAudit>) -> Self {
        self.audit = audit;
        self
    }
}

impl<B> Body for TracedBody<B>
where
    B: Body<Data = Bytes> + Unpin,
{
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        // The span is not entered here: polling a body creates no child
        // spans, and entering one per frame costs a clone and an
        // enter/exit on every message of a stream.
        let this = &mut *self;
        let polled = match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) if frame.is_trailers() => {
                Poll::Ready(Some(Ok(match this.audit.take() {
                    Some(audit) => settled(frame, &audit),
                    None => frame,
                })))
            }
            polled => polled,
        };
        match &polled {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(trailers) = frame.trailers_ref()
                    && let Some(call) = this.call.as_mut()
                    && let Some(code) = grpc_status(trailers)
                {
                    call.set_status(code);
                }
            }
            // The end, or a broken stream: UNKNOWN unless trailers said.
            Poll::Ready(Some(Err(_)) | None) => {
                if let Some(call) = this.call.take() {
                    call.finish(2);
                }
            }
            Poll::Pending => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// The trailers `frame` with the call's status settled at the edge.
fn settled(frame: Frame<Bytes>, audit: &CallAudit) -> Frame<Bytes> {
    match frame.into_trailers() {
        Ok(mut trailers) => {
            edge::settle(&mut trailers, audit);
            Frame::trailers(trailers)
        }
        Err(frame) => frame,
    }
}

impl<B> Drop for TracedBody<B> {
    fn drop(&mut self) {
        if let Some(call) = self.call.take() {
            call.abandon();
        }
    }
}
