//! Tests of `turn::cleaner`.

use super::*;
use crate::registry::{PageRef, Registry};

fn profile() -> ParseProfile {
    Registry::example()
        .resolve(&PageRef::new("tables_list", "", ""))
        .parse_profile()
}

fn upstreams(parser: &str) -> Upstreams {
    Upstreams::new(
        "http://127.0.0.1:9",
        parser,
        Duration::from_millis(500),
        Duration::from_millis(500),
        &parley_grpc::tls::ClientTls::default(),
    )
    .expect("valid urls")
}

/// The real payload-parser (the binary, as a child process) on port 0.
async fn sidecar() -> parley_testkit::sidecar::ParserSidecar {
    parley_testkit::sidecar::ParserSidecar::start::<_, &str>([]).await
}

/// The text deltas of `events`, joined.
fn texts(events: Vec<Event>) -> String {
    events
        .into_iter()
        .filter_map(|event| match event {
            Event::TextDelta(text) => Some(text),
            _ => None,
        })
        .collect()
}

/// The `(offset, revision, data)` of the payload partials of `events`.
fn partials(events: &[Event]) -> Vec<(u64, u32, Option<serde_json::Value>)> {
    events
        .iter()
        .filter_map(|event| match event {
            Event::PayloadPartial(p) => Some((
                p.offset,
                p.revision,
                p.data.as_ref().map(parley_proto::json::from_struct_value),
            )),
            _ => None,
        })
        .collect()
}

const PROPOSAL_TEXT: [&str; 4] = [
    "Here.\n\nSCHEMA_PROPOSAL: {\"mode\": \"upd",
    "ate\", \"operations\": [{\"action\": \"remove\"",
    ", \"column_id\": \"col_notes\"}]",
    "}\n\nSUGGESTED_VALUES: [{\"label\": \"More\", \"value\": \"Tell me more\"}]",
];

async fn partials_while_streaming(mut cleaner: TextCleaner) {
    let mut events = Vec::new();
    for delta in PROPOSAL_TEXT {
        cleaner.push(delta).await;
        cleaner.sync().await;
        let ready = cleaner.take_ready();
        assert!(
            partials(&ready).len() <= 1,
            "one partial per payload per flush: {ready:?}"
        );
        events.extend(ready);
    }
    let done = cleaner.finish().await;
    events.extend(done.events);
    let shown = partials(&events);
    let revisions: Vec<u32> = shown.iter().map(|p| p.1).collect();
    assert_eq!(revisions, [1, 2, 3, 4], "{shown:?}");
    assert_eq!(shown[0].2, Some(serde_json::json!({"mode": "upd"})));
    let last = shown[3].2.clone().expect("whole");
    let payload = done.response.custom_payload.expect("the payload");
    assert_eq!(
        Some(last),
        payload
            .data
            .as_ref()
            .map(parley_proto::json::from_struct_value)
    );
    let lists: Vec<&Event> = events
        .iter()
        .filter(|e| matches!(e, Event::SuggestedValues(_)))
        .collect();
    assert_eq!(lists.len(), 1, "{events:?}");
}

#[tokio::test]
async fn payloads_show_growing_from_the_sidecar_and_the_library() {
    let parser = sidecar().await;
    let upstreams = upstreams(&parser.url());
    partials_while_streaming(TextCleaner::open(&upstreams, profile()).await).await;
    partials_while_streaming(TextCleaner::local(profile(), Arc::default(), "test")).await;
}

#[tokio::test]
async fn partials_that_queued_up_travel_as_the_latest_one() {
    let mut cleaner = TextCleaner::local(profile(), Arc::default(), "test");
    cleaner.push(PROPOSAL_TEXT[0]).await;
    cleaner.push(PROPOSAL_TEXT[1]).await;
    let ready = cleaner.take_ready();
    assert_eq!(
        partials(&ready),
        [(
            7,
            1,
            Some(serde_json::json!({"mode": "update", "operations": [{"action": "remove"}]}))
        )]
    );
}

#[tokio::test]
async fn a_step_reset_drops_the_steps_text_and_cards_and_reparses() {
    let parser = sidecar().await;
    let upstreams = upstreams(&parser.url());
    for mut cleaner in [
        TextCleaner::open(&upstreams, profile()).await,
        TextCleaner::local(profile(), Arc::default(), "test"),
    ] {
        cleaner.mark_step(1);
        cleaner.push("Let me look. ").await;
        cleaner.sync().await;
        let mut seen = texts(cleaner.take_ready());
        cleaner.mark_step(2);
        cleaner
            .push("\n\nHere.\n\nSCHEMA_PROPOSAL: {\"mode\": \"upd")
            .await;
        cleaner.sync().await;
        let step = cleaner.take_ready();
        assert_eq!(partials(&step).len(), 1, "{step:?}");
        // The step fails: the client discards what it showed.
        assert!(cleaner.reset_step().await.is_empty());
        cleaner.push("\n\nDone, nothing to change.").await;
        cleaner.sync().await;
        let after = cleaner.take_ready();
        assert!(partials(&after).is_empty(), "{after:?}");
        seen.push_str(&texts(after));
        let done = cleaner.finish().await;
        seen.push_str(&done.tail);
        assert_eq!(done.raw, "Let me look. \n\nDone, nothing to change.");
        assert_eq!(seen, done.response.message);
        assert!(done.response.custom_payload.is_none());
        assert!(partials(&done.events).is_empty(), "{:?}", done.events);
    }
}

const TEXT: &str = "Sure, here it is.\n\n**SUGGESTED_VALUES:** [{\"label\": \"More\", \"value\": \"Tell me more\"}]";

#[tokio::test]
async fn the_local_cleaner_never_leaks_and_adds_up_for_any_split() {
    for size in [1, 2, 5, 13, TEXT.len()] {
        let mut cleaner = TextCleaner::local(profile(), Arc::default(), "test");
        let mut seen = String::new();
        let chars: Vec<char> = TEXT.chars().collect();
        for chunk in chars.chunks(size) {
            cleaner.push(&chunk.iter().collect::<String>()).await;
            let text = texts(cleaner.take_ready());
            assert!(
                !text.contains("SUGGESTED") && !text.contains('['),
                "{text:?} leaks"
            );
            seen.push_str(&text);
        }
        let done = cleaner.finish().await;
        seen.push_str(&done.tail);
        assert_eq!(seen, done.response.message, "split {size}");
        assert_eq!(done.response.message.trim_end(), "Sure, here it is.");
        assert_eq!(done.response.suggested_values.len(), 1);
        assert_eq!(done.raw, TEXT);
        assert_eq!(done.fallback.as_deref(), Some("test"));
    }
}

#[tokio::test]
async fn an_unreachable_sidecar_falls_back_when_first_needed() {
    let mut cleaner = TextCleaner::open(&upstreams("http://127.0.0.1:9"), profile()).await;
    // Opened by the first delta that needs it.
    assert!(cleaner.fallback_reason().is_none());
    cleaner.push(TEXT).await;
    assert!(cleaner.fallback_reason().is_some());
    let done = cleaner.finish().await;
    assert_eq!(done.response.suggested_values.len(), 1);
}

#[tokio::test]
async fn after_a_sync_the_sidecar_has_answered_everything_pushed() {
    let parser = sidecar().await;
    let upstreams = upstreams(&parser.url());
    let mut cleaner = TextCleaner::open(&upstreams, profile()).await;
    let mut seen = String::new();
    // Each delta has a colon, so none passes the sidecar (plain text
    // would be handed out before it answers, sync or not).
    for (n, delta) in ["Let me check: ", "the time: ", "One moment: ok."]
        .into_iter()
        .enumerate()
    {
        cleaner.push(delta).await;
        // As before a tool event: everything written so far is out
        // (but the trailing space, which may still touch a removed
        // element), without waiting on `next`.
        cleaner.sync().await;
        seen.push_str(&texts(cleaner.take_ready()));
        let expected = [
            "Let me check:",
            "Let me check: the time:",
            "Let me check: the time: One moment: ok.",
        ][n];
        assert_eq!(seen, expected);
    }
    cleaner.sync().await; // nothing pushed since: returns at once
    let done = cleaner.finish().await;
    assert_eq!(done.fallback, None, "the sidecar answered every checkpoint");
    assert_eq!(seen + &done.tail, done.response.message);
}

#[tokio::test]
async fn plain_text_is_handed_out_before_the_sidecar_answers_and_the_sidecar_still_decides() {
    let parser = sidecar().await;
    let upstreams = upstreams(&parser.url());
    let mut cleaner = TextCleaner::open(&upstreams, profile()).await;
    let mut seen = String::new();
    // Ready at once, without `next` or `sync`: no round trip.
    for (delta, shown) in [
        ("Sure", "Sure"),
        (", here", ", here"),
        (" it is. ", " it is."),
        ("\n\n", ""),
    ] {
        cleaner.push(delta).await;
        let text = texts(cleaner.take_ready());
        assert_eq!(
            text, shown,
            "{delta:?} is shown as the sidecar would show it"
        );
        seen.push_str(&text);
    }
    // A marker goes to the sidecar with the text shown before it, which
    // the sidecar repeats and the cleaner skips.
    cleaner
        .push("**SUGGESTED_VALUES:** [{\"label\": \"More\", \"value\": \"Tell me more\"}]")
        .await;
    assert!(
        cleaner.take_ready().is_empty(),
        "the sidecar decides a marker"
    );
    cleaner.sync().await;
    let events = cleaner.take_ready();
    assert!(
        events
            .iter()
            .any(|event| matches!(event, Event::SuggestedValues(_))),
        "{events:?}"
    );
    seen.push_str(&texts(events));
    // After the element nothing passes the sidecar any more.
    cleaner.push(" Bye").await;
    assert!(cleaner.take_ready().is_empty());
    cleaner.sync().await;
    seen.push_str(&texts(cleaner.take_ready()));
    let done = cleaner.finish().await;
    assert_eq!(done.fallback, None);
    seen.push_str(&done.tail);
    assert_eq!(seen, done.response.message);
    assert_eq!(done.response.message, "Sure, here it is.\n\nBye");
    assert_eq!(done.response.suggested_values.len(), 1);
}

#[tokio::test]
async fn an_answer_shown_without_the_sidecar_reaches_it_whole_for_the_final_parse() {
    let parser = sidecar().await;
    let upstreams = upstreams(&parser.url());
    for size in [1, 3, 7, 64, UNSENT_FLUSH + 1] {
        let answer = "All plain words here, nothing to parse. ".repeat(400);
        let mut cleaner = TextCleaner::open(&upstreams, profile()).await;
        let mut seen = String::new();
        let chars: Vec<char> = answer.chars().collect();
        for chunk in chars.chunks(size) {
            cleaner.push(&chunk.iter().collect::<String>()).await;
            seen.push_str(&texts(cleaner.take_ready()));
        }
        let done = cleaner.finish().await;
        assert_eq!(done.fallback, None, "split {size}");
        seen.push_str(&done.tail);
        // The final parse is the sidecar's, of the whole text.
        assert_eq!(done.response.message, answer, "split {size}");
        assert_eq!(seen, done.response.message, "split {size}");
    }
}

#[tokio::test]
async fn with_the_sidecar_any_split_adds_up_and_never_leaks() {
    let parser = sidecar().await;
    let upstreams = upstreams(&parser.url());
    let whole = format!("{TEXT} Then. {}", PROPOSAL_TEXT.concat());
    for size in [1, 2, 5, 13, 40, whole.len()] {
        let mut cleaner = TextCleaner::open(&upstreams, profile()).await;
        let mut seen = String::new();
        let chars: Vec<char> = whole.chars().collect();
        for chunk in chars.chunks(size) {
            cleaner.push(&chunk.iter().collect::<String>()).await;
            let text = texts(cleaner.take_ready());
            assert!(
                !text.contains("SUGGESTED") && !text.contains('[') && !text.contains('{'),
                "{text:?} leaks"
            );
            seen.push_str(&text);
        }
        cleaner.sync().await;
        seen.push_str(&texts(cleaner.take_ready()));
        let done = cleaner.finish().await;
        assert_eq!(done.fallback, None, "split {size}");
        seen.push_str(&done.tail);
        assert_eq!(seen, done.response.message, "split {size}");
        assert_eq!(done.raw, whole);
    }
}

#[tokio::test]
async fn a_plain_answer_with_the_sidecar_down_is_parsed_in_process_and_says_why() {
    let mut cleaner = TextCleaner::open(&upstreams("http://127.0.0.1:9"), profile()).await;
    cleaner.push("Nothing to see").await;
    assert_eq!(texts(cleaner.take_ready()), "Nothing to see");
    let done = cleaner.finish().await;
    assert!(done.fallback.is_some(), "the final Parse found no sidecar");
    assert_eq!(done.response.message, "Nothing to see");
}
