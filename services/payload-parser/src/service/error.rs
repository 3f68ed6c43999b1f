//! Why the parser refuses a call: [`ParserError`], each refusal with its
//! stable reason and the field it concerns, turned into a `tonic::Status`
//! by `parley_grpc::status` like every Parley service's refusals.

use parley_grpc::status::{Details, ServiceError};
use parley_parse::{ParseError, ProfileError};
use tonic::Code;

/// Reason: the text is larger than the configured limit.
pub const TEXT_TOO_LARGE: &str = "TEXT_TOO_LARGE";
/// Reason: `profile_name` names no loaded profile.
pub const UNKNOWN_PROFILE: &str = "UNKNOWN_PROFILE";
/// Reason: the inline profile does not compile.
pub const INVALID_PROFILE: &str = "INVALID_PROFILE";
/// Reason: a stream's first message carries no profile.
pub const PROFILE_REQUIRED: &str = "PROFILE_REQUIRED";
/// Reason: a stream sent a second profile.
pub const PROFILE_ALREADY_SET: &str = "PROFILE_ALREADY_SET";
/// Reason: a stream was idle or open for too long.
pub const STREAM_TIMEOUT: &str = "STREAM_TIMEOUT";

/// Why a `Parse` or `ParseStream` call is refused.
#[derive(Debug, thiserror::Error)]
pub enum ParserError {
    /// `profile_name` names no loaded profile.
    #[error("no profile named `{0}` is loaded")]
    UnknownProfile(String),
    /// The inline profile at `field` does not compile.
    #[error("{source}")]
    InvalidProfile {
        /// The field of the request holding the profile (`profile`,
        /// `input.profile`).
        field: String,
        /// Why it does not compile.
        source: ProfileError,
    },
    /// The text is `size` bytes, over `limit`.
    #[error("is {size} bytes, the limit is {limit} bytes (max_bytes)")]
    TooLarge {
        /// The text's size (a stream: the sum of its deltas so far).
        size: usize,
        /// The limit.
        limit: usize,
    },
    /// A stream's first message carries no profile.
    #[error("the first message must carry `profile` or `profile_name`")]
    ProfileRequired,
    /// A stream sent a second profile.
    #[error("only the first message may carry a profile")]
    ProfileAlreadySet,
    /// A stream was idle or open for too long: the message says which.
    #[error("{0}")]
    StreamTimeout(&'static str),
}

impl From<ParseError> for ParserError {
    fn from(ParseError::TooLarge { size, limit }: ParseError) -> Self {
        Self::TooLarge { size, limit }
    }
}

impl ServiceError for ParserError {
    fn code(&self) -> Code {
        match self {
            Self::StreamTimeout(_) => Code::DeadlineExceeded,
            _ => Code::InvalidArgument,
        }
    }

    fn reason(&self) -> &'static str {
        match self {
            Self::UnknownProfile(_) => UNKNOWN_PROFILE,
            Self::InvalidProfile { .. } => INVALID_PROFILE,
            Self::TooLarge { .. } => TEXT_TOO_LARGE,
            Self::ProfileRequired => PROFILE_REQUIRED,
            Self::ProfileAlreadySet => PROFILE_ALREADY_SET,
            Self::StreamTimeout(_) => STREAM_TIMEOUT,
        }
    }

    fn details(&self) -> Details {
        let field = match self {
            Self::UnknownProfile(_) => "profile_name".to_owned(),
            Self::InvalidProfile { field, source } => {
                let inner = source.field();
                if inner.is_empty() {
                    field.clone()
                } else {
                    format!("{field}.{inner}")
                }
            }
            Self::TooLarge { .. } => "text".to_owned(),
            Self::ProfileRequired | Self::ProfileAlreadySet => "input".to_owned(),
            Self::StreamTimeout(_) => return Details::default(),
        };
        Details::violation(field, self.to_string())
    }
}

parley_grpc::status_from!(ParserError);
