//! Errors become `tonic::Status` here, and only here.
//!
//! Every error a Parley service returns carries a `google.rpc.ErrorInfo` with
//! a stable UPPER_SNAKE `reason` and the domain `parley.dev`, so clients in
//! any language can branch on it without parsing messages. Invalid requests
//! also carry `google.rpc.BadRequest` field violations; retryable failures a
//! `google.rpc.RetryInfo`.

use std::{collections::HashMap, time::Duration};

use tonic::{Code, Status};
use tonic_types::{ErrorDetails, FieldViolation, StatusExt};

/// The `ErrorInfo.domain` of every Parley error.
pub const DOMAIN: &str = "parley.dev";

/// A status with an `ErrorInfo` detail.
pub fn error(code: Code, reason: &str, message: impl Into<String>) -> Status {
    Status::with_error_details(
        code,
        message,
        ErrorDetails::with_error_info(reason, DOMAIN, HashMap::<String, String>::new()),
    )
}

/// A status with an `ErrorInfo` detail carrying metadata.
pub fn error_with_metadata(
    code: Code,
    reason: &str,
    message: impl Into<String>,
    metadata: HashMap<String, String>,
) -> Status {
    Status::with_error_details(
        code,
        message,
        ErrorDetails::with_error_info(reason, DOMAIN, metadata),
    )
}

/// `INVALID_ARGUMENT` with `BadRequest` field violations and an `ErrorInfo`.
pub fn invalid_argument(reason: &str, violations: Vec<(String, String)>) -> Status {
    let message = violations
        .iter()
        .map(|(field, description)| format!("{field}: {description}"))
        .collect::<Vec<_>>()
        .join("; ");
    let mut details = ErrorDetails::with_bad_request(
        violations
            .into_iter()
            .map(|(field, description)| FieldViolation::new(field, description))
            .collect::<Vec<_>>(),
    );
    details.set_error_info(reason, DOMAIN, HashMap::<String, String>::new());
    Status::with_error_details(Code::InvalidArgument, message, details)
}

/// A retryable status (`UNAVAILABLE`, `RESOURCE_EXHAUSTED`...) with `RetryInfo`.
pub fn retryable(
    code: Code,
    reason: &str,
    message: impl Into<String>,
    retry_after: Option<Duration>,
) -> Status {
    let mut details = ErrorDetails::new();
    details.set_error_info(reason, DOMAIN, HashMap::<String, String>::new());
    details.set_retry_info(retry_after);
    Status::with_error_details(code, message, details)
}

/// Reason: the request message is not valid protobuf (malformed bytes,
/// nesting past the decoder's recursion limit). `INVALID_ARGUMENT`.
pub const MALFORMED_MESSAGE: &str = "MALFORMED_MESSAGE";

/// Reason: the request message is larger than the server accepts.
/// `RESOURCE_EXHAUSTED`, with the limit as `ErrorInfo` metadata `limit_bytes`.
pub const REQUEST_TOO_LARGE: &str = "REQUEST_TOO_LARGE";

/// `INVALID_ARGUMENT` for a request message that could not be decoded:
/// `problem` in the top-level `field` when it is known (then also a
/// `BadRequest` violation), in the message as a whole otherwise.
pub fn malformed_message(field: Option<&str>, problem: &str) -> Status {
    match field {
        Some(field) => invalid_argument(
            MALFORMED_MESSAGE,
            vec![(field.to_owned(), problem.to_owned())],
        ),
        None => error(
            Code::InvalidArgument,
            MALFORMED_MESSAGE,
            format!("the request is not a valid message: {problem}"),
        ),
    }
}

/// `RESOURCE_EXHAUSTED` for a request message over the server's limit
/// (`size` when the server read its length).
pub fn request_too_large(size: Option<u64>, limit: u64) -> Status {
    let message = match size {
        Some(size) => format!("the request message is {size} bytes, the limit is {limit} bytes"),
        None => format!("the request message is larger than the limit of {limit} bytes"),
    };
    error_with_metadata(
        Code::ResourceExhausted,
        REQUEST_TOO_LARGE,
        message,
        [("limit_bytes".to_owned(), limit.to_string())]
            .into_iter()
            .collect(),
    )
}

/// The `ErrorInfo.reason` of a status, if it has one.
pub fn reason(status: &Status) -> Option<String> {
    status.get_details_error_info().map(|info| info.reason)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invalid_argument_carries_violations_and_reason() {
        let status = invalid_argument(
            "TEXT_TOO_LARGE",
            vec![(
                "text".into(),
                "is 2000000 bytes, the limit is 1048576".into(),
            )],
        );
        assert_eq!(status.code(), Code::InvalidArgument);
        assert_eq!(reason(&status).as_deref(), Some("TEXT_TOO_LARGE"));
        let bad = status
            .get_details_bad_request()
            .expect("bad request detail");
        assert_eq!(bad.field_violations[0].field, "text");
        assert!(status.message().contains("1048576"));
    }

    #[test]
    fn retryable_carries_retry_info() {
        let status = retryable(
            Code::Unavailable,
            "RUNNER_UNAVAILABLE",
            "down",
            Some(Duration::from_secs(2)),
        );
        let info = status.get_details_retry_info().expect("retry info");
        assert_eq!(info.retry_delay, Some(Duration::from_secs(2)));
    }
}
