//! Why one model call failed, and how that failure reads to the client.
//!
//! Every failure of an attempt is an [`AttemptError`]; when the call gives
//! up it becomes a [`TurnError`] with a gRPC code, a stable reason, the
//! retryable flag and the provider's raw text. This mapping is the single
//! place where provider failures get their client-facing names.

use std::time::Duration;

use tonic::Code;

use crate::{events::TurnError, provider::ProviderError, retry::RetryPolicy};

/// Why one attempt of a model call failed.
#[derive(Debug, Clone)]
pub enum AttemptError {
    /// The provider failed.
    Provider(ProviderError),
    /// Nothing arrived within the first-token timeout.
    FirstToken(Duration),
    /// The stream went silent for longer than the idle timeout.
    Idle(Duration),
}

impl AttemptError {
    /// Whether another attempt may succeed.
    pub fn is_retryable(&self, policy: &RetryPolicy) -> bool {
        match self {
            Self::Provider(error) => policy.is_retryable(error),
            Self::FirstToken(_) | Self::Idle(_) => true,
        }
    }

    /// The delay the provider asked for, if any.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            Self::Provider(error) => crate::retry::provider_retry_after(error),
            Self::FirstToken(_) | Self::Idle(_) => None,
        }
    }

    /// Whether the provider could not be reached at all.
    pub fn is_connection(&self) -> bool {
        matches!(self, Self::Provider(ProviderError::Connection(_)))
    }

    /// A low-cardinality class of the failure, for `error.type` and metric
    /// labels (`HTTP_429`, `CONNECTION`, `FIRST_TOKEN_TIMEOUT`, ...).
    pub fn kind(&self) -> String {
        match self {
            Self::Provider(ProviderError::Http { status, .. }) => format!("HTTP_{status}"),
            Self::Provider(ProviderError::Connection(_)) => "CONNECTION".to_owned(),
            Self::Provider(ProviderError::StreamError { .. }) => "STREAM_ERROR".to_owned(),
            Self::Provider(ProviderError::Malformed { .. }) => "MALFORMED".to_owned(),
            Self::Provider(ProviderError::Truncated) => "TRUNCATED".to_owned(),
            Self::Provider(ProviderError::Unsupported(_)) => "UNSUPPORTED".to_owned(),
            Self::Provider(ProviderError::Config(_)) => "CONFIG".to_owned(),
            Self::Provider(ProviderError::TooLarge { .. }) => "TOO_LARGE".to_owned(),
            Self::FirstToken(_) => "FIRST_TOKEN_TIMEOUT".to_owned(),
            Self::Idle(_) => "IDLE_TIMEOUT".to_owned(),
        }
    }

    /// A short description for status messages (`HTTP 429`, `first-token timeout`).
    pub fn short(&self) -> String {
        match self {
            Self::Provider(ProviderError::Http { status, .. }) => format!("HTTP {status}"),
            Self::Provider(ProviderError::Connection(_)) => "a connection error".to_owned(),
            Self::Provider(ProviderError::StreamError { kind, .. }) => {
                format!("a stream error ({kind})")
            }
            Self::Provider(ProviderError::Malformed { .. }) => "malformed provider data".to_owned(),
            Self::Provider(ProviderError::Truncated) => "a truncated stream".to_owned(),
            Self::Provider(ProviderError::Unsupported(_)) => "an unsupported request".to_owned(),
            Self::Provider(ProviderError::Config(_)) => "a configuration error".to_owned(),
            Self::Provider(ProviderError::TooLarge { .. }) => "a response too large".to_owned(),
            Self::FirstToken(_) => "a first-token timeout".to_owned(),
            Self::Idle(_) => "an idle timeout".to_owned(),
        }
    }

    /// The client-facing error. `mid_stream` is true when part of the
    /// answer had already been emitted, which makes transient failures
    /// worth a retry by the client even when the runner could not retry.
    pub fn into_turn_error(
        self,
        policy: &RetryPolicy,
        partial_text: String,
        mid_stream: bool,
    ) -> TurnError {
        let retryable = self.is_retryable(policy);
        let (code, reason, message, detail, retry_after) = match self {
            Self::FirstToken(limit) => (
                Code::DeadlineExceeded,
                "FIRST_TOKEN_TIMEOUT",
                format!("the model sent nothing within {} ms", limit.as_millis()),
                String::new(),
                None,
            ),
            Self::Idle(limit) => (
                Code::DeadlineExceeded,
                "IDLE_TIMEOUT",
                format!(
                    "the model stream was silent for more than {} ms",
                    limit.as_millis()
                ),
                String::new(),
                None,
            ),
            Self::Provider(error) => provider_failure(error),
        };
        TurnError {
            code,
            reason: reason.to_owned(),
            message,
            retryable: retryable || (mid_stream && code == Code::Unavailable),
            partial_text,
            provider_detail: truncate(detail, 8 * 1024),
            retry_after,
        }
    }
}

type Mapped = (Code, &'static str, String, String, Option<Duration>);

fn provider_failure(error: ProviderError) -> Mapped {
    let message = error.to_string();
    match error {
        ProviderError::Http {
            status,
            body,
            retry_after,
            ..
        } => {
            let (code, reason) = match status {
                401 | 403 => (Code::FailedPrecondition, "PROVIDER_AUTH"),
                402 => (Code::ResourceExhausted, "PROVIDER_QUOTA"),
                429 if body.contains("insufficient_quota") => {
                    (Code::ResourceExhausted, "PROVIDER_QUOTA")
                }
                429 => (Code::ResourceExhausted, "RATE_LIMITED"),
                404 => (Code::NotFound, "MODEL_NOT_FOUND"),
                400 | 413 | 422 => (Code::InvalidArgument, "PROVIDER_REJECTED_REQUEST"),
                408 | 409 | 500..=599 => (Code::Unavailable, "PROVIDER_UNAVAILABLE"),
                _ => (Code::FailedPrecondition, "PROVIDER_REJECTED_REQUEST"),
            };
            (
                code,
                reason,
                format!("the provider answered HTTP {status}"),
                body,
                retry_after,
            )
        }
        // The transport's text names the provider's address (and what
        // failed reaching it): internal, so it goes to the log only.
        ProviderError::Connection(detail) => {
            tracing::warn!(%detail, "model provider connection failed");
            (
                Code::Unavailable,
                "PROVIDER_UNAVAILABLE",
                "the model provider could not be reached".to_owned(),
                String::new(),
                None,
            )
        }
        ProviderError::StreamError { retryable, raw, .. } => {
            let code = if retryable {
                Code::Unavailable
            } else {
                Code::Internal
            };
            (code, "PROVIDER_STREAM_ERROR", message, raw, None)
        }
        ProviderError::Malformed { raw, .. } => (
            Code::Internal,
            "MALFORMED_PROVIDER_DATA",
            message,
            raw,
            None,
        ),
        ProviderError::Truncated => (
            Code::Unavailable,
            "PROVIDER_STREAM_TRUNCATED",
            message,
            String::new(),
            None,
        ),
        ProviderError::Unsupported(detail) => (
            Code::FailedPrecondition,
            "UNSUPPORTED_BY_MODEL",
            message,
            detail,
            None,
        ),
        ProviderError::Config(detail) => (
            Code::FailedPrecondition,
            "PROVIDER_CONFIG",
            message,
            detail,
            None,
        ),
        ProviderError::TooLarge { .. } => (
            Code::ResourceExhausted,
            "PROVIDER_RESPONSE_TOO_LARGE",
            message,
            String::new(),
            None,
        ),
    }
}

fn truncate(mut text: String, max: usize) -> String {
    if text.len() > max {
        text.truncate(text.floor_char_boundary(max));
        text.push('…');
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn http(status: u16, body: &str) -> AttemptError {
        AttemptError::Provider(ProviderError::Http {
            status,
            body: body.into(),
            retry_after: Some(Duration::from_secs(2)),
            should_retry: None,
        })
    }

    #[test]
    fn statuses_get_stable_reasons() {
        let policy = RetryPolicy::default();
        let rate = http(429, "slow down").into_turn_error(&policy, String::new(), false);
        assert_eq!(
            (rate.code, rate.reason.as_str(), rate.retryable),
            (Code::ResourceExhausted, "RATE_LIMITED", true)
        );
        assert_eq!(rate.retry_after, Some(Duration::from_secs(2)));
        assert_eq!(rate.provider_detail, "slow down");
        let auth = http(401, "bad key").into_turn_error(&policy, String::new(), false);
        assert_eq!(
            (auth.reason.as_str(), auth.retryable),
            ("PROVIDER_AUTH", false)
        );
        let quota = http(429, "insufficient_quota").into_turn_error(&policy, String::new(), false);
        assert_eq!(
            (quota.reason.as_str(), quota.retryable),
            ("PROVIDER_QUOTA", false)
        );
    }

    #[test]
    fn a_connection_failure_tells_the_client_no_address() {
        let policy = RetryPolicy::default();
        let error = AttemptError::Provider(ProviderError::Connection(
            "error sending request for url (http://10.1.2.3:8443/v1/chat/completions): connection refused".into(),
        ))
        .into_turn_error(&policy, String::new(), false);
        assert_eq!(error.reason, "PROVIDER_UNAVAILABLE");
        for text in [&error.message, &error.provider_detail] {
            assert!(
                !text.contains("10.1.2.3") && !text.contains("http") && !text.contains("8443"),
                "an internal address reached the client: {text}"
            );
        }
    }

    #[test]
    fn mid_stream_failures_keep_partial_text_and_raw_detail() {
        let policy = RetryPolicy::default();
        let error = AttemptError::Provider(ProviderError::StreamError {
            kind: "overloaded_error".into(),
            message: "Overloaded".into(),
            retryable: true,
            raw: r#"{"type":"error"}"#.into(),
        });
        let turn = error.into_turn_error(&policy, "Hello".into(), true);
        assert!(turn.retryable);
        assert_eq!(turn.partial_text, "Hello");
        assert_eq!(turn.provider_detail, r#"{"type":"error"}"#);
        let malformed = AttemptError::Provider(ProviderError::Malformed {
            reason: "bad json".into(),
            raw: "{oops".into(),
        })
        .into_turn_error(&policy, String::new(), true);
        assert_eq!(
            (
                malformed.reason.as_str(),
                malformed.provider_detail.as_str()
            ),
            ("MALFORMED_PROVIDER_DATA", "{oops")
        );
    }
}
