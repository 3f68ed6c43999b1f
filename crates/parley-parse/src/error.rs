//! The errors of the library: one enum for parsing, one for the partial-JSON
//! closer, one for profiles.
//!
//! They are plain domain errors; the service maps them to `tonic::Status`
//! (with stable reasons and `BadRequest` field paths) at its edge.

use std::path::PathBuf;

/// Why a text could not be parsed at all. Malformed elements are never an
/// error: they become diagnostics in the result.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    /// The text (or the sum of a stream's deltas) exceeds `Limits::max_bytes`.
    #[error("text is {size} bytes, the limit is {limit} bytes")]
    TooLarge {
        /// Size of the text received, in bytes.
        size: usize,
        /// The configured limit, in bytes.
        limit: usize,
    },
}

/// Why a [`crate::partial::PartialJson`] stopped reading: the bytes fed so
/// far are not the start of a JSON document it can follow.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PartialError {
    /// The byte at `offset` cannot continue a valid JSON document (or
    /// repeats a key of the same object).
    #[error("not a JSON document: {reason} at byte {offset}")]
    Invalid {
        /// Position of the offending byte, from the start of the document.
        offset: usize,
        /// What is wrong there.
        reason: &'static str,
    },
    /// The array or object opened at `offset` nests deeper than `limit`.
    #[error("JSON nests deeper than {limit} levels at byte {offset}")]
    TooDeep {
        /// Position of the opening bracket.
        offset: usize,
        /// The depth limit (`Limits::max_depth`).
        limit: usize,
    },
    /// The document would grow past `Limits::max_bytes`.
    #[error("JSON document is {size} bytes, the limit is {limit} bytes")]
    TooLarge {
        /// Size the document would have, in bytes.
        size: usize,
        /// The limit, in bytes.
        limit: usize,
    },
    /// The document ended before its value was complete.
    #[error("the JSON document ends after {received} bytes, before its value is complete")]
    Incomplete {
        /// Bytes read.
        received: usize,
    },
}

/// Why a profile (or a profiles file) cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    /// A payload spec has no name.
    #[error("payload {index} has an empty name")]
    EmptyPayloadName {
        /// Position of the payload in the profile.
        index: usize,
    },
    /// Two payload specs share a name.
    #[error("payload `{name}` is listed twice")]
    DuplicatePayload {
        /// Position of the second occurrence.
        index: usize,
        /// The repeated name.
        name: String,
    },
    /// A marker is empty or uses characters a marker cannot have.
    #[error("payload `{name}`: marker `{marker}` is invalid: {reason}")]
    InvalidMarker {
        /// Position of the payload in the profile.
        index: usize,
        /// The payload name.
        name: String,
        /// The marker as given.
        marker: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A marker is already used by another payload or by a suggestion marker.
    #[error("payload `{name}`: marker `{marker}` is already in use")]
    DuplicateMarker {
        /// Position of the payload in the profile.
        index: usize,
        /// The payload name.
        name: String,
        /// The marker as given.
        marker: String,
    },
    /// A payload schema does not compile.
    #[error("payload `{name}`: invalid JSON schema: {reason}")]
    InvalidSchema {
        /// Position of the payload in the profile.
        index: usize,
        /// The payload name.
        name: String,
        /// The compiler's message.
        reason: String,
    },
    /// A tool name is empty or too long.
    #[error("tool {index}: name `{name}` is invalid: {reason}")]
    InvalidToolName {
        /// Position of the tool in the profile.
        index: usize,
        /// The name as given.
        name: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A profiles file cannot be read.
    #[error("cannot read profiles file {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A profiles file is not in the expected format.
    #[error("profiles file {path} is malformed: {reason}")]
    Malformed {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// A named profile of a profiles file is invalid.
    #[error("profile `{profile}`: {source}")]
    InProfile {
        /// The profile name.
        profile: String,
        /// What is wrong with it.
        source: Box<ProfileError>,
    },
}

impl ProfileError {
    /// The field of a `ParseProfile` this error is about, as a `BadRequest`
    /// field path relative to the profile (for example `payloads[1].schema`).
    pub fn field(&self) -> String {
        match self {
            Self::EmptyPayloadName { index } | Self::DuplicatePayload { index, .. } => {
                format!("payloads[{index}].name")
            }
            Self::InvalidMarker { index, .. } | Self::DuplicateMarker { index, .. } => {
                format!("payloads[{index}].marker")
            }
            Self::InvalidSchema { index, .. } => format!("payloads[{index}].schema"),
            Self::InvalidToolName { index, .. } => format!("tools[{index}]"),
            Self::Read { .. } | Self::Malformed { .. } => String::new(),
            Self::InProfile { source, .. } => source.field(),
        }
    }
}
