//! Conversions between `serde_json` values and `google.protobuf.Struct` /
//! `Value`, used where JSON crosses the wire boundary.
//!
//! Protobuf numbers are doubles: integers beyond 2^53 lose precision on the
//! way out, and non-finite doubles (which JSON cannot carry) come back as
//! `null`.

use prost_types::value::Kind;
use serde_json::{Map, Number, Value};

/// A JSON object as a `google.protobuf.Struct`.
pub fn to_struct(map: &Map<String, Value>) -> prost_types::Struct {
    prost_types::Struct {
        fields: map
            .iter()
            .map(|(key, value)| (key.clone(), to_value(value)))
            .collect(),
    }
}

/// A JSON value as a `google.protobuf.Value`.
pub fn to_value(value: &Value) -> prost_types::Value {
    let kind = match value {
        Value::Null => Kind::NullValue(0),
        Value::Bool(b) => Kind::BoolValue(*b),
        Value::Number(n) => Kind::NumberValue(n.as_f64().unwrap_or(0.0)),
        Value::String(s) => Kind::StringValue(s.clone()),
        Value::Array(items) => Kind::ListValue(prost_types::ListValue {
            values: items.iter().map(to_value).collect(),
        }),
        Value::Object(map) => Kind::StructValue(to_struct(map)),
    };
    prost_types::Value { kind: Some(kind) }
}

/// A `google.protobuf.Struct` as a JSON object.
pub fn from_struct(value: &prost_types::Struct) -> Map<String, Value> {
    value
        .fields
        .iter()
        .map(|(key, value)| (key.clone(), from_value(value)))
        .collect()
}

/// A `google.protobuf.Value` as a JSON value. Whole doubles within the exact
/// integer range become JSON integers, so schemas with `"type": "integer"`
/// keep working after a round trip.
pub fn from_value(value: &prost_types::Value) -> Value {
    match &value.kind {
        None | Some(Kind::NullValue(_)) => Value::Null,
        Some(Kind::BoolValue(b)) => Value::Bool(*b),
        Some(Kind::NumberValue(n)) => number(*n),
        Some(Kind::StringValue(s)) => Value::String(s.clone()),
        Some(Kind::ListValue(list)) => Value::Array(list.values.iter().map(from_value).collect()),
        Some(Kind::StructValue(s)) => Value::Object(from_struct(s)),
    }
}

fn number(n: f64) -> Value {
    const EXACT: f64 = 9_007_199_254_740_992.0; // 2^53
    if n.fract() == 0.0 && n.abs() <= EXACT {
        // In range and whole: the cast is exact.
        return Value::Number(Number::from(n as i64));
    }
    Number::from_f64(n).map_or(Value::Null, Value::Number)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn round_trips_every_kind() {
        let value =
            json!({"s": "x", "n": 1.5, "i": 42, "b": true, "z": null, "a": [1, {"k": "v"}]});
        let Value::Object(map) = &value else {
            unreachable!()
        };
        assert_eq!(Value::Object(from_struct(&to_struct(map))), value);
    }

    #[test]
    fn non_finite_numbers_become_null() {
        let nan = prost_types::Value {
            kind: Some(Kind::NumberValue(f64::NAN)),
        };
        assert_eq!(from_value(&nan), Value::Null);
    }
}
