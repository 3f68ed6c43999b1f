//! The one retry policy of the runner, used for every model call.
//!
//! Which failures are worth another attempt, and how long to wait first:
//! 408, 409, 429, 5xx and 529 (Anthropic overloaded), connection errors and
//! stream errors the provider marks retryable are retried; 400, 401, 403,
//! 404, OpenRouter's 402 and OpenAI's `insufficient_quota` never are. The
//! provider's `x-should-retry` overrides the status. The delay is the
//! provider's own `retry-after` when it gave a sane one, else 0.5 s × 2ⁿ
//! capped at 8 s with equal jitter (see [`RetryPolicy::backoff`]). The
//! caller (`model_call`) retries only while nothing of the answer has been
//! emitted.

use std::time::Duration;

use rand::Rng;

use crate::provider::ProviderError;

/// How many attempts, and how long to wait between them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts per model, the first included (1 disables retries).
    pub max_attempts: u32,
    /// The first backoff step.
    pub base_delay: Duration,
    /// The largest backoff step.
    pub max_delay: Duration,
    /// A provider `retry-after` above this is ignored (treated as absent).
    pub max_retry_after: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_attempts: 3,
            base_delay: Duration::from_millis(500),
            max_delay: Duration::from_secs(8),
            max_retry_after: Duration::from_secs(60),
        }
    }
}

impl RetryPolicy {
    /// Whether `error` may succeed on another attempt.
    pub fn is_retryable(&self, error: &ProviderError) -> bool {
        match error {
            ProviderError::Http {
                status,
                body,
                should_retry,
                ..
            } => {
                if let Some(flag) = should_retry {
                    return *flag;
                }
                if body.contains("insufficient_quota") {
                    return false;
                }
                matches!(status, 408 | 409 | 429 | 529) || (500..600).contains(status)
            }
            ProviderError::Connection(_) => true,
            ProviderError::StreamError { retryable, .. } => *retryable,
            ProviderError::Malformed { .. }
            | ProviderError::Truncated
            | ProviderError::Unsupported(_)
            | ProviderError::Config(_)
            | ProviderError::TooLarge { .. } => false,
        }
    }

    /// The delay before attempt `attempt + 1`, where `attempt` (from 1) is
    /// the attempt that just failed, and `retry_after` what the provider asked for.
    pub fn delay(&self, attempt: u32, retry_after: Option<Duration>) -> Duration {
        if let Some(after) = retry_after
            && after <= self.max_retry_after
        {
            return after;
        }
        self.backoff(attempt, &mut rand::rng())
    }

    /// Exponential backoff with equal jitter: uniform in
    /// `[step / 2, step]` where `step = base × 2^(attempt-1)`, capped.
    ///
    /// Equal rather than full jitter (uniform in `[0, step]`): a turn has
    /// only a few attempts, and the usual cause is a provider's rate limit
    /// or overload without a `retry-after`; a retry drawn near zero would
    /// likely spend an attempt on the same refusal. Half the step is the
    /// floor; the other half still spreads the runner's concurrent turns.
    pub fn backoff(&self, attempt: u32, rng: &mut impl Rng) -> Duration {
        let exponent = attempt.saturating_sub(1).min(16);
        let step = self
            .base_delay
            .saturating_mul(1u32 << exponent)
            .min(self.max_delay);
        let half = step / 2;
        let jitter_nanos = rng.random_range(0..=half.as_nanos().min(u64::MAX as u128) as u64);
        half + Duration::from_nanos(jitter_nanos)
    }
}

/// The delay the provider asked for, if any.
pub fn provider_retry_after(error: &ProviderError) -> Option<Duration> {
    match error {
        ProviderError::Http { retry_after, .. } => *retry_after,
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use rand::{SeedableRng, rngs::StdRng};

    use super::*;

    fn http(status: u16) -> ProviderError {
        ProviderError::Http {
            status,
            body: String::new(),
            retry_after: None,
            should_retry: None,
        }
    }

    #[test]
    fn retries_transient_statuses_only() {
        let policy = RetryPolicy::default();
        for status in [408, 409, 429, 500, 502, 503, 504, 529] {
            assert!(policy.is_retryable(&http(status)), "{status}");
        }
        for status in [400, 401, 402, 403, 404, 413, 422] {
            assert!(!policy.is_retryable(&http(status)), "{status}");
        }
    }

    #[test]
    fn should_retry_header_overrides_the_status() {
        let policy = RetryPolicy::default();
        let forced = ProviderError::Http {
            status: 400,
            body: String::new(),
            retry_after: None,
            should_retry: Some(true),
        };
        let refused = ProviderError::Http {
            status: 503,
            body: String::new(),
            retry_after: None,
            should_retry: Some(false),
        };
        assert!(policy.is_retryable(&forced));
        assert!(!policy.is_retryable(&refused));
    }

    #[test]
    fn never_retries_insufficient_quota() {
        let body = r#"{"error":{"type":"insufficient_quota","code":"insufficient_quota"}}"#;
        let error = ProviderError::Http {
            status: 429,
            body: body.into(),
            retry_after: None,
            should_retry: None,
        };
        assert!(!RetryPolicy::default().is_retryable(&error));
    }

    #[test]
    fn connection_and_marked_stream_errors_are_retryable() {
        let policy = RetryPolicy::default();
        assert!(policy.is_retryable(&ProviderError::Connection("reset".into())));
        let overloaded = ProviderError::StreamError {
            kind: "overloaded_error".into(),
            message: "Overloaded".into(),
            retryable: true,
            raw: String::new(),
        };
        assert!(policy.is_retryable(&overloaded));
        assert!(!policy.is_retryable(&ProviderError::Truncated));
        assert!(!policy.is_retryable(&ProviderError::Malformed {
            reason: "x".into(),
            raw: String::new()
        }));
    }

    #[test]
    fn honours_sane_retry_after_and_ignores_absurd_ones() {
        let policy = RetryPolicy::default();
        let sane = ProviderError::Http {
            status: 429,
            body: String::new(),
            retry_after: Some(Duration::from_secs(3)),
            should_retry: None,
        };
        assert_eq!(
            policy.delay(1, provider_retry_after(&sane)),
            Duration::from_secs(3)
        );
        let absurd = ProviderError::Http {
            status: 429,
            body: String::new(),
            retry_after: Some(Duration::from_secs(3600)),
            should_retry: None,
        };
        assert!(policy.delay(1, provider_retry_after(&absurd)) <= policy.max_delay);
    }

    #[test]
    fn backoff_doubles_with_equal_jitter_and_caps() {
        let policy = RetryPolicy::default();
        let mut rng = StdRng::seed_from_u64(7);
        for attempt in 1..=10u32 {
            let step =
                (Duration::from_millis(500) * 2u32.pow(attempt - 1)).min(Duration::from_secs(8));
            let delays: Vec<Duration> = (0..200)
                .map(|_| policy.backoff(attempt, &mut rng))
                .collect();
            // Equal jitter: never below half the step, never above it...
            for delay in &delays {
                assert!(
                    *delay >= step / 2 && *delay <= step,
                    "attempt {attempt}: {delay:?} vs {step:?}"
                );
            }
            // ...and spread over that whole range, not stuck at one end.
            let (low, high) = (step * 5 / 8, step * 7 / 8);
            assert!(
                delays.iter().any(|d| *d < low) && delays.iter().any(|d| *d > high),
                "attempt {attempt}: {delays:?} do not span [{:?}, {step:?}]",
                step / 2
            );
        }
    }
}
