//! The suggested values and actions while their list is being written:
//! each item reaches the stream as soon as its JSON closes, before the list
//! (and the answer) ends.
//!
//! The engine tells [`ListPartials`] what happens to the list elements (one
//! opened, more of its JSON arrived, it closed as the response's list or
//! not, it never closed); at the end of each engine run
//! [`ListPartials::drain`] hands out, per kind, the items closed so far
//! when there are more of them than last time
//! ([`StreamItem::PartialSuggestedValues`],
//! [`StreamItem::PartialSuggestedActions`]). Each item is checked as the
//! whole list's items are (`{label, value}`, `{label, action, handler}`;
//! an action the profile does not allow is left out, as it is from the
//! list). A list that turns out not to be the response's (an item that
//! fails its shape, a list that never closes, or one that is not JSON)
//! gets a last, empty partial, so a UI takes its items down. A list that
//! closes valid gets no more partials: the `SuggestedValues` /
//! `SuggestedActions` item that follows carries it whole.
//!
//! Only the first list of each kind is followed: a second one is a
//! duplicate, which the parse ignores.

use serde_json::Value;

use super::PartialJson;
use crate::{elements, limits::Limits, model::StreamItem, profile::Profile};

/// Which list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ListKind {
    /// `SUGGESTED_VALUES`.
    Values,
    /// `SUGGESTED_ACTIONS`.
    Actions,
}

/// The lists being written in one stream.
#[derive(Debug)]
pub(crate) struct ListPartials {
    limits: Limits,
    lists: Vec<Tracked>,
}

#[derive(Debug)]
struct Tracked {
    kind: ListKind,
    /// The element's first byte (its marker).
    offset: usize,
    json: PartialJson,
    /// The text before this position has been fed to `json`.
    fed: usize,
    /// How many items the last partial showed.
    shown: usize,
    /// Whether a partial was handed out.
    any: bool,
    /// `json.version()` when the items were last looked at.
    checked: Option<u64>,
    phase: Phase,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Its JSON is still being written.
    Writing,
    /// An item failed its shape or the JSON stopped making sense: no more
    /// items are shown; the close decides.
    Stuck,
    /// It closed as the response's list: the whole list follows.
    Done,
    /// It will not be the response's list: take its items down.
    Withdrawn,
}

impl ListPartials {
    pub(crate) fn new(limits: Limits) -> Self {
        Self {
            limits,
            lists: Vec::new(),
        }
    }

    /// The list element at `offset` opened its JSON array at `opener`.
    pub(crate) fn open(&mut self, kind: ListKind, offset: usize, opener: usize) {
        if self
            .lists
            .iter()
            .any(|list| list.kind == kind && list.phase != Phase::Withdrawn)
        {
            return;
        }
        self.lists.push(Tracked {
            kind,
            offset,
            json: PartialJson::new(self.limits),
            fed: opener,
            shown: 0,
            any: false,
            checked: None,
            phase: Phase::Writing,
        });
    }

    /// The JSON of the list element at `offset` is written up to `to`.
    pub(crate) fn grow(&mut self, offset: usize, text: &str, to: usize) {
        if let Some(list) = self.find(offset)
            && list.phase == Phase::Writing
        {
            list.feed(text, to);
        }
    }

    /// The list element at `offset` closed; `accepted` when it became the
    /// response's list.
    pub(crate) fn close(&mut self, offset: usize, accepted: bool) {
        if let Some(list) = self.find(offset) {
            list.phase = if accepted {
                Phase::Done
            } else {
                Phase::Withdrawn
            };
        }
    }

    /// The list element at `offset` never closes.
    pub(crate) fn withdraw(&mut self, offset: usize) {
        if let Some(list) = self.find(offset) {
            list.phase = Phase::Withdrawn;
        }
    }

    /// Appends a partial for each list with new items (or taken down).
    pub(crate) fn drain(&mut self, profile: &Profile, items: &mut Vec<StreamItem>) {
        for list in &mut self.lists {
            if let Some(item) = list.next_partial(profile) {
                items.push(item);
            }
        }
        // A withdrawn list is over; so is one that closed valid. Keep them
        // (without tracking) so that a later list of the same kind, a
        // duplicate, is not followed: only a withdrawn list frees its kind.
        self.lists.retain(|list| list.phase != Phase::Withdrawn);
    }

    fn find(&mut self, offset: usize) -> Option<&mut Tracked> {
        self.lists.iter_mut().find(|list| list.offset == offset)
    }
}

impl Tracked {
    fn feed(&mut self, text: &str, to: usize) {
        if let Some(json) = text.as_bytes().get(self.fed..to) {
            if self.json.feed(json).is_err() {
                self.phase = Phase::Stuck;
            }
            self.fed = to;
        }
    }

    /// The items whose JSON closed so far, in order.
    fn closed_items(&self) -> Vec<Value> {
        let Some(Value::Array(items)) = self.json.value() else {
            return Vec::new();
        };
        let paths = self.json.complete_paths();
        items
            .into_iter()
            .enumerate()
            .take_while(|(index, _)| paths.iter().any(|path| *path == format!("/{index}")))
            .map(|(_, item)| item)
            .collect()
    }

    fn next_partial(&mut self, profile: &Profile) -> Option<StreamItem> {
        match self.phase {
            Phase::Done | Phase::Stuck => return None,
            Phase::Withdrawn if !self.any => return None,
            Phase::Withdrawn => {
                self.any = false;
                self.shown = 0;
                return Some(match self.kind {
                    ListKind::Values => StreamItem::PartialSuggestedValues(Vec::new()),
                    ListKind::Actions => StreamItem::PartialSuggestedActions(Vec::new()),
                });
            }
            Phase::Writing => {}
        }
        // Nothing new was written since the last look.
        let version = self.json.version();
        if self.checked == Some(version) {
            return None;
        }
        self.checked = Some(version);
        let closed = Value::Array(self.closed_items());
        let shown = match self.kind {
            ListKind::Values => elements::suggested_values(&closed)
                .map(|values| self.more(values, StreamItem::PartialSuggestedValues)),
            ListKind::Actions => elements::suggested_actions(&closed, profile)
                .map(|(actions, _dropped)| self.more(actions, StreamItem::PartialSuggestedActions)),
        };
        // An item that fails its shape fails the whole list: show no more,
        // and the close takes down what was shown.
        shown.unwrap_or_else(|_| {
            self.phase = Phase::Stuck;
            None
        })
    }

    /// The partial for `items` when there are more than last shown.
    fn more<T>(&mut self, items: Vec<T>, wrap: fn(Vec<T>) -> StreamItem) -> Option<StreamItem> {
        if items.len() <= self.shown {
            return None;
        }
        self.shown = items.len();
        self.any = true;
        Some(wrap(items))
    }
}
