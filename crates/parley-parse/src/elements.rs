//! Turns decoded JSON into typed elements: suggested values and actions
//! (checked against their `{label, value}` / `{label, action, handler}`
//! shapes) and custom payloads (checked against their profile schema).
//!
//! A shape or schema violation rejects the whole element; an action the
//! profile does not allow drops only that action.
//!
//! Beside it, the readers of element text: [`direct`] reads suggestion
//! lists and tool calls straight from their JSON text, [`tool_calls`]
//! recognises the tool calls written into the text.

pub(crate) mod direct;
pub(crate) mod tool_calls;

use serde_json::{Map, Value};

use crate::{
    model::{ActionHandler, Payload, SuggestedAction, SuggestedValue},
    profile::{CompiledPayload, Profile},
};

/// An action dropped because the profile does not allow it.
#[derive(Debug)]
pub(crate) struct DroppedAction {
    /// The action item as JSON text.
    pub raw: String,
    /// The action identifier.
    pub action: String,
}

fn items(value: &Value) -> Result<&Vec<Value>, String> {
    value
        .as_array()
        .ok_or_else(|| format!("expected an array, found {}", kind(value)))
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn string_field<'a>(
    item: &'a Map<String, Value>,
    index: usize,
    field: &str,
) -> Result<&'a str, String> {
    match item.get(field) {
        Some(Value::String(s)) => Ok(s),
        Some(other) => Err(format!(
            "item {index}: `{field}` must be a string, found {}",
            kind(other)
        )),
        None => Err(format!("item {index}: missing `{field}`")),
    }
}

fn object(value: &Value, index: usize) -> Result<&Map<String, Value>, String> {
    value
        .as_object()
        .ok_or_else(|| format!("item {index}: expected an object, found {}", kind(value)))
}

/// A `SUGGESTED_VALUES` array.
pub(crate) fn suggested_values(value: &Value) -> Result<Vec<SuggestedValue>, String> {
    items(value)?
        .iter()
        .enumerate()
        .map(|(index, item)| {
            let item = object(item, index)?;
            Ok(SuggestedValue {
                label: string_field(item, index, "label")?.to_owned(),
                value: string_field(item, index, "value")?.to_owned(),
            })
        })
        .collect()
}

/// A `SUGGESTED_ACTIONS` array: the allowed actions and the dropped ones.
pub(crate) fn suggested_actions(
    value: &Value,
    profile: &Profile,
) -> Result<(Vec<SuggestedAction>, Vec<DroppedAction>), String> {
    let mut kept = Vec::new();
    let mut dropped = Vec::new();
    for (index, item) in items(value)?.iter().enumerate() {
        let fields = object(item, index)?;
        let label = string_field(fields, index, "label")?;
        let action = string_field(fields, index, "action")?;
        let written = match fields.get("handler") {
            None | Some(Value::Null) => None,
            Some(Value::String(h)) if h == "client" => Some(ActionHandler::Client),
            Some(Value::String(h)) if h == "server" => Some(ActionHandler::Server),
            Some(_) => {
                return Err(format!(
                    "item {index}: `handler` must be \"client\" or \"server\""
                ));
            }
        };
        let params = match fields.get("params") {
            None | Some(Value::Null) => None,
            Some(Value::Object(map)) => Some(map.clone()),
            Some(other) => {
                return Err(format!(
                    "item {index}: `params` must be an object, found {}",
                    kind(other)
                ));
            }
        };
        let is_server = profile.server_actions.contains(action);
        let is_client = profile.client_actions.contains(action);
        if !(profile.client_actions.is_empty() || is_server || is_client) {
            dropped.push(DroppedAction {
                raw: item.to_string(),
                action: action.to_owned(),
            });
            continue;
        }
        // The profile is authoritative for registered actions; the model's
        // word counts only for actions the profile does not list.
        let handler = if is_server {
            ActionHandler::Server
        } else if is_client {
            ActionHandler::Client
        } else {
            written.unwrap_or_default()
        };
        kept.push(SuggestedAction {
            label: label.to_owned(),
            action: action.to_owned(),
            handler,
            params,
        });
    }
    Ok((kept, dropped))
}

/// A custom payload: a JSON object satisfying the payload's schema.
pub(crate) fn payload(value: Value, spec: &CompiledPayload) -> Result<Payload, String> {
    if !value.is_object() {
        return Err(format!("expected an object, found {}", kind(&value)));
    }
    if let Some(validator) = &spec.validator
        && !validator.is_valid(&value)
    {
        return Err(match validator.validate(&value) {
            Err(error) => {
                let path = error.instance_path().to_string();
                let at = if path.is_empty() {
                    "at the root".to_owned()
                } else {
                    format!("at {path}")
                };
                format!("{at}: {error}")
            }
            Ok(()) => "does not satisfy the schema".to_owned(),
        });
    }
    match value {
        Value::Object(data) => Ok(Payload {
            payload_type: spec.name.clone(),
            data,
        }),
        other => Err(format!("expected an object, found {}", kind(&other))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::{PayloadSpec, ProfileSpec};
    use serde_json::json;

    #[test]
    fn values_need_string_label_and_value() {
        let ok =
            suggested_values(&json!([{"label": "A", "value": "a", "extra": 1}])).expect("valid");
        assert_eq!(
            ok,
            [SuggestedValue {
                label: "A".into(),
                value: "a".into()
            }]
        );
        assert!(
            suggested_values(&json!([{"label": "A"}]))
                .expect_err("missing")
                .contains("missing `value`")
        );
        assert!(suggested_values(&json!({"label": "A"})).is_err());
        assert!(suggested_values(&json!([{"label": 1, "value": "a"}])).is_err());
    }

    #[test]
    fn actions_are_filtered_and_handlers_come_from_the_profile() {
        let spec = ProfileSpec {
            client_actions: vec!["close_chat".into()],
            server_actions: vec!["archive".into()],
            ..ProfileSpec::default()
        };
        let profile = Profile::new(&spec).expect("valid");
        let value = json!([
            {"label": "Close", "action": "close_chat", "handler": "server"},
            {"label": "Archive", "action": "archive", "handler": "client", "params": {"id": 3}},
            {"label": "Hack", "action": "rm_rf", "handler": "client"}
        ]);
        let (kept, dropped) = suggested_actions(&value, &profile).expect("valid shape");
        assert_eq!(kept.len(), 2);
        assert_eq!(kept[0].handler, ActionHandler::Client);
        assert_eq!(kept[1].handler, ActionHandler::Server);
        assert_eq!(
            kept[1].params.as_ref().and_then(|p| p.get("id")),
            Some(&json!(3))
        );
        assert_eq!(dropped.len(), 1);
        assert_eq!(dropped[0].action, "rm_rf");
        let bad = json!([{"label": "x", "action": "close_chat", "handler": "nobody"}]);
        assert!(suggested_actions(&bad, &profile).is_err());
    }

    #[test]
    fn payloads_are_objects_that_satisfy_the_schema() {
        let spec = ProfileSpec {
            payloads: vec![PayloadSpec {
                name: "p".into(),
                marker: "P".into(),
                schema: Some(json!({"type": "object", "required": ["mode"]})),
            }],
            ..ProfileSpec::default()
        };
        let profile = Profile::new(&spec).expect("valid");
        let compiled = &profile.payloads[0];
        assert_eq!(
            payload(json!({"mode": 1}), compiled)
                .expect("valid")
                .payload_type,
            "p"
        );
        assert!(
            payload(json!({"x": 1}), compiled)
                .expect_err("violation")
                .contains("mode")
        );
        assert!(
            payload(json!([1]), compiled)
                .expect_err("not an object")
                .contains("an array")
        );
    }
}
