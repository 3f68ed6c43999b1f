//! The service's refusals as `tonic::Status`: each with its stable reason
//! and the field it concerns (`parley_grpc::status`).

use parley_grpc::status::{error, invalid_argument};
use parley_parse::ProfileError;
use tonic::{Code, Status};

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

/// `profile_name` names no loaded profile.
pub(super) fn unknown_profile(name: &str) -> Status {
    invalid_argument(
        UNKNOWN_PROFILE,
        vec![(
            "profile_name".into(),
            format!("no profile named `{name}` is loaded"),
        )],
    )
}

/// The inline profile at `field` does not compile.
pub(super) fn profile_status(error: &ProfileError, field: &str) -> Status {
    let inner = error.field();
    let path = if inner.is_empty() {
        field.to_owned()
    } else {
        format!("{field}.{inner}")
    };
    invalid_argument(INVALID_PROFILE, vec![(path, error.to_string())])
}

/// The text is `size` bytes, over `limit`.
pub(super) fn too_large(size: usize, limit: usize) -> Status {
    invalid_argument(
        TEXT_TOO_LARGE,
        vec![(
            "text".into(),
            format!("is {size} bytes, the limit is {limit} bytes (max_bytes)"),
        )],
    )
}

/// A stream's first message carries no profile.
pub(super) fn profile_required() -> Status {
    invalid_argument(
        PROFILE_REQUIRED,
        vec![(
            "input".into(),
            "the first message must carry `profile` or `profile_name`".into(),
        )],
    )
}

/// A stream sent a second profile.
pub(super) fn profile_already_set() -> Status {
    invalid_argument(
        PROFILE_ALREADY_SET,
        vec![(
            "input".into(),
            "only the first message may carry a profile".into(),
        )],
    )
}

/// A stream was idle or open for too long: `message` says which.
pub(super) fn stream_timeout(message: &'static str) -> Status {
    error(Code::DeadlineExceeded, STREAM_TIMEOUT, message)
}
