//! Web clients on a gRPC listener.
//!
//! Browsers cannot speak gRPC: they have no access to HTTP/2 trailers and
//! often reach a server over HTTP/1.1. This crate lets them (and any
//! client of the two web protocols) call the same services on the same
//! listener, translated to gRPC in process so that everything behind it —
//! authentication, limits, telemetry, the services themselves — sees one
//! kind of call:
//!
//! - [`connect`]: the Connect protocol (connectrpc.com), unary and
//!   streaming, with the JSON (proto3 JSON mapped from the service
//!   descriptors) and binary codecs; errors are Connect's JSON errors with
//!   the same codes and `google.rpc` details;
//! - gRPC-Web, binary and text, by `tonic-web`;
//! - CORS for the origins a deployment names ([`cors`]): none by default,
//!   so a page served from another origin cannot call the API until an
//!   operator allows it.
//!
//! [`Web::layer`] stacks the three (CORS outermost, then gRPC-Web, then
//! Connect) as the listener's [`parley_grpc::HttpLayer`]; plain gRPC passes
//! through them untouched.

pub mod connect;
pub mod cors;

use std::sync::Arc;

pub use connect::{ConnectLimits, ConnectService, Methods};
use parley_grpc::{HttpLayer, HttpService};

/// Why the web layer cannot be built from its settings.
#[derive(Debug, thiserror::Error)]
pub enum WebError {
    /// An allowed origin is not `scheme://host[:port]`.
    #[error("`{origin}` is not an origin (scheme://host[:port], no path): {reason}")]
    Origin {
        /// The value as configured (cut to 100 bytes).
        origin: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The descriptor set does not decode, or names an unknown service.
    #[error("descriptors: {0}")]
    Descriptors(String),
}

/// The web protocols one listener serves.
#[derive(Clone)]
pub struct Web {
    methods: Arc<Methods>,
    limits: ConnectLimits,
    cors: Option<tower_http::cors::CorsLayer>,
}

impl std::fmt::Debug for Web {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Web")
            .field("methods", &self.methods.len())
            .field("limits", &self.limits)
            .field("cors", &self.cors.is_some())
            .finish()
    }
}

impl Web {
    /// Connect and gRPC-Web for the RPCs of `methods`, with CORS for
    /// `allowed_origins` (none: browsers only call from the listener's own
    /// origin).
    pub fn new(
        methods: Methods,
        limits: ConnectLimits,
        allowed_origins: &[String],
    ) -> Result<Self, WebError> {
        let cors = if allowed_origins.is_empty() {
            None
        } else {
            Some(cors::layer(allowed_origins)?)
        };
        Ok(Self {
            methods: Arc::new(methods),
            limits,
            cors,
        })
    }

    /// The listener's outermost layer: CORS (when origins are allowed),
    /// gRPC-Web, then Connect, in front of the served routes.
    pub fn layer(self) -> HttpLayer {
        HttpLayer::new(move |inner: HttpService| {
            let connect = ConnectService::new(inner, self.methods.clone(), self.limits);
            let grpc_web = tower::Layer::layer(&tonic_web::GrpcWebLayer::new(), connect);
            let grpc_web = tower::ServiceExt::<http::Request<tonic::body::Body>>::map_err(
                grpc_web,
                Into::into,
            );
            match &self.cors {
                None => HttpService::new(grpc_web),
                Some(cors) => HttpService::new(tower::Layer::layer(cors, grpc_web)),
            }
        })
    }
}
