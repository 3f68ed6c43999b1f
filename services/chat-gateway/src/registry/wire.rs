//! Conversions from the registry's JSON values (schemas) to the protobuf
//! well-known types used on the wire (`google.protobuf.Struct` / `Value`).
//! Numbers become doubles, as the `Struct` encoding defines. The conversion
//! itself is [`parley_proto::json`]; this adds only the registry's rule that
//! a schema must be an object.

/// A JSON object as a protobuf `Struct`; `None` for any other JSON value.
pub fn json_to_struct(value: &serde_json::Value) -> Option<prost_types::Struct> {
    value.as_object().map(parley_proto::json::to_struct)
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost_types::value::Kind;
    use serde_json::json;

    #[test]
    fn objects_become_structs_with_every_kind() {
        let s = json_to_struct(&json!({"a": 1, "b": [true, null, "x"], "c": {"d": 2.5}}))
            .expect("object");
        assert_eq!(s.fields["a"].kind, Some(Kind::NumberValue(1.0)));
        let Some(Kind::ListValue(list)) = &s.fields["b"].kind else {
            panic!("b is a list")
        };
        assert_eq!(list.values[0].kind, Some(Kind::BoolValue(true)));
        assert_eq!(list.values[1].kind, Some(Kind::NullValue(0)));
        assert_eq!(list.values[2].kind, Some(Kind::StringValue("x".into())));
        let Some(Kind::StructValue(c)) = &s.fields["c"].kind else {
            panic!("c is a struct")
        };
        assert_eq!(c.fields["d"].kind, Some(Kind::NumberValue(2.5)));
    }

    #[test]
    fn non_objects_are_not_structs() {
        assert!(json_to_struct(&json!([1])).is_none());
        assert!(json_to_struct(&json!(true)).is_none());
    }
}
