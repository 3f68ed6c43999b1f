//! The domain types a parse produces, independent of the wire format.
//!
//! [`Parsed`] is the result of parsing one response; its parts are plain Rust
//! values that tests build by hand. `proto` turns them into the
//! `parley.parser.v1` messages at the edge.

pub mod delta;

use std::sync::Arc;

use serde_json::{Map, Value};

use self::delta::TextDelta;

/// A clickable chip: clicking it sends `value` as the user's next message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SuggestedValue {
    /// Display text on the chip.
    pub label: String,
    /// Text sent as the user's next message.
    pub value: String,
}

/// Who executes a suggested action.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ActionHandler {
    /// The client UI runs it.
    #[default]
    Client,
    /// The client sends it back to the server.
    Server,
}

/// A button that triggers a registered action.
#[derive(Debug, Clone, PartialEq)]
pub struct SuggestedAction {
    /// Button display text.
    pub label: String,
    /// The action identifier.
    pub action: String,
    /// Where it runs: the profile decides for registered actions.
    pub handler: ActionHandler,
    /// Optional parameters the model attached, as written.
    pub params: Option<Map<String, Value>>,
}

/// A custom payload found after its marker.
#[derive(Debug, Clone, PartialEq)]
pub struct Payload {
    /// The payload type name from the profile (for example `schema_proposal`).
    pub payload_type: String,
    /// Exactly the JSON object the model wrote.
    pub data: Map<String, Value>,
}

/// A tool call the model wrote into its text, naming a registered tool.
#[derive(Debug, Clone, PartialEq)]
pub struct TextToolCall {
    /// `text_call_<n>`, numbered from 1 in order of appearance.
    pub id: String,
    /// The registered tool name.
    pub name: String,
    /// The call's arguments (always a JSON object).
    pub arguments: Value,
    /// The exact text removed from the message.
    pub raw: String,
}

/// The value so far of a custom payload whose JSON is being written: the
/// JSON up to now, closed where it is open (see [`crate::partial`] for the
/// rules). Handed out by a [`crate::StreamParser`] made
/// [`with_partial_payloads`](crate::StreamParser::with_partial_payloads).
///
/// Successive partials of one payload (same `offset`) have increasing
/// revisions, and each one's `data` extends the previous one's: a value at
/// one of the previous `complete_paths` never changes. A payload's last
/// partial either shows it whole (`complete_paths` is `[""]`) or withdraws
/// it (`data` is `None`).
#[derive(Debug, Clone, PartialEq)]
pub struct PartialPayload {
    /// The payload type name from the profile (for example `schema_proposal`).
    pub payload_type: String,
    /// Byte offset of the payload's marker in the text: tells two payloads
    /// apart, and is the `offset` of the diagnostics about it.
    pub offset: usize,
    /// 1 for the payload's first partial, then one more for each next one.
    pub revision: u32,
    /// The object so far; `None` withdraws the payload: it failed
    /// validation, never closed, or lost to a higher-priority payload (a
    /// diagnostic saying which comes first).
    pub data: Option<Map<String, Value>>,
    /// JSON Pointers of the values in `data` that are final; a path covers
    /// everything under it ([`crate::partial::is_complete_path`]).
    pub complete_paths: Vec<String>,
}

/// What a diagnostic reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DiagnosticKind {
    /// The JSON after a marker does not parse; the element is absent.
    InvalidJson,
    /// The JSON parsed but violates the element's schema; the element is absent.
    SchemaViolation,
    /// A suggested action is not allowed by the profile; it was dropped.
    UnknownAction,
    /// A safe repair was applied; the element is present.
    Repaired,
    /// An element never closed; its text stays in the message.
    Unterminated,
    /// A second element of a kind that allows only one was ignored.
    Duplicate,
    /// The JSON nests deeper than the limit; the element is absent.
    TooDeep,
}

/// Something that was skipped or repaired, with the raw text so nothing is lost.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    /// What happened.
    pub kind: DiagnosticKind,
    /// The element concerned: a payload type name, `suggested_values`,
    /// `suggested_actions` or `tool_call`.
    pub element: String,
    /// The raw text as the model wrote it (for `Unterminated`, whose text
    /// stays in the message, at most the first 256 bytes).
    pub raw: String,
    /// A human-readable reason.
    pub reason: String,
    /// Byte offset of the element in the input.
    pub offset: usize,
}

/// The result of parsing one response.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Parsed {
    /// The text for the user, with every marker and its JSON removed.
    pub message: String,
    /// Clickable chips (empty when absent).
    pub suggested_values: Vec<SuggestedValue>,
    /// Action buttons (empty when absent).
    pub suggested_actions: Vec<SuggestedAction>,
    /// At most one custom payload: the first payload type of the profile
    /// that is present and valid.
    pub custom_payload: Option<Payload>,
    /// Tool calls written into the text, in order.
    pub tool_calls: Vec<TextToolCall>,
    /// What was skipped or repaired, in the order found.
    pub diagnostics: Vec<Diagnostic>,
}

/// One piece of streamed output, in the order it becomes known.
#[derive(Debug, Clone, PartialEq)]
pub enum StreamItem {
    /// The next delta of the cleaned message (inline, without an
    /// allocation, up to 24 bytes).
    Text(TextDelta),
    /// The suggested values, as soon as their array closed.
    ///
    /// Shared with the parser, like [`Self::CustomPayload`]: handing them
    /// out copies nothing, and [`finish`](crate::StreamParser::finish)
    /// moves them into [`Parsed::suggested_values`] without a copy when
    /// every handle has been dropped by then.
    SuggestedValues(Arc<Vec<SuggestedValue>>),
    /// The suggested actions (unknown ones dropped), as soon as their array
    /// closed; shared with the parser as [`Self::SuggestedValues`] is.
    SuggestedActions(Arc<Vec<SuggestedAction>>),
    /// A custom payload that is, for now, the best candidate; a later item
    /// of a higher-priority type supersedes it. The final result decides.
    ///
    /// The payload is shared with the parser, which keeps it for its final
    /// result: handing it out copies nothing, and
    /// [`finish`](crate::StreamParser::finish) moves it into
    /// [`Parsed::custom_payload`] without a copy when every handle to it has
    /// been dropped by then (a handle still held costs one copy there).
    CustomPayload(Arc<Payload>),
    /// A text tool call, as soon as it closed; shared with the parser as
    /// [`Self::SuggestedValues`] are.
    ToolCall(Arc<TextToolCall>),
    /// A diagnostic, as soon as it is known.
    Diagnostic(Diagnostic),
    /// The value so far of a custom payload being written: at most one per
    /// payload per call, only when it changed, and only from a parser made
    /// [`with_partial_payloads`](crate::StreamParser::with_partial_payloads).
    PartialPayload(PartialPayload),
    /// The suggested values whose items have closed so far, while their
    /// list is being written: each one has more items than the one before;
    /// an empty one takes them down (the list turned out invalid or never
    /// closed). `SuggestedValues` and the final result decide. Only from a
    /// parser made [`with_partial_payloads`](crate::StreamParser::with_partial_payloads).
    PartialSuggestedValues(Vec<SuggestedValue>),
    /// The suggested actions (unknown ones dropped) whose items have closed
    /// so far, like [`Self::PartialSuggestedValues`].
    PartialSuggestedActions(Vec<SuggestedAction>),
    /// The complete result, last (produced by [`crate::StreamParser::finish_with_items`]
    /// callers such as the service, never by `push`).
    Final(Box<Parsed>),
}
