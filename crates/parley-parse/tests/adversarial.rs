//! Adversarial inputs: everything a model (or an attacker) can write must
//! parse to a sensible result, lose nothing and never panic.

use parley_parse::{
    DiagnosticKind, Limits, ParseError, Parsed, PayloadSpec, Profile, ProfileSpec, SuggestedValue,
    parse,
};
use serde_json::json;

fn profile() -> Profile {
    let spec = ProfileSpec {
        payloads: vec![
            PayloadSpec {
                name: "schema_proposal".into(),
                marker: "SCHEMA_PROPOSAL".into(),
                schema: Some(json!({
                    "type": "object",
                    "required": ["mode", "operations"],
                    "properties": {"mode": {"enum": ["create", "update"]}, "operations": {"type": "array"}}
                })),
            },
            PayloadSpec {
                name: "data_proposal".into(),
                marker: "DATA_PROPOSAL:".into(),
                schema: None,
            },
        ],
        client_actions: vec!["close_chat".into()],
        server_actions: vec!["archive_table".into()],
        tools: vec!["search".into(), "terminal_execute".into()],
    };
    Profile::new(&spec).expect("valid profile")
}

fn run(text: &str) -> Parsed {
    parse(text, &profile(), &Limits::default()).expect("within limits")
}

fn kinds(parsed: &Parsed) -> Vec<DiagnosticKind> {
    parsed.diagnostics.iter().map(|d| d.kind).collect()
}

fn values(pairs: &[(&str, &str)]) -> Vec<SuggestedValue> {
    pairs
        .iter()
        .map(|(l, v)| SuggestedValue {
            label: (*l).into(),
            value: (*v).into(),
        })
        .collect()
}

#[test]
fn brackets_and_braces_inside_strings() {
    let parsed = run(r#"Pick: SUGGESTED_VALUES: [{"label": "a ] } [ {", "value": "x}"}] done"#);
    assert_eq!(parsed.suggested_values, values(&[("a ] } [ {", "x}")]));
    assert_eq!(parsed.message, "Pick: done");
}

#[test]
fn escaped_quotes_and_backslashes() {
    let parsed = run(
        r#"SUGGESTED_VALUES: [{"label": "say \"hi]\"", "value": "C:\\"}, {"label": "\\\"", "value": "]"}]"#,
    );
    assert_eq!(
        parsed.suggested_values,
        values(&[("say \"hi]\"", "C:\\"), ("\\\"", "]")])
    );
    assert_eq!(parsed.message, "");
}

#[test]
fn all_decorations_work_for_suggestions_too() {
    for (sv, sa) in [
        ("SUGGESTED_VALUES:", "SUGGESTED_ACTIONS:"),
        ("**SUGGESTED_VALUES**:", "**SUGGESTED_ACTIONS**:"),
        ("*SUGGESTED_VALUES*:", "*SUGGESTED_ACTIONS*:"),
        ("**SUGGESTED_VALUES:**", "**SUGGESTED_ACTIONS:**"),
        ("SUGGESTED_VALUES :", "SUGGESTED_ACTIONS :"),
    ] {
        let text = format!(
            "Done.\n\n{sv}\n[{{\"label\": \"More\", \"value\": \"more\"}}]\n{sa} [{{\"label\": \"Close\", \"action\": \"close_chat\", \"handler\": \"client\"}}]\n"
        );
        let parsed = run(&text);
        assert_eq!(parsed.message, "Done.", "{sv}");
        assert_eq!(parsed.suggested_values.len(), 1, "{sv}");
        assert_eq!(parsed.suggested_actions.len(), 1, "{sa}");
    }
}

#[test]
fn markers_are_case_sensitive_and_whole_words() {
    let text = "suggested_values: [1] and MY_SUGGESTED_VALUES: [2] and SUGGESTED_VALUESX: [3]";
    let parsed = run(text);
    assert_eq!(parsed.message, text);
    assert!(parsed.suggested_values.is_empty());
    assert!(parsed.diagnostics.is_empty());
}

#[test]
fn two_proposals_profile_order_wins_and_the_other_is_kept_as_a_diagnostic() {
    let data = r#"DATA_PROPOSAL: {"operations": [{"action": "delete", "row_id": 1}]}"#;
    let schema = r#"SCHEMA_PROPOSAL: {"mode": "update", "operations": [{"action": "remove", "column_id": "c"}]}"#;
    let parsed = run(&format!("First data, then schema.\n\n{data}\n\n{schema}\n"));
    assert_eq!(parsed.message, "First data, then schema.");
    assert_eq!(
        parsed
            .custom_payload
            .as_ref()
            .map(|p| p.payload_type.as_str()),
        Some("schema_proposal")
    );
    assert_eq!(kinds(&parsed), [DiagnosticKind::Duplicate]);
    assert_eq!(parsed.diagnostics[0].element, "data_proposal");
    assert_eq!(parsed.diagnostics[0].raw, data);

    let again = run(&format!("{schema}\n{}", schema.replace("\"c\"", "\"d\"")));
    let kept = again.custom_payload.expect("a payload");
    assert_eq!(
        kept.data["operations"][0]["column_id"], "c",
        "the first of one type wins"
    );
}

#[test]
fn invalid_json_is_absent_reported_and_does_not_hide_a_later_one() {
    let bad = r#"SCHEMA_PROPOSAL: {"mode": create, "operations": []}"#;
    let good = r#"SCHEMA_PROPOSAL: {"mode": "create", "operations": []}"#;
    let parsed = run(&format!("Oops.\n{bad}\nRetry:\n{good}"));
    assert_eq!(parsed.message, "Oops.\nRetry:");
    assert_eq!(
        parsed.custom_payload.as_ref().expect("the later one").data["mode"],
        "create"
    );
    assert_eq!(kinds(&parsed), [DiagnosticKind::InvalidJson]);
    assert_eq!(parsed.diagnostics[0].raw, bad);
    assert_eq!(parsed.diagnostics[0].offset, 6);
}

#[test]
fn prose_mentions_stay_text_and_do_not_hide_the_real_marker() {
    let text = "I'll send a SCHEMA_PROPOSAL: once you confirm, and **SUGGESTED_VALUES** too.\n\nSCHEMA_PROPOSAL: {\"mode\": \"update\", \"operations\": []}";
    let parsed = run(text);
    assert_eq!(
        parsed.message,
        "I'll send a SCHEMA_PROPOSAL: once you confirm, and **SUGGESTED_VALUES** too."
    );
    assert!(parsed.custom_payload.is_some());
    assert!(parsed.diagnostics.is_empty());
}

#[test]
fn crlf_text_keeps_its_line_endings() {
    let text = "Line one\r\nLine two\r\n\r\nSUGGESTED_VALUES:\r\n[{\"label\": \"A\", \"value\": \"a\"}]\r\n\r\nBye\r\n";
    let parsed = run(text);
    assert_eq!(parsed.message, "Line one\r\nLine two\r\n\r\nBye\r\n");
    assert_eq!(parsed.suggested_values.len(), 1);
}

#[test]
fn emoji_and_other_unicode_pass_through() {
    let text = "🎉 Fertig — “ok” 日本語\n\nSUGGESTED_VALUES: [{\"label\": \"👍 Ja\", \"value\": \"ja ✓\"}]";
    let parsed = run(text);
    assert_eq!(parsed.message, "🎉 Fertig — “ok” 日本語");
    assert_eq!(parsed.suggested_values, values(&[("👍 Ja", "ja ✓")]));
}

#[test]
fn markdown_and_code_fences_are_untouched() {
    let text = "# Title\n\n- item *one*\n- item **two**\n\n```rust\nfn main() { let x = [1, 2]; }\n```\n\n| a | b |\n|---|---|\n";
    let parsed = run(text);
    assert_eq!(parsed.message, text);
    assert!(parsed.diagnostics.is_empty());
}

#[test]
fn fenced_json_after_a_marker_is_repaired() {
    let text = "Options:\n\nSUGGESTED_VALUES:\n```json\n[{\"label\": \"A\", \"value\": \"a\"}]\n```\n\nThanks!";
    let parsed = run(text);
    assert_eq!(parsed.message, "Options:\n\nThanks!");
    assert_eq!(parsed.suggested_values.len(), 1);
    assert_eq!(kinds(&parsed), [DiagnosticKind::Repaired]);
    assert!(parsed.diagnostics[0].reason.contains("code fence"));
}

#[test]
fn trailing_commas_are_repaired() {
    let parsed = run("SUGGESTED_VALUES: [{\"label\": \"A\", \"value\": \"a\",},]");
    assert_eq!(parsed.suggested_values.len(), 1);
    assert_eq!(kinds(&parsed), [DiagnosticKind::Repaired]);
    assert!(parsed.diagnostics[0].reason.contains("trailing commas"));
}

#[test]
fn unknown_actions_are_dropped_with_a_diagnostic() {
    let parsed = run(
        r#"SUGGESTED_ACTIONS: [{"label": "Close", "action": "close_chat", "handler": "client"}, {"label": "Wipe", "action": "drop_database", "handler": "server"}, {"label": "Archive", "action": "archive_table", "handler": "client"}]"#,
    );
    let actions: Vec<_> = parsed
        .suggested_actions
        .iter()
        .map(|a| (a.action.as_str(), a.handler))
        .collect();
    use parley_parse::ActionHandler::{Client, Server};
    assert_eq!(actions, [("close_chat", Client), ("archive_table", Server)]);
    assert_eq!(kinds(&parsed), [DiagnosticKind::UnknownAction]);
    assert!(parsed.diagnostics[0].raw.contains("drop_database"));
}

#[test]
fn schema_violations_are_absent_and_reported() {
    let text = r#"SCHEMA_PROPOSAL: {"mode": "delete", "operations": []}"#;
    let parsed = run(text);
    assert!(parsed.custom_payload.is_none());
    assert_eq!(parsed.message, "");
    assert_eq!(kinds(&parsed), [DiagnosticKind::SchemaViolation]);
    assert_eq!(parsed.diagnostics[0].raw, text);
    assert!(
        parsed.diagnostics[0].reason.contains("/mode"),
        "{}",
        parsed.diagnostics[0].reason
    );

    let shape = run(r#"SUGGESTED_VALUES: [{"label": "no value"}]"#);
    assert_eq!(kinds(&shape), [DiagnosticKind::SchemaViolation]);
}

#[test]
fn input_over_the_limit_is_refused() {
    let limits = Limits {
        max_bytes: 1024,
        ..Limits::default()
    };
    let text = "x".repeat(1025);
    assert_eq!(
        parse(&text, &profile(), &limits),
        Err(ParseError::TooLarge {
            size: 1025,
            limit: 1024
        })
    );
    assert!(parse(&text[..1024], &profile(), &limits).is_ok());
}

#[test]
fn deep_nesting_is_bounded() {
    let deep = format!("SCHEMA_PROPOSAL: {}{}", "[".repeat(65), "]".repeat(65));
    let parsed = run(&format!("Deep.\n{deep}"));
    assert_eq!(kinds(&parsed), [DiagnosticKind::TooDeep]);
    assert_eq!(parsed.message, "Deep.");
    let far = format!("SUGGESTED_VALUES: {}", "[".repeat(100_000));
    let parsed = run(&far);
    assert_eq!(parsed.message, far, "an unterminated element stays text");
    assert_eq!(kinds(&parsed), [DiagnosticKind::Unterminated]);
}

#[test]
fn unterminated_elements_stay_text_and_later_markers_still_count() {
    let text = "SUGGESTED_VALUES: [ oops\n\nSUGGESTED_ACTIONS: [{\"label\": \"Close\", \"action\": \"close_chat\"}]";
    let parsed = run(text);
    assert_eq!(parsed.message, "SUGGESTED_VALUES: [ oops");
    assert_eq!(parsed.suggested_actions.len(), 1);
    assert_eq!(kinds(&parsed), [DiagnosticKind::Unterminated]);
}

#[test]
fn text_tool_calls_are_extracted_only_for_registered_tools() {
    let text = "I'll look it up.\n\n```json\n{\"tool\": \"search\", \"input\": {\"q\": \"rust }\"}}\n```\n\nAlso {\"name\": \"search\", \"arguments\": {\"q\": \"b\"}} and {\"tool\": \"rm\", \"input\": {}} stay.";
    let parsed = run(text);
    assert_eq!(
        parsed.message,
        "I'll look it up.\n\nAlso and {\"tool\": \"rm\", \"input\": {}} stay."
    );
    let calls: Vec<_> = parsed
        .tool_calls
        .iter()
        .map(|c| (c.id.as_str(), c.name.as_str(), c.arguments.clone()))
        .collect();
    assert_eq!(
        calls,
        [
            ("text_call_1", "search", json!({"q": "rust }"})),
            ("text_call_2", "search", json!({"q": "b"}))
        ]
    );
    assert!(
        parsed.tool_calls[0].raw.starts_with("```json")
            && parsed.tool_calls[0].raw.ends_with("```")
    );
}

#[test]
fn a_fenced_json_tool_call_is_recognised() {
    let text = "I'll list the files for you.\n\n```json\n{\n  \"type\": \"terminal_execute\",\n  \"id\": \"exec_001\",\n  \"parameters\": {\n    \"command\": \"ls -la\"\n  }\n}\n```\n\nHere are the files...";
    let parsed = run(text);
    assert_eq!(
        parsed.message,
        "I'll list the files for you.\n\nHere are the files..."
    );
    assert_eq!(parsed.tool_calls[0].name, "terminal_execute");
    assert_eq!(parsed.tool_calls[0].arguments, json!({"command": "ls -la"}));
}

#[test]
fn a_tool_definition_is_not_a_call() {
    let text = r#"The tool is {"name": "search", "description": "web", "parameters": {"type": "object"}}."#;
    let parsed = run(text);
    assert_eq!(parsed.message, text);
    assert!(parsed.tool_calls.is_empty());
    assert_eq!(kinds(&parsed), [DiagnosticKind::SchemaViolation]);
}

#[test]
fn a_mebibyte_of_unclosed_openers_parses() {
    let limits = Limits::default();
    for unit in [
        "{",
        "{\"tool\": \"search\", ",
        "SCHEMA_PROPOSAL: {\"",
        "SUGGESTED_VALUES: [\\\"",
        "```json\n{\"name\": \"search\"",
    ] {
        let text = unit.repeat(limits.max_bytes / unit.len());
        let parsed = parse(&text, &profile(), &limits).expect("within limits");
        assert_eq!(parsed.message, text, "{unit:?}: unterminated text stays");
        assert!(parsed.diagnostics.len() <= 16, "{unit:?}");
    }
}

#[test]
fn removal_leaves_no_blank_runs_or_trailing_spaces() {
    let text = "Intro line.   \n\n\nSUGGESTED_VALUES: [{\"label\": \"A\", \"value\": \"a\"}]   \n\n\n\nSUGGESTED_ACTIONS: [{\"label\": \"C\", \"action\": \"close_chat\"}]\n\n\nOutro.";
    let parsed = run(text);
    assert_eq!(parsed.message, "Intro line.\n\nOutro.");
}
