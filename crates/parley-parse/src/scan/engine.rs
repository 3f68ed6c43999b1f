//! The scanner shared by [`crate::parse`] and [`crate::StreamParser`].
//!
//! It walks the text once, left to right, looking only at trigger bytes
//! (`:` ends a marker, `{` and `` ` `` may start a text tool call). Each
//! decision is made by a prefix-consistent matcher, so the scanner can stop
//! wherever the text currently ends and resume when more arrives: a stream
//! fed in any split makes exactly the decisions a single parse of the whole
//! text makes. `parse` is this engine run once with the end of input known.
//!
//! Text before the first undecided byte goes to the [`MessageBuilder`];
//! elements are resolved (decoded, validated, collected) as soon as they
//! close, and their text is removed. When partial payloads are on, each
//! custom payload's JSON is also fed, as it arrives, to [`PayloadPartials`].

use super::{
    message::MessageBuilder,
    state::{Candidate, Collected, Decoded, Event, State, What},
    trigger::{self, Trigger},
};
use crate::{
    TextDelta,
    elements::{direct, tool_calls},
    json::extract::{self, CloseIndex, Lexer},
    limits::Limits,
    model::{Diagnostic, DiagnosticKind, Parsed, StreamItem},
    partial::{
        lists::{ListKind, ListPartials},
        payloads::PayloadPartials,
    },
    profile::Profile,
    syntax::{
        fence,
        marker::{Element, Tri},
    },
};

/// Most `Unterminated` diagnostics one response reports (their text stays in
/// the message, so nothing is lost by stopping).
const MAX_UNTERMINATED: usize = 16;
/// How much of an unterminated element's text its diagnostic quotes.
const UNTERMINATED_RAW: usize = 256;

/// The scanner's state between calls.
#[derive(Debug)]
pub(crate) struct Engine {
    limits: Limits,
    /// Everything before `pos` is decided: kept in the message or removed.
    pos: usize,
    /// The next position to search for triggers (`>= pos`).
    scan: usize,
    state: State,
    out: MessageBuilder,
    /// Bytes of the message already handed out as `Text` items.
    emitted: usize,
    /// Whether to produce stream items (a plain parse does not need them).
    emit: bool,
    items: Vec<StreamItem>,
    index: Option<CloseIndex>,
    found: Collected,
    unterminated: usize,
    /// The values so far of the payloads being written, when wanted.
    partials: Option<PayloadPartials>,
    /// The items so far of the suggestion lists being written, with
    /// `partials`.
    lists: Option<ListPartials>,
    /// What resolving an element reports (kept for its capacity).
    events: Vec<Event>,
    /// What was read of the element in `State::Closed`, when it was read
    /// whole to find where it closes ([`Engine::read_whole`]).
    decoded: Option<Decoded>,
}

impl Engine {
    pub(crate) fn new(limits: Limits, emit: bool) -> Self {
        Self {
            limits,
            pos: 0,
            scan: 0,
            state: State::Scan,
            out: MessageBuilder::default(),
            emitted: 0,
            emit,
            items: Vec::new(),
            index: None,
            found: Collected::default(),
            unterminated: 0,
            partials: None,
            lists: None,
            events: Vec::new(),
            decoded: None,
        }
    }

    /// Room for a message of `bytes` up front.
    pub(crate) fn reserve_message(&mut self, bytes: usize) {
        self.out.reserve(bytes);
    }

    /// The message will be at most about `bytes` long (see
    /// [`MessageBuilder::expect`]).
    pub(crate) fn expect_message(&mut self, bytes: usize) {
        self.out.expect(bytes);
    }

    /// Also produce `PartialPayload` items (a stream only).
    pub(crate) fn enable_partials(&mut self) {
        if self.emit {
            self.partials = Some(PayloadPartials::new(self.limits));
            self.lists = Some(ListPartials::new(self.limits));
        }
    }

    /// Items produced since the last call.
    pub(crate) fn take_items(&mut self) -> Vec<StreamItem> {
        std::mem::take(&mut self.items)
    }

    /// [`Engine::run`] appending the items it produces straight to `out`
    /// (no copy through this engine's own buffer). Out of line: inlined
    /// into `StreamParser::push_into` it kept that from being inlined into
    /// its caller, and its text item's allocation from being inlined into
    /// it (6k instructions more per corpus pass of 16-byte deltas).
    #[inline(never)]
    pub(crate) fn run_into(
        &mut self,
        text: &str,
        profile: &Profile,
        at_end: bool,
        out: &mut Vec<StreamItem>,
    ) {
        if !at_end && self.advance_quickly(text, profile, out) {
            return;
        }
        // `items` is empty between calls: every call's items are taken.
        std::mem::swap(&mut self.items, out);
        self.run(text, profile, at_end);
        std::mem::swap(&mut self.items, out);
    }

    /// The two commonest steps of a stream, done as [`Engine::run`] does
    /// them but without its whole state machine: a delta of plain text (no
    /// trigger byte since the last scan) and a delta inside an element that
    /// does not close it. True when done, its text item appended to `out`;
    /// false leaves the call to `run` (with the state as `run` would have
    /// it at that point, and nothing appended).
    fn advance_quickly(
        &mut self,
        text: &str,
        profile: &Profile,
        out: &mut Vec<StreamItem>,
    ) -> bool {
        if self.partials.is_some() || self.lists.is_some() {
            return false;
        }
        let t = text.as_bytes();
        match &mut self.state {
            State::Scan => {
                if trigger::find(&profile.triggers, t, self.scan).is_some() {
                    return false;
                }
                let hold = profile.markers.hold_from(t, self.pos);
                self.keep_to(text, hold);
                // No trigger up to the end: the held bytes are not searched again.
                self.scan = t.len();
            }
            State::Element { cand, lexer } => {
                if matches!(&self.index, Some(index) if cand.opener >= index.base()) {
                    return false;
                }
                if let Some(close) = lexer.run(t) {
                    let depth = Some(lexer.max_depth());
                    self.state = State::Closed {
                        cand: *cand,
                        close,
                        depth,
                    };
                    return false;
                }
                // Inside an element nothing is kept: no text to hand out.
                return true;
            }
            _ => return false,
        }
        out.extend(self.text_item());
        true
    }

    /// Advances over `text` (everything received so far) as far as it can
    /// decide; with `at_end`, decides everything.
    pub(crate) fn run(&mut self, text: &str, profile: &Profile, at_end: bool) {
        let t = text.as_bytes();
        loop {
            match std::mem::replace(&mut self.state, State::Scan) {
                State::Scan => {
                    let Some(at) = trigger::find(&profile.triggers, t, self.scan) else {
                        let hold = if at_end {
                            t.len()
                        } else {
                            profile.markers.hold_from(t, self.pos)
                        };
                        self.keep_to(text, hold);
                        self.scan = t.len();
                        break;
                    };
                    match trigger::classify(t, at, self.pos, profile, at_end) {
                        Trigger::Skip => self.scan = at + 1,
                        Trigger::More(hold) => {
                            self.keep_to(text, hold);
                            self.scan = at;
                            break;
                        }
                        Trigger::Marker { start, end, index } => {
                            self.keep_to(text, start);
                            self.state = State::AfterMarker { start, end, index };
                        }
                        Trigger::Tool(cand) => {
                            self.keep_to(text, cand.start);
                            self.state = self.open_element(text, profile, cand, at_end);
                        }
                    }
                }
                State::AfterMarker { start, end, index } => {
                    match trigger::after_marker(t, end, at_end) {
                        Tri::More => {
                            self.state = State::AfterMarker { start, end, index };
                            break;
                        }
                        // A prose mention: the marker stays text.
                        Tri::No => self.scan = end,
                        Tri::Yes((opener, fenced)) => {
                            let cand = Candidate {
                                start,
                                opener,
                                fenced,
                                what: What::Marker(index),
                            };
                            self.open_partial(t, profile, &cand);
                            self.state = self.open_element(text, profile, cand, at_end);
                        }
                    }
                }
                State::Element { cand, mut lexer } => {
                    let closed = match &self.index {
                        Some(index) if cand.opener >= index.base() => {
                            index.closer_of(cand.opener).map(|c| (c, None))
                        }
                        _ => lexer.run(t).map(|c| (c, Some(lexer.max_depth()))),
                    };
                    match closed {
                        Some((close, depth)) => self.state = State::Closed { cand, close, depth },
                        None if !at_end => {
                            if let Some(partials) = &mut self.partials {
                                partials.grow(cand.start, text, t.len());
                            }
                            if let Some(lists) = &mut self.lists {
                                lists.grow(cand.start, text, t.len());
                            }
                            self.state = State::Element { cand, lexer };
                            break;
                        }
                        None => {
                            if self.index.is_none() {
                                self.index = Some(CloseIndex::build(t, cand.opener));
                            }
                            self.unterminated(text, profile, cand);
                        }
                    }
                }
                State::Closed { cand, close, depth } => {
                    let fence_end = if cand.fenced {
                        match fence::close(t, close + 1, at_end) {
                            Tri::More => {
                                self.state = State::Closed { cand, close, depth };
                                break;
                            }
                            Tri::Yes(end) => Some(end),
                            Tri::No => None,
                        }
                    } else {
                        None
                    };
                    self.resolve(text, profile, cand, (close, depth), fence_end);
                }
            }
        }
        if at_end {
            self.out.finish();
            let losers = self.found.payload_losers(text);
            for diagnostic in losers {
                if let Some(partials) = &mut self.partials {
                    partials.withdraw(diagnostic.offset);
                }
                self.diagnose(diagnostic);
            }
        }
        self.flush_text();
        if let Some(partials) = &mut self.partials {
            partials.drain(&mut self.items);
        }
        if let Some(lists) = &mut self.lists {
            lists.drain(profile, &mut self.items);
        }
    }

    /// The result; call after `run` with `at_end`.
    pub(crate) fn into_parsed(self) -> Parsed {
        let message = self.out.into_string();
        self.found.into_parsed(message)
    }

    /// Starts following the value of a custom payload whose JSON object
    /// opens at `cand.opener`.
    fn open_partial(&mut self, t: &[u8], profile: &Profile, cand: &Candidate) {
        if let (Some(lists), What::Marker(index)) = (&mut self.lists, cand.what)
            && t.get(cand.opener) == Some(&b'[')
        {
            match profile.markers.element(index) {
                Element::SuggestedValues if !self.found.has_values() => {
                    lists.open(ListKind::Values, cand.start, cand.opener);
                }
                Element::SuggestedActions if !self.found.has_actions() => {
                    lists.open(ListKind::Actions, cand.start, cand.opener);
                }
                _ => {}
            }
        }
        let (Some(partials), What::Marker(index)) = (&mut self.partials, cand.what) else {
            return;
        };
        if let Element::Payload(priority) = profile.markers.element(index)
            && t.get(cand.opener) == Some(&b'{')
        {
            partials.open(cand.start, cand.opener, &profile.payloads[priority].name);
        }
    }

    /// The state for an element opening at `cand.opener`: closed already
    /// when it was read whole ([`Engine::read_whole`]), else inside it.
    fn open_element(
        &mut self,
        text: &str,
        profile: &Profile,
        cand: Candidate,
        at_end: bool,
    ) -> State {
        match self.read_whole(text, profile, &cand, at_end) {
            Some((decoded, close, depth)) => {
                self.decoded = Some(decoded);
                State::Closed {
                    cand,
                    close,
                    depth: Some(depth),
                }
            }
            None => State::Element {
                cand,
                lexer: Lexer::new(cand.opener),
            },
        }
    }

    /// With the whole text at hand (`at_end`), an element is read straight
    /// away, which also tells where it closes: the lexer need not go over
    /// it first (`parse` meets every well-formed element this way). `None`
    /// leaves it to the lexer: anything the readers do not answer (JSON
    /// that does not parse as it stands, the wrong shape, a list that
    /// drops an action, nesting too deep), which is then read and
    /// explained as any element is.
    fn read_whole(
        &self,
        text: &str,
        profile: &Profile,
        cand: &Candidate,
        at_end: bool,
    ) -> Option<(Decoded, usize, usize)> {
        if !(at_end && self.index.is_none() && self.partials.is_none() && self.lists.is_none()) {
            return None;
        }
        let (opener, depth) = (cand.opener, self.limits.effective_depth());
        match cand.what {
            What::Marker(index) => match profile.markers.element(index) {
                Element::Payload(_) => extract::decode_whole(text, opener, depth)
                    .map(|(value, close, depth)| (Decoded::Payload(value), close, depth)),
                Element::SuggestedValues => direct::suggested_values_at(text, opener, depth)
                    .map(|(values, close, depth)| (Decoded::Values(values), close, depth)),
                Element::SuggestedActions => {
                    direct::suggested_actions_at(text, opener, depth, profile)
                        .map(|(actions, close, depth)| (Decoded::Actions(actions), close, depth))
                }
            },
            What::Tool(key) => direct::tool_call_at(text, opener, depth, key, profile).map(
                |((name, arguments), close, depth)| (Decoded::Tool(name, arguments), close, depth),
            ),
        }
    }

    fn unterminated(&mut self, text: &str, profile: &Profile, cand: Candidate) {
        if let Some(partials) = &mut self.partials {
            partials.withdraw(cand.start);
        }
        if let Some(lists) = &mut self.lists {
            lists.withdraw(cand.start);
        }
        if self.unterminated < MAX_UNTERMINATED {
            self.unterminated += 1;
            let raw = truncate(&text[cand.start..], UNTERMINATED_RAW);
            let element = match cand.what {
                What::Marker(index) => profile.element_name(profile.markers.element(index)),
                What::Tool(_) => "tool_call",
            };
            self.diagnose(Diagnostic {
                kind: DiagnosticKind::Unterminated,
                element: element.to_owned(),
                raw: raw.to_owned(),
                reason: format!(
                    "the element opened at byte {} never closes; its text stays",
                    cand.opener
                ),
                offset: cand.start,
            });
        }
        self.scan = cand.opener + 1;
    }

    fn resolve(
        &mut self,
        text: &str,
        profile: &Profile,
        cand: Candidate,
        (close, depth): (usize, Option<usize>),
        fence_end: Option<usize>,
    ) {
        let json = &text[cand.opener..=close];
        let within = extract::check_depth(json, depth, self.limits.effective_depth());
        match cand.what {
            What::Marker(index) => {
                let end = fence_end.unwrap_or(close + 1);
                let raw = &text[cand.start..end];
                let element = profile.markers.element(index);
                let candidates = self.found.payload_candidates();
                let lists_before = (self.found.has_values(), self.found.has_actions());
                let mut events = std::mem::take(&mut self.events);
                let decoded = self.decoded.take();
                self.found.accept(
                    profile,
                    element,
                    within.map(|()| (json, decoded)),
                    raw,
                    cand.start,
                    cand.fenced,
                    self.emit,
                    &mut events,
                );
                if let Some(partials) = &mut self.partials {
                    let valid = self.found.payload_candidates() > candidates;
                    partials.close(cand.start, text, close, valid);
                }
                if let Some(lists) = &mut self.lists {
                    let lists_after = (self.found.has_values(), self.found.has_actions());
                    lists.close(cand.start, lists_after != lists_before);
                }
                for event in events.drain(..) {
                    match event {
                        Event::Item(item) => self.item(item),
                        Event::Diagnostic(diagnostic) => self.diagnose(diagnostic),
                    }
                }
                self.events = events;
                self.out.remove();
                self.pos = end;
                self.scan = end;
            }
            What::Tool(key) => {
                let (start, end) = match (cand.fenced, fence_end) {
                    (true, Some(end)) => (cand.start, end),
                    (true, None) => (cand.opener, close + 1),
                    (false, _) => (cand.start, close + 1),
                };
                let raw = &text[start..end];
                // A well-formed call is read straight from the text; the
                // `Value` route decides (and explains) the rest.
                let decoded = match self.decoded.take() {
                    Some(Decoded::Tool(name, arguments)) => Some((name, arguments)),
                    _ => None,
                };
                let call = within.and_then(|()| {
                    match decoded.or_else(|| direct::tool_call(json, key, profile)) {
                        Some(call) => Ok((call, false)),
                        None => extract::decode_within_depth(json).and_then(|(value, commas)| {
                            tool_calls::interpret(value, key, profile)
                                .map(|call| (call, commas))
                                .map_err(|reason| (DiagnosticKind::SchemaViolation, reason))
                        }),
                    }
                });
                match call {
                    Ok(((name, arguments), commas)) => {
                        self.keep_to(text, start);
                        if let Some(call) = self.found.tool_call(name, arguments, raw, self.emit) {
                            self.item(StreamItem::ToolCall(call));
                        }
                        if commas {
                            self.diagnose(Diagnostic {
                                kind: DiagnosticKind::Repaired,
                                element: "tool_call".into(),
                                raw: raw.to_owned(),
                                reason: "removed trailing commas".into(),
                                offset: start,
                            });
                        }
                        self.out.remove();
                        self.pos = end;
                    }
                    Err((kind, reason)) => {
                        self.diagnose(Diagnostic {
                            kind,
                            element: "tool_call".into(),
                            raw: raw.to_owned(),
                            reason: format!("{reason}; the text stays"),
                            offset: start,
                        });
                        self.keep_to(text, end);
                    }
                }
                self.scan = end;
            }
        }
    }

    fn keep_to(&mut self, text: &str, to: usize) {
        if to > self.pos {
            self.out.keep(&text[self.pos..to]);
            self.pos = to;
        }
    }

    fn diagnose(&mut self, diagnostic: Diagnostic) {
        if self.emit {
            self.item(StreamItem::Diagnostic(diagnostic.clone()));
        }
        self.found.diagnostics.push(diagnostic);
    }

    fn item(&mut self, item: StreamItem) {
        if self.emit {
            self.flush_text();
            self.items.push(item);
        }
    }

    fn flush_text(&mut self) {
        if let Some(item) = self.text_item() {
            self.items.push(item);
        }
    }

    /// The message not yet handed out, as a `Text` item (a stream only).
    #[inline(always)]
    fn text_item(&mut self) -> Option<StreamItem> {
        let message = self.out.as_str();
        if !(self.emit && message.len() > self.emitted) {
            return None;
        }
        let item = StreamItem::Text(TextDelta::from(&message[self.emitted..]));
        self.emitted = message.len();
        Some(item)
    }
}

/// At most `max` bytes of `s`, cut at a character boundary.
fn truncate(s: &str, max: usize) -> &str {
    &s[..s.floor_char_boundary(max)]
}
