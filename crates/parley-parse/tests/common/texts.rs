//! Proptest strategies for marker-rich model text, shared by the streaming
//! property test and the fuzzer.

use proptest::prelude::*;

const PROSE: &[&str] = &[
    "Hello world. ",
    "Here you go:",
    "\n",
    "\n\n",
    "  ",
    "\t",
    "\r\n",
    "**bold** ",
    "*it* ",
    "é🎉 日本 ",
    "`code` ",
    "```rust\nfn x() { [1] }\n```\n",
    "a: b ",
    "{ like } ",
    "{\"x\": 1} ",
    "[1, 2]",
    "\"quoted\" ",
    "\\",
    "``",
    "*",
    ":",
    "S",
    "SUGG",
    "SCHEMA_",
];

const NAMES: &[&str] = &[
    "SUGGESTED_VALUES",
    "SUGGESTED_ACTIONS",
    "SCHEMA_PROPOSAL",
    "DATA_PROPOSAL",
    "OTHER_THING",
];

const FORMS: &[(&str, &str)] = &[
    ("", ":"),
    ("**", "**:"),
    ("*", "*:"),
    ("**", ":**"),
    ("", " :"),
    ("***", "***:"),
];

const SEPARATORS: &[&str] = &["", " ", "\n", "\r\n", "\n\n", "  \n"];

const ELEMENTS: &[&str] = &[
    r#"[{"label": "A ]", "value": "a \"}\""}]"#,
    r#"[{"label": "Close", "action": "close_chat", "handler": "client"}, {"label": "X", "action": "nope"}]"#,
    r#"{"mode": "update", "operations": [{"action": "remove", "column_id": "c1"}]}"#,
    r#"{"operations": [{"action": "delete", "row_id": 3}]}"#,
    r#"{"mode": create}"#,
    "[{\"label\": \"A\", \"value\": \"a\",},]",
    "```json\n[{\"label\": \"F\", \"value\": \"f\"}]\n```",
    "```json\n{\"mode\": \"create\", \"operations\": []}",
    "[[[[[[[[[[1]]]]]]]]]]",
    "{\"unclosed\": [1, 2",
    "[\"open string",
    "later",
    "",
];

const TOOLS: &[&str] = &[
    "```json\n{\"tool\": \"search\", \"input\": {\"q\": \"x }\"}}\n```",
    "{\"name\": \"search\", \"arguments\": {\"q\": \"y\"}}",
    "{\"type\": \"search\", \"id\": \"1\", \"parameters\": {}}",
    "{\"tool\": \"rm\", \"input\": {}}",
    "{\"tool\": \"search\", \"input\": {\"q\": ",
    "{\"name\": \"search\", \"description\": \"d\"}",
    "```json\n{\"tool\": \"search\"}\nextra\n```",
];

fn pick(options: &'static [&'static str]) -> impl Strategy<Value = String> {
    proptest::sample::select(options).prop_map(str::to_owned)
}

fn marker_element() -> impl Strategy<Value = String> {
    (
        pick(NAMES),
        proptest::sample::select(FORMS),
        pick(SEPARATORS),
        pick(ELEMENTS),
    )
        .prop_map(|(name, (pre, post), sep, element)| format!("{pre}{name}{post}{sep}{element}"))
}

/// One fragment of model text.
pub fn fragment() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => pick(PROSE),
        3 => marker_element(),
        2 => pick(TOOLS),
        1 => "[ -~\n]{0,12}",
        1 => any::<String>().prop_map(|s| s.chars().take(8).collect()),
    ]
}

/// A whole response: a sequence of fragments.
pub fn response() -> impl Strategy<Value = String> {
    proptest::collection::vec(fragment(), 0..14).prop_map(|parts| parts.concat())
}

/// Delta sizes to split a response with.
pub fn splits() -> impl Strategy<Value = Vec<usize>> {
    proptest::collection::vec(1usize..48, 1..64)
}

/// Cuts `text` into deltas of the given sizes (cycled), at char boundaries.
pub fn cut<'a>(text: &'a str, sizes: &[usize]) -> Vec<&'a str> {
    let mut out = Vec::new();
    let mut rest = text;
    let mut i = 0;
    while !rest.is_empty() {
        let at = rest.ceil_char_boundary(
            sizes
                .get(i % sizes.len().max(1))
                .copied()
                .unwrap_or(1)
                .clamp(1, rest.len()),
        );
        out.push(&rest[..at]);
        rest = &rest[at..];
        i += 1;
    }
    out
}
