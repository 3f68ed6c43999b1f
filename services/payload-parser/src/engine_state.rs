//! What the engine remembers between calls: where it is in the current
//! element ([`State`]) and what it has found so far ([`Collected`]).
//!
//! `Collected` applies the cardinality rules: one suggested values list and
//! one suggested actions list (later ones are duplicates), and one custom
//! payload chosen by profile priority once the text has ended, so every
//! valid candidate is removed from the message as soon as it closes and the
//! losers become `Duplicate` diagnostics with their raw text.

use serde_json::Value;

use crate::{
    elements,
    extract::Lexer,
    model::{
        Diagnostic, DiagnosticKind, Parsed, Payload, StreamItem, SuggestedAction, SuggestedValue,
        TextToolCall,
    },
    profile::{Element, Profile},
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

/// Something to report, in order.
#[derive(Debug)]
pub(crate) enum Event {
    /// An element for the stream.
    Item(StreamItem),
    /// A diagnostic.
    Diagnostic(Diagnostic),
}

#[derive(Debug)]
struct PayloadCandidate {
    priority: usize,
    payload: Payload,
    /// Where its text is (`[offset, end)`), quoted only if it loses.
    offset: usize,
    end: usize,
}

/// The elements and diagnostics found so far.
#[derive(Debug, Default)]
pub(crate) struct Collected {
    values: Option<Vec<SuggestedValue>>,
    actions: Option<Vec<SuggestedAction>>,
    payloads: Vec<PayloadCandidate>,
    best: Option<usize>,
    tool_calls: Vec<TextToolCall>,
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

impl Collected {
    /// Takes in a decoded marker element; returns what to report, in order.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn accept(
        &mut self,
        profile: &Profile,
        element: Element,
        decoded: Result<Value, (DiagnosticKind, String)>,
        raw: &str,
        offset: usize,
        repairs: &[&str],
        emit: bool,
    ) -> Vec<Event> {
        let name = profile.element_name(element);
        let value = match decoded {
            Ok(value) => value,
            Err((kind, reason)) => {
                return vec![Event::Diagnostic(diagnostic(
                    kind, name, raw, reason, offset,
                ))];
            }
        };
        let mut events = Vec::new();
        let repaired = |events: &mut Vec<Event>| {
            if !repairs.is_empty() {
                let reason = repairs.join("; ");
                events.push(Event::Diagnostic(diagnostic(
                    DiagnosticKind::Repaired,
                    name,
                    raw,
                    reason,
                    offset,
                )));
            }
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
        let violation = |reason: String| {
            Event::Diagnostic(diagnostic(
                DiagnosticKind::SchemaViolation,
                name,
                raw,
                reason,
                offset,
            ))
        };
        match element {
            Element::SuggestedValues => match elements::suggested_values(&value) {
                Err(reason) => events.push(violation(reason)),
                Ok(_) if self.values.is_some() => events.push(duplicate("suggested values")),
                Ok(values) => {
                    repaired(&mut events);
                    if emit {
                        events.push(Event::Item(StreamItem::SuggestedValues(values.clone())));
                    }
                    self.values = Some(values);
                }
            },
            Element::SuggestedActions => match elements::suggested_actions(&value, profile) {
                Err(reason) => events.push(violation(reason)),
                Ok(_) if self.actions.is_some() => events.push(duplicate("suggested actions")),
                Ok((actions, dropped)) => {
                    repaired(&mut events);
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
                    if emit {
                        events.push(Event::Item(StreamItem::SuggestedActions(actions.clone())));
                    }
                    self.actions = Some(actions);
                }
            },
            Element::Payload(priority) => {
                match elements::payload(value, &profile.payloads[priority]) {
                    Err(reason) => events.push(violation(reason)),
                    Ok(payload) => {
                        repaired(&mut events);
                        let better = self
                            .best
                            .is_none_or(|best| priority < self.payloads[best].priority);
                        if better {
                            self.best = Some(self.payloads.len());
                            if emit {
                                events
                                    .push(Event::Item(StreamItem::CustomPayload(payload.clone())));
                            }
                        }
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
        events
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

    /// Records a text tool call; returns a copy for the stream when `emit`.
    pub(crate) fn tool_call(
        &mut self,
        name: String,
        arguments: Value,
        raw: &str,
        emit: bool,
    ) -> Option<TextToolCall> {
        let call = TextToolCall {
            id: format!("text_call_{}", self.tool_calls.len() + 1),
            name,
            arguments,
            raw: raw.to_owned(),
        };
        let copy = emit.then(|| call.clone());
        self.tool_calls.push(call);
        copy
    }

    /// `Duplicate` diagnostics for the payload candidates that did not win;
    /// `text` is the whole input.
    pub(crate) fn payload_losers(&self, text: &str) -> Vec<Diagnostic> {
        let Some(best) = self.best else {
            return Vec::new();
        };
        let winner = &self.payloads[best].payload.payload_type;
        self.payloads
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != best)
            .map(|(_, loser)| {
                let reason = format!("a response carries one custom payload; `{winner}` was kept");
                diagnostic(
                    DiagnosticKind::Duplicate,
                    &loser.payload.payload_type,
                    text.get(loser.offset..loser.end).unwrap_or_default(),
                    reason,
                    loser.offset,
                )
            })
            .collect()
    }

    /// The final result around `message`.
    pub(crate) fn into_parsed(self, message: String) -> Parsed {
        let best = self.best;
        Parsed {
            message,
            suggested_values: self.values.unwrap_or_default(),
            suggested_actions: self.actions.unwrap_or_default(),
            custom_payload: best
                .and_then(|b| self.payloads.into_iter().nth(b))
                .map(|c| c.payload),
            tool_calls: self.tool_calls,
            diagnostics: self.diagnostics,
        }
    }
}
