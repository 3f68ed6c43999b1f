//! Ending a turn that its own task could not end: its replica died (its
//! lease expired; reason `REPLICA_LOST`) or its store writes failed (reason
//! `STORE_UNAVAILABLE`, once the store is back).
//!
//! The turn's stored wire events are what its clients saw (but for at most
//! the `stream_ahead` events its replica could stream before storing them),
//! so they are also its partial answer: the text deltas make the assistant
//! message, the reasoning and the tool events are kept, and the wire log is
//! closed with an `error` and a `complete` (`success = false`) numbered
//! after every seq a client may have seen, which is what `ResumeTurn` then
//! delivers.

use std::{collections::HashMap, sync::Arc};

use parley_proto::{
    gateway::v1::{self as gw, chat_event::Event},
    parser::v1::ParseResponse,
};

use super::outcome::{self, CompleteParts, Ending, Failure};
use crate::{
    convert,
    durable::journal,
    store::{EventBody, Finalize, ReapInput, Reaped},
};

/// What a turn's stored wire events say it had produced.
#[derive(Debug, Default)]
struct Partial {
    conversation_id: String,
    text: String,
    reasoning: String,
    tools: Vec<gw::ToolRecord>,
}

fn partial(input: &ReapInput) -> Partial {
    let mut partial = Partial {
        conversation_id: input.conversation_id.clone(),
        ..Partial::default()
    };
    let mut calls: HashMap<String, usize> = HashMap::new();
    // Where the current model call's text and reasoning began: a
    // `step_reset` voids what came after.
    let mut step = (0, 0);
    for batch in &input.wire {
        let Some(events) = journal::decode(batch) else {
            tracing::error!(turn = %input.turn_id, first_seq = batch.first_seq, "a stored wire batch does not decode");
            continue;
        };
        for event in events.into_iter().filter_map(|event| event.event) {
            match event {
                Event::TextDelta(text) => partial.text.push_str(&text),
                Event::ReasoningDelta(text) => partial.reasoning.push_str(&text),
                Event::Status(status) if status.phase == gw::TurnPhase::Thinking as i32 => {
                    step = (partial.text.len(), partial.reasoning.len());
                }
                Event::StepReset(_) => {
                    partial.text.truncate(step.0);
                    partial.reasoning.truncate(step.1);
                }
                Event::ToolStart(start) => {
                    calls.insert(start.call_id.clone(), partial.tools.len());
                    partial.tools.push(gw::ToolRecord {
                        call_id: start.call_id,
                        name: start.name,
                        input: start.input,
                        error: "the tool call did not finish".into(),
                        ..Default::default()
                    });
                }
                Event::ToolComplete(done) => {
                    if let Some(record) = calls
                        .get(&done.call_id)
                        .and_then(|index| partial.tools.get_mut(*index))
                    {
                        record.success = done.success;
                        record.duration = done.duration;
                        record.output = done.result_text;
                        record.payload = done.payload;
                        record.error = done.error;
                    }
                }
                _ => {}
            }
        }
    }
    partial
}

/// The ending of a turn stopped by `failure`, built from what it stored.
pub fn reaped(input: &ReapInput, failure: &Failure) -> Reaped {
    let partial = partial(input);
    let ending = Ending::Failed(failure.clone());
    let complete = outcome::complete(
        CompleteParts {
            conversation_id: partial.conversation_id,
            turn_id: input.turn_id.clone(),
            user_message: String::new(),
            parsed: ParseResponse {
                message: partial.text.clone(),
                ..Default::default()
            },
            tools: partial.tools,
            structured: None,
            usage: None,
            diagnostics: Vec::new(),
        },
        &ending,
    );
    let error = failure.to_event();
    let mut events = Vec::new();
    if !partial.reasoning.is_empty() {
        events.push(EventBody::Reasoning {
            text: partial.reasoning,
        });
    }
    events.extend(convert::tool_events(&complete.tool_history));
    events.push(EventBody::AssistantMessage(convert::complete_to_stored(
        &complete,
        partial.text,
        ending.state(),
        Some(&error),
    )));
    let outcome = convert::encode_outcome(&complete);
    let last = [Event::Error(error), Event::Complete(Box::new(complete))];
    // After every seq a client may have seen: the stored events and those
    // the lost replica could stream ahead of them.
    let first_seq = input
        .last_event_seq
        .saturating_add(input.stream_ahead)
        .saturating_add(1);
    let wire: Vec<gw::ChatEvent> = (first_seq..)
        .zip(last)
        .map(|(seq, event)| gw::ChatEvent {
            seq,
            event: Some(event),
        })
        .collect();
    Reaped {
        state: ending.state(),
        retryable: failure.retryable,
        outcome: Some(outcome),
        events,
        wire: journal::encode(&wire).unwrap_or_else(|| crate::store::WireBatch {
            first_seq,
            last_seq: first_seq - 1,
            events: String::new(),
        }),
    }
}

/// The failure of a turn whose replica stopped renewing its lease.
pub fn replica_lost() -> Failure {
    Failure::new(
        "REPLICA_LOST",
        "the gateway replica running this turn stopped before the answer was complete",
        true,
    )
}

/// The failure of a turn whose writes the store refused.
pub fn store_unavailable() -> Failure {
    Failure::new(
        "STORE_UNAVAILABLE",
        "the conversation store failed; GetConversation shows what was saved",
        true,
    )
}

/// A [`Finalize`] that ends turns with `failure`.
pub fn finalize(failure: Failure) -> Finalize {
    Arc::new(move |input: &ReapInput| reaped(input, &failure))
}

#[cfg(test)]
mod tests {
    use parley_proto::gateway::v1::ChatEvent;

    use super::*;
    use crate::store::{TurnState, WireBatch};

    fn batch(events: Vec<Event>) -> WireBatch {
        let events: Vec<ChatEvent> = (1..)
            .zip(events)
            .map(|(seq, event)| ChatEvent {
                seq,
                event: Some(event),
            })
            .collect();
        journal::encode(&events).expect("events")
    }

    #[test]
    fn a_reset_steps_text_is_not_part_of_the_partial_answer() {
        let thinking = || {
            Event::Status(gw::TurnStatus {
                phase: gw::TurnPhase::Thinking as i32,
                ..Default::default()
            })
        };
        let input = ReapInput {
            owner: "alice".into(),
            conversation_id: "c".into(),
            turn_id: "t".into(),
            last_event_seq: 6,
            stream_ahead: 0,
            wire: vec![batch(vec![
                thinking(),
                Event::TextDelta("Checking. ".into()),
                thinking(),
                Event::TextDelta("Half a wro".into()),
                Event::StepReset(gw::StepReset::default()),
                Event::TextDelta("The answer".into()),
            ])],
        };
        let partial = partial(&input);
        assert_eq!(partial.text, "Checking. The answer");
    }

    #[test]
    fn the_stored_events_become_the_partial_answer_and_the_log_is_closed() {
        let input = ReapInput {
            owner: "alice".into(),
            conversation_id: "c".into(),
            turn_id: "t".into(),
            last_event_seq: 4,
            stream_ahead: 3,
            wire: vec![batch(vec![
                Event::TextDelta("Half ".into()),
                Event::ToolStart(gw::ToolStart {
                    call_id: "1".into(),
                    name: "clock".into(),
                    input: None,
                }),
                Event::ReasoningDelta("hmm".into()),
                Event::TextDelta("an answer".into()),
            ])],
        };
        let reaped = reaped(&input, &replica_lost());
        assert_eq!(reaped.state, TurnState::Failed);
        assert!(reaped.retryable);
        let Some(EventBody::AssistantMessage(answer)) = reaped.events.last() else {
            panic!("{:?}", reaped.events)
        };
        assert_eq!(answer.text, "Half an answer");
        assert_eq!(
            answer.error.as_ref().map(|e| e.reason.as_str()),
            Some("REPLICA_LOST")
        );
        assert!(matches!(reaped.events[0], EventBody::Reasoning { .. }));
        let wire = journal::decode(&reaped.wire).expect("decodes");
        // Numbered after the 4 stored events and the 3 the lost replica
        // could have streamed ahead of them.
        assert_eq!(wire.iter().map(|e| e.seq).collect::<Vec<_>>(), [8, 9]);
        let Some(Event::Complete(complete)) = &wire[1].event else {
            panic!("{wire:?}")
        };
        assert!(!complete.success);
        assert!(complete.message.starts_with("Half an answer"));
        assert_eq!(complete.tool_history.len(), 1);
    }
}
