//! The closer's rules: documents closed where they are open, characters
//! cut in the middle, versions, numbers, what stops it, limits and paths.

use serde_json::json;

use super::*;

/// The value and complete paths after feeding `prefix` in one piece.
fn close(prefix: &str) -> (Option<Value>, Vec<String>) {
    let mut json = PartialJson::new(Limits::default());
    let fed = json.feed(prefix.as_bytes());
    assert!(fed.is_ok(), "{prefix:?}: {fed:?}");
    (json.value(), json.complete_paths().to_vec())
}

#[test]
fn open_documents_are_closed_where_they_are_open() {
    let cases: &[(&str, Option<Value>, &[&str])] = &[
        ("", None, &[]),
        ("  ", None, &[]),
        ("{", Some(json!({})), &[]),
        (r#"{"ti"#, Some(json!({})), &[]),
        (r#"{"title""#, Some(json!({})), &[]),
        (r#"{"title": "#, Some(json!({})), &[]),
        (r#"{"title": ""#, Some(json!({"title": ""})), &[]),
        (r#"{"title": "Q1 re"#, Some(json!({"title": "Q1 re"})), &[]),
        (
            r#"{"title": "Q1", "#,
            Some(json!({"title": "Q1"})),
            &["/title"],
        ),
        (r#"{"n": 12"#, Some(json!({})), &[]),
        (r#"{"n": 12 "#, Some(json!({"n": 12})), &["/n"]),
        (r#"{"n": -"#, Some(json!({})), &[]),
        (r#"{"n": 1."#, Some(json!({})), &[]),
        (r#"{"n": 1.5e"#, Some(json!({})), &[]),
        (r#"{"n": 1.5e-3}"#, Some(json!({"n": 0.0015})), &[""]),
        (r#"[tr"#, Some(json!([])), &[]),
        (r#"[true"#, Some(json!([true])), &["/0"]),
        (r#"[null, fals"#, Some(json!([null])), &["/0"]),
        (r#"[[1, 2], [3"#, Some(json!([[1, 2], []])), &["/0"]),
        (
            r#"[[1, 2], [3,"#,
            Some(json!([[1, 2], [3]])),
            &["/0", "/1/0"],
        ),
        (r#"{"a": {"b": [{"#, Some(json!({"a": {"b": [{}]}})), &[]),
        (r#""abc"#, Some(json!("abc")), &[]),
        (r#""abc""#, Some(json!("abc")), &[""]),
        ("12", None, &[]),
        ("[1,", Some(json!([1])), &["/0"]),
        ("[1,]", Some(json!([1])), &[""]),
        (
            r#"{"a/b": 1, "c~d": 2, "#,
            Some(json!({"a/b": 1, "c~d": 2})),
            &["/a~1b", "/c~0d"],
        ),
    ];
    for (prefix, value, paths) in cases {
        assert_eq!(
            close(prefix),
            (
                value.clone(),
                paths.iter().map(|p| (*p).to_owned()).collect()
            ),
            "{prefix:?}"
        );
    }
}

#[test]
fn characters_and_escapes_cut_in_the_middle_are_left_out() {
    let cases: &[(&str, &str)] = &[
        (r#"["a\"#, "a"),
        (r#"["a\n"#, "a\n"),
        (r#"["a\u00"#, "a"),
        (r#"["a\u00e9"#, "aé"),
        (r#"["a\ud83c"#, "a"),
        (r#"["a\ud83c\"#, "a"),
        (r#"["a\ud83c\udf"#, "a"),
        (r#"["a\ud83c\udf89"#, "a🎉"),
    ];
    for (prefix, text) in cases {
        assert_eq!(close(prefix).0, Some(json!([text])), "{prefix:?}");
    }
    let whole = "[\"日本\"]".as_bytes();
    for cut in 2..=8 {
        let mut json = PartialJson::new(Limits::default());
        assert!(json.feed(&whole[..cut]).is_ok());
        let shown = if cut < 5 {
            ""
        } else if cut < 8 {
            "日"
        } else {
            "日本"
        };
        assert_eq!(json.value(), Some(json!([shown])), "cut at {cut}");
    }
}

#[test]
fn version_changes_exactly_with_what_is_shown() {
    let mut json = PartialJson::new(Limits::default());
    let mut seen = (json.value(), json.complete_paths().to_vec(), json.version());
    for b in br#" { "k" : [ 12 , "x\u00e9" , tru"#.iter().chain(b"e ] }") {
        assert!(json.feed(&[*b]).is_ok());
        let now = (json.value(), json.complete_paths().to_vec(), json.version());
        let changed = (&now.0, &now.1) != (&seen.0, &seen.1);
        assert_eq!(changed, now.2 != seen.2, "after {:?}", char::from(*b));
        seen = now;
    }
    assert!(json.is_complete());
}

#[test]
fn a_number_alone_is_known_at_the_end() {
    let mut json = PartialJson::new(Limits::default());
    assert!(json.feed(b"-12.5e3").is_ok());
    assert_eq!(json.value(), None);
    assert_eq!(json.finish(), Ok(json!(-12500.0)));
    let mut json = PartialJson::new(Limits::default());
    assert!(json.feed(b"[1").is_ok());
    assert_eq!(json.finish(), Err(PartialError::Incomplete { received: 2 }));
}

#[test]
fn what_is_not_json_stops_it_and_the_value_stays() {
    let cases: &[&[u8]] = &[
        b"[1,,",
        b"{\"a\" 1",
        b"[01",
        b"[1.]",
        b"[-]",
        b"[\"\\x\"]",
        b"[\"\\ud83c\\u0041\"]",
        b"[\"\\ude00\"]",
        b"[\"a\x01\"]",
        b"[\"\xff\"]",
        b"[\"\xc3\x28\"]",
        b"[\"\xed\xa0\x80\"]",
        b"[1}",
        b"{\"a\": 1]",
        b"{,",
        b"[1] x",
        b"[trux]",
        b"[1e999]",
        b"}",
    ];
    for bytes in cases {
        let mut json = PartialJson::new(Limits::default());
        let mut stopped = None;
        let mut before = None;
        for (k, b) in bytes.iter().enumerate() {
            let shown = json.value();
            if let Err(error) = json.feed(&[*b]) {
                stopped = Some((k, error));
                before = Some(shown);
                break;
            }
        }
        let Some((k, error)) = stopped else {
            panic!("{:?} was accepted", String::from_utf8_lossy(bytes));
        };
        assert!(
            matches!(error, PartialError::Invalid { offset, .. } if offset == k),
            "{error:?}"
        );
        assert_eq!(Some(json.value()), before, "the value stays");
        assert_eq!(json.feed(b" "), Err(error), "the error stays");
        let whole = serde_json::from_slice::<Value>(bytes);
        assert!(
            whole.is_err(),
            "serde_json accepts {:?}",
            String::from_utf8_lossy(bytes)
        );
    }
}

#[test]
fn a_repeated_key_stops_it_though_serde_json_keeps_the_last() {
    let text = r#"{"a": 1, "a": 2}"#;
    let mut json = PartialJson::new(Limits::default());
    assert!(matches!(
        json.feed(text.as_bytes()),
        Err(PartialError::Invalid { offset: 11, .. })
    ));
    // The value shown for `/a` never changes to serde_json's 2.
    assert_eq!(json.value(), Some(json!({"a": 1})));
    assert_eq!(json.complete_paths(), ["/a"]);
    assert_eq!(
        serde_json::from_str::<Value>(text).ok(),
        Some(json!({"a": 2}))
    );
}

#[test]
fn limits_bound_depth_bytes_and_listed_paths() {
    let limits = Limits {
        max_bytes: 16,
        max_depth: 2,
    };
    let mut json = PartialJson::new(limits);
    assert!(json.feed(b"[[").is_ok());
    assert_eq!(
        json.feed(b"["),
        Err(PartialError::TooDeep {
            offset: 2,
            limit: 2
        })
    );
    let mut json = PartialJson::new(limits);
    assert!(json.feed(b"[1, 2, 3, 4, ").is_ok());
    assert_eq!(
        json.feed(b"5, 6]"),
        Err(PartialError::TooLarge {
            size: 18,
            limit: 16
        })
    );
    assert_eq!(json.value(), Some(json!([1, 2, 3, 4])));
    // Paths over the budget are left out until their container closes.
    let mut json = PartialJson::new(Limits {
        max_bytes: 64,
        max_depth: 4,
    });
    assert!(
        json.feed(br#"{"abcdefgh": [1, 2, 3, 4, 5, 6, 7, 8,"#)
            .is_ok()
    );
    assert_eq!(
        json.complete_paths().len(),
        5,
        "five of eleven bytes fit in 64"
    );
    assert!(json.feed(b" 9]").is_ok());
    assert_eq!(json.complete_paths(), ["/abcdefgh"]);
}

#[test]
fn complete_paths_cover_their_descendants() {
    let paths = ["/mode".to_owned(), "/rows/0".to_owned()];
    assert!(is_complete_path(&paths, "/mode"));
    assert!(is_complete_path(&paths, "/rows/0/name"));
    assert!(!is_complete_path(&paths, "/rows/01"));
    assert!(!is_complete_path(&paths, "/rows"));
    assert!(!is_complete_path(&paths, ""));
    assert!(is_complete_path(&[String::new()], "/anything"));
}
