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
    /// then gRPC-Web requests to `tonic-web` and everything else to
    /// Connect (which passes what is not Connect through), in front of the
    /// served routes.
    pub fn layer(self) -> HttpLayer {
        HttpLayer::new(move |inner: HttpService| {
            let grpc_web = tower::Layer::layer(&tonic_web::GrpcWebLayer::new(), inner.clone());
            let grpc_web = HttpService::new(
                tower::ServiceExt::<http::Request<tonic::body::Body>>::map_err(
                    grpc_web,
                    Into::into,
                ),
            );
            let connect = ConnectService::new(inner, self.methods.clone(), self.limits);
            let web = WebService { grpc_web, connect };
            match &self.cors {
                None => HttpService::new(web),
                Some(cors) => HttpService::new(tower::Layer::layer(cors, web)),
            }
        })
    }
}

/// gRPC-Web requests to `tonic-web` (which refuses any other HTTP/1.1
/// request), the rest to Connect.
#[derive(Clone)]
struct WebService {
    grpc_web: HttpService,
    connect: ConnectService,
}

impl tower::Service<http::Request<tonic::body::Body>> for WebService {
    type Response = http::Response<tonic::body::Body>;
    type Error = tower::BoxError;
    type Future = futures::future::BoxFuture<'static, Result<Self::Response, Self::Error>>;

    fn poll_ready(
        &mut self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Self::Error>> {
        // Both wrap the same routes, which are always ready.
        self.connect.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<tonic::body::Body>) -> Self::Future {
        let grpc_web = request
            .headers()
            .get(http::header::CONTENT_TYPE)
            .and_then(|value| value.to_str().ok())
            .is_some_and(|value| value.starts_with("application/grpc-web"));
        if grpc_web {
            Box::pin(tower::ServiceExt::oneshot(self.grpc_web.clone(), request))
        } else {
            self.connect.call(request)
        }
    }
}

#[cfg(test)]
mod tests {
    use http::{HeaderValue, Request, StatusCode};
    use http_body_util::{BodyExt as _, Full};
    use tonic::body::Body;
    use tower::ServiceExt as _;

    use super::*;

    const HEALTH: &str = "grpc.health.v1.Health";

    /// The web layer over a real health service, allowing `origins`.
    async fn served(origins: &[String]) -> HttpService {
        let (_reporter, health) = tonic_health::server::health_reporter();
        let inner = HttpService::new(tower::ServiceExt::<Request<Body>>::map_err(
            health,
            |never| match never {},
        ));
        let methods = Methods::new(&[tonic_health::pb::FILE_DESCRIPTOR_SET], &[HEALTH])
            .expect("health descriptors");
        let layer = Web::new(methods, ConnectLimits::default(), origins)
            .expect("valid origins")
            .layer();
        tower::Layer::layer(&layer, inner)
    }

    fn request(method: &str, content_type: &str) -> http::request::Builder {
        Request::builder()
            .method(method)
            .uri("/grpc.health.v1.Health/Check")
            .version(http::Version::HTTP_11)
            .header("content-type", content_type)
    }

    #[tokio::test]
    async fn http1_connect_and_grpc_web_reach_the_same_service() {
        let service = served(&[]).await;
        // Connect JSON over HTTP/1.1.
        let connect = request("POST", "application/json")
            .body(Body::new(Full::new(bytes::Bytes::from_static(b"{}"))))
            .expect("a request");
        let answer = service.clone().oneshot(connect).await.expect("an answer");
        assert_eq!(answer.status(), StatusCode::OK);
        let body = answer
            .into_body()
            .collect()
            .await
            .expect("a body")
            .to_bytes();
        assert_eq!(&body[..], br#"{"status":"SERVING"}"#);
        // gRPC-Web (binary) over HTTP/1.1: the message, then the trailers
        // as a frame flagged 0x80.
        let framed = bytes::Bytes::from_static(&[0, 0, 0, 0, 0]);
        let grpc_web = request("POST", "application/grpc-web+proto")
            .body(Body::new(Full::new(framed)))
            .expect("a request");
        let answer = service.clone().oneshot(grpc_web).await.expect("an answer");
        assert_eq!(answer.status(), StatusCode::OK);
        assert_eq!(
            answer.headers()["content-type"],
            "application/grpc-web+proto"
        );
        let body = answer
            .into_body()
            .collect()
            .await
            .expect("a body")
            .to_bytes();
        assert_eq!(&body[..7], &[0, 0, 0, 0, 2, 8, 1], "SERVING");
        let trailers = String::from_utf8_lossy(&body[12..]);
        assert_eq!(body[7], 0x80);
        assert!(trailers.contains("grpc-status:0"), "{trailers}");
        // gRPC-Web text: the same frames in base64.
        let text = request("POST", "application/grpc-web-text")
            .header("accept", "application/grpc-web-text")
            .body(Body::new(Full::new(bytes::Bytes::from_static(b"AAAAAAA="))))
            .expect("a request");
        let answer = service.clone().oneshot(text).await.expect("an answer");
        assert_eq!(answer.status(), StatusCode::OK);
        assert!(
            answer.headers()["content-type"]
                .to_str()
                .is_ok_and(|value| value.starts_with("application/grpc-web-text")),
            "{:?}",
            answer.headers()
        );
        let body = answer
            .into_body()
            .collect()
            .await
            .expect("a body")
            .to_bytes();
        assert!(body.starts_with(b"AAAAAAIIAQ"), "{body:?}");
        // Any other HTTP/1.1 request passes through (tonic-web alone would
        // refuse it with 400).
        let other = Request::get("/v1/other")
            .version(http::Version::HTTP_11)
            .body(Body::empty())
            .expect("a request");
        let answer = service.oneshot(other).await.expect("an answer");
        assert_ne!(answer.status(), StatusCode::BAD_REQUEST);
    }

    fn allowed_origin(answer: &http::Response<Body>) -> Option<&HeaderValue> {
        answer.headers().get("access-control-allow-origin")
    }

    #[tokio::test]
    async fn cors_answers_the_allowed_origins_only() {
        let preflight = |origin: &'static str| {
            Request::builder()
                .method("OPTIONS")
                .uri("/grpc.health.v1.Health/Check")
                .header("origin", origin)
                .header("access-control-request-method", "POST")
                .header(
                    "access-control-request-headers",
                    "authorization,content-type,connect-protocol-version",
                )
                .body(Body::empty())
                .expect("a request")
        };
        let allowed = served(&["https://app.example.com".to_owned()]).await;
        let answer = allowed
            .clone()
            .oneshot(preflight("https://app.example.com"))
            .await
            .expect("an answer");
        assert_eq!(
            allowed_origin(&answer),
            Some(&HeaderValue::from_static("https://app.example.com"))
        );
        let allowed_headers = answer.headers()["access-control-allow-headers"]
            .to_str()
            .expect("ASCII")
            .to_owned();
        assert!(
            allowed_headers.contains("authorization"),
            "{allowed_headers}"
        );
        let answer = allowed
            .oneshot(preflight("https://evil.example.com"))
            .await
            .expect("an answer");
        assert!(allowed_origin(&answer).is_none());
        // No origins configured: no CORS answer at all.
        let closed = served(&[]).await;
        let answer = closed
            .oneshot(preflight("https://app.example.com"))
            .await
            .expect("an answer");
        assert!(allowed_origin(&answer).is_none());
    }
}
