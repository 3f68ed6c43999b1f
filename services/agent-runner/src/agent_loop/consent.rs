//! Calls that wait for the user or the app: a round's split, and a
//! continuation's settlement.
//!
//! A call waits when its tool needs the user's approval or the app runs it
//! and its input satisfies the tool's schema (one that does not is answered
//! `INVALID_INPUT` at once by the round, as any call, so nobody is asked to
//! approve or run a call that cannot run). The loop runs a round's other
//! calls, then ends the turn with `InputRequired` ([`split`]).
//!
//! A continuation (`Turn::decisions`) settles the calls its pause left
//! pending before its first model call ([`Settle`]): a rejected call is
//! answered as the user declining it, an app's result is the call's result
//! (checked against the tool's output schema), each with a `ToolComplete`
//! and no `ToolStart`; the approved calls (with the user's arguments when
//! edited) then run as one round, after the fence allows it. The results
//! join the request's last tool results in the model's order
//! ([`join_results`]).

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::{End, permit, run_tools};
use crate::{
    events::{CallSource, PendingToolCall},
    provider::{Message, ModelChoice, ToolCall, ToolResult},
    tools::{
        FailureReason, ToolFailure, ToolOutput,
        execute::{PendingCall, Round},
        prepare::TurnTools,
    },
    turn::{Decision, Turn, Verdict, Violation, order_results, pending_calls},
};

/// The calls of a round that run now, and those that wait (in the model's
/// order, each with why).
pub(super) fn split(
    tools: &TurnTools,
    calls: Vec<PendingCall>,
) -> (Vec<PendingCall>, Vec<PendingToolCall>) {
    let mut run = Vec::with_capacity(calls.len());
    let mut waiting = Vec::new();
    for pending in calls {
        let reason = tools.get(&pending.call.name).and_then(|tool| {
            tool.waits()
                .filter(|_| tool.check_input(&pending.call.input).is_ok())
        });
        match reason {
            Some(reason) => waiting.push(PendingToolCall {
                call: pending.call,
                reason,
            }),
            None => run.push(pending),
        }
    }
    (run, waiting)
}

/// The violations of a continuation whose decisions do not suit their
/// calls' tools: an approval is for a tool the runner runs, a result for
/// one the app runs (`decisions[i].approve` / `decisions[i].result`).
/// That each decision names a pending call, once, is checked with the
/// request (`convert::request`).
pub(super) fn check_verdicts(turn: &Turn, tools: &TurnTools) -> Vec<Violation> {
    if turn.decisions.is_empty() {
        return Vec::new();
    }
    let pending = pending_calls(&turn.messages);
    let mut violations = Vec::new();
    for (index, decision) in turn.decisions.iter().enumerate() {
        let Some(call) = pending.iter().find(|call| call.id == decision.call_id) else {
            continue;
        };
        let client = tools
            .get(&call.name)
            .is_some_and(|tool| tool.client.is_some());
        match &decision.verdict {
            Verdict::Approve { .. } if client => violations.push(Violation::new(
                format!("decisions[{index}].approve"),
                format!(
                    "`{}` calls `{}`, which the app runs: send its result instead",
                    call.id, call.name
                ),
            )),
            Verdict::Output(_) | Verdict::Failed(_) if !client => violations.push(Violation::new(
                format!("decisions[{index}].result"),
                format!(
                    "`{}` calls `{}`, which the app does not run: approve or reject it",
                    call.id, call.name
                ),
            )),
            _ => {}
        }
    }
    violations
}

/// What a continuation's settlement needs.
pub(super) struct Settle<'a> {
    /// The turn's tool rounds.
    pub round: &'a Round<'a>,
    /// The turn's tools.
    pub tools: &'a TurnTools,
    /// The model call of the pause (`iterations_done`): the approved
    /// calls' round is announced and fenced as its.
    pub iteration: u32,
    /// The model in use, for the `Tools` status.
    pub model: &'a ModelChoice,
    /// Fires when the client goes away.
    pub cancel: &'a CancellationToken,
    /// When the turn must end.
    pub deadline: Instant,
}

impl Settle<'_> {
    /// Settles the calls `history` leaves pending by `decisions` (one
    /// each, checked with the request); their results in the model's order.
    pub async fn run(
        &self,
        decisions: &[Decision],
        history: &[Message],
        out: &mut crate::output::TurnOutput,
    ) -> Result<Vec<ToolResult>, End> {
        let pending = pending_calls(history);
        let mut results: Vec<Option<ToolResult>> = vec![None; pending.len()];
        let mut approved: Vec<(usize, PendingCall)> = Vec::new();
        for (index, call) in pending.iter().enumerate() {
            let Some(decision) = decisions.iter().find(|d| d.call_id == call.id) else {
                continue;
            };
            let outcome = match &decision.verdict {
                Verdict::Approve { arguments } => {
                    let mut call = (*call).clone();
                    if let Some(arguments) = arguments {
                        call.input = arguments.clone();
                    }
                    approved.push((
                        index,
                        PendingCall {
                            source: source(&call),
                            call,
                        },
                    ));
                    continue;
                }
                Verdict::Reject { reason } => {
                    Err(ToolFailure::new(FailureReason::Rejected, rejection(reason)))
                }
                Verdict::Output(output) => self.client_output(call, output),
                Verdict::Failed(error) => {
                    Err(ToolFailure::new(FailureReason::ToolError, error.clone()))
                }
            };
            results[index] = Some(self.round.settle(out, call, outcome).await?);
        }
        if !approved.is_empty() {
            let calls: Vec<PendingCall> = approved.iter().map(|(_, call)| call.clone()).collect();
            permit(out, &calls, self.iteration, self.cancel, self.deadline).await?;
            let ran = run_tools(self.round, &calls, out, self.iteration, self.model).await?;
            for ((index, _), result) in approved.iter().zip(ran) {
                results[*index] = Some(result);
            }
        }
        Ok(results.into_iter().flatten().collect())
    }

    /// The app's `output` for `call`: its compact JSON, or an
    /// `INVALID_OUTPUT` failure when it does not satisfy the tool's output
    /// schema.
    fn client_output(
        &self,
        call: &ToolCall,
        output: &serde_json::Value,
    ) -> Result<ToolOutput, ToolFailure> {
        let checked = self
            .tools
            .get(&call.name)
            .and_then(|tool| tool.client.as_ref())
            .map_or(Ok(()), |client| client.check_output(output));
        match checked {
            Ok(()) => Ok(ToolOutput {
                text: output.to_string(),
                payload: None,
                attachments: Vec::new(),
            }),
            Err(problem) => Err(ToolFailure::new(
                FailureReason::InvalidOutput,
                format!("the app's output does not satisfy the tool's output schema: {problem}"),
            )),
        }
    }
}

/// What the model is told of a call the user declined.
pub fn rejection(reason: &str) -> String {
    let reason = reason.trim();
    if reason.is_empty() {
        "the user declined to run this tool call".to_owned()
    } else {
        format!("the user declined to run this tool call; their reason: {reason}")
    }
}

/// Where a pending call came from: the loop names the calls it found in
/// the model's text `text_call_{iteration}_{n}`.
fn source(call: &ToolCall) -> CallSource {
    if call.id.starts_with("text_call_") {
        CallSource::Text
    } else {
        CallSource::Native
    }
}

/// Adds a continuation's settled `results` to `history`: to its last tool
/// results (those of the pause's calls that ran), or as a new message after
/// the model message that made the calls; in the calls' order.
pub(super) fn join_results(history: &mut Vec<Message>, results: Vec<ToolResult>) {
    match history.as_mut_slice() {
        [
            ..,
            Message::Assistant { tool_calls, .. },
            Message::ToolResults(joined),
        ] => {
            joined.extend(results);
            order_results(tool_calls, joined);
        }
        [.., Message::Assistant { tool_calls, .. }] => {
            let mut results = results;
            order_results(tool_calls, &mut results);
            history.push(Message::ToolResults(results));
        }
        _ => history.push(Message::ToolResults(results)),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn call(id: &str) -> ToolCall {
        ToolCall {
            id: id.into(),
            name: "t".into(),
            input: json!({}),
            provider_data: None,
        }
    }

    fn result(id: &str) -> ToolResult {
        ToolResult {
            call_id: id.into(),
            name: "t".into(),
            text: id.into(),
            is_error: false,
            attachments: Vec::new(),
        }
    }

    fn ids(message: &Message) -> Vec<&str> {
        match message {
            Message::ToolResults(results) => results.iter().map(|r| r.call_id.as_str()).collect(),
            other => panic!("not tool results: {other:?}"),
        }
    }

    #[test]
    fn settled_results_join_the_last_results_in_the_calls_order() {
        let answer = Message::Assistant {
            reasoning: Vec::new(),
            text: String::new(),
            tool_calls: vec![call("b"), call("a"), call("c")],
        };
        let mut history = vec![
            Message::user("hi"),
            answer.clone(),
            Message::ToolResults(vec![result("a")]),
        ];
        join_results(&mut history, vec![result("b"), result("c")]);
        assert_eq!(history.len(), 3);
        assert_eq!(ids(&history[2]), ["b", "a", "c"]);

        let mut history = vec![Message::user("hi"), answer];
        join_results(&mut history, vec![result("c"), result("b")]);
        assert_eq!(history.len(), 3);
        assert_eq!(ids(&history[2]), ["b", "c"]);
    }

    #[test]
    fn a_rejection_tells_the_reason_when_there_is_one() {
        assert_eq!(rejection("  "), "the user declined to run this tool call");
        assert_eq!(
            rejection("wrong table"),
            "the user declined to run this tool call; their reason: wrong table"
        );
        assert_eq!(source(&call("text_call_2_1")), CallSource::Text);
        assert_eq!(source(&call("toolu_1")), CallSource::Native);
    }
}
