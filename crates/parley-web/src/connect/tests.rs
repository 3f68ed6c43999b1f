//! The translation against a real tonic service (grpc.health.v1) and, for
//! what that service never sends (details, trailers, timeouts), against a
//! gRPC answer written by hand.

use std::sync::Arc;

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Request, Response, StatusCode};
use http_body_util::{BodyExt as _, Full};
use prost::Message as _;
use serde_json::{Value, json};
use tonic::body::Body;
use tower::{ServiceExt as _, service_fn};

use super::*;

const HEALTH: &str = "grpc.health.v1.Health";

fn methods() -> Arc<Methods> {
    Arc::new(
        Methods::new(
            &[
                tonic_health::pb::FILE_DESCRIPTOR_SET,
                parley_proto::GOOGLE_RPC_FILE_DESCRIPTOR_SET,
            ],
            &[HEALTH],
        )
        .expect("the health descriptors"),
    )
}

/// Connect in front of a real health service (`""` and `HEALTH` serving).
async fn health() -> ConnectService {
    let (reporter, service) = tonic_health::server::health_reporter();
    reporter
        .set_service_status(HEALTH, tonic_health::ServingStatus::Serving)
        .await;
    let inner = HttpService::new(tower::ServiceExt::<Request<Body>>::map_err(
        service,
        |never| match never {},
    ));
    ConnectService::new(inner, methods(), ConnectLimits::default())
}

/// Connect in front of a gRPC answer made by `answer` from the request.
fn scripted(
    answer: impl Fn(Request<Body>) -> Response<Body> + Clone + Send + Sync + 'static,
) -> ConnectService {
    let inner = HttpService::new(service_fn(move |request: Request<Body>| {
        let answer = answer.clone();
        async move { Ok::<_, BoxError>(answer(request)) }
    }));
    ConnectService::new(inner, methods(), ConnectLimits::default())
}

fn post(path: &str, content_type: &str, body: impl Into<Bytes>) -> Request<Body> {
    Request::post(path)
        .header("content-type", content_type)
        .header("connect-protocol-version", "1")
        .body(Body::new(Full::new(body.into())))
        .expect("a request")
}

async fn call(service: &ConnectService, request: Request<Body>) -> (StatusCode, HeaderMap, Bytes) {
    let response = service.clone().oneshot(request).await.expect("an answer");
    let (parts, body) = response.into_parts();
    let body = body.collect().await.expect("a body").to_bytes();
    (parts.status, parts.headers, body)
}

/// `Health/Check` with `body` as Connect JSON.
async fn check_json(
    service: &ConnectService,
    body: &'static str,
) -> (StatusCode, HeaderMap, Bytes) {
    call(
        service,
        post("/grpc.health.v1.Health/Check", "application/json", body),
    )
    .await
}

fn json_of(body: &[u8]) -> Value {
    serde_json::from_slice(body).expect("a JSON body")
}

/// The Connect envelopes of a stream's body.
fn envelopes(body: &[u8]) -> Vec<(u8, Value)> {
    let mut deframer = Deframer::new(usize::MAX);
    deframer.push(body);
    let mut out = Vec::new();
    while let Some((flags, message)) = deframer.next().expect("bounded") {
        out.push((flags, json_of(&message)));
    }
    assert!(!deframer.has_partial(), "the body ends on a whole envelope");
    out
}

/// A gRPC response: `messages` framed, then `trailers`.
fn grpc_answer(messages: &[&[u8]], trailers: &[(&'static str, &str)]) -> Response<Body> {
    let mut frames: Vec<Result<Frame<Bytes>, BoxError>> = messages
        .iter()
        .map(|message| Ok(Frame::data(envelope::encode(0, message))))
        .collect();
    let mut map = HeaderMap::new();
    for (name, value) in trailers {
        map.insert(*name, HeaderValue::from_str(value).expect("a header value"));
    }
    frames.push(Ok(Frame::trailers(map)));
    let mut response = Response::new(Body::new(StreamBody::new(futures::stream::iter(frames))));
    response
        .headers_mut()
        .insert("content-type", HeaderValue::from_static("application/grpc"));
    response
}

/// `grpc-status-details-bin` holding one `google.rpc.ErrorInfo`.
fn details_with_error_info(reason: &str) -> String {
    use base64::Engine as _;
    let info = prost_reflect::DynamicMessage::deserialize(
        methods()
            .pool()
            .get_message_by_name("google.rpc.ErrorInfo")
            .expect("ErrorInfo is described"),
        json!({"reason": reason, "domain": "parley.dev"}),
    )
    .expect("an ErrorInfo");
    let status = error::tests_support::status_bytes(
        3,
        "bad page",
        vec![prost_types::Any {
            type_url: "type.googleapis.com/google.rpc.ErrorInfo".into(),
            value: info.encode_to_vec(),
        }],
    );
    base64::engine::general_purpose::STANDARD_NO_PAD.encode(status)
}

#[tokio::test]
async fn a_unary_json_call_is_answered_with_its_message_in_proto3_json() {
    let service = health().await;
    let (status, headers, body) =
        check_json(&service, r#"{"service":"grpc.health.v1.Health"}"#).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(headers["content-type"], "application/json");
    assert_eq!(json_of(&body), json!({"status": "SERVING"}));
    // An empty body is the empty message (the server's overall status).
    let (status, _, body) = check_json(&service, "").await;
    assert_eq!(
        (status, json_of(&body)),
        (StatusCode::OK, json!({"status": "SERVING"}))
    );
}

#[tokio::test]
async fn a_unary_binary_call_carries_protobuf_both_ways() {
    let service = health().await;
    let request = tonic_health::pb::HealthCheckRequest {
        service: HEALTH.into(),
    };
    let (status, headers, body) = call(
        &service,
        post(
            "/grpc.health.v1.Health/Check",
            "application/proto",
            request.encode_to_vec(),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(headers["content-type"], "application/proto");
    let answer = tonic_health::pb::HealthCheckResponse::decode(body).expect("a response");
    assert_eq!(answer.status, 1, "SERVING");
}

#[tokio::test]
async fn a_refused_unary_call_gets_connects_error_with_the_http_status_of_its_code() {
    let service = health().await;
    let (status, headers, body) = check_json(&service, r#"{"service":"nope"}"#).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(headers["content-type"], "application/json");
    let error = json_of(&body);
    assert_eq!(error["code"], "not_found");
    assert!(
        error["message"].as_str().is_some_and(|m| !m.is_empty()),
        "{error}"
    );
}

#[tokio::test]
async fn bad_requests_are_refused_before_the_service_sees_them() {
    let service = health().await;
    // Not JSON of the request message.
    let (status, _, body) = check_json(&service, r#"{"service": 7}"#).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let error = json_of(&body);
    assert_eq!(error["code"], "invalid_argument");
    assert!(
        error["message"]
            .as_str()
            .unwrap_or_default()
            .contains("not a grpc.health.v1.HealthCheckRequest in proto3 JSON"),
        "{error}"
    );
    assert_eq!(error["details"][0]["debug"]["reason"], "MALFORMED_MESSAGE");
    // A streaming RPC called as unary.
    let (status, headers, _) = call(
        &service,
        post("/grpc.health.v1.Health/Watch", "application/json", "{}"),
    )
    .await;
    assert_eq!(status, StatusCode::UNSUPPORTED_MEDIA_TYPE);
    assert_eq!(headers["accept-post"], "application/connect+json");
    // A compression that is not supported.
    let mut compressed = post("/grpc.health.v1.Health/Check", "application/json", "{}");
    compressed
        .headers_mut()
        .insert("content-encoding", HeaderValue::from_static("br"));
    let (status, _, body) = call(&service, compressed).await;
    assert_eq!(
        (status, json_of(&body)["code"].clone()),
        (StatusCode::NOT_IMPLEMENTED, json!("unimplemented"))
    );
    assert_eq!(
        json_of(&body)["details"][0]["debug"]["reason"],
        "UNSUPPORTED_ENCODING"
    );
    // Another protocol version.
    let mut future = post("/grpc.health.v1.Health/Check", "application/json", "{}");
    future
        .headers_mut()
        .insert("connect-protocol-version", HeaderValue::from_static("2"));
    assert_eq!(call(&service, future).await.0, StatusCode::BAD_REQUEST);
    // A body over the limit.
    let small = ConnectService::new(
        service.inner.clone(),
        methods(),
        ConnectLimits {
            max_request_bytes: 8,
        },
    );
    let (status, _, body) = check_json(&small, r#"{"service":"a-long-name"}"#).await;
    assert_eq!(
        (status, json_of(&body)["code"].clone()),
        (StatusCode::TOO_MANY_REQUESTS, json!("resource_exhausted"))
    );
    let detail = &json_of(&body)["details"][0]["debug"];
    assert_eq!(
        (&detail["reason"], &detail["metadata"]["limit_bytes"]),
        (&json!("REQUEST_TOO_LARGE"), &json!("8"))
    );
    // A bad timeout.
    let mut late = post("/grpc.health.v1.Health/Check", "application/json", "{}");
    late.headers_mut()
        .insert("connect-timeout-ms", HeaderValue::from_static("-5"));
    assert_eq!(call(&service, late).await.0, StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn error_details_keep_their_type_and_bytes_and_read_as_json() {
    let details = details_with_error_info("PAGE_UNKNOWN");
    let service = scripted(move |_| {
        grpc_answer(
            &[],
            &[
                ("grpc-status", "3"),
                ("grpc-message", "bad%20page"),
                ("grpc-status-details-bin", &details),
            ],
        )
    });
    let (status, _, body) = check_json(&service, "{}").await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let error = json_of(&body);
    assert_eq!(error["code"], "invalid_argument");
    assert_eq!(
        error["message"], "bad page",
        "grpc-message is percent-decoded"
    );
    let detail = &error["details"][0];
    assert_eq!(detail["type"], "google.rpc.ErrorInfo");
    assert_eq!(
        detail["debug"],
        json!({"reason": "PAGE_UNKNOWN", "domain": "parley.dev"})
    );
    use base64::Engine as _;
    let value = base64::engine::general_purpose::STANDARD_NO_PAD
        .decode(detail["value"].as_str().expect("a value"))
        .expect("base64");
    assert!(!value.is_empty());
}

#[tokio::test]
async fn headers_become_metadata_and_the_timeout_a_grpc_timeout() {
    let service = scripted(|request| {
        let seen = |name: &str| {
            request
                .headers()
                .get(name)
                .and_then(|value| value.to_str().ok())
                .unwrap_or("-")
                .to_owned()
        };
        let answer = tonic_health::pb::HealthCheckResponse { status: 1 };
        let mut response = grpc_answer(
            &[&answer.encode_to_vec()],
            &[
                ("grpc-status", "0"),
                (
                    "x-seen",
                    &format!(
                        "{}|{}|{}|{}",
                        seen("authorization"),
                        seen("grpc-timeout"),
                        seen("content-type"),
                        seen("connect-timeout-ms")
                    ),
                ),
            ],
        );
        response
            .headers_mut()
            .insert("x-served-by", HeaderValue::from_static("test"));
        response
    });
    let mut request = post("/grpc.health.v1.Health/Check", "application/json", "{}");
    request
        .headers_mut()
        .insert("authorization", HeaderValue::from_static("Bearer t"));
    request
        .headers_mut()
        .insert("connect-timeout-ms", HeaderValue::from_static("1500"));
    let (status, headers, body) = call(&service, request).await;
    assert_eq!(
        (status, json_of(&body)),
        (StatusCode::OK, json!({"status": "SERVING"}))
    );
    assert_eq!(
        headers["trailer-x-seen"],
        "Bearer t|1500m|application/grpc|-"
    );
    assert_eq!(headers["x-served-by"], "test");
    assert!(headers.get("grpc-status").is_none() && headers.get("trailer-grpc-status").is_none());
    // Beyond what 8 digits of milliseconds say: seconds.
    assert_eq!(
        grpc_timeout(&HeaderValue::from_static("9999999999")).expect("valid"),
        "9999999S"
    );
}

#[tokio::test]
async fn a_stream_is_envelopes_then_the_end_message_with_status_and_trailers() {
    let service = scripted(|_| {
        let serving = tonic_health::pb::HealthCheckResponse { status: 1 }.encode_to_vec();
        let not_serving = tonic_health::pb::HealthCheckResponse { status: 2 }.encode_to_vec();
        grpc_answer(
            &[&serving, &not_serving],
            &[("grpc-status", "0"), ("x-trace", "abc")],
        )
    });
    let request = post(
        "/grpc.health.v1.Health/Watch",
        "application/connect+json",
        envelope::encode(0, b"{}"),
    );
    let (status, headers, body) = call(&service, request).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(headers["content-type"], "application/connect+json");
    assert_eq!(
        envelopes(&body),
        vec![
            (0, json!({"status": "SERVING"})),
            (0, json!({"status": "NOT_SERVING"})),
            (END_STREAM, json!({"metadata": {"x-trace": ["abc"]}})),
        ]
    );
}

#[tokio::test]
async fn a_failed_stream_ends_with_its_error_and_http_200() {
    let details = details_with_error_info("TOO_MANY");
    let service = scripted(move |_| {
        let serving = tonic_health::pb::HealthCheckResponse { status: 1 }.encode_to_vec();
        grpc_answer(
            &[&serving],
            &[
                ("grpc-status", "8"),
                ("grpc-message", "slow down"),
                ("grpc-status-details-bin", &details),
            ],
        )
    });
    let request = post(
        "/grpc.health.v1.Health/Watch",
        "application/connect+json",
        envelope::encode(0, b"{}"),
    );
    let (status, _, body) = call(&service, request).await;
    assert_eq!(status, StatusCode::OK);
    let got = envelopes(&body);
    assert_eq!(got.len(), 2);
    assert_eq!(got[1].0, END_STREAM);
    assert_eq!(got[1].1["error"]["code"], "resource_exhausted");
    assert_eq!(got[1].1["error"]["message"], "slow down");
    assert_eq!(
        got[1].1["error"]["details"][0]["debug"]["reason"],
        "TOO_MANY"
    );
    // A stream's request that is not one envelope ends at once, with why.
    let (status, _, body) = call(
        &health().await,
        post(
            "/grpc.health.v1.Health/Watch",
            "application/connect+json",
            "{}",
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(envelopes(&body)[0].1["error"]["code"], "invalid_argument");
}

#[tokio::test]
async fn a_real_server_stream_is_translated_and_can_be_cut_by_the_client() {
    let service = health().await;
    let request = post(
        "/grpc.health.v1.Health/Watch",
        "application/connect+proto",
        envelope::encode(
            0,
            &tonic_health::pb::HealthCheckRequest {
                service: HEALTH.into(),
            }
            .encode_to_vec(),
        ),
    );
    let response = service.oneshot(request).await.expect("an answer");
    assert_eq!(
        response.headers()["content-type"],
        "application/connect+proto"
    );
    let mut body = response.into_body();
    let first = body
        .frame()
        .await
        .expect("a frame")
        .expect("data")
        .into_data()
        .expect("data");
    let mut deframer = Deframer::new(usize::MAX);
    deframer.push(&first);
    let (flags, message) = deframer.next().expect("bounded").expect("a message");
    assert_eq!(flags, 0);
    assert_eq!(
        tonic_health::pb::HealthCheckResponse::decode(message)
            .expect("decodes")
            .status,
        1
    );
    // Watch never ends on its own: the client going away drops the call.
    drop(body);
}

#[tokio::test]
async fn other_requests_pass_through_untouched() {
    let service = scripted(|request| {
        let mut response = Response::new(Body::empty());
        response.headers_mut().insert(
            "x-saw",
            request
                .headers()
                .get("content-type")
                .cloned()
                .unwrap_or(HeaderValue::from_static("-")),
        );
        response
    });
    for (path, content_type) in [
        ("/grpc.health.v1.Health/Check", "application/grpc"),
        ("/grpc.health.v1.Health/Check", "application/grpc-web+proto"),
        ("/v1/ui/chat", "application/json"),
        ("/grpc.health.v1.Health/Nope", "application/json"),
    ] {
        let (status, headers, _) = call(&service, post(path, content_type, "{}")).await;
        assert_eq!(
            (status, &headers["x-saw"]),
            (
                StatusCode::OK,
                &HeaderValue::from_str(content_type).expect("valid")
            ),
            "{path} {content_type}"
        );
    }
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    use std::io::Write as _;
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    encoder.write_all(bytes).expect("in memory");
    encoder.finish().expect("in memory")
}

#[tokio::test]
async fn gzip_requests_are_read_within_the_limit() {
    let service = health().await;
    let mut unary = post(
        "/grpc.health.v1.Health/Check",
        "application/json",
        gzip(br#"{"service":"grpc.health.v1.Health"}"#),
    );
    unary
        .headers_mut()
        .insert("content-encoding", HeaderValue::from_static("gzip"));
    let (status, _, body) = call(&service, unary).await;
    assert_eq!(
        (status, json_of(&body)),
        (StatusCode::OK, json!({"status": "SERVING"}))
    );
    // A stream's message flagged compressed.
    let mut stream = post(
        "/grpc.health.v1.Health/Watch",
        "application/connect+json",
        envelope::encode(COMPRESSED, &gzip(b"{}")),
    );
    stream
        .headers_mut()
        .insert("connect-content-encoding", HeaderValue::from_static("gzip"));
    let response = service.clone().oneshot(stream).await.expect("an answer");
    let first = response
        .into_body()
        .frame()
        .await
        .expect("a frame")
        .expect("data");
    assert_eq!(
        envelopes(&first.into_data().expect("data")),
        vec![(0, json!({"status": "SERVING"}))]
    );
    // A small message that unfolds beyond the limit is refused.
    let small = ConnectService::new(
        service.inner.clone(),
        methods(),
        ConnectLimits {
            max_request_bytes: 64,
        },
    );
    let bomb = format!("{{\"service\":\"{}\"}}", "a".repeat(10_000));
    let mut unary = post(
        "/grpc.health.v1.Health/Check",
        "application/json",
        gzip(bomb.as_bytes()),
    );
    unary
        .headers_mut()
        .insert("content-encoding", HeaderValue::from_static("gzip"));
    let (status, _, body) = call(&small, unary).await;
    assert_eq!(
        (status, json_of(&body)["code"].clone()),
        (StatusCode::TOO_MANY_REQUESTS, json!("resource_exhausted"))
    );
    // Flagged compressed in a stream that named no compression.
    let stream = post(
        "/grpc.health.v1.Health/Watch",
        "application/connect+json",
        envelope::encode(COMPRESSED, &gzip(b"{}")),
    );
    let (_, _, body) = call(&service, stream).await;
    assert_eq!(envelopes(&body)[0].1["error"]["code"], "invalid_argument");
}
