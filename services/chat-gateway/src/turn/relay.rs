//! Relays the runner's events to the client as `ChatEvent`s.
//!
//! Text deltas go through the [`TextCleaner`] (markers never reach the
//! client); reasoning, structured and tool events pass through as they are;
//! runner phases become turn phases. Events reach the client in the order
//! the runner sent them: before any other event, the cleaned text of what
//! came before it is handed out ([`TextCleaner::sync`]). Text deltas that
//! queued up while the gateway was busy travel on together (to the parser
//! and to the client), which sheds per-event work under load and costs
//! nothing when idle. The loop ends when the runner finishes or fails, when the turn is stopped
//! (the runner's stream is then dropped at once, which cancels the model
//! call and the tools), or when the deadline passes.
//!
//! What the client is shown of the answer's elements while they are written
//! comes out of the cleaner with the text (`payload_partial`,
//! `suggested_values`, `suggested_actions`; see [`super::partials`]); a
//! structured answer's text is also read as it streams into
//! `structured_partial` events. Structured deltas that queued up travel on
//! together like text deltas: one `structured_delta` and at most one
//! `structured_partial` per flush.
//!
//! The answer (its text and structured text) is capped: the delta that
//! would take it past `max_answer_bytes` is cut at the cap, handed on, and
//! the relay ends with [`RunEnd::AnswerTooLarge`], dropping the runner's
//! stream (which cancels the call). What a `step_reset` takes back no
//! longer counts.
//!
//! A runner `step_reset` (the model call failed midway and runs again, with
//! `mid_answer_failover`) discards what that call streamed: the cleaner
//! drops the step's text and re-parses what came before it, the reasoning
//! and structured text go back to where the step began, and the client gets
//! a `step_reset`. Tool records and usage stay (the runner does not run
//! tools again, and the failed call's usage counts).
//!
//! A turn with tools that can have effects (gRPC, MCP; the built-ins only
//! read the clock and do arithmetic) runs with `RunFenced`: before each
//! round of tool calls the runner sends `dispatch_pending` and waits. The
//! relay answers from
//! the store ([`Fence`]): allowed only while this replica still holds the
//! turn's unexpired lease (renewed by the check), so a replica that stalled
//! past its lease, whose turn another replica may have ended and the client
//! retried elsewhere, never starts another tool for it.

use std::collections::HashMap;

use futures::FutureExt;
use parley_proto::{
    gateway::v1::{self as gw, chat_event::Event},
    runner::v1::{self as runner, run_event},
};
use tokio::{sync::mpsc, time::Instant};
use tokio_util::sync::CancellationToken;

use super::{cleaner::TextCleaner, parse::short, partials::StructuredPartials};
use crate::{convert::TurnIds, durable::journal::Journal, store::Store};

/// How the runner's stream ended.
#[derive(Debug)]
pub enum RunEnd {
    /// The runner finished normally.
    Finished(Box<runner::Finished>),
    /// The runner reported an error.
    Failed(runner::Error),
    /// The runner paused the turn: tool calls wait for the user's
    /// decisions (see [`super::pause`]).
    Paused(Box<runner::InputRequired>),
    /// The stream broke or ended without `finished`.
    Broken(String),
    /// The turn was stopped (cancel, replacement or shutdown).
    Stopped,
    /// The deadline passed.
    DeadlineExceeded,
    /// The answer reached its cap; what fitted was relayed.
    AnswerTooLarge,
    /// The runner was about to start tool calls and this replica no longer
    /// held the turn's lease: they did not start.
    LeaseLost,
}

/// How a turn run with `RunFenced` answers the runner before its tool
/// calls: from the turn's lease in the store.
#[derive(Debug)]
pub struct Fence {
    /// The call's messages after its `RunRequest`.
    pub decisions: mpsc::Sender<runner::RunFencedRequest>,
    /// The store of the turn's lease.
    pub store: Store,
    /// This replica.
    pub replica: String,
    /// The lease's length (`turns.lease_ttl`, ms), renewed by each check.
    pub lease_ttl_ms: i64,
}

impl Fence {
    /// Whether the tool calls of model call `iteration` of `turn_id` may
    /// start; the runner is told either way. A store that cannot answer
    /// denies.
    async fn decide(&self, turn_id: &str, iteration: u32) -> bool {
        let allowed = match self
            .store
            .hold_for_dispatch(turn_id, &self.replica, self.lease_ttl_ms)
            .await
        {
            Ok(held) => held,
            Err(error) => {
                tracing::warn!(%error, turn = %turn_id, "cannot check the turn's lease before its tool calls: they do not start");
                false
            }
        };
        let decision = runner::RunFencedRequest {
            message: Some(runner::run_fenced_request::Message::Decision(
                runner::DispatchDecision { iteration, allowed },
            )),
        };
        // A runner that is gone starts nothing either.
        let _ = self.decisions.send(decision).await;
        allowed
    }
}

/// Everything a relay gathered.
#[derive(Debug)]
pub struct Relayed {
    /// How it ended.
    pub end: RunEnd,
    /// The cleaner, to be finished by the caller.
    pub cleaner: Box<TextCleaner>,
    /// The accumulated reasoning.
    pub reasoning: String,
    /// The accumulated structured text.
    pub structured: String,
    /// Tool calls in the order they started.
    pub tools: Vec<gw::ToolRecord>,
    /// Usage summed over the model calls seen.
    pub usage: gw::Usage,
}

fn phase(phase: i32) -> Option<gw::TurnPhase> {
    match runner::Phase::try_from(phase).ok()? {
        runner::Phase::ModelCall => Some(gw::TurnPhase::Thinking),
        runner::Phase::Tools => Some(gw::TurnPhase::RunningTools),
        runner::Phase::Retrying | runner::Phase::Fallback => Some(gw::TurnPhase::Retrying),
        runner::Phase::Started | runner::Phase::Unspecified => None,
    }
}

#[derive(Default)]
struct ToolLog {
    records: Vec<gw::ToolRecord>,
    index: HashMap<String, usize>,
}

impl ToolLog {
    fn start(&mut self, start: &runner::ToolStart) {
        self.index.insert(start.call_id.clone(), self.records.len());
        self.records.push(gw::ToolRecord {
            call_id: start.call_id.clone(),
            name: start.name.clone(),
            input: start.input.clone(),
            success: false,
            duration: None,
            output: String::new(),
            payload: None,
            error: "the tool call did not finish".into(),
        });
    }

    fn complete(&mut self, done: &runner::ToolComplete) {
        let position = match self.index.get(&done.call_id) {
            Some(position) => *position,
            None => {
                self.start(&runner::ToolStart {
                    call_id: done.call_id.clone(),
                    name: done.name.clone(),
                    input: None,
                    source: 0,
                });
                self.records.len() - 1
            }
        };
        if let Some(record) = self.records.get_mut(position) {
            record.success = done.success;
            record.duration = done.duration;
            record.output = done.result_text.clone();
            record.payload = done.payload.clone();
            record.error = done.error.clone();
        }
    }
}

/// What reading the runner's stream gave.
type Message = Result<Option<runner::RunEvent>, tonic::Status>;

/// Appends to `text` the deltas of the same kind as the one just read
/// (`same` says whether an event is one, and its text) that the runner has
/// already sent, so they travel on as one flush: one message to the parser,
/// one delta and at most one partial to the client. Returns the first
/// message read that is not such a delta. Never waits (`next` reads what
/// has already arrived, `None` when nothing has): under load this batches
/// what queued up, and an idle stream loses no time.
fn take_ready(
    mut next: impl FnMut() -> Option<Message>,
    text: &mut String,
    same: fn(&run_event::Event) -> Option<&str>,
) -> Option<Message> {
    loop {
        let message = next()?;
        if let Ok(Some(runner::RunEvent {
            event: Some(event), ..
        })) = &message
            && let Some(more) = same(event)
        {
            text.push_str(more);
            continue;
        }
        return Some(message);
    }
}

fn text_delta(event: &run_event::Event) -> Option<&str> {
    match event {
        run_event::Event::TextDelta(text) => Some(text),
        _ => None,
    }
}

fn structured_delta(event: &run_event::Event) -> Option<&str> {
    match event {
        run_event::Event::StructuredDelta(text) => Some(text),
        _ => None,
    }
}

/// Hands out the cleaned text of everything the runner wrote before an
/// event, before that event: the client sees text and tool events in the
/// order the model produced them.
async fn text_first(cleaner: &mut TextCleaner, sink: &Journal) {
    cleaner.sync().await;
    push_all(sink, cleaner.take_ready());
}

fn push_all(sink: &Journal, events: Vec<Event>) {
    for event in events {
        sink.push(event);
    }
}

/// Where the current step's reasoning and structured text begin.
#[derive(Debug, Default, Clone, Copy)]
struct StepStart {
    reasoning: usize,
    structured: usize,
    text: usize,
}

/// Cuts `text` to at most `room` bytes, on a character boundary; says
/// whether it had to.
fn cut_to(text: &mut String, room: usize) -> bool {
    if text.len() <= room {
        return false;
    }
    let end = text.floor_char_boundary(room);
    text.truncate(end);
    true
}

/// What ends a relay besides the runner: the turn's deadline and the
/// answer's cap.
#[derive(Debug, Clone, Copy)]
pub struct Bounds {
    /// The turn's deadline.
    pub deadline: Instant,
    /// `turns.max_answer_bytes`.
    pub max_answer_bytes: usize,
}

/// Relays until the runner's stream ends, the turn is stopped, the
/// deadline passes or the answer reaches `max_answer_bytes`. The runner's
/// stream is dropped before this returns.
pub async fn relay(
    mut stream: tonic::Streaming<runner::RunEvent>,
    mut cleaner: Box<TextCleaner>,
    sink: &Journal,
    ids: &TurnIds,
    stop: &CancellationToken,
    Bounds {
        deadline,
        max_answer_bytes,
    }: Bounds,
    fence: Option<&Fence>,
) -> Relayed {
    let mut reasoning = String::new();
    let mut structured = String::new();
    let mut tools = ToolLog::default();
    let mut usage = gw::Usage::default();
    let mut structured_partials = StructuredPartials::default();
    let mut step = StepStart::default();
    // Bytes of answer text handed to the cleaner (the current step's
    // included).
    let mut text_bytes = 0usize;
    let expired = tokio::time::sleep_until(deadline);
    tokio::pin!(expired);
    // A message read ahead while batching text deltas.
    let mut held: Option<Message> = None;
    let end = loop {
        let message = match held.take() {
            Some(message) => message,
            None => tokio::select! {
                biased;
                () = stop.cancelled() => break RunEnd::Stopped,
                () = &mut expired => break RunEnd::DeadlineExceeded,
                events = cleaner.next() => {
                    push_all(sink, events);
                    continue;
                }
                message = stream.message() => message,
            },
        };
        let event = match message {
            Ok(Some(event)) => event.event,
            Ok(None) => break RunEnd::Broken("the runner's stream ended without a result".into()),
            Err(status) => break RunEnd::Broken(short(&status)),
        };
        match event {
            Some(run_event::Event::TextDelta(mut text)) => {
                held = take_ready(|| stream.message().now_or_never(), &mut text, text_delta);
                let room = max_answer_bytes.saturating_sub(text_bytes + structured.len());
                let over = cut_to(&mut text, room);
                text_bytes += text.len();
                if !text.is_empty() {
                    cleaner.push(&text).await;
                }
                if over {
                    break RunEnd::AnswerTooLarge;
                }
            }
            Some(run_event::Event::ReasoningDelta(text)) => {
                text_first(&mut cleaner, sink).await;
                reasoning.push_str(&text);
                sink.push(Event::ReasoningDelta(text));
            }
            Some(run_event::Event::StructuredDelta(mut text)) => {
                text_first(&mut cleaner, sink).await;
                // One flush: the deltas that queued up travel as one, with
                // at most one `structured_partial` (no event storm).
                held = take_ready(
                    || stream.message().now_or_never(),
                    &mut text,
                    structured_delta,
                );
                let room = max_answer_bytes.saturating_sub(text_bytes + structured.len());
                let over = cut_to(&mut text, room);
                structured.push_str(&text);
                let partial = structured_partials.feed(&text);
                sink.push(Event::StructuredDelta(text));
                if let Some(partial) = partial {
                    sink.push(partial);
                }
                if over {
                    break RunEnd::AnswerTooLarge;
                }
            }
            Some(run_event::Event::ToolStart(start)) => {
                text_first(&mut cleaner, sink).await;
                tools.start(&start);
                sink.push(Event::ToolStart(gw::ToolStart {
                    call_id: start.call_id,
                    name: start.name,
                    input: start.input,
                }));
            }
            Some(run_event::Event::ToolProgress(progress)) => {
                text_first(&mut cleaner, sink).await;
                sink.push(Event::ToolProgress(gw::ToolProgress {
                    call_id: progress.call_id,
                    stage: progress.stage,
                    message: progress.message,
                    fraction: progress.fraction,
                }));
            }
            Some(run_event::Event::ToolComplete(done)) => {
                text_first(&mut cleaner, sink).await;
                tools.complete(&done);
                sink.push(Event::ToolComplete(Box::new(gw::ToolComplete {
                    call_id: done.call_id,
                    name: done.name,
                    success: done.success,
                    duration: done.duration,
                    result_text: done.result_text,
                    payload: done.payload,
                    error: done.error,
                })));
            }
            Some(run_event::Event::Status(status)) => {
                if let Some(phase) = phase(status.phase) {
                    text_first(&mut cleaner, sink).await;
                    if status.phase == runner::Phase::ModelCall as i32 {
                        cleaner.mark_step(status.iteration);
                        step = StepStart {
                            reasoning: reasoning.len(),
                            structured: structured.len(),
                            text: text_bytes,
                        };
                    }
                    sink.push(ids.status(phase, status.message));
                }
            }
            Some(run_event::Event::StepReset(reset)) => {
                let taken_down = cleaner.reset_step().await;
                reasoning.truncate(step.reasoning);
                structured.truncate(step.structured);
                text_bytes = step.text;
                structured_partials.restart(&structured);
                sink.push(Event::StepReset(gw::StepReset {
                    step: reset.iteration,
                    reason: reset.reason,
                    message: reset.message,
                }));
                push_all(sink, taken_down);
            }
            Some(run_event::Event::Usage(call)) => super::usage::add_call(&mut usage, &call),
            Some(run_event::Event::Finished(finished)) => break RunEnd::Finished(finished),
            Some(run_event::Event::Error(error)) => break RunEnd::Failed(error),
            Some(run_event::Event::InputRequired(input)) => break RunEnd::Paused(Box::new(input)),
            // Sent only to `RunFenced` calls, which have a fence.
            Some(run_event::Event::DispatchPending(pending)) => {
                if let Some(fence) = fence
                    && !fence.decide(&ids.turn_id, pending.iteration).await
                {
                    tracing::warn!(turn = %ids.turn_id, "this replica lost the turn's lease: its tool calls do not start");
                    break RunEnd::LeaseLost;
                }
            }
            None => {}
        }
    };
    match end {
        // The runner is done: read its trailers aside, so the call's span
        // and metrics get the real status.
        RunEnd::Finished(_) | RunEnd::Failed(_) | RunEnd::Paused(_) => {
            parley_grpc::telemetry::rpc::client::finish_in_background(stream);
        }
        // Dropping the stream cancels the call: the runner stops the model
        // and the tools.
        _ => drop(stream),
    }
    Relayed {
        end,
        cleaner,
        reasoning,
        structured,
        tools: tools.records,
        usage,
    }
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;

    use super::*;

    fn message(event: run_event::Event) -> Message {
        Ok(Some(runner::RunEvent {
            seq: 0,
            event: Some(event),
        }))
    }

    #[test]
    fn a_delta_past_the_cap_is_cut_on_a_character_boundary() {
        let mut text = "abcé".to_owned(); // é takes bytes 3 and 4
        assert!(cut_to(&mut text, 4));
        assert_eq!(text, "abc");
        let mut fits = "abc".to_owned();
        assert!(!cut_to(&mut fits, 3));
        assert_eq!(fits, "abc");
    }

    #[test]
    fn deltas_that_queued_up_travel_as_one_flush() {
        let mut arrived: VecDeque<Message> = [
            run_event::Event::StructuredDelta("\"b".into()),
            run_event::Event::StructuredDelta("\": 1}".into()),
            run_event::Event::TextDelta("not structured".into()),
            run_event::Event::StructuredDelta("after".into()),
        ]
        .into_iter()
        .map(message)
        .collect();
        let mut text = "{\"a\": 0, ".to_owned();
        let held = take_ready(|| arrived.pop_front(), &mut text, structured_delta);
        assert_eq!(text, "{\"a\": 0, \"b\": 1}");
        assert!(matches!(
            held,
            Some(Ok(Some(runner::RunEvent {
                event: Some(run_event::Event::TextDelta(_)),
                ..
            })))
        ));
        assert_eq!(arrived.len(), 1, "stops at the first other event");
        // The flush's one partial shows the whole batch.
        let mut partials = StructuredPartials::default();
        let Some(Event::StructuredPartial(partial)) = partials.feed(&text) else {
            panic!("one partial for the flush")
        };
        assert_eq!(partial.revision, 1);
        assert_eq!(partial.complete_paths, [String::new()]);
        // Nothing arrived yet: no wait, nothing held.
        let mut text = String::new();
        assert!(take_ready(|| None, &mut text, text_delta).is_none());
        assert!(text.is_empty());
    }
}
