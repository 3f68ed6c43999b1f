//! Cleaning the model's text while it streams.
//!
//! Text deltas go through the parser sidecar's `ParseStream`, so no marker
//! or its JSON ever reaches the client. When the sidecar cannot be reached
//! (connect error), its stream breaks or it stops answering mid-turn, the
//! parser library takes over in-process: it re-reads the raw text received
//! so far and continues exactly where the sidecar's output stopped (both run
//! the same algorithm, and for any split the concatenated deltas equal the
//! final message), and the turn's `complete` carries a `PARSER_FALLBACK`
//! diagnostic.
//!
//! The sidecar answers a delta whenever it has processed it, so text written
//! just before a tool call could reach the client after the tool's events.
//! [`TextCleaner::sync`] sends a checkpoint and waits for its answer: every
//! output for the text before it has then arrived. The relay syncs before it
//! passes on an event that came after some text.
//!
//! Besides the text, the cleaner hands out what the client is shown of the
//! answer's elements while they are written ([`super::partials`]): payload
//! cards growing, and the suggested values and actions once their list
//! closed. Everything ready at one flush ([`TextCleaner::take_ready`],
//! [`TextCleaner::next`]) travels as one text delta followed by the
//! elements in order, with at most one `payload_partial` per payload (the
//! latest). The in-process parser runs with partial payloads on too; when
//! it takes over it re-reads the text, and what the client was already
//! shown is not sent again.
//!
//! Plain text does not wait for the sidecar. While everything the sidecar
//! handed out continued the raw text exactly and it holds back nothing but
//! trailing whitespace, a delta that cannot change anything but the text
//! ([`Profile::pass_through`]: no trigger byte, no end that could begin a
//! marker) is handed out at once, exactly as the sidecar would hand it
//! out, and sent to the sidecar later, with the next delta that needs it
//! (or at the end, or once [`UNSENT_FLUSH`] bytes are waiting); its
//! repetition of that text is skipped like a restarted parser's. A plain
//! answer then costs the sidecar one request at its end instead of a round
//! trip per delta, and its first token waits for no round trip. The first
//! element (or any text that does not continue the raw text) ends this
//! for the turn.
//!
//! A `step_reset` ([`TextCleaner::reset_step`]) discards the model text of
//! the step since [`TextCleaner::mark_step`]: the parser starts again on
//! the text before it (a new `ParseStream`, or the library), and what it
//! repeats is not sent again.

use std::{collections::VecDeque, sync::Arc, time::Duration};

use parley_parse::{DEFAULT_MAX_BYTES, Limits, Profile, ProfileCache, StreamParser};
use parley_proto::{
    gateway::v1::chat_event::Event,
    parser::v1::{
        ParseProfile, ParseResponse, ParseStreamRequest, ParseStreamResponse, PayloadPartial,
        parse_stream_request::Input, parse_stream_response::Output,
        payload_parser_client::PayloadParserClient,
    },
};
use tokio::sync::mpsc;

use super::{
    parse::{local_profile, parse_locally, unparsed},
    partials::Shown,
};
use crate::clients::{Parsing, Traced, Upstreams};

/// Requests buffered towards the sidecar.
const REQUEST_BUFFER: usize = 64;

/// Text handed out without the sidecar is sent to it once this much waits
/// (else with the next delta that needs the sidecar, or at the end): the
/// sidecar keeps up with a long plain answer instead of reading it whole
/// at its end.
const UNSENT_FLUSH: usize = 8 * 1024;

/// An open `ParseStream` call. Requests queue boxed: the channel keeps its
/// slots in blocks of 32 for the turn's life, a box is 8 bytes.
struct Remote {
    tx: mpsc::Sender<Box<ParseStreamRequest>>,
    rx: tonic::Streaming<ParseStreamResponse>,
}

enum Mode {
    /// The sidecar's stream is not open yet: every delta so far passed it
    /// (the raw text is all still to be sent). It opens with the first delta that needs
    /// it; a turn whose whole answer passed it is parsed by one `Parse` at
    /// the end.
    Unopened,
    /// The sidecar cleans.
    Remote(Box<Remote>),
    /// The library cleans, in-process.
    Local(Box<StreamParser>),
    /// Nothing more is cleaned mid-stream (the local parser refused the
    /// text); the final parse still decides the message.
    Stopped,
}

/// Something ready for the client, before [`Shown`] decides what of it
/// is new.
#[derive(Debug)]
enum Ready {
    Text(String),
    Partial(PayloadPartial),
    Element(Box<Output>),
}

/// Which list a suggestions output is about: `Some(true)` for the values,
/// `Some(false)` for the actions, `None` for anything else.
fn values_kind(output: &Output) -> Option<bool> {
    match output {
        Output::SuggestedValues(_) | Output::SuggestedValuesPartial(_) => Some(true),
        Output::SuggestedActions(_) | Output::SuggestedActionsPartial(_) => Some(false),
        _ => None,
    }
}

/// Whether a suggestions output is a list so far (not the whole list).
fn is_partial_list(output: &Output) -> bool {
    matches!(
        output,
        Output::SuggestedValuesPartial(_) | Output::SuggestedActionsPartial(_)
    )
}

/// Where a step's model text starts.
#[derive(Debug, Clone, Copy, Default)]
struct StepMark {
    raw: usize,
    emitted: usize,
}

/// The profile that decides which deltas pass the sidecar
/// ([`TextCleaner::pass_through`]), compiled at the turn's first delta.
enum Plain {
    Unresolved,
    Ready(Arc<Profile>),
    /// The library refused the profile: every delta goes to the sidecar.
    Off,
}

/// The streaming cleaner of one turn.
pub struct TextCleaner {
    profile: ParseProfile,
    /// Where the in-process parser finds the profile compiled.
    compiled: Arc<ProfileCache>,
    /// The sidecar, for a `ParseStream` opened again after a step reset.
    parser: Option<PayloadParserClient<Traced>>,
    mode: Mode,
    /// Longest wait for the sidecar: opening the stream, a checkpoint, the
    /// final parse. Past it the library takes over.
    wait: Duration,
    /// Every raw delta received.
    raw: String,
    /// Every cleaned delta handed out.
    emitted: String,
    /// Cleaned text and elements ready to hand out.
    ready: VecDeque<Ready>,
    /// While a restarted parser repeats the cleaned text already handed
    /// out: how much of `emitted` it has repeated. Equal to `emitted.len()`
    /// otherwise.
    repeated: usize,
    /// The restarted parser's text does not continue what was handed out:
    /// nothing more is handed out, the final parse decides.
    diverged: bool,
    /// Every text handed out continued `raw` exactly and nothing else came
    /// (`emitted` is a prefix of `raw`): plain deltas may pass the sidecar.
    mirrored: bool,
    /// The compiled profile that says which deltas pass the sidecar.
    plain: Plain,
    /// Raw text handed out without the sidecar and not yet sent to its open
    /// stream (before the stream opens, all of `raw` is).
    unsent: String,
    /// What the client was shown of the elements.
    shown: Shown,
    /// Where the current step's text starts.
    step: StepMark,
    /// Whether text went to the sidecar since its last answered checkpoint.
    unsynced: bool,
    /// The last checkpoint sent.
    checkpoint_sent: u64,
    /// The last checkpoint the sidecar answered.
    checkpoint_answered: u64,
    /// The sidecar's final answer, when it sent one.
    final_response: Option<ParseResponse>,
    /// Why the library took over, when it did.
    fallback: Option<String>,
    /// The library cleans by configuration (`upstream.parsing =
    /// "in_process"`), not as a fallback.
    in_process: bool,
}

impl std::fmt::Debug for TextCleaner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TextCleaner")
            .field("fallback", &self.fallback)
            .finish_non_exhaustive()
    }
}

impl TextCleaner {
    fn new(profile: ParseProfile, compiled: Arc<ProfileCache>, wait: Duration) -> Self {
        Self {
            profile,
            compiled,
            parser: None,
            mode: Mode::Stopped,
            wait,
            raw: String::new(),
            emitted: String::new(),
            ready: VecDeque::new(),
            repeated: 0,
            diverged: false,
            mirrored: true,
            plain: Plain::Unresolved,
            unsent: String::new(),
            shown: Shown::default(),
            step: StepMark::default(),
            unsynced: false,
            checkpoint_sent: 0,
            checkpoint_answered: 0,
            final_response: None,
            fallback: None,
            in_process: false,
        }
    }

    /// The turn's cleaner, as `upstream.parsing` says: a `ParseStream` on
    /// the sidecar (the library when that fails), or the library.
    pub async fn open(upstreams: &Upstreams, profile: ParseProfile) -> Self {
        let compiled = upstreams.compiled_profiles.clone();
        if upstreams.parsing == Parsing::InProcess {
            return Self::in_process(profile, compiled);
        }
        let mut cleaner = Self::new(profile, compiled, upstreams.parse_timeout);
        cleaner.parser = Some(upstreams.parser.clone());
        // Opened by the first delta that needs it.
        cleaner.mode = Mode::Unopened;
        cleaner
    }

    /// A cleaner that parses in-process by choice: no sidecar, and no
    /// `PARSER_FALLBACK` diagnostic.
    pub fn in_process(profile: ParseProfile, compiled: Arc<ProfileCache>) -> Self {
        let mut cleaner = Self::new(profile, compiled, Duration::ZERO);
        cleaner.in_process = true;
        cleaner.restart_local();
        cleaner
    }

    /// An in-process cleaner (the sidecar is not even tried).
    pub fn local(profile: ParseProfile, compiled: Arc<ProfileCache>, reason: &str) -> Self {
        let mut cleaner = Self::new(profile, compiled, Duration::ZERO);
        cleaner.switch_to_local(reason.to_owned());
        cleaner
    }

    /// Why the library took over, when it did.
    pub fn fallback_reason(&self) -> Option<&str> {
        self.fallback.as_deref()
    }

    /// Hands out cleaned text; while a restarted parser repeats what was
    /// already handed out, the repeated part is skipped.
    fn hand_out(&mut self, text: String) {
        if text.is_empty() || self.diverged {
            return;
        }
        let expected = &self.emitted[self.repeated..];
        let text = if expected.is_empty() {
            text
        } else if expected.starts_with(text.as_str()) {
            self.repeated += text.len();
            return;
        } else if let Some(rest) = text.strip_prefix(expected) {
            let rest = rest.to_owned();
            self.repeated = self.emitted.len();
            rest
        } else {
            tracing::warn!(
                "the restarted parser's text diverged from what was sent; final parse decides"
            );
            self.diverged = true;
            return;
        };
        if !text.is_empty() {
            self.mirrored &= self
                .raw
                .get(self.emitted.len()..)
                .is_some_and(|rest| rest.starts_with(text.as_str()));
            self.emitted.push_str(&text);
            self.repeated = self.emitted.len();
            self.ready.push_back(Ready::Text(text));
        }
    }

    /// What the sidecar would hand out for `delta` (already appended to
    /// `raw`), when it is plain text and the sidecar holds back nothing but
    /// trailing whitespace ([`Profile::pass_through`]); `None` sends it.
    fn pass_through(&mut self, delta: &str) -> Option<String> {
        if !self.mirrored || self.diverged || self.raw.len() > DEFAULT_MAX_BYTES {
            return None;
        }
        let before = self.raw.len() - delta.len();
        let held = self.raw.get(self.emitted.len()..before)?;
        if matches!(self.plain, Plain::Unresolved) {
            self.plain = match local_profile(&self.profile, &self.compiled) {
                Ok(profile) => Plain::Ready(profile),
                Err(_) => Plain::Off,
            };
        }
        let Plain::Ready(profile) = &self.plain else {
            return None;
        };
        profile.pass_through(held, delta)
    }

    fn hand_out_items(&mut self, items: Vec<parley_parse::StreamItem>) {
        use parley_parse::StreamItem;
        for item in items {
            // Not converted for nothing: `take_output` drops them (they
            // arrive again in the final result).
            if matches!(item, StreamItem::CustomPayload(_) | StreamItem::ToolCall(_)) {
                continue;
            }
            if let Some(output) = item.into_proto().output {
                self.take_output(output);
            }
        }
    }

    /// Re-reads the raw text in-process and continues after what was
    /// already handed out.
    fn switch_to_local(&mut self, reason: String) {
        tracing::warn!(%reason, "payload-parser unavailable, parsing in-process");
        self.fallback.get_or_insert(reason);
        self.restart_local();
    }

    /// A new in-process parser, fed the raw text: what it repeats of the
    /// output already handed out is skipped.
    fn restart_local(&mut self) {
        self.mode = Mode::Stopped;
        // The library reads the whole raw text.
        self.unsent.clear();
        self.repeated = 0;
        self.checkpoint_sent = 0;
        self.checkpoint_answered = 0;
        self.unsynced = false;
        let Ok(profile) = local_profile(&self.profile, &self.compiled) else {
            return;
        };
        let mut parser = StreamParser::new(profile, Limits::default()).with_partial_payloads();
        match parser.push(&self.raw) {
            Ok(items) => self.hand_out_items(items),
            Err(error) => {
                tracing::warn!(%error, "in-process parser refused the text");
                return;
            }
        }
        if self.diverged {
            return;
        }
        self.mode = Mode::Local(Box::new(parser));
    }

    /// One output of the parser (sidecar or library).
    fn take_output(&mut self, output: Output) {
        if !matches!(
            output,
            Output::Text(_) | Output::Final(_) | Output::Checkpoint(_)
        ) {
            self.mirrored = false;
        }
        match output {
            Output::Text(text) => self.hand_out(text),
            Output::Final(response) => self.final_response = Some(*response),
            Output::Checkpoint(mark) => {
                self.checkpoint_answered = self.checkpoint_answered.max(mark);
            }
            Output::Partial(partial) => self.ready.push_back(Ready::Partial(partial)),
            Output::Diagnostic(diagnostic) => self.shown.diagnostic(diagnostic),
            element @ (Output::SuggestedValues(_)
            | Output::SuggestedActions(_)
            | Output::SuggestedValuesPartial(_)
            | Output::SuggestedActionsPartial(_)) => {
                self.ready.push_back(Ready::Element(Box::new(element)));
            }
            // Payload candidates and text tool calls arrive again in the
            // final response; the partials show the payloads meanwhile.
            Output::CustomPayload(_) | Output::ToolCall(_) => {}
        }
    }

    /// Feeds one raw delta; cleaned text becomes available via [`Self::next`].
    pub async fn push(&mut self, delta: &str) {
        self.raw.push_str(delta);
        match std::mem::replace(&mut self.mode, Mode::Stopped) {
            Mode::Stopped => {}
            Mode::Local(mut parser) => match parser.push(delta) {
                Ok(items) => {
                    self.hand_out_items(items);
                    self.mode = Mode::Local(parser);
                }
                Err(error) => tracing::warn!(%error, "in-process parser refused the text"),
            },
            mode @ (Mode::Unopened | Mode::Remote(_)) => {
                let opened = matches!(mode, Mode::Remote(_));
                if opened {
                    self.unsent.push_str(delta);
                }
                if let Some(shown) = self.pass_through(delta) {
                    // The sidecar repeats it once sent: `repeated` stays,
                    // so `hand_out` skips the repetition.
                    if !shown.is_empty() {
                        self.emitted.push_str(&shown);
                        self.ready.push_back(Ready::Text(shown));
                    }
                    let waiting = if opened { &self.unsent } else { &self.raw };
                    if waiting.len() < UNSENT_FLUSH {
                        self.mode = mode;
                        return;
                    }
                }
                match mode {
                    Mode::Remote(remote) => {
                        let text = std::mem::take(&mut self.unsent);
                        self.send_text(remote, text).await;
                    }
                    // Boxed: a tonic call's future is large and lives only
                    // while the stream opens, not for the turn.
                    _ => {
                        let text = self.raw.clone();
                        Box::pin(self.open_remote(Some(text))).await;
                    }
                }
            }
        }
    }

    /// Sends raw `text` on the sidecar's stream (the library takes over
    /// when that fails).
    async fn send_text(&mut self, mut remote: Box<Remote>, text: String) {
        let request = ParseStreamRequest {
            input: Some(Input::Text(text)),
        };
        match self.send(&mut remote, request).await {
            Ok(()) => {
                self.unsynced = true;
                self.mode = Mode::Remote(remote);
            }
            Err(reason) => self.switch_to_local(reason),
        }
    }

    /// Waits until the sidecar has answered for every delta pushed so far,
    /// so the cleaned text written before an event can be handed out before
    /// it. Immediate when nothing was pushed since the last sync, and for
    /// the in-process parser, which answers as it is fed. A sidecar that
    /// does not answer within the wait is replaced by the library.
    pub async fn sync(&mut self) {
        if !std::mem::take(&mut self.unsynced) {
            return;
        }
        let Mode::Remote(mut remote) = std::mem::replace(&mut self.mode, Mode::Stopped) else {
            return;
        };
        self.checkpoint_sent += 1;
        let mark = self.checkpoint_sent;
        let wait = self.wait;
        let synced = tokio::time::timeout(wait, async {
            let request = ParseStreamRequest {
                input: Some(Input::Checkpoint(mark)),
            };
            self.send(&mut remote, request).await?;
            while self.checkpoint_answered < mark {
                let message = remote.rx.message().await;
                self.take_answer(message)?;
            }
            Ok::<(), String>(())
        })
        .await;
        match synced {
            Ok(Ok(())) => self.mode = Mode::Remote(remote),
            Ok(Err(reason)) => self.switch_to_local(reason),
            Err(_) => self.switch_to_local("timed out waiting for a checkpoint".into()),
        }
    }

    /// The events ready now (empty when there are none): the cleaned text
    /// as one delta, then the elements in order, with only the latest
    /// partial of each payload, and nothing the client was already shown.
    pub fn take_ready(&mut self) -> Vec<Event> {
        let mut text = String::new();
        let mut elements: Vec<Ready> = Vec::new();
        while let Some(ready) = self.ready.pop_front() {
            match ready {
                Ready::Text(more) => text.push_str(&more),
                Ready::Partial(partial) => {
                    elements.retain(|earlier| {
                        !matches!(earlier, Ready::Partial(p) if p.offset == partial.offset)
                    });
                    elements.push(Ready::Partial(partial));
                }
                // The latest of a list's partials stands for those before
                // it in the same flush, and the whole list for all of them.
                Ready::Element(element) => {
                    if let Some(values) = values_kind(&element) {
                        elements.retain(|earlier| {
                            !matches!(earlier, Ready::Element(e)
                                if values_kind(e) == Some(values) && is_partial_list(e))
                        });
                    }
                    elements.push(Ready::Element(element));
                }
            }
        }
        let mut events = Vec::with_capacity(1 + elements.len());
        if !text.is_empty() {
            events.push(Event::TextDelta(text));
        }
        events.extend(elements.into_iter().filter_map(|element| match element {
            Ready::Partial(partial) => self.shown.partial(partial),
            Ready::Element(element) => match *element {
                Output::SuggestedValues(values) => self.shown.values(values, true),
                Output::SuggestedActions(actions) => self.shown.actions(actions, true),
                Output::SuggestedValuesPartial(values) => self.shown.values(values, false),
                Output::SuggestedActionsPartial(actions) => self.shown.actions(actions, false),
                _ => None,
            },
            Ready::Text(_) => None,
        }));
        events
    }

    /// The events ready now, as [`Self::take_ready`] (everything queued up
    /// since the last call). Pending until there are some, so it can sit in
    /// a `select!` beside the runner's stream.
    pub async fn next(&mut self) -> Vec<Event> {
        loop {
            let events = self.take_ready();
            if !events.is_empty() {
                return events;
            }
            let Mode::Remote(remote) = &mut self.mode else {
                return std::future::pending().await;
            };
            let message = remote.rx.message().await;
            match self.take_answer(message) {
                Ok(()) => self.take_arrived_answers(),
                Err(reason) => self.switch_to_local(reason),
            }
        }
    }

    /// Ends the stream: returns the held-back tail of the cleaned text and
    /// the parse of everything received (sidecar's final, else library's).
    pub async fn finish(mut self) -> CleanedText {
        let mut response = None;
        match std::mem::replace(&mut self.mode, Mode::Stopped) {
            // What was handed out without the sidecar, so its final
            // parse reads the whole text.
            Mode::Remote(remote) if !self.unsent.is_empty() => {
                let text = std::mem::take(&mut self.unsent);
                Box::pin(self.send_text(remote, text)).await;
            }
            // The whole answer passed the sidecar: one `Parse` of it.
            Mode::Unopened => response = Box::pin(self.parse_whole()).await,
            mode => self.mode = mode,
        }
        let mut local = None;
        match std::mem::replace(&mut self.mode, Mode::Stopped) {
            Mode::Remote(remote) => response = Box::pin(self.final_from(*remote)).await,
            Mode::Unopened => {}
            Mode::Local(parser) => local = Some(parser),
            Mode::Stopped => {}
        }
        let response = match (response, local) {
            (Some(response), _) => response,
            (None, Some(parser)) => {
                let (items, parsed) = parser.finish_with_items();
                self.hand_out_items(items);
                parsed.into_proto()
            }
            (None, None) => {
                if !self.in_process {
                    self.fallback
                        .get_or_insert_with(|| "in-process parser in use".into());
                }
                parse_locally(&self.raw, &self.profile, &self.compiled)
                    .unwrap_or_else(|error| unparsed(self.emitted.clone(), &error))
            }
        };
        // The final message decides; hand out whatever of it the client has
        // not seen yet, then the elements still ready.
        let queued: usize = self
            .ready
            .iter()
            .map(|ready| match ready {
                Ready::Text(text) => text.len(),
                _ => 0,
            })
            .sum();
        let already = self.emitted.len() - queued;
        let seen = &self.emitted[..already];
        let tail = match response.message.strip_prefix(seen) {
            Some(rest) => rest.to_owned(),
            None => {
                tracing::warn!("final message does not continue the streamed text");
                self.emitted[already..].to_owned()
            }
        };
        self.ready.retain(|ready| !matches!(ready, Ready::Text(_)));
        let mut events = Vec::new();
        if !tail.is_empty() {
            events.push(Event::TextDelta(tail.clone()));
        }
        events.extend(self.take_ready());
        events.extend(self.shown.settle(&response));
        CleanedText {
            tail,
            events,
            response,
            raw: self.raw,
            fallback: self.fallback,
            shown: self.shown,
        }
    }

    /// A model call (step) starts: its text begins after what was pushed so
    /// far. Call it with nothing ready (after [`Self::sync`] and
    /// [`Self::take_ready`]).
    pub fn mark_step(&mut self, step: u32) {
        self.step = StepMark {
            raw: self.raw.len(),
            emitted: self.emitted.len(),
        };
        self.shown.begin_step(step);
    }

    /// Discards the current step's text: what it made ready and did not
    /// hand out yet, and the parser's state, which starts again on the text
    /// before the step. The sidecar gets a new `ParseStream`. Returns the
    /// events to send right after the `step_reset`: the take-down of each
    /// card an earlier step showed and this one changed ([`Shown::reset`]).
    pub async fn reset_step(&mut self) -> Vec<Event> {
        let StepMark { raw, emitted } = self.step;
        self.raw.truncate(raw);
        self.emitted.truncate(emitted);
        self.ready.clear();
        let taken_down = self.shown.reset(raw as u64);
        self.repeated = self.emitted.len();
        self.diverged = false;
        // The new stream reads the raw text whole; nothing passes it again
        // in this turn.
        self.unsent.clear();
        self.mirrored = false;
        if matches!(self.mode, Mode::Unopened) {
            // Nothing was sent: all of the raw text before the step is
            // still to be sent, and was handed out as it is.
            self.mirrored = true;
            // The sidecar, once open, repeats all of it.
            self.repeated = 0;
            return taken_down;
        }
        let was_remote = matches!(self.mode, Mode::Remote(_));
        // Dropping the old stream's sender ends that call.
        self.mode = Mode::Stopped;
        self.final_response = None;
        if was_remote {
            self.repeated = 0;
            self.checkpoint_sent = 0;
            self.checkpoint_answered = 0;
            self.unsynced = false;
            let text = self.raw.clone();
            Box::pin(self.open_remote(Some(text))).await;
        } else if self.fallback.is_some() || self.in_process {
            self.restart_local();
        }
        taken_down
    }
}

/// What [`TextCleaner::finish`] returns.
#[derive(Debug)]
pub struct CleanedText {
    /// Cleaned text not yet sent to the client.
    pub tail: String,
    /// The events still to send: the `tail` as a text delta, the elements
    /// still ready, and the payload cards to take down because the final
    /// parse does not end with them.
    pub events: Vec<Event>,
    /// What the client was shown of the elements, to settle against a
    /// parse of a different text ([`Shown::settle`]).
    pub shown: Shown,
    /// The parse of the whole raw text.
    pub response: ParseResponse,
    /// The whole raw text.
    pub raw: String,
    /// Why the library took over, when it did.
    pub fallback: Option<String>,
}

mod remote;

#[cfg(test)]
mod tests;
