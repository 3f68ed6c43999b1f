//! Why the runner refuses a `Run` call: [`RunError`], each refusal with
//! its code, reason and details ([`ServiceError`]), turned into a
//! `tonic::Status` by `parley_grpc::status`.
//!
//! A refusal happens before anything streams; once a turn runs, failures
//! are `Error` events in the stream instead ([`crate::events::TurnError`]).
//! Every status carries a `google.rpc.ErrorInfo` with a stable reason
//! (built by `parley_grpc::status`): `INVALID_REQUEST` and
//! `UNKNOWN_PROVIDER` with `BadRequest` field violations,
//! `STRUCTURED_OUTPUT_UNSUPPORTED` with the provider and model as metadata,
//! `RUNNER_BUSY` with a `RetryInfo`, `TOOL_ENDPOINT_NOT_ALLOWED`
//! (`FAILED_PRECONDITION`: the request is well-formed but the runner's
//! configuration does not allow the endpoint its page registry gave; not
//! `PERMISSION_DENIED`, as the list is the same for every caller) with the
//! tool as metadata, and `MODEL_NOT_ALLOWED` (`INVALID_ARGUMENT`, like
//! `UNKNOWN_PROVIDER`: the request names a model this runner does not
//! serve) with a `BadRequest` field violation.

use std::time::Duration;

use parley_grpc::status::{Details, ServiceError};
use tonic::Code;

use crate::turn::Violation;

/// How long a caller refused with `RUNNER_BUSY` is told to wait.
const BUSY_RETRY_AFTER: Duration = Duration::from_secs(1);

/// Why a `Run` call is refused before its turn starts.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RunError {
    /// Fields of the request are invalid.
    #[error("invalid request: {}", describe(.0))]
    Invalid(Vec<Violation>),
    /// A model reference names a provider the runner does not have.
    #[error("unknown provider `{provider}` (configured: {})", .configured.join(", "))]
    UnknownProvider {
        /// The field, for example `fallbacks[1].provider`.
        field: String,
        /// The unknown name.
        provider: String,
        /// The providers the runner has, for the message.
        configured: Vec<String>,
    },
    /// A schema was given for a model without native structured output.
    #[error("model `{model}` of provider `{provider}` does not support native structured output")]
    StructuredOutputUnsupported {
        /// The provider.
        provider: String,
        /// The model.
        model: String,
    },
    /// A file of a kind the turn's model does not take (and the request
    /// did not ask for such files to be described instead).
    #[error("model `{model}` of provider `{provider}` does not take {kind} input (`{media_type}`)")]
    AttachmentUnsupported {
        /// The provider.
        provider: String,
        /// The model.
        model: String,
        /// The kind of input (`image`, `pdf`).
        kind: &'static str,
        /// The file's media type.
        media_type: String,
    },
    /// The runner is at its concurrent turn limit.
    #[error("the runner is at its concurrent turn limit")]
    Busy,
    /// A tool's `grpc` endpoint is not on the runner's allow list
    /// (`tools.allowed_endpoints`, `tools.registry`); the address is left
    /// out (it goes to the log).
    #[error("the endpoint of tool `{tool}` is not allowed by this runner")]
    ToolEndpointNotAllowed {
        /// The tool's name, as the request gave it.
        tool: String,
    },
    /// A model is not on the runner's allow list (`models.allowed`).
    #[error("model `{model}` is not allowed by this runner")]
    ModelNotAllowed {
        /// The field, for example `fallbacks[0]`.
        field: String,
        /// `PROVIDER/MODEL` as the runner resolved it.
        model: String,
    },
}

fn describe(violations: &[Violation]) -> String {
    violations
        .iter()
        .map(|v| format!("{}: {}", v.field, v.description))
        .collect::<Vec<_>>()
        .join("; ")
}

impl ServiceError for RunError {
    fn code(&self) -> Code {
        match self {
            Self::Invalid(_) | Self::UnknownProvider { .. } | Self::ModelNotAllowed { .. } => {
                Code::InvalidArgument
            }
            Self::StructuredOutputUnsupported { .. }
            | Self::ToolEndpointNotAllowed { .. }
            | Self::AttachmentUnsupported { .. } => Code::FailedPrecondition,
            Self::Busy => Code::ResourceExhausted,
        }
    }

    fn reason(&self) -> &'static str {
        match self {
            Self::Invalid(_) => "INVALID_REQUEST",
            Self::UnknownProvider { .. } => "UNKNOWN_PROVIDER",
            Self::StructuredOutputUnsupported { .. } => "STRUCTURED_OUTPUT_UNSUPPORTED",
            Self::ToolEndpointNotAllowed { .. } => "TOOL_ENDPOINT_NOT_ALLOWED",
            Self::AttachmentUnsupported { .. } => "ATTACHMENT_UNSUPPORTED",
            Self::ModelNotAllowed { .. } => "MODEL_NOT_ALLOWED",
            Self::Busy => "RUNNER_BUSY",
        }
    }

    fn details(&self) -> Details {
        match self {
            Self::Invalid(violations) => Details::violations(
                violations
                    .iter()
                    .map(|v| (v.field.clone(), v.description.clone()))
                    .collect(),
            ),
            Self::UnknownProvider { field, .. } | Self::ModelNotAllowed { field, .. } => {
                Details::violation(field.clone(), self.to_string())
            }
            Self::StructuredOutputUnsupported { provider, model } => {
                Details::metadata([("provider", provider.clone()), ("model", model.clone())])
            }
            Self::ToolEndpointNotAllowed { tool } => Details::metadata([("tool", tool.clone())]),
            Self::AttachmentUnsupported {
                provider,
                model,
                kind,
                media_type,
            } => Details::metadata([
                ("provider", provider.clone()),
                ("model", model.clone()),
                ("kind", (*kind).to_owned()),
                ("media_type", media_type.clone()),
            ]),
            Self::Busy => Details::retry_after(Some(BUSY_RETRY_AFTER)),
        }
    }
}

parley_grpc::status_from!(RunError);

#[cfg(test)]
mod tests {
    use parley_grpc::status;
    use tonic::Status;
    use tonic_types::StatusExt;

    use super::*;

    #[test]
    fn every_refusal_keeps_its_code_reason_and_details() {
        let invalid = Status::from(RunError::Invalid(vec![Violation {
            field: "messages".into(),
            description: "at least one message is required".into(),
        }]));
        assert_eq!(invalid.code(), Code::InvalidArgument);
        assert_eq!(
            invalid.message(),
            "messages: at least one message is required"
        );
        assert_eq!(status::reason(&invalid).as_deref(), Some("INVALID_REQUEST"));
        let violations = invalid.get_details_bad_request().expect("bad request");
        assert_eq!(violations.field_violations[0].field, "messages");

        let unknown = Status::from(RunError::UnknownProvider {
            field: "model.provider".into(),
            provider: "nope".into(),
            configured: vec!["a".into(), "b".into()],
        });
        assert_eq!(unknown.code(), Code::InvalidArgument);
        assert_eq!(
            unknown.message(),
            "model.provider: unknown provider `nope` (configured: a, b)"
        );
        assert_eq!(
            status::reason(&unknown).as_deref(),
            Some("UNKNOWN_PROVIDER")
        );

        let unsupported = Status::from(RunError::StructuredOutputUnsupported {
            provider: "p".into(),
            model: "plain".into(),
        });
        assert_eq!(unsupported.code(), Code::FailedPrecondition);
        assert_eq!(
            unsupported.message(),
            "model `plain` of provider `p` does not support native structured output"
        );
        let info = unsupported.get_details_error_info().expect("error info");
        assert_eq!(info.reason, "STRUCTURED_OUTPUT_UNSUPPORTED");
        assert_eq!(
            info.metadata.get("model").map(String::as_str),
            Some("plain")
        );

        let endpoint = Status::from(RunError::ToolEndpointNotAllowed {
            tool: "lookup_rows".into(),
        });
        assert_eq!(endpoint.code(), Code::FailedPrecondition);
        assert_eq!(
            endpoint.message(),
            "the endpoint of tool `lookup_rows` is not allowed by this runner"
        );
        let info = endpoint.get_details_error_info().expect("error info");
        assert_eq!(info.reason, "TOOL_ENDPOINT_NOT_ALLOWED");
        assert_eq!(
            info.metadata.get("tool").map(String::as_str),
            Some("lookup_rows")
        );

        let model = Status::from(RunError::ModelNotAllowed {
            field: "fallbacks[0]".into(),
            model: "openai/gpt-5".into(),
        });
        assert_eq!(model.code(), Code::InvalidArgument);
        assert_eq!(
            model.message(),
            "fallbacks[0]: model `openai/gpt-5` is not allowed by this runner"
        );
        assert_eq!(status::reason(&model).as_deref(), Some("MODEL_NOT_ALLOWED"));

        let busy = Status::from(RunError::Busy);
        assert_eq!(busy.code(), Code::ResourceExhausted);
        assert_eq!(busy.message(), "the runner is at its concurrent turn limit");
        assert_eq!(status::reason(&busy).as_deref(), Some("RUNNER_BUSY"));
        assert_eq!(
            busy.get_details_retry_info().and_then(|r| r.retry_delay),
            Some(BUSY_RETRY_AFTER)
        );
    }
}
