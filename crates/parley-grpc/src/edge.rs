//! The service edge of every Parley server: how a call's final status
//! leaves the process, done once here for the three binaries. The server
//! layer of every call ([`crate::telemetry::rpc::server::RpcServerLayer`],
//! which [`crate::serve`] puts in front of every service) [`settle`]s each
//! call's status, in the headers of a trailers-only response or in the
//! trailers, before it records it.
//!
//! **Decode failures are the client's.** tonic answers a request message it
//! cannot decode with `INTERNAL` and prost's message (for page state nested
//! 10 000 deep: a hundred `Value.kind: Struct.fields: ` segments), and one
//! over the service's `max_decoding_message_size` with `OUT_OF_RANGE`.
//! `INTERNAL` says the server is broken and pages whoever is on call; the
//! gRPC status-code guide wants `RESOURCE_EXHAUSTED` for a message over
//! the limit. This layer answers them, whatever the RPC (unary, server- or
//! client-streaming), with [`status::malformed_message`]
//! (`INVALID_ARGUMENT`, `MALFORMED_MESSAGE`, a short message naming the
//! top-level field) and [`status::request_too_large`] (`RESOURCE_EXHAUSTED`,
//! `REQUEST_TOO_LARGE`). Only statuses without an `ErrorInfo` are looked
//! at: every status Parley's own code builds has one (see
//! [`crate::status`]), so what is left with tonic's exact messages is
//! tonic's request decoder. (No Parley handler returns a peer's status as
//! its own; if one did, a peer's malformed response would read as this
//! caller's mistake.) The frame-level protocol errors tonic reports (a bad
//! compression flag) stay `INTERNAL`, as the gRPC compression spec says.
//!
//! **Audit.** Every call that ends with a status other than `OK` leaves
//! exactly one log line, target [`AUDIT_TARGET`], message `call rejected`,
//! with the fields `rpc` (the method, `_OTHER` for unknown paths), `code`
//! (its name), `reason` (the `ErrorInfo.reason`, when there is one) and
//! `tenant` (when the call's [`AuditTenant`] was set): at `info` for the
//! caller's mistakes, at `warn` for the codes that mean the server failed.
//! Never the token, the metadata, the request, nor the status message
//! (messages may quote the request). A call the client abandons sends no
//! status and leaves no line.

use std::sync::{Arc, OnceLock};

use http::HeaderMap;
use tonic::{Code, Status};

use crate::{
    codes::{code_name, is_server_error},
    status,
};

/// The `tracing` target of the audit lines.
pub const AUDIT_TARGET: &str = "parley::audit";

/// What prost's decode errors start with (`prost::DecodeError`'s `Display`).
const PROST_DECODE_PREFIX: &str = "failed to decode Protobuf message: ";
/// What tonic says of a message over `max_decoding_message_size`.
const TONIC_TOO_LARGE_PREFIX: &str = "Error, decoded message length too large: found ";
/// What tonic says of a compressed message that inflates past the limit.
const TONIC_INFLATED_PREFIX: &str = "Error decompressing: size limit, of ";
/// The longest decode problem quoted back to the client.
const MAX_PROBLEM_CHARS: usize = 120;

/// The tenant of one call, for its audit line. The server layer puts an
/// empty one in every call's request extensions; whoever authenticates the
/// caller fills it in with [`record_tenant`] (the hook for the gateway's
/// principal and its tenant claim). Unset, the line has no `tenant`.
#[derive(Debug, Clone, Default)]
pub struct AuditTenant(Arc<OnceLock<String>>);

impl AuditTenant {
    /// Sets the tenant; the first value set stays.
    pub fn set(&self, tenant: &str) {
        let _ = self.0.set(tenant.to_owned());
    }

    /// The tenant, when one was set.
    pub fn get(&self) -> Option<&str> {
        self.0.get().map(String::as_str)
    }
}

/// Records `tenant` as the tenant of the call `request` belongs to (a
/// no-op outside a server's layers, for example in unit tests).
pub fn record_tenant<T>(request: &tonic::Request<T>, tenant: &str) {
    if let Some(slot) = request.extensions().get::<AuditTenant>() {
        slot.set(tenant);
    }
}

/// What the audit line of a call needs.
#[derive(Debug)]
pub(crate) struct CallAudit {
    /// The method, `_OTHER` for unknown paths.
    pub(crate) rpc: String,
    /// The call's tenant, once its caller is known.
    pub(crate) tenant: AuditTenant,
}

/// When `headers` carry the call's status: rewrites a decode failure to
/// the client's code and writes the audit line of a non-`OK` status.
/// `false` when they carry no status.
pub(crate) fn settle(headers: &mut HeaderMap, call: &CallAudit) -> bool {
    match headers.get(Status::GRPC_STATUS) {
        None => return false,
        Some(code) if code.as_bytes() == b"0" => return true,
        Some(_) => {}
    }
    let Some(mut status) = Status::from_header_map(headers) else {
        return true;
    };
    if let Some(replacement) = client_error(&status) {
        let mut fresh = HeaderMap::new();
        match replacement.add_header(&mut fresh) {
            Ok(()) => {
                headers.remove(Status::GRPC_MESSAGE);
                headers.remove(Status::GRPC_STATUS_DETAILS);
                headers.extend(fresh);
                status = replacement;
            }
            Err(_) => tracing::warn!("cannot write the status of a request that failed to decode"),
        }
    }
    audit(call, &status);
    true
}

/// The audit line of a call that ended with `status` (not `OK`).
fn audit(call: &CallAudit, status: &Status) {
    let code = code_name(status.code() as i32);
    let reason = status::reason(status);
    let reason = reason.as_deref();
    let tenant = call.tenant.get();
    let rpc = call.rpc.as_str();
    if is_server_error(status.code() as i32) {
        tracing::warn!(target: AUDIT_TARGET, rpc, code, reason, tenant, "call rejected");
    } else {
        tracing::info!(target: AUDIT_TARGET, rpc, code, reason, tenant, "call rejected");
    }
}

/// The status a decode failure of the request should have been, when
/// `status` is one (tonic's, so without an `ErrorInfo`).
fn client_error(status: &Status) -> Option<Status> {
    if status::reason(status).is_some() {
        return None;
    }
    let message = status.message();
    match status.code() {
        Code::Internal => message.strip_prefix(PROST_DECODE_PREFIX).map(malformed),
        // "{size} bytes, the limit is: {limit} bytes"
        Code::OutOfRange => {
            let rest = message.strip_prefix(TONIC_TOO_LARGE_PREFIX)?;
            let (size, rest) = rest.split_once(" bytes, the limit is: ")?;
            let limit = rest.strip_suffix(" bytes")?;
            Some(status::request_too_large(
                Some(size.parse().ok()?),
                limit.parse().ok()?,
            ))
        }
        // "{limit} bytes, exceeded while decompressing message"
        Code::ResourceExhausted => {
            let rest = message.strip_prefix(TONIC_INFLATED_PREFIX)?;
            let (limit, _) = rest.split_once(" bytes")?;
            Some(status::request_too_large(None, limit.parse().ok()?))
        }
        _ => None,
    }
}

/// A decode error's text after the prefix: `Message.field: ` segments,
/// innermost first, then the problem. The last segment's field is the
/// request's own field the problem is in.
fn malformed(detail: &str) -> Status {
    let mut field = None;
    let mut rest = detail;
    while let Some((segment, after)) = rest.split_once(": ") {
        match segment.split_once('.') {
            Some((message, name)) if is_ident(message) && is_ident(name) => {
                field = Some(name);
                rest = after;
            }
            _ => break,
        }
    }
    let problem = match rest {
        "recursion limit reached" => "is nested too deeply".to_owned(),
        other => {
            let short: String = other.chars().take(MAX_PROBLEM_CHARS).collect();
            if short.len() < other.len() {
                format!("{short}…")
            } else {
                short
            }
        }
    };
    status::malformed_message(field, &problem)
}

fn is_ident(text: &str) -> bool {
    !text.is_empty() && text.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

#[cfg(test)]
mod tests {
    use tonic_types::StatusExt;

    use super::*;

    #[test]
    fn a_deep_decode_error_becomes_a_short_invalid_argument_on_its_field() {
        let deep = format!(
            "{PROST_DECODE_PREFIX}{}ChatRequest.page: recursion limit reached",
            "Value.kind: Struct.fields: ".repeat(50)
        );
        let status = client_error(&Status::internal(deep)).expect("rewritten");
        assert_eq!(status.code(), Code::InvalidArgument);
        assert_eq!(
            status::reason(&status).as_deref(),
            Some(status::MALFORMED_MESSAGE)
        );
        assert_eq!(status.message(), "page: is nested too deeply");
        let bad = status.get_details_bad_request().expect("bad request");
        assert_eq!(bad.field_violations[0].field, "page");
    }

    #[test]
    fn a_top_level_decode_error_has_no_field() {
        let status = client_error(&Status::internal(format!(
            "{PROST_DECODE_PREFIX}invalid string value: data is not UTF-8 encoded"
        )))
        .expect("rewritten");
        assert_eq!(status.code(), Code::InvalidArgument);
        assert_eq!(
            status.message(),
            "the request is not a valid message: invalid string value: data is not UTF-8 encoded"
        );
        assert!(status.get_details_bad_request().is_none());
    }

    #[test]
    fn tonics_size_errors_become_resource_exhausted_with_the_limit() {
        let status = client_error(&Status::out_of_range(
            "Error, decoded message length too large: found 5000000 bytes, the limit is: 4194304 bytes",
        ))
        .expect("rewritten");
        assert_eq!(status.code(), Code::ResourceExhausted);
        assert_eq!(
            status::reason(&status).as_deref(),
            Some(status::REQUEST_TOO_LARGE)
        );
        assert_eq!(
            status.message(),
            "the request message is 5000000 bytes, the limit is 4194304 bytes"
        );
        let info = status.get_details_error_info().expect("error info");
        assert_eq!(
            info.metadata.get("limit_bytes").map(String::as_str),
            Some("4194304")
        );

        let inflated = client_error(&Status::resource_exhausted(
            "Error decompressing: size limit, of 1024 bytes, exceeded while decompressing message",
        ))
        .expect("rewritten");
        assert_eq!(inflated.code(), Code::ResourceExhausted);
        assert_eq!(
            status::reason(&inflated).as_deref(),
            Some(status::REQUEST_TOO_LARGE)
        );
    }

    #[test]
    fn parleys_own_statuses_and_other_errors_are_left_alone() {
        // Has an ErrorInfo: Parley's, whatever its message says.
        let own = status::error(
            Code::Internal,
            "SOMETHING",
            format!("{PROST_DECODE_PREFIX}buffer underflow"),
        );
        assert!(client_error(&own).is_none());
        assert!(client_error(&Status::internal("boom")).is_none());
        assert!(client_error(&Status::out_of_range("seq out of range")).is_none());
        assert!(client_error(&Status::unavailable("down")).is_none());
    }

    #[test]
    fn trailers_are_rewritten_in_place_and_ok_is_untouched() {
        let call = CallAudit {
            rpc: "parley.parser.v1.PayloadParser/ParseStream".into(),
            tenant: AuditTenant::default(),
        };
        let mut headers = HeaderMap::new();
        assert!(!settle(&mut headers, &call), "no status yet");
        Status::internal(format!(
            "{PROST_DECODE_PREFIX}ParseStreamRequest.text: invalid string value: data is not UTF-8 encoded"
        ))
        .add_header(&mut headers)
        .expect("headers");
        assert!(settle(&mut headers, &call));
        let status = Status::from_header_map(&headers).expect("status");
        assert_eq!(status.code(), Code::InvalidArgument);
        assert_eq!(
            status.message(),
            "text: invalid string value: data is not UTF-8 encoded"
        );
        let mut ok = HeaderMap::new();
        ok.insert(Status::GRPC_STATUS, http::HeaderValue::from_static("0"));
        assert!(settle(&mut ok, &call));
        assert_eq!(ok.len(), 1);
    }

    #[test]
    fn the_tenant_is_set_once() {
        let tenant = AuditTenant::default();
        assert_eq!(tenant.get(), None);
        tenant.set("acme");
        tenant.set("other");
        assert_eq!(tenant.get(), Some("acme"));
    }
}
