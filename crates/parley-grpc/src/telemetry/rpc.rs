//! Spans and metrics of every gRPC call, in and out, as tower layers.
//!
//! [`server::RpcServerLayer`] sits in front of every service that
//! `parley_grpc::serve` serves: it continues the caller's trace from the
//! `traceparent` metadata, opens a SERVER span named after the method, and
//! times the call. [`client::RpcClient`] wraps the channels to the runner,
//! the parser and tool servers: it opens a CLIENT span and injects its
//! context into the outgoing metadata. Both follow the OpenTelemetry RPC
//! conventions: span name = `rpc.method` = `package.Service/Method`,
//! `rpc.system.name = grpc`, `rpc.response.status_code` = the code's name.
//! A server span is an error only for the codes that mean the server failed
//! (UNKNOWN, DEADLINE_EXCEEDED, UNIMPLEMENTED, INTERNAL, UNAVAILABLE,
//! DATA_LOSS); a client span for any code but OK.
//!
//! A call ends when its response body ends, not when the handler returns:
//! for server streams the status arrives in the trailers. [`body::TracedBody`]
//! watches for them, and a body dropped before its end (the client went
//! away) ends the call as CANCELLED.

pub mod body;
pub mod client;
pub mod server;

use std::{collections::HashSet, sync::Arc};

use prost::Message;

/// The name of a gRPC status code, as `rpc.response.status_code` wants it.
pub fn code_name(code: i32) -> &'static str {
    match code {
        0 => "OK",
        1 => "CANCELLED",
        2 => "UNKNOWN",
        3 => "INVALID_ARGUMENT",
        4 => "DEADLINE_EXCEEDED",
        5 => "NOT_FOUND",
        6 => "ALREADY_EXISTS",
        7 => "PERMISSION_DENIED",
        8 => "RESOURCE_EXHAUSTED",
        9 => "FAILED_PRECONDITION",
        10 => "ABORTED",
        11 => "OUT_OF_RANGE",
        12 => "UNIMPLEMENTED",
        13 => "INTERNAL",
        14 => "UNAVAILABLE",
        15 => "DATA_LOSS",
        16 => "UNAUTHENTICATED",
        _ => "UNKNOWN",
    }
}

/// Whether `code` marks a SERVER span as an error (the server failed).
pub fn is_server_error(code: i32) -> bool {
    matches!(code, 2 | 4 | 12 | 13 | 14 | 15)
}

/// The `grpc-status` in `headers`, when there is one.
pub fn grpc_status(headers: &http::HeaderMap) -> Option<i32> {
    headers
        .get("grpc-status")
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.trim().parse().ok())
}

/// The gRPC code for a response that is not HTTP 200 (the gRPC HTTP/2
/// mapping).
pub fn code_from_http(status: http::StatusCode) -> i32 {
    match status.as_u16() {
        200 => 0,
        400 => 13,
        401 => 16,
        403 => 7,
        404 => 12,
        429 | 502..=504 => 14,
        _ => 2,
    }
}

/// The methods a server knows, so that a client-chosen path cannot make
/// up metric labels: an unknown path is labelled `_OTHER`.
#[derive(Debug, Clone, Default)]
pub struct MethodNames {
    known: Arc<HashSet<String>>,
}

impl MethodNames {
    /// Every method of the services in the encoded `FileDescriptorSet`s,
    /// as `package.Service/Method`.
    pub fn from_descriptor_sets(sets: &[&[u8]]) -> Self {
        let mut known = HashSet::new();
        for bytes in sets {
            let Ok(set) = prost_types::FileDescriptorSet::decode(*bytes) else {
                continue;
            };
            for file in set.file {
                let package = file.package.unwrap_or_default();
                for service in file.service {
                    let service_name = service.name.unwrap_or_default();
                    for method in service.method {
                        let qualified = if package.is_empty() {
                            format!("{service_name}/{}", method.name.unwrap_or_default())
                        } else {
                            format!(
                                "{package}.{service_name}/{}",
                                method.name.unwrap_or_default()
                            )
                        };
                        known.insert(qualified);
                    }
                }
            }
        }
        Self {
            known: Arc::new(known),
        }
    }

    /// Parley's own methods.
    pub fn parley() -> Self {
        Self::from_descriptor_sets(&[parley_proto::FILE_DESCRIPTOR_SET])
    }

    /// The method of a request path (`/pkg.Service/Method`), or `_OTHER`.
    pub fn label<'a>(&self, path: &'a str) -> &'a str {
        let method = path.strip_prefix('/').unwrap_or(path);
        if self.known.contains(method) {
            method
        } else {
            super::semconv::OTHER
        }
    }
}

/// Health checks and reflection: served beside every service, never traced
/// (probes would flood the traces) nor timed.
pub fn is_infrastructure(path: &str) -> bool {
    path.starts_with("/grpc.health.") || path.starts_with("/grpc.reflection.")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_methods_keep_their_name_and_others_are_other() {
        let names = MethodNames::parley();
        assert_eq!(
            names.label("/parley.runner.v1.AgentRunner/Run"),
            "parley.runner.v1.AgentRunner/Run"
        );
        assert_eq!(
            names.label("/parley.gateway.v1.ChatGateway/Chat"),
            "parley.gateway.v1.ChatGateway/Chat"
        );
        assert_eq!(names.label("/parley.runner.v1.AgentRunner/Nope"), "_OTHER");
        assert_eq!(names.label("/x/../../etc"), "_OTHER");
    }

    #[test]
    fn codes_and_error_classes() {
        assert_eq!(code_name(0), "OK");
        assert_eq!(code_name(4), "DEADLINE_EXCEEDED");
        assert_eq!(code_name(99), "UNKNOWN");
        assert!(is_server_error(13) && is_server_error(14));
        assert!(!is_server_error(3) && !is_server_error(5) && !is_server_error(16));
        let mut headers = http::HeaderMap::new();
        headers.insert("grpc-status", http::HeaderValue::from_static("5"));
        assert_eq!(grpc_status(&headers), Some(5));
        assert_eq!(code_from_http(http::StatusCode::SERVICE_UNAVAILABLE), 14);
    }
}
