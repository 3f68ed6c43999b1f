//! What the conversation store keeps, as plain Rust types.
//!
//! Each row of the `events` table holds one [`EventBody`] as JSON. The
//! bodies are the gateway's domain view of a turn (no proto types), so the
//! log stays readable with any SQL client and independent of the wire
//! format; payloads additionally keep their exact wire encoding (`wire`) so
//! a typed proposal reads back exactly as it was sent.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// How a turn ended (or that it has not yet).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TurnState {
    /// Still running.
    Running,
    /// Completed normally.
    Completed,
    /// Cancelled by the user; the partial answer is kept.
    Cancelled,
    /// Failed (model error, deadline, shutdown); the partial answer is kept.
    Failed,
    /// Paused: tool calls wait for the user's decisions; no replica holds
    /// it.
    AwaitingInput,
}

impl TurnState {
    /// The value stored in `turns.state`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Running => "running",
            Self::Completed => "completed",
            Self::Cancelled => "cancelled",
            Self::Failed => "failed",
            Self::AwaitingInput => "awaiting_input",
        }
    }

    /// Parses a stored `turns.state`.
    pub fn parse(value: &str) -> Option<Self> {
        Some(match value {
            "running" => Self::Running,
            "completed" => Self::Completed,
            "cancelled" => Self::Cancelled,
            "failed" => Self::Failed,
            "awaiting_input" => Self::AwaitingInput,
            _ => return None,
        })
    }
}

/// Where the user was when they sent a message.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StoredPage {
    /// The page id.
    pub page: String,
    /// The tab, empty when none.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub tab: String,
    /// The subtab, empty when none.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub subtab: String,
    /// The stream id, empty when none.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub stream_id: String,
    /// The UI state, when sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<Value>,
}

/// A custom or tool payload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredPayload {
    /// The payload type name.
    #[serde(rename = "type")]
    pub payload_type: String,
    /// The JSON object.
    pub data: Value,
    /// base64 of the prost-encoded `parley.parser.v1.Payload`, typed view
    /// included, so it reads back exactly as it was sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wire: Option<String>,
}

/// A clickable chip.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredSuggestedValue {
    /// Display text.
    pub label: String,
    /// Text sent when clicked.
    pub value: String,
}

/// An action button.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredSuggestedAction {
    /// Display text.
    pub label: String,
    /// The action id.
    pub action: String,
    /// `client` or `server`.
    pub handler: String,
    /// Parameters, when any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub params: Option<Value>,
}

/// A structured (JSON) answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredStructured {
    /// The parsed value, when the raw text parsed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<Value>,
    /// The raw text, always kept.
    pub raw: String,
    /// Whether it parsed and satisfied the schema.
    pub valid: bool,
    /// Why not, when not.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub error: String,
}

/// A file attached to a user message, as its event records it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredAttachmentRef {
    /// The attachment's id.
    pub id: String,
    /// The file's name.
    pub name: String,
    /// Its sniffed media type.
    pub media_type: String,
    /// Its size in bytes.
    pub size_bytes: u64,
    /// Its SHA-256, lowercase hex.
    pub sha256: String,
    /// When it was uploaded, Unix ms.
    pub created_at: i64,
}

/// Token usage of a turn. The parts (cache reads and writes, reasoning)
/// read back as 0 from turns stored before they were kept.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StoredUsage {
    /// All prompt tokens.
    pub input_tokens: u64,
    /// All generated tokens.
    pub output_tokens: u64,
    /// Model calls.
    pub model_calls: u32,
    /// The model that answered.
    #[serde(default)]
    pub model: String,
    /// The part of `input_tokens` read from the provider's cache.
    #[serde(default)]
    pub cached_input_tokens: u64,
    /// The part of `input_tokens` written to the provider's cache.
    #[serde(default)]
    pub cache_write_tokens: u64,
    /// The part of `output_tokens` spent reasoning.
    #[serde(default)]
    pub reasoning_tokens: u64,
    /// What the tokens cost, in micro-units of `currency`.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cost_micros: i64,
    /// The ISO 4217 code of `cost_micros` (empty: not priced).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub currency: String,
}

fn is_zero(value: &i64) -> bool {
    *value == 0
}

/// Why a turn failed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredError {
    /// Stable UPPER_SNAKE reason.
    pub reason: String,
    /// Human-readable message.
    pub message: String,
    /// Whether sending the same message again may succeed.
    #[serde(default)]
    pub retryable: bool,
}

/// The assistant's side of a turn, as stored when the turn ends.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AssistantMessage {
    /// The cleaned text (the partial text for a cancelled or failed turn).
    pub text: String,
    /// The custom payload, when any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payload: Option<StoredPayload>,
    /// Suggested values.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub suggested_values: Vec<StoredSuggestedValue>,
    /// Suggested actions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub suggested_actions: Vec<StoredSuggestedAction>,
    /// The structured answer, when the request had a schema.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub structured: Option<StoredStructured>,
    /// Usage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<StoredUsage>,
    /// How the turn ended.
    pub state: TurnState,
    /// Why the model stopped (`end_turn`, `cancelled`, ...).
    #[serde(default)]
    pub stop_reason: String,
    /// The failure, for a failed turn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<StoredError>,
}

/// One entry of a conversation's log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum EventBody {
    /// The user's message, stored before the model is called.
    UserMessage {
        /// The text.
        text: String,
        /// Where the user was.
        page: StoredPage,
        /// The request's output schema, when any (history rules: only the
        /// latest request's schema applies, so this is kept for the record).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        response_schema: Option<Value>,
        /// The idempotency key, when sent.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        request_id: Option<String>,
        /// The server action this message was rendered from, when any.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        action: Option<String>,
        /// The files attached to it (their metadata; the bytes stay in the
        /// attachments table).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        attachments: Vec<StoredAttachmentRef>,
    },
    /// The model's reasoning during the turn.
    Reasoning {
        /// The accumulated reasoning text.
        text: String,
    },
    /// A tool call the model made.
    ToolCall {
        /// The call id.
        call_id: String,
        /// The tool name.
        name: String,
        /// The arguments.
        input: Value,
    },
    /// A tool call's result.
    ToolResult {
        /// The call id.
        call_id: String,
        /// The tool name.
        name: String,
        /// Whether it succeeded.
        success: bool,
        /// How long it took.
        duration_ms: u64,
        /// The text the tool gave the model.
        output: String,
        /// The tool's payload, when any.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        payload: Option<StoredPayload>,
        /// The error, when it failed.
        #[serde(default, skip_serializing_if = "String::is_empty")]
        error: String,
    },
    /// The assistant's answer; the last event of a finished turn.
    AssistantMessage(AssistantMessage),
}

impl EventBody {
    /// The value of the `events.kind` column.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::UserMessage { .. } => "user_message",
            Self::Reasoning { .. } => "reasoning",
            Self::ToolCall { .. } => "tool_call",
            Self::ToolResult { .. } => "tool_result",
            Self::AssistantMessage(_) => "assistant_message",
        }
    }
}

/// One stored event with its position.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredEvent {
    /// 1-based position in the conversation.
    pub seq: i64,
    /// The turn it belongs to.
    pub turn_id: String,
    /// When it was stored (Unix milliseconds).
    pub created_at: i64,
    /// The event.
    pub body: EventBody,
}

/// A conversation's summary.
#[derive(Debug, Clone, PartialEq)]
pub struct ConversationSummary {
    /// The id.
    pub id: String,
    /// The first user message, shortened.
    pub title: String,
    /// Unix milliseconds.
    pub created_at: i64,
    /// Unix milliseconds.
    pub updated_at: i64,
    /// Number of turns.
    pub turn_count: u32,
    /// The last turn of its current branch; `None` while it never
    /// branched (its latest turn).
    pub current_leaf: Option<String>,
    /// The usage of its ended turns (no model), summed as each ended.
    pub usage: StoredUsage,
    /// The application's labels (`UpdateConversation`).
    pub metadata: std::collections::BTreeMap<String, String>,
    /// Whether the user pinned it.
    pub pinned: bool,
    /// Whether the user archived it.
    pub archived: bool,
}

/// A turn's row.
#[derive(Debug, Clone, PartialEq)]
pub struct TurnRecord {
    /// The turn id.
    pub id: String,
    /// Its conversation.
    pub conversation_id: String,
    /// 0-based position in the conversation.
    pub turn_index: u32,
    /// Its state.
    pub state: TurnState,
    /// The stored final wire event (base64 `TurnComplete`), once finished.
    ///
    /// Why a finished turn is stored three ways, each for its own reader:
    /// the conversation events are the history (what the model is shown
    /// next turn, what `GetConversation` returns); the wire log
    /// (`turn_events`) is the stream exactly as clients got it, for
    /// `ResumeTurn`, and is pruned after `turns.resume_retention`; this is
    /// the typed answer a retried `request_id` replays for as long as the
    /// turn exists (validated payloads, suggestions, actions, usage and
    /// diagnostics, which the history does not hold in that form). Only
    /// the last two overlap, and only within the resume window.
    pub outcome: Option<String>,
    /// The replica that runs (or ran) it.
    pub replica: Option<String>,
    /// For a failed turn: whether sending the same message again may succeed.
    pub retryable: bool,
    /// The seq of its last stored wire event.
    pub last_event_seq: u64,
    /// What the user did with its proposal card, when recorded.
    pub payload_decision: Option<StoredDecision>,
    /// The user's rating, when given.
    pub feedback: Option<StoredFeedback>,
    /// Its parent as stored: `None`, the turn before it (a conversation
    /// that had not branched); `Some("")`, none (a root); else that turn.
    /// [`crate::store::tree::TurnTree`] resolves it.
    pub parent_turn_id: Option<String>,
}

/// What the user did with a turn's proposal card.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UserDecision {
    /// Accepted as proposed.
    Accepted,
    /// Dismissed.
    Dismissed,
    /// Accepted after editing.
    Edited,
}

impl UserDecision {
    /// The metric label and the stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Accepted => "accepted",
            Self::Dismissed => "dismissed",
            Self::Edited => "edited",
        }
    }
}

/// A recorded decision on a turn's proposal (`turns.payload_decision`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredDecision {
    /// The decision.
    pub decision: UserDecision,
    /// What the application applied, for an edited proposal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub applied_data: Option<Value>,
    /// The user's note, empty when none.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub note: String,
    /// When it was recorded, Unix ms.
    pub decided_at: i64,
}

/// A recorded rating of a turn (`turns.feedback`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredFeedback {
    /// -1, 1, or 1 to 5.
    pub rating: i32,
    /// The comment, empty when none.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub comment: String,
    /// The tags.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
    /// When it was submitted, Unix ms.
    pub submitted_at: i64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_bodies_round_trip_through_json_with_their_kind() {
        let bodies = vec![
            EventBody::UserMessage {
                text: "hi".into(),
                page: StoredPage {
                    page: "tables_list".into(),
                    ..Default::default()
                },
                response_schema: None,
                request_id: Some("r1".into()),
                action: None,
                attachments: Vec::new(),
            },
            EventBody::ToolCall {
                call_id: "c1".into(),
                name: "t".into(),
                input: serde_json::json!({"a": 1}),
            },
            EventBody::AssistantMessage(AssistantMessage {
                text: "done".into(),
                payload: None,
                suggested_values: vec![],
                suggested_actions: vec![],
                structured: None,
                usage: None,
                state: TurnState::Cancelled,
                stop_reason: "cancelled".into(),
                error: None,
            }),
        ];
        for body in bodies {
            let json = serde_json::to_value(&body).expect("serialises");
            assert_eq!(json["kind"], body.kind());
            let back: EventBody = serde_json::from_value(json).expect("deserialises");
            assert_eq!(back, body);
        }
    }

    #[test]
    fn turn_states_parse_what_they_print() {
        for state in [
            TurnState::Running,
            TurnState::Completed,
            TurnState::Cancelled,
            TurnState::Failed,
        ] {
            assert_eq!(TurnState::parse(state.as_str()), Some(state));
        }
        assert_eq!(TurnState::parse("weird"), None);
    }
}
