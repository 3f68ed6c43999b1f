//! `serde_json` values ↔ `google.protobuf.Struct` / `Value`: the one
//! conversion every service uses where JSON crosses the wire.
//!
//! Protobuf numbers are doubles. A whole double within ±2^53 comes back as
//! a JSON integer, so a schema's `"type": "integer"` still holds after a
//! round trip (`{"count": 3}` does not turn into `3.0`); integers beyond
//! 2^53 lose precision on the way out, and non-finite doubles (which JSON
//! cannot carry) come back as `null`.

use prost_types::{ListValue, Struct, Value as PbValue, value::Kind};
use serde_json::{Map, Number, Value};

/// Largest magnitude up to which every integer is an exact double.
const EXACT_INTEGERS: f64 = 9_007_199_254_740_992.0; // 2^53

/// A JSON value as a protobuf `Value`.
pub fn to_value(value: &Value) -> PbValue {
    let kind = match value {
        Value::Null => Kind::NullValue(0),
        Value::Bool(b) => Kind::BoolValue(*b),
        Value::Number(n) => n.as_f64().map_or(Kind::NullValue(0), Kind::NumberValue),
        Value::String(s) => Kind::StringValue(s.clone()),
        Value::Array(items) => Kind::ListValue(ListValue {
            values: items.iter().map(to_value).collect(),
        }),
        Value::Object(map) => Kind::StructValue(to_struct(map)),
    };
    PbValue { kind: Some(kind) }
}

/// A JSON object as a protobuf `Struct`.
pub fn to_struct(map: &Map<String, Value>) -> Struct {
    Struct {
        fields: map
            .iter()
            .map(|(key, value)| (key.clone(), to_value(value)))
            .collect(),
    }
}

/// Any JSON value as a protobuf `Struct`: an object as itself, `null` as an
/// empty `Struct`, anything else wrapped as `{"value": ...}`.
pub fn to_struct_wrapped(value: &Value) -> Struct {
    match value {
        Value::Object(map) => to_struct(map),
        Value::Null => Struct::default(),
        other => Struct {
            fields: [("value".to_owned(), to_value(other))]
                .into_iter()
                .collect(),
        },
    }
}

/// A protobuf `Value` as JSON.
pub fn from_value(value: &PbValue) -> Value {
    match &value.kind {
        None | Some(Kind::NullValue(_)) => Value::Null,
        Some(Kind::BoolValue(b)) => Value::Bool(*b),
        Some(Kind::NumberValue(n)) => number(*n),
        Some(Kind::StringValue(s)) => Value::String(s.clone()),
        Some(Kind::ListValue(list)) => Value::Array(list.values.iter().map(from_value).collect()),
        Some(Kind::StructValue(s)) => Value::Object(from_struct(s)),
    }
}

/// A protobuf `Struct` as a JSON object map.
pub fn from_struct(value: &Struct) -> Map<String, Value> {
    value
        .fields
        .iter()
        .map(|(key, value)| (key.clone(), from_value(value)))
        .collect()
}

/// A protobuf `Struct` as a JSON object.
pub fn from_struct_value(value: &Struct) -> Value {
    Value::Object(from_struct(value))
}

fn number(n: f64) -> Value {
    if n.fract() == 0.0 && n.abs() <= EXACT_INTEGERS {
        // Whole and in range: the cast is exact.
        #[allow(clippy::cast_possible_truncation)]
        return Value::Number(Number::from(n as i64));
    }
    Number::from_f64(n).map_or(Value::Null, Value::Number)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn round_trips_every_kind() {
        let value = json!({"s": "x", "n": 1.5, "i": 42, "neg": -3, "b": true, "z": null, "a": [1, {"k": "v"}]});
        assert_eq!(from_struct_value(&to_struct_wrapped(&value)), value);
    }

    #[test]
    fn non_objects_are_wrapped_and_null_is_empty() {
        assert_eq!(
            from_struct_value(&to_struct_wrapped(&json!([1, 2]))),
            json!({"value": [1, 2]})
        );
        assert_eq!(to_struct_wrapped(&Value::Null), Struct::default());
    }

    #[test]
    fn whole_numbers_come_back_as_integers_and_non_finite_as_null() {
        let double = |n: f64| PbValue {
            kind: Some(Kind::NumberValue(n)),
        };
        assert_eq!(from_value(&double(3.0)), json!(3));
        assert_eq!(
            from_value(&double(EXACT_INTEGERS)),
            json!(9_007_199_254_740_992_i64)
        );
        assert_eq!(from_value(&double(1e300)), json!(1e300));
        assert_eq!(from_value(&double(f64::NAN)), Value::Null);
        assert_eq!(from_value(&double(f64::INFINITY)), Value::Null);
    }
}
