//! The reader against `serde_json`: the same values, the same refusals.

use super::*;
use proptest::prelude::*;

/// Agrees with `serde_json`; returns whether it answered.
fn agrees(json: &str) -> bool {
    let read = read_whole(json);
    if let Some(value) = &read {
        let by_serde = serde_json::from_str::<Value>(json);
        assert_eq!(Some(value), by_serde.as_ref().ok(), "{json}");
    }
    read.is_some()
}

/// What `Reader::skip` says of the whole of `json`: its end when it
/// answers and only whitespace follows.
fn skipped(json: &str) -> Option<usize> {
    let mut reader = Reader::new(json);
    reader.skip()?;
    reader.at_end().then_some(reader.position())
}

#[test]
fn skips_what_it_reads() {
    let json = r#" {"a": [1, "x\"y", {"b": null}], "c": -1.5} "#;
    assert_eq!(skipped(json), Some(json.len() - 1));
    for json in [
        r#"{"$a": 1}"#,
        r#"{"a": 01}"#,
        "[\"\u{1}\"]",
        r#"["\ud800"]"#,
        "[1,]",
    ] {
        assert_eq!(skipped(json), None, "{json}");
    }
}

#[test]
fn texts_are_borrowed_unless_escaped() {
    let mut reader = Reader::new(r#"["plain", "esc\"aped\u00e9", 1]"#);
    let mut texts = Vec::new();
    reader
        .items(|reader| {
            if reader.peek() == Some(b'"') {
                texts.push(reader.text()?);
                Some(())
            } else {
                assert!(reader.text().is_none());
                reader.skip()
            }
        })
        .expect("valid");
    assert!(matches!(&texts[0], Cow::Borrowed("plain")));
    assert!(matches!(&texts[1], Cow::Owned(text) if text == "esc\"apedé"));
}

#[test]
fn reads_what_serde_json_reads() {
    let answered = [
        r#"{"a": [1, 2, {"b": null}], "c": true, "d": false, "e": "x y"}"#,
        " \n{\"a\":{}}\t ",
        r#"[]"#,
        r#"[[], {}, [[1]], ""]"#,
        r#"{"a": "é\"\\\n\u00e9\ud83d\ude00", "b\n": 1}"#,
        r#"{"n": [0, 7, -1, -0, 1.5, 2e3, -2.5E-3, 18446744073709551615, 18446744073709551616]}"#,
        r#"{"a": 1, "a": 2}"#,
        r#"{"x": 9999999999999999999}"#,
        "\"just a string\"",
        "12",
        "null",
    ];
    for json in answered {
        assert!(agrees(json), "no answer for {json}");
    }
}

#[test]
fn leaves_the_rest_to_serde_json() {
    let left = [
        r#"{"a": 1,}"#,
        r#"[1, 2,]"#,
        r#"{"a": 01}"#,
        r#"{"a": 1.}"#,
        r#"{"a": -}"#,
        r#"{"a": tru}"#,
        r#"{"a": truex}"#,
        r#"{'a': 1}"#,
        r#"{"a" 1}"#,
        r#"{"a": 1 "b": 2}"#,
        "{\"a\": \"tab\there\"}",
        r#"{"a": "\ud800"}"#,
        r#"{"a": "\x"}"#,
        r#"{"$serde_json::private::RawValue": "1"}"#,
        r#"{"a": 1} x"#,
        r#"{"a": [1}"#,
        r#"{"a": "open"#,
        r#"[1 2]"#,
        "",
    ];
    for json in left {
        assert_eq!(read_whole(json), None, "{json}");
    }
}

#[test]
fn reads_at_a_position_and_tells_where_and_how_deep() {
    let text = r#"P: {"a": [[1], {"b": []}]} tail"#;
    let read = read_at(text, 3, 64).expect("valid");
    assert_eq!(&text[read.end..], " tail");
    assert_eq!(read.depth, 4);
    assert_eq!(read_at(text, 3, 3), None);
    assert_eq!(
        read_at("P: 7 ", 3, 1).map(|r| (r.end, r.depth)),
        Some((4, 0))
    );
}

#[test]
fn nesting_stops_where_serde_json_stops() {
    let deep = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
    assert!(agrees(&deep(127)));
    assert!(!agrees(&deep(128)));
    assert!(serde_json::from_str::<Value>(&deep(128)).is_err());
}

#[test]
fn string_stop_finds_quotes_backslashes_and_control_characters() {
    let t = b"abcdefghij\"klm\\nop\x01qrstuvwxyz";
    assert_eq!(string_stop(t, 0), 10);
    assert_eq!(string_stop(t, 11), 14);
    assert_eq!(string_stop(t, 15), 18);
    assert_eq!(string_stop(t, 19), t.len());
}

/// JSON-ish text built from the pieces JSON is made of.
fn jsonish() -> impl Strategy<Value = String> {
    let atom = prop_oneof![
        Just("\"a\"".to_owned()),
        Just("\"label\"".to_owned()),
        Just("\"$x\"".to_owned()),
        Just("\"\"".to_owned()),
        Just("\"a\\\"b\\u00e9\\n\"".to_owned()),
        Just("\"\\ud800\"".to_owned()),
        Just("\"\\q\"".to_owned()),
        Just("\"tab\there\"".to_owned()),
        Just("\"long string of some words, more than eight bytes\"".to_owned()),
        Just("\"é ü 😀\"".to_owned()),
        Just("0".to_owned()),
        Just("1".to_owned()),
        Just("42".to_owned()),
        Just("-0".to_owned()),
        Just("-7".to_owned()),
        Just("01".to_owned()),
        Just("1.5".to_owned()),
        Just("2.5e400".to_owned()),
        Just("1e-3".to_owned()),
        Just("18446744073709551615".to_owned()),
        Just("18446744073709551616".to_owned()),
        Just("9999999999999999999".to_owned()),
        Just("null".to_owned()),
        Just("true".to_owned()),
        Just("false".to_owned()),
        Just("nul".to_owned()),
    ];
    let piece = prop_oneof![
        6 => atom,
        2 => Just("{".to_owned()),
        2 => Just("}".to_owned()),
        2 => Just("[".to_owned()),
        2 => Just("]".to_owned()),
        3 => Just(":".to_owned()),
        3 => Just(",".to_owned()),
        2 => Just(" ".to_owned()),
        1 => Just("\n".to_owned()),
        1 => Just("x".to_owned()),
    ];
    proptest::collection::vec(piece, 0..40).prop_map(|pieces| pieces.concat())
}

/// Well-formed JSON of random shape.
fn wellformed() -> impl Strategy<Value = String> {
    let leaf = prop_oneof![
        any::<String>().prop_map(Value::String),
        "[a-z $\"\\\\\n]{0,12}".prop_map(Value::String),
        any::<u64>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        any::<bool>().prop_map(Value::Bool),
        Just(Value::Null),
    ];
    let value = leaf.prop_recursive(6, 48, 6, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            proptest::collection::btree_map("[a-z_$]{0,8}", inner, 0..6)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    });
    (value, any::<bool>()).prop_map(|(value, pretty)| {
        if pretty {
            serde_json::to_string_pretty(&value).unwrap_or_default()
        } else {
            serde_json::to_string(&value).unwrap_or_default()
        }
    })
}

proptest! {
    #[test]
    fn never_disagrees_with_serde_json(json in jsonish()) {
        agrees(&json);
        // Skipping checks exactly what reading does.
        prop_assert_eq!(skipped(&json).is_some(), read_whole(&json).is_some(), "{}", json);
    }

    #[test]
    fn answers_well_formed_json_as_serde_json_does(json in wellformed()) {
        let answered = agrees(&json);
        prop_assert_eq!(skipped(&json).is_some(), answered, "{}", json);
        // Only a member name with a `$` is left over.
        prop_assert!(answered || json.contains("\"$"), "{}", json);
    }
}
