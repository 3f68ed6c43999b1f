//! The SERVER side: a tower layer for `tonic::transport::Server`.

use std::{
    future::Future,
    pin::Pin,
    task::{Context, Poll},
};

use tonic::body::Body;
use tower::{Layer, Service};
use tracing::Instrument;
use tracing_opentelemetry::OpenTelemetrySpanExt;

use super::{
    MethodNames,
    body::{Call, Side, TracedBody},
    code_from_http, grpc_status, is_infrastructure,
};
use crate::telemetry::{self, propagation, semconv};

/// Adds [`RpcServer`] to every service of a server.
#[derive(Debug, Clone)]
pub struct RpcServerLayer {
    methods: MethodNames,
}

impl RpcServerLayer {
    /// A layer that knows Parley's methods.
    pub fn new() -> Self {
        Self {
            methods: MethodNames::parley(),
        }
    }
}

impl Default for RpcServerLayer {
    fn default() -> Self {
        Self::new()
    }
}

impl<S> Layer<S> for RpcServerLayer {
    type Service = RpcServer<S>;

    fn layer(&self, inner: S) -> Self::Service {
        RpcServer {
            inner,
            methods: self.methods.clone(),
        }
    }
}

/// Traces and times each incoming call.
#[derive(Debug, Clone)]
pub struct RpcServer<S> {
    inner: S,
    methods: MethodNames,
}

/// The span of an incoming call, child of the caller's span when the
/// metadata carries one.
fn server_span(method: &str, request: &http::Request<Body>) -> tracing::Span {
    let uri = request.uri();
    let span = tracing::info_span!(
        "rpc.server",
        otel.name = method,
        otel.kind = "server",
        { semconv::RPC_SYSTEM_NAME } = semconv::RPC_SYSTEM_GRPC,
        { semconv::RPC_METHOD } = method,
        { semconv::SERVER_ADDRESS } = uri.host().unwrap_or_default(),
        { semconv::SERVER_PORT } = uri.port_u16().map(i64::from),
    );
    let _ = span.set_parent(propagation::extract(request.headers()));
    span
}

type BoxFuture<T, E> = Pin<Box<dyn Future<Output = Result<T, E>> + Send>>;

impl<S> Service<http::Request<Body>> for RpcServer<S>
where
    S: Service<http::Request<Body>, Response = http::Response<Body>> + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
{
    type Response = http::Response<Body>;
    type Error = S::Error;
    type Future = BoxFuture<Self::Response, Self::Error>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<Body>) -> Self::Future {
        let path = request.uri().path();
        if is_infrastructure(path) {
            return Box::pin(self.inner.call(request));
        }
        let method = self.methods.label(path).to_owned();
        let span = if telemetry::tracing_enabled() {
            server_span(&method, &request)
        } else {
            tracing::Span::none()
        };
        let mut call = Call::start(Side::Server, span.clone(), &method, "");
        let future = self.inner.call(request).instrument(span);
        Box::pin(async move {
            let response = match future.await {
                Ok(response) => response,
                Err(error) => {
                    call.finish(2);
                    return Err(error);
                }
            };
            if let Some(code) = grpc_status(response.headers()) {
                call.set_status(code);
            } else if response.status() != http::StatusCode::OK {
                call.set_status(code_from_http(response.status()));
            }
            Ok(response.map(|body| Body::new(TracedBody::new(body, call))))
        })
    }
}
