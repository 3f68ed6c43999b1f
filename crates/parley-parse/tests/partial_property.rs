//! The partial-JSON closer against generated documents (nested arrays and
//! objects, numbers with fractions and exponents, strings with multi-byte
//! characters and every escape, whitespace anywhere), fed one byte at a
//! time so every prefix is seen, multi-byte characters and escapes cut at
//! every byte. For each prefix:
//!
//! - the value so far is valid JSON (it survives a round trip through text);
//! - it extends the value of the prefix before (objects and arrays keep
//!   what they had, the open string grows at its end);
//! - every path listed complete before is still complete, with the same
//!   value, and every listed path exists;
//! - `version` changes exactly when the value or the paths do;
//! - feeding the same prefix in other pieces gives the same result.
//!
//! And the whole document's value is what `serde_json` makes of it.

use parley_parse::{
    Limits, PartialError,
    partial::{PartialJson, is_complete_path},
};
use proptest::{collection::vec, prelude::*};
use serde_json::Value;

/// Whitespace between tokens.
fn ws() -> impl Strategy<Value = String> {
    "[ \t\r\n]{0,2}"
}

fn number() -> impl Strategy<Value = String> {
    "-?(0|[1-9][0-9]{0,6})(\\.[0-9]{1,4})?([eE][+-]?[0-9]{1,2})?"
}

/// The text of a JSON string: multi-byte characters and every escape.
fn string() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        "[a-z ]{1,4}",
        Just("é".to_owned()),
        Just("日本".to_owned()),
        Just("🎉".to_owned()),
        Just("/~".to_owned()),
        any::<char>().prop_map(|c| escaped(&c.to_string())),
        proptest::sample::select(vec![
            r#"\""#,
            r"\\",
            r"\/",
            r"\b",
            r"\f",
            r"\n",
            r"\r",
            r"\t",
            r"\u00e9",
            r"\u65E5",
            r"\ud83c\udf89",
            r"\u0000",
            r"\uFFFF",
            r"\uD800\uDC00",
        ])
        .prop_map(str::to_owned),
    ];
    vec(piece, 0..6).prop_map(|pieces| format!("\"{}\"", pieces.concat()))
}

/// `text` as the inside of a JSON string.
fn escaped(text: &str) -> String {
    let quoted = serde_json::to_string(text).unwrap_or_default();
    quoted[1..quoted.len() - 1].to_owned()
}

/// A JSON document (keys are unique within an object).
fn document() -> impl Strategy<Value = String> {
    let leaf = prop_oneof![
        number(),
        string(),
        Just("true".to_owned()),
        Just("false".to_owned()),
        Just("null".to_owned()),
    ];
    let value = leaf.prop_recursive(5, 64, 6, |inner| {
        let item = (ws(), inner, ws())
            .prop_map(|(a, v, b)| format!("{a}{v}{b}"))
            .boxed();
        prop_oneof![
            vec(item.clone(), 0..6).prop_map(|items| format!("[{}]", items.join(","))),
            proptest::collection::btree_map("[a-zé/~]{0,4}", (ws(), item), 0..6).prop_map(
                |members| {
                    let members: Vec<String> = members
                        .into_iter()
                        .map(|(key, (a, value))| format!("{a}\"{}\":{value}", escaped(&key)))
                        .collect();
                    format!("{{{}}}", members.join(","))
                }
            ),
        ]
    });
    (ws(), value, ws()).prop_map(|(a, v, b)| format!("{a}{v}{b}"))
}

/// What a closer shows after a prefix.
#[derive(Debug, Clone, PartialEq)]
struct Shown {
    value: Option<Value>,
    paths: Vec<String>,
}

fn shown(json: &PartialJson) -> Shown {
    Shown {
        value: json.value(),
        paths: json.complete_paths().to_vec(),
    }
}

/// Whether `later` extends `earlier`: objects keep their members, arrays
/// their items, a string may grow at its end, anything else is equal.
fn extends(earlier: &Value, later: &Value) -> bool {
    match (earlier, later) {
        (Value::Object(a), Value::Object(b)) => a
            .iter()
            .all(|(key, value)| b.get(key).is_some_and(|v| extends(value, v))),
        (Value::Array(a), Value::Array(b)) => {
            a.len() <= b.len() && a.iter().zip(b).all(|(x, y)| extends(x, y))
        }
        (Value::String(a), Value::String(b)) => b.starts_with(a.as_str()),
        _ => earlier == later,
    }
}

fn check_step(before: &Shown, after: &Shown) -> Result<(), TestCaseError> {
    if let Some(value) = &after.value {
        let text = serde_json::to_string(value).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let back: Value =
            serde_json::from_str(&text).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(&back, value);
        for path in &after.paths {
            prop_assert!(value.pointer(path).is_some(), "{path} is listed but absent");
        }
    } else {
        prop_assert!(after.paths.is_empty());
    }
    let Some(old) = &before.value else {
        return Ok(());
    };
    let Some(new) = &after.value else {
        return Err(TestCaseError::fail("a value disappeared"));
    };
    prop_assert!(extends(old, new), "{old} is not extended by {new}");
    for path in &before.paths {
        prop_assert!(
            is_complete_path(&after.paths, path),
            "{path} was complete, is not in {:?}",
            after.paths
        );
        prop_assert_eq!(old.pointer(path), new.pointer(path), "value at {}", path);
    }
    Ok(())
}

fn check(doc: &str, sizes: &[usize]) -> Result<(), TestCaseError> {
    let expected: Value = serde_json::from_str(doc)
        .map_err(|e| TestCaseError::fail(format!("generated {doc:?}: {e}")))?;
    let bytes = doc.as_bytes();
    let limits = Limits::default();

    // Byte by byte: every prefix, and what was shown after each.
    let mut json = PartialJson::new(limits);
    let mut history = vec![(shown(&json), json.version())];
    for b in bytes {
        json.feed(std::slice::from_ref(b))
            .map_err(|e| TestCaseError::fail(format!("{doc:?}: {e}")))?;
        let now = (shown(&json), json.version());
        let (before, version) = &history[history.len() - 1];
        check_step(before, &now.0)?;
        prop_assert_eq!(
            before != &now.0,
            version != &now.1,
            "version after {} bytes",
            history.len()
        );
        history.push(now);
    }

    // The same prefixes fed in other pieces, and each in one piece.
    let mut pieces = PartialJson::new(limits);
    let mut at = 0;
    for size in sizes.iter().cycle() {
        if at == bytes.len() {
            break;
        }
        let end = (at + size).min(bytes.len());
        prop_assert!(pieces.feed(&bytes[at..end]).is_ok());
        at = end;
        prop_assert_eq!(
            &shown(&pieces),
            &history[at].0,
            "after {} bytes in pieces",
            at
        );
        let mut whole = PartialJson::new(limits);
        prop_assert!(whole.feed(&bytes[..at]).is_ok());
        prop_assert_eq!(
            &shown(&whole),
            &history[at].0,
            "prefix of {} bytes at once",
            at
        );
    }

    // The whole document.
    let trimmed = doc.trim_matches([' ', '\t', '\r', '\n']);
    if !trimmed.starts_with(['-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9']) {
        prop_assert!(json.is_complete());
        prop_assert_eq!(json.value(), Some(expected.clone()));
        prop_assert_eq!(json.complete_paths(), [String::new()]);
    }
    prop_assert_eq!(json.finish(), Ok(expected));
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 384, ..ProptestConfig::default() })]

    #[test]
    fn every_prefix_closes_to_valid_json_that_only_grows(
        doc in document(),
        sizes in vec(1usize..24, 1..8),
    ) {
        check(&doc, &sizes)?;
    }

    #[test]
    fn any_bytes_stop_it_cleanly_or_are_a_prefix(
        bytes in vec(any::<u8>(), 0..256),
        sizes in vec(1usize..24, 1..8),
    ) {
        let mut json = PartialJson::new(Limits { max_bytes: 200, max_depth: 8 });
        let mut at = 0;
        for size in sizes.iter().cycle() {
            if at == bytes.len() {
                break;
            }
            let end = (at + size).min(bytes.len());
            let before = shown(&json);
            match json.feed(&bytes[at..end]) {
                Ok(()) => at = end,
                Err(error) => {
                    if let PartialError::Invalid { offset, .. } | PartialError::TooDeep { offset, .. } = error {
                        prop_assert!((at..end).contains(&offset));
                        // Everything before the offending byte reads the same on its own.
                        let mut prefix = PartialJson::new(Limits { max_bytes: 200, max_depth: 8 });
                        prop_assert!(prefix.feed(&bytes[..offset]).is_ok());
                        prop_assert_eq!(shown(&prefix), shown(&json));
                    } else {
                        prop_assert_eq!(shown(&json), before);
                    }
                    prop_assert_eq!(json.feed(b"1"), Err(error));
                    break;
                }
            }
        }
    }

    #[test]
    fn a_document_cut_with_a_stray_byte_never_panics(
        doc in document(),
        cut in any::<prop::sample::Index>(),
        stray in any::<u8>(),
    ) {
        let bytes = doc.as_bytes();
        let cut = cut.index(bytes.len() + 1);
        let mut json = PartialJson::new(Limits::default());
        prop_assert!(json.feed(&bytes[..cut]).is_ok());
        let before = shown(&json);
        if json.feed(&[stray]).is_ok() {
            check_step(&before, &shown(&json))?;
        } else {
            prop_assert_eq!(shown(&json), before);
        }
    }
}
