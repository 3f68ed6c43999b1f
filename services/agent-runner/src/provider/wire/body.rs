//! What the JSON request bodies share around each API's own field names: an
//! optional field sent only when set, a tool's parameter schema and a tool
//! call's input as JSON objects, and the merging of a history into messages
//! whose roles alternate.

use serde_json::{Map, Value, json};

use crate::provider::{ToolCall, ToolSpec};

/// Inserts `key: value` into `map` when `value` is set.
pub fn put(map: &mut Map<String, Value>, key: &str, value: Option<impl Into<Value>>) {
    if let Some(value) = value {
        map.insert(key.into(), value.into());
    }
}

/// A tool's parameter schema: its input schema when that is an object,
/// otherwise an object schema without properties.
pub fn parameters(spec: &ToolSpec) -> Value {
    if spec.input_schema.is_object() {
        spec.input_schema.clone()
    } else {
        json!({ "type": "object", "properties": {} })
    }
}

/// A tool call's input replayed: the input when it is an object, otherwise
/// an empty object.
pub fn call_input(call: &ToolCall) -> Value {
    if call.input.is_object() {
        call.input.clone()
    } else {
        json!({})
    }
}

/// The messages of an API whose roles alternate, from `(role, parts)`
/// turns: empty turns are dropped and consecutive turns of one role merged.
/// Each message is `{"role": role, parts_key: parts}`.
pub fn alternating(
    turns: impl IntoIterator<Item = (&'static str, Vec<Value>)>,
    parts_key: &str,
) -> Vec<Value> {
    let mut merged: Vec<(&'static str, Vec<Value>)> = Vec::new();
    for (role, parts) in turns {
        if parts.is_empty() {
            continue;
        }
        match merged.last_mut() {
            Some((last, last_parts)) if *last == role => last_parts.extend(parts),
            _ => merged.push((role, parts)),
        }
    }
    merged
        .into_iter()
        .map(|(role, parts)| {
            let mut message = Map::new();
            message.insert("role".into(), json!(role));
            message.insert(parts_key.into(), Value::Array(parts));
            Value::Object(message)
        })
        .collect()
}
