//! `serde_json::Value` ↔ `google.protobuf.Struct` / `Value`.
//!
//! Protobuf has no integers in `Value`: numbers become `f64` on the wire and
//! come back as integers when they are whole and exactly representable, so a
//! tool's `{"count": 3}` does not turn into `3.0` in its schema validation.
//! Non-finite numbers (which JSON cannot hold) become `null`.

use prost_types::{ListValue, Struct, Value as PbValue, value::Kind};
use serde_json::{Map, Number, Value};

/// A JSON object as a `Struct`; other JSON values are wrapped as `{"value": ...}`.
pub fn to_struct(value: &Value) -> Struct {
    match value {
        Value::Object(map) => Struct {
            fields: map.iter().map(|(k, v)| (k.clone(), to_pb(v))).collect(),
        },
        Value::Null => Struct::default(),
        other => Struct {
            fields: [("value".to_owned(), to_pb(other))].into_iter().collect(),
        },
    }
}

/// A `Struct` as a JSON object.
pub fn from_struct(value: &Struct) -> Value {
    Value::Object(
        value
            .fields
            .iter()
            .map(|(k, v)| (k.clone(), from_pb(v)))
            .collect::<Map<_, _>>(),
    )
}

/// A JSON value as a protobuf `Value`.
pub fn to_pb(value: &Value) -> PbValue {
    let kind = match value {
        Value::Null => Kind::NullValue(0),
        Value::Bool(b) => Kind::BoolValue(*b),
        Value::Number(n) => n.as_f64().map_or(Kind::NullValue(0), Kind::NumberValue),
        Value::String(s) => Kind::StringValue(s.clone()),
        Value::Array(items) => Kind::ListValue(ListValue {
            values: items.iter().map(to_pb).collect(),
        }),
        Value::Object(_) => Kind::StructValue(to_struct(value)),
    };
    PbValue { kind: Some(kind) }
}

/// A protobuf `Value` as JSON.
pub fn from_pb(value: &PbValue) -> Value {
    match &value.kind {
        None | Some(Kind::NullValue(_)) => Value::Null,
        Some(Kind::BoolValue(b)) => Value::Bool(*b),
        Some(Kind::NumberValue(n)) => number(*n),
        Some(Kind::StringValue(s)) => Value::String(s.clone()),
        Some(Kind::ListValue(list)) => Value::Array(list.values.iter().map(from_pb).collect()),
        Some(Kind::StructValue(s)) => from_struct(s),
    }
}

fn number(n: f64) -> Value {
    const EXACT: f64 = 9_007_199_254_740_992.0; // 2^53
    if n.fract() == 0.0 && n.abs() <= EXACT {
        return Value::Number(Number::from(n as i64));
    }
    Number::from_f64(n).map_or(Value::Null, Value::Number)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn round_trips_json_objects() {
        let value = json!({"a": 1, "b": [true, null, "x", 2.5], "c": {"d": -3}});
        assert_eq!(from_struct(&to_struct(&value)), value);
    }

    #[test]
    fn non_finite_and_huge_numbers_stay_safe() {
        assert_eq!(
            from_pb(&PbValue {
                kind: Some(Kind::NumberValue(f64::NAN))
            }),
            Value::Null
        );
        assert_eq!(
            from_pb(&PbValue {
                kind: Some(Kind::NumberValue(1e300))
            }),
            json!(1e300)
        );
    }
}
