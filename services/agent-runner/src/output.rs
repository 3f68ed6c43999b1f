//! How the model's words reach the client during a turn.
//!
//! [`TurnOutput`] owns the event sink and decides what a model text delta
//! becomes: a `text_delta` (normal answers), a `structured_delta` (when an
//! output schema is set) or nothing yet (when text-embedded tool calls are
//! recognised, the call's text is held until it can be cleaned). It keeps
//! `Finished.text` equal to the concatenation of the text deltas by inserting
//! a `"\n\n"` delta between two model calls' texts when both are non-empty,
//! and it records whether the current call has emitted anything, which is
//! what decides whether a failure may still be retried. With
//! `mid_answer_failover` a call that emitted may run again:
//! [`TurnOutput::reset_call`] then forgets its text. A continuation whose
//! earlier runs showed text ([`shows_text`]) separates its first text from
//! theirs the same way ([`TurnOutput::after_earlier_text`]).

use crate::{
    events::{Closed, EventKind, EventSink},
    parsing::{TextCall, TextCallParser, TextItem, ToolProfile},
    provider::Usage,
};

/// What a model text delta becomes.
#[derive(Debug, Clone)]
pub enum TextMode {
    /// Streamed as `text_delta`.
    Stream,
    /// Streamed as `structured_delta`.
    Structured,
    /// Streamed as `text_delta` with tool calls naming these tools removed.
    TextCalls(ToolProfile),
}

/// The event sink plus the per-call text state.
#[derive(Debug)]
pub struct TurnOutput {
    sink: EventSink,
    mode: TextMode,
    call_text: String,
    call_emitted: bool,
    /// The current call's tool-call parser (`TextCalls` mode).
    parser: Option<TextCallParser>,
    /// Tool calls found in the current call's text.
    found: Vec<TextCall>,
    /// Whether the current call has sent visible text (the separator is due once).
    visible_in_call: bool,
    /// The length of the turn's text when the current call began.
    call_start: usize,
    /// The usage the current attempt reported, if any (kept for a failed
    /// attempt, whose usage still counts).
    attempt_usage: Option<Usage>,
    /// Whether the turn's runs before this one (a continuation's) showed
    /// text.
    earlier_text: bool,
    /// The most earlier turns a model call of the turn left out of its
    /// history to fit its model's window ([`crate::context`]).
    turns_left_out: u32,
}

impl TurnOutput {
    /// Output to `sink` in `mode`.
    pub fn new(sink: EventSink, mode: TextMode) -> Self {
        Self {
            sink,
            mode,
            call_text: String::new(),
            call_emitted: false,
            parser: None,
            found: Vec::new(),
            visible_in_call: false,
            call_start: 0,
            attempt_usage: None,
            earlier_text: false,
            turns_left_out: 0,
        }
    }

    /// The turn's earlier runs (before its pause) showed text: this run's
    /// first text follows it after a blank line.
    pub fn after_earlier_text(&mut self) {
        self.earlier_text = true;
    }

    /// Notes that a model call left `count` earlier turns out of its
    /// history.
    pub fn left_out(&mut self, count: u32) {
        self.turns_left_out = self.turns_left_out.max(count);
    }

    /// The most earlier turns a model call of the turn left out.
    pub fn turns_left_out(&self) -> u32 {
        self.turns_left_out
    }

    /// What model text becomes.
    pub fn mode(&self) -> &TextMode {
        &self.mode
    }

    /// Sends any other event.
    pub async fn emit(&mut self, kind: EventKind) -> Result<(), Closed> {
        self.sink.emit(kind).await
    }

    /// Whether the client allows the tool calls `call_ids` of model call
    /// `iteration` to start ([`EventSink::permit_dispatch`]).
    pub async fn permit_dispatch(
        &mut self,
        iteration: u32,
        call_ids: Vec<String>,
    ) -> Result<bool, Closed> {
        self.sink.permit_dispatch(iteration, call_ids).await
    }

    /// Starts a model call (or a new attempt of one that emitted nothing).
    pub fn begin_call(&mut self) {
        self.call_text.clear();
        self.call_emitted = false;
        self.visible_in_call = false;
        self.call_start = self.sink.text().len();
        self.attempt_usage = None;
        self.found.clear();
        self.parser = match &self.mode {
            TextMode::TextCalls(profile) => Some(TextCallParser::new(profile)),
            _ => None,
        };
    }

    /// Whether the current call has sent anything to the client.
    pub fn call_emitted(&self) -> bool {
        self.call_emitted
    }

    /// The current call failed midway and runs again: forgets the text it
    /// sent (the client got a `StepReset`), so the turn's text is what it
    /// was when the call began. Call [`Self::begin_call`] before the next
    /// attempt.
    pub fn reset_call(&mut self) {
        self.sink.truncate_text(self.call_start);
    }

    /// Notes the usage the current attempt reported.
    pub fn attempt_usage(&mut self, usage: Usage) {
        self.attempt_usage = Some(usage);
    }

    /// The usage the current attempt reported, if any.
    pub fn reported_usage(&self) -> Option<Usage> {
        self.attempt_usage
    }

    /// A piece of the model's answer text.
    pub async fn model_text(&mut self, delta: String) -> Result<(), Closed> {
        if delta.is_empty() {
            return Ok(());
        }
        self.call_text.push_str(&delta);
        match self.mode {
            TextMode::Stream => self.visible_text(delta).await,
            TextMode::Structured => {
                self.call_emitted = true;
                self.sink.emit(EventKind::StructuredDelta(delta)).await
            }
            TextMode::TextCalls(_) => {
                let items = self
                    .parser
                    .as_mut()
                    .map(|parser| parser.push(&delta))
                    .unwrap_or_default();
                self.text_items(items).await
            }
        }
    }

    /// Ends the current call's text: flushes what the tool-call parser held
    /// back and returns the tool calls found in the text.
    pub async fn end_call_text(&mut self) -> Result<Vec<TextCall>, Closed> {
        if let Some(mut parser) = self.parser.take() {
            let items = parser.end();
            self.text_items(items).await?;
        }
        Ok(std::mem::take(&mut self.found))
    }

    async fn text_items(&mut self, items: Vec<TextItem>) -> Result<(), Closed> {
        for item in items {
            match item {
                TextItem::Text(text) => self.visible_text(text).await?,
                TextItem::Call(call) => self.found.push(call),
            }
        }
        Ok(())
    }

    /// A piece of the model's reasoning.
    pub async fn model_reasoning(&mut self, delta: String) -> Result<(), Closed> {
        if delta.is_empty() {
            return Ok(());
        }
        self.call_emitted = true;
        self.sink.emit(EventKind::ReasoningDelta(delta)).await
    }

    /// The current call's text as the model wrote it.
    pub fn call_text(&self) -> &str {
        &self.call_text
    }

    /// Sends answer text the client sees, separating it from an earlier
    /// call's text with a blank line.
    async fn visible_text(&mut self, delta: String) -> Result<(), Closed> {
        if delta.is_empty() {
            return Ok(());
        }
        self.call_emitted = true;
        if !self.visible_in_call && (self.earlier_text || !self.sink.text().is_empty()) {
            self.sink
                .emit(EventKind::TextDelta("\n\n".to_owned()))
                .await?;
        }
        self.visible_in_call = true;
        self.sink.emit(EventKind::TextDelta(delta)).await
    }

    /// Everything sent as text deltas so far.
    pub fn text(&self) -> &str {
        self.sink.text()
    }
}

/// Whether a model text `text` showed the user anything in `mode`
/// (structured answers and tool calls written into the text do not).
pub fn shows_text(mode: &TextMode, text: &str) -> bool {
    match mode {
        TextMode::Stream => !text.is_empty(),
        TextMode::Structured => false,
        TextMode::TextCalls(profile) => {
            let mut parser = TextCallParser::new(profile);
            let mut items = parser.push(text);
            items.extend(parser.end());
            items
                .iter()
                .any(|item| matches!(item, TextItem::Text(text) if !text.is_empty()))
        }
    }
}

#[cfg(test)]
mod tests {
    use tokio::sync::mpsc;

    use super::*;
    use crate::events::Event;

    fn drain(rx: &mut mpsc::Receiver<Box<Event>>) -> Vec<EventKind> {
        let mut out = Vec::new();
        while let Ok(event) = rx.try_recv() {
            out.push(event.kind);
        }
        out
    }

    #[tokio::test]
    async fn separates_two_calls_texts_with_a_blank_line() {
        let (tx, mut rx) = mpsc::channel(16);
        let mut out = TurnOutput::new(EventSink::new(tx), TextMode::Stream);
        out.begin_call();
        out.model_text("Checking.".into())
            .await
            .expect("should succeed");
        out.begin_call();
        out.model_reasoning("hm".into())
            .await
            .expect("should succeed");
        out.model_text("Done".into()).await.expect("should succeed");
        out.model_text(" now".into()).await.expect("should succeed");
        assert_eq!(out.text(), "Checking.\n\nDone now");
        let texts: String = drain(&mut rx)
            .into_iter()
            .filter_map(|k| match k {
                EventKind::TextDelta(t) => Some(t),
                _ => None,
            })
            .collect();
        assert_eq!(texts, out.text());
    }

    #[tokio::test]
    async fn a_reset_call_leaves_the_turns_text_as_it_was() {
        let (tx, _rx) = mpsc::channel(16);
        let mut out = TurnOutput::new(EventSink::new(tx), TextMode::Stream);
        out.begin_call();
        out.model_text("Checking.".into()).await.expect("sent");
        out.begin_call();
        out.model_text("Half an ans".into()).await.expect("sent");
        out.reset_call();
        assert_eq!(out.text(), "Checking.");
        out.begin_call();
        out.model_text("Done.".into()).await.expect("sent");
        assert_eq!(out.text(), "Checking.\n\nDone.");
    }

    #[tokio::test]
    async fn no_separator_after_a_call_without_text() {
        let (tx, _rx) = mpsc::channel(16);
        let mut out = TurnOutput::new(EventSink::new(tx), TextMode::Stream);
        out.begin_call();
        assert!(!out.call_emitted());
        out.begin_call();
        out.model_text("Only".into()).await.expect("should succeed");
        assert!(out.call_emitted());
        assert_eq!(out.text(), "Only");
    }

    #[tokio::test]
    async fn structured_and_held_text_are_not_answer_text() {
        let (tx, mut rx) = mpsc::channel(16);
        let mut out = TurnOutput::new(EventSink::new(tx), TextMode::Structured);
        out.begin_call();
        out.model_text("{\"a\":".into())
            .await
            .expect("should succeed");
        assert_eq!(out.text(), "");
        assert_eq!(out.call_text(), "{\"a\":");
        assert_eq!(
            drain(&mut rx),
            vec![EventKind::StructuredDelta("{\"a\":".into())]
        );
    }

    #[tokio::test]
    async fn a_continuation_follows_the_text_shown_before_its_pause() {
        let (tx, _rx) = mpsc::channel(16);
        let mut out = TurnOutput::new(EventSink::new(tx), TextMode::Stream);
        out.after_earlier_text();
        out.begin_call();
        out.model_text("Done.".into()).await.expect("sent");
        assert_eq!(out.text(), "\n\nDone.");

        let profile = ToolProfile::new(&["calculator".to_owned()]);
        let call = "```json\n{\"type\": \"calculator\", \"parameters\": {}}\n```";
        let calls = TextMode::TextCalls(profile);
        assert!(!shows_text(&calls, call), "a call alone shows nothing");
        assert!(shows_text(&calls, &format!("Adding.\n{call}")));
        assert!(shows_text(&TextMode::Stream, "x"));
        assert!(!shows_text(&TextMode::Stream, ""));
        assert!(!shows_text(&TextMode::Structured, "{}"));
    }

    #[tokio::test]
    async fn text_calls_are_removed_and_returned() {
        let (tx, _rx) = mpsc::channel(64);
        let profile = ToolProfile::new(&["calculator".to_owned()]);
        let mut out = TurnOutput::new(EventSink::new(tx), TextMode::TextCalls(profile));
        out.begin_call();
        let text = "Computing.\n```json\n{\"type\": \"calculator\", \"parameters\": {\"expression\": \"1+1\"}}\n```\n";
        out.model_text(text.into()).await.expect("should succeed");
        let calls = out.end_call_text().await.expect("should succeed");
        assert_eq!(calls.len(), 1);
        assert!(!out.text().contains("calculator"), "{}", out.text());
        assert!(out.text().starts_with("Computing."));
    }
}
