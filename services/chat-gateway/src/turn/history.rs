//! The model's history, rebuilt from the conversation's log.
//!
//! Each earlier turn becomes a user message and an assistant message:
//! - the assistant text is the cleaned answer; the payloads it carried go
//!   to the prompt's payload manifest instead (prompt section 5);
//! - an earlier structured answer becomes assistant text holding its JSON
//!   (only the current request's schema applies, so no earlier schema is
//!   sent; docs/output-format.md#structured-output);
//! - tool calls of earlier turns are summarised as assistant text, not
//!   replayed as tool messages, because the page (and so the tool list) may
//!   have changed since and providers refuse calls to undeclared tools;
//! - a cancelled or failed turn keeps its partial text with a note, and a
//!   turn with no stored answer gets a placeholder, so roles alternate.
//!
//! The current turn's user message, stored before the model is called, is
//! the last message.
//!
//! The history fits a byte budget (`turns.history_max_bytes`, below the
//! runner's decode limit): it is assembled newest first, each earlier turn
//! whole (its user message and its assistant message, which carries the
//! turn's tool calls with their results), and the oldest turns that do not
//! fit are left out. The current message is always sent. So no
//! conversation grows into one whose every turn the runner refuses.

use std::collections::HashMap;

use parley_proto::runner::v1 as runner;

use crate::{
    prompt::{Decision, HistoryPayload},
    store::{
        EventBody, StoredAttachmentRef, StoredDecision, StoredEvent, TurnRecord, TurnState,
        UserDecision,
    },
};

/// Longest tool output quoted in a summary, in characters.
const TOOL_OUTPUT_CHARS: usize = 300;
/// Longest tool input quoted in a summary, in characters.
const TOOL_INPUT_CHARS: usize = 200;
/// What a message costs on the wire besides its text (role, tags, lengths).
const MESSAGE_OVERHEAD: usize = 16;

/// What the model is sent about the conversation so far.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct History {
    /// User and assistant messages, oldest first, ending with the current
    /// user message.
    pub messages: Vec<runner::Message>,
    /// Payloads shown in earlier turns, for the prompt's manifest.
    pub payloads: Vec<HistoryPayload>,
    /// The files to send with user messages: the index of the message in
    /// `messages`, and its files (the current message's, and those of the
    /// latest earlier turns within the [`FileWindow`]).
    pub files: Vec<(usize, Vec<StoredAttachmentRef>)>,
    /// Where the bytes of the files sent are, by attachment id, as the
    /// store said when they were attached (`None`: in its chunks;
    /// `Some(key)`: that object), so the runner call reads them without
    /// asking again.
    pub locations: std::collections::HashMap<String, Option<String>>,
    /// What the work after the turn needs of its history (the earlier
    /// turns sent, a summary in place of older ones), with
    /// `turns.history_strategy = "summarize"`.
    pub after: super::after::Earlier,
}

/// Which turns' files go to the model again: the current message's and
/// those of the `turns` turns before it, newest first, while their sizes
/// add up to at most `max_bytes`; older files are named in their message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileWindow {
    /// Earlier turns whose files are sent again.
    pub turns: usize,
    /// The most bytes of files one request carries.
    pub max_bytes: u64,
}

impl FileWindow {
    /// No file is sent; every one is named.
    pub const NONE: FileWindow = FileWindow {
        turns: 0,
        max_bytes: 0,
    };
}

/// The line that names a file the model is not sent again.
fn named(file: &StoredAttachmentRef) -> String {
    format!(
        "\n[attached: {}, {}, {} bytes]",
        file.name, file.media_type, file.size_bytes
    )
}

impl History {
    /// The history of a new conversation: its first user message, and
    /// its `files`.
    pub fn first_message(text: &str, files: &[StoredAttachmentRef]) -> Self {
        Self {
            messages: vec![message(runner::Role::User, text.to_owned())],
            payloads: Vec::new(),
            files: if files.is_empty() {
                Vec::new()
            } else {
                vec![(0, files.to_vec())]
            },
            locations: Default::default(),
            after: Default::default(),
        }
    }
}

#[derive(Default)]
struct TurnParts {
    user: Option<String>,
    files: Vec<StoredAttachmentRef>,
    tools: Vec<String>,
    pending_calls: HashMap<String, (String, String)>,
    answer: Option<crate::store::AssistantMessage>,
}

/// `text` cut to `max` characters and an ellipsis.
fn clip(text: &str, max: usize) -> String {
    crate::text::truncate(text, max + 1)
}

fn message(role: runner::Role, text: String) -> runner::Message {
    runner::Message {
        role: role as i32,
        text,
        tool_calls: Vec::new(),
        tool_result: None,
        reasoning: Vec::new(),
        attachments: Vec::new(),
    }
}

fn assistant_text(parts: &TurnParts) -> String {
    let mut text = String::new();
    if !parts.tools.is_empty() {
        text.push_str("[Tools used in this turn]\n");
        for line in &parts.tools {
            text.push_str(line);
            text.push('\n');
        }
        text.push('\n');
    }
    let Some(answer) = &parts.answer else {
        text.push_str("[No answer was recorded for this message.]");
        return text;
    };
    let body = match &answer.structured {
        Some(structured) => match &structured.value {
            Some(value) => value.to_string(),
            None => structured.raw.clone(),
        },
        None => answer.text.clone(),
    };
    text.push_str(body.trim_end());
    let note = match answer.state {
        TurnState::Cancelled => {
            Some("[This answer was cancelled by the user before it was complete.]")
        }
        TurnState::Failed => {
            Some("[This answer was interrupted by an error before it was complete.]")
        }
        TurnState::Completed | TurnState::Running | TurnState::AwaitingInput => None,
    };
    if let Some(note) = note {
        if !body.trim().is_empty() {
            text.push_str("\n\n");
        }
        text.push_str(note);
    }
    text
}

/// A recorded decision, as the prompt's manifest shows it.
fn decision(stored: &StoredDecision) -> Decision {
    match stored.decision {
        UserDecision::Accepted => Decision::Accepted,
        UserDecision::Dismissed => Decision::Dismissed,
        UserDecision::Edited => Decision::Edited {
            applied_data: stored.applied_data.clone(),
            note: stored.note.clone(),
        },
    }
}

/// What a message costs against the budget.
fn cost(message: &runner::Message) -> usize {
    message.text.len() + MESSAGE_OVERHEAD
}

/// Rebuilds the history from the events of the last turns (oldest first)
/// and the conversation's turns (for their positions), within `max_bytes`
/// of message text: the newest earlier turns that fit, each whole. Every
/// earlier message's files are named in it ([`rebuild_with`] sends some).
pub fn rebuild(events: &[StoredEvent], turns: &[TurnRecord], max_bytes: usize) -> History {
    rebuild_with(events, turns, max_bytes, FileWindow::NONE)
}

/// [`rebuild`], the files within `window` to be sent with their messages
/// (`History::files`), the others named in them.
pub fn rebuild_with(
    events: &[StoredEvent],
    turns: &[TurnRecord],
    max_bytes: usize,
    window: FileWindow,
) -> History {
    let records: HashMap<&str, &TurnRecord> =
        turns.iter().map(|turn| (turn.id.as_str(), turn)).collect();
    let mut order: Vec<String> = Vec::new();
    let mut parts: HashMap<String, TurnParts> = HashMap::new();
    for event in events {
        if !parts.contains_key(&event.turn_id) {
            order.push(event.turn_id.clone());
        }
        let turn = parts.entry(event.turn_id.clone()).or_default();
        match &event.body {
            EventBody::UserMessage {
                text, attachments, ..
            } => {
                turn.user = Some(text.clone());
                turn.files.clone_from(attachments);
            }
            EventBody::Reasoning { .. } => {}
            EventBody::ToolCall {
                call_id,
                name,
                input,
            } => {
                turn.pending_calls.insert(
                    call_id.clone(),
                    (name.clone(), clip(&input.to_string(), TOOL_INPUT_CHARS)),
                );
            }
            EventBody::ToolResult {
                call_id,
                name,
                success,
                output,
                error,
                ..
            } => {
                let input = turn
                    .pending_calls
                    .remove(call_id)
                    .map(|(_, input)| input)
                    .unwrap_or_default();
                let result = if *success {
                    clip(output, TOOL_OUTPUT_CHARS)
                } else {
                    format!(
                        "failed: {}",
                        clip(
                            if error.is_empty() { output } else { error },
                            TOOL_OUTPUT_CHARS
                        )
                    )
                };
                turn.tools.push(format!("- {name}({input}) -> {result}"));
            }
            EventBody::AssistantMessage(answer) => turn.answer = Some(answer.clone()),
        }
    }
    let mut history = History::default();
    // Each turn's messages: a user message, then its answer (none for the
    // current turn, whose answer is what the model writes now).
    let mut exchanges: Vec<Vec<runner::Message>> = Vec::new();
    let mut exchange_files: Vec<&[StoredAttachmentRef]> = Vec::new();
    let last = order.len().saturating_sub(1);
    for (position, turn_id) in order.iter().enumerate() {
        let Some(turn) = parts.get(turn_id) else {
            continue;
        };
        let Some(user) = &turn.user else { continue };
        let mut exchange = vec![message(runner::Role::User, user.clone())];
        exchange_files.push(&turn.files);
        if position == last && turn.answer.is_none() {
            exchanges.push(exchange);
            break;
        }
        exchange.push(message(runner::Role::Assistant, assistant_text(turn)));
        exchanges.push(exchange);
        if let Some(payload) = turn
            .answer
            .as_ref()
            .and_then(|answer| answer.payload.as_ref())
        {
            let record = records.get(turn_id.as_str());
            history.payloads.push(HistoryPayload {
                turn_index: record.map_or(0, |turn| turn.turn_index),
                payload_type: payload.payload_type.clone(),
                data: payload.data.clone(),
                decision: record
                    .and_then(|turn| turn.payload_decision.as_ref())
                    .map(decision),
            });
        }
    }
    // Newest first: the last exchange (the current message) always, then
    // each earlier one while it fits.
    let mut used = 0usize;
    let mut first_kept = exchanges.len();
    for (index, exchange) in exchanges.iter().enumerate().rev() {
        let size: usize = exchange.iter().map(cost).sum();
        if index + 1 < exchanges.len() && used + size > max_bytes {
            break;
        }
        used += size;
        first_kept = index;
    }
    // Files: the newest exchanges' within the window, while they fit;
    // the others are named in their messages (a name's few bytes are left
    // out of the text budget above).
    let count = exchanges.len();
    let mut sent_bytes: u64 = 0;
    let mut sending = true;
    for index in (0..count).rev() {
        let files = exchange_files.get(index).copied().unwrap_or_default();
        if files.is_empty() {
            continue;
        }
        let size: u64 = files.iter().map(|file| file.size_bytes).sum();
        let within = index + window.turns + 1 >= count;
        sending = sending && within && sent_bytes.saturating_add(size) <= window.max_bytes;
        if sending {
            sent_bytes += size;
            history.files.push((index, files.to_vec()));
        } else if let Some(user) = exchanges[index].first_mut() {
            for file in files {
                user.text.push_str(&named(file));
            }
        }
    }
    // Message positions once the exchanges before `first_kept` are gone.
    let mut offsets = Vec::with_capacity(count);
    let mut at = 0;
    for (index, exchange) in exchanges.iter().enumerate() {
        offsets.push(at);
        if index >= first_kept {
            at += exchange.len();
        }
    }
    history.files = history
        .files
        .drain(..)
        .filter(|(index, _)| *index >= first_kept)
        .map(|(index, files)| (offsets[index], files))
        .collect();
    history.messages = exchanges.drain(first_kept..).flatten().collect();
    history
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::store::{AssistantMessage, StoredPage, StoredPayload, model::StoredStructured};

    fn event(seq: i64, turn: &str, body: EventBody) -> StoredEvent {
        StoredEvent {
            seq,
            turn_id: turn.into(),
            created_at: 0,
            body,
        }
    }

    fn user(text: &str) -> EventBody {
        EventBody::UserMessage {
            text: text.into(),
            page: StoredPage::default(),
            response_schema: None,
            request_id: None,
            action: None,
            attachments: Vec::new(),
        }
    }

    fn answer(text: &str, state: TurnState) -> AssistantMessage {
        AssistantMessage {
            text: text.into(),
            payload: None,
            suggested_values: vec![],
            suggested_actions: vec![],
            structured: None,
            usage: None,
            state,
            stop_reason: String::new(),
            error: None,
        }
    }

    fn turn(id: &str, index: u32) -> TurnRecord {
        TurnRecord {
            id: id.into(),
            conversation_id: "c".into(),
            turn_index: index,
            state: TurnState::Completed,
            outcome: None,
            replica: None,
            retryable: false,
            last_event_seq: 0,
            payload_decision: None,
            feedback: None,
            parent_turn_id: None,
        }
    }

    fn texts(history: &History) -> Vec<(i32, String)> {
        history
            .messages
            .iter()
            .map(|m| (m.role, m.text.clone()))
            .collect()
    }

    /// A user message with a file of `size` bytes named `name`.
    fn with_file(text: &str, name: &str, size: u64) -> EventBody {
        let EventBody::UserMessage {
            text,
            page,
            response_schema,
            request_id,
            action,
            ..
        } = user(text)
        else {
            unreachable!("a user message");
        };
        EventBody::UserMessage {
            text,
            page,
            response_schema,
            request_id,
            action,
            attachments: vec![StoredAttachmentRef {
                id: format!("att_{name}"),
                name: name.into(),
                media_type: "image/png".into(),
                size_bytes: size,
                sha256: String::new(),
                created_at: 0,
            }],
        }
    }

    #[test]
    fn the_latest_turns_files_are_sent_again_within_the_window_and_older_ones_named() {
        let done = || EventBody::AssistantMessage(answer("ok", TurnState::Completed));
        let events = vec![
            event(1, "t1", with_file("one", "a.png", 100)),
            event(2, "t1", done()),
            event(3, "t2", with_file("two", "b.png", 100)),
            event(4, "t2", done()),
            event(5, "t3", with_file("three", "c.png", 100)),
            event(6, "t3", done()),
            event(7, "t4", with_file("four", "d.png", 100)),
        ];
        let window = |turns, max_bytes| FileWindow { turns, max_bytes };
        let names = |history: &History| -> Vec<(usize, String)> {
            history
                .files
                .iter()
                .flat_map(|(index, files)| files.iter().map(move |f| (*index, f.name.clone())))
                .collect()
        };
        // The new message's and the two turns' before it; the first named.
        let history = rebuild_with(&events, &[], usize::MAX, window(2, 1_000));
        let mut sent = names(&history);
        sent.sort();
        assert_eq!(
            sent,
            [
                (2, "b.png".into()),
                (4, "c.png".into()),
                (6, "d.png".into())
            ]
        );
        assert_eq!(
            history.messages[0].text,
            "one\n[attached: a.png, image/png, 100 bytes]"
        );
        assert_eq!(history.messages[6].text, "four");
        // Within 250 bytes: the new message's and the turn's before it.
        let history = rebuild_with(&events, &[], usize::MAX, window(2, 250));
        let mut sent = names(&history);
        sent.sort();
        assert_eq!(sent, [(4, "c.png".into()), (6, "d.png".into())]);
        assert!(
            history.messages[2]
                .text
                .ends_with("[attached: b.png, image/png, 100 bytes]")
        );
        // Positions follow the turns the text budget drops.
        let history = rebuild_with(&events, &[], 20, window(2, 1_000));
        assert_eq!(history.messages.len(), 1);
        assert_eq!(names(&history), [(0, "d.png".to_owned())]);
    }

    #[test]
    fn turns_alternate_and_end_with_the_current_message() {
        let mut first = answer("Here is a proposal.", TurnState::Completed);
        first.payload = Some(StoredPayload {
            payload_type: "schema_proposal".into(),
            data: json!({"reasoning": "r"}),
            wire: None,
        });
        let events = vec![
            event(1, "t1", user("make a table")),
            event(
                2,
                "t1",
                EventBody::ToolCall {
                    call_id: "c1".into(),
                    name: "list_tables".into(),
                    input: json!({}),
                },
            ),
            event(
                3,
                "t1",
                EventBody::ToolResult {
                    call_id: "c1".into(),
                    name: "list_tables".into(),
                    success: true,
                    duration_ms: 3,
                    output: "2 tables".into(),
                    payload: None,
                    error: String::new(),
                },
            ),
            event(4, "t1", EventBody::AssistantMessage(first)),
            event(5, "t2", user("and now?")),
        ];
        let mut decided = turn("t1", 4);
        decided.payload_decision = Some(StoredDecision {
            decision: UserDecision::Dismissed,
            applied_data: None,
            note: String::new(),
            decided_at: 1,
        });
        let history = rebuild(&events, &[decided, turn("t2", 5)], usize::MAX);
        let user_role = runner::Role::User as i32;
        let assistant_role = runner::Role::Assistant as i32;
        assert_eq!(
            texts(&history),
            vec![
                (user_role, "make a table".into()),
                (
                    assistant_role,
                    "[Tools used in this turn]\n- list_tables({}) -> 2 tables\n\nHere is a proposal.".into()
                ),
                (user_role, "and now?".into()),
            ]
        );
        assert_eq!(history.payloads.len(), 1);
        assert_eq!(history.payloads[0].turn_index, 4);
        assert_eq!(history.payloads[0].payload_type, "schema_proposal");
        assert_eq!(history.payloads[0].decision, Some(Decision::Dismissed));
    }

    #[test]
    fn the_newest_turns_that_fit_the_budget_are_kept_whole_with_their_tool_calls() {
        let mut events = Vec::new();
        let mut seq = 0;
        let mut push = |turn: &str, body: EventBody| {
            seq += 1;
            events.push(event(seq, turn, body));
        };
        for number in 1..=4 {
            let turn = format!("t{number}");
            push(&turn, user(&format!("question {number}")));
            push(
                &turn,
                EventBody::ToolCall {
                    call_id: format!("c{number}"),
                    name: "lookup".into(),
                    input: json!({"n": number}),
                },
            );
            push(
                &turn,
                EventBody::ToolResult {
                    call_id: format!("c{number}"),
                    name: "lookup".into(),
                    success: true,
                    duration_ms: 1,
                    output: format!("found {number}"),
                    payload: None,
                    error: String::new(),
                },
            );
            push(
                &turn,
                EventBody::AssistantMessage(answer(&"x".repeat(1000), TurnState::Completed)),
            );
        }
        push("t5", user("now"));
        let whole = rebuild(&events, &[], usize::MAX);
        assert_eq!(whole.messages.len(), 9);
        // One earlier turn is about 1 100 bytes: a budget of 2 500 keeps two.
        let cut = rebuild(&events, &[], 2500);
        let texts: Vec<&str> = cut.messages.iter().map(|m| m.text.as_str()).collect();
        assert_eq!(texts.len(), 5, "{texts:?}");
        assert_eq!(texts[0], "question 3");
        assert!(
            texts[1].contains("lookup({\"n\":3}) -> found 3")
                && texts[1].ends_with(&"x".repeat(1000)),
            "the tool call, its result and the answer stay together: {}",
            texts[1]
        );
        assert_eq!(texts[2], "question 4");
        assert_eq!(texts[4], "now");
        assert_eq!(&cut.messages[..], &whole.messages[4..]);
        let roles: Vec<i32> = cut.messages.iter().map(|m| m.role).collect();
        assert_eq!(roles, vec![1, 2, 1, 2, 1]);
        // A budget smaller than any earlier turn still sends the current
        // message, and one smaller than that too.
        for budget in [500, 0] {
            let alone = rebuild(&events, &[], budget);
            assert_eq!(texts_of(&alone), vec!["now"], "budget {budget}");
        }
        let total: usize = cut.messages.iter().map(cost).sum();
        assert!(total <= 2500, "{total}");
    }

    fn texts_of(history: &History) -> Vec<&str> {
        history.messages.iter().map(|m| m.text.as_str()).collect()
    }

    #[test]
    fn a_new_conversation_is_what_its_first_message_rebuilds_to() {
        let rebuilt = rebuild(
            &[event(1, "t1", user("hello"))],
            &[turn("t1", 0)],
            usize::MAX,
        );
        assert_eq!(History::first_message("hello", &[]), rebuilt);
    }

    #[test]
    fn structured_answers_come_back_as_their_json() {
        let mut structured = answer("", TurnState::Completed);
        structured.structured = Some(StoredStructured {
            value: Some(json!({"name": "Ada"})),
            raw: "{\"name\": \"Ada\"}".into(),
            valid: true,
            error: String::new(),
        });
        let events = vec![
            event(1, "t1", user("extract")),
            event(2, "t1", EventBody::AssistantMessage(structured)),
            event(3, "t2", user("change the name")),
        ];
        let history = rebuild(&events, &[], usize::MAX);
        assert_eq!(history.messages[1].text, "{\"name\":\"Ada\"}");
    }

    #[test]
    fn interrupted_and_missing_answers_keep_roles_alternating() {
        let events = vec![
            event(1, "t1", user("first")),
            event(
                2,
                "t1",
                EventBody::AssistantMessage(answer("Part of it", TurnState::Cancelled)),
            ),
            event(3, "t2", user("second")),
            // t2 has no answer (the gateway stopped before storing it).
            event(4, "t3", user("third")),
            event(
                5,
                "t3",
                EventBody::AssistantMessage(answer("", TurnState::Failed)),
            ),
            event(6, "t4", user("now")),
        ];
        let history = rebuild(&events, &[], usize::MAX);
        let roles: Vec<i32> = history.messages.iter().map(|m| m.role).collect();
        assert_eq!(roles, vec![1, 2, 1, 2, 1, 2, 1]);
        assert!(
            history.messages[1]
                .text
                .starts_with("Part of it\n\n[This answer was cancelled")
        );
        assert_eq!(
            history.messages[3].text,
            "[No answer was recorded for this message.]"
        );
        assert!(
            history.messages[5]
                .text
                .starts_with("[This answer was interrupted")
        );
        assert_eq!(history.messages[6].text, "now");
    }
}
