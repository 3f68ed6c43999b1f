//! Suggestion lists and text tool calls read straight from their JSON text,
//! without building a `serde_json::Value` tree first.
//!
//! Decoding such an element into a `Value` costs an allocation per key, per
//! string and per object (a B-tree node each), all thrown away once the few
//! strings the element carries are copied out. These readers walk the text
//! with [`Reader`] and keep only what the result needs: member
//! names are matched where they stand, and every member they then ignore is
//! still checked as the `Value` route would read it (every number parsed,
//! every string unescaped), so they accept exactly the text that route
//! accepts.
//!
//! They only ever answer the common case, a well-formed element of the right
//! shape. Anything else (a shape or schema violation, a repeated member, an
//! action the profile drops, arguments written as an encoded string, JSON
//! the reader leaves to `serde_json`) gives `None`, and the caller takes the
//! `Value` route, which decides and words the diagnostic as it always has.
//! So each reader, when it answers, gives what that route gives; the tests
//! below hold them to it.

use serde_json::{Map, Value};

use super::tool_calls::{ARGUMENT_KEYS, NAME_KEYS};
use crate::{
    json::value::Reader,
    model::{ActionHandler, SuggestedAction, SuggestedValue},
    profile::Profile,
};

/// Room for this many list items up front (suggestion lists are short).
const LIST_ITEMS: usize = 4;

/// Records member `index` as seen; `None` for a name written twice (left
/// to the `Value` route, where the last one wins).
fn first_time(seen: &mut u32, index: usize) -> Option<()> {
    let bit = 1 << index;
    if *seen & bit != 0 {
        return None;
    }
    *seen |= bit;
    Some(())
}

/// `read` over the whole of `json` (whitespace around it aside).
fn whole<T>(json: &str, read: impl FnOnce(&mut Reader<'_>) -> Option<T>) -> Option<T> {
    let mut reader = Reader::new(json);
    let value = read(&mut reader)?;
    reader.at_end().then_some(value)
}

/// An element read from its opening bracket at `text[opener]`, with the
/// position of its closing bracket and how deep it nests (as the lexer
/// measures both), when it nests at most `max_depth` levels.
pub(crate) type Found<T> = (T, usize, usize);

/// `read` from the opening bracket at `text[opener]`: for valid JSON the
/// reader ends where the lexer finds the closing bracket (it counts the
/// brackets outside strings, as JSON nests them), and nests as deep.
fn from_opener<T>(
    text: &str,
    opener: usize,
    max_depth: usize,
    read: impl FnOnce(&mut Reader<'_>) -> Option<T>,
) -> Option<Found<T>> {
    let mut reader = Reader::at(text, opener, max_depth);
    let value = read(&mut reader)?;
    let close = reader.position().checked_sub(1)?;
    Some((value, close, reader.deepest()))
}

/// The items of the array at the reader's position, each read by `item`.
fn list<T>(
    reader: &mut Reader<'_>,
    mut item: impl FnMut(&mut Reader<'_>) -> Option<T>,
) -> Option<Vec<T>> {
    let mut items = Vec::with_capacity(LIST_ITEMS);
    reader.items(|reader| {
        items.push(item(reader)?);
        Some(())
    })?;
    Some(items)
}

const VALUE_MEMBERS: [&str; 2] = ["label", "value"];

fn value_item(reader: &mut Reader<'_>) -> Option<SuggestedValue> {
    let (mut label, mut value, mut seen) = (None, None, 0);
    reader.members(
        |reader, name| match VALUE_MEMBERS.iter().position(|known| *known == name) {
            Some(index) => {
                first_time(&mut seen, index)?;
                let text = reader.owned_text()?;
                if index == 0 {
                    label = Some(text);
                } else {
                    value = Some(text);
                }
                Some(())
            }
            None => reader.skip(),
        },
    )?;
    Some(SuggestedValue {
        label: label?,
        value: value?,
    })
}

/// A `SUGGESTED_VALUES` array: what `elements::suggested_values` gives for
/// it, or `None`.
pub(crate) fn suggested_values(json: &str) -> Option<Vec<SuggestedValue>> {
    whole(json, |reader| list(reader, value_item))
}

/// [`suggested_values`] of the array opening at `text[opener]`.
pub(crate) fn suggested_values_at(
    text: &str,
    opener: usize,
    max_depth: usize,
) -> Option<Found<Vec<SuggestedValue>>> {
    from_opener(text, opener, max_depth, |reader| list(reader, value_item))
}

const ACTION_MEMBERS: [&str; 4] = ["label", "action", "handler", "params"];

/// An action item as written, before the profile looks at it.
struct ActionItem {
    label: String,
    action: String,
    handler: Option<ActionHandler>,
    params: Option<Map<String, Value>>,
}

fn action_item(reader: &mut Reader<'_>) -> Option<ActionItem> {
    let (mut label, mut action, mut handler, mut params, mut seen) = (None, None, None, None, 0);
    reader.members(|reader, name| {
        let Some(index) = ACTION_MEMBERS.iter().position(|known| *known == name) else {
            return reader.skip();
        };
        first_time(&mut seen, index)?;
        match index {
            0 => label = Some(reader.owned_text()?),
            1 => action = Some(reader.owned_text()?),
            2 if reader.null() => {}
            2 => {
                handler = Some(match reader.text()?.as_ref() {
                    "client" => ActionHandler::Client,
                    "server" => ActionHandler::Server,
                    _ => return None,
                })
            }
            _ if reader.null() => {}
            _ => match reader.value()? {
                Value::Object(members) => params = Some(members),
                _ => return None,
            },
        }
        Some(())
    })?;
    Some(ActionItem {
        label: label?,
        action: action?,
        handler,
        params,
    })
}

/// An action item the profile allows, with its handler decided.
fn allowed_action(reader: &mut Reader<'_>, profile: &Profile) -> Option<SuggestedAction> {
    let item = action_item(reader)?;
    let is_server = profile.server_actions.contains(&item.action);
    let is_client = profile.client_actions.contains(&item.action);
    if !(profile.client_actions.is_empty() || is_server || is_client) {
        // Dropped: the `Value` route quotes the item as written.
        return None;
    }
    let handler = if is_server {
        ActionHandler::Server
    } else if is_client {
        ActionHandler::Client
    } else {
        item.handler.unwrap_or_default()
    };
    Some(SuggestedAction {
        label: item.label,
        action: item.action,
        handler,
        params: item.params,
    })
}

/// A `SUGGESTED_ACTIONS` array: what `elements::suggested_actions` gives for
/// it when it drops no action, or `None`.
pub(crate) fn suggested_actions(json: &str, profile: &Profile) -> Option<Vec<SuggestedAction>> {
    whole(json, |reader| {
        list(reader, |reader| allowed_action(reader, profile))
    })
}

/// [`suggested_actions`] of the array opening at `text[opener]`.
pub(crate) fn suggested_actions_at(
    text: &str,
    opener: usize,
    max_depth: usize,
    profile: &Profile,
) -> Option<Found<Vec<SuggestedAction>>> {
    from_opener(text, opener, max_depth, |reader| {
        list(reader, |reader| allowed_action(reader, profile))
    })
}

/// The members a tool call may have, for one naming member: the name, the
/// argument members, then `id` and `type`.
const TOOL_MEMBERS: [[&str; 7]; 3] = [
    [
        "tool",
        "input",
        "arguments",
        "args",
        "parameters",
        "id",
        "type",
    ],
    [
        "name",
        "input",
        "arguments",
        "args",
        "parameters",
        "id",
        "type",
    ],
    [
        "type",
        "input",
        "arguments",
        "args",
        "parameters",
        "id",
        "type",
    ],
];

/// The tool call object at the reader's position, named in member
/// `NAME_KEYS[key]`.
fn tool_object(reader: &mut Reader<'_>, key: usize, profile: &Profile) -> Option<(String, Value)> {
    debug_assert_eq!(NAME_KEYS.len(), TOOL_MEMBERS.len());
    debug_assert!(ARGUMENT_KEYS.iter().eq(TOOL_MEMBERS[0][1..5].iter()));
    let members = TOOL_MEMBERS.get(key)?;
    let (mut name, mut arguments, mut seen) = (None, None, 0);
    reader.members(|reader, member| {
        // Any other member is an error the `Value` route words.
        let index = members.iter().position(|known| *known == member)?;
        first_time(&mut seen, index)?;
        match index {
            0 => name = Some(reader.owned_text()?),
            1..=4 => {
                if arguments.is_some() {
                    return None;
                }
                arguments = Some(if reader.null() {
                    Map::new()
                } else {
                    match reader.value()? {
                        Value::Object(members) => members,
                        _ => return None,
                    }
                });
            }
            _ => reader.skip()?,
        }
        Some(())
    })?;
    let name = name?;
    let arguments = Value::Object(arguments.unwrap_or_default());
    profile.has_tool(&name).then_some((name, arguments))
}

/// A text tool call named in member `NAME_KEYS[key]`: what
/// `tool_calls::interpret` gives for it (name, arguments), or `None`.
pub(crate) fn tool_call(json: &str, key: usize, profile: &Profile) -> Option<(String, Value)> {
    whole(json, |reader| tool_object(reader, key, profile))
}

/// [`tool_call`] of the object opening at `text[opener]`.
pub(crate) fn tool_call_at(
    text: &str,
    opener: usize,
    max_depth: usize,
    key: usize,
    profile: &Profile,
) -> Option<Found<(String, Value)>> {
    from_opener(text, opener, max_depth, |reader| {
        tool_object(reader, key, profile)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        elements::{self, tool_calls},
        json::extract::Lexer,
        profile::ProfileSpec,
    };
    use proptest::prelude::*;

    fn profile() -> Profile {
        Profile::new(&ProfileSpec {
            client_actions: vec!["close_chat".into(), "open".into()],
            server_actions: vec!["archive".into()],
            tools: vec!["search".into(), "create_row".into()],
            ..ProfileSpec::default()
        })
        .expect("valid profile")
    }

    /// The `Value` route for each reader.
    fn values_by_value(json: &str) -> Option<Vec<SuggestedValue>> {
        let value = serde_json::from_str::<Value>(json).ok()?;
        elements::suggested_values(&value).ok()
    }

    fn actions_by_value(json: &str, profile: &Profile) -> Option<Vec<SuggestedAction>> {
        let value = serde_json::from_str::<Value>(json).ok()?;
        let (kept, dropped) = elements::suggested_actions(&value, profile).ok()?;
        dropped.is_empty().then_some(kept)
    }

    fn tool_by_value(json: &str, key: usize, profile: &Profile) -> Option<(String, Value)> {
        let value = serde_json::from_str::<Value>(json).ok()?;
        tool_calls::interpret(value, key, profile).ok()
    }

    /// Agrees with the `Value` route; returns whether it answered.
    fn agrees(json: &str) -> bool {
        let p = profile();
        let values = suggested_values(json);
        if let Some(values) = &values {
            assert_eq!(Some(values), values_by_value(json).as_ref(), "{json}");
        }
        let actions = suggested_actions(json, &p);
        if let Some(actions) = &actions {
            assert_eq!(Some(actions), actions_by_value(json, &p).as_ref(), "{json}");
        }
        let mut tools = false;
        for key in 0..NAME_KEYS.len() {
            if let Some(call) = tool_call(json, key, &p) {
                assert_eq!(Some(call), tool_by_value(json, key, &p), "{json} key {key}");
                tools = true;
            }
        }
        agrees_from_the_opener(json);
        values.is_some() || actions.is_some() || tools
    }

    /// The readers from an opener in a longer text agree with the lexer
    /// (where it closes, how deep) and with the readers of the element
    /// alone, and answer whenever those do within the depth limit.
    fn agrees_from_the_opener(json: &str) {
        let p = profile();
        let text = format!("P: {json} tail }}] {{");
        let Some(opener) = text.find(['[', '{']).filter(|&at| at == 3) else {
            return;
        };
        let mut lexer = Lexer::new(opener);
        let lexed = lexer.run(text.as_bytes()).map(|c| (c, lexer.max_depth()));
        for max_depth in [1, 2, 3, 64] {
            let within = lexed.filter(|&(_, depth)| depth <= max_depth);
            let element = within.map(|(close, _)| &text[opener..=close]);
            let found = |answered: bool, close_depth: Option<(usize, usize)>| {
                assert_eq!(close_depth.is_some(), answered, "{text} {max_depth}");
                if let Some(close_depth) = close_depth {
                    assert_eq!(Some(close_depth), within, "{text} {max_depth}");
                }
            };
            let values = suggested_values_at(&text, opener, max_depth);
            let whole = element.and_then(suggested_values);
            found(whole.is_some(), values.as_ref().map(|f| (f.1, f.2)));
            assert_eq!(values.map(|f| f.0), whole, "{text}");
            let actions = suggested_actions_at(&text, opener, max_depth, &p);
            let whole = element.and_then(|json| suggested_actions(json, &p));
            found(whole.is_some(), actions.as_ref().map(|f| (f.1, f.2)));
            assert_eq!(actions.map(|f| f.0), whole, "{text}");
            for key in 0..NAME_KEYS.len() {
                let call = tool_call_at(&text, opener, max_depth, key, &p);
                let whole = element.and_then(|json| tool_call(json, key, &p));
                found(whole.is_some(), call.as_ref().map(|f| (f.1, f.2)));
                assert_eq!(call.map(|f| f.0), whole, "{text}");
            }
        }
    }

    #[test]
    fn answers_the_common_shapes_as_the_value_route_does() {
        let answered = [
            r#"[{"label": "A", "value": "a"}, {"value": "b\n\u00e9", "label": "B", "x": [1.5e3, {"y": null}]}]"#,
            r#"[]"#,
            r#"[{"label": "Close", "action": "close_chat", "handler": "server"}]"#,
            r#"[{"label": "Archive", "action": "archive", "handler": null, "params": {"id": 3}}]"#,
            r#"[{"label": "Open", "action": "open", "params": null, "extra": true}]"#,
            r#"{"tool": "search", "input": {"q": "x", "n": -2}}"#,
            r#"{"name": "search", "arguments": {"q": "x"}, "type": "function", "id": 7}"#,
            r#"{"type": "create_row", "id": "call_1", "parameters": null}"#,
            r#"{"tool": "search"}"#,
        ];
        for json in answered {
            assert!(agrees(json), "no answer for {json}");
        }
    }

    #[test]
    fn reads_from_the_opener_within_the_depth_limit_only() {
        let p = profile();
        let text = r#"X: [{"label": "A", "value": "a", "x": [[1]]}] tail ]"#;
        let close = text.rfind("] tail").unwrap_or(0);
        let (values, at, depth) = suggested_values_at(text, 3, 4).expect("within 4 levels");
        assert_eq!((values.len(), at, depth), (1, close, 4));
        assert_eq!(suggested_values_at(text, 3, 3), None);
        let call = r#"X: {"tool": "search", "input": {"q": [1]}} tail"#;
        let (_, at, depth) = tool_call_at(call, 3, 3, 0, &p).expect("within 3 levels");
        assert_eq!((at, depth), (call.rfind('}').unwrap_or(0), 3));
        assert_eq!(tool_call_at(call, 3, 2, 0, &p), None);
        for json in [
            r#"[{"label": "A", "value": "a"}, {"label": "B", "value": "b"}]"#,
            r#"[{"label": "Close", "action": "close_chat", "params": {"a": [1]}}]"#,
            r#"{"tool": "search", "input": {"q": "x"}}"#,
        ] {
            assert!(agrees(json), "{json}");
        }
    }

    #[test]
    fn leaves_everything_else_to_the_value_route() {
        let p = profile();
        let left = [
            // Repeated members: the last one wins there.
            r#"[{"label": "A", "label": "B", "value": "a"}]"#,
            // Shape violations, with their wording.
            r#"[{"label": "A"}]"#,
            r#"[{"label": 1, "value": "a"}]"#,
            r#"{"label": "A", "value": "a"}"#,
            // A number `Value` refuses, in an ignored member.
            r#"[{"label": "A", "value": "a", "x": 1e999}]"#,
            // A lone surrogate, in an ignored member.
            r#"[{"label": "A", "value": "a", "x": "\ud800"}]"#,
            // A trailing comma (the repair is the other route's).
            r#"[{"label": "A", "value": "a"},]"#,
        ];
        for json in left {
            assert_eq!(suggested_values(json), None, "{json}");
            assert!(!agrees(json), "{json}");
        }
        // An action the profile drops is quoted by the other route.
        let dropped = r#"[{"label": "Hack", "action": "rm_rf"}]"#;
        assert_eq!(suggested_actions(dropped, &p), None);
        let bad_handler = r#"[{"label": "x", "action": "open", "handler": "nobody"}]"#;
        assert_eq!(suggested_actions(bad_handler, &p), None);
        for json in [
            r#"{"tool": "search", "input": {}, "args": {}}"#,
            r#"{"tool": "search", "input": "{\"q\": 1}"}"#,
            r#"{"tool": "other", "input": {}}"#,
            r#"{"tool": "search", "description": "x"}"#,
            r#"{"tool": "search", "tool": "search"}"#,
            r#"{"tool": "search"} x"#,
        ] {
            assert_eq!(tool_call(json, 0, &p), None, "{json}");
        }
    }

    /// JSON-ish text built from the pieces these elements are made of.
    fn element() -> impl Strategy<Value = String> {
        let atom = prop_oneof![
            Just("\"label\"".to_owned()),
            Just("\"value\"".to_owned()),
            Just("\"action\"".to_owned()),
            Just("\"handler\"".to_owned()),
            Just("\"params\"".to_owned()),
            Just("\"tool\"".to_owned()),
            Just("\"name\"".to_owned()),
            Just("\"type\"".to_owned()),
            Just("\"input\"".to_owned()),
            Just("\"args\"".to_owned()),
            Just("\"id\"".to_owned()),
            Just("\"search\"".to_owned()),
            Just("\"close_chat\"".to_owned()),
            Just("\"archive\"".to_owned()),
            Just("\"client\"".to_owned()),
            Just("\"server\"".to_owned()),
            Just("\"a\\\"b\\u00e9\"".to_owned()),
            Just("\"\\ud800\"".to_owned()),
            Just("1".to_owned()),
            Just("-0".to_owned()),
            Just("2.5e400".to_owned()),
            Just("18446744073709551616".to_owned()),
            Just("null".to_owned()),
            Just("true".to_owned()),
        ];
        let piece = prop_oneof![
            4 => atom,
            1 => Just("{".to_owned()),
            1 => Just("}".to_owned()),
            1 => Just("[".to_owned()),
            1 => Just("]".to_owned()),
            2 => Just(":".to_owned()),
            2 => Just(",".to_owned()),
            1 => Just(" ".to_owned()),
        ];
        proptest::collection::vec(piece, 0..40).prop_map(|pieces| pieces.concat())
    }

    /// Well-formed elements of the right shapes, with random contents.
    fn wellformed() -> impl Strategy<Value = String> {
        let string =
            "[a-z_ é\"\\\\]{0,6}".prop_map(|s| serde_json::to_string(&s).unwrap_or_default());
        let scalar = prop_oneof![
            string.clone(),
            Just("null".to_owned()),
            Just("3".to_owned()),
            Just("-1.5".to_owned()),
        ];
        let key = prop_oneof![
            Just("label"),
            Just("value"),
            Just("action"),
            Just("handler"),
            Just("params"),
            Just("extra"),
            Just("tool"),
            Just("name"),
            Just("type"),
            Just("input"),
            Just("id"),
        ];
        let value = prop_oneof![
            scalar,
            Just("\"client\"".to_owned()),
            Just("\"search\"".to_owned()),
            Just("\"close_chat\"".to_owned()),
            Just("{\"q\": [1, \"x\"]}".to_owned()),
        ];
        // Each member once: a repeated one is always left to the other route.
        let object = proptest::collection::btree_map(key, value, 0..5).prop_map(|members| {
            let members: Vec<String> = members
                .into_iter()
                .map(|(k, v)| format!("\"{k}\": {v}"))
                .collect();
            format!("{{{}}}", members.join(", "))
        });
        prop_oneof![
            object.clone(),
            proptest::collection::vec(object, 0..4)
                .prop_map(|items| format!("[{}]", items.join(","))),
        ]
    }

    proptest! {
        #[test]
        fn never_disagrees_with_the_value_route(json in element()) {
            agrees(&json);
        }

        #[test]
        fn answers_whenever_the_value_route_accepts_without_a_repair(json in wellformed()) {
            agrees(&json);
            let p = profile();
            // Everything the other route accepts as is, these read too.
            prop_assert_eq!(suggested_values(&json).is_some(), values_by_value(&json).is_some());
            prop_assert_eq!(
                suggested_actions(&json, &p).is_some(),
                actions_by_value(&json, &p).is_some()
            );
            for key in 0..NAME_KEYS.len() {
                // Arguments written as an encoded string are the one shape left over.
                if !json.contains("\"input\": \"") {
                    prop_assert_eq!(
                        tool_call(&json, key, &p).is_some(),
                        tool_by_value(&json, key, &p).is_some()
                    );
                }
            }
        }
    }
}
