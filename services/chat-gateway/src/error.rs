//! The gateway's request errors, each with its code, reason and details
//! ([`ServiceError`]); `parley_grpc::status` turns them into `tonic::Status`.
//!
//! Errors inside a running turn never become a status: they end the turn's
//! stream with an `error` event and a `complete` (see `turn::outcome`).
//! These are the refusals that happen before a turn starts.

use std::time::Duration;

use parley_grpc::status::{Details, ServiceError};
use tonic::Code;

use crate::store::{StoreError, quota::QuotaExceeded};

/// Why a request was refused.
#[derive(Debug, thiserror::Error)]
pub enum GatewayError {
    /// A field is malformed or too large.
    #[error("invalid request ({reason})")]
    InvalidArgument {
        /// Stable reason.
        reason: &'static str,
        /// `(field, problem)` per violation.
        violations: Vec<(String, String)>,
    },
    /// The conversation does not exist for this caller (whether it exists
    /// for someone else is never revealed).
    #[error("conversation not found")]
    ConversationNotFound,
    /// The turn does not exist in this conversation for this caller.
    #[error("turn not found")]
    TurnNotFound,
    /// A turn is running on the conversation.
    #[error("a turn is still running on this conversation")]
    TurnInProgress {
        /// The running turn.
        turn_id: String,
    },
    /// `SubmitToolDecisions` on a turn that does not wait for decisions
    /// (never paused, already continued, expired or cancelled).
    #[error("the turn is not waiting for decisions")]
    TurnNotAwaitingInput {
        /// The turn.
        turn_id: String,
    },
    /// A new message on a conversation whose turn waits for decisions,
    /// with `turns.block_on_pending` on.
    #[error("a turn of this conversation waits for decisions on its tool calls")]
    TurnAwaitingInput {
        /// The paused turn.
        turn_id: String,
    },
    /// A decision or rating of a turn that has not ended (it runs, or waits
    /// for decisions on its tool calls).
    #[error("the turn has not finished yet")]
    TurnNotFinished {
        /// The turn.
        turn_id: String,
    },
    /// A decision on the proposal of a turn that made none.
    #[error("the turn has no proposal to decide on")]
    NoPayload {
        /// The turn.
        turn_id: String,
    },
    /// Too many turns are running on this gateway.
    #[error("too many turns are running; retry shortly")]
    TooManyTurns,
    /// Too many event streams are open on this gateway.
    #[error("too many streams are open; retry shortly")]
    TooManyStreams,
    /// The client read none of its stream's events for
    /// `turns.follower_stall`: the stream was let go.
    #[error("the stream was not read for {} s; resume the turn to read on", .stall.as_secs())]
    SlowConsumer {
        /// `turns.follower_stall`.
        stall: Duration,
    },
    /// A limit of the caller (or its tenant) refused the turn.
    #[error("{}", over_quota_message(.0))]
    OverQuota(QuotaExceeded),
    /// The caller's tenant may use none of the models the page would run
    /// its turn on (`[tenants.NAME] models_allowed` against the page's).
    #[error("tenant `{tenant}` may use none of the models of page `{page}`")]
    NoModelForTenant {
        /// The tenant.
        tenant: String,
        /// The page.
        page: String,
    },
    /// The attachment does not exist for this caller.
    #[error("attachment not found")]
    AttachmentNotFound,
    /// The caller's attachments would pass a limit of `[attachments]`:
    /// `per_user_bytes`, or `uploads_per_user` uploads at once.
    #[error("your attachments would pass attachments.{setting} = {limit}")]
    AttachmentQuota {
        /// The setting's last part (`per_user_bytes`, `uploads_per_user`).
        setting: &'static str,
        /// Its value.
        limit: u64,
    },
    /// The action is not registered.
    #[error("unknown action `{0}`")]
    UnknownAction(String),
    /// The action is handled by the client, not through `ExecuteAction`.
    #[error("action `{0}` is handled by the client, not the server")]
    ClientAction(String),
    /// The action exists but the page does not offer it.
    #[error("action `{action}` is not available on page `{page}`")]
    ActionNotOnPage {
        /// The action.
        action: String,
        /// The page.
        page: String,
    },
    /// The action's message template failed to render (a registry problem).
    #[error("the action's message could not be rendered: {0}")]
    ActionTemplate(String),
    /// The conversation store failed.
    #[error("conversation store error: {0}")]
    Store(#[from] StoreError),
}

impl GatewayError {
    /// One invalid field.
    pub fn invalid(reason: &'static str, field: &str, problem: impl Into<String>) -> Self {
        Self::InvalidArgument {
            reason,
            violations: vec![(field.to_owned(), problem.into())],
        }
    }

    /// The stable `ErrorInfo.reason`.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::InvalidArgument { reason, .. } => reason,
            Self::ConversationNotFound => "CONVERSATION_NOT_FOUND",
            Self::TurnNotFound => "TURN_NOT_FOUND",
            Self::TurnInProgress { .. } => "TURN_IN_PROGRESS",
            Self::TurnNotAwaitingInput { .. } => "TURN_NOT_AWAITING_INPUT",
            Self::TurnAwaitingInput { .. } => "TURN_AWAITING_INPUT",
            Self::TurnNotFinished { .. } => "TURN_NOT_FINISHED",
            Self::NoPayload { .. } => "NO_PAYLOAD",
            Self::NoModelForTenant { .. } => "NO_MODEL_FOR_TENANT",
            Self::AttachmentNotFound => "ATTACHMENT_NOT_FOUND",
            Self::AttachmentQuota { .. } => "QUOTA_EXCEEDED",
            Self::TooManyTurns => "TOO_MANY_TURNS",
            Self::OverQuota(_) => "QUOTA_EXCEEDED",
            Self::TooManyStreams => "TOO_MANY_STREAMS",
            Self::SlowConsumer { .. } => "SLOW_CONSUMER",
            Self::UnknownAction(_) => "UNKNOWN_ACTION",
            Self::ClientAction(_) => "CLIENT_ACTION",
            Self::ActionNotOnPage { .. } => "ACTION_NOT_ON_PAGE",
            Self::ActionTemplate(_) => "ACTION_TEMPLATE_FAILED",
            Self::Store(_) => "STORE_UNAVAILABLE",
        }
    }
}

impl ServiceError for GatewayError {
    fn code(&self) -> Code {
        match self {
            Self::InvalidArgument { .. } | Self::UnknownAction(_) => Code::InvalidArgument,
            Self::ConversationNotFound | Self::TurnNotFound | Self::AttachmentNotFound => {
                Code::NotFound
            }
            Self::TurnInProgress { .. }
            | Self::TurnNotAwaitingInput { .. }
            | Self::TurnAwaitingInput { .. }
            | Self::TurnNotFinished { .. }
            | Self::NoPayload { .. }
            | Self::NoModelForTenant { .. }
            | Self::ClientAction(_)
            | Self::ActionNotOnPage { .. }
            | Self::ActionTemplate(_) => Code::FailedPrecondition,
            Self::TooManyTurns
            | Self::TooManyStreams
            | Self::SlowConsumer { .. }
            | Self::OverQuota(_)
            | Self::AttachmentQuota { .. } => Code::ResourceExhausted,
            Self::Store(_) => Code::Unavailable,
        }
    }

    fn reason(&self) -> &'static str {
        GatewayError::reason(self)
    }

    fn message(&self) -> String {
        match self {
            Self::TurnInProgress { .. } => "a turn is still running on this conversation; wait for it, cancel it, or set cancel_running".to_owned(),
            Self::Store(_) => "the conversation store is unavailable".to_owned(),
            _ => self.to_string(),
        }
    }

    fn details(&self) -> Details {
        match self {
            Self::InvalidArgument { violations, .. } => Details::violations(violations.clone()),
            Self::UnknownAction(action) => {
                Details::violation("action", format!("`{action}` is not registered"))
            }
            Self::TurnInProgress { turn_id }
            | Self::TurnNotAwaitingInput { turn_id }
            | Self::TurnAwaitingInput { turn_id }
            | Self::TurnNotFinished { turn_id }
            | Self::NoPayload { turn_id } => Details::metadata([("turn_id", turn_id.clone())]),
            Self::TooManyTurns | Self::TooManyStreams | Self::Store(_) => {
                Details::retry_after(Some(Duration::from_secs(1)))
            }
            Self::OverQuota(refused) => over_quota_details(refused),
            Self::AttachmentQuota { setting, limit } => Details {
                quota: vec![(
                    "user".to_owned(),
                    format!("attachments.{setting} = {limit}"),
                )],
                ..Details::default()
            },
            Self::NoModelForTenant { tenant, page } => {
                Details::metadata([("tenant", tenant.clone()), ("page", page.clone())])
            }
            _ => Details::default(),
        }
    }

    fn log(&self) {
        if let Self::Store(cause) = self {
            tracing::error!(error = %cause, "conversation store failed");
        }
    }
}

/// `QuotaFailure` (the limit: its subject is `user` or `tenant`, its
/// description names the setting) and `RetryInfo`.
fn over_quota_details(refused: &QuotaExceeded) -> Details {
    Details {
        retry: Some(Some(refused.retry_after)),
        quota: vec![(
            refused.scope.as_str().to_owned(),
            format!(
                "turns.per_{}.{} = {}",
                refused.scope.as_str(),
                refused.limit.as_str(),
                refused.max_text()
            ),
        )],
        ..Details::default()
    }
}

/// `the user's limit of 4 concurrent_turns is reached`.
fn over_quota_message(refused: &QuotaExceeded) -> String {
    format!(
        "the {}'s limit of {} {} is reached; retry in {} s",
        refused.scope.as_str(),
        refused.max_text(),
        refused.limit.as_str(),
        refused.retry_after.as_secs().max(1)
    )
}

parley_grpc::status_from!(GatewayError);

#[cfg(test)]
mod tests {
    use super::*;

    use tonic::Status;

    #[test]
    fn each_error_has_its_code_and_reason() {
        let cases: Vec<(GatewayError, Code)> = vec![
            (
                GatewayError::invalid("EMPTY_MESSAGE", "message", "is empty"),
                Code::InvalidArgument,
            ),
            (GatewayError::ConversationNotFound, Code::NotFound),
            (GatewayError::TurnNotFound, Code::NotFound),
            (
                GatewayError::TurnInProgress {
                    turn_id: "t".into(),
                },
                Code::FailedPrecondition,
            ),
            (GatewayError::TooManyTurns, Code::ResourceExhausted),
            (
                GatewayError::UnknownAction("x".into()),
                Code::InvalidArgument,
            ),
            (
                GatewayError::ClientAction("close_chat".into()),
                Code::FailedPrecondition,
            ),
        ];
        for (error, code) in cases {
            let reason = error.reason();
            let status = Status::from(error);
            assert_eq!(status.code(), code, "{reason}");
            assert_eq!(
                parley_grpc::status::reason(&status).as_deref(),
                Some(reason)
            );
        }
    }
}
