//! Suggestion lists and text tool calls read straight from their JSON text,
//! without building a `serde_json::Value` tree first.
//!
//! Decoding such an element into a `Value` costs an allocation per key, per
//! string and per object (a B-tree node each), all thrown away once the few
//! strings the element carries are copied out. These readers drive the same
//! `serde_json` deserializer over the same text and keep only what the
//! result needs, so they accept exactly the text the `Value` route accepts:
//! every number is parsed and every string unescaped and checked as it
//! would be, even in members they then ignore ([`Checked`]).
//!
//! They only ever answer the common case, a well-formed element of the right
//! shape. Anything else (a shape or schema violation, a repeated member, an
//! action the profile drops, arguments written as an encoded string) gives
//! `None`, and the caller takes the `Value` route, which decides and words
//! the diagnostic as it always has. So each reader, when it answers, gives
//! what that route gives; the tests below hold them to it.

use std::fmt;

use serde::{
    Deserialize, Deserializer,
    de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor},
};
use serde_json::{Map, Value};

use crate::{
    model::{ActionHandler, SuggestedAction, SuggestedValue},
    profile::Profile,
    tool_calls::{ARGUMENT_KEYS, NAME_KEYS},
};

/// Any JSON value, read and checked as a `Value` would be, then dropped.
struct Checked;

impl<'de> Deserialize<'de> for Checked {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(CheckedVisitor)
    }
}

struct CheckedVisitor;

impl<'de> Visitor<'de> for CheckedVisitor {
    type Value = Checked;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<Checked, E> {
        Ok(Checked)
    }

    fn visit_i64<E>(self, _: i64) -> Result<Checked, E> {
        Ok(Checked)
    }

    fn visit_u64<E>(self, _: u64) -> Result<Checked, E> {
        Ok(Checked)
    }

    fn visit_f64<E>(self, _: f64) -> Result<Checked, E> {
        Ok(Checked)
    }

    fn visit_str<E>(self, _: &str) -> Result<Checked, E> {
        Ok(Checked)
    }

    fn visit_unit<E>(self) -> Result<Checked, E> {
        Ok(Checked)
    }

    fn visit_none<E>(self) -> Result<Checked, E> {
        Ok(Checked)
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Checked, D::Error> {
        Checked::deserialize(deserializer)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Checked, A::Error> {
        while seq.next_element::<Checked>()?.is_some() {}
        Ok(Checked)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Checked, A::Error> {
        while map.next_entry::<Checked, Checked>()?.is_some() {}
        Ok(Checked)
    }
}

/// A member name, matched against `names` (its index) without keeping it.
struct KeyIn(&'static [&'static str]);

impl<'de> DeserializeSeed<'de> for KeyIn {
    /// The index in the list, or `None` for any other name.
    type Value = Option<usize>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_identifier(self)
    }
}

impl<'de> Visitor<'de> for KeyIn {
    type Value = Option<usize>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a member name")
    }

    fn visit_str<E>(self, name: &str) -> Result<Self::Value, E> {
        Ok(self.0.iter().position(|known| *known == name))
    }
}

/// Records member `index` as seen; a name written twice is left to the
/// `Value` route (where the last one wins).
fn first_time<E: de::Error>(seen: &mut u32, index: usize) -> Result<(), E> {
    let bit = 1 << index;
    if *seen & bit != 0 {
        return Err(E::custom("a member is repeated"));
    }
    *seen |= bit;
    Ok(())
}

fn give_up<E: de::Error>() -> E {
    E::custom("left to the Value route")
}

/// The items of a JSON array, each read by `T`.
struct Items<T>(Vec<T>);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Items<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_seq(ItemsVisitor(std::marker::PhantomData))
    }
}

struct ItemsVisitor<T>(std::marker::PhantomData<T>);

impl<'de, T: Deserialize<'de>> Visitor<'de> for ItemsVisitor<T> {
    type Value = Items<T>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an array")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(4).min(64));
        while let Some(item) = seq.next_element()? {
            items.push(item);
        }
        Ok(Items(items))
    }
}

const VALUE_MEMBERS: &[&str] = &["label", "value"];

struct ValueItem(SuggestedValue);

impl<'de> Deserialize<'de> for ValueItem {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(ValueItemVisitor)
    }
}

struct ValueItemVisitor;

impl<'de> Visitor<'de> for ValueItemVisitor {
    type Value = ValueItem;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a suggested value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<ValueItem, A::Error> {
        let (mut label, mut value, mut seen) = (None, None, 0);
        while let Some(key) = map.next_key_seed(KeyIn(VALUE_MEMBERS))? {
            match key {
                Some(index) => {
                    first_time(&mut seen, index)?;
                    let text: String = map.next_value()?;
                    if index == 0 {
                        label = Some(text);
                    } else {
                        value = Some(text);
                    }
                }
                None => {
                    map.next_value::<Checked>()?;
                }
            }
        }
        match (label, value) {
            (Some(label), Some(value)) => Ok(ValueItem(SuggestedValue { label, value })),
            _ => Err(give_up()),
        }
    }
}

const ACTION_MEMBERS: &[&str] = &["label", "action", "handler", "params"];

/// An action item as written, before the profile looks at it.
struct ActionItem {
    label: String,
    action: String,
    handler: Option<ActionHandler>,
    params: Option<Map<String, Value>>,
}

impl<'de> Deserialize<'de> for ActionItem {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(ActionItemVisitor)
    }
}

struct ActionItemVisitor;

impl<'de> Visitor<'de> for ActionItemVisitor {
    type Value = ActionItem;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a suggested action")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<ActionItem, A::Error> {
        let (mut label, mut action, mut handler, mut params, mut seen) =
            (None, None, None, None, 0);
        while let Some(key) = map.next_key_seed(KeyIn(ACTION_MEMBERS))? {
            let Some(index) = key else {
                map.next_value::<Checked>()?;
                continue;
            };
            first_time(&mut seen, index)?;
            match index {
                0 => label = Some(map.next_value::<String>()?),
                1 => action = Some(map.next_value::<String>()?),
                2 => {
                    handler = match map.next_value::<Option<String>>()?.as_deref() {
                        None => None,
                        Some("client") => Some(ActionHandler::Client),
                        Some("server") => Some(ActionHandler::Server),
                        Some(_) => return Err(give_up()),
                    }
                }
                _ => {
                    params = match map.next_value::<Value>()? {
                        Value::Null => None,
                        Value::Object(members) => Some(members),
                        _ => return Err(give_up()),
                    }
                }
            }
        }
        match (label, action) {
            (Some(label), Some(action)) => Ok(ActionItem {
                label,
                action,
                handler,
                params,
            }),
            _ => Err(give_up()),
        }
    }
}

/// A `SUGGESTED_VALUES` array: what `elements::suggested_values` gives for
/// it, or `None`.
pub(crate) fn suggested_values(json: &str) -> Option<Vec<SuggestedValue>> {
    let Items(items) = serde_json::from_str::<Items<ValueItem>>(json).ok()?;
    Some(items.into_iter().map(|ValueItem(item)| item).collect())
}

/// A `SUGGESTED_ACTIONS` array: what `elements::suggested_actions` gives for
/// it when it drops no action, or `None`.
pub(crate) fn suggested_actions(json: &str, profile: &Profile) -> Option<Vec<SuggestedAction>> {
    let Items(items) = serde_json::from_str::<Items<ActionItem>>(json).ok()?;
    items
        .into_iter()
        .map(|item| {
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
        })
        .collect()
}

/// Reads a tool call whose name is in member `NAME_KEYS[key]`.
struct ToolCallSeed {
    key: usize,
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

impl<'de> DeserializeSeed<'de> for ToolCallSeed {
    type Value = (String, Value);

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for ToolCallSeed {
    type Value = (String, Value);

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a tool call")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let members = TOOL_MEMBERS.get(self.key).ok_or_else(give_up)?;
        let (mut name, mut arguments, mut seen) = (None, None, 0);
        while let Some(key) = map.next_key_seed(KeyIn(members))? {
            // Any other member is an error the `Value` route words.
            let index = key.ok_or_else(give_up)?;
            first_time(&mut seen, index)?;
            match index {
                0 => name = Some(map.next_value::<String>()?),
                1..=4 => {
                    if arguments.is_some() {
                        return Err(give_up());
                    }
                    arguments = Some(map.next_value::<Value>()?);
                }
                _ => {
                    map.next_value::<Checked>()?;
                }
            }
        }
        let arguments = match arguments {
            None | Some(Value::Null) => Value::Object(Map::new()),
            Some(Value::Object(members)) => Value::Object(members),
            Some(_) => return Err(give_up()),
        };
        Ok((name.ok_or_else(give_up)?, arguments))
    }
}

/// A text tool call named in member `NAME_KEYS[key]`: what
/// `tool_calls::interpret` gives for it (name, arguments), or `None`.
pub(crate) fn tool_call(json: &str, key: usize, profile: &Profile) -> Option<(String, Value)> {
    debug_assert_eq!(NAME_KEYS.len(), TOOL_MEMBERS.len());
    debug_assert!(ARGUMENT_KEYS.iter().eq(TOOL_MEMBERS[0][1..5].iter()));
    let mut deserializer = serde_json::Deserializer::from_str(json);
    let (name, arguments) = ToolCallSeed { key }.deserialize(&mut deserializer).ok()?;
    deserializer.end().ok()?;
    profile.has_tool(&name).then_some((name, arguments))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{elements, profile::ProfileSpec, tool_calls};
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
        values.is_some() || actions.is_some() || tools
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
