//! Domain types to `parley.parser.v1` messages: the one place the wire
//! format is produced (and [`typed`], the typed views of the built-in
//! payload types).

pub mod typed;

use parley_proto::{json::to_struct, parser::v1 as pb};
use pb::parse_stream_response::Output;
use serde_json::Value;

use crate::model::{
    ActionHandler, Diagnostic, DiagnosticKind, Parsed, PartialPayload, Payload, StreamItem,
    SuggestedAction, SuggestedValue, TextToolCall,
};

use self::typed::typed_view;

impl From<SuggestedValue> for pb::SuggestedValue {
    fn from(v: SuggestedValue) -> Self {
        Self {
            label: v.label,
            value: v.value,
        }
    }
}

/// For the values a stream shares with its parser.
impl From<&SuggestedValue> for pb::SuggestedValue {
    fn from(v: &SuggestedValue) -> Self {
        Self {
            label: v.label.clone(),
            value: v.value.clone(),
        }
    }
}

impl From<ActionHandler> for pb::ActionHandler {
    fn from(h: ActionHandler) -> Self {
        match h {
            ActionHandler::Client => Self::Client,
            ActionHandler::Server => Self::Server,
        }
    }
}

impl From<SuggestedAction> for pb::SuggestedAction {
    fn from(a: SuggestedAction) -> Self {
        Self {
            label: a.label,
            action: a.action,
            handler: pb::ActionHandler::from(a.handler) as i32,
            params: a.params.as_ref().map(to_struct),
        }
    }
}

/// For the actions a stream shares with its parser.
impl From<&SuggestedAction> for pb::SuggestedAction {
    fn from(a: &SuggestedAction) -> Self {
        Self {
            label: a.label.clone(),
            action: a.action.clone(),
            handler: pb::ActionHandler::from(a.handler) as i32,
            params: a.params.as_ref().map(to_struct),
        }
    }
}

impl From<Payload> for pb::Payload {
    fn from(p: Payload) -> Self {
        let typed = typed_view(&p.payload_type, &p.data);
        Self {
            r#type: p.payload_type,
            data: Some(to_struct(&p.data)),
            typed,
        }
    }
}

/// For a payload a stream shares with its parser: the data is read in place
/// (as the owned conversion does too), only the type name is copied.
impl From<&Payload> for pb::Payload {
    fn from(p: &Payload) -> Self {
        Self {
            r#type: p.payload_type.clone(),
            data: Some(to_struct(&p.data)),
            typed: typed_view(&p.payload_type, &p.data),
        }
    }
}

impl From<TextToolCall> for pb::TextToolCall {
    fn from(c: TextToolCall) -> Self {
        Self {
            arguments: arguments_struct(&c.arguments),
            id: c.id,
            name: c.name,
            raw: c.raw,
        }
    }
}

/// For a tool call a stream shares with its parser.
impl From<&TextToolCall> for pb::TextToolCall {
    fn from(c: &TextToolCall) -> Self {
        Self {
            arguments: arguments_struct(&c.arguments),
            id: c.id.clone(),
            name: c.name.clone(),
            raw: c.raw.clone(),
        }
    }
}

/// A tool call's arguments (always an object once parsed) as a `Struct`.
fn arguments_struct(arguments: &Value) -> Option<prost_types::Struct> {
    match arguments {
        Value::Object(map) => Some(to_struct(map)),
        _ => None,
    }
}

impl From<DiagnosticKind> for pb::DiagnosticKind {
    fn from(k: DiagnosticKind) -> Self {
        match k {
            DiagnosticKind::InvalidJson => Self::InvalidJson,
            DiagnosticKind::SchemaViolation => Self::SchemaViolation,
            DiagnosticKind::UnknownAction => Self::UnknownAction,
            DiagnosticKind::Repaired => Self::Repaired,
            DiagnosticKind::Unterminated => Self::Unterminated,
            DiagnosticKind::Duplicate => Self::Duplicate,
            DiagnosticKind::TooDeep => Self::TooDeep,
        }
    }
}

impl From<Diagnostic> for pb::Diagnostic {
    fn from(d: Diagnostic) -> Self {
        Self {
            kind: pb::DiagnosticKind::from(d.kind) as i32,
            element: d.element,
            raw: d.raw,
            reason: d.reason,
            offset: d.offset as u64,
        }
    }
}

impl From<PartialPayload> for pb::PayloadPartial {
    fn from(p: PartialPayload) -> Self {
        Self {
            r#type: p.payload_type,
            data: p.data.as_ref().map(to_struct),
            complete_paths: p.complete_paths,
            revision: p.revision,
            offset: p.offset as u64,
        }
    }
}

impl Parsed {
    /// The `ParseResponse` of this result.
    pub fn into_proto(self) -> pb::ParseResponse {
        pb::ParseResponse {
            message: self.message,
            suggested_values: self.suggested_values.into_iter().map(Into::into).collect(),
            suggested_actions: self.suggested_actions.into_iter().map(Into::into).collect(),
            custom_payload: self.custom_payload.map(Into::into),
            tool_calls: self.tool_calls.into_iter().map(Into::into).collect(),
            diagnostics: self.diagnostics.into_iter().map(Into::into).collect(),
        }
    }
}

impl StreamItem {
    /// The `ParseStreamResponse` carrying this item.
    pub fn into_proto(self) -> pb::ParseStreamResponse {
        let output = match self {
            Self::Text(text) => Output::Text(text.into_string()),
            Self::SuggestedValues(values) => Output::SuggestedValues(pb::SuggestedValues {
                values: values.iter().map(Into::into).collect(),
            }),
            Self::SuggestedActions(actions) => Output::SuggestedActions(pb::SuggestedActions {
                actions: actions.iter().map(Into::into).collect(),
            }),
            Self::CustomPayload(payload) => Output::CustomPayload(Box::new((&*payload).into())),
            Self::ToolCall(call) => Output::ToolCall((&*call).into()),
            Self::Diagnostic(diagnostic) => Output::Diagnostic(diagnostic.into()),
            Self::PartialPayload(partial) => Output::Partial(partial.into()),
            Self::PartialSuggestedValues(values) => {
                Output::SuggestedValuesPartial(pb::SuggestedValues {
                    values: values.into_iter().map(Into::into).collect(),
                })
            }
            Self::PartialSuggestedActions(actions) => {
                Output::SuggestedActionsPartial(pb::SuggestedActions {
                    actions: actions.into_iter().map(Into::into).collect(),
                })
            }
            Self::Final(parsed) => Output::Final(Box::new(parsed.into_proto())),
        };
        pb::ParseStreamResponse {
            output: Some(output),
        }
    }
}
