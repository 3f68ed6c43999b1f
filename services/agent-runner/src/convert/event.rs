//! Numbered domain events → `RunEvent`. A pause's messages go out as the
//! continuation sends them back ([`messages`]): one message per tool
//! result, reasoning blocks and provider data kept.

use parley_proto::{
    json::to_struct_wrapped,
    runner::v1::{self as pb, run_event::Event as PbEvent},
};

use crate::{
    events::{CallSource, Event, EventKind, PendingReason, Phase, StopReason},
    provider::{Attachment, Message, ModelChoice, ReasoningBlock, ToolCall, ToolResult, Usage},
};

/// The wire form of an event; its usage's costs are in `currency` (""
/// when the runner prices no model).
pub fn to_proto(event: Event, currency: &str) -> pb::RunEvent {
    let inner = match event.kind {
        EventKind::Status(status) => PbEvent::Status(pb::Status {
            phase: phase(status.phase) as i32,
            message: status.message,
            iteration: status.iteration,
            model: status.model.as_ref().map(model_ref),
        }),
        EventKind::TextDelta(text) => PbEvent::TextDelta(text),
        EventKind::ReasoningDelta(text) => PbEvent::ReasoningDelta(text),
        EventKind::StructuredDelta(text) => PbEvent::StructuredDelta(text),
        EventKind::ToolStart(start) => PbEvent::ToolStart(pb::ToolStart {
            call_id: start.call_id,
            name: start.name,
            input: Some(parley_proto::json::to_struct_wrapped(&start.input)),
            source: match start.source {
                CallSource::Native => pb::ToolCallSource::Native,
                CallSource::Text => pb::ToolCallSource::Text,
            } as i32,
        }),
        EventKind::ToolProgress(progress) => PbEvent::ToolProgress(pb::ToolProgress {
            call_id: progress.call_id,
            stage: progress.stage,
            message: progress.message,
            fraction: progress.fraction,
        }),
        EventKind::ToolComplete(complete) => PbEvent::ToolComplete(Box::new(pb::ToolComplete {
            call_id: complete.call_id,
            name: complete.name,
            success: complete.success,
            duration: prost_types::Duration::try_from(complete.duration).ok(),
            result_text: complete.result_text,
            payload: complete.payload,
            error: complete.error,
            error_reason: complete.error_reason,
        })),
        EventKind::Usage(report) => {
            PbEvent::Usage(usage(report.usage, report.model.as_ref(), currency))
        }
        EventKind::Finished(finished) => PbEvent::Finished(Box::new(pb::Finished {
            stop_reason: stop_reason(finished.stop_reason) as i32,
            raw_stop_reason: finished.raw_stop_reason,
            text: finished.text,
            structured: finished.structured,
            usage: Some(usage(finished.usage, None, currency)),
            iterations: finished.iterations,
            response_model: finished.response_model,
            response_id: finished.response_id,
            history_turns_left_out: finished.history_turns_left_out,
        })),
        EventKind::Error(error) => PbEvent::Error(pb::Error {
            code: error.code as i32,
            reason: error.reason,
            message: error.message,
            retryable: error.retryable,
            partial_text: error.partial_text,
            provider_detail: error.provider_detail,
            retry_after: error
                .retry_after
                .and_then(|d| prost_types::Duration::try_from(d).ok()),
        }),
        EventKind::StepReset(reset) => PbEvent::StepReset(pb::StepReset {
            iteration: reset.iteration,
            reason: reset.reason,
            message: reset.message,
        }),
        EventKind::DispatchPending(pending) => PbEvent::DispatchPending(pb::DispatchPending {
            iteration: pending.iteration,
            call_ids: pending.call_ids,
        }),
        EventKind::InputRequired(input) => PbEvent::InputRequired(pb::InputRequired {
            iteration: input.iteration,
            pending: input
                .pending
                .iter()
                .map(|pending| pb::PendingToolCall {
                    call: Some(tool_call(&pending.call)),
                    reason: match pending.reason {
                        PendingReason::Approval => pb::PendingReason::Approval,
                        PendingReason::Client => pb::PendingReason::Client,
                    } as i32,
                })
                .collect(),
            messages: messages(&input.messages),
            usage: Some(usage(input.usage, None, currency)),
            text: input.text,
        }),
    };
    pb::RunEvent {
        seq: event.seq,
        event: Some(inner),
    }
}

/// The wire form of domain messages, as a request carries them: one
/// message per tool result.
pub fn messages(messages: &[Message]) -> Vec<pb::Message> {
    let mut out = Vec::with_capacity(messages.len());
    for message in messages {
        match message {
            Message::User { text, attachments } => out.push(pb::Message {
                role: pb::Role::User as i32,
                text: text.clone(),
                attachments: attachments.iter().map(|file| attachment(file)).collect(),
                ..Default::default()
            }),
            Message::Assistant {
                reasoning,
                text,
                tool_calls,
            } => out.push(pb::Message {
                role: pb::Role::Assistant as i32,
                text: text.clone(),
                tool_calls: tool_calls.iter().map(tool_call).collect(),
                tool_result: None,
                reasoning: reasoning.iter().map(reasoning_block).collect(),
                attachments: Vec::new(),
            }),
            Message::ToolResults(results) => out.extend(results.iter().map(|result| pb::Message {
                role: pb::Role::Tool as i32,
                tool_result: Some(tool_result(result)),
                ..Default::default()
            })),
        }
    }
    out
}

fn tool_call(call: &ToolCall) -> pb::ToolCall {
    pb::ToolCall {
        id: call.id.clone(),
        name: call.name.clone(),
        input: Some(to_struct_wrapped(&call.input)),
        provider_data: call.provider_data.as_ref().map(to_struct_wrapped),
    }
}

fn tool_result(result: &ToolResult) -> pb::ToolResult {
    pb::ToolResult {
        call_id: result.call_id.clone(),
        name: result.name.clone(),
        text: result.text.clone(),
        is_error: result.is_error,
        attachments: result
            .attachments
            .iter()
            .map(|file| attachment(file))
            .collect(),
    }
}

fn attachment(file: &Attachment) -> pb::Attachment {
    pb::Attachment {
        name: file.name.clone(),
        media_type: file.media_type.clone(),
        data: file.data.clone(),
        ..Default::default()
    }
}

fn reasoning_block(block: &ReasoningBlock) -> pb::ReasoningBlock {
    pb::ReasoningBlock {
        text: block.text.clone(),
        signature: block.signature.clone().unwrap_or_default(),
        redacted: block.redacted.clone().unwrap_or_default(),
    }
}

/// The wire form of a model choice.
pub fn model_ref(choice: &ModelChoice) -> pb::ModelRef {
    pb::ModelRef {
        provider: choice.provider.clone(),
        model: choice.model.clone(),
        parameters: None,
    }
}

fn usage(usage: Usage, model: Option<&ModelChoice>, currency: &str) -> pb::Usage {
    pb::Usage {
        cost_micros: i64::try_from(usage.cost_micros).unwrap_or(i64::MAX),
        currency: currency.to_owned(),
        input_tokens: usage.input_tokens,
        output_tokens: usage.output_tokens,
        cached_input_tokens: usage.cached_input_tokens,
        cache_write_tokens: usage.cache_write_tokens,
        reasoning_tokens: usage.reasoning_tokens,
        model: model.map(model_ref),
    }
}

fn phase(phase: Phase) -> pb::Phase {
    match phase {
        Phase::Started => pb::Phase::Started,
        Phase::ModelCall => pb::Phase::ModelCall,
        Phase::Tools => pb::Phase::Tools,
        Phase::Retrying => pb::Phase::Retrying,
        Phase::Fallback => pb::Phase::Fallback,
    }
}

fn stop_reason(reason: StopReason) -> pb::StopReason {
    match reason {
        StopReason::EndTurn => pb::StopReason::EndTurn,
        StopReason::MaxTokens => pb::StopReason::MaxTokens,
        StopReason::StopSequence => pb::StopReason::StopSequence,
        StopReason::ContentFilter => pb::StopReason::ContentFilter,
        StopReason::Refusal => pb::StopReason::Refusal,
        StopReason::MaxIterations => pb::StopReason::MaxIterations,
        StopReason::Cancelled => pb::StopReason::Cancelled,
    }
}
