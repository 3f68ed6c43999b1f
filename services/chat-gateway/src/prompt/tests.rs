//! Tests of the assembled prompt: the golden prompt of the example's
//! `table_view` page (exact bytes, `tests/golden/table_view_prompt.txt`;
//! `UPDATE_GOLDEN=1` rewrites it after an intended change), sections present
//! and omitted, context rendering with and without a template, truncation,
//! the manifest, and the structured-answer note.

use std::path::PathBuf;

use serde_json::{Value, json};

use super::*;
use crate::registry::{PageRef, Registry};

fn golden_path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(name)
}

fn fixture(name: &str) -> Value {
    let path = golden_path(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn history() -> Vec<HistoryPayload> {
    vec![
        HistoryPayload {
            turn_index: 1,
            payload_type: "schema_proposal".into(),
            data: json!({
                "mode": "create",
                "table_name": "Job Applications",
                "table_description": "Tracks job applications",
                "reasoning": "Three columns cover what you described",
                "operations": [{"action": "add"}, {"action": "add"}, {"action": "add"}],
                "sample_rows": [{"Company": "Acme"}]
            }),
            decision: Some(Decision::Accepted),
        },
        HistoryPayload {
            turn_index: 3,
            payload_type: "data_proposal".into(),
            data: json!({"operations": [{"action": "add"}, {"action": "update"}, {"action": "update"}]}),
            decision: Some(Decision::Dismissed),
        },
        HistoryPayload {
            turn_index: 4,
            payload_type: "retired_type".into(),
            data: json!({"z": 1, "a": "x"}),
            decision: None,
        },
    ]
}

/// Builds the prompt for `page` with the given inputs.
fn prompt(
    registry: &Registry,
    page: PageRef,
    stream_id: Option<&str>,
    state: Option<&Value>,
    history: &[HistoryPayload],
    response_schema: Option<&Value>,
) -> String {
    let resolved = registry.resolve(&page);
    build_system_prompt(&PromptInput {
        registry,
        page: &resolved,
        stream_id,
        state,
        history_payloads: history,
        response_schema,
        attachments: &[],
    })
}

/// What a provider's prompt cache needs: two turns of one conversation on
/// one page, with other UI state, another stream and a longer payload
/// manifest, send the same stable part, byte for byte, and it is most of
/// the prompt's fixed text.
#[test]
fn turns_of_a_page_share_the_stable_part_of_their_prompt() {
    let registry = Registry::example();
    let page = registry.resolve(&PageRef::new("table_view", "rows", ""));
    let state = fixture("table_view_state.json");
    let history = history();
    let first = build_system_prompt_parts(&PromptInput {
        registry: &registry,
        page: &page,
        stream_id: None,
        state: Some(&json!({"table": {"name": "Jobs", "row_count": 2}})),
        history_payloads: &history[..1],
        response_schema: None,
        attachments: &[],
    });
    let second = build_system_prompt_parts(&PromptInput {
        registry: &registry,
        page: &page,
        stream_id: Some("sales-pipeline"),
        state: Some(&state),
        history_payloads: &history,
        response_schema: None,
        attachments: &[],
    });
    assert_eq!(first.stable_bytes, second.stable_bytes);
    let stable = first.stable_bytes;
    assert_eq!(first.text[..stable], second.text[..stable]);
    let common = first
        .text
        .bytes()
        .zip(second.text.bytes())
        .take_while(|(a, b)| a == b)
        .count();
    assert!(common >= stable, "{common} < {stable}");
    // The per-turn sections come after it, and nothing per turn before.
    for per_turn in ["## CURRENT CONTEXT", "## PAYLOAD MANIFEST"] {
        let at = second.text.find(per_turn).expect(per_turn);
        assert!(at >= stable, "{per_turn} at {at}, inside the stable part");
    }
    assert!(!first.text[..stable].contains("Jobs"));
    // The stable part is most of the prompt: the schemas and rules.
    assert!(
        stable * 10 >= first.text.len() * 6,
        "{stable} of {}",
        first.text.len()
    );
}

#[test]
fn prompt_cache_keys_are_per_page_and_conversation_and_reveal_neither() {
    let key = prompt_cache_key("table_view", "conv-1");
    assert_eq!(key, prompt_cache_key("table_view", "conv-1"));
    assert_ne!(key, prompt_cache_key("table_view", "conv-2"));
    assert_ne!(key, prompt_cache_key("tables_list", "conv-1"));
    assert_ne!(prompt_cache_key("a", "bc"), prompt_cache_key("ab", "c"));
    assert!(!key.contains("conv") && !key.contains("table"), "{key}");
    assert!(key.len() <= 64 && key.bytes().all(|b| b.is_ascii_graphic()));
}

#[test]
fn golden_prompt_for_table_view() {
    let registry = Registry::example();
    let state = fixture("table_view_state.json");
    let history = history();
    let actual = prompt(
        &registry,
        PageRef::new("table_view", "rows", "selection"),
        Some("sales-pipeline"),
        Some(&state),
        &history,
        None,
    );
    let path = golden_path("table_view_prompt.txt");
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, &actual).expect("write golden");
    }
    let expected = std::fs::read_to_string(&path)
        .expect("golden file (run with UPDATE_GOLDEN=1 to create it)");
    if actual != expected {
        let line = actual
            .lines()
            .zip(expected.lines())
            .position(|(a, e)| a != e)
            .unwrap_or_else(|| actual.lines().count().min(expected.lines().count()));
        panic!(
            "prompt differs from {} at line {}:\n  actual:   {:?}\n  expected: {:?}\n(UPDATE_GOLDEN=1 rewrites the file after an intended change)",
            path.display(),
            line + 1,
            actual.lines().nth(line),
            expected.lines().nth(line),
        );
    }
}

#[test]
fn sections_come_in_their_documented_order() {
    let registry = Registry::example();
    let state = fixture("table_view_state.json");
    let history = history();
    let p = prompt(
        &registry,
        PageRef::new("table_view", "rows", "selection"),
        Some("sales-pipeline"),
        Some(&state),
        &history,
        Some(&json!({"type": "object"})),
    );
    // What is the same for every turn of the page first, what changes
    // per turn last (prompt caches reuse the prefix).
    let headings = [
        "You are the assistant built into Tables",
        "## PAGE INSTRUCTIONS",
        "## CAPABILITIES",
        "### TOOLS",
        "### STRUCTURED RESPONSES",
        "### CLIENT ACTIONS",
        "### STRUCTURED ANSWER",
        "## HELP",
        "## FORMAT RULES",
        "## STREAM INSTRUCTIONS",
        "## CURRENT CONTEXT",
        "## PAYLOAD MANIFEST",
    ];
    let positions: Vec<usize> = headings
        .iter()
        .map(|h| p.find(h).unwrap_or_else(|| panic!("missing {h}")))
        .collect();
    assert!(positions.windows(2).all(|w| w[0] < w[1]), "{positions:?}");
    assert!(p.starts_with("You are the assistant"));
    assert!(
        !p.contains("\n\n\n"),
        "no empty sections or stray blank lines"
    );
}

#[test]
fn empty_sections_are_left_out() {
    let registry = Registry::from_str("version: 1\n", "min.yaml").expect("valid");
    let p = prompt(
        &registry,
        PageRef::default(),
        Some("unknown-stream"),
        None,
        &[],
        None,
    );
    for absent in [
        "## PAGE INSTRUCTIONS",
        "## STREAM INSTRUCTIONS",
        "## CURRENT CONTEXT",
        "## PAYLOAD MANIFEST",
        "## CAPABILITIES",
        "SUGGESTED_ACTIONS",
        "proposal (STRUCTURED RESPONSES)",
    ] {
        assert!(!p.contains(absent), "{absent} must be absent:\n{p}");
    }
    // help (how to fail helpfully) and the suggestion format are always there
    assert!(
        p.starts_with("## HELP\nWhen you cannot do what the user asks"),
        "{p}"
    );
    assert!(p.contains("## FORMAT RULES"));
    assert!(p.contains("SUGGESTED_VALUES:\n["));
    assert!(!p.contains("\n\n\n"));
    assert!(p.ends_with("at most once per response.\n"), "{p}");
}

#[test]
fn unknown_page_prompt_teaches_globals_only() {
    let registry = Registry::example();
    let p = prompt(
        &registry,
        PageRef::new("settings", "", ""),
        None,
        None,
        &[],
        None,
    );
    assert!(p.ends_with("## CURRENT CONTEXT\nPage: settings\n"));
    assert!(!p.contains("## PAGE INSTRUCTIONS"));
    assert!(!p.contains("### STRUCTURED RESPONSES"));
    assert!(!p.contains("SCHEMA_PROPOSAL"));
    assert!(p.contains("- current_time:"));
    assert!(!p.contains("lookup_rows"));
    assert!(p.contains("- close_chat (handler \"client\"): Close the chat panel."));
}

#[test]
fn availability_matrix_reaches_the_prompt() {
    let registry = Registry::example();
    for (page, data) in [
        ("tables_list", false),
        ("table_edit", false),
        ("table_view", true),
    ] {
        let p = prompt(&registry, PageRef::new(page, "", ""), None, None, &[], None);
        assert!(p.contains("#### SCHEMA_PROPOSAL: "), "{page}");
        assert_eq!(p.contains("#### DATA_PROPOSAL: "), data, "{page}");
        assert!(
            p.contains("SUGGESTED_VALUES:") && p.contains("SUGGESTED_ACTIONS:"),
            "{page}"
        );
    }
}

#[test]
fn context_without_template_is_readable_sorted_json() {
    let registry = Registry::example();
    let state = json!({"zeta": [1, 2], "alpha": {"b": true, "a": null}});
    let p = prompt(
        &registry,
        PageRef::new("settings", "", ""),
        None,
        Some(&state),
        &[],
        None,
    );
    let expected = "## CURRENT CONTEXT\nPage: settings\nUI state (JSON):\n{\n  \"alpha\": {\n    \"a\": null,\n    \"b\": true\n  },\n  \"zeta\": [\n    1,\n    2\n  ]\n}\n";
    assert!(p.contains(expected), "{p}");
}

#[test]
fn context_template_renders_partial_state() {
    let registry = Registry::example();
    let state = json!({"table": {"name": "Deals", "id": "t9"}});
    let p = prompt(
        &registry,
        PageRef::new("table_view", "", ""),
        None,
        Some(&state),
        &[],
        None,
    );
    let expected = "## CURRENT CONTEXT\nPage: table_view\nTable: Deals (id t9)\nColumns:\n- none yet\nRows: unknown in total\nFilters: none\nSort: none\n";
    assert!(p.contains(expected), "{p}");
}

#[test]
fn empty_state_shows_only_the_location() {
    let registry = Registry::example();
    for state in [json!({}), Value::Null] {
        let p = prompt(
            &registry,
            PageRef::new("table_view", "charts", ""),
            None,
            Some(&state),
            &[],
            None,
        );
        assert!(
            p.ends_with("## CURRENT CONTEXT\nPage: table_view, tab: charts\n"),
            "{p}"
        );
    }
}

#[test]
fn a_failing_context_template_falls_back_to_json() {
    let registry = Registry::from_str(
        "version: 1\npages:\n  p:\n    context_template: \"{{ rows | length }} rows\"\n",
        "inline",
    )
    .expect("valid");
    // `length` of a number is an error at render time
    let state = json!({"rows": 5});
    let p = prompt(
        &registry,
        PageRef::new("p", "", ""),
        None,
        Some(&state),
        &[],
        None,
    );
    assert!(
        p.contains("Page: p\nUI state (JSON):\n{\n  \"rows\": 5\n}"),
        "{p}"
    );
    let ok = json!({"rows": [1, 2]});
    let p = prompt(
        &registry,
        PageRef::new("p", "", ""),
        None,
        Some(&ok),
        &[],
        None,
    );
    assert!(p.contains("Page: p\n2 rows\n"), "{p}");
}

#[test]
fn context_is_bounded() {
    let registry = Registry::from_str("version: 1\nlimits:\n  max_context_chars: 40\n", "inline")
        .expect("valid");
    let state = json!({"notes": "x".repeat(500)});
    let p = prompt(
        &registry,
        PageRef::new("p", "", ""),
        None,
        Some(&state),
        &[],
        None,
    );
    let section = p
        .split("\n\n")
        .find(|s| s.starts_with("## CURRENT CONTEXT"))
        .expect("section");
    assert!(
        section.ends_with("…\n[context truncated: 40 of 534 characters shown]\n"),
        "{section}"
    );
}

#[test]
fn manifest_summarises_with_templates_and_falls_back_to_json() {
    let registry = Registry::example();
    let p = prompt(
        &registry,
        PageRef::new("table_view", "", ""),
        None,
        None,
        &history(),
        None,
    );
    let expected = "## PAYLOAD MANIFEST\nPayloads shown earlier in this conversation, oldest first:\n\
- turn 1, schema_proposal: create table \"Job Applications\", 3 column operation(s): Three columns cover what you described [accepted]\n\
- turn 3, data_proposal: 1 add, 2 update, 0 delete [dismissed]\n\
- turn 4, retired_type: {\"a\":\"x\",\"z\":1}\n";
    assert!(p.contains(expected), "{p}");
}

#[test]
fn manifest_says_what_the_user_applied_of_an_edited_proposal() {
    let registry = Registry::example();
    let edited = |applied_data: Option<Value>, note: &str| {
        vec![HistoryPayload {
            turn_index: 2,
            payload_type: "data_proposal".into(),
            data: json!({"operations": [{"action": "add"}, {"action": "add"}]}),
            decision: Some(Decision::Edited {
                applied_data,
                note: note.into(),
            }),
        }]
    };
    let manifest = |history: &[HistoryPayload]| {
        let p = prompt(
            &registry,
            PageRef::new("table_view", "", ""),
            None,
            None,
            history,
            None,
        );
        p.lines()
            .find(|line| line.starts_with("- turn 2,"))
            .expect("the manifest line")
            .to_owned()
    };
    let both = edited(
        Some(json!({"operations": [{"action": "add"}]})),
        "kept only\nthe first row",
    );
    assert_eq!(
        manifest(&both),
        "- turn 2, data_proposal: 2 add, 0 update, 0 delete \
         [edited: kept only the first row; applied 1 add, 0 update, 0 delete]"
    );
    assert_eq!(
        manifest(&edited(None, "")),
        "- turn 2, data_proposal: 2 add, 0 update, 0 delete [edited]"
    );
}

#[test]
fn manifest_keeps_the_most_recent_entries_and_bounds_summaries() {
    let registry = Registry::from_str(
        "version: 1\nlimits:\n  max_manifest_entries: 2\n  max_summary_chars: 12\n",
        "inline",
    )
    .expect("valid");
    let history: Vec<HistoryPayload> = (0..5)
        .rev()
        .map(|i| HistoryPayload {
            turn_index: i,
            payload_type: "note".into(),
            data: json!({"text": format!("note number {i} is long")}),
            decision: None,
        })
        .collect();
    let p = prompt(&registry, PageRef::default(), None, None, &history, None);
    let expected = "## PAYLOAD MANIFEST\nPayloads shown earlier in this conversation, oldest first:\n\
- (3 earlier payload(s) not listed)\n\
- turn 3, note: {\"text\":\"no…\n\
- turn 4, note: {\"text\":\"no…\n";
    assert!(p.contains(expected), "{p}");
}

#[test]
fn stream_instructions_only_for_a_registered_stream() {
    let registry = Registry::example();
    let with = prompt(
        &registry,
        PageRef::new("table_view", "", ""),
        Some("sales-pipeline"),
        None,
        &[],
        None,
    );
    assert!(
        with.contains("## STREAM INSTRUCTIONS\nThis table belongs to the sales team's pipeline.")
    );
    for id in [Some("other"), Some(""), None] {
        let without = prompt(
            &registry,
            PageRef::new("table_view", "", ""),
            id,
            None,
            &[],
            None,
        );
        assert!(!without.contains("## STREAM INSTRUCTIONS"), "{id:?}");
    }
}

#[test]
fn structured_answer_note_carries_the_schema() {
    let registry = Registry::example();
    let schema = json!({"type": "object", "required": ["score"], "properties": {"score": {"type": "number"}}});
    let p = prompt(
        &registry,
        PageRef::new("table_view", "", ""),
        None,
        None,
        &[],
        Some(&schema),
    );
    assert!(p.contains(
        "### STRUCTURED ANSWER\nThis message must be answered with a single JSON value that satisfies the schema below"
    ));
    assert!(p.contains(
        r#"{"properties":{"score":{"type":"number"}},"required":["score"],"type":"object"}"#
    ));
    let without = prompt(
        &registry,
        PageRef::new("table_view", "", ""),
        None,
        None,
        &[],
        None,
    );
    assert!(!without.contains("STRUCTURED ANSWER"));
}

#[test]
fn the_prompt_is_deterministic() {
    let registry = Registry::example();
    let state = fixture("table_view_state.json");
    let history = history();
    let build = || {
        prompt(
            &registry,
            PageRef::new("table_view", "charts", ""),
            None,
            Some(&state),
            &history,
            None,
        )
    };
    assert_eq!(build(), build());
}

#[test]
fn the_current_context_lists_the_files_of_the_new_message() {
    let registry = Registry::example();
    let page = registry.resolve(&PageRef::new("tables_list", "", ""));
    let files = [crate::store::StoredAttachmentRef {
        id: "att_1".into(),
        name: "sales.csv".into(),
        media_type: "text/csv".into(),
        size_bytes: 19,
        sha256: String::new(),
        created_at: 0,
    }];
    let prompt = build_system_prompt(&PromptInput {
        registry: &registry,
        page: &page,
        stream_id: None,
        state: None,
        history_payloads: &[],
        response_schema: None,
        attachments: &files,
    });
    assert!(
        prompt.contains(
            "## CURRENT CONTEXT\nPage: tables_list\nFiles attached to this message (the model gets them with it):\n- sales.csv (text/csv, 19 bytes)"
        ),
        "{prompt}"
    );
}
