//! What the client is shown of the answer's elements while the model
//! writes them: payload cards growing (`payload_partial`), the suggested
//! values and actions growing item by item (each as soon as its JSON
//! closes), and the structured answer growing (`structured_partial`).
//!
//! The parser (sidecar or library) says what each payload looks like so
//! far; [`Shown`] decides what reaches the client, so the rules hold
//! whichever parser answered and however often it restarted (the library
//! taking over from the sidecar re-reads the text, a `step_reset` re-parses
//! it):
//!
//! - a partial equal to the last one shown of its payload (same data and
//!   complete paths) is not sent again: a parser that re-reads the text
//!   repeats what was already shown, and that is skipped;
//! - the revisions a client sees are the gateway's own: 1, 2, 3... per
//!   payload, without gaps, however many the parser's flushes coalesced;
//! - a payload taken down stays down, and its last event carries the
//!   diagnostic that says why (the parser sends it first, or the final
//!   parse lists it);
//! - at the end, a payload still shown that is not the final answer's
//!   payload is taken down ([`Shown::settle`]), so a UI never keeps a card
//!   the turn did not end with.
//!
//! Suggested values and actions go out as the list so far (each event
//! replaces the one before and has more items), never the same list twice;
//! an empty list takes them down when the list turns out invalid or never
//! closes, and at the end a list shown that is not the final one is
//! replaced by the final one ([`Shown::settle`]), so the last event equals
//! what the parse ends with.
//!
//! A `step_reset` discards what the step showed ([`Shown::reset`]): the
//! client drops those cards and lists, and the gateway forgets them.

use std::collections::HashMap;

use parley_parse::{Limits, partial::PartialJson};
use parley_proto::{
    gateway::v1::{self as gw, chat_event::Event},
    json,
    parser::v1::{self as pb, Diagnostic, ParseResponse},
};

/// One payload as the client last saw it.
#[derive(Debug, Clone)]
struct Card {
    payload_type: String,
    revision: u32,
    data: Option<prost_types::Struct>,
    complete_paths: Vec<String>,
    /// The step the card was first shown in.
    step: u32,
    /// The step of its last event.
    changed: u32,
}

impl Card {
    fn is_down(&self) -> bool {
        self.revision > 0 && self.data.is_none()
    }
}

/// A suggestions list as the client last saw it.
#[derive(Debug, Clone)]
struct List<T> {
    items: Vec<T>,
    /// The step it was first shown in.
    step: u32,
    /// The step of its last event.
    changed: u32,
    /// Whether the list closed (the parser's whole list).
    whole: bool,
}

/// The event for a list (`items` so far, `whole` when it closed), or
/// `None` when it shows nothing new. An empty list takes down what was
/// shown; after it a later list starts again.
fn show_list<T: Clone + PartialEq>(
    slot: &mut Option<List<T>>,
    step: u32,
    items: Vec<T>,
    whole: bool,
) -> Option<Vec<T>> {
    match slot {
        // Nothing shown: nothing to take down, and an empty list shows
        // nothing.
        None if items.is_empty() => None,
        None => {
            *slot = Some(List {
                items: items.clone(),
                step,
                changed: step,
                whole,
            });
            Some(items)
        }
        // A parser that re-read the text repeats the list.
        Some(list) if list.items == items => {
            list.whole |= whole;
            None
        }
        // A list that closed does not change (a second list is a
        // duplicate the parse ignores).
        Some(list) if list.whole => None,
        Some(_) if items.is_empty() => {
            *slot = None;
            Some(items)
        }
        Some(list) => {
            list.items = items.clone();
            list.changed = step;
            list.whole = whole;
            Some(items)
        }
    }
}

/// Forgets a list the reset step showed; the empty list that takes it
/// down when an earlier step showed it first (see [`Shown::reset`]).
fn reset_list<T>(slot: &mut Option<List<T>>, step: u32) -> Option<Vec<T>> {
    let list = slot.as_ref()?;
    if list.changed != step {
        return None;
    }
    let earlier = list.step != step;
    *slot = None;
    earlier.then(Vec::new)
}

/// The final list, when a list was shown and it is not that one.
fn settle_list<T: Clone + PartialEq>(slot: &mut Option<List<T>>, last: &[T]) -> Option<Vec<T>> {
    let list = slot.as_mut()?;
    if list.items == last {
        return None;
    }
    if last.is_empty() {
        *slot = None;
    } else {
        list.items = last.to_vec();
        list.whole = true;
    }
    Some(last.to_vec())
}

/// The elements shown to the client so far in one turn.
#[derive(Debug, Default)]
pub struct Shown {
    /// By the payload's offset in the turn's model text.
    cards: HashMap<u64, Card>,
    /// The latest diagnostic about each offset.
    diagnostics: HashMap<u64, Diagnostic>,
    /// The suggested values shown, once they were.
    values: Option<List<pb::SuggestedValue>>,
    /// The suggested actions shown, once they were.
    actions: Option<List<pb::SuggestedAction>>,
    /// The current model call (1-based; 0 before the first).
    step: u32,
}

impl Shown {
    /// A model call starts.
    pub fn begin_step(&mut self, step: u32) {
        self.step = step;
    }

    /// Notes a diagnostic: a payload taken down later carries it.
    pub fn diagnostic(&mut self, diagnostic: Diagnostic) {
        self.diagnostics.insert(diagnostic.offset, diagnostic);
    }

    /// The event for the parser's `partial`, or `None` when it shows
    /// nothing new.
    pub fn partial(&mut self, partial: pb::PayloadPartial) -> Option<Event> {
        let step = self.step;
        let card = self.cards.entry(partial.offset).or_insert_with(|| Card {
            payload_type: partial.r#type.clone(),
            revision: 0,
            data: None,
            complete_paths: Vec::new(),
            step,
            changed: step,
        });
        if card.is_down() {
            return None;
        }
        match partial.data {
            // A withdrawal of a card never shown takes nothing down.
            None if card.revision == 0 => None,
            None => {
                card.data = None;
                card.complete_paths.clear();
                card.revision += 1;
                card.changed = step;
                Some(self.event(partial.offset))
            }
            Some(data) => {
                if card.revision > 0
                    && card.data.as_ref() == Some(&data)
                    && card.complete_paths == partial.complete_paths
                {
                    return None;
                }
                card.data = Some(data);
                card.complete_paths = partial.complete_paths;
                card.revision += 1;
                card.changed = step;
                Some(self.event(partial.offset))
            }
        }
    }

    fn event(&self, offset: u64) -> Event {
        let card = &self.cards[&offset];
        Event::PayloadPartial(Box::new(gw::PayloadPartial {
            r#type: card.payload_type.clone(),
            data: card.data.clone(),
            complete_paths: card.complete_paths.clone(),
            revision: card.revision,
            offset,
            diagnostic: if card.data.is_none() {
                self.diagnostics.get(&offset).cloned()
            } else {
                None
            },
        }))
    }

    /// The event for the suggested values so far (`whole` when their
    /// list closed), or `None` when it shows nothing new.
    pub fn values(&mut self, values: pb::SuggestedValues, whole: bool) -> Option<Event> {
        show_list(&mut self.values, self.step, values.values, whole)
            .map(|values| Event::SuggestedValues(pb::SuggestedValues { values }))
    }

    /// The event for the suggested actions so far, as [`Self::values`].
    pub fn actions(&mut self, actions: pb::SuggestedActions, whole: bool) -> Option<Event> {
        show_list(&mut self.actions, self.step, actions.actions, whole)
            .map(|actions| Event::SuggestedActions(pb::SuggestedActions { actions }))
    }

    /// Forgets what the current step showed, and the diagnostics at or
    /// after `from`, the step's first byte of model text. A card first
    /// shown in the step is discarded by the client on `step_reset`
    /// without an event. A card first shown in an earlier step that this
    /// step changed (its JSON went on across the steps) cannot go back to
    /// what it was: the returned events, sent right after the
    /// `step_reset`, take it down (no `data`, no diagnostic), and the
    /// re-parse shows it again from revision 1.
    pub fn reset(&mut self, from: u64) -> Vec<Event> {
        let step = self.step;
        self.diagnostics.retain(|offset, _| *offset < from);
        let mut spanning: Vec<u64> = self
            .cards
            .iter()
            .filter(|(_, card)| card.step != step && card.changed == step && !card.is_down())
            .map(|(offset, _)| *offset)
            .collect();
        spanning.sort_unstable();
        let events = spanning
            .into_iter()
            .filter_map(|offset| {
                let card = self.cards.get_mut(&offset)?;
                card.data = None;
                card.complete_paths.clear();
                card.revision += 1;
                Some(Event::PayloadPartial(Box::new(gw::PayloadPartial {
                    r#type: card.payload_type.clone(),
                    data: None,
                    complete_paths: Vec::new(),
                    revision: card.revision,
                    offset,
                    diagnostic: None,
                })))
            })
            .collect();
        self.cards
            .retain(|_, card| card.step != step && card.changed != step);
        let mut events: Vec<Event> = events;
        if let Some(values) = reset_list(&mut self.values, step) {
            events.push(Event::SuggestedValues(pb::SuggestedValues { values }));
        }
        if let Some(actions) = reset_list(&mut self.actions, step) {
            events.push(Event::SuggestedActions(pb::SuggestedActions { actions }));
        }
        events
    }

    /// Takes down every card still shown that the final parse does not end
    /// with: a card that is not shown whole, or whose data is not the final
    /// payload's. Its diagnostic comes from the final parse when it lists
    /// one at the card's offset. A suggestions list shown that is not the
    /// final parse's is replaced by it (empty when the parse has none).
    pub fn settle(&mut self, parsed: &ParseResponse) -> Vec<Event> {
        let mut events = Vec::new();
        if let Some(values) = settle_list(&mut self.values, &parsed.suggested_values) {
            events.push(Event::SuggestedValues(pb::SuggestedValues { values }));
        }
        if let Some(actions) = settle_list(&mut self.actions, &parsed.suggested_actions) {
            events.push(Event::SuggestedActions(pb::SuggestedActions { actions }));
        }
        for diagnostic in &parsed.diagnostics {
            self.diagnostics
                .insert(diagnostic.offset, diagnostic.clone());
        }
        let kept = parsed
            .custom_payload
            .as_ref()
            .and_then(|payload| payload.data.as_ref());
        let mut offsets: Vec<u64> = self
            .cards
            .iter()
            .filter(|(_, card)| {
                !card.is_down()
                    && card.revision > 0
                    && !(card.complete_paths == [""]
                        && kept.is_some()
                        && card.data.as_ref() == kept)
            })
            .map(|(offset, _)| *offset)
            .collect();
        offsets.sort_unstable();
        let cards = offsets.into_iter().filter_map(|offset| {
            let card = self.cards.get(&offset)?;
            self.partial(pb::PayloadPartial {
                r#type: card.payload_type.clone(),
                data: None,
                complete_paths: Vec::new(),
                revision: 0,
                offset,
            })
        });
        events.extend(cards.collect::<Vec<_>>());
        events
    }
}

/// The structured answer (a request with `response_schema`) as it streams:
/// its `structured_delta` text fed to a [`PartialJson`].
#[derive(Debug)]
pub struct StructuredPartials {
    json: PartialJson,
    /// `json.version()` of the last event sent.
    shown: Option<u64>,
    revision: u32,
}

impl Default for StructuredPartials {
    fn default() -> Self {
        Self {
            json: PartialJson::new(Limits::default()),
            shown: None,
            revision: 0,
        }
    }
}

impl StructuredPartials {
    /// Starts again from `text` (after a `step_reset`): the next event is
    /// revision 1.
    pub fn restart(&mut self, text: &str) {
        *self = Self::default();
        // Leading whitespace and the like are fine; a closer that stops
        // keeps its value and the final validation decides.
        let _ = self.json.feed(text.as_bytes());
        self.shown = Some(self.json.version());
    }

    /// Feeds more structured text; the event to send when the value so far
    /// changed. Text the closer cannot follow (not JSON) stops the events;
    /// `complete.structured` still says what the answer was.
    pub fn feed(&mut self, text: &str) -> Option<Event> {
        if self.json.feed(text.as_bytes()).is_err() {
            return None;
        }
        let version = self.json.version();
        if self.shown == Some(version) {
            return None;
        }
        let value = self.json.value()?;
        self.shown = Some(version);
        self.revision += 1;
        Some(Event::StructuredPartial(gw::StructuredPartial {
            data: Some(json::to_value(&value)),
            complete_paths: self.json.complete_paths().to_vec(),
            revision: self.revision,
        }))
    }
}

#[cfg(test)]
mod tests;
