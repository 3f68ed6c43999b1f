//! One model call of a turn: retries, fallback and the three stream timeouts.
//!
//! A call tries the current model up to `RetryPolicy::max_attempts` times,
//! then each fallback model in order, but only while nothing of this call
//! has been sent to the client: once a text or reasoning delta is out, a
//! failure ends the turn with an error event instead of silently restarting
//! the answer.
//!
//! With `mid_answer_failover` (opt-in, per request) a failure after output
//! is tried again by the same rules, when another attempt is possible: the
//! failed attempt's usage (zero when the provider reported none) goes out
//! as a `Usage` event and counts in the turn's total, a `StepReset` tells
//! the client to discard what the call streamed, the turn's text forgets
//! it, and the call streams again. Tools already run are not run again:
//! only the model call repeats. The first-token timeout bounds the time from sending the
//! request to the first streamed event, the idle timeout the silence between
//! two events; the turn deadline and the cancellation token bound everything,
//! including the waits between attempts.

pub mod failure;

use std::future::Future;

use futures::StreamExt;
use parley_grpc::telemetry::semconv;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use self::failure::AttemptError;
use crate::{
    events::{EventKind, Phase, Status, StepReset, TurnError, UsageReport},
    observe::{self, ChatCall},
    output::TurnOutput,
    pricing::PriceTable,
    provider::{ChatRequest, Finish, ReasoningBlock, StreamEvent, ToolCall, Usage},
    provider::{ModelChoice, Providers},
    retry::RetryPolicy,
    turn::Limits,
};

/// What a successful call produced.
#[derive(Debug, Clone)]
pub struct CallOutcome {
    /// Reasoning blocks, for replay in the next request.
    pub reasoning: Vec<ReasoningBlock>,
    /// Tool calls, in the order the model made them.
    pub tool_calls: Vec<ToolCall>,
    /// The call's token usage, when the provider reported it.
    pub usage: Option<Usage>,
    /// How the call ended.
    pub finish: Finish,
    /// Which candidate answered (0 = the primary model).
    pub candidate: usize,
    /// The usage of attempts that failed after streaming and were reset
    /// (`mid_answer_failover`); it counts in the turn's usage.
    pub reset_usage: Usage,
}

/// Why a call ended without an outcome.
#[derive(Debug, Clone)]
pub enum CallError {
    /// The turn was cancelled (the client went away).
    Cancelled,
    /// The turn's total time ran out.
    Deadline,
    /// The call failed for good; the error is ready for the client.
    Failed(TurnError),
}

/// Something stopped a wait before it finished.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Interrupt {
    /// The cancellation token fired.
    Cancelled,
    /// The turn deadline passed.
    Deadline,
}

impl From<Interrupt> for CallError {
    fn from(interrupt: Interrupt) -> Self {
        match interrupt {
            Interrupt::Cancelled => Self::Cancelled,
            Interrupt::Deadline => Self::Deadline,
        }
    }
}

/// Runs `future` unless the turn is cancelled or its deadline passes first.
pub async fn guarded<F: Future>(
    cancel: &CancellationToken,
    deadline: Instant,
    future: F,
) -> Result<F::Output, Interrupt> {
    tokio::select! {
        biased;
        () = cancel.cancelled() => Err(Interrupt::Cancelled),
        () = tokio::time::sleep_until(deadline) => Err(Interrupt::Deadline),
        output = future => Ok(output),
    }
}

/// Makes model calls for one turn.
#[derive(Debug)]
pub struct ModelCaller<'a> {
    /// The configured providers.
    pub providers: &'a Providers,
    /// When to retry.
    pub policy: RetryPolicy,
    /// The turn's limits.
    pub limits: Limits,
    /// When the turn must end.
    pub deadline: Instant,
    /// Fires when the client goes away.
    pub cancel: &'a CancellationToken,
    /// The conversation, for the `chat` spans.
    pub conversation_id: &'a str,
    /// Whether a call that fails after streaming may run again.
    pub mid_answer_failover: bool,
    /// The models' prices, which give each call's usage its cost.
    pub prices: &'a PriceTable,
    /// What each candidate takes as input ([`crate::turn::Turn::inputs`]).
    pub inputs: &'a [Vec<crate::provider::InputKind>],
    /// Each candidate's context window, where known ([`crate::turn::Turn::windows`]).
    pub windows: &'a [Option<crate::context::Window>],
}

/// A provider that could not be reached is named by its configured name
/// (never by its address, which stays in the log).
fn naming(mut error: TurnError, unreachable: bool, provider: &str) -> TurnError {
    if unreachable && !provider.is_empty() {
        error.message = format!("the model provider `{provider}` could not be reached");
    }
    error
}

/// What one attempt ended with.
enum Attempt {
    Done(CallOutcome),
    Failed(AttemptError),
}

impl ModelCaller<'_> {
    /// Makes one model call, starting with `candidates[start]`; later
    /// candidates are the fallbacks.
    pub async fn call(
        &self,
        candidates: &[ModelChoice],
        start: usize,
        request: &ChatRequest,
        iteration: u32,
        out: &mut TurnOutput,
    ) -> Result<CallOutcome, CallError> {
        let mut last_error: Option<AttemptError> = None;
        let mut last_provider: Option<&'static str> = None;
        let mut reset_usage = Usage::default();
        for (index, candidate) in candidates.iter().enumerate().skip(start) {
            if let Some(error) = &last_error {
                observe::fell_back(last_provider.unwrap_or(semconv::OTHER), &error.kind());
                let message = format!(
                    "Falling back to {}/{} after {}",
                    candidate.provider,
                    candidate.model,
                    error.short()
                );
                tracing::warn!(provider = %candidate.provider, model = %candidate.model, reason = %error.short(), "falling back to the next model");
                emit_status(out, Phase::Fallback, message, iteration, candidate).await?;
            }
            let Some(provider) = self.providers.get(&candidate.provider) else {
                last_error = Some(AttemptError::Provider(
                    crate::provider::ProviderError::Config(format!(
                        "provider `{}` is not configured",
                        candidate.provider
                    )),
                ));
                continue;
            };
            last_provider = Some(provider.system());
            let mut request = request.clone();
            request.model = candidate.model.clone();
            request.params = candidate.params.clone();
            if let Some(takes) = self.inputs.get(index) {
                request.messages = crate::attachments::for_candidate(&request.messages, takes);
            }
            // The history this model's window holds.
            let mut counted = None;
            if let Some(Some(window)) = self.windows.get(index) {
                let calibration = crate::context::calibration();
                let fitted = crate::context::fit(
                    &request.messages,
                    &request.system,
                    &request.tools,
                    request.max_output_tokens,
                    window,
                    calibration.factor(&window.model),
                );
                if fitted.turns_left_out > 0 {
                    tracing::info!(model = %candidate.model, left_out = fitted.turns_left_out, window = window.tokens, "earlier turns left out to fit the model's context window");
                    out.left_out(fitted.turns_left_out);
                }
                request.messages = fitted.messages;
                counted = fitted.counted.map(|tokens| (window.model.clone(), tokens));
            }
            let max_attempts = self.policy.max_attempts.max(1);
            for attempt in 1..=max_attempts {
                out.begin_call();
                let error = match self
                    .attempt(provider.as_ref(), request.clone(), (index, candidate), out)
                    .await?
                {
                    Attempt::Done(mut outcome) => {
                        if let (Some((model, tokens)), Some(usage)) = (&counted, &outcome.usage) {
                            crate::context::calibration().learn(model, *tokens, usage.input_tokens);
                        }
                        outcome.reset_usage = reset_usage;
                        return Ok(outcome);
                    }
                    Attempt::Failed(error) => error,
                };
                let retry = attempt < max_attempts
                    && error.is_retryable(&self.policy)
                    && Instant::now() + self.policy.delay(attempt, error.retry_after())
                        < self.deadline;
                if out.call_emitted() {
                    let again = retry || index + 1 < candidates.len();
                    if !(self.mid_answer_failover && again) {
                        tracing::warn!(provider = %candidate.provider, model = %candidate.model, reason = %error.short(), "model call failed after emitting");
                        let partial = out.text().to_owned();
                        let unreachable = error.is_connection();
                        let failed = error.into_turn_error(&self.policy, partial, true);
                        return Err(CallError::Failed(naming(
                            failed,
                            unreachable,
                            &candidate.provider,
                        )));
                    }
                    tracing::warn!(provider = %candidate.provider, model = %candidate.model, reason = %error.short(), "model call failed after emitting; resetting the step");
                    let usage = out.reported_usage().unwrap_or_default();
                    reset_usage += usage;
                    self.reset_step(out, &error, usage, iteration, candidate)
                        .await?;
                }
                if !retry {
                    last_error = Some(error);
                    break;
                }
                let delay = self.policy.delay(attempt, error.retry_after());
                let message = format!(
                    "Retrying after {} (attempt {} of {max_attempts})",
                    error.short(),
                    attempt + 1
                );
                tracing::info!(provider = %candidate.provider, model = %candidate.model, attempt, delay_ms = delay.as_millis() as u64, reason = %error.short(), "retrying model call");
                observe::retried(provider.system(), &error.kind());
                emit_status(out, Phase::Retrying, message, iteration, candidate).await?;
                guarded(self.cancel, self.deadline, tokio::time::sleep(delay)).await?;
                last_error = Some(error);
            }
        }
        let error = last_error.unwrap_or(AttemptError::Provider(
            crate::provider::ProviderError::Config("no model to call".into()),
        ));
        let unreachable = error.is_connection();
        let failed = error.into_turn_error(&self.policy, out.text().to_owned(), false);
        let provider = candidates.last().map_or("", |last| last.provider.as_str());
        Err(CallError::Failed(naming(failed, unreachable, provider)))
    }

    /// Tells the client to discard what the failed attempt streamed: its
    /// usage first (it counts), then the `StepReset`; the turn's text
    /// forgets the attempt's.
    async fn reset_step(
        &self,
        out: &mut TurnOutput,
        error: &AttemptError,
        usage: Usage,
        iteration: u32,
        candidate: &ModelChoice,
    ) -> Result<(), CallError> {
        let reason = error
            .clone()
            .into_turn_error(&self.policy, String::new(), true)
            .reason;
        out.emit(EventKind::Usage(UsageReport {
            usage,
            model: Some(candidate.clone()),
        }))
        .await
        .map_err(|_| CallError::Cancelled)?;
        out.reset_call();
        out.emit(EventKind::StepReset(StepReset {
            iteration,
            reason,
            message: format!(
                "The model call failed midway ({}); trying again",
                error.short()
            ),
        }))
        .await
        .map_err(|_| CallError::Cancelled)
    }

    /// One attempt against one provider, in its own `chat {model}` span;
    /// `candidate` is the model called and its place among the candidates.
    async fn attempt(
        &self,
        provider: &dyn crate::provider::Provider,
        request: ChatRequest,
        candidate: (usize, &ModelChoice),
        out: &mut TurnOutput,
    ) -> Result<Attempt, CallError> {
        let mut chat = ChatCall::start(provider.system(), &request, self.conversation_id);
        let span = chat.span().clone();
        let attempt = self
            .stream_attempt(provider, request, candidate, out, &mut chat)
            .instrument(span)
            .await;
        match &attempt {
            Ok(Attempt::Done(outcome)) => chat.succeeded(
                &outcome.finish,
                outcome.usage,
                &outcome.tool_calls,
                out.call_text(),
            ),
            Ok(Attempt::Failed(error)) => chat.failed(&error.kind(), &error.short()),
            Err(_) => drop(chat),
        }
        attempt
    }

    async fn stream_attempt(
        &self,
        provider: &dyn crate::provider::Provider,
        request: ChatRequest,
        (candidate, model): (usize, &ModelChoice),
        out: &mut TurnOutput,
        chat: &mut ChatCall,
    ) -> Result<Attempt, CallError> {
        let first_deadline = Instant::now() + self.limits.first_token_timeout;
        let opened = guarded(
            self.cancel,
            self.deadline,
            tokio::time::timeout_at(first_deadline, provider.stream(request)),
        )
        .await?;
        let mut stream = match opened {
            Err(_) => {
                return Ok(Attempt::Failed(AttemptError::FirstToken(
                    self.limits.first_token_timeout,
                )));
            }
            Ok(Err(error)) => return Ok(Attempt::Failed(AttemptError::Provider(error))),
            Ok(Ok(stream)) => stream,
        };
        let mut reasoning = Vec::new();
        let mut tool_calls = Vec::new();
        let mut usage = None;
        let mut first = true;
        loop {
            let wait_until = if first {
                first_deadline
            } else {
                Instant::now() + self.limits.idle_timeout
            };
            let next = guarded(
                self.cancel,
                self.deadline,
                tokio::time::timeout_at(wait_until, stream.next()),
            )
            .await?;
            let item = match next {
                Err(_) if first => {
                    return Ok(Attempt::Failed(AttemptError::FirstToken(
                        self.limits.first_token_timeout,
                    )));
                }
                Err(_) => {
                    return Ok(Attempt::Failed(AttemptError::Idle(
                        self.limits.idle_timeout,
                    )));
                }
                Ok(None) => {
                    return Ok(Attempt::Failed(AttemptError::Provider(
                        crate::provider::ProviderError::Truncated,
                    )));
                }
                Ok(Some(Err(error))) => return Ok(Attempt::Failed(AttemptError::Provider(error))),
                Ok(Some(Ok(event))) => event,
            };
            if first {
                chat.first_chunk();
            }
            first = false;
            let sent = match item {
                StreamEvent::TextDelta(delta) => out.model_text(delta).await,
                StreamEvent::ReasoningDelta(delta) => out.model_reasoning(delta).await,
                StreamEvent::ReasoningBlock(block) => {
                    reasoning.push(block);
                    Ok(())
                }
                StreamEvent::ToolCall(call) => {
                    tool_calls.push(call);
                    Ok(())
                }
                StreamEvent::Usage(reported) => {
                    let reported = self.prices.priced(model, reported);
                    usage = Some(reported);
                    out.attempt_usage(reported);
                    Ok(())
                }
                StreamEvent::Finish(finish) => {
                    return Ok(Attempt::Done(CallOutcome {
                        reasoning,
                        tool_calls,
                        usage,
                        finish,
                        candidate,
                        reset_usage: Usage::default(),
                    }));
                }
            };
            // A closed sink means the client is gone: same as a cancellation.
            sent.map_err(|_| CallError::Cancelled)?;
        }
    }
}

async fn emit_status(
    out: &mut TurnOutput,
    phase: Phase,
    message: String,
    iteration: u32,
    model: &ModelChoice,
) -> Result<(), CallError> {
    out.emit(EventKind::Status(Status {
        phase,
        message,
        iteration,
        model: Some(model.clone()),
    }))
    .await
    .map_err(|_| CallError::Cancelled)
}
