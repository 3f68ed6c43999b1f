//! What a turn reports, in domain form, and the sink that numbers it.
//!
//! The loop and the tools emit [`EventKind`]s through an [`EventSink`], which
//! stamps each with the next sequence number (1, 2, 3... without gaps) and
//! keeps the concatenation of every text delta so that `Finished.text` and
//! `Error.partial_text` are exactly what the client received. The service
//! turns the numbered [`Event`]s into `RunEvent`s at the edge.

use std::time::Duration;

use parley_proto::parser::v1::{Payload, StructuredResult};
use serde_json::Value;
use tokio::sync::mpsc;

use crate::provider::{Message, ModelChoice, ToolCall, Usage};

/// A numbered event.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    /// Sequence number within the turn, from 1.
    pub seq: u64,
    /// What happened.
    pub kind: EventKind,
}

/// Everything a turn can report.
#[derive(Debug, Clone, PartialEq)]
pub enum EventKind {
    /// A phase change.
    Status(Status),
    /// The next piece of the answer's text.
    TextDelta(String),
    /// The next piece of the model's reasoning.
    ReasoningDelta(String),
    /// The next piece of a structured (JSON) answer.
    StructuredDelta(String),
    /// A tool call starts.
    ToolStart(ToolStart),
    /// A running tool reports progress.
    ToolProgress(ToolProgress),
    /// A tool call ended.
    ToolComplete(ToolComplete),
    /// Token usage of one model call.
    Usage(UsageReport),
    /// The turn ended normally; last.
    Finished(Finished),
    /// The turn failed; last.
    Error(TurnError),
    /// The current model call failed midway and runs again: what it
    /// streamed is void.
    StepReset(StepReset),
    /// Tool calls wait for the client's decision (`RunFenced` only).
    DispatchPending(DispatchPending),
    /// The turn pauses: tool calls wait for the user's approval or for the
    /// app to run them; last.
    InputRequired(InputRequired),
}

/// The turn paused after model call `iteration`: the calls that wait, and
/// what its continuation needs.
#[derive(Debug, Clone, PartialEq)]
pub struct InputRequired {
    /// The model call that made the waiting calls (1-based); the
    /// continuation's `iterations_done`.
    pub iteration: u32,
    /// The calls that wait, in the model's order.
    pub pending: Vec<PendingToolCall>,
    /// The messages this run added to the conversation, which the
    /// continuation appends to its request's: tool results of the calls
    /// it settled, model messages and tool results of its rounds, ending
    /// with the model message that made the waiting calls and the results
    /// of its calls that ran.
    pub messages: Vec<Message>,
    /// Usage summed over this run's model calls.
    pub usage: Usage,
    /// The answer text this run streamed.
    pub text: String,
}

/// A tool call that waits for a decision.
#[derive(Debug, Clone, PartialEq)]
pub struct PendingToolCall {
    /// The call, as the model made it.
    pub call: ToolCall,
    /// Why it waits.
    pub reason: PendingReason,
}

/// Why a tool call waits instead of running.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PendingReason {
    /// The tool needs the user's approval.
    Approval,
    /// The app runs the tool.
    Client,
}

/// The tool calls of a model call, announced before they start to a client
/// that must allow them ([`EventSink::permit_dispatch`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DispatchPending {
    /// Which model call asked for them (1-based).
    pub iteration: u32,
    /// Their call ids.
    pub call_ids: Vec<String>,
}

/// A client's answer to a [`DispatchPending`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DispatchDecision {
    /// The iteration it answers.
    pub iteration: u32,
    /// Whether the calls may start.
    pub allowed: bool,
}

/// A model call failed after streaming part of its answer and is tried
/// again (`mid_answer_failover`).
#[derive(Debug, Clone, PartialEq)]
pub struct StepReset {
    /// Which model call of the turn (1-based).
    pub iteration: u32,
    /// A stable UPPER_SNAKE reason of the failure.
    pub reason: String,
    /// A human-readable message.
    pub message: String,
}

/// Phases of a turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// The request was accepted.
    Started,
    /// A model call is in flight.
    ModelCall,
    /// Tools are running.
    Tools,
    /// A model call failed before answering and is retried.
    Retrying,
    /// The next configured model is tried.
    Fallback,
}

/// A phase change.
#[derive(Debug, Clone, PartialEq)]
pub struct Status {
    /// The phase.
    pub phase: Phase,
    /// A human-readable message.
    pub message: String,
    /// Which model call of the turn (1-based; 0 before the first).
    pub iteration: u32,
    /// The model in use.
    pub model: Option<ModelChoice>,
}

/// Where a tool call came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallSource {
    /// The provider's native tool-calling API.
    Native,
    /// Written into the model's text and found by the payload parser.
    Text,
}

/// A tool call starts.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolStart {
    /// The call id.
    pub call_id: String,
    /// The tool name.
    pub name: String,
    /// The arguments.
    pub input: Value,
    /// Native or text-embedded.
    pub source: CallSource,
}

/// A running tool reports progress.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolProgress {
    /// The call id.
    pub call_id: String,
    /// A short machine-friendly stage name.
    pub stage: String,
    /// A human-readable message.
    pub message: String,
    /// Completion between 0 and 1, when known.
    pub fraction: Option<f32>,
}

/// A tool call ended.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolComplete {
    /// The call id.
    pub call_id: String,
    /// The tool name.
    pub name: String,
    /// False when the tool failed, timed out, was unknown or got bad input.
    pub success: bool,
    /// How long the call took.
    pub duration: Duration,
    /// The text given to the model.
    pub result_text: String,
    /// A typed payload for the UI, passed through from the tool unchanged.
    pub payload: Option<Payload>,
    /// Why the call failed.
    pub error: String,
    /// A stable reason for the failure (`UNKNOWN_TOOL`, `INVALID_INPUT`...).
    pub error_reason: String,
}

/// Usage of one model call (or of the turn, in `Finished`).
#[derive(Debug, Clone, PartialEq)]
pub struct UsageReport {
    /// The token counts.
    pub usage: Usage,
    /// The model it belongs to.
    pub model: Option<ModelChoice>,
}

/// Why a turn ended normally.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    /// The model finished its answer.
    EndTurn,
    /// The output token limit cut the answer.
    MaxTokens,
    /// A stop sequence was produced.
    StopSequence,
    /// The provider's content filter stopped the answer.
    ContentFilter,
    /// The model refused.
    Refusal,
    /// The turn reached `Limits::max_iterations`.
    MaxIterations,
    /// The turn was cancelled.
    Cancelled,
}

/// The turn ended normally.
#[derive(Debug, Clone, PartialEq)]
pub struct Finished {
    /// Why it ended.
    pub stop_reason: StopReason,
    /// The provider's own finish value.
    pub raw_stop_reason: String,
    /// Exactly the concatenation of every text delta of the turn.
    pub text: String,
    /// The structured answer, when a schema was set.
    pub structured: Option<StructuredResult>,
    /// Usage summed over the turn's model calls.
    pub usage: Usage,
    /// How many model calls the turn made.
    pub iterations: u32,
    /// The model that answered, as the provider reported it.
    pub response_model: String,
    /// The provider's id of the last response.
    pub response_id: String,
    /// The most earlier turns of the conversation a model call left out
    /// of its history to fit its model's context window (0: none).
    pub history_turns_left_out: u32,
}

/// The turn failed.
#[derive(Debug, Clone, PartialEq)]
pub struct TurnError {
    /// The gRPC code that best describes the failure.
    pub code: tonic::Code,
    /// A stable UPPER_SNAKE reason.
    pub reason: String,
    /// A human-readable message.
    pub message: String,
    /// Whether the same request may succeed if sent again.
    pub retryable: bool,
    /// The answer's text produced before the failure.
    pub partial_text: String,
    /// The provider's raw error text.
    pub provider_detail: String,
    /// How long to wait before retrying, when the provider said so.
    pub retry_after: Option<Duration>,
}

/// The receiving side is gone: the client dropped the stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the event stream was closed by the client")]
pub struct Closed;

/// Numbers events and sends them to the response stream.
///
/// Events travel boxed: a channel keeps its slots in blocks of 32 for as
/// long as the turn runs, and an [`Event`] is a few hundred bytes (its
/// largest kinds), a box eight.
#[derive(Debug)]
pub struct EventSink {
    tx: mpsc::Sender<Box<Event>>,
    seq: u64,
    text: String,
    /// The client's dispatch decisions, when it must allow tool calls
    /// (`RunFenced`); `None`: tools start without asking (`Run`).
    decisions: Option<mpsc::Receiver<DispatchDecision>>,
}

impl EventSink {
    /// A sink sending to `tx`.
    pub fn new(tx: mpsc::Sender<Box<Event>>) -> Self {
        Self {
            tx,
            seq: 0,
            text: String::new(),
            decisions: None,
        }
    }

    /// A sink sending to `tx` whose client must allow every round of tool
    /// calls, with the decisions it sends on `decisions`.
    pub fn fenced(
        tx: mpsc::Sender<Box<Event>>,
        decisions: mpsc::Receiver<DispatchDecision>,
    ) -> Self {
        Self {
            decisions: Some(decisions),
            ..Self::new(tx)
        }
    }

    /// Whether the tool calls `call_ids` of model call `iteration` may
    /// start: at once without a fence; otherwise after a
    /// [`DispatchPending`] event, the client's decision for `iteration`
    /// (false when it denies them or stops answering).
    pub async fn permit_dispatch(
        &mut self,
        iteration: u32,
        call_ids: Vec<String>,
    ) -> Result<bool, Closed> {
        if self.decisions.is_none() {
            return Ok(true);
        }
        self.emit(EventKind::DispatchPending(DispatchPending {
            iteration,
            call_ids,
        }))
        .await?;
        let Some(decisions) = self.decisions.as_mut() else {
            return Ok(true);
        };
        while let Some(decision) = decisions.recv().await {
            if decision.iteration == iteration {
                return Ok(decision.allowed);
            }
        }
        Ok(false)
    }

    /// Sends the next event; waits while the client is slow (backpressure).
    pub async fn emit(&mut self, kind: EventKind) -> Result<(), Closed> {
        if let EventKind::TextDelta(delta) = &kind {
            self.text.push_str(delta);
        }
        self.seq += 1;
        self.tx
            .send(Box::new(Event {
                seq: self.seq,
                kind,
            }))
            .await
            .map_err(|_| Closed)
    }

    /// Everything sent as text deltas so far.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Forgets the text sent after its first `len` bytes (a `StepReset`
    /// voided it), so `Finished.text` is what the client keeps.
    pub fn truncate_text(&mut self, len: usize) {
        if self.text.is_char_boundary(len) {
            self.text.truncate(len);
        }
    }

    /// The number of events sent so far.
    pub fn sent(&self) -> u64 {
        self.seq
    }

    /// Resolves when the receiver is dropped.
    pub async fn closed(&self) {
        self.tx.closed().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn numbers_events_and_keeps_text() {
        let (tx, mut rx) = mpsc::channel(8);
        let mut sink = EventSink::new(tx);
        sink.emit(EventKind::TextDelta("Hel".into()))
            .await
            .expect("should succeed");
        sink.emit(EventKind::ReasoningDelta("hmm".into()))
            .await
            .expect("should succeed");
        sink.emit(EventKind::TextDelta("lo".into()))
            .await
            .expect("should succeed");
        assert_eq!(sink.text(), "Hello");
        let seqs: Vec<u64> = [rx.recv().await, rx.recv().await, rx.recv().await]
            .into_iter()
            .map(|e| e.expect("should succeed").seq)
            .collect();
        assert_eq!(seqs, vec![1, 2, 3]);
    }

    #[tokio::test]
    async fn reports_a_closed_receiver() {
        let (tx, rx) = mpsc::channel(1);
        let mut sink = EventSink::new(tx);
        drop(rx);
        assert_eq!(
            sink.emit(EventKind::TextDelta("x".into())).await,
            Err(Closed)
        );
    }
}
