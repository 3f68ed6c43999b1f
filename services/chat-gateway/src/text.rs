//! Text the gateway renders for the model: deterministic JSON (object keys
//! sorted at every level, so the prompt is byte-identical whatever map order
//! serde_json was built with; its `preserve_order` feature may be switched
//! on by another crate), used by the prompt and the registry, and the one
//! rule for cutting text to a length.

use serde_json::{Map, Value};

/// `value` with the keys of every object sorted.
pub(crate) fn canonical(value: &Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            let mut out = Map::with_capacity(map.len());
            for k in keys {
                out.insert(k.clone(), canonical(&map[k]));
            }
            Value::Object(out)
        }
        Value::Array(items) => Value::Array(items.iter().map(canonical).collect()),
        other => other.clone(),
    }
}

/// One-line JSON with sorted keys.
pub(crate) fn compact(value: &Value) -> String {
    canonical(value).to_string()
}

/// Indented JSON with sorted keys.
pub(crate) fn pretty(value: &Value) -> String {
    // Serialising a `Value` cannot fail (its keys are strings).
    serde_json::to_string_pretty(&canonical(value)).unwrap_or_default()
}

/// `text` cut to at most `max` characters (on a char boundary), with `…`
/// marking the cut.
pub(crate) fn truncate(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let mut out: String = text.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn keys_are_sorted_at_every_level() {
        let v = json!({"b": 1, "a": {"z": [{"y": 1, "x": 2}], "c": null}});
        assert_eq!(compact(&v), r#"{"a":{"c":null,"z":[{"x":2,"y":1}]},"b":1}"#);
    }

    #[test]
    fn truncation_respects_char_boundaries() {
        assert_eq!(truncate("héllo", 10), "héllo");
        assert_eq!(truncate("héllo wörld", 5), "héll…");
        assert_eq!(truncate("ab", 2), "ab");
    }
}
