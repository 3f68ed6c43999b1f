//! `RunRequest` → [`Turn`], collecting every field violation.
//!
//! Shape problems (no messages, a role left unspecified, a tool result
//! without a call id, a tool without an endpoint, a schema that does not
//! compile, a negative duration) are reported here as `BadRequest` field
//! violations. Limits left at zero take the runner's defaults, and the
//! caller's gRPC deadline (less a small margin) caps the total timeout.
//! A continuation's decisions must match the calls its messages leave
//! pending, one each ([`decisions`]); whether each suits its call's tool
//! (approve a tool the runner runs, a result for one the app runs) is
//! checked once the tools are bound (`agent_loop::Runner::prepare_with`).

use std::time::Duration;

use parley_proto::runner::v1::{self as pb, Role, tool_decision, tool_endpoint::Kind};
use serde_json::Value;

use crate::{
    provider::{
        Message, ModelChoice, PromptCache, ReasoningBlock, SamplingParams, ToolCall, ToolResult,
    },
    turn::{Decision, Limits, ToolDef, ToolEndpoint, Turn, Verdict, Violation, pending_calls},
};
use parley_proto::json::from_struct_value;

/// The most the turn ends before the caller's deadline (5 % of it, at most this).
pub const DEADLINE_MARGIN: Duration = Duration::from_millis(250);

/// Converts and checks a request. `defaults` fill unset limits;
/// `deadline` is the caller's `grpc-timeout`, if any.
pub fn turn_from_request(
    request: pb::RunRequest,
    defaults: &Limits,
    deadline: Option<Duration>,
) -> Result<Turn, Vec<Violation>> {
    let mut violations = Vec::new();
    let messages = messages(request.messages, &mut violations);
    let tools = tool_defs(request.tools).unwrap_or_else(|more| {
        violations.extend(more);
        Vec::new()
    });
    let model = model_choice("model", request.model.unwrap_or_default(), &mut violations);
    let fallbacks = request
        .fallbacks
        .into_iter()
        .enumerate()
        .map(|(i, reference)| model_choice(&format!("fallbacks[{i}]"), reference, &mut violations))
        .collect();
    let output_schema = request.output_schema.as_ref().map(from_struct_value);
    if let Some(schema) = &output_schema
        && let Err(error) = jsonschema::validator_for(schema)
    {
        violations.push(Violation::new(
            "output_schema",
            format!("not a valid JSON schema: {error}"),
        ));
    }
    let mut limits = limits(
        request.limits.unwrap_or_default(),
        defaults,
        &mut violations,
    );
    if request.iterations_done >= limits.max_iterations.max(1) {
        violations.push(Violation::new(
            "iterations_done",
            format!(
                "must be less than the turn's max_iterations ({})",
                limits.max_iterations.max(1)
            ),
        ));
    }
    let decisions = decisions(request.decisions, &messages, &mut violations);
    let cache = prompt_cache(
        &request.system_prompt,
        request.system_prompt_stable_bytes,
        &request.prompt_cache_key,
        &mut violations,
    );
    if let Some(deadline) = deadline {
        // End a little before the caller gives up, so the error event with
        // the partial text still reaches it.
        let margin = (deadline / 20).min(DEADLINE_MARGIN);
        limits.total_timeout = limits.total_timeout.min(deadline - margin);
    }
    if !violations.is_empty() {
        return Err(violations);
    }
    Ok(Turn {
        system: request.system_prompt.into(),
        messages,
        tools,
        model,
        fallbacks,
        output_schema,
        output_schema_name: request.output_schema_name,
        limits,
        conversation_id: request.conversation_id,
        turn_id: request.turn_id,
        user_id: request.user_id,
        user_issuer: request.user_issuer,
        tenant: request.tenant,
        text_tool_calls: request.text_tool_calls,
        mid_answer_failover: request.mid_answer_failover,
        context: request.context.as_ref().map(from_struct_value),
        decisions,
        iterations_done: request.iterations_done,
        cache,
        inputs: Vec::new(),
        windows: Vec::new(),
        image_limits: Default::default(),
    })
}

/// Longest `prompt_cache_key`, in bytes.
pub const MAX_CACHE_KEY: usize = 64;

/// The request's prompt-cache hints, checked: the stable part of the
/// system prompt ends inside it on a character boundary, and the key is
/// short printable ASCII.
fn prompt_cache(
    system: &str,
    stable_bytes: u32,
    key: &str,
    violations: &mut Vec<Violation>,
) -> PromptCache {
    let stable = usize::try_from(stable_bytes).unwrap_or(usize::MAX);
    let stable = if stable <= system.len() && system.is_char_boundary(stable) {
        stable
    } else {
        violations.push(Violation::new(
            "system_prompt_stable_bytes",
            format!(
                "must end inside system_prompt ({} bytes) on a character boundary",
                system.len()
            ),
        ));
        0
    };
    if key.len() > MAX_CACHE_KEY || !key.bytes().all(|b| b.is_ascii_graphic()) {
        violations.push(Violation::new(
            "prompt_cache_key",
            format!("must be at most {MAX_CACHE_KEY} printable ASCII bytes"),
        ));
    }
    PromptCache {
        stable_system_bytes: stable,
        key: (!key.is_empty()).then(|| key.into()),
    }
}

/// A continuation's decisions: each names a call `messages` leave pending
/// ([`pending_calls`]), once, and says what to do with it; every pending
/// call has one. No decisions (a new turn) checks nothing.
fn decisions(
    input: Vec<pb::ToolDecision>,
    messages: &[Message],
    violations: &mut Vec<Violation>,
) -> Vec<Decision> {
    if input.is_empty() {
        return Vec::new();
    }
    let pending = pending_calls(messages);
    let pending_ids = || {
        let ids: Vec<&str> = pending.iter().map(|call| call.id.as_str()).collect();
        if ids.is_empty() {
            "none".to_owned()
        } else {
            ids.join(", ")
        }
    };
    let mut out: Vec<Decision> = Vec::with_capacity(input.len());
    for (i, decision) in input.into_iter().enumerate() {
        let field = |name: &str| format!("decisions[{i}].{name}");
        if !pending.iter().any(|call| call.id == decision.call_id) {
            violations.push(Violation::new(
                field("call_id"),
                format!(
                    "`{}` is not a pending call of the last assistant message (pending: {})",
                    decision.call_id,
                    pending_ids()
                ),
            ));
            continue;
        }
        if out.iter().any(|seen| seen.call_id == decision.call_id) {
            violations.push(Violation::new(
                field("call_id"),
                format!("a second decision for `{}`", decision.call_id),
            ));
            continue;
        }
        let verdict = match decision.decision {
            Some(tool_decision::Decision::Approve(approval)) => Verdict::Approve {
                arguments: approval.arguments.as_ref().map(from_struct_value),
            },
            Some(tool_decision::Decision::Reject(rejection)) => Verdict::Reject {
                reason: rejection.reason,
            },
            Some(tool_decision::Decision::Result(result)) if !result.error.is_empty() => {
                Verdict::Failed(result.error)
            }
            Some(tool_decision::Decision::Result(result)) => Verdict::Output(
                result
                    .output
                    .as_ref()
                    .map_or_else(|| Value::Object(Default::default()), from_struct_value),
            ),
            None => {
                violations.push(Violation::new(
                    field("decision"),
                    "a decision must approve, reject or carry the app's result",
                ));
                continue;
            }
        };
        out.push(Decision {
            call_id: decision.call_id,
            verdict,
        });
    }
    for call in &pending {
        if !out.iter().any(|decision| decision.call_id == call.id) {
            violations.push(Violation::new(
                "decisions",
                format!("pending call `{}` ({}) has no decision", call.id, call.name),
            ));
        }
    }
    out
}

/// A message's files; one without a name, a media type or bytes is a
/// violation at `field[j]`.
fn attachments(
    files: Vec<pb::Attachment>,
    field: &str,
    violations: &mut Vec<Violation>,
) -> Vec<std::sync::Arc<crate::provider::Attachment>> {
    let mut out = Vec::with_capacity(files.len());
    for (j, file) in files.into_iter().enumerate() {
        if file.name.is_empty() || file.media_type.is_empty() || file.data.is_empty() {
            violations.push(Violation::new(
                format!("{field}[{j}]"),
                "an attachment needs a name, a media type and bytes",
            ));
            continue;
        }
        out.push(std::sync::Arc::new(crate::provider::Attachment {
            name: file.name,
            media_type: file.media_type,
            data: file.data,
        }));
    }
    out
}

fn messages(input: Vec<pb::Message>, violations: &mut Vec<Violation>) -> Vec<Message> {
    if input.is_empty() {
        violations.push(Violation::new(
            "messages",
            "at least one message is required",
        ));
        return Vec::new();
    }
    let mut out: Vec<Message> = Vec::with_capacity(input.len());
    let mut open_calls: Vec<String> = Vec::new();
    let mut has_user = false;
    for (i, message) in input.into_iter().enumerate() {
        let field = |name: &str| format!("messages[{i}].{name}");
        match Role::try_from(message.role) {
            Ok(Role::User) => {
                has_user = true;
                open_calls.clear();
                out.push(Message::User {
                    text: message.text,
                    attachments: attachments(
                        message.attachments,
                        &field("attachments"),
                        violations,
                    ),
                });
            }
            Ok(Role::Assistant) => {
                let mut calls = Vec::with_capacity(message.tool_calls.len());
                for (j, call) in message.tool_calls.into_iter().enumerate() {
                    if call.id.is_empty() || call.name.is_empty() {
                        violations.push(Violation::new(
                            field(&format!("tool_calls[{j}]")),
                            "a tool call needs an id and a name",
                        ));
                        continue;
                    }
                    calls.push(ToolCall {
                        id: call.id,
                        name: call.name,
                        input: call
                            .input
                            .as_ref()
                            .map_or_else(|| Value::Object(Default::default()), from_struct_value),
                        provider_data: call.provider_data.as_ref().map(from_struct_value),
                    });
                }
                open_calls = calls.iter().map(|c| c.id.clone()).collect();
                out.push(Message::Assistant {
                    reasoning: message.reasoning.into_iter().map(reasoning).collect(),
                    text: message.text,
                    tool_calls: calls,
                });
            }
            Ok(Role::Tool) => {
                let Some(result) = message.tool_result else {
                    violations.push(Violation::new(
                        field("tool_result"),
                        "a tool message needs a tool_result",
                    ));
                    continue;
                };
                if !open_calls.contains(&result.call_id) {
                    violations.push(Violation::new(
                        field("tool_result.call_id"),
                        format!(
                            "`{}` answers no tool call of the preceding assistant message",
                            result.call_id
                        ),
                    ));
                    continue;
                }
                let result = ToolResult {
                    call_id: result.call_id,
                    name: result.name,
                    text: result.text,
                    is_error: result.is_error,
                    attachments: attachments(
                        result.attachments,
                        &field("tool_result.attachments"),
                        violations,
                    ),
                };
                match out.as_mut_slice() {
                    [
                        ..,
                        Message::Assistant { tool_calls, .. },
                        Message::ToolResults(results),
                    ] => {
                        results.push(result);
                        // In the calls' order, however the results came
                        // (a continuation's join those of the pause).
                        crate::turn::order_results(tool_calls, results);
                    }
                    _ => out.push(Message::ToolResults(vec![result])),
                }
            }
            Ok(Role::Unspecified) | Err(_) => {
                violations.push(Violation::new(
                    field("role"),
                    "the role must be USER, ASSISTANT or TOOL",
                ));
            }
        }
    }
    if !has_user {
        violations.push(Violation::new(
            "messages",
            "at least one user message is required",
        ));
    }
    out
}

/// A replayed reasoning block; empty strings are absent.
fn reasoning(block: pb::ReasoningBlock) -> ReasoningBlock {
    ReasoningBlock {
        text: block.text,
        signature: (!block.signature.is_empty()).then_some(block.signature),
        redacted: (!block.redacted.is_empty()).then_some(block.redacted),
    }
}

/// Converts a turn's tool declarations; every problem is a field violation.
pub fn tool_defs(tools: Vec<pb::ToolDefinition>) -> Result<Vec<ToolDef>, Vec<Violation>> {
    let mut violations = Vec::new();
    let defs = tools
        .into_iter()
        .enumerate()
        .filter_map(|(i, tool)| tool_def(i, tool, &mut violations))
        .collect();
    if violations.is_empty() {
        Ok(defs)
    } else {
        Err(violations)
    }
}

fn tool_def(
    index: usize,
    tool: pb::ToolDefinition,
    violations: &mut Vec<Violation>,
) -> Option<ToolDef> {
    let field = |name: &str| format!("tools[{index}].{name}");
    let endpoint = match tool.endpoint.and_then(|e| e.kind) {
        Some(Kind::Builtin(name)) => ToolEndpoint::Builtin(name),
        Some(Kind::Grpc(address)) => ToolEndpoint::Grpc(address),
        Some(Kind::Mcp(reference)) => match reference.split_once('/') {
            Some((server, tool)) if !server.is_empty() && !tool.is_empty() => ToolEndpoint::Mcp {
                server: server.to_owned(),
                tool: tool.to_owned(),
            },
            _ => {
                violations.push(Violation::new(
                    field("endpoint.mcp"),
                    format!("`{reference}` is not SERVER/TOOL"),
                ));
                return None;
            }
        },
        Some(Kind::Client(client)) => ToolEndpoint::Client {
            output_schema: client.output_schema.as_ref().map(from_struct_value),
        },
        None => {
            violations.push(Violation::new(
                field("endpoint"),
                "a tool needs a builtin, grpc, mcp or client endpoint",
            ));
            return None;
        }
    };
    let timeout = match tool.timeout.map(Duration::try_from) {
        None => None,
        Some(Ok(timeout)) if !timeout.is_zero() => Some(timeout),
        Some(Ok(_)) => None,
        Some(Err(_)) => {
            violations.push(Violation::new(field("timeout"), "must not be negative"));
            return None;
        }
    };
    Some(ToolDef {
        name: tool.name,
        description: tool.description,
        input_schema: tool
            .input_schema
            .as_ref()
            .map_or(Value::Null, from_struct_value),
        endpoint,
        timeout,
        needs_approval: tool.needs_approval,
    })
}

/// The longest model name a request may give, in bytes.
pub const MAX_MODEL_NAME_BYTES: usize = 256;

/// Whether `model` may go into a provider URL: at most
/// [`MAX_MODEL_NAME_BYTES`], only `A-Z a-z 0-9 . _ : / -`, and no `..`
/// (so no path segment can climb out of the provider's model path, and
/// no `#`, `?` or `%` can cut or rewrite it). Empty means the default.
pub fn check_model_name(model: &str) -> Result<(), String> {
    if model.len() > MAX_MODEL_NAME_BYTES {
        return Err(format!("is longer than {MAX_MODEL_NAME_BYTES} bytes"));
    }
    if !model
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b':' | b'/' | b'-'))
    {
        return Err("may hold only letters, digits and . _ : / -".to_owned());
    }
    if model.contains("..") {
        return Err("may not contain `..`".to_owned());
    }
    Ok(())
}

fn model_choice(
    field: &str,
    reference: pb::ModelRef,
    violations: &mut Vec<Violation>,
) -> ModelChoice {
    let params = reference.parameters.unwrap_or_default();
    if let Some(t) = params.temperature
        && !(0.0..=2.0).contains(&t)
    {
        violations.push(Violation::new(
            format!("{field}.parameters.temperature"),
            "must be between 0 and 2",
        ));
    }
    if let Some(p) = params.top_p
        && !(0.0..=1.0).contains(&p)
    {
        violations.push(Violation::new(
            format!("{field}.parameters.top_p"),
            "must be between 0 and 1",
        ));
    }
    if let Err(problem) = check_model_name(&reference.model) {
        violations.push(Violation::new(format!("{field}.model"), problem));
    }
    let effort = params.reasoning_effort.trim().to_lowercase();
    if !effort.is_empty() && !matches!(effort.as_str(), "minimal" | "low" | "medium" | "high") {
        violations.push(Violation::new(
            format!("{field}.parameters.reasoning_effort"),
            "must be minimal, low, medium or high",
        ));
    }
    ModelChoice {
        provider: reference.provider,
        model: reference.model,
        params: SamplingParams {
            temperature: params.temperature,
            top_p: params.top_p,
            reasoning_effort: (!effort.is_empty()).then_some(effort),
            thinking_budget: params.thinking_budget,
        },
    }
}

fn limits(input: pb::Limits, defaults: &Limits, violations: &mut Vec<Violation>) -> Limits {
    let mut duration =
        |name: &str, value: Option<prost_types::Duration>, default: Duration| match value
            .map(Duration::try_from)
        {
            None => default,
            Some(Ok(d)) if d.is_zero() => default,
            Some(Ok(d)) => d,
            Some(Err(_)) => {
                violations.push(Violation::new(
                    format!("limits.{name}"),
                    "must not be negative",
                ));
                default
            }
        };
    let tool_timeout = duration("tool_timeout", input.tool_timeout, defaults.tool_timeout);
    let first_token_timeout = duration(
        "first_token_timeout",
        input.first_token_timeout,
        defaults.first_token_timeout,
    );
    let idle_timeout = duration("idle_timeout", input.idle_timeout, defaults.idle_timeout);
    let total_timeout = duration("total_timeout", input.total_timeout, defaults.total_timeout);
    Limits {
        max_iterations: if input.max_iterations == 0 {
            defaults.max_iterations
        } else {
            input.max_iterations
        },
        max_output_tokens: if input.max_output_tokens == 0 {
            defaults.max_output_tokens
        } else {
            Some(input.max_output_tokens)
        },
        tool_timeout,
        first_token_timeout,
        idle_timeout,
        total_timeout,
        max_parallel_tools: if input.max_parallel_tools == 0 {
            defaults.max_parallel_tools
        } else {
            input.max_parallel_tools
        },
    }
}

#[cfg(test)]
mod tests;
