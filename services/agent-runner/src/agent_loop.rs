//! The LLM tool loop: one turn from the first model call to the last event.
//!
//! [`Runner::prepare`] checks what the model will need (providers, tools,
//! structured-output support) so a bad request fails before anything
//! streams. [`Runner::run`] then repeats: call the model (with retries and
//! fallback, see `model_call`), run the tools it asked for (see
//! `tools::execute`), feed the results back, until the model finishes, the
//! iteration limit is reached (a normal finish with `MaxIterations`), the
//! turn deadline passes or the turn is cancelled. Calls of tools that need
//! the user's approval or that the app runs wait: the round's other calls
//! run, then the turn pauses (`InputRequired`), and a continuation settles
//! the waiting calls by its decisions before its first model call
//! ([`consent`]). The last event is always `Finished`, `InputRequired` or
//! `Error`. The turn runs in an `invoke_agent` span ([`crate::observe`]).

mod consent;

use std::sync::Arc;

use parley_grpc::telemetry::semconv;
use parley_proto::parser::v1::StructuredResult;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::{
    error::RunError,
    events::{
        CallSource, EventKind, EventSink, Finished, InputRequired, Phase, Status, StopReason,
        TurnError, UsageReport,
    },
    model_call::{CallError, ModelCaller},
    observe,
    output::{TextMode, TurnOutput, shows_text},
    parsing,
    pricing::PriceTable,
    provider::{
        ChatRequest, Finish, FinishReason, Message, OutputSchema, ToolCall, ToolResult, ToolSpec,
        Usage,
    },
    provider::{ModelChoice, Providers},
    retry::RetryPolicy,
    tools::{
        ToolRuntime,
        execute::{PendingCall, Round},
        prepare::TurnTools,
    },
    turn::Turn,
};

/// Everything the loop shares across turns.
#[derive(Debug, Clone)]
pub struct Runner {
    /// The configured providers.
    pub providers: Arc<Providers>,
    /// Local tools and remote tool channels.
    pub tools: ToolRuntime,
    /// The retry policy of every model call.
    pub retry: RetryPolicy,
    /// The models' prices ([`crate::pricing`]; empty: every call costs 0).
    pub prices: Arc<PriceTable>,
}

/// A checked turn, ready to run.
#[derive(Debug)]
pub struct PreparedTurn {
    turn: Turn,
    tools: Arc<TurnTools>,
    candidates: Vec<ModelChoice>,
}

impl PreparedTurn {
    /// The models tried, primary first.
    pub fn candidates(&self) -> &[ModelChoice] {
        &self.candidates
    }
}

/// How a turn's loop ended normally.
enum Outcome {
    /// The model finished (or the iteration limit was reached).
    Finished(Finished),
    /// Tool calls wait for decisions: the turn pauses.
    Paused(InputRequired),
}

/// How a turn ended early.
enum End {
    Cancelled,
    Deadline,
    Failed(TurnError),
}

impl From<CallError> for End {
    fn from(error: CallError) -> Self {
        match error {
            CallError::Cancelled => Self::Cancelled,
            CallError::Deadline => Self::Deadline,
            CallError::Failed(error) => Self::Failed(error),
        }
    }
}

impl From<crate::model_call::Interrupt> for End {
    fn from(interrupt: crate::model_call::Interrupt) -> Self {
        CallError::from(interrupt).into()
    }
}

impl Runner {
    /// Resolves the models, binds the tools and checks structured output.
    pub fn prepare(&self, mut turn: Turn) -> Result<PreparedTurn, RunError> {
        let tools = TurnTools::prepare(std::mem::take(&mut turn.tools), &self.tools)
            .map_err(RunError::Invalid)?;
        self.prepare_with(turn, Arc::new(tools))
    }

    /// [`Self::prepare`] for a turn whose tools are already bound (shared
    /// by the turns that declare the same ones, see
    /// [`crate::tool_sets::ToolSets`]); `turn.tools` is ignored.
    pub fn prepare_with(
        &self,
        turn: Turn,
        tools: Arc<TurnTools>,
    ) -> Result<PreparedTurn, RunError> {
        let violations = consent::check_verdicts(&turn, &tools);
        if !violations.is_empty() {
            return Err(RunError::Invalid(violations));
        }
        let mut candidates = Vec::with_capacity(1 + turn.fallbacks.len());
        let references = std::iter::once(("model".to_owned(), turn.model.clone())).chain(
            turn.fallbacks
                .iter()
                .enumerate()
                .map(|(i, f)| (format!("fallbacks[{i}]"), f.clone())),
        );
        for (field, reference) in references {
            let resolved =
                self.providers
                    .resolve(reference)
                    .map_err(|unknown| RunError::UnknownProvider {
                        field: format!("{field}.provider"),
                        provider: unknown.0,
                        configured: self.providers.names().map(str::to_owned).collect(),
                    })?;
            candidates.push(resolved);
        }
        if turn.output_schema.is_some() {
            for candidate in &candidates {
                let supported = self
                    .providers
                    .get(&candidate.provider)
                    .is_some_and(|provider| provider.supports_structured_output(&candidate.model));
                if !supported {
                    return Err(RunError::StructuredOutputUnsupported {
                        provider: candidate.provider.clone(),
                        model: candidate.model.clone(),
                    });
                }
            }
        }
        Ok(PreparedTurn {
            turn,
            tools,
            candidates,
        })
    }

    /// Runs a prepared turn to its last event. Returns when the turn is
    /// over or `cancel` fires; never panics on provider or tool input.
    ///
    /// Not an `async fn`: the returned future is the turn's own, in its
    /// span, without an outer one that would keep a second copy of its
    /// arguments for the whole turn (a turn's task is as large as its
    /// future, and it lives as long as the stream).
    pub fn run(
        &self,
        prepared: PreparedTurn,
        sink: EventSink,
        cancel: CancellationToken,
    ) -> impl Future<Output = ()> + Send + '_ {
        let primary = &prepared.candidates[0];
        let provider = self
            .providers
            .get(&primary.provider)
            .map_or(semconv::OTHER, |provider| provider.system());
        let span = observe::agent_span(
            provider,
            &primary.model,
            &prepared.turn.conversation_id,
            &prepared.turn.turn_id,
            prepared.turn.output_schema.is_some(),
        );
        self.run_turn(prepared, sink, cancel, span.clone())
            .instrument(span)
    }

    async fn run_turn(
        &self,
        mut prepared: PreparedTurn,
        sink: EventSink,
        cancel: CancellationToken,
        span: tracing::Span,
    ) {
        let started = Instant::now();
        let deadline = started + prepared.turn.limits.total_timeout;
        let mode = if prepared.turn.output_schema.is_some() {
            TextMode::Structured
        } else if prepared.turn.text_tool_calls && !prepared.tools.is_empty() {
            TextMode::TextCalls(parsing::ToolProfile::new(&prepared.tools.names()))
        } else {
            TextMode::Stream
        };
        // A continuation's text follows what the turn showed before its pause.
        let earlier_text = prepared
            .turn
            .messages
            .iter()
            .rev()
            .take_while(|message| !matches!(message, Message::User { .. }))
            .any(|message| {
                matches!(message, Message::Assistant { text, .. } if shows_text(&mode, text))
            });
        let mut out = TurnOutput::new(sink, mode);
        if earlier_text {
            out.after_earlier_text();
        }
        // The history moves into the requests' shared copy.
        let history = std::mem::take(&mut prepared.turn.messages);
        let result = self
            .drive(&prepared, history, &mut out, &cancel, deadline)
            .await;
        let last = match result {
            Ok(Outcome::Paused(input)) => {
                span.record(semconv::GEN_AI_USAGE_INPUT_TOKENS, input.usage.input_tokens);
                span.record(
                    semconv::GEN_AI_USAGE_OUTPUT_TOKENS,
                    input.usage.output_tokens,
                );
                tracing::info!(turn_id = %prepared.turn.turn_id, iteration = input.iteration, waiting = input.pending.len(), "turn paused for input");
                observe::turn_ended(&span, "awaiting_input", "");
                EventKind::InputRequired(input)
            }
            Ok(Outcome::Finished(finished)) => {
                span.record(
                    semconv::GEN_AI_USAGE_INPUT_TOKENS,
                    finished.usage.input_tokens,
                );
                span.record(
                    semconv::GEN_AI_USAGE_OUTPUT_TOKENS,
                    finished.usage.output_tokens,
                );
                observe::turn_ended(&span, "completed", "");
                EventKind::Finished(finished)
            }
            Err(End::Failed(error)) => {
                tracing::warn!(turn_id = %prepared.turn.turn_id, reason = %error.reason, "turn failed");
                observe::turn_ended(&span, "failed", &error.reason);
                EventKind::Error(error)
            }
            Err(End::Deadline) => {
                tracing::warn!(turn_id = %prepared.turn.turn_id, "turn deadline exceeded");
                observe::turn_ended(&span, "failed", "DEADLINE_EXCEEDED");
                EventKind::Error(TurnError {
                    code: tonic::Code::DeadlineExceeded,
                    reason: "DEADLINE_EXCEEDED".into(),
                    message: format!(
                        "the turn did not finish within {} ms",
                        prepared.turn.limits.total_timeout.as_millis()
                    ),
                    retryable: false,
                    partial_text: out.text().to_owned(),
                    provider_detail: String::new(),
                    retry_after: None,
                })
            }
            Err(End::Cancelled) => {
                tracing::info!(turn_id = %prepared.turn.turn_id, "turn cancelled");
                observe::turn_ended(&span, "cancelled", "CANCELLED");
                return;
            }
        };
        let _ = out.emit(last).await;
        tracing::debug!(turn_id = %prepared.turn.turn_id, elapsed_ms = started.elapsed().as_millis() as u64, "turn over");
    }

    /// The loop itself: a continuation's decisions first, then a model
    /// call per iteration and the tools it asked for, until the model is
    /// done, the iteration limit is reached or calls wait for decisions.
    async fn drive(
        &self,
        prepared: &PreparedTurn,
        mut history: Vec<Message>,
        out: &mut TurnOutput,
        cancel: &CancellationToken,
        deadline: Instant,
    ) -> Result<Outcome, End> {
        let turn = &prepared.turn;
        let candidates = &prepared.candidates;
        let caller = self.caller(turn, cancel, deadline);
        let round = self.round(prepared, cancel, deadline);
        let output_schema = output_schema(turn);
        let specs = prepared.tools.specs();
        let mut total = Usage::default();
        let mut current = 0usize;

        status(
            out,
            Phase::Started,
            "Started".into(),
            0,
            &candidates[current],
        )
        .await?;
        // A continuation settles the calls its pause left waiting; their
        // results join the request's last tool results.
        let settled = if turn.decisions.is_empty() {
            None
        } else {
            let settle = consent::Settle {
                round: &round,
                tools: &prepared.tools,
                iteration: turn.iterations_done,
                model: &candidates[current],
                cancel,
                deadline,
            };
            let results = settle.run(&turn.decisions, &history, out).await?;
            consent::join_results(&mut history, results.clone());
            Some(results)
        };
        // Images over what the models take are downscaled (the tools' too,
        // as they come).
        crate::attachments::images::fit_messages(&mut history, turn.image_limits).await;
        // What this run adds to the conversation starts here.
        let added_from = history.len();
        let mut messages: Arc<[Message]> = history.into();
        let max_iterations = turn.limits.max_iterations.max(1);
        for iteration in turn.iterations_done + 1..=max_iterations {
            status(
                out,
                Phase::ModelCall,
                "Thinking...".into(),
                iteration,
                &candidates[current],
            )
            .await?;
            let request = chat_request(turn, &messages, &specs, output_schema.as_ref());
            let outcome = caller
                .call(candidates, current, &request, iteration, out)
                .await?;
            current = outcome.candidate;
            total += outcome.reset_usage;
            let model = &candidates[current];
            if let Some(usage) = outcome.usage {
                total += usage;
                report_usage(out, usage, model).await?;
            }
            let call_text = out.call_text().to_owned();
            let pending = requested_calls(&outcome.tool_calls, out, iteration).await?;
            let wants_more = !pending.is_empty() || outcome.finish.reason == FinishReason::Pause;
            if !wants_more || iteration == max_iterations {
                let stop_reason = if wants_more {
                    StopReason::MaxIterations
                } else {
                    stop_reason(outcome.finish.reason)
                };
                let structured = output_schema
                    .as_ref()
                    .map(|schema| parsing::structured(&call_text, &schema.schema));
                return Ok(Outcome::Finished(finished(
                    out,
                    outcome.finish,
                    stop_reason,
                    structured,
                    total,
                    iteration,
                )));
            }
            let answer = Message::Assistant {
                reasoning: outcome.reasoning,
                text: call_text,
                tool_calls: pending.iter().map(|p| p.call.clone()).collect(),
            };
            if pending.is_empty() {
                // `pause_turn`: the model continues in another call.
                messages = appended(&messages, [answer]);
                continue;
            }
            // Calls that need approval or the app wait; the others run now.
            let (run, waiting) = consent::split(&prepared.tools, pending);
            let results = if run.is_empty() {
                Vec::new()
            } else {
                permit(out, &run, iteration, cancel, deadline).await?;
                let mut results = run_tools(&round, &run, out, iteration, model).await?;
                crate::attachments::images::fit_results(&mut results, turn.image_limits).await;
                results
            };
            if !waiting.is_empty() {
                let mut added: Vec<Message> = settled
                    .map(Message::ToolResults)
                    .into_iter()
                    .chain(messages[added_from..].iter().cloned())
                    .collect();
                added.push(answer);
                if !results.is_empty() {
                    added.push(Message::ToolResults(results));
                }
                return Ok(Outcome::Paused(InputRequired {
                    iteration,
                    pending: waiting,
                    messages: added,
                    usage: total,
                    text: out.text().to_owned(),
                }));
            }
            messages = appended(&messages, [answer, Message::ToolResults(results)]);
        }
        Err(End::Failed(TurnError {
            code: tonic::Code::Internal,
            reason: "INTERNAL".into(),
            message: "the loop ended without a result".into(),
            retryable: false,
            partial_text: out.text().to_owned(),
            provider_detail: String::new(),
            retry_after: None,
        }))
    }

    /// The model calls of `turn`: retries, fallback and timeouts within
    /// the turn's `deadline`.
    fn caller<'a>(
        &'a self,
        turn: &'a Turn,
        cancel: &'a CancellationToken,
        deadline: Instant,
    ) -> ModelCaller<'a> {
        ModelCaller {
            providers: &self.providers,
            policy: self.retry,
            limits: turn.limits,
            deadline,
            cancel,
            conversation_id: &turn.conversation_id,
            mid_answer_failover: turn.mid_answer_failover,
            prices: &self.prices,
            inputs: &turn.inputs,
            windows: &turn.windows,
        }
    }

    /// The tool rounds of `prepared`: its bound tools, run within the
    /// turn's `deadline`.
    fn round<'a>(
        &'a self,
        prepared: &'a PreparedTurn,
        cancel: &'a CancellationToken,
        deadline: Instant,
    ) -> Round<'a> {
        let turn = &prepared.turn;
        Round {
            tools: &prepared.tools,
            limits: turn.limits,
            conversation_id: &turn.conversation_id,
            user_id: &turn.user_id,
            user_issuer: &turn.user_issuer,
            tenant: &turn.tenant,
            context: turn.context.as_ref(),
            cancel,
            deadline,
        }
    }
}

/// Waits until a fenced client (`RunFenced`) allows the round of `calls`
/// of model call `iteration` to start; at once without a fence.
async fn permit(
    out: &mut TurnOutput,
    calls: &[PendingCall],
    iteration: u32,
    cancel: &CancellationToken,
    deadline: Instant,
) -> Result<(), End> {
    let call_ids = calls.iter().map(|p| p.call.id.clone()).collect();
    let allowed = tokio::select! {
        () = cancel.cancelled() => return Err(End::Cancelled),
        () = tokio::time::sleep_until(deadline) => return Err(End::Deadline),
        allowed = out.permit_dispatch(iteration, call_ids) => {
            allowed.map_err(|_| End::Cancelled)?
        }
    };
    if allowed {
        Ok(())
    } else {
        Err(End::Failed(dispatch_denied(out, iteration)))
    }
}

/// The error of a turn whose client denied its tool calls of `iteration`.
fn dispatch_denied(out: &TurnOutput, iteration: u32) -> TurnError {
    TurnError {
        code: tonic::Code::Aborted,
        reason: "DISPATCH_DENIED".into(),
        message: format!(
            "the client did not allow the tool calls of model call {iteration}; none was started"
        ),
        retryable: false,
        partial_text: out.text().to_owned(),
        provider_detail: String::new(),
        retry_after: None,
    }
}

/// The schema sent to the provider, named `response` when the request
/// gave no name.
fn output_schema(turn: &Turn) -> Option<OutputSchema> {
    turn.output_schema.as_ref().map(|schema| OutputSchema {
        name: if turn.output_schema_name.is_empty() {
            "response".to_owned()
        } else {
            turn.output_schema_name.clone()
        },
        schema: schema.clone(),
    })
}

/// The request of one model call (the model is set per candidate): the
/// turn's prompt, conversation and tools shared, not copied.
fn chat_request(
    turn: &Turn,
    messages: &Arc<[Message]>,
    tools: &Arc<[ToolSpec]>,
    output_schema: Option<&OutputSchema>,
) -> ChatRequest {
    ChatRequest {
        model: String::new(),
        system: turn.system.clone(),
        messages: messages.clone(),
        tools: tools.clone(),
        output_schema: output_schema.cloned(),
        max_output_tokens: turn.limits.max_output_tokens,
        params: Default::default(),
        cache: turn.cache.clone(),
    }
}

/// `messages` followed by `more`, for the next model call (the calls
/// before it keep theirs).
fn appended(messages: &[Message], more: impl IntoIterator<Item = Message>) -> Arc<[Message]> {
    messages.iter().cloned().chain(more).collect()
}

/// The turn's normal end after its last model call (`finish`).
fn finished(
    out: &TurnOutput,
    finish: Finish,
    stop_reason: StopReason,
    structured: Option<StructuredResult>,
    usage: Usage,
    iterations: u32,
) -> Finished {
    Finished {
        stop_reason,
        raw_stop_reason: finish.raw_reason,
        text: out.text().to_owned(),
        structured,
        usage,
        iterations,
        response_model: finish.response_model.unwrap_or_default(),
        response_id: finish.response_id.unwrap_or_default(),
        history_turns_left_out: out.turns_left_out(),
    }
}

/// Reports the usage of one model call.
async fn report_usage(out: &mut TurnOutput, usage: Usage, model: &ModelChoice) -> Result<(), End> {
    let report = UsageReport {
        usage,
        model: Some(model.clone()),
    };
    out.emit(EventKind::Usage(report))
        .await
        .map_err(|_| End::Cancelled)
}

/// The tool calls of one model answer: the native ones, then those written
/// into its text (ids `text_call_{iteration}_{n}`), which ends the call's
/// text.
async fn requested_calls(
    native: &[ToolCall],
    out: &mut TurnOutput,
    iteration: u32,
) -> Result<Vec<PendingCall>, End> {
    let mut pending: Vec<PendingCall> = native
        .iter()
        .map(|call| PendingCall {
            call: call.clone(),
            source: CallSource::Native,
        })
        .collect();
    let text_calls = out.end_call_text().await.map_err(|_| End::Cancelled)?;
    pending.extend(
        text_calls
            .into_iter()
            .enumerate()
            .map(|(n, call)| PendingCall {
                call: ToolCall {
                    id: format!("text_call_{iteration}_{}", n + 1),
                    name: call.name,
                    input: call.arguments,
                    provider_data: None,
                },
                source: CallSource::Text,
            }),
    );
    Ok(pending)
}

/// Runs one round of `pending` calls, announced by a `Tools` status.
async fn run_tools(
    round: &Round<'_>,
    pending: &[PendingCall],
    out: &mut TurnOutput,
    iteration: u32,
    model: &ModelChoice,
) -> Result<Vec<ToolResult>, End> {
    let message = match pending {
        [one] => format!("Running {}", one.call.name),
        calls => format!("Running {} tools", calls.len()),
    };
    status(out, Phase::Tools, message, iteration, model).await?;
    Ok(round.run(pending, out).await?)
}

async fn status(
    out: &mut TurnOutput,
    phase: Phase,
    message: String,
    iteration: u32,
    model: &ModelChoice,
) -> Result<(), End> {
    let event = Status {
        phase,
        message,
        iteration,
        model: Some(model.clone()),
    };
    out.emit(EventKind::Status(event))
        .await
        .map_err(|_| End::Cancelled)
}

fn stop_reason(reason: FinishReason) -> StopReason {
    match reason {
        FinishReason::MaxTokens => StopReason::MaxTokens,
        FinishReason::StopSequence => StopReason::StopSequence,
        FinishReason::ContentFilter => StopReason::ContentFilter,
        FinishReason::Refusal => StopReason::Refusal,
        FinishReason::EndTurn
        | FinishReason::ToolUse
        | FinishReason::Pause
        | FinishReason::Other => StopReason::EndTurn,
    }
}
