//! Spans and metrics of every gRPC call, in and out, as tower layers.
//!
//! [`server::RpcServerLayer`] sits in front of every service that
//! `parley_grpc::serve` serves: it continues the caller's trace from the
//! `traceparent` metadata, opens a SERVER span named after the method,
//! times the call, and settles its final status at the edge (decode
//! failures rewritten as the client's, the audit line; [`crate::edge`]) —
//! one layer and one body wrapper per call. [`client::RpcClient`] wraps the channels to the runner,
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
    fn the_status_of_headers_and_of_http_codes() {
        let mut headers = http::HeaderMap::new();
        headers.insert("grpc-status", http::HeaderValue::from_static("5"));
        assert_eq!(grpc_status(&headers), Some(5));
        assert_eq!(code_from_http(http::StatusCode::SERVICE_UNAVAILABLE), 14);
    }
}
