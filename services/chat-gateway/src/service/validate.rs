//! Request checks at the edge: sizes, formats and the deadline, each
//! refusal naming its field (`BadRequest` field violations).

use std::{sync::Arc, time::Duration};

use parley_proto::{gateway::v1 as gw, json, runner::v1 as runner};
use serde_json::Value;
use tokio::time::Instant;

use crate::{
    auth::Principal,
    config::{Tenants, TurnConfig},
    convert,
    error::GatewayError,
    registry::{ActionError, Handler, PageRef, Registry, ResolvedPage},
    store::StoredPage,
    turn::StartTurn,
};

/// Longest id a client may send (conversation, turn, request).
pub const MAX_ID_LEN: usize = 128;
/// Longest model override.
const MAX_MODEL_LEN: usize = 256;

/// A `Chat` request checked, as the turn it starts on the page it resolved
/// to.
pub fn chat(
    principal: Principal,
    request: tonic::Request<gw::ChatRequest>,
    config: &TurnConfig,
    registry: &Registry,
    tenants: &Tenants,
    max_inline: u64,
) -> Result<(StartTurn, Vec<AttachmentInput>), GatewayError> {
    let deadline = deadline(request.metadata(), config.max_duration);
    let request = request.into_inner();
    message(&request.message, "message", config)?;
    let attachments = attachment_refs(request.attachments, max_inline)?;
    id(&request.conversation_id, "conversation_id")?;
    id(&request.request_id, "request_id")?;
    let page = page(request.page.as_ref(), "page", config)?;
    let response_schema = response_schema(request.response_schema.as_ref(), config)?;
    let resolved = Arc::new(registry.resolve(&page_ref(&page)));
    let model = page_model(
        &request.model,
        &resolved,
        tenant_models(&principal, tenants),
    )?;
    let client_tools = client_tools(&request.client_tools, &resolved, config)?;
    let start = StartTurn {
        principal,
        conversation_id: request.conversation_id,
        message: request.message,
        page,
        resolved,
        response_schema,
        model,
        request_id: Some(request.request_id).filter(|id| !id.is_empty()),
        cancel_running: request.cancel_running,
        mid_answer_failover: request.mid_answer_failover,
        action: None,
        client_tools,
        attachments: Vec::new(),
        parent: None,
        deadline,
    };
    Ok((start, attachments))
}

/// Most files one message may carry.
pub const MAX_ATTACHMENTS: usize = 10;

/// A file a message attaches: stored already, or sent inline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AttachmentInput {
    /// The id `UploadAttachment` returned.
    Stored(String),
    /// A small file's name and bytes, stored before the turn starts.
    Inline {
        /// The file's name.
        name: String,
        /// Its bytes.
        data: Vec<u8>,
    },
}

/// `ChatRequest.attachments` checked for form: at most
/// [`MAX_ATTACHMENTS`], each a well-formed id or an inline file (not both),
/// no id twice, the inline bytes together within `max_inline`.
fn attachment_refs(
    refs: Vec<gw::AttachmentRef>,
    max_inline: u64,
) -> Result<Vec<AttachmentInput>, GatewayError> {
    if refs.len() > MAX_ATTACHMENTS {
        return Err(GatewayError::invalid(
            "INVALID_ATTACHMENT",
            "attachments",
            format!("at most {MAX_ATTACHMENTS} files a message"),
        ));
    }
    let mut out: Vec<AttachmentInput> = Vec::with_capacity(refs.len());
    let mut inline_bytes: u64 = 0;
    for (i, attachment) in refs.into_iter().enumerate() {
        match attachment.inline {
            Some(inline) => {
                let field = format!("attachments[{i}].inline");
                if !attachment.id.is_empty() {
                    return Err(GatewayError::invalid(
                        "INVALID_ATTACHMENT",
                        &format!("attachments[{i}]"),
                        "set `id` or `inline`, not both",
                    ));
                }
                inline_bytes = inline_bytes.saturating_add(inline.data.len() as u64);
                if inline_bytes > max_inline {
                    return Err(GatewayError::invalid(
                        "ATTACHMENT_TOO_LARGE",
                        &field,
                        format!(
                            "the inline files of one message may add up to attachments.max_inline_bytes ({max_inline} bytes); upload larger ones with UploadAttachment"
                        ),
                    ));
                }
                if inline.data.is_empty() {
                    return Err(GatewayError::invalid(
                        "INVALID_ATTACHMENT",
                        &format!("{field}.data"),
                        "the file is empty",
                    ));
                }
                out.push(AttachmentInput::Inline {
                    name: inline.name,
                    data: inline.data,
                });
            }
            None => {
                let field = format!("attachments[{i}].id");
                id(&attachment.id, &field)?;
                if attachment.id.is_empty() {
                    return Err(GatewayError::invalid(
                        "INVALID_ATTACHMENT",
                        &field,
                        "is empty",
                    ));
                }
                let stored = AttachmentInput::Stored(attachment.id);
                if out.contains(&stored) {
                    return Err(GatewayError::invalid(
                        "INVALID_ATTACHMENT",
                        &field,
                        "the same file is attached twice",
                    ));
                }
                out.push(stored);
            }
        }
    }
    Ok(out)
}

/// Most tools one request may declare for the app to run.
pub const MAX_CLIENT_TOOLS: usize = 16;

/// Longest tool name, in bytes (the providers' limit).
const MAX_TOOL_NAME: usize = 64;

/// Longest tool description, in bytes.
const MAX_TOOL_DESCRIPTION: usize = 4096;

/// `ChatRequest.client_tools` checked, as runner definitions (endpoint
/// `client`): named like tools (no clash with the page's or one another),
/// described within bounds, their schemas valid JSON schemas within
/// `turns.max_schema_bytes`.
pub fn client_tools(
    tools: &[gw::ClientToolDefinition],
    page: &ResolvedPage,
    config: &TurnConfig,
) -> Result<Vec<runner::ToolDefinition>, GatewayError> {
    let refuse = |field: String, problem: String| {
        Err(GatewayError::InvalidArgument {
            reason: "INVALID_CLIENT_TOOL",
            violations: vec![(field, problem)],
        })
    };
    if tools.len() > MAX_CLIENT_TOOLS {
        return refuse(
            "client_tools".into(),
            format!("{} tools, at most {MAX_CLIENT_TOOLS}", tools.len()),
        );
    }
    let mut definitions = Vec::with_capacity(tools.len());
    for (index, tool) in tools.iter().enumerate() {
        let field = |name: &str| format!("client_tools[{index}].{name}");
        let name_ok = !tool.name.is_empty()
            && tool.name.len() <= MAX_TOOL_NAME
            && tool
                .name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        if !name_ok {
            return refuse(
                field("name"),
                format!("must be 1 to {MAX_TOOL_NAME} letters, digits, `_` or `-`"),
            );
        }
        if page.tools.iter().any(|t| t.name == tool.name)
            || tools[..index].iter().any(|t| t.name == tool.name)
        {
            return refuse(
                field("name"),
                format!("`{}` is already a tool of this turn", tool.name),
            );
        }
        if tool.description.len() > MAX_TOOL_DESCRIPTION {
            return refuse(
                field("description"),
                format!("longer than {MAX_TOOL_DESCRIPTION} bytes"),
            );
        }
        for (name, schema) in [
            ("input_schema", &tool.input_schema),
            ("output_schema", &tool.output_schema),
        ] {
            let Some(schema) = schema else { continue };
            let value = json::from_struct_value(schema);
            let size = serde_json::to_vec(&value).map_or(usize::MAX, |bytes| bytes.len());
            if size > config.max_schema_bytes {
                return refuse(
                    field(name),
                    format!(
                        "is {size} bytes as JSON, the limit is {}",
                        config.max_schema_bytes
                    ),
                );
            }
            if let Err(error) = jsonschema::validator_for(&value) {
                return refuse(field(name), error.to_string());
            }
        }
        definitions.push(runner::ToolDefinition {
            name: tool.name.clone(),
            description: tool.description.clone(),
            input_schema: Some(tool.input_schema.clone().unwrap_or_else(|| {
                json::to_struct_wrapped(&serde_json::json!({"type": "object"}))
            })),
            endpoint: Some(runner::ToolEndpoint {
                kind: Some(runner::tool_endpoint::Kind::Client(runner::ClientTool {
                    output_schema: tool.output_schema.clone(),
                })),
            }),
            timeout: None,
            needs_approval: false,
        });
    }
    Ok(definitions)
}

/// An `ExecuteAction` request checked (a server action the page allows,
/// its parameters valid), as the turn of the message it renders.
pub fn execute_action(
    principal: Principal,
    request: tonic::Request<gw::ExecuteActionRequest>,
    config: &TurnConfig,
    registry: &Registry,
    tenants: &Tenants,
) -> Result<StartTurn, GatewayError> {
    let deadline = deadline(request.metadata(), config.max_duration);
    let request = request.into_inner();
    if request.action.is_empty() {
        return Err(GatewayError::invalid(
            "MISSING_ACTION",
            "action",
            "is required",
        ));
    }
    id(&request.conversation_id, "conversation_id")?;
    id(&request.request_id, "request_id")?;
    let page = page(request.page.as_ref(), "page", config)?;
    let action = registry
        .action(&request.action)
        .ok_or_else(|| GatewayError::UnknownAction(request.action.clone()))?;
    if action.handler != Handler::Server {
        return Err(GatewayError::ClientAction(request.action.clone()));
    }
    let resolved = Arc::new(registry.resolve(&page_ref(&page)));
    if !resolved
        .actions
        .iter()
        .any(|allowed| allowed.action == request.action)
    {
        return Err(GatewayError::ActionNotOnPage {
            action: request.action.clone(),
            page: page.page.clone(),
        });
    }
    let params = request
        .params
        .as_ref()
        .map_or_else(|| serde_json::json!({}), json::from_struct_value);
    let message = registry
        .render_action_message(&request.action, &params)
        .map_err(|error| match error {
            ActionError::InvalidParams { violations, .. } => GatewayError::InvalidArgument {
                reason: "INVALID_ACTION_PARAMS",
                violations: violations
                    .into_iter()
                    .map(|(pointer, problem)| {
                        (format!("params{}", pointer.replace('/', ".")), problem)
                    })
                    .collect(),
            },
            ActionError::Unknown(action) => GatewayError::UnknownAction(action),
            ActionError::NotServer(action) => GatewayError::ClientAction(action),
            ActionError::Template(error) => GatewayError::ActionTemplate(error.to_string()),
        })?;
    self::message(&message, "params", config)?;
    // The page's model, as for a message with none named.
    let model = page_model("", &resolved, tenant_models(&principal, tenants))?;
    Ok(StartTurn {
        principal,
        conversation_id: request.conversation_id,
        message,
        page,
        resolved,
        response_schema: None,
        model,
        request_id: Some(request.request_id).filter(|id| !id.is_empty()),
        cancel_running: false,
        mid_answer_failover: false,
        action: Some(request.action),
        client_tools: Vec::new(),
        attachments: Vec::new(),
        parent: None,
        deadline,
    })
}

/// The registry's key of a stored page.
pub fn page_ref(page: &StoredPage) -> PageRef {
    PageRef {
        page: page.page.clone(),
        tab: page.tab.clone(),
        subtab: page.subtab.clone(),
    }
}

/// The turn's deadline: the caller's `grpc-timeout`, capped by
/// `max_duration`.
pub fn deadline(metadata: &tonic::metadata::MetadataMap, max_duration: Duration) -> Instant {
    let budget = parley_grpc::deadline::grpc_timeout(metadata)
        .map_or(max_duration, |timeout| timeout.min(max_duration));
    Instant::now() + budget
}

/// The user message: not blank, not too large.
pub fn message(text: &str, field: &str, config: &TurnConfig) -> Result<(), GatewayError> {
    if text.trim().is_empty() {
        return Err(GatewayError::invalid(
            "EMPTY_MESSAGE",
            field,
            "must not be empty",
        ));
    }
    if text.len() > config.max_message_bytes {
        return Err(GatewayError::invalid(
            "MESSAGE_TOO_LARGE",
            field,
            format!(
                "is {} bytes, the limit is {}",
                text.len(),
                config.max_message_bytes
            ),
        ));
    }
    Ok(())
}

/// An id sent by the client (empty allowed).
pub fn id(value: &str, field: &str) -> Result<(), GatewayError> {
    if value.len() > MAX_ID_LEN || value.chars().any(char::is_control) {
        return Err(GatewayError::invalid(
            "INVALID_ID",
            field,
            format!("must be at most {MAX_ID_LEN} bytes without control characters"),
        ));
    }
    Ok(())
}

/// The conversation id of an RPC that needs one (`GetConversation`,
/// `DeleteConversation`, `CancelTurn`, `ResumeTurn`): empty or malformed is
/// a malformed request, `INVALID_ARGUMENT`, from every one of them (never
/// `NOT_FOUND`: that is for a well-formed id of no conversation of the
/// caller's).
pub fn conversation_id(value: &str) -> Result<(), GatewayError> {
    if value.is_empty() {
        return Err(GatewayError::invalid(
            "MISSING_CONVERSATION_ID",
            "conversation_id",
            "is required",
        ));
    }
    id(value, "conversation_id")
}

/// A required conversation id and an optional turn id (empty: none), as
/// `CancelTurn` and `ResumeTurn` take them.
pub fn turn_ref<'a>(
    conversation_id: &str,
    turn_id: &'a str,
) -> Result<Option<&'a str>, GatewayError> {
    self::conversation_id(conversation_id)?;
    id(turn_id, "turn_id")?;
    Ok(Some(turn_id).filter(|id| !id.is_empty()))
}

/// The page context, as stored with the message.
pub fn page(
    page: Option<&gw::PageContext>,
    field: &str,
    config: &TurnConfig,
) -> Result<StoredPage, GatewayError> {
    let stored = convert::page_to_stored(page);
    for (name, value) in [
        ("page", &stored.page),
        ("tab", &stored.tab),
        ("subtab", &stored.subtab),
        ("stream_id", &stored.stream_id),
    ] {
        id(value, &format!("{field}.{name}"))?;
    }
    if let Some(state) = &stored.state {
        let size = serde_json::to_vec(state).map_or(usize::MAX, |bytes| bytes.len());
        if size > config.max_state_bytes {
            return Err(GatewayError::invalid(
                "STATE_TOO_LARGE",
                &format!("{field}.state"),
                format!(
                    "is {size} bytes as JSON, the limit is {}",
                    config.max_state_bytes
                ),
            ));
        }
    }
    Ok(stored)
}

/// The response schema: small enough and a valid JSON Schema.
pub fn response_schema(
    schema: Option<&prost_types::Struct>,
    config: &TurnConfig,
) -> Result<Option<Value>, GatewayError> {
    let Some(schema) = schema else {
        return Ok(None);
    };
    let schema = json::from_struct_value(schema);
    let size = serde_json::to_vec(&schema).map_or(usize::MAX, |bytes| bytes.len());
    if size > config.max_schema_bytes {
        return Err(GatewayError::invalid(
            "SCHEMA_TOO_LARGE",
            "response_schema",
            format!(
                "is {size} bytes as JSON, the limit is {}",
                config.max_schema_bytes
            ),
        ));
    }
    if let Err(error) = jsonschema::validator_for(&schema) {
        return Err(GatewayError::invalid(
            "INVALID_RESPONSE_SCHEMA",
            "response_schema",
            error.to_string(),
        ));
    }
    Ok(Some(schema))
}

/// A model override: `provider/model`, or a bare name the runner resolves.
pub fn model(value: &str) -> Result<Option<runner::ModelRef>, GatewayError> {
    let value = value.trim();
    if value.is_empty() {
        return Ok(None);
    }
    let bad = |problem: &str| GatewayError::invalid("INVALID_MODEL", "model", problem.to_owned());
    if value.len() > MAX_MODEL_LEN || value.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(bad(
            "must be `provider/model` or a model alias, without spaces",
        ));
    }
    let (provider, model) = match value.split_once('/') {
        Some((provider, model)) if !provider.is_empty() && !model.is_empty() => (provider, model),
        Some(_) => return Err(bad("`provider/model` needs both parts")),
        None => ("", value),
    };
    Ok(Some(runner::ModelRef {
        provider: provider.to_owned(),
        model: model.to_owned(),
        parameters: None,
    }))
}

/// The models `principal`'s tenant is restricted to, when it is: its name
/// and `[tenants.NAME] models_allowed`.
pub fn tenant_models<'a>(
    principal: &'a Principal,
    tenants: &'a Tenants,
) -> Option<(&'a str, &'a [String])> {
    let tenant = principal.tenant.as_deref()?;
    let allowed = tenants.get(tenant)?.models_allowed.as_deref()?;
    Some((tenant, allowed))
}

/// The model of a turn on `page`: the request's, when the page (and the
/// caller's `tenant` restriction, when it has one) allows it
/// (`MODEL_NOT_ALLOWED` otherwise, naming the allowed ones), else the
/// page's default. A restricted tenant's turn runs on the page's default
/// when the tenant may use it, else on the first model the page allows
/// and the tenant may use, else (a page without a default) on the
/// tenant's first; a page whose default the tenant may not use and that
/// allows it nothing else is `FAILED_PRECONDITION` (`NO_MODEL_FOR_TENANT`).
pub fn page_model(
    requested: &str,
    page: &ResolvedPage,
    tenant: Option<(&str, &[String])>,
) -> Result<Option<runner::ModelRef>, GatewayError> {
    let requested = requested.trim();
    let tenant_allows =
        |name: &str| tenant.is_none_or(|(_, allowed)| allowed.iter().any(|a| a == name));
    if requested.is_empty() {
        let Some((name, allowed)) = tenant else {
            return page.model.as_deref().map_or(Ok(None), model);
        };
        let chosen = match page.model.as_deref() {
            Some(default) if tenant_allows(default) => Some(default),
            default => page
                .allowed_models()
                .find(|candidate| tenant_allows(candidate))
                .or_else(|| {
                    default
                        .is_none()
                        .then(|| allowed.first().map(String::as_str))
                        .flatten()
                }),
        };
        return match chosen {
            Some(chosen) => model(chosen),
            None => Err(GatewayError::NoModelForTenant {
                tenant: name.to_owned(),
                page: page.page_ref.page.clone(),
            }),
        };
    }
    let parsed = model(requested)?;
    let allowed: Vec<&str> = page
        .allowed_models()
        .filter(|candidate| tenant_allows(candidate))
        .collect();
    if !allowed.contains(&requested) {
        let whose = match tenant {
            Some((name, _)) => format!("page `{}` for tenant `{name}`", page.page_ref.page),
            None => format!("page `{}`", page.page_ref.page),
        };
        let problem = if allowed.is_empty() {
            format!(
                "`{}` is not allowed: {whose} lets requests name no model",
                crate::text::truncate(requested, 64),
            )
        } else {
            format!(
                "`{}` is not allowed on {whose}; allowed: {}",
                crate::text::truncate(requested, 64),
                allowed.join(", ")
            )
        };
        return Err(GatewayError::invalid("MODEL_NOT_ALLOWED", "model", problem));
    }
    Ok(parsed)
}

/// A `SubmitToolDecisions` request checked for form (ids, at least one
/// decision, each naming a call); the decisions are checked against the
/// paused turn by [`crate::engine::decide`].
pub fn tool_decisions(
    request: gw::SubmitToolDecisionsRequest,
) -> Result<crate::engine::decide::Decisions, GatewayError> {
    conversation_id(&request.conversation_id)?;
    if request.turn_id.is_empty() {
        return Err(GatewayError::invalid(
            "INVALID_ID",
            "turn_id",
            "the paused turn is required",
        ));
    }
    id(&request.turn_id, "turn_id")?;
    id(&request.request_id, "request_id")?;
    if request.decisions.is_empty() {
        return Err(GatewayError::invalid(
            "INVALID_DECISIONS",
            "decisions",
            "one decision per waiting call is required",
        ));
    }
    for (index, decision) in request.decisions.iter().enumerate() {
        id(&decision.call_id, &format!("decisions[{index}].call_id"))?;
    }
    Ok(crate::engine::decide::Decisions {
        conversation_id: request.conversation_id,
        turn_id: request.turn_id,
        decisions: request.decisions,
        request_id: Some(request.request_id).filter(|id| !id.is_empty()),
    })
}

/// Longest note on a payload decision, in bytes.
pub const MAX_DECISION_NOTE: usize = 2048;
/// Longest feedback comment, in bytes.
pub const MAX_FEEDBACK_COMMENT: usize = 4096;
/// Most feedback tags.
pub const MAX_FEEDBACK_TAGS: usize = 16;
/// Longest feedback tag, in bytes.
pub const MAX_FEEDBACK_TAG: usize = 64;

/// The conversation and turn a decision or rating is about: both required.
fn decided_turn(conversation_id: &str, turn_id: &str) -> Result<(), GatewayError> {
    self::conversation_id(conversation_id)?;
    if turn_id.is_empty() {
        return Err(GatewayError::invalid(
            "INVALID_ID",
            "turn_id",
            "the turn is required",
        ));
    }
    id(turn_id, "turn_id")
}

/// `text` within `max` bytes, without control characters other than line
/// breaks and tabs.
fn free_text(
    text: &str,
    field: &str,
    max: usize,
    reason: &'static str,
) -> Result<(), GatewayError> {
    if text.len() > max {
        return Err(GatewayError::invalid(
            reason,
            field,
            format!("is {} bytes, the limit is {max}", text.len()),
        ));
    }
    if text
        .chars()
        .any(|c| c.is_control() && !matches!(c, '\n' | '\r' | '\t'))
    {
        return Err(GatewayError::invalid(
            reason,
            field,
            "must not hold control characters",
        ));
    }
    Ok(())
}

/// A `RecordPayloadDecision` request checked: a decision, edited data only
/// with `EDITED` (and within `turns.max_state_bytes`), a bounded note.
pub fn payload_decision(
    request: gw::RecordPayloadDecisionRequest,
    config: &TurnConfig,
) -> Result<crate::engine::feedback::PayloadDecisionInput, GatewayError> {
    use crate::store::UserDecision;
    const REASON: &str = "INVALID_PAYLOAD_DECISION";
    decided_turn(&request.conversation_id, &request.turn_id)?;
    let decision = match gw::PayloadDecision::try_from(request.decision) {
        Ok(gw::PayloadDecision::Accepted) => UserDecision::Accepted,
        Ok(gw::PayloadDecision::Dismissed) => UserDecision::Dismissed,
        Ok(gw::PayloadDecision::Edited) => UserDecision::Edited,
        Ok(gw::PayloadDecision::Unspecified) | Err(_) => {
            return Err(GatewayError::invalid(
                REASON,
                "decision",
                "must be ACCEPTED, DISMISSED or EDITED",
            ));
        }
    };
    let applied_data = request.applied_data.as_ref().map(json::from_struct_value);
    if let Some(applied) = &applied_data {
        if decision != UserDecision::Edited {
            return Err(GatewayError::invalid(
                REASON,
                "applied_data",
                "is for PAYLOAD_DECISION_EDITED only",
            ));
        }
        let size = serde_json::to_vec(applied).map_or(usize::MAX, |bytes| bytes.len());
        if size > config.max_state_bytes {
            return Err(GatewayError::invalid(
                REASON,
                "applied_data",
                format!(
                    "is {size} bytes as JSON, the limit is {}",
                    config.max_state_bytes
                ),
            ));
        }
    }
    free_text(&request.note, "note", MAX_DECISION_NOTE, REASON)?;
    Ok(crate::engine::feedback::PayloadDecisionInput {
        conversation_id: request.conversation_id,
        turn_id: request.turn_id,
        decision,
        applied_data,
        note: request.note,
    })
}

/// A `SubmitFeedback` request checked: a rating of -1 or 1 to 5, a bounded
/// comment and tags.
pub fn feedback(
    request: gw::SubmitFeedbackRequest,
) -> Result<crate::engine::feedback::FeedbackInput, GatewayError> {
    const REASON: &str = "INVALID_FEEDBACK";
    decided_turn(&request.conversation_id, &request.turn_id)?;
    if !matches!(request.rating, -1 | 1..=5) {
        return Err(GatewayError::invalid(
            REASON,
            "rating",
            "must be -1 (thumbs down), 1 (thumbs up) or 1 to 5",
        ));
    }
    free_text(&request.comment, "comment", MAX_FEEDBACK_COMMENT, REASON)?;
    if request.tags.len() > MAX_FEEDBACK_TAGS {
        return Err(GatewayError::invalid(
            REASON,
            "tags",
            format!("at most {MAX_FEEDBACK_TAGS} tags"),
        ));
    }
    for (index, tag) in request.tags.iter().enumerate() {
        if tag.is_empty() || tag.len() > MAX_FEEDBACK_TAG || tag.chars().any(char::is_control) {
            return Err(GatewayError::invalid(
                REASON,
                &format!("tags[{index}]"),
                format!("must be 1 to {MAX_FEEDBACK_TAG} bytes without control characters"),
            ));
        }
    }
    Ok(crate::engine::feedback::FeedbackInput {
        conversation_id: request.conversation_id,
        turn_id: request.turn_id,
        rating: request.rating,
        comment: request.comment,
        tags: request.tags,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decisions_and_feedback_are_refused_with_the_field_at_fault() {
        let config = TurnConfig::default();
        let decision = |decision: gw::PayloadDecision, data: bool, note: &str| {
            payload_decision(
                gw::RecordPayloadDecisionRequest {
                    conversation_id: "c".into(),
                    turn_id: "t".into(),
                    decision: decision as i32,
                    applied_data: data
                        .then(|| json::to_struct_wrapped(&serde_json::json!({"a": 1}))),
                    note: note.into(),
                },
                &config,
            )
        };
        let field = |error: GatewayError| match error {
            GatewayError::InvalidArgument { reason, violations } => {
                (reason, violations[0].0.clone())
            }
            other => panic!("{other:?}"),
        };
        assert_eq!(
            field(decision(gw::PayloadDecision::Unspecified, false, "").expect_err("unset")),
            ("INVALID_PAYLOAD_DECISION", "decision".into())
        );
        assert_eq!(
            field(decision(gw::PayloadDecision::Dismissed, true, "").expect_err("data")),
            ("INVALID_PAYLOAD_DECISION", "applied_data".into())
        );
        assert_eq!(
            field(
                decision(gw::PayloadDecision::Accepted, false, &"n".repeat(2049))
                    .expect_err("note")
            ),
            ("INVALID_PAYLOAD_DECISION", "note".into())
        );
        let edited = decision(gw::PayloadDecision::Edited, true, "two rows\nonly").expect("ok");
        assert_eq!(edited.applied_data, Some(serde_json::json!({"a": 1})));

        let rate = |rating: i32, tags: Vec<String>| {
            feedback(gw::SubmitFeedbackRequest {
                conversation_id: "c".into(),
                turn_id: "t".into(),
                rating,
                comment: String::new(),
                tags,
            })
        };
        for bad in [0, -2, 6] {
            assert_eq!(
                field(rate(bad, vec![]).expect_err("rating")),
                ("INVALID_FEEDBACK", "rating".into())
            );
        }
        assert_eq!(
            field(rate(1, vec!["ok".into(), String::new()]).expect_err("tag")),
            ("INVALID_FEEDBACK", "tags[1]".into())
        );
        assert_eq!(
            field(rate(1, vec!["t".into(); 17]).expect_err("tags")),
            ("INVALID_FEEDBACK", "tags".into())
        );
        rate(-1, vec!["inaccurate".into()]).expect("thumbs down");
        assert_eq!(
            field(
                feedback(gw::SubmitFeedbackRequest {
                    conversation_id: "c".into(),
                    rating: 5,
                    ..Default::default()
                })
                .expect_err("no turn")
            ),
            ("INVALID_ID", "turn_id".into())
        );
    }

    #[test]
    fn a_restricted_tenant_gets_a_model_it_may_use_or_a_clear_refusal() {
        let registry = Registry::from_str(
            "version: 1\npages:\n  routed:\n    model: smart\n    models_allowed: [smart, cheap]\n  \
             pinned:\n    model: smart\n  open: {}\n",
            "test.yaml",
        )
        .expect("registry");
        let page = |name: &str| registry.resolve(&PageRef::new(name, "", ""));
        let chosen = |name: &str, tenant: &[String]| {
            page_model("", &page(name), Some(("t", tenant))).map(|m| m.map(|m| m.model))
        };
        let cheap = ["cheap".to_owned()];
        let smart = ["smart".to_owned()];
        assert_eq!(
            chosen("routed", &cheap).expect("cheap"),
            Some("cheap".into())
        );
        assert_eq!(
            chosen("routed", &smart).expect("smart"),
            Some("smart".into())
        );
        // No default: the tenant's first.
        assert_eq!(chosen("open", &cheap).expect("cheap"), Some("cheap".into()));
        // A default the tenant may not use, and nothing else allowed.
        let refused = chosen("pinned", &cheap).expect_err("nothing to run on");
        assert_eq!(
            (
                parley_grpc::status::ServiceError::code(&refused),
                refused.reason()
            ),
            (tonic::Code::FailedPrecondition, "NO_MODEL_FOR_TENANT")
        );
        // Unrestricted: the page's default, as before.
        let default = page_model("", &page("pinned"), None).expect("default");
        assert_eq!(default.map(|m| m.model).as_deref(), Some("smart"));
    }

    #[test]
    fn models_split_at_the_first_slash() {
        let parsed = model("openrouter/meta-llama/llama-3")
            .expect("valid")
            .expect("set");
        assert_eq!(
            (parsed.provider.as_str(), parsed.model.as_str()),
            ("openrouter", "meta-llama/llama-3")
        );
        let alias = model("fast").expect("valid").expect("set");
        assert_eq!(
            (alias.provider.as_str(), alias.model.as_str()),
            ("", "fast")
        );
        assert!(model("").expect("empty is fine").is_none());
        for bad in ["/x", "x/", "a b/c"] {
            assert_eq!(model(bad).expect_err(bad).reason(), "INVALID_MODEL");
        }
    }

    #[test]
    fn messages_must_be_present_and_bounded() {
        let config = TurnConfig {
            max_message_bytes: 10,
            ..TurnConfig::default()
        };
        assert_eq!(
            message("  \n", "message", &config)
                .expect_err("blank")
                .reason(),
            "EMPTY_MESSAGE"
        );
        assert_eq!(
            message("12345678901", "message", &config)
                .expect_err("big")
                .reason(),
            "MESSAGE_TOO_LARGE"
        );
        message("fine", "message", &config).expect("ok");
    }

    #[test]
    fn schemas_must_compile() {
        let config = TurnConfig::default();
        let bad = json::to_struct_wrapped(&serde_json::json!({"type": "no-such-type"}));
        assert_eq!(
            response_schema(Some(&bad), &config)
                .expect_err("bad")
                .reason(),
            "INVALID_RESPONSE_SCHEMA"
        );
        let good = json::to_struct_wrapped(&serde_json::json!({"type": "object"}));
        assert!(response_schema(Some(&good), &config).expect("ok").is_some());
    }

    #[test]
    fn deadlines_are_capped() {
        let mut metadata = tonic::metadata::MetadataMap::new();
        let max = Duration::from_secs(300);
        let before = Instant::now();
        assert!(deadline(&metadata, max) >= before + max);
        metadata.insert("grpc-timeout", "2S".parse().expect("header"));
        assert!(deadline(&metadata, max) <= Instant::now() + Duration::from_secs(2));
        metadata.insert("grpc-timeout", "1H".parse().expect("header"));
        assert!(deadline(&metadata, max) <= Instant::now() + max);
    }
}
