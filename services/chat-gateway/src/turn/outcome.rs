//! How a turn ends, as the client sees it: the `complete` envelope
//! (docs/output-format.md#what-the-client-receives) and, for a failure, the
//! `error` event before it.
//!
//! A failure still gives the user something to do: `message` carries the
//! partial answer followed by a plain-language explanation, and a retryable
//! failure suggests "Try again" with the same message.

use std::time::Duration;

use parley_proto::{
    gateway::v1 as gw,
    parser::v1::{ParseResponse, SuggestedValue},
    runner::v1 as runner,
};

use crate::store::TurnState;

/// The reason of a turn whose answer outgrew `turns.max_answer_bytes`.
pub const ANSWER_TOO_LARGE: &str = "ANSWER_TOO_LARGE";

/// A failure that ends a turn.
#[derive(Debug, Clone, PartialEq)]
pub struct Failure {
    /// Stable UPPER_SNAKE reason.
    pub reason: String,
    /// What went wrong, for logs and the `error` event.
    pub message: String,
    /// Whether sending the same message again may succeed.
    pub retryable: bool,
    /// How long to wait first, when known.
    pub retry_after: Option<Duration>,
}

impl Failure {
    /// A failure with no retry delay.
    pub fn new(reason: &str, message: impl Into<String>, retryable: bool) -> Self {
        Self {
            reason: reason.to_owned(),
            message: message.into(),
            retryable,
            retry_after: None,
        }
    }

    /// The runner's own error event.
    pub fn from_runner(error: &runner::Error) -> Self {
        Self {
            reason: if error.reason.is_empty() {
                "RUNNER_ERROR".into()
            } else {
                error.reason.clone()
            },
            message: error.message.clone(),
            retryable: error.retryable,
            retry_after: error
                .retry_after
                .as_ref()
                .map(|d| Duration::from_millis(crate::convert::duration_to_ms(d))),
        }
    }

    /// A runner that could not be called: unreachable is retryable; a
    /// refusal (bad model, bad request) carries the runner's own reason and
    /// message (written for clients). `RESOURCE_EXHAUSTED` is retryable
    /// only with a `RetryInfo` (a busy runner); without one the request
    /// itself was too large, and the same request would fail again.
    pub fn from_runner_status(status: &tonic::Status) -> Self {
        use tonic::Code;
        use tonic_types::StatusExt;
        let reason = parley_grpc::status::reason(status);
        match status.code() {
            Code::ResourceExhausted => match status.get_details_retry_info() {
                Some(info) => Self {
                    reason: reason.unwrap_or_else(|| "RUNNER_BUSY".into()),
                    message: "the agent-runner is busy".into(),
                    retryable: true,
                    retry_after: info.retry_delay,
                },
                None => Self::new(
                    reason.as_deref().unwrap_or("REQUEST_TOO_LARGE"),
                    "the agent-runner refused the turn's request as too large",
                    false,
                ),
            },
            Code::Unavailable | Code::Unknown | Code::Internal | Code::Aborted => Self::new(
                "RUNNER_UNAVAILABLE",
                // The transport's own words (addresses, h2 errors) stay in
                // the gateway's log.
                "the agent-runner could not be reached",
                true,
            ),
            Code::DeadlineExceeded => {
                Self::new("DEADLINE_EXCEEDED", "the turn's deadline passed", true)
            }
            _ => Self::new(
                reason.as_deref().unwrap_or("RUNNER_REJECTED"),
                format!("the agent-runner refused the turn: {}", status.message()),
                false,
            ),
        }
    }

    /// An answer that outgrew its cap of `max` bytes: not retryable (the
    /// same request would write the same answer).
    pub fn answer_too_large(max: usize) -> Self {
        Self::new(
            ANSWER_TOO_LARGE,
            format!("the answer grew past {max} bytes, the most a turn may write"),
            false,
        )
    }

    /// The `error` event.
    pub fn to_event(&self) -> gw::TurnError {
        gw::TurnError {
            reason: self.reason.clone(),
            message: self.message.clone(),
            retryable: self.retryable,
            retry_after: self.retry_after.map(|d| {
                crate::convert::duration_ms(u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
            }),
        }
    }

    /// What the user is told.
    pub fn guidance(&self) -> String {
        match self.reason.as_str() {
            "RUNNER_UNAVAILABLE" | "PROVIDER_UNAVAILABLE" => {
                "The assistant cannot be reached right now. Please try again in a moment.".into()
            }
            "RATE_LIMITED" => match self.retry_after {
                Some(wait) if wait.as_secs() > 0 => format!(
                    "The assistant is receiving too many requests. Please try again in {} seconds.",
                    wait.as_secs()
                ),
                _ => "The assistant is receiving too many requests. Please try again shortly.".into(),
            },
            "DEADLINE_EXCEEDED" | "FIRST_TOKEN_TIMEOUT" | "IDLE_TIMEOUT" => {
                "The answer took too long. Please try again, or ask for something smaller.".into()
            }
            "SHUTDOWN" => "The assistant was restarting while answering. Please send your message again.".into(),
            "STRUCTURED_OUTPUT_UNSUPPORTED" => {
                "The selected model cannot give structured answers. Try another model or ask without a response format."
                    .into()
            }
            ANSWER_TOO_LARGE => {
                "The answer grew too long and was cut off. Ask for a shorter answer, or for the rest in parts."
                    .into()
            }
            "PROVIDER_AUTH" => "The assistant is not configured correctly and cannot answer right now.".into(),
            _ if self.retryable => "Something went wrong while answering. Please try again.".into(),
            _ => "Something went wrong while answering, and sending the same message again will not help. \
                  Try rephrasing your request."
                .into(),
        }
    }
}

/// How a turn ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Ending {
    /// The model finished.
    Completed {
        /// Why it stopped (`end_turn`, `max_tokens`...).
        stop_reason: String,
    },
    /// The user cancelled (or a new message replaced it).
    Cancelled,
    /// It failed.
    Failed(Failure),
}

impl Ending {
    /// The stored state.
    pub fn state(&self) -> TurnState {
        match self {
            Self::Completed { .. } => TurnState::Completed,
            Self::Cancelled => TurnState::Cancelled,
            Self::Failed(_) => TurnState::Failed,
        }
    }

    /// The failure, when it failed.
    pub fn failure(&self) -> Option<&Failure> {
        match self {
            Self::Failed(failure) => Some(failure),
            _ => None,
        }
    }
}

/// The wire name of a runner stop reason.
pub fn stop_reason(finished: &runner::Finished) -> String {
    let name = match runner::StopReason::try_from(finished.stop_reason) {
        Ok(runner::StopReason::EndTurn) => "end_turn",
        Ok(runner::StopReason::MaxTokens) => "max_tokens",
        Ok(runner::StopReason::StopSequence) => "stop_sequence",
        Ok(runner::StopReason::ContentFilter) => "content_filter",
        Ok(runner::StopReason::Refusal) => "refusal",
        Ok(runner::StopReason::MaxIterations) => "max_iterations",
        Ok(runner::StopReason::Cancelled) => "cancelled",
        Ok(runner::StopReason::Unspecified) | Err(_) => "",
    };
    if name.is_empty() {
        finished.raw_stop_reason.clone()
    } else {
        name.to_owned()
    }
}

/// The parts of a `complete` that do not depend on how the turn ended.
#[derive(Debug, Clone)]
pub struct CompleteParts {
    /// The conversation.
    pub conversation_id: String,
    /// The turn.
    pub turn_id: String,
    /// The user's message (for "Try again").
    pub user_message: String,
    /// The parse of the answer (or of the partial answer).
    pub parsed: ParseResponse,
    /// Tools called.
    pub tools: Vec<gw::ToolRecord>,
    /// The structured answer, when any.
    pub structured: Option<parley_proto::parser::v1::StructuredResult>,
    /// Usage.
    pub usage: Option<gw::Usage>,
    /// Parser diagnostics plus the gateway's own.
    pub diagnostics: Vec<parley_proto::parser::v1::Diagnostic>,
}

/// Builds the final `complete`.
pub fn complete(parts: CompleteParts, ending: &Ending) -> gw::TurnComplete {
    let CompleteParts {
        conversation_id,
        turn_id,
        user_message,
        parsed,
        tools,
        structured,
        usage,
        diagnostics,
    } = parts;
    let partial = parsed.message.trim_end().to_owned();
    let mut suggested_values = parsed.suggested_values;
    let (success, message, stop) = match ending {
        Ending::Completed { stop_reason } => (true, parsed.message, stop_reason.clone()),
        Ending::Cancelled => {
            let message = if partial.is_empty() {
                "The answer was cancelled before any text was written.".to_owned()
            } else {
                partial
            };
            (false, message, "cancelled".to_owned())
        }
        Ending::Failed(failure) => {
            let guidance = failure.guidance();
            let message = if partial.is_empty() {
                guidance
            } else {
                format!("{partial}\n\n{guidance}")
            };
            if failure.retryable && !user_message.trim().is_empty() {
                suggested_values.push(SuggestedValue {
                    label: "Try again".into(),
                    value: user_message,
                });
            }
            (false, message, "error".to_owned())
        }
    };
    gw::TurnComplete {
        success,
        message,
        custom_payload: parsed.custom_payload,
        suggested_values,
        suggested_actions: parsed.suggested_actions,
        tool_history: tools,
        structured,
        usage,
        conversation_id,
        turn_id,
        diagnostics,
        state: crate::convert::state_to_wire(ending.state()) as i32,
        stop_reason: stop,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(partial: &str) -> CompleteParts {
        CompleteParts {
            conversation_id: "c".into(),
            turn_id: "t".into(),
            user_message: "add rows".into(),
            parsed: ParseResponse {
                message: partial.into(),
                ..Default::default()
            },
            tools: vec![],
            structured: None,
            usage: None,
            diagnostics: vec![],
        }
    }

    #[test]
    fn a_retryable_failure_explains_and_offers_try_again() {
        let failure = Failure {
            reason: "RATE_LIMITED".into(),
            message: "429".into(),
            retryable: true,
            retry_after: Some(Duration::from_secs(7)),
        };
        let complete = complete(parts("Half an answer"), &Ending::Failed(failure.clone()));
        assert!(!complete.success);
        assert_eq!(complete.state, gw::TurnState::Failed as i32);
        assert!(complete.message.starts_with("Half an answer\n\n"));
        assert!(
            complete.message.contains("try again in 7 seconds"),
            "{}",
            complete.message
        );
        assert_eq!(
            complete.suggested_values,
            vec![SuggestedValue {
                label: "Try again".into(),
                value: "add rows".into()
            }]
        );
        let event = failure.to_event();
        assert_eq!(
            event.retry_after,
            Some(prost_types::Duration {
                seconds: 7,
                nanos: 0
            })
        );
    }

    #[test]
    fn a_permanent_failure_does_not_offer_the_same_message() {
        let failure = Failure::new("STRUCTURED_OUTPUT_UNSUPPORTED", "model x", false);
        let complete = complete(parts(""), &Ending::Failed(failure));
        assert!(complete.suggested_values.is_empty());
        assert!(complete.message.contains("structured answers"));
    }

    #[test]
    fn cancelled_turns_keep_their_partial_text() {
        let complete = complete(parts("So far"), &Ending::Cancelled);
        assert_eq!(
            (complete.success, complete.message.as_str()),
            (false, "So far")
        );
        assert_eq!(complete.state, gw::TurnState::Cancelled as i32);
        assert_eq!(complete.stop_reason, "cancelled");
    }

    #[test]
    fn runner_statuses_map_to_reasons() {
        let down = Failure::from_runner_status(&tonic::Status::unavailable("connection refused"));
        assert_eq!(
            (down.reason.as_str(), down.retryable),
            ("RUNNER_UNAVAILABLE", true)
        );
        let refused = Failure::from_runner_status(&parley_grpc::status::error(
            tonic::Code::InvalidArgument,
            "UNKNOWN_PROVIDER",
            "no provider `x`",
        ));
        assert_eq!(
            (refused.reason.as_str(), refused.retryable),
            ("UNKNOWN_PROVIDER", false)
        );
    }

    #[test]
    fn a_request_the_runner_finds_too_large_is_not_retried_but_a_busy_runner_is() {
        // What the runner's edge answers for a request over its decode limit.
        let too_large = Failure::from_runner_status(&parley_grpc::status::request_too_large(
            Some(5_000_000),
            4_194_304,
        ));
        assert_eq!(
            (too_large.reason.as_str(), too_large.retryable),
            ("REQUEST_TOO_LARGE", false)
        );
        // tonic's own words, from a runner served without the edge layer.
        let raw = Failure::from_runner_status(&tonic::Status::resource_exhausted(
            "Error decompressing: size limit, of 1024 bytes, exceeded while decompressing message",
        ));
        assert!(!raw.retryable, "{raw:?}");
        // A busy runner says when to come back.
        let busy = Failure::from_runner_status(&parley_grpc::status::retryable(
            tonic::Code::ResourceExhausted,
            "RUNNER_BUSY",
            "too many runs",
            Some(Duration::from_secs(2)),
        ));
        assert_eq!(
            (busy.reason.as_str(), busy.retryable, busy.retry_after),
            ("RUNNER_BUSY", true, Some(Duration::from_secs(2)))
        );
    }
}
