//! The Connect protocol (connectrpc.com/docs/protocol) on a gRPC listener.
//!
//! [`ConnectService`] sits in front of the gRPC routes. A request with one
//! of Connect's content types for a known RPC is translated in process: its
//! message (proto3 JSON through the descriptors, or binary as it is) is
//! framed as a gRPC request with the caller's headers as metadata and
//! `connect-timeout-ms` as `grpc-timeout`; the gRPC answer comes back as
//! Connect's — a unary response's message as the body, or its error as
//! Connect's JSON error with the HTTP status of its code; a stream's
//! messages as Connect envelopes, closed by the end-of-stream message that
//! carries the status and the trailers. Everything else (gRPC, gRPC-Web,
//! other HTTP routes) passes through untouched.
//!
//! Requests may be gzip-compressed (as Connect clients send by default),
//! unfolded within the same size limit; responses are not compressed.
//! Not supported, and refused clearly: other compressions
//! (`unimplemented`) and the GET form of unary calls.
//! Client streams work half-duplex, as Connect over HTTP/1.1 does.

mod envelope;
mod error;
mod methods;
#[cfg(test)]
mod tests;

use std::{
    sync::{Arc, Mutex},
    task::{Context, Poll},
};

use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue, Request, Response, header};
use http_body::Frame;
use http_body_util::{BodyExt as _, Full, Limited, StreamBody};
use parley_grpc::HttpService;
use serde_json::{Map, Value, json};
use tonic::{Code, body::Body};
use tower::{BoxError, Service, ServiceExt as _};

use envelope::{COMPRESSED, Deframer, END_STREAM};
pub use error::{ConnectError, code_name};
pub use methods::{Codec, Method, Methods};

/// Connect's limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectLimits {
    /// The largest request message, in bytes of its codec (a JSON request
    /// is larger than the same message in protobuf).
    pub max_request_bytes: usize,
}

impl Default for ConnectLimits {
    fn default() -> Self {
        Self {
            max_request_bytes: 8 * 1024 * 1024,
        }
    }
}

/// Headers that belong to one protocol's framing, never passed on as
/// metadata.
const FRAMING_HEADERS: [&str; 12] = [
    "content-type",
    "content-length",
    "content-encoding",
    "accept-encoding",
    "transfer-encoding",
    "connection",
    "keep-alive",
    "te",
    "connect-protocol-version",
    "connect-timeout-ms",
    "connect-content-encoding",
    "connect-accept-encoding",
];

/// The Connect translation in front of a listener's routes.
#[derive(Clone)]
pub struct ConnectService {
    inner: HttpService,
    methods: Arc<Methods>,
    limits: ConnectLimits,
}

impl ConnectService {
    /// Connect for the RPCs of `methods`, served by `inner`.
    pub fn new(inner: HttpService, methods: Arc<Methods>, limits: ConnectLimits) -> Self {
        Self {
            inner,
            methods,
            limits,
        }
    }
}

impl Service<Request<Body>> for ConnectService {
    type Response = Response<Body>;
    type Error = BoxError;
    type Future = futures::future::BoxFuture<'static, Result<Response<Body>, BoxError>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<Body>) -> Self::Future {
        let Some(call) = classify(&request, &self.methods) else {
            return self.inner.call(request);
        };
        let translated = Translation {
            inner: self.inner.clone(),
            methods: self.methods.clone(),
            limits: self.limits,
        };
        Box::pin(async move {
            Ok(match call {
                Err(refused) => refused,
                Ok(call) if call.stream => translated.stream(call, request).await,
                Ok(call) => translated.unary(call, request).await,
            })
        })
    }
}

/// A Connect request for a known RPC.
struct Call {
    method: Method,
    codec: Codec,
    /// Connect's streaming protocol (enveloped messages, end message).
    stream: bool,
}

/// Whether `request` is a Connect call this service translates: `None`
/// passes it through, an error answers it at once.
fn classify(request: &Request<Body>, methods: &Methods) -> Option<Result<Call, Response<Body>>> {
    if request.method() != http::Method::POST {
        return None;
    }
    let content_type = request.headers().get(header::CONTENT_TYPE)?.to_str().ok()?;
    let media = content_type
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    let (stream, codec) = match media.as_str() {
        "application/json" => (false, Codec::Json),
        "application/proto" => (false, Codec::Proto),
        "application/connect+json" => (true, Codec::Json),
        "application/connect+proto" => (true, Codec::Proto),
        _ => return None,
    };
    let method = methods.get(request.uri().path())?;
    if stream == method.is_unary() {
        let expected = match (method.is_unary(), codec) {
            (true, Codec::Json) => "application/json",
            (true, Codec::Proto) => "application/proto",
            (false, Codec::Json) => "application/connect+json",
            (false, Codec::Proto) => "application/connect+proto",
        };
        let refused = ConnectError::malformed(format!(
            "{} is a {} RPC: send it as {expected}",
            request.uri().path(),
            if method.is_unary() {
                "unary"
            } else {
                "streaming"
            }
        ));
        let refused = self::refused(request.uri().path(), refused);
        let mut response = unary_error(&refused, methods, HeaderMap::new());
        *response.status_mut() = http::StatusCode::UNSUPPORTED_MEDIA_TYPE;
        response.headers_mut().insert(
            HeaderName::from_static("accept-post"),
            HeaderValue::from_static(expected),
        );
        return Some(Err(response));
    }
    Some(Ok(Call {
        method: method.clone(),
        codec,
        stream,
    }))
}

/// What one translated call needs.
struct Translation {
    inner: HttpService,
    methods: Arc<Methods>,
    limits: ConnectLimits,
}

impl Translation {
    /// A unary call: one message in the body each way.
    async fn unary(self, call: Call, request: Request<Body>) -> Response<Body> {
        let (parts, body) = request.into_parts();
        let rpc = parts.uri.path().to_owned();
        let message = match self.read_unary(&call, &parts.headers, body).await {
            Ok(message) => message,
            Err(error) => {
                return unary_error(&refused(&rpc, error), &self.methods, HeaderMap::new());
            }
        };
        let grpc = match grpc_request(parts, Body::new(Full::new(envelope::encode(0, &message)))) {
            Ok(grpc) => grpc,
            Err(error) => {
                return unary_error(&refused(&rpc, error), &self.methods, HeaderMap::new());
            }
        };
        let (parts, body) = match self.inner.oneshot(grpc).await {
            Ok(response) => response.into_parts(),
            Err(error) => {
                return unary_error(&unavailable(&error), &self.methods, HeaderMap::new());
            }
        };
        let mut headers = metadata(&parts.headers);
        // A trailers-only answer: the status is in the headers.
        if let Some(status) = tonic::Status::from_header_map(&parts.headers) {
            return unary_error(&ConnectError::from_status(&status), &self.methods, headers);
        }
        let collected = match body.collect().await {
            Ok(collected) => collected,
            Err(error) => return unary_error(&unavailable(&error.into()), &self.methods, headers),
        };
        let trailers = collected.trailers().cloned().unwrap_or_default();
        for (name, value) in metadata(&trailers).iter() {
            if let Ok(name) = HeaderName::try_from(format!("trailer-{name}")) {
                headers.append(name, value.clone());
            }
        }
        let status = tonic::Status::from_header_map(&trailers)
            .unwrap_or_else(|| tonic::Status::internal("the response ended without a gRPC status"));
        if status.code() != Code::Ok {
            return unary_error(&ConnectError::from_status(&status), &self.methods, headers);
        }
        let mut deframer = Deframer::new(usize::MAX);
        deframer.push(&collected.to_bytes());
        let message = match deframer.next() {
            Ok(Some((0, message))) if !deframer.has_partial() => message,
            _ => {
                let error = ConnectError::new(Code::Internal, "the response is not one message");
                return unary_error(&error, &self.methods, headers);
            }
        };
        match call.codec.from_proto(&call.method.output, message) {
            Ok(body) => {
                let mut response = Response::new(Body::new(Full::new(body)));
                *response.headers_mut() = headers;
                response.headers_mut().insert(
                    header::CONTENT_TYPE,
                    HeaderValue::from_static(match call.codec {
                        Codec::Json => "application/json",
                        Codec::Proto => "application/proto",
                    }),
                );
                response
            }
            Err(error) => unary_error(&error, &self.methods, headers),
        }
    }

    /// A unary request's message, as protobuf.
    async fn read_unary(
        &self,
        call: &Call,
        headers: &HeaderMap,
        body: Body,
    ) -> Result<Bytes, ConnectError> {
        let encoding = check_protocol(headers, header::CONTENT_ENCODING.as_str())?;
        let body = self.read_body(body).await?;
        let body = encoding.decode(body, self.limits.max_request_bytes)?;
        call.codec.to_proto(&call.method.input, body)
    }

    /// A whole request body, at most the request limit (plus a prefix).
    async fn read_body(&self, body: Body) -> Result<Bytes, ConnectError> {
        let limit = self.limits.max_request_bytes.saturating_add(5);
        match Limited::new(body, limit).collect().await {
            Ok(collected) => Ok(collected.to_bytes()),
            Err(error) if error.is::<http_body_util::LengthLimitError>() => {
                Err(ConnectError::too_large(None, self.limits.max_request_bytes))
            }
            Err(_) => Err(ConnectError::new(
                Code::Cancelled,
                "the request body was not received whole",
            )),
        }
    }

    /// A streaming call: enveloped messages each way, the status in the
    /// end-of-stream message (the HTTP status is 200 once the call is
    /// under way).
    async fn stream(self, call: Call, request: Request<Body>) -> Response<Body> {
        let content_type = match call.codec {
            Codec::Json => "application/connect+json",
            Codec::Proto => "application/connect+proto",
        };
        let (parts, body) = request.into_parts();
        let rpc = parts.uri.path().to_owned();
        // A mid-stream failure to translate the client's messages is told
        // in the end message instead of what the server made of the broken
        // stream.
        let request_failed: Arc<Mutex<Option<ConnectError>>> = Arc::default();
        let body = match self
            .stream_request(&call, &parts.headers, body, &request_failed, &rpc)
            .await
        {
            Ok(body) => body,
            Err(error) => return end_only(content_type, &refused(&rpc, error), &self.methods),
        };
        let grpc = match grpc_request(parts, body) {
            Ok(grpc) => grpc,
            Err(error) => return end_only(content_type, &refused(&rpc, error), &self.methods),
        };
        let (parts, body) = match self.inner.oneshot(grpc).await {
            Ok(response) => response.into_parts(),
            Err(error) => return end_only(content_type, &unavailable(&error), &self.methods),
        };
        let headers = metadata(&parts.headers);
        if let Some(status) = tonic::Status::from_header_map(&parts.headers) {
            let mut response = end_only(
                content_type,
                &ConnectError::from_status(&status),
                &self.methods,
            );
            response.headers_mut().extend(headers);
            return response;
        }
        let responses = ResponseStream {
            body,
            deframer: Deframer::new(usize::MAX),
            codec: call.codec,
            output: call.method.output,
            methods: self.methods.clone(),
            request_failed,
            done: false,
        };
        let mut response = Response::new(Body::new(StreamBody::new(responses.into_stream())));
        *response.headers_mut() = headers;
        response
            .headers_mut()
            .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
        response
    }

    /// The gRPC request body of a streaming call: its one message read
    /// whole, or (client streams) each message translated as it arrives.
    async fn stream_request(
        &self,
        call: &Call,
        headers: &HeaderMap,
        body: Body,
        failed: &Arc<Mutex<Option<ConnectError>>>,
        rpc: &str,
    ) -> Result<Body, ConnectError> {
        let encoding = check_protocol(headers, "connect-content-encoding")?;
        let max = self.limits.max_request_bytes;
        if !call.method.client_streaming {
            let bytes = self.read_body(body).await?;
            let mut deframer = Deframer::new(max);
            deframer.push(&bytes);
            let message = match deframer.next() {
                Ok(Some((flags, message))) if !deframer.has_partial() => {
                    open(flags, message, encoding, max)?
                }
                Ok(_) => {
                    return Err(ConnectError::malformed(
                        "the request of a server-streaming RPC is one enveloped message",
                    ));
                }
                Err(too_long) => return Err(too_large(too_long.announced, max)),
            };
            let message = call.codec.to_proto(&call.method.input, message)?;
            return Ok(Body::new(Full::new(envelope::encode(0, &message))));
        }
        let requests = RequestStream {
            body,
            deframer: Deframer::new(max),
            codec: call.codec,
            input: call.method.input.clone(),
            encoding,
            max,
            failed: failed.clone(),
            rpc: rpc.to_owned(),
        };
        Ok(Body::new(StreamBody::new(requests.into_stream())))
    }
}

/// A client stream's Connect envelopes, as gRPC frames.
struct RequestStream {
    body: Body,
    deframer: Deframer,
    codec: Codec,
    input: prost_reflect::MessageDescriptor,
    encoding: Encoding,
    max: usize,
    failed: Arc<Mutex<Option<ConnectError>>>,
    /// The RPC's path, for the audit line of a refused message.
    rpc: String,
}

impl RequestStream {
    fn into_stream(self) -> impl futures::Stream<Item = Result<Frame<Bytes>, BoxError>> + Send {
        futures::stream::unfold(Some(self), |state| async move {
            let mut state = state?;
            match state.next_frame().await {
                Ok(Some(frame)) => Some((Ok(frame), Some(state))),
                Ok(None) => None,
                Err(error) => {
                    let error = refused(&state.rpc, error);
                    let told = BoxError::from(error.message.clone());
                    if let Ok(mut failed) = state.failed.lock() {
                        *failed = Some(error);
                    }
                    Some((Err(told), None))
                }
            }
        })
    }

    /// The translated messages that have arrived, as one frame.
    async fn next_frame(&mut self) -> Result<Option<Frame<Bytes>>, ConnectError> {
        loop {
            let mut out = bytes::BytesMut::new();
            loop {
                match self.deframer.next() {
                    Ok(Some((flags, message))) => {
                        let message = open(flags, message, self.encoding, self.max)?;
                        let message = self.codec.to_proto(&self.input, message)?;
                        out.extend_from_slice(&envelope::encode(0, &message));
                    }
                    Ok(None) => break,
                    Err(too_long) => return Err(too_large(too_long.announced, self.max)),
                }
            }
            if !out.is_empty() {
                return Ok(Some(Frame::data(out.freeze())));
            }
            match self.body.frame().await {
                None if self.deframer.has_partial() => {
                    return Err(ConnectError::malformed(
                        "the request stream ended inside a message",
                    ));
                }
                None => return Ok(None),
                Some(Err(_)) => {
                    return Err(ConnectError::new(
                        Code::Cancelled,
                        "the request stream broke off",
                    ));
                }
                Some(Ok(frame)) => {
                    if let Some(data) = frame.data_ref() {
                        self.deframer.push(data);
                    }
                }
            }
        }
    }
}

/// A server stream's gRPC frames and trailers, as Connect envelopes and
/// the end-of-stream message.
struct ResponseStream {
    body: Body,
    deframer: Deframer,
    codec: Codec,
    output: prost_reflect::MessageDescriptor,
    methods: Arc<Methods>,
    request_failed: Arc<Mutex<Option<ConnectError>>>,
    done: bool,
}

impl ResponseStream {
    fn into_stream(self) -> impl futures::Stream<Item = Result<Frame<Bytes>, BoxError>> + Send {
        futures::stream::unfold(self, |mut state| async move {
            if state.done {
                return None;
            }
            let frame = state.next_frame().await;
            Some((Ok(frame), state))
        })
    }

    /// The next piece of the Connect stream; the end message last.
    async fn next_frame(&mut self) -> Frame<Bytes> {
        loop {
            let mut out = bytes::BytesMut::new();
            loop {
                match self.deframer.next() {
                    Ok(Some((0, message))) => match self.codec.from_proto(&self.output, message) {
                        Ok(message) => out.extend_from_slice(&envelope::encode(0, &message)),
                        Err(error) => return self.end(Err(error), &HeaderMap::new()),
                    },
                    Ok(Some(_)) => {
                        let error =
                            ConnectError::new(Code::Internal, "a compressed response message");
                        return self.end(Err(error), &HeaderMap::new());
                    }
                    Ok(None) | Err(_) => break,
                }
            }
            if !out.is_empty() {
                return Frame::data(out.freeze());
            }
            match self.body.frame().await {
                None => {
                    let error = ConnectError::new(
                        Code::Internal,
                        "the response ended without a gRPC status",
                    );
                    return self.end(Err(error), &HeaderMap::new());
                }
                Some(Err(error)) => {
                    return self.end(Err(unavailable(&error.into())), &HeaderMap::new());
                }
                Some(Ok(frame)) => match frame.into_data() {
                    Ok(data) => self.deframer.push(&data),
                    Err(frame) => {
                        let trailers = frame.into_trailers().unwrap_or_default();
                        let outcome = match tonic::Status::from_header_map(&trailers) {
                            Some(status) if status.code() == Code::Ok => Ok(()),
                            Some(status) => Err(ConnectError::from_status(&status)),
                            None => Err(ConnectError::new(
                                Code::Internal,
                                "the response ended without a gRPC status",
                            )),
                        };
                        return self.end(outcome, &trailers);
                    }
                },
            }
        }
    }

    /// The end-of-stream message, after which the stream is over.
    fn end(&mut self, outcome: Result<(), ConnectError>, trailers: &HeaderMap) -> Frame<Bytes> {
        self.done = true;
        let request_failed = self
            .request_failed
            .lock()
            .ok()
            .and_then(|mut failed| failed.take());
        let outcome = match request_failed {
            Some(error) => Err(error),
            None => outcome,
        };
        Frame::data(end_message(outcome.err().as_ref(), trailers, &self.methods))
    }
}

/// Connect's end-of-stream message: the error if any, and the trailers.
fn end_message(error: Option<&ConnectError>, trailers: &HeaderMap, methods: &Methods) -> Bytes {
    let mut end = Map::new();
    if let Some(error) = error {
        end.insert("error".into(), error.to_json(methods.pool()));
    }
    let mut trailer_values = Map::new();
    for (name, value) in metadata(trailers).iter() {
        if let Ok(value) = value.to_str() {
            let values = trailer_values
                .entry(name.as_str().to_owned())
                .or_insert_with(|| Value::Array(Vec::new()));
            if let Value::Array(values) = values {
                values.push(Value::from(value));
            }
        }
    }
    if !trailer_values.is_empty() {
        end.insert("metadata".into(), Value::Object(trailer_values));
    }
    envelope::encode(END_STREAM, Value::Object(end).to_string().as_bytes())
}

/// A streaming response that is only its end message.
fn end_only(content_type: &'static str, error: &ConnectError, methods: &Methods) -> Response<Body> {
    let mut response = Response::new(Body::new(Full::new(end_message(
        Some(error),
        &HeaderMap::new(),
        methods,
    ))));
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    response
}

/// A unary call's error response.
fn unary_error(error: &ConnectError, methods: &Methods, headers: HeaderMap) -> Response<Body> {
    let body = json!(error.to_json(methods.pool())).to_string();
    let mut response = Response::new(Body::new(Full::new(Bytes::from(body))));
    *response.status_mut() = error.http_status();
    *response.headers_mut() = headers;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

/// The gRPC request for a translated call: the caller's headers as
/// metadata (its extensions, such as the peer's address and certificate,
/// kept), `connect-timeout-ms` as `grpc-timeout`.
fn grpc_request(
    mut parts: http::request::Parts,
    body: Body,
) -> Result<Request<Body>, ConnectError> {
    let timeout = match parts.headers.get("connect-timeout-ms") {
        None => None,
        Some(value) => Some(grpc_timeout(value)?),
    };
    let mut headers = metadata(&parts.headers);
    headers.remove("grpc-timeout");
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/grpc"),
    );
    headers.insert(header::TE, HeaderValue::from_static("trailers"));
    if let Some(timeout) = timeout {
        headers.insert("grpc-timeout", timeout);
    }
    parts.headers = headers;
    parts.version = http::Version::HTTP_2;
    Ok(Request::from_parts(parts, body))
}

/// `connect-timeout-ms` (at most 10 digits) as a `grpc-timeout` value (at
/// most 8 digits and a unit).
fn grpc_timeout(value: &HeaderValue) -> Result<HeaderValue, ConnectError> {
    let millis = value
        .to_str()
        .ok()
        .filter(|digits| {
            (1..=10).contains(&digits.len()) && digits.bytes().all(|b| b.is_ascii_digit())
        })
        .and_then(|digits| digits.parse::<u64>().ok())
        .ok_or_else(|| {
            ConnectError::malformed(
                "connect-timeout-ms is a positive number of milliseconds, at most 10 digits",
            )
        })?;
    let timeout = if millis <= 99_999_999 {
        format!("{millis}m")
    } else {
        format!("{}S", (millis / 1000).min(99_999_999))
    };
    HeaderValue::from_str(&timeout).map_err(|_| ConnectError::malformed("connect-timeout-ms"))
}

/// How request messages are compressed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Encoding {
    /// Not at all.
    Identity,
    /// gzip (what Connect clients send by default).
    Gzip,
}

impl Encoding {
    /// `message` uncompressed, at most `max` bytes of it (so a small
    /// compressed message cannot unfold into a large one here).
    fn decode(self, message: Bytes, max: usize) -> Result<Bytes, ConnectError> {
        match self {
            Encoding::Identity => Ok(message),
            Encoding::Gzip => {
                use std::io::Read as _;
                let mut out = Vec::with_capacity(message.len().saturating_mul(4).min(max));
                let limit = u64::try_from(max).unwrap_or(u64::MAX).saturating_add(1);
                flate2::read::GzDecoder::new(&message[..])
                    .take(limit)
                    .read_to_end(&mut out)
                    .map_err(|_| ConnectError::malformed("a request message is not valid gzip"))?;
                if out.len() > max {
                    return Err(ConnectError::too_large(None, max));
                }
                Ok(out.into())
            }
        }
    }
}

/// The version header, if sent, is 1; the message encoding, if named, is
/// one this side reads (`identity` or `gzip`).
fn check_protocol(headers: &HeaderMap, encoding_header: &str) -> Result<Encoding, ConnectError> {
    if let Some(version) = headers.get("connect-protocol-version")
        && version != "1"
    {
        return Err(ConnectError::malformed(
            "connect-protocol-version must be 1",
        ));
    }
    match headers.get(encoding_header).map(HeaderValue::as_bytes) {
        None | Some(b"identity") => Ok(Encoding::Identity),
        Some(b"gzip") => Ok(Encoding::Gzip),
        Some(_) => Err(ConnectError::unsupported_encoding(encoding_header)),
    }
}

/// A request envelope's message, uncompressed: flag 0 or (with a
/// compressed stream) 0x01; never the end flag.
fn open(flags: u8, message: Bytes, encoding: Encoding, max: usize) -> Result<Bytes, ConnectError> {
    match flags {
        0 => Ok(message),
        COMPRESSED if encoding == Encoding::Gzip => encoding.decode(message, max),
        COMPRESSED => Err(ConnectError::malformed(
            "a compressed message in a stream that named no compression",
        )),
        _ => Err(ConnectError::malformed(format!(
            "a request envelope has unknown flags {flags:#04x}"
        ))),
    }
}

/// A message over the limit.
fn too_large(announced: usize, max: usize) -> ConnectError {
    ConnectError::too_large(Some(announced), max)
}

/// `error`, refused here before the service saw the call, after its audit
/// line (the one every refused gRPC call leaves, `parley::audit`).
fn refused(rpc: &str, error: ConnectError) -> ConnectError {
    let code = code_name(error.code);
    let reason = error.reason.as_deref();
    tracing::info!(
        target: parley_grpc::edge::AUDIT_TARGET,
        rpc,
        code,
        reason,
        protocol = "connect",
        "call rejected"
    );
    error
}

/// A failure to reach the service or read its answer (its cause logged,
/// not sent).
fn unavailable(error: &BoxError) -> ConnectError {
    tracing::warn!(%error, "a Connect call's gRPC side failed");
    ConnectError::new(Code::Unavailable, "the service did not answer")
}

/// The headers of `map` that are metadata, not framing or status.
fn metadata(map: &HeaderMap) -> HeaderMap {
    let mut kept = HeaderMap::with_capacity(map.len());
    for (name, value) in map {
        let name_str = name.as_str();
        if FRAMING_HEADERS.contains(&name_str)
            || matches!(
                name_str,
                "grpc-status"
                    | "grpc-message"
                    | "grpc-status-details-bin"
                    | "grpc-encoding"
                    | "grpc-accept-encoding"
            )
        {
            continue;
        }
        kept.append(name.clone(), value.clone());
    }
    kept
}
