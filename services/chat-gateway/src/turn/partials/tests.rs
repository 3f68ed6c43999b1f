//! Tests of `turn::partials`.

use serde_json::json;

use super::*;

fn partial(offset: u64, data: Option<serde_json::Value>, paths: &[&str]) -> pb::PayloadPartial {
    pb::PayloadPartial {
        r#type: "schema_proposal".into(),
        data: data.as_ref().map(json::to_struct_wrapped),
        complete_paths: paths.iter().map(|p| (*p).to_owned()).collect(),
        revision: 0,
        offset,
    }
}

fn values(labels: &[&str]) -> pb::SuggestedValues {
    pb::SuggestedValues {
        values: labels
            .iter()
            .map(|label| pb::SuggestedValue {
                label: (*label).to_owned(),
                value: label.to_lowercase(),
            })
            .collect(),
    }
}

fn labels(event: Option<Event>) -> Option<Vec<String>> {
    match event? {
        Event::SuggestedValues(list) => Some(list.values.into_iter().map(|v| v.label).collect()),
        other => panic!("{other:?}"),
    }
}

#[test]
fn suggestions_grow_item_by_item_without_repeats_and_end_as_parsed() {
    let mut shown = Shown::default();
    shown.begin_step(1);
    assert_eq!(shown.values(values(&[]), false), None, "nothing yet");
    assert_eq!(
        labels(shown.values(values(&["A"]), false)),
        Some(vec!["A".into()])
    );
    assert_eq!(
        labels(shown.values(values(&["A"]), false)),
        None,
        "a repeat"
    );
    assert_eq!(
        labels(shown.values(values(&["A", "B"]), true)),
        Some(vec!["A".into(), "B".into()])
    );
    // A parser that re-reads the text repeats them: nothing new.
    assert_eq!(labels(shown.values(values(&["A"]), false)), None);
    assert_eq!(labels(shown.values(values(&["A", "B"]), true)), None);
    let parsed = ParseResponse {
        suggested_values: values(&["A", "B"]).values,
        ..Default::default()
    };
    assert!(
        shown.settle(&parsed).is_empty(),
        "the last event is the final list"
    );
    // A list taken down (it failed or never closed): an empty one, once.
    let mut shown = Shown::default();
    shown.values(values(&["A"]), false);
    assert_eq!(labels(shown.values(values(&[]), false)), Some(vec![]));
    assert_eq!(labels(shown.values(values(&[]), false)), None);
    // A list shown that the final parse does not end with is replaced.
    shown.values(values(&["C"]), false);
    let events = shown.settle(&ParseResponse::default());
    assert_eq!(labels(events.into_iter().next()), Some(vec![]));
}

#[test]
fn a_reset_takes_down_suggestions_an_earlier_step_began() {
    let mut shown = Shown::default();
    shown.begin_step(1);
    shown.values(values(&["A"]), false);
    shown.begin_step(2);
    shown.values(values(&["A", "B"]), false);
    let events = shown.reset(50);
    assert_eq!(labels(events.into_iter().next()), Some(vec![]));
    // The re-parse shows what step 1 wrote again.
    assert_eq!(
        labels(shown.values(values(&["A"]), false)),
        Some(vec!["A".into()])
    );
    // A list first shown in the reset step goes without an event.
    let mut fresh = Shown::default();
    fresh.begin_step(3);
    fresh.values(values(&["Z"]), false);
    assert!(fresh.reset(0).is_empty());
    assert_eq!(
        labels(fresh.values(values(&["Z"]), false)),
        Some(vec!["Z".into()])
    );
}

fn revision(event: Option<Event>) -> Option<(u32, bool)> {
    match event? {
        Event::PayloadPartial(p) => Some((p.revision, p.data.is_some())),
        other => panic!("{other:?}"),
    }
}

#[test]
fn repeats_are_skipped_and_revisions_are_the_gateways() {
    let mut shown = Shown::default();
    shown.begin_step(1);
    let a = partial(5, Some(json!({"mode": "cr"})), &[]);
    assert_eq!(revision(shown.partial(a.clone())), Some((1, true)));
    // A parser that re-read the text says the same again.
    assert_eq!(revision(shown.partial(a)), None);
    let b = partial(5, Some(json!({"mode": "create"})), &["/mode"]);
    assert_eq!(revision(shown.partial(b)), Some((2, true)));
    // Withdrawn: down once, with the diagnostic noted before.
    shown.diagnostic(Diagnostic {
        kind: pb::DiagnosticKind::SchemaViolation as i32,
        offset: 5,
        ..Default::default()
    });
    let Some(Event::PayloadPartial(down)) = shown.partial(partial(5, None, &[])) else {
        panic!("taken down")
    };
    assert_eq!((down.revision, down.data), (3, None));
    assert_eq!(down.diagnostic.map(|d| d.offset), Some(5));
    assert_eq!(revision(shown.partial(partial(5, None, &[]))), None);
    // A withdrawal of a card never shown is not sent.
    assert_eq!(revision(shown.partial(partial(9, None, &[]))), None);
}

#[test]
fn settle_takes_down_what_the_answer_does_not_end_with() {
    let mut shown = Shown::default();
    let whole = json!({"mode": "create"});
    shown.partial(partial(1, Some(whole.clone()), &[""]));
    shown.partial(partial(40, Some(json!({"mode": "upd"})), &[]));
    let parsed = ParseResponse {
        custom_payload: Some(pb::Payload {
            r#type: "schema_proposal".into(),
            data: Some(json::to_struct_wrapped(&whole)),
            typed: None,
        }),
        ..Default::default()
    };
    let down = shown.settle(&parsed);
    assert_eq!(down.len(), 1, "{down:?}");
    let Event::PayloadPartial(down) = &down[0] else {
        panic!("{down:?}")
    };
    assert_eq!((down.offset, down.data.is_none()), (40, true));
    // Without a final payload, the whole one goes too.
    assert_eq!(shown.settle(&ParseResponse::default()).len(), 1);
}

#[test]
fn a_reset_forgets_the_steps_cards_and_lists() {
    let mut shown = Shown::default();
    shown.begin_step(1);
    shown.partial(partial(1, Some(json!({"a": 1})), &["/a"]));
    shown.begin_step(2);
    shown.partial(partial(30, Some(json!({"b": 1})), &["/b"]));
    assert!(shown.values(values(&["A"]), true).is_some());
    assert!(shown.values(values(&["A"]), true).is_none());
    assert!(
        shown.reset(30).is_empty(),
        "the client discards step 2's card and list"
    );
    assert!(shown.values(values(&["A"]), true).is_some());
    assert_eq!(
        revision(shown.partial(partial(30, Some(json!({"c": 1})), &[]))),
        Some((1, true)),
        "a new payload at a reset offset starts again"
    );
    assert_eq!(
        revision(shown.partial(partial(1, Some(json!({"a": 1, "x": 2})), &[]))),
        Some((2, true))
    );
}

#[test]
fn a_reset_takes_down_an_earlier_card_the_step_changed() {
    let mut shown = Shown::default();
    shown.begin_step(1);
    shown.partial(partial(1, Some(json!({"a": "x"})), &[]));
    shown.partial(partial(9, Some(json!({"z": 1})), &[""]));
    shown.begin_step(2);
    // The JSON of the card at 1 goes on in step 2, which then fails.
    shown.partial(partial(1, Some(json!({"a": "xy"})), &[]));
    let down = shown.reset(20);
    let [Event::PayloadPartial(down)] = down.as_slice() else {
        panic!("{down:?}")
    };
    assert_eq!((down.offset, down.revision), (1, 3));
    assert!(down.data.is_none() && down.diagnostic.is_none());
    // The re-parse shows it again as it was before the step, from 1;
    // the card step 2 did not touch stays as it was.
    assert_eq!(
        revision(shown.partial(partial(1, Some(json!({"a": "x"})), &[]))),
        Some((1, true))
    );
    assert_eq!(
        revision(shown.partial(partial(9, Some(json!({"z": 1})), &[""]))),
        None
    );
}

#[test]
fn structured_partials_grow_and_restart() {
    let mut structured = StructuredPartials::default();
    let Some(Event::StructuredPartial(first)) = structured.feed(r#"{"title": "Q"#) else {
        panic!("a first partial")
    };
    assert_eq!(first.revision, 1);
    assert_eq!(
        first.data.as_ref().map(json::from_value),
        Some(json!({"title": "Q"}))
    );
    assert!(structured.feed("").is_none(), "nothing new");
    let Some(Event::StructuredPartial(second)) = structured.feed(r#"3", "n": [1, 2]}"#) else {
        panic!("a second partial")
    };
    assert_eq!(
        (second.revision, second.complete_paths),
        (2, vec![String::new()])
    );
    structured.restart("");
    let Some(Event::StructuredPartial(again)) = structured.feed("[") else {
        panic!("after a restart")
    };
    assert_eq!(again.revision, 1);
}
