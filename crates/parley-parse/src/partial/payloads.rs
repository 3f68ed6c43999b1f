//! The partial values of the custom payloads in one stream: which payload
//! elements are being written, what each has shown so far, and when there
//! is something new to show.
//!
//! The engine tells [`PayloadPartials`] what happens to each payload element
//! (it opened, more of its JSON arrived, it closed valid or invalid, it was
//! withdrawn at the end); at the end of each engine run, [`PayloadPartials::drain`]
//! hands out at most one [`PartialPayload`] per payload, and only when the
//! value or its complete paths changed since the last one. A payload that
//! had partials and does not end as a valid candidate (invalid, never
//! closed, lost to a higher-priority payload) gets a last partial without
//! data, so a UI can take it down.

use super::PartialJson;
use crate::{
    limits::Limits,
    model::{PartialPayload, StreamItem},
};

/// The payload elements seen so far in one stream.
#[derive(Debug)]
pub(crate) struct PayloadPartials {
    limits: Limits,
    /// In the order they opened; withdrawn ones leave once their last
    /// partial is out.
    payloads: Vec<Tracked>,
}

#[derive(Debug)]
struct Tracked {
    /// The element's first byte (its marker): its identity.
    offset: usize,
    payload_type: String,
    json: PartialJson,
    /// The text before this position has been fed to `json`.
    fed: usize,
    /// The revision of the last partial handed out (0: none yet).
    revision: u32,
    /// `json.version()` when that partial was made.
    shown: Option<u64>,
    phase: Phase,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Its JSON is still being written.
    Writing,
    /// It closed and is a valid candidate.
    Valid,
    /// It will not be the payload: take it down.
    Withdrawn,
}

impl PayloadPartials {
    pub(crate) fn new(limits: Limits) -> Self {
        Self {
            limits,
            payloads: Vec::new(),
        }
    }

    /// The payload element at `offset` opened its JSON object at `opener`.
    pub(crate) fn open(&mut self, offset: usize, opener: usize, payload_type: &str) {
        self.payloads.push(Tracked {
            offset,
            payload_type: payload_type.to_owned(),
            json: PartialJson::new(self.limits),
            fed: opener,
            revision: 0,
            shown: None,
            phase: Phase::Writing,
        });
    }

    /// The JSON of the payload element at `offset` is written up to `to`.
    pub(crate) fn grow(&mut self, offset: usize, text: &str, to: usize) {
        if let Some(payload) = self.writing(offset) {
            payload.feed(text, to);
        }
    }

    /// The payload element at `offset` closed at `close`; `valid` when it
    /// became a payload candidate.
    pub(crate) fn close(&mut self, offset: usize, text: &str, close: usize, valid: bool) {
        if let Some(payload) = self.writing(offset) {
            if valid {
                payload.feed(text, close + 1);
                payload.phase = Phase::Valid;
            } else {
                payload.phase = Phase::Withdrawn;
            }
        }
    }

    /// The payload element at `offset` will not be the payload (it never
    /// closed, or it lost to a higher-priority one).
    pub(crate) fn withdraw(&mut self, offset: usize) {
        if let Some(payload) = self.payloads.iter_mut().find(|p| p.offset == offset) {
            payload.phase = Phase::Withdrawn;
        }
    }

    /// Appends a partial for each payload with something new to show.
    pub(crate) fn drain(&mut self, items: &mut Vec<StreamItem>) {
        for payload in &mut self.payloads {
            if let Some(partial) = payload.next_partial() {
                items.push(StreamItem::PartialPayload(partial));
            }
        }
        self.payloads.retain(|p| p.phase != Phase::Withdrawn);
    }

    fn writing(&mut self, offset: usize) -> Option<&mut Tracked> {
        self.payloads
            .last_mut()
            .filter(|p| p.offset == offset && p.phase == Phase::Writing)
    }
}

impl Tracked {
    fn feed(&mut self, text: &str, to: usize) {
        if let Some(json) = text.as_bytes().get(self.fed..to) {
            // A closer that stops keeps the value it had: the partials stop
            // growing, and the payload's final parse decides.
            let _ = self.json.feed(json);
            self.fed = to;
        }
    }

    /// The partial to hand out now, if any.
    fn next_partial(&mut self) -> Option<PartialPayload> {
        let data = match self.phase {
            // Withdrawn before anything was shown: nothing to take down.
            Phase::Withdrawn if self.revision == 0 => return None,
            Phase::Withdrawn => None,
            Phase::Writing | Phase::Valid => {
                let version = self.json.version();
                if self.shown == Some(version) {
                    return None;
                }
                self.shown = Some(version);
                match self.json.value() {
                    Some(serde_json::Value::Object(data)) => Some(data),
                    _ => return None,
                }
            }
        };
        let complete_paths = match data {
            Some(_) => self.json.complete_paths().to_vec(),
            None => Vec::new(),
        };
        self.revision += 1;
        Some(PartialPayload {
            payload_type: self.payload_type.clone(),
            offset: self.offset,
            revision: self.revision,
            data,
            complete_paths,
        })
    }
}
