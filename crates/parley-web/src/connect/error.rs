//! Connect's errors: the gRPC status a call ended with (code, message and
//! `google.rpc` details), written the way Connect clients read them — a
//! JSON object as a unary response's body (with the HTTP status of its
//! code), or as the `error` of a stream's end message.

use base64::Engine as _;
use prost::Message as _;
use prost_reflect::{DescriptorPool, DynamicMessage};
use serde_json::{Map, Value, json};
use tonic::Code;

/// A call's failure, as a Connect client sees it.
#[derive(Debug, Clone)]
pub struct ConnectError {
    /// The gRPC code (Connect's codes are gRPC's, named in snake case).
    pub code: Code,
    /// The message for the caller.
    pub message: String,
    /// The `google.rpc` details (`ErrorInfo`, `BadRequest`, ...), as the
    /// status carried them.
    pub details: Vec<prost_types::Any>,
    /// The `ErrorInfo` reason among them, if any (for the audit line).
    pub reason: Option<String>,
}

/// `google.rpc.Status`, the shape of `grpc-status-details-bin`.
#[derive(Clone, PartialEq, prost::Message)]
struct RpcStatus {
    #[prost(int32, tag = "1")]
    code: i32,
    #[prost(string, tag = "2")]
    message: String,
    #[prost(message, repeated, tag = "3")]
    details: Vec<prost_types::Any>,
}

impl ConnectError {
    /// An error made here (no details).
    pub fn new(code: Code, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            details: Vec::new(),
            reason: None,
        }
    }

    /// A request this side cannot read (not the RPC's message, a broken
    /// envelope, a protocol header it does not speak): `INVALID_ARGUMENT`
    /// with reason `MALFORMED_MESSAGE`, as a gRPC request that does not
    /// decode gets.
    pub fn malformed(problem: impl AsRef<str>) -> Self {
        Self::from_status(&parley_grpc::status::malformed_message(
            None,
            problem.as_ref(),
        ))
    }

    /// A request message over `limit` bytes: `RESOURCE_EXHAUSTED` with
    /// reason `REQUEST_TOO_LARGE`.
    pub fn too_large(size: Option<usize>, limit: usize) -> Self {
        Self::from_status(&parley_grpc::status::request_too_large(
            size.map(|size| size as u64),
            limit as u64,
        ))
    }

    /// A compression this side does not read: `UNIMPLEMENTED` with reason
    /// `UNSUPPORTED_ENCODING`.
    pub fn unsupported_encoding(header: &str) -> Self {
        Self::from_status(&parley_grpc::status::unsupported_encoding(header))
    }

    /// The error of a gRPC status, with its details when they decode.
    pub fn from_status(status: &tonic::Status) -> Self {
        let details = if status.details().is_empty() {
            Vec::new()
        } else {
            RpcStatus::decode(status.details())
                .map(|decoded| decoded.details)
                .unwrap_or_default()
        };
        Self {
            code: status.code(),
            message: status.message().to_owned(),
            details,
            reason: parley_grpc::status::reason(status),
        }
    }

    /// The HTTP status of a unary response that fails with this error
    /// (Connect's table).
    pub fn http_status(&self) -> http::StatusCode {
        use http::StatusCode as Http;
        match self.code {
            Code::Cancelled => Http::from_u16(499).unwrap_or(Http::BAD_REQUEST),
            Code::InvalidArgument | Code::FailedPrecondition | Code::OutOfRange => {
                Http::BAD_REQUEST
            }
            Code::DeadlineExceeded => Http::GATEWAY_TIMEOUT,
            Code::NotFound => Http::NOT_FOUND,
            Code::AlreadyExists | Code::Aborted => Http::CONFLICT,
            Code::PermissionDenied => Http::FORBIDDEN,
            Code::ResourceExhausted => Http::TOO_MANY_REQUESTS,
            Code::Unimplemented => Http::NOT_IMPLEMENTED,
            Code::Unavailable => Http::SERVICE_UNAVAILABLE,
            Code::Unauthenticated => Http::UNAUTHORIZED,
            Code::Ok | Code::Unknown | Code::Internal | Code::DataLoss => {
                Http::INTERNAL_SERVER_ERROR
            }
        }
    }

    /// The JSON object Connect clients read: `code`, `message`, and each
    /// detail's `type`, `value` (base64 of its bytes) and `debug` (the
    /// detail as proto3 JSON, when `pool` describes it).
    pub fn to_json(&self, pool: &DescriptorPool) -> Value {
        let mut error = Map::new();
        error.insert("code".into(), Value::from(code_name(self.code)));
        if !self.message.is_empty() {
            error.insert("message".into(), Value::from(self.message.clone()));
        }
        if !self.details.is_empty() {
            let details = self
                .details
                .iter()
                .map(|any| {
                    let type_name = any
                        .type_url
                        .rsplit_once('/')
                        .map_or(any.type_url.as_str(), |(_, name)| name);
                    let mut detail = json!({
                        "type": type_name,
                        "value": base64::engine::general_purpose::STANDARD_NO_PAD.encode(&any.value),
                    });
                    if let Some(debug) = debug_json(pool, type_name, &any.value) {
                        detail["debug"] = debug;
                    }
                    detail
                })
                .collect();
            error.insert("details".into(), Value::Array(details));
        }
        Value::Object(error)
    }
}

/// A detail as proto3 JSON, for people reading the error.
fn debug_json(pool: &DescriptorPool, type_name: &str, bytes: &[u8]) -> Option<Value> {
    let descriptor = pool.get_message_by_name(type_name)?;
    let message = DynamicMessage::decode(descriptor, bytes).ok()?;
    serde_json::to_value(&message).ok()
}

/// Connect's name of a code.
pub fn code_name(code: Code) -> &'static str {
    match code {
        Code::Ok => "ok",
        Code::Cancelled => "canceled",
        Code::Unknown => "unknown",
        Code::InvalidArgument => "invalid_argument",
        Code::DeadlineExceeded => "deadline_exceeded",
        Code::NotFound => "not_found",
        Code::AlreadyExists => "already_exists",
        Code::PermissionDenied => "permission_denied",
        Code::ResourceExhausted => "resource_exhausted",
        Code::FailedPrecondition => "failed_precondition",
        Code::Aborted => "aborted",
        Code::OutOfRange => "out_of_range",
        Code::Unimplemented => "unimplemented",
        Code::Internal => "internal",
        Code::Unavailable => "unavailable",
        Code::DataLoss => "data_loss",
        Code::Unauthenticated => "unauthenticated",
    }
}

#[cfg(test)]
pub(super) mod tests_support {
    use prost::Message as _;

    /// A `google.rpc.Status` as `grpc-status-details-bin` carries it.
    pub fn status_bytes(code: i32, message: &str, details: Vec<prost_types::Any>) -> Vec<u8> {
        super::RpcStatus {
            code,
            message: message.to_owned(),
            details,
        }
        .encode_to_vec()
    }
}
