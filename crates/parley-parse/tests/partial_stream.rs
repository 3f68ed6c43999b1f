//! Partial payloads from `StreamParser::with_partial_payloads`: a payload
//! shown growing while its JSON is written, at most one partial per push
//! and payload and only when it changed, then shown whole or withdrawn;
//! and every other item exactly as without partials.

mod common;

use std::{collections::BTreeMap, sync::Arc};

use common::{rich_profile, texts};
use parley_parse::{
    DiagnosticKind, Limits, Parsed, PartialPayload, Profile, StreamItem, StreamParser,
    partial::is_complete_path,
};
use parley_testkit::examples::{fixture, profile};
use proptest::prelude::*;
use serde_json::{Map, Value, json};

/// Items per push (the last entry is `end`), and the result.
fn stream_pushes(
    profile: &Arc<Profile>,
    deltas: &[&str],
    partials: bool,
) -> (Vec<Vec<StreamItem>>, Parsed) {
    stream_limited(profile, Limits::default(), deltas, partials)
}

fn stream_limited(
    profile: &Arc<Profile>,
    limits: Limits,
    deltas: &[&str],
    partials: bool,
) -> (Vec<Vec<StreamItem>>, Parsed) {
    let mut parser = StreamParser::new(Arc::clone(profile), limits);
    if partials {
        parser = parser.with_partial_payloads();
    }
    let mut pushes = Vec::new();
    for delta in deltas {
        pushes.push(
            parser
                .push(delta)
                .unwrap_or_else(|error| panic!("push: {error}")),
        );
    }
    let (tail, parsed) = parser.finish_with_items();
    pushes.push(tail);
    (pushes, parsed)
}

fn partials_of(items: &[StreamItem]) -> Vec<&PartialPayload> {
    items
        .iter()
        .filter_map(|item| match item {
            StreamItem::PartialPayload(partial) => Some(partial),
            _ => None,
        })
        .collect()
}

fn others(pushes: &[Vec<StreamItem>]) -> Vec<&StreamItem> {
    pushes
        .iter()
        .flatten()
        .filter(|item| {
            !matches!(
                item,
                StreamItem::PartialPayload(_)
                    | StreamItem::PartialSuggestedValues(_)
                    | StreamItem::PartialSuggestedActions(_)
            )
        })
        .collect()
}

/// The items of each list partial of one kind, in order.
fn list_partials<T: Clone>(
    pushes: &[Vec<StreamItem>],
    pick: fn(&StreamItem) -> Option<&Vec<T>>,
) -> Vec<Vec<T>> {
    pushes.iter().flatten().filter_map(pick).cloned().collect()
}

/// The rules of one kind's list partials: each one adds items to the one
/// before (or is empty: the list was taken down, and a later list may
/// start again), at most one per push; the last one shown is a prefix of
/// the result's list and is followed by the whole list.
fn check_lists<T: Clone + PartialEq + std::fmt::Debug>(
    pushes: &[Vec<StreamItem>],
    pick: fn(&StreamItem) -> Option<&Vec<T>>,
    whole: fn(&StreamItem) -> Option<&Vec<T>>,
    result: &[T],
) -> Result<(), TestCaseError> {
    for push in pushes {
        prop_assert!(push.iter().filter_map(pick).count() <= 1, "{push:?}");
    }
    let shown = list_partials(pushes, pick);
    let mut before: Vec<T> = Vec::new();
    for items in &shown {
        if !items.is_empty() {
            prop_assert!(items.len() > before.len() && items.starts_with(&before));
        }
        before = items.clone();
    }
    if !before.is_empty() {
        prop_assert!(result.starts_with(&before), "{before:?} then {result:?}");
        let wholes: Vec<&Vec<T>> = pushes.iter().flatten().filter_map(whole).collect();
        let expected = result.to_vec();
        prop_assert_eq!(wholes, vec![&expected]);
    }
    Ok(())
}

fn values_partial(item: &StreamItem) -> Option<&Vec<parley_parse::SuggestedValue>> {
    match item {
        StreamItem::PartialSuggestedValues(values) => Some(values),
        _ => None,
    }
}

fn values_whole(item: &StreamItem) -> Option<&Vec<parley_parse::SuggestedValue>> {
    match item {
        StreamItem::SuggestedValues(values) => Some(values),
        _ => None,
    }
}

fn actions_partial(item: &StreamItem) -> Option<&Vec<parley_parse::SuggestedAction>> {
    match item {
        StreamItem::PartialSuggestedActions(actions) => Some(actions),
        _ => None,
    }
}

fn actions_whole(item: &StreamItem) -> Option<&Vec<parley_parse::SuggestedAction>> {
    match item {
        StreamItem::SuggestedActions(actions) => Some(actions),
        _ => None,
    }
}

#[test]
fn each_suggested_value_and_action_is_out_as_soon_as_it_closes() {
    let text = "Sure.\n\nSUGGESTED_VALUES: [{\"label\": \"A\", \"value\": \"a\"}, \
        {\"label\": \"B\", \"value\": \"b\"}]\n\
        SUGGESTED_ACTIONS: [{\"label\": \"Close\", \"action\": \"close_chat\"}, \
        {\"label\": \"X\", \"action\": \"nope\"}, \
        {\"label\": \"Close now\", \"action\": \"close_chat\"}]";
    let (pushes, parsed) = stream_pushes(&rich_profile(), &texts::cut(text, &[4]), true);
    let values = list_partials(&pushes, values_partial);
    let labels: Vec<Vec<&str>> = values
        .iter()
        .map(|list| list.iter().map(|v| v.label.as_str()).collect())
        .collect();
    // One more item each time, `A` alone first; `B` too when its `}` comes
    // in a push before the list's `]` (else the list follows whole).
    assert_eq!(labels.first(), Some(&vec!["A"]), "{labels:?}");
    assert!(labels.len() <= 2 && labels.iter().all(|l| ["A", "B"].starts_with(l)));
    // `A` was out before `B` was written.
    let first = pushes
        .iter()
        .position(|push| push.iter().any(|item| values_partial(item).is_some()))
        .expect("a partial");
    let written: String = texts::cut(text, &[4])[..first + 1].concat();
    assert!(!written.contains("\"B\""), "{written}");
    let actions = list_partials(&pushes, actions_partial);
    let names: Vec<Vec<&str>> = actions
        .iter()
        .map(|list| list.iter().map(|a| a.action.as_str()).collect())
        .collect();
    // `nope` is not allowed: dropped, as from the whole list.
    assert_eq!(names, [vec!["close_chat"]]);
    assert_eq!(parsed.suggested_values.len(), 2);
    assert_eq!(
        parsed
            .suggested_actions
            .iter()
            .map(|a| a.action.as_str())
            .collect::<Vec<_>>(),
        ["close_chat", "close_chat"]
    );
}

#[test]
fn a_list_that_fails_or_never_closes_is_taken_down() {
    for text in [
        // The second item has no `value`: the whole list fails.
        "SUGGESTED_VALUES: [{\"label\": \"A\", \"value\": \"a\"}, {\"label\": \"B\"}]",
        // Cut off.
        "SUGGESTED_VALUES: [{\"label\": \"A\", \"value\": \"a\"}, {\"label\": \"B",
    ] {
        let (pushes, parsed) = stream_pushes(&rich_profile(), &texts::cut(text, &[3]), true);
        let shown = list_partials(&pushes, values_partial);
        assert_eq!(shown.len(), 2, "{text}: {shown:?}");
        assert_eq!(shown[0].len(), 1);
        assert!(shown[1].is_empty(), "taken down");
        assert!(parsed.suggested_values.is_empty());
    }
}

/// Whether `later` extends `earlier`: members and items only added, a
/// string only grown at its end.
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

/// The rules every payload's partials follow, across all pushes: at most
/// one per push, revisions 1, 2, 3..., each extending the one before
/// without changing a complete path's value, and a withdrawal only last.
/// Returns each payload's last partial, by offset.
fn check_partials(
    pushes: &[Vec<StreamItem>],
) -> Result<BTreeMap<usize, PartialPayload>, TestCaseError> {
    let mut last: BTreeMap<usize, PartialPayload> = BTreeMap::new();
    for items in pushes {
        let mut seen_here = Vec::new();
        for partial in partials_of(items) {
            prop_assert!(
                !seen_here.contains(&partial.offset),
                "two partials of one payload in one push"
            );
            seen_here.push(partial.offset);
            let Some(before) = last.get(&partial.offset) else {
                prop_assert_eq!(partial.revision, 1);
                prop_assert!(partial.data.is_some(), "withdrawn before shown");
                last.insert(partial.offset, partial.clone());
                continue;
            };
            prop_assert_eq!(partial.revision, before.revision + 1);
            prop_assert_eq!(&partial.payload_type, &before.payload_type);
            let Some(old) = &before.data else {
                return Err(TestCaseError::fail("a partial after the withdrawal"));
            };
            if let Some(new) = &partial.data {
                let (old, new) = (Value::Object(old.clone()), Value::Object(new.clone()));
                prop_assert!(old != new || before.complete_paths != partial.complete_paths);
                prop_assert!(extends(&old, &new), "{old} is not extended by {new}");
                for path in &before.complete_paths {
                    prop_assert!(is_complete_path(&partial.complete_paths, path));
                    prop_assert_eq!(old.pointer(path), new.pointer(path));
                }
            }
            last.insert(partial.offset, partial.clone());
        }
    }
    Ok(last)
}

fn object(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        other => panic!("not an object: {other}"),
    }
}

#[test]
fn a_proposal_streamed_in_small_chunks_grows_then_is_shown_whole() {
    let text = fixture("schema_proposal_create.txt");
    let deltas = texts::cut(&text, &[7]);
    let (pushes, parsed) = stream_pushes(&profile("table_view"), &deltas, true);
    let last = check_partials(&pushes).expect("the partials follow the rules");
    let payload = parsed.custom_payload.expect("the proposal is valid");

    let partials: Vec<_> = pushes.iter().flat_map(|items| partials_of(items)).collect();
    assert!(partials.len() > 40, "{} partials", partials.len());
    let offset = text.find("SCHEMA_PROPOSAL").expect("marker");
    assert!(partials.iter().all(|p| p.offset == offset));
    assert!(partials.iter().all(|p| p.payload_type == "schema_proposal"));
    // The card forms field by field.
    assert_eq!(partials[0].data, Some(Map::new()));
    let mode = partials
        .iter()
        .find(|p| p.complete_paths.contains(&"/mode".to_owned()))
        .expect("mode completes first");
    assert_eq!(mode.data, Some(object(json!({"mode": "create"}))));
    let half_name = |p: &PartialPayload| match p.data.as_ref().and_then(|d| d.get("table_name")) {
        Some(Value::String(name)) => !name.is_empty() && name.len() < "My Table".len(),
        _ => false,
    };
    assert!(
        partials.iter().any(|p| half_name(p)),
        "a name shown half written"
    );
    // Its last partial is the whole payload.
    let whole = &last[&offset];
    assert_eq!(whole.complete_paths, [""]);
    assert_eq!(whole.data.as_ref(), Some(&payload.data));
    assert_eq!(usize::try_from(whole.revision), Ok(partials.len()));
}

#[test]
fn nothing_new_shows_nothing() {
    let mut parser =
        StreamParser::new(profile("table_view"), Limits::default()).with_partial_payloads();
    let shown = parser
        .push("Here:\n\nSCHEMA_PROPOSAL: {\"mode\": \"cre")
        .expect("within limits");
    assert_eq!(
        partials_of(&shown)
            .iter()
            .map(|p| (p.revision, p.data.clone()))
            .collect::<Vec<_>>(),
        [(1, Some(object(json!({"mode": "cre"}))))]
    );
    // Whitespace, a key and half a number change nothing that is shown.
    for (delta, shows) in [
        ("ate\", ", 1),
        ("  \n", 0),
        ("\"operations\"", 0),
        (": [", 1),
        ("12", 0),
    ] {
        let items = parser.push(delta).expect("within limits");
        assert_eq!(partials_of(&items).len(), shows, "after {delta:?}");
    }
    let items = parser.push(", ").expect("within limits");
    let partial = partials_of(&items)[0].clone();
    assert_eq!(partial.revision, 4);
    assert_eq!(
        partial.data,
        Some(object(json!({"mode": "create", "operations": [12]})))
    );
    assert_eq!(partial.complete_paths, ["/mode", "/operations/0"]);
}

#[test]
fn a_payload_invalid_when_it_closes_is_withdrawn_after_its_diagnostic() {
    let deltas = [
        "Sure.\n\nSCHEMA_PROPOSAL: {\"mode\": \"update\", \"reas",
        "oning\": \"none\"",
        "}\n\nDone.",
    ];
    let (pushes, parsed) = stream_pushes(&rich_profile(), &deltas, true);
    check_partials(&pushes).expect("the partials follow the rules");
    assert_eq!(partials_of(&pushes[0]).len(), 1);
    assert_eq!(partials_of(&pushes[1]).len(), 1);
    let closing = &pushes[2];
    let diagnostic = closing
        .iter()
        .position(|item| {
            matches!(item, StreamItem::Diagnostic(d) if d.kind == DiagnosticKind::SchemaViolation)
        })
        .expect("the schema violation");
    let withdrawal = closing
        .iter()
        .position(|item| matches!(item, StreamItem::PartialPayload(p) if p.data.is_none()))
        .expect("the withdrawal");
    assert!(diagnostic < withdrawal);
    let StreamItem::PartialPayload(partial) = &closing[withdrawal] else {
        unreachable!("found above")
    };
    assert_eq!(partial.revision, 3);
    assert!(partial.complete_paths.is_empty());
    assert_eq!(partial.offset, parsed.diagnostics[0].offset);
    assert_eq!(parsed.custom_payload, None);
}

#[test]
fn a_payload_that_never_closes_is_withdrawn_at_the_end() {
    let deltas = [
        "SCHEMA_PROPOSAL: {\"mode\": \"update\"",
        ", \"operations\": [",
    ];
    let (pushes, parsed) = stream_pushes(&rich_profile(), &deltas, true);
    check_partials(&pushes).expect("the partials follow the rules");
    let end = partials_of(&pushes[2]);
    assert_eq!(end.len(), 1);
    assert_eq!((end[0].revision, end[0].data.as_ref()), (3, None));
    assert_eq!(parsed.diagnostics[0].kind, DiagnosticKind::Unterminated);
}

#[test]
fn a_payload_that_loses_to_a_higher_priority_one_is_withdrawn_at_the_end() {
    let deltas = [
        "DATA_PROPOSAL: {\"operations\": [",
        "]}\n\nSCHEMA_PROPOSAL: {\"mode\": \"update\", ",
        "\"operations\": []}",
    ];
    let (pushes, parsed) = stream_pushes(&rich_profile(), &deltas, true);
    let last = check_partials(&pushes).expect("the partials follow the rules");
    assert_eq!(
        parsed.custom_payload.map(|p| p.payload_type).as_deref(),
        Some("schema_proposal")
    );
    assert_eq!(last[&0].data, None);
    assert_eq!(last[&0].payload_type, "data_proposal");
    let schema = text_offset(&deltas, "SCHEMA_PROPOSAL");
    assert_eq!(last[&schema].complete_paths, [""]);
    let end = &pushes[3];
    assert!(matches!(
        end.as_slice(),
        [StreamItem::Diagnostic(d), StreamItem::PartialPayload(p)]
            if d.kind == DiagnosticKind::Duplicate && p.offset == 0 && p.data.is_none()
    ));
}

fn text_offset(deltas: &[&str], needle: &str) -> usize {
    deltas.concat().find(needle).expect("in the text")
}

#[test]
fn suggestions_tool_calls_and_arrays_after_a_payload_marker_get_no_partials() {
    let text = "SUGGESTED_VALUES: [{\"label\": \"A\", \"value\": \"a\"}]\n\
        SCHEMA_PROPOSAL: [{\"mode\": \"update\"}]\n\
        {\"tool\": \"search\", \"input\": {\"q\": \"x\"}}";
    let (pushes, _) = stream_pushes(&rich_profile(), &texts::cut(text, &[3]), true);
    assert!(partials_of(&pushes.concat()).is_empty());
}

#[test]
fn partials_are_off_by_default() {
    let text = fixture("schema_proposal_create.txt");
    let (pushes, _) = stream_pushes(&profile("table_view"), &texts::cut(&text, &[5]), false);
    assert!(partials_of(&pushes.concat()).is_empty());
}

/// The number of fuzz cases: `PARLEY_FUZZ_CASES` (as in `fuzz.rs`), 256 by default.
fn fuzz_cases() -> u32 {
    std::env::var("PARLEY_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(256)
}

fn check_against_plain(
    profile: &Arc<Profile>,
    limits: Limits,
    deltas: &[&str],
) -> Result<(), TestCaseError> {
    let (with, parsed) = stream_limited(profile, limits, deltas, true);
    let (without, plain) = stream_limited(profile, limits, deltas, false);
    prop_assert_eq!(&parsed, &plain);
    prop_assert_eq!(others(&with), others(&without));
    check_partials(&with)?;
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: fuzz_cases(), failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn partials_survive_json_soup_under_tight_depths(
        parts in proptest::collection::vec((
            proptest::sample::select(vec![
                "SCHEMA_PROPOSAL: {",
                "DATA_PROPOSAL: ```json\n{",
                "\n**SCHEMA_PROPOSAL**: {\"mode\": \"update\", ",
                "",
            ]),
            "[\\[\\]{}\",:0-9.eE+\\-truefalsn\\\\é🎉 ]{0,120}",
        ), 1..5),
        sizes in texts::splits(),
        max_depth in 1usize..12,
    ) {
        let text: String = parts.iter().map(|(marker, soup)| format!("{marker}{soup}")).collect();
        let limits = Limits { max_depth, ..Limits::default() };
        check_against_plain(&rich_profile(), limits, &texts::cut(&text, &sizes))?;
    }

    #[test]
    fn partials_survive_arbitrary_text(text in any::<String>(), sizes in texts::splits()) {
        check_against_plain(&rich_profile(), Limits::default(), &texts::cut(&text, &sizes))?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 384, ..ProptestConfig::default() })]

    #[test]
    fn partials_follow_the_rules_and_change_nothing_else(
        text in texts::response(),
        sizes in texts::splits(),
    ) {
        let profile = rich_profile();
        let deltas = texts::cut(&text, &sizes);
        let (with, parsed) = stream_pushes(&profile, &deltas, true);
        let (without, plain) = stream_pushes(&profile, &deltas, false);
        prop_assert_eq!(&parsed, &plain);
        prop_assert_eq!(others(&with), others(&without));
        check_lists(&with, values_partial, values_whole, &parsed.suggested_values)?;
        check_lists(&with, actions_partial, actions_whole, &parsed.suggested_actions)?;
        let last = check_partials(&with)?;
        // Every payload shown ends whole or withdrawn; the one still shown
        // is the payload of the result.
        let shown: Vec<_> = last.values().filter(|p| p.data.is_some()).collect();
        for partial in &shown {
            prop_assert_eq!(&partial.complete_paths, &[String::new()]);
        }
        match &parsed.custom_payload {
            None => prop_assert!(shown.is_empty()),
            Some(payload) => {
                prop_assert!(shown.len() <= 1);
                if let Some(partial) = shown.first() {
                    prop_assert_eq!(partial.data.as_ref(), Some(&payload.data));
                }
            }
        }
    }
}
