//! One round of tool calls: check, run in parallel, stream, collect.
//!
//! Every call gets a `ToolStart`. Calls naming an unknown tool or carrying
//! input that fails the schema are answered at once with a tool error and
//! never run. The others run concurrently, at most `max_parallel_tools` at a
//! time, each under its own timeout; their progress is forwarded as it
//! arrives and each ends with a `ToolComplete`. The results go back to the
//! model in the order of the calls. Cancellation or the turn deadline drops
//! every running call at once. Each call, run or rejected, has its
//! `execute_tool {name}` span and its duration metric.

use std::{sync::Arc, time::Duration};

use futures::{StreamExt, stream::FuturesUnordered};
use parley_grpc::telemetry::semconv;
use serde_json::Value;
use tokio::{
    sync::{Semaphore, mpsc},
    time::Instant,
};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::{
    CallContext, FailureReason, ProgressSender, ToolFailure, ToolOutput,
    prepare::{PreparedTool, TurnTools},
};
use crate::{
    events::{CallSource, EventKind, ToolComplete, ToolProgress, ToolStart},
    model_call::Interrupt,
    observe,
    output::TurnOutput,
    provider::{ToolCall, ToolResult},
    turn::Limits,
};

/// A call the model made, and where it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct PendingCall {
    /// The call.
    pub call: ToolCall,
    /// Native or written into the text.
    pub source: CallSource,
}

/// What a round of calls needs besides the calls.
#[derive(Debug)]
pub struct Round<'a> {
    /// The turn's tools.
    pub tools: &'a TurnTools,
    /// Timeouts and parallelism.
    pub limits: Limits,
    /// Passed to tools.
    pub conversation_id: &'a str,
    /// Passed to tools.
    pub user_id: &'a str,
    /// Passed to tools.
    pub user_issuer: &'a str,
    /// Passed to tools.
    pub tenant: &'a str,
    /// Passed to tools.
    pub context: Option<&'a Value>,
    /// Fires when the client goes away.
    pub cancel: &'a CancellationToken,
    /// When the turn must end.
    pub deadline: Instant,
}

type Finished = (usize, Result<ToolOutput, ToolFailure>, Duration);

impl Round<'_> {
    /// Runs `calls` and returns one result per call, in order.
    pub async fn run(
        &self,
        calls: &[PendingCall],
        out: &mut TurnOutput,
    ) -> Result<Vec<ToolResult>, Interrupt> {
        for pending in calls {
            let start = ToolStart {
                call_id: pending.call.id.clone(),
                name: pending.call.name.clone(),
                input: pending.call.input.clone(),
                source: pending.source,
            };
            emit(out, EventKind::ToolStart(start)).await?;
        }

        let mut results: Vec<Option<ToolResult>> = vec![None; calls.len()];
        let mut runnable: Vec<(usize, &PreparedTool)> = Vec::new();
        for (index, pending) in calls.iter().enumerate() {
            let checked = match self.tools.get(&pending.call.name) {
                None => Err(ToolFailure::new(
                    FailureReason::UnknownTool,
                    format!(
                        "there is no tool named `{}`; available tools: {}",
                        pending.call.name,
                        self.tools.names().join(", ")
                    ),
                )),
                Some(tool) => tool
                    .check_input(&pending.call.input)
                    .map(|()| tool)
                    .map_err(|problem| {
                        ToolFailure::new(
                            FailureReason::InvalidInput,
                            format!("invalid input: {problem}"),
                        )
                    }),
            };
            match checked {
                Ok(tool) => runnable.push((index, tool)),
                Err(failure) => {
                    tracing::info!(tool = %pending.call.name, reason = %failure.reason, "tool call rejected");
                    let span = observe::tool_span(
                        &pending.call.name,
                        &pending.call.id,
                        None,
                        &pending.call.input,
                    );
                    let label = if failure.reason == FailureReason::UnknownTool {
                        semconv::OTHER
                    } else {
                        pending.call.name.as_str()
                    };
                    observe::tool_ended(
                        &span,
                        label,
                        Some(failure.reason.as_str()),
                        &failure.message,
                        Duration::ZERO,
                    );
                    results[index] = Some(
                        self.complete(out, &pending.call, Err(failure), Duration::ZERO)
                            .await?,
                    );
                }
            }
        }

        if !runnable.is_empty() {
            let (tx, mut rx) = mpsc::channel::<(usize, super::Progress)>(64);
            let permits = Arc::new(Semaphore::new(
                self.limits.max_parallel_tools.max(1) as usize
            ));
            let mut running: FuturesUnordered<_> = runnable
                .into_iter()
                .map(|(index, tool)| {
                    let progress = ProgressSender::new(index, tx.clone());
                    let permits = permits.clone();
                    let call = &calls[index].call;
                    async move {
                        let _permit = permits.acquire_owned().await;
                        let remote = tool.source.is_remote();
                        let span =
                            observe::tool_span(&call.name, &call.id, Some(remote), &call.input);
                        let started = Instant::now();
                        let outcome = self
                            .execute(tool, call, progress)
                            .instrument(span.clone())
                            .await;
                        let elapsed = started.elapsed();
                        let (failure, text) = match &outcome {
                            Ok(output) => (None, output.text.as_str()),
                            Err(failure) => {
                                (Some(failure.reason.as_str()), failure.message.as_str())
                            }
                        };
                        observe::tool_ended(&span, &call.name, failure, text, elapsed);
                        (index, outcome, elapsed)
                    }
                })
                .collect();
            drop(tx);
            loop {
                let next = tokio::select! {
                    biased;
                    () = self.cancel.cancelled() => return Err(Interrupt::Cancelled),
                    () = tokio::time::sleep_until(self.deadline) => return Err(Interrupt::Deadline),
                    Some((index, progress)) = rx.recv() => Step::Progress(index, progress),
                    finished = running.next() => match finished {
                        Some(finished) => Step::Done(finished),
                        None => break,
                    },
                };
                match next {
                    Step::Progress(index, progress) => {
                        self.progress(out, calls, index, progress).await?
                    }
                    Step::Done((index, outcome, duration)) => {
                        // Progress sent before the call finished goes out before its completion.
                        while let Ok((early, progress)) = rx.try_recv() {
                            self.progress(out, calls, early, progress).await?;
                        }
                        results[index] = Some(
                            self.complete(out, &calls[index].call, outcome, duration)
                                .await?,
                        );
                    }
                }
            }
        }
        Ok(results
            .into_iter()
            .zip(calls)
            .map(|(result, pending)| {
                result.unwrap_or_else(|| ToolResult {
                    call_id: pending.call.id.clone(),
                    name: pending.call.name.clone(),
                    text: "Error (TOOL_ERROR): the call produced no result".into(),
                    is_error: true,
                    attachments: Vec::new(),
                })
            })
            .collect())
    }

    /// Answers `call` without running it (a call the user rejected, or one
    /// the app ran): its `execute_tool` span and a `ToolComplete` with
    /// `outcome`, no `ToolStart`.
    pub async fn settle(
        &self,
        out: &mut TurnOutput,
        call: &ToolCall,
        outcome: Result<ToolOutput, ToolFailure>,
    ) -> Result<ToolResult, Interrupt> {
        let span = observe::tool_span(&call.name, &call.id, None, &call.input);
        let (failure, text) = match &outcome {
            Ok(output) => (None, output.text.as_str()),
            Err(failure) => (Some(failure.reason.as_str()), failure.message.as_str()),
        };
        observe::tool_ended(&span, &call.name, failure, text, Duration::ZERO);
        self.complete(out, call, outcome, Duration::ZERO).await
    }

    async fn execute(
        &self,
        tool: &PreparedTool,
        call: &ToolCall,
        progress: ProgressSender,
    ) -> Result<ToolOutput, ToolFailure> {
        let timeout = tool.timeout.unwrap_or(self.limits.tool_timeout);
        let ctx = CallContext {
            call_id: call.id.clone(),
            conversation_id: self.conversation_id.to_owned(),
            user_id: self.user_id.to_owned(),
            user_issuer: self.user_issuer.to_owned(),
            tenant: self.tenant.to_owned(),
            context: self.context.cloned(),
            timeout,
        };
        let run = tool.source.call(&call.name, &call.input, ctx, progress);
        match tokio::time::timeout(timeout, run).await {
            Ok(outcome) => outcome,
            Err(_) => Err(ToolFailure::new(
                FailureReason::Timeout,
                format!("the tool did not finish within {} ms", timeout.as_millis()),
            )),
        }
    }

    async fn progress(
        &self,
        out: &mut TurnOutput,
        calls: &[PendingCall],
        index: usize,
        progress: super::Progress,
    ) -> Result<(), Interrupt> {
        let Some(pending) = calls.get(index) else {
            return Ok(());
        };
        let event = ToolProgress {
            call_id: pending.call.id.clone(),
            stage: progress.stage,
            message: progress.message,
            fraction: progress.fraction,
        };
        emit(out, EventKind::ToolProgress(event)).await
    }

    async fn complete(
        &self,
        out: &mut TurnOutput,
        call: &ToolCall,
        outcome: Result<ToolOutput, ToolFailure>,
        duration: Duration,
    ) -> Result<ToolResult, Interrupt> {
        let (complete, result) = match outcome {
            Ok(output) => (
                ToolComplete {
                    call_id: call.id.clone(),
                    name: call.name.clone(),
                    success: true,
                    duration,
                    result_text: output.text.clone(),
                    payload: output.payload,
                    error: String::new(),
                    error_reason: String::new(),
                },
                ToolResult {
                    call_id: call.id.clone(),
                    name: call.name.clone(),
                    text: output.text,
                    is_error: false,
                    attachments: output.attachments,
                },
            ),
            Err(failure) => {
                let text = format!("Error ({}): {}", failure.reason, failure.message);
                (
                    ToolComplete {
                        call_id: call.id.clone(),
                        name: call.name.clone(),
                        success: false,
                        duration,
                        result_text: text.clone(),
                        payload: None,
                        error: failure.message,
                        error_reason: failure.reason.as_str().to_owned(),
                    },
                    ToolResult {
                        call_id: call.id.clone(),
                        name: call.name.clone(),
                        text,
                        is_error: true,
                        attachments: Vec::new(),
                    },
                )
            }
        };
        tracing::debug!(tool = %call.name, success = complete.success, duration_ms = duration.as_millis() as u64, "tool call complete");
        emit(out, EventKind::ToolComplete(complete)).await?;
        Ok(result)
    }
}

enum Step {
    Progress(usize, super::Progress),
    Done(Finished),
}

async fn emit(out: &mut TurnOutput, kind: EventKind) -> Result<(), Interrupt> {
    out.emit(kind).await.map_err(|_| Interrupt::Cancelled)
}
