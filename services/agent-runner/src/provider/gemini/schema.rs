//! Normalising a JSON schema to the OpenAPI 3.0 subset Gemini accepts in
//! `responseSchema` and function `parameters`.
//!
//! Local `$ref`s (`#/$defs/...`, `#/definitions/...`) are inlined; `type`
//! arrays with `"null"` become `nullable`; `const` becomes a one-value
//! `enum`; `oneOf` becomes `anyOf`; a single-schema `allOf` is merged.
//! Everything else outside the subset is dropped, and each dropped keyword
//! is reported with its location (`additionalProperties at
//! /properties/address`) so callers can tell the user the schema was
//! loosened.

use serde_json::{Map, Value, json};

/// The keywords Gemini's `Schema` object accepts.
const KEPT: &[&str] = &[
    "type",
    "format",
    "title",
    "description",
    "nullable",
    "enum",
    "items",
    "minItems",
    "maxItems",
    "properties",
    "required",
    "minProperties",
    "maxProperties",
    "propertyOrdering",
    "minLength",
    "maxLength",
    "pattern",
    "minimum",
    "maximum",
    "anyOf",
    "default",
    "example",
];

/// The formats Gemini accepts, by type.
fn format_supported(kind: Option<&str>, format: &str) -> bool {
    matches!(
        (kind, format),
        (Some("string"), "enum" | "date-time")
            | (Some("number"), "float" | "double")
            | (Some("integer"), "int32" | "int64")
    )
}

/// How deep `$ref` inlining may go before a (recursive) reference is cut.
const MAX_REF_DEPTH: usize = 16;

/// A schema in Gemini's subset, and what was dropped to get there.
#[derive(Debug, Clone, PartialEq)]
pub struct NormalizedSchema {
    /// The schema to send.
    pub schema: Value,
    /// The dropped keywords, each as `keyword at /json/pointer`.
    pub dropped: Vec<String>,
}

/// Normalises `schema` for Gemini.
pub fn normalize_schema(schema: &Value) -> NormalizedSchema {
    let defs = collect_defs(schema);
    let mut dropped = Vec::new();
    let schema = normalize(schema, &defs, "", 0, &mut dropped);
    NormalizedSchema { schema, dropped }
}

/// The keywords [`normalize_schema`] would drop from `schema`, for callers
/// that want to warn before sending it.
pub fn dropped_schema_keywords(schema: &Value) -> Vec<String> {
    normalize_schema(schema).dropped
}

fn collect_defs(root: &Value) -> Map<String, Value> {
    let mut defs = Map::new();
    for key in ["$defs", "definitions"] {
        if let Some(Value::Object(map)) = root.get(key) {
            for (name, def) in map {
                defs.insert(format!("#/{key}/{name}"), def.clone());
            }
        }
    }
    defs
}

fn normalize(
    schema: &Value,
    defs: &Map<String, Value>,
    path: &str,
    depth: usize,
    dropped: &mut Vec<String>,
) -> Value {
    let Value::Object(object) = schema else {
        // `true` / `{}`-like schemas: Gemini has no "anything"; leave it open.
        return json!({});
    };
    let mut source = object.clone();
    if let Some(Value::String(target)) = source.get("$ref").cloned() {
        source.remove("$ref");
        match defs.get(&target) {
            Some(def) if depth < MAX_REF_DEPTH => {
                let inlined = normalize(def, defs, path, depth + 1, dropped);
                // Sibling keywords (description, ...) override the target's.
                if let Value::Object(mut merged) = inlined {
                    let siblings = normalize(&Value::Object(source), defs, path, depth, dropped);
                    if let Value::Object(siblings) = siblings {
                        merged.extend(siblings);
                    }
                    return Value::Object(merged);
                }
            }
            Some(_) => dropped.push(format!("$ref (recursive) at {}", at(path))),
            None => dropped.push(format!("$ref (not local) at {}", at(path))),
        }
    }
    // A single-schema allOf is the schema itself.
    if let Some(Value::Array(all)) = source.get("allOf").cloned()
        && let [Value::Object(only)] = all.as_slice()
    {
        source.remove("allOf");
        for (k, v) in only {
            source.entry(k.clone()).or_insert_with(|| v.clone());
        }
    }
    if let Some(one) = source.remove("oneOf") {
        source.entry("anyOf").or_insert(one);
    }
    if let Some(value) = source.remove("const") {
        match value {
            Value::String(_) => {
                source.insert("enum".into(), json!([value]));
            }
            _ => dropped.push(format!("const at {}", at(path))),
        }
    }

    let mut out = Map::new();
    // `type`: one name; `["string", "null"]` → string + nullable.
    match source.get("type") {
        Some(Value::String(t)) if t != "null" => {
            out.insert("type".into(), json!(t));
        }
        Some(Value::String(_)) => {
            out.insert("nullable".into(), json!(true));
        }
        Some(Value::Array(types)) => {
            let names: Vec<&str> = types.iter().filter_map(Value::as_str).collect();
            let concrete: Vec<&str> = names.iter().copied().filter(|t| *t != "null").collect();
            if names.contains(&"null") {
                out.insert("nullable".into(), json!(true));
            }
            match concrete.as_slice() {
                [one] => {
                    out.insert("type".into(), json!(one));
                }
                [] => {}
                many => {
                    out.insert(
                        "anyOf".into(),
                        Value::Array(many.iter().map(|t| json!({ "type": t })).collect()),
                    );
                }
            }
        }
        _ => {
            if source.contains_key("properties") {
                out.insert("type".into(), json!("object"));
            } else if source.contains_key("items") {
                out.insert("type".into(), json!("array"));
            }
        }
    }
    let kind = out.get("type").and_then(Value::as_str).map(str::to_owned);

    for (key, value) in &source {
        match key.as_str() {
            "type" => {}
            "$defs" | "definitions" if path.is_empty() => {}
            "properties" => {
                let Value::Object(props) = value else {
                    continue;
                };
                let mapped = props
                    .iter()
                    .map(|(name, prop)| {
                        let child = format!("{path}/properties/{name}");
                        (name.clone(), normalize(prop, defs, &child, depth, dropped))
                    })
                    .collect();
                out.insert(key.clone(), Value::Object(mapped));
            }
            "items" => {
                let child = format!("{path}/items");
                out.insert(key.clone(), normalize(value, defs, &child, depth, dropped));
            }
            "anyOf" => {
                let Value::Array(options) = value else {
                    continue;
                };
                let mapped = options
                    .iter()
                    .enumerate()
                    .map(|(i, option)| {
                        normalize(option, defs, &format!("{path}/anyOf/{i}"), depth, dropped)
                    })
                    .collect();
                out.insert(key.clone(), Value::Array(mapped));
            }
            "enum" => {
                let strings = value
                    .as_array()
                    .is_some_and(|values| values.iter().all(Value::is_string));
                if strings {
                    out.insert(key.clone(), value.clone());
                } else {
                    dropped.push(format!("enum (not all strings) at {}", at(path)));
                }
            }
            "format" => match value.as_str() {
                Some(format) if format_supported(kind.as_deref(), format) => {
                    out.insert(key.clone(), value.clone());
                }
                _ => dropped.push(format!("format {value} at {}", at(path))),
            },
            k if KEPT.contains(&k) => {
                out.insert(key.clone(), value.clone());
            }
            other => dropped.push(format!("{other} at {}", at(path))),
        }
    }
    // An enum is a string with Gemini's `format: enum`.
    if out.contains_key("enum") && matches!(kind.as_deref(), None | Some("string")) {
        out.entry("type").or_insert_with(|| json!("string"));
        out.entry("format").or_insert_with(|| json!("enum"));
    }
    Value::Object(out)
}

fn at(path: &str) -> &str {
    if path.is_empty() { "/" } else { path }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drops_and_reports_unsupported_keywords() {
        let schema = json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "additionalProperties": false,
            "properties": {
                "email": {"type": "string", "format": "email"},
                "age": {"type": ["integer", "null"], "minimum": 0, "exclusiveMaximum": 200},
                "tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": true},
                "kind": {"const": "person"}
            },
            "required": ["email"]
        });
        let n = normalize_schema(&schema);
        assert_eq!(
            n.schema,
            json!({
                "type": "object",
                "properties": {
                    "email": {"type": "string"},
                    "age": {"type": "integer", "nullable": true, "minimum": 0},
                    "tags": {"type": "array", "items": {"type": "string"}},
                    "kind": {"type": "string", "enum": ["person"], "format": "enum"}
                },
                "required": ["email"]
            })
        );
        let mut dropped = n.dropped.clone();
        dropped.sort();
        assert_eq!(
            dropped,
            vec![
                "$schema at /",
                "additionalProperties at /",
                "exclusiveMaximum at /properties/age",
                "format \"email\" at /properties/email",
                "uniqueItems at /properties/tags",
            ]
        );
        assert_eq!(dropped_schema_keywords(&schema).len(), 5);
    }

    #[test]
    fn inlines_local_refs_and_cuts_recursion() {
        let schema = json!({
            "type": "object",
            "$defs": {
                "address": {"type": "object", "properties": {"city": {"type": "string"}}},
                "node": {"type": "object", "properties": {"next": {"$ref": "#/$defs/node"}}}
            },
            "properties": {
                "home": {"$ref": "#/$defs/address", "description": "where"},
                "list": {"$ref": "#/$defs/node"}
            }
        });
        let n = normalize_schema(&schema);
        assert_eq!(
            n.schema["properties"]["home"],
            json!({"type": "object", "properties": {"city": {"type": "string"}}, "description": "where"})
        );
        assert!(
            n.dropped.iter().any(|d| d.starts_with("$ref (recursive)")),
            "{:?}",
            n.dropped
        );
        assert!(!n.dropped.iter().any(|d| d.starts_with("$defs")));
    }

    #[test]
    fn enums_types_and_one_of() {
        let n = normalize_schema(&json!({
            "type": "object",
            "properties": {
                "unit": {"type": "string", "enum": ["c", "f"]},
                "level": {"type": "integer", "enum": [1, 2]},
                "either": {"oneOf": [{"type": "string"}, {"type": "number", "format": "double"}]},
                "multi": {"type": ["string", "number"]}
            }
        }));
        let p = &n.schema["properties"];
        assert_eq!(
            p["unit"],
            json!({"type": "string", "enum": ["c", "f"], "format": "enum"})
        );
        assert_eq!(p["level"], json!({"type": "integer"}));
        assert_eq!(
            p["either"],
            json!({"anyOf": [{"type": "string"}, {"type": "number", "format": "double"}]})
        );
        assert_eq!(
            p["multi"],
            json!({"anyOf": [{"type": "string"}, {"type": "number"}]})
        );
        assert_eq!(
            n.dropped,
            vec!["enum (not all strings) at /properties/level"]
        );
    }

    #[test]
    fn a_clean_schema_is_unchanged() {
        let schema = json!({"type": "object", "properties": {"a": {"type": "string", "description": "x"}}, "required": ["a"]});
        let n = normalize_schema(&schema);
        assert_eq!(n.schema, schema);
        assert!(n.dropped.is_empty());
    }
}
