//! Tool calls written into the text (docs/output-format.md#tool-calls-in-the-text):
//! a bare JSON object, or one in a ```` ```json ```` fence, whose first
//! member names a registered tool.
//!
//! Accepted shapes: `{"tool": NAME, "input" | "arguments" | "args" |
//! "parameters": {...}}`, the same with `"name"` or `"type"` as the naming
//! member, optionally with an `"id"` (and `"type"` when it is not the naming
//! member). Arguments may also be a JSON-encoded object string or absent
//! (`{}`). Requiring the name first lets a stream release ordinary JSON in
//! prose after a few bytes instead of holding it back until it closes; JSON
//! that names no registered tool stays text.

use serde_json::{Map, Value};

use crate::{
    profile::Profile,
    syntax::{
        fence::{literal, skip_ws},
        marker::Tri,
    },
};

/// The members that may name the tool, in the order they are tried.
pub(crate) const NAME_KEYS: [&str; 3] = ["tool", "name", "type"];
/// The same members as they appear in the text.
const QUOTED_NAME_KEYS: [&[u8]; 3] = [b"\"tool\"", b"\"name\"", b"\"type\""];
/// The members that may carry the arguments.
pub(crate) const ARGUMENT_KEYS: [&str; 4] = ["input", "arguments", "args", "parameters"];
/// Most whitespace between the tokens of the prefix.
const MAX_PREFIX_GAP: usize = 64;

/// Matches `{ "KEY" : "NAME"` at `q` (an opening brace) with NAME a
/// registered tool: `Yes(index of KEY in NAME_KEYS)`.
pub(crate) fn match_prefix(t: &[u8], q: usize, profile: &Profile, at_end: bool) -> Tri<usize> {
    macro_rules! step {
        ($e:expr) => {
            match $e {
                Tri::Yes(k) => k,
                Tri::No => return Tri::No,
                Tri::More => return Tri::More,
            }
        };
    }
    let i = step!(skip_ws(t, q + 1, MAX_PREFIX_GAP, at_end));
    let mut more = false;
    let mut found = None;
    for (index, quoted) in QUOTED_NAME_KEYS.iter().enumerate() {
        match literal(t, i, quoted, at_end) {
            Tri::Yes(k) => {
                found = Some((index, k));
                break;
            }
            Tri::More => more = true,
            Tri::No => {}
        }
    }
    let Some((key, k)) = found else {
        return if more { Tri::More } else { Tri::No };
    };
    let k = step!(skip_ws(t, k, MAX_PREFIX_GAP, at_end));
    let k = step!(literal(t, k, b":", at_end));
    let k = step!(skip_ws(t, k, MAX_PREFIX_GAP, at_end));
    let start = step!(literal(t, k, b"\"", at_end));
    let rest = &t[start..];
    match memchr::memchr(b'"', rest) {
        Some(len) => {
            let name = &rest[..len];
            let known = std::str::from_utf8(name).is_ok_and(|name| profile.has_tool(name));
            if known { Tri::Yes(key) } else { Tri::No }
        }
        None => {
            let partial = profile
                .tools
                .iter()
                .any(|tool| tool.as_bytes().starts_with(rest));
            if partial && !at_end {
                Tri::More
            } else {
                Tri::No
            }
        }
    }
}

/// Reads a complete tool-call object: `(tool name, arguments object)`.
pub(crate) fn interpret(
    value: Value,
    key: usize,
    profile: &Profile,
) -> Result<(String, Value), String> {
    let Value::Object(mut members) = value else {
        return Err("a tool call must be a JSON object".into());
    };
    let name_key = NAME_KEYS.get(key).copied().unwrap_or("tool");
    let name = match members.remove(name_key) {
        Some(Value::String(name)) if profile.has_tool(&name) => name,
        Some(Value::String(name)) => return Err(format!("`{name}` is not a registered tool")),
        _ => return Err(format!("`{name_key}` must name a registered tool")),
    };
    let mut arguments = None;
    for arg_key in ARGUMENT_KEYS {
        if let Some(value) = members.remove(arg_key) {
            if arguments.is_some() {
                return Err("a tool call carries its arguments in one member only".into());
            }
            arguments = Some((arg_key, value));
        }
    }
    let arguments = match arguments {
        None | Some((_, Value::Null)) => Value::Object(Map::new()),
        Some((_, Value::Object(map))) => Value::Object(map),
        Some((arg_key, Value::String(encoded))) => match serde_json::from_str::<Value>(&encoded) {
            Ok(Value::Object(map)) => Value::Object(map),
            _ => {
                return Err(format!(
                    "`{arg_key}` must be an object or a JSON-encoded object"
                ));
            }
        },
        Some((arg_key, _)) => return Err(format!("`{arg_key}` must be an object")),
    };
    members.remove("id");
    if name_key != "type" {
        members.remove("type");
    }
    if let Some(extra) = members.keys().next() {
        return Err(format!("unexpected member `{extra}`"));
    }
    Ok((name, arguments))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn profile() -> Profile {
        Profile::tools_only(["search".to_owned(), "terminal_execute".to_owned()])
    }

    #[test]
    fn prefix_needs_a_registered_name_first() {
        let p = profile();
        assert_eq!(
            match_prefix(br#"{"tool": "search", "#, 0, &p, false),
            Tri::Yes(0)
        );
        assert_eq!(
            match_prefix(br#"{ "name":"search""#, 0, &p, false),
            Tri::Yes(1)
        );
        assert_eq!(
            match_prefix(br#"{"type": "terminal_execute""#, 0, &p, false),
            Tri::Yes(2)
        );
        assert_eq!(match_prefix(br#"{"tool": "sea"#, 0, &p, false), Tri::More);
        assert_eq!(match_prefix(br#"{"tool": "sea"#, 0, &p, true), Tri::No);
        assert_eq!(match_prefix(br#"{"tool": "other""#, 0, &p, false), Tri::No);
        assert_eq!(
            match_prefix(br#"{"input": {}, "tool": "search"}"#, 0, &p, false),
            Tri::No
        );
        assert_eq!(match_prefix(b"{ like this }", 0, &p, false), Tri::No);
        assert_eq!(match_prefix(b"{\"na", 0, &p, false), Tri::More);
    }

    #[test]
    fn interprets_every_accepted_shape() {
        let p = profile();
        let cases = [
            (json!({"tool": "search", "input": {"q": "x"}}), 0),
            (json!({"name": "search", "arguments": {"q": "x"}}), 1),
            (
                json!({"name": "search", "arguments": "{\"q\": \"x\"}", "type": "function"}),
                1,
            ),
            (json!({"tool": "search", "args": {"q": "x"}, "id": "1"}), 0),
            (
                json!({"type": "search", "id": "exec_001", "parameters": {"q": "x"}}),
                2,
            ),
        ];
        for (value, key) in cases {
            let (name, arguments) = interpret(value.clone(), key, &p).expect("valid call");
            assert_eq!(name, "search", "{value}");
            assert_eq!(arguments, json!({"q": "x"}), "{value}");
        }
        assert_eq!(
            interpret(json!({"tool": "search"}), 0, &p)
                .expect("no args")
                .1,
            json!({})
        );
    }

    #[test]
    fn rejects_tool_definitions_and_ambiguous_calls() {
        let p = profile();
        let definition = json!({"name": "search", "description": "Web search", "parameters": {}});
        assert!(
            interpret(definition, 1, &p)
                .expect_err("definition")
                .contains("description")
        );
        let twice = json!({"tool": "search", "input": {}, "args": {}});
        assert!(interpret(twice, 0, &p).is_err());
        assert!(interpret(json!({"tool": "search", "input": [1]}), 0, &p).is_err());
        assert!(interpret(json!({"tool": "other"}), 0, &p).is_err());
    }
}
