//! The CLIENT side: a wrapper around a tonic `Channel`.
//!
//! `AgentRunnerClient::new(RpcClient::new(channel, &uri))` makes every call
//! of that client a CLIENT span (child of whatever span is current when the
//! call starts) whose context travels in the `traceparent` metadata.

use std::{
    future::Future,
    pin::Pin,
    sync::Arc,
    task::{Context, Poll},
};

use http_body::Body as HttpBody;
use tonic::{body::Body, codegen::Bytes};
use tower::Service;
use tracing::Instrument;
use tracing_opentelemetry::OpenTelemetrySpanExt;

use super::{
    body::{Call, Side, TracedBody},
    code_from_http, grpc_status,
};
use crate::{
    request_body::LookAhead,
    telemetry::{self, propagation, semconv},
};

/// A traced, timed gRPC channel. Cheap to clone, like the channel.
#[derive(Debug, Clone)]
pub struct RpcClient<S> {
    inner: S,
    host: Arc<str>,
    port: Option<u16>,
}

impl<S> RpcClient<S> {
    /// Wraps `inner`, a channel to `uri`.
    pub fn new(inner: S, uri: &http::Uri) -> Self {
        Self {
            inner,
            host: Arc::from(uri.host().unwrap_or_default()),
            port: uri.port_u16(),
        }
    }
}

/// Longest a finished stream is read for its trailers.
const DRAIN_LIMIT: std::time::Duration = std::time::Duration::from_secs(5);

/// Reads the rest of a response stream the caller no longer needs (it got
/// its last message) in a task of its own, so the call ends with the
/// server's real status instead of CANCELLED, without making the caller
/// wait for the trailers.
pub fn finish_in_background<T: Send + 'static>(mut stream: tonic::Streaming<T>) {
    tokio::spawn(async move {
        let drain = async { while let Ok(Some(_)) = stream.message().await {} };
        let _ = tokio::time::timeout(DRAIN_LIMIT, drain).await;
    });
}

type BoxFuture<T, E> = Pin<Box<dyn Future<Output = Result<T, E>> + Send>>;

impl<S, ResBody> Service<http::Request<Body>> for RpcClient<S>
where
    S: Service<http::Request<Body>, Response = http::Response<ResBody>> + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
    ResBody: HttpBody<Data = Bytes> + Send + 'static,
    ResBody::Error: Into<tonic::codegen::StdError>,
{
    type Response = http::Response<Body>;
    type Error = S::Error;
    type Future = BoxFuture<Self::Response, Self::Error>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: http::Request<Body>) -> Self::Future {
        // Our own stubs choose the path, so it is a bounded label.
        let method = request
            .uri()
            .path()
            .strip_prefix('/')
            .unwrap_or_default()
            .to_owned();
        let span = if telemetry::tracing_enabled() {
            let span = tracing::info_span!(
                "rpc.client",
                otel.name = method.as_str(),
                otel.kind = "client",
                { semconv::RPC_SYSTEM_NAME } = semconv::RPC_SYSTEM_GRPC,
                { semconv::RPC_METHOD } = method.as_str(),
                { semconv::SERVER_ADDRESS } = &*self.host,
                { semconv::SERVER_PORT } = self.port.map(i64::from),
            );
            propagation::inject(&span.context(), request.headers_mut());
            span
        } else {
            tracing::Span::none()
        };
        let mut call = Call::start(Side::Client, span.clone(), &method, &self.host);
        // The last request message goes out with END_STREAM, not in a
        // packet after it (see `LookAhead`).
        let request = request.map(|body| Body::new(LookAhead::new(body)));
        let future = self.inner.call(request).instrument(span);
        Box::pin(async move {
            let response = match future.await {
                Ok(response) => response,
                Err(error) => {
                    // The transport failed: tonic reports it as UNAVAILABLE.
                    call.finish(14);
                    return Err(error);
                }
            };
            if let Some(code) = grpc_status(response.headers()) {
                call.set_status(code);
            } else if response.status() != http::StatusCode::OK {
                call.set_status(code_from_http(response.status()));
            }
            Ok(response.map(|body| Body::new(TracedBody::new(Body::new(body), call))))
        })
    }
}
