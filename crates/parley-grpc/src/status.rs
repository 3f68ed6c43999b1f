//! Errors become `tonic::Status` here, and only here.
//!
//! Each service's error type implements [`ServiceError`] (its code, reason,
//! message and details) and becomes a `Status` through [`from_error`]
//! (`?` reaches it by the `From` impls [`status_from!`](crate::status_from)
//! writes); the helpers below build the refusals of the shared layers.
//!
//! Every error a Parley service returns carries a `google.rpc.ErrorInfo` with
//! a stable UPPER_SNAKE `reason` and the domain `parley.dev`, so clients in
//! any language can branch on it without parsing messages. Invalid requests
//! also carry `google.rpc.BadRequest` field violations; retryable failures a
//! `google.rpc.RetryInfo`.

use std::{collections::HashMap, time::Duration};

use tonic::{Code, Status};
use tonic_types::{ErrorDetails, FieldViolation, QuotaViolation, StatusExt};

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

/// What a refusal carries besides its code, reason and message, each as
/// its `google.rpc` detail.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Details {
    /// `ErrorInfo.metadata`.
    pub metadata: HashMap<String, String>,
    /// `BadRequest` field violations, `(field, description)`; when there
    /// are any they are also the message (`field: description; …`).
    pub violations: Vec<(String, String)>,
    /// `RetryInfo`, when the call may be retried: after this long, if said.
    pub retry: Option<Option<Duration>>,
    /// `QuotaFailure` violations, `(subject, description)`.
    pub quota: Vec<(String, String)>,
}

impl Details {
    /// `ErrorInfo.metadata` of these pairs.
    pub fn metadata<const N: usize>(pairs: [(&str, String); N]) -> Self {
        Self {
            metadata: pairs
                .into_iter()
                .map(|(key, value)| (key.to_owned(), value))
                .collect(),
            ..Self::default()
        }
    }

    /// One `BadRequest` field violation.
    pub fn violation(field: impl Into<String>, description: impl Into<String>) -> Self {
        Self::violations(vec![(field.into(), description.into())])
    }

    /// `BadRequest` field violations.
    pub fn violations(violations: Vec<(String, String)>) -> Self {
        Self {
            violations,
            ..Self::default()
        }
    }

    /// A `RetryInfo` saying to retry after `delay`.
    pub fn retry_after(delay: Option<Duration>) -> Self {
        Self {
            retry: Some(delay),
            ..Self::default()
        }
    }
}

/// The error contract of every Parley service: an error type says its gRPC
/// code, its stable reason and its details, and [`from_error`] (through
/// [`status_from!`](crate::status_from)) turns it into a `Status`, the one
/// way a refusal reaches the wire.
pub trait ServiceError: std::fmt::Display {
    /// The gRPC status code.
    fn code(&self) -> Code;

    /// The stable UPPER_SNAKE `ErrorInfo.reason`.
    fn reason(&self) -> &'static str;

    /// What the client reads; the error's `Display` unless the refusal has
    /// field violations (then they are the message).
    fn message(&self) -> String {
        self.to_string()
    }

    /// The details besides `ErrorInfo` (none by default).
    fn details(&self) -> Details {
        Details::default()
    }

    /// Called once as the error becomes a `Status`: logs what the client is
    /// not told (nothing by default).
    fn log(&self) {}
}

/// The `Status` of `error`: its code, its message (or its field
/// violations), an `ErrorInfo` with its reason and metadata in the domain
/// [`DOMAIN`], and its other details.
pub fn from_error<E: ServiceError + ?Sized>(error: &E) -> Status {
    error.log();
    let Details {
        metadata,
        violations,
        retry,
        quota,
    } = error.details();
    let mut details = ErrorDetails::new();
    details.set_error_info(error.reason(), DOMAIN, metadata);
    let message = if violations.is_empty() {
        error.message()
    } else {
        let message = violations
            .iter()
            .map(|(field, description)| format!("{field}: {description}"))
            .collect::<Vec<_>>()
            .join("; ");
        details.set_bad_request(
            violations
                .into_iter()
                .map(|(field, description)| FieldViolation::new(field, description))
                .collect::<Vec<_>>(),
        );
        message
    };
    if let Some(delay) = retry {
        details.set_retry_info(delay);
    }
    if !quota.is_empty() {
        details.set_quota_failure(
            quota
                .into_iter()
                .map(|(subject, description)| QuotaViolation::new(subject, description))
                .collect::<Vec<_>>(),
        );
    }
    Status::with_error_details(error.code(), message, details)
}

/// `impl From<E> for tonic::Status` through [`from_error`], for each
/// [`ServiceError`] type named, so that `?` turns it into a status.
#[macro_export]
macro_rules! status_from {
    ($($error:ty),+ $(,)?) => {
        $(
            impl ::core::convert::From<$error> for ::tonic::Status {
                fn from(error: $error) -> Self {
                    $crate::status::from_error(&error)
                }
            }
        )+
    };
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

/// The reason of [`unsupported_encoding`].
pub const UNSUPPORTED_ENCODING: &str = "UNSUPPORTED_ENCODING";

/// `UNIMPLEMENTED` for a request compressed in a way the server does not
/// read (named by `header`); `identity` and `gzip` are read.
pub fn unsupported_encoding(header: &str) -> Status {
    error(
        Code::Unimplemented,
        UNSUPPORTED_ENCODING,
        format!("{header}: only gzip and identity are supported"),
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

    /// One refusal of each shape the helpers build.
    #[derive(Debug, thiserror::Error)]
    enum Sample {
        #[error("plain")]
        Plain,
        #[error("with metadata")]
        Metadata,
        #[error("invalid")]
        Invalid,
        #[error("busy")]
        Busy,
    }

    impl ServiceError for Sample {
        fn code(&self) -> Code {
            match self {
                Self::Plain => Code::NotFound,
                Self::Metadata => Code::FailedPrecondition,
                Self::Invalid => Code::InvalidArgument,
                Self::Busy => Code::ResourceExhausted,
            }
        }

        fn reason(&self) -> &'static str {
            match self {
                Self::Plain => "PLAIN",
                Self::Metadata => "WITH_METADATA",
                Self::Invalid => "INVALID",
                Self::Busy => "BUSY",
            }
        }

        fn details(&self) -> Details {
            match self {
                Self::Plain => Details::default(),
                Self::Metadata => Details::metadata([("tool", "t".to_owned())]),
                Self::Invalid => Details::violations(vec![
                    ("a".into(), "is bad".into()),
                    ("b".into(), "is worse".into()),
                ]),
                Self::Busy => Details::retry_after(Some(Duration::from_secs(1))),
            }
        }
    }

    #[test]
    fn a_service_error_becomes_the_status_the_helpers_build() {
        let cases = [
            (Sample::Plain, error(Code::NotFound, "PLAIN", "plain")),
            (
                Sample::Metadata,
                error_with_metadata(
                    Code::FailedPrecondition,
                    "WITH_METADATA",
                    "with metadata",
                    [("tool".to_owned(), "t".to_owned())].into_iter().collect(),
                ),
            ),
            (
                Sample::Invalid,
                invalid_argument(
                    "INVALID",
                    vec![
                        ("a".into(), "is bad".into()),
                        ("b".into(), "is worse".into()),
                    ],
                ),
            ),
            (
                Sample::Busy,
                retryable(
                    Code::ResourceExhausted,
                    "BUSY",
                    "busy",
                    Some(Duration::from_secs(1)),
                ),
            ),
        ];
        for (sample, expected) in cases {
            let status = from_error(&sample);
            assert_eq!(status.code(), expected.code(), "{sample}");
            assert_eq!(status.message(), expected.message(), "{sample}");
            assert_eq!(status.details(), expected.details(), "{sample}");
        }
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
