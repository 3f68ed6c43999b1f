//! The SERVER side: a tower layer for `tonic::transport::Server`, the one
//! per-call layer of every Parley server: the call's span and metrics, and
//! its final status settled at the edge ([`crate::edge`]).

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
use crate::{
    edge::{self, AuditTenant, CallAudit},
    telemetry::{self, propagation, semconv},
};

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

/// Traces and times each incoming call, and settles its status.
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

    fn call(&mut self, mut request: http::Request<Body>) -> Self::Future {
        let path = request.uri().path();
        if is_infrastructure(path) {
            return Box::pin(self.inner.call(request));
        }
        let method = self.methods.label(path).to_owned();
        let audit = CallAudit {
            rpc: method.clone(),
            tenant: AuditTenant::default(),
        };
        request.extensions_mut().insert(audit.tenant.clone());
        let span = if telemetry::tracing_enabled() {
            server_span(&method, &request)
        } else {
            tracing::Span::none()
        };
        let mut call = Call::start(Side::Server, span.clone(), &method, "");
        let future = self.inner.call(request).instrument(span.clone());
        Box::pin(async move {
            let mut response = match future.await {
                Ok(response) => response,
                Err(error) => {
                    call.finish(2);
                    return Err(error);
                }
            };
            // A trailers-only response (every refusal before a stream
            // starts) has its status in the headers; otherwise the body's
            // trailers carry it.
            // In the call's span, as the handler's own log lines are.
            let audit = if span.in_scope(|| edge::settle(response.headers_mut(), &audit)) {
                None
            } else {
                Some(audit)
            };
            if let Some(code) = grpc_status(response.headers()) {
                call.set_status(code);
            } else if response.status() != http::StatusCode::OK {
                call.set_status(code_from_http(response.status()));
            }
            Ok(response.map(|body| Body::new(TracedBody::new(body, call).settling(audit))))
        })
    }
}
