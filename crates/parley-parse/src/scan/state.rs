//! What the engine remembers between calls: where it is in the current
//! element ([`State`]) and what it has found so far ([`Collected`]).
//!
//! `Collected` applies the cardinality rules: one suggested values list and
//! one suggested actions list (later ones are duplicates), and one custom
//! payload chosen by profile priority once the text has ended, so every
//! valid candidate is removed from the message as soon as it closes and the
//! losers become `Duplicate` diagnostics with their raw text.

use std::sync::Arc;

use serde_json::Value;

use crate::{
    elements::{self, direct},
    json::extract::{self, Lexer},
    model::{
        Diagnostic, DiagnosticKind, Parsed, Payload, StreamItem, SuggestedAction, SuggestedValue,
        TextToolCall,
    },
    profile::Profile,
    syntax::marker::Element,
};

/// An element whose closing bracket is being looked for.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Candidate {
    /// First byte of the text the element occupies (marker, fence or brace).
    pub start: usize,
    /// Position of its opening bracket.
    pub opener: usize,
    /// Whether a code fence opened before the bracket (a closing one is looked for).
    pub fenced: bool,
    /// What it is.
    pub what: What,
}

/// The kind of a candidate element.
#[derive(Debug, Clone, Copy)]
pub(crate) enum What {
    /// The JSON after marker `index` of the profile's marker set.
    Marker(usize),
    /// A text tool call whose name is in member `NAME_KEYS[key]`.
    Tool(usize),
}

/// Where the scanner is.
#[derive(Debug)]
pub(crate) enum State {
    /// Looking for the next trigger.
    Scan,
    /// After the marker `[start, end)`, looking for its JSON.
    AfterMarker {
        start: usize,
        end: usize,
        index: usize,
    },
    /// Inside an element, looking for its closing bracket.
    Element { cand: Candidate, lexer: Lexer },
    /// The element closed at `close` with nesting `depth` (when the lexer
    /// measured it); looking for a closing fence if needed.
    Closed {
        cand: Candidate,
        close: usize,
        depth: Option<usize>,
    },
}

/// An element read whole where it opens, which also told where it closes
/// (so the lexer need not go over it): `parse` meets every well-formed
/// element this way.
#[derive(Debug)]
pub(crate) enum Decoded {
    /// A custom payload's JSON, not yet checked against its schema.
    Payload(Value),
    /// A suggested values list, as [`direct::suggested_values`] reads it.
    Values(Vec<SuggestedValue>),
    /// A suggested actions list that drops no action, as
    /// [`direct::suggested_actions`] reads it.
    Actions(Vec<SuggestedAction>),
    /// A text tool call (name, arguments), as [`direct::tool_call`] reads it.
    Tool(String, Value),
}

/// Something to report, in order.
#[derive(Debug)]
pub(crate) enum Event {
    /// An element for the stream.
    Item(StreamItem),
    /// A diagnostic.
    Diagnostic(Diagnostic),
}

/// Something found that the final result owns: a stream shares it with
/// the item it handed out (so handing it out copies nothing), a parse keeps
/// it as it is (no `Arc` to allocate).
#[derive(Debug)]
enum Kept<T> {
    /// Nobody else holds it (a parse hands nothing out).
    Owned(T),
    /// Shared with the item a stream handed out for it.
    Shared(Arc<T>),
}

impl<T: Clone> Kept<T> {
    /// Keeps `found`; when `emit`, shares it and gives `share` a handle.
    fn new(found: T, emit: bool, share: impl FnOnce(Arc<T>)) -> Self {
        if emit {
            let shared = Arc::new(found);
            share(Arc::clone(&shared));
            Kept::Shared(shared)
        } else {
            Kept::Owned(found)
        }
    }

    fn get(&self) -> &T {
        match self {
            Kept::Owned(found) => found,
            Kept::Shared(found) => found,
        }
    }

    /// The value, moved out of its `Arc`: copied only if a handle handed
    /// out is still held.
    fn into_inner(self) -> T {
        match self {
            Kept::Owned(found) => found,
            Kept::Shared(found) => Arc::unwrap_or_clone(found),
        }
    }
}

#[derive(Debug)]
struct PayloadCandidate {
    priority: usize,
    payload: Kept<Payload>,
    /// Where its text is (`[offset, end)`), quoted only if it loses.
    offset: usize,
    end: usize,
}

/// The elements and diagnostics found so far.
#[derive(Debug, Default)]
pub(crate) struct Collected {
    values: Option<Kept<Vec<SuggestedValue>>>,
    actions: Option<Kept<Vec<SuggestedAction>>>,
    payloads: Vec<PayloadCandidate>,
    best: Option<usize>,
    tool_calls: Vec<Kept<TextToolCall>>,
    pub(crate) diagnostics: Vec<Diagnostic>,
}

fn diagnostic(
    kind: DiagnosticKind,
    element: &str,
    raw: &str,
    reason: String,
    offset: usize,
) -> Diagnostic {
    Diagnostic {
        kind,
        element: element.to_owned(),
        raw: raw.to_owned(),
        reason,
        offset,
    }
}

const FENCE_REPAIR: &str = "removed the code fence around the JSON";
const COMMAS_REPAIR: &str = "removed trailing commas";

/// An element's JSON read by `direct` when it can, else decoded (repairing
/// trailing commas) and read from the `Value` by `by_value`: the result
/// and whether commas were removed.
fn read<T>(
    json: &str,
    direct: impl FnOnce(&str) -> Option<T>,
    by_value: impl FnOnce(Value) -> Result<T, String>,
) -> Result<(T, bool), (DiagnosticKind, String)> {
    if let Some(read) = direct(json) {
        return Ok((read, false));
    }
    let (value, commas) = extract::decode_within_depth(json)?;
    let read = by_value(value).map_err(|reason| (DiagnosticKind::SchemaViolation, reason))?;
    Ok((read, commas))
}

impl Collected {
    /// Takes in a marker element whose JSON is `json` (within the depth
    /// limit), with what was read of it when it was read whole where it
    /// opens (without a repair); appends what to report, in order, to
    /// `events`.
    ///
    /// Suggestion lists are read straight from the text when they are
    /// well-formed ([`direct`]); everything else, and every list that is
    /// not, is decoded into a `Value` first, which decides and explains.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn accept(
        &mut self,
        profile: &Profile,
        element: Element,
        json: Result<(&str, Option<Decoded>), (DiagnosticKind, String)>,
        raw: &str,
        offset: usize,
        fenced: bool,
        emit: bool,
        events: &mut Vec<Event>,
    ) {
        let name = profile.element_name(element);
        let (json, decoded) = match json {
            Ok(json) => json,
            Err((kind, reason)) => {
                events.push(Event::Diagnostic(diagnostic(
                    kind, name, raw, reason, offset,
                )));
                return;
            }
        };
        let repaired = |events: &mut Vec<Event>, commas: bool| {
            let reason = match (fenced, commas) {
                (false, false) => return,
                (true, false) => FENCE_REPAIR.to_owned(),
                (false, true) => COMMAS_REPAIR.to_owned(),
                (true, true) => format!("{FENCE_REPAIR}; {COMMAS_REPAIR}"),
            };
            events.push(Event::Diagnostic(diagnostic(
                DiagnosticKind::Repaired,
                name,
                raw,
                reason,
                offset,
            )));
        };
        let duplicate = |what: &str| {
            let reason = format!("a response carries one {what} list; the first one is kept");
            Event::Diagnostic(diagnostic(
                DiagnosticKind::Duplicate,
                name,
                raw,
                reason,
                offset,
            ))
        };
        let failed = |(kind, reason): (DiagnosticKind, String)| {
            Event::Diagnostic(diagnostic(kind, name, raw, reason, offset))
        };
        match element {
            Element::SuggestedValues => match match decoded {
                Some(Decoded::Values(values)) => Ok((values, false)),
                _ => read(json, direct::suggested_values, |value| {
                    elements::suggested_values(&value)
                }),
            } {
                Err(error) => events.push(failed(error)),
                Ok(_) if self.values.is_some() => events.push(duplicate("suggested values")),
                Ok((values, commas)) => {
                    repaired(events, commas);
                    self.values = Some(Kept::new(values, emit, |shared| {
                        events.push(Event::Item(StreamItem::SuggestedValues(shared)));
                    }));
                }
            },
            Element::SuggestedActions => match match decoded {
                Some(Decoded::Actions(kept)) => Ok(((kept, Vec::new()), false)),
                _ => read(
                    json,
                    |json| direct::suggested_actions(json, profile).map(|kept| (kept, Vec::new())),
                    |value| elements::suggested_actions(&value, profile),
                ),
            } {
                Err(error) => events.push(failed(error)),
                Ok(_) if self.actions.is_some() => events.push(duplicate("suggested actions")),
                Ok(((actions, dropped), commas)) => {
                    repaired(events, commas);
                    for drop in dropped {
                        let reason = format!(
                            "action `{}` is not allowed by the profile; dropped",
                            drop.action
                        );
                        events.push(Event::Diagnostic(diagnostic(
                            DiagnosticKind::UnknownAction,
                            name,
                            &drop.raw,
                            reason,
                            offset,
                        )));
                    }
                    self.actions = Some(Kept::new(actions, emit, |shared| {
                        events.push(Event::Item(StreamItem::SuggestedActions(shared)));
                    }));
                }
            },
            Element::Payload(priority) => {
                let spec = &profile.payloads[priority];
                let read = match decoded {
                    Some(Decoded::Payload(value)) => elements::payload(value, spec)
                        .map(|payload| (payload, false))
                        .map_err(|reason| (DiagnosticKind::SchemaViolation, reason)),
                    _ => read(json, |_| None, |value| elements::payload(value, spec)),
                };
                match read {
                    Err(error) => events.push(failed(error)),
                    Ok((payload, commas)) => {
                        repaired(events, commas);
                        let better = self
                            .best
                            .is_none_or(|best| priority < self.payloads[best].priority);
                        if better {
                            self.best = Some(self.payloads.len());
                        }
                        // A stream hands out every payload that is the best
                        // so far.
                        let payload = Kept::new(payload, better && emit, |shared| {
                            events.push(Event::Item(StreamItem::CustomPayload(shared)));
                        });
                        self.payloads.push(PayloadCandidate {
                            priority,
                            payload,
                            offset,
                            end: offset + raw.len(),
                        });
                    }
                }
            }
        }
    }

    /// Whether the response's suggested values were found.
    pub(crate) fn has_values(&self) -> bool {
        self.values.is_some()
    }

    /// Whether the response's suggested actions were found.
    pub(crate) fn has_actions(&self) -> bool {
        self.actions.is_some()
    }

    /// How many valid payload candidates were found so far.
    pub(crate) fn payload_candidates(&self) -> usize {
        self.payloads.len()
    }

    /// Records a text tool call; returns a handle to it for the stream
    /// when `emit`.
    pub(crate) fn tool_call(
        &mut self,
        name: String,
        arguments: Value,
        raw: &str,
        emit: bool,
    ) -> Option<Arc<TextToolCall>> {
        let call = TextToolCall {
            id: format!("text_call_{}", self.tool_calls.len() + 1),
            name,
            arguments,
            raw: raw.to_owned(),
        };
        let mut handle = None;
        self.tool_calls
            .push(Kept::new(call, emit, |shared| handle = Some(shared)));
        handle
    }

    /// `Duplicate` diagnostics for the payload candidates that did not win;
    /// `text` is the whole input.
    pub(crate) fn payload_losers(&self, text: &str) -> Vec<Diagnostic> {
        let Some(best) = self.best else {
            return Vec::new();
        };
        let winner = &self.payloads[best].payload.get().payload_type;
        self.payloads
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != best)
            .map(|(_, loser)| {
                let reason = format!("a response carries one custom payload; `{winner}` was kept");
                diagnostic(
                    DiagnosticKind::Duplicate,
                    &loser.payload.get().payload_type,
                    text.get(loser.offset..loser.end).unwrap_or_default(),
                    reason,
                    loser.offset,
                )
            })
            .collect()
    }

    /// The final result around `message`. What a stream handed out is
    /// moved out of its `Arc`, copied only if a handle is still held.
    pub(crate) fn into_parsed(self, message: String) -> Parsed {
        let best = self.best;
        Parsed {
            message,
            suggested_values: self.values.map(Kept::into_inner).unwrap_or_default(),
            suggested_actions: self.actions.map(Kept::into_inner).unwrap_or_default(),
            custom_payload: best
                .and_then(|b| self.payloads.into_iter().nth(b))
                .map(|c| c.payload.into_inner()),
            // Most responses have no tool call: skipping the empty
            // vector's iterator spares `parse` about 750 instructions per
            // corpus pass (measured with callgrind).
            tool_calls: if self.tool_calls.is_empty() {
                Vec::new()
            } else {
                self.tool_calls.into_iter().map(Kept::into_inner).collect()
            },
            diagnostics: self.diagnostics,
        }
    }
}
