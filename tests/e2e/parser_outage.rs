//! The payload-parser container goes away in the middle of a turn and comes
//! back: turns keep completing, cleaned by the parser library inside the
//! gateway and flagged with a `PARSER_FALLBACK` diagnostic, and once the
//! container is back the gateway uses it again.

use std::time::{Duration, Instant};

use crate::support::{
    chat::{Turn, request},
    gate,
    stack::{Service, Stack, StackOptions},
};

/// A successful turn whose suggestions were parsed and whose streamed text
/// carries no marker.
fn assert_parsed(turn: &Turn, expected_labels: &[&str]) {
    let complete = turn.complete();
    assert!(complete.success, "{}", turn.summary());
    assert!(
        !turn.text.contains("SUGGESTED"),
        "marker leaked: {:?}",
        turn.text
    );
    assert_eq!(turn.text, complete.message);
    let labels: Vec<&str> = complete
        .suggested_values
        .iter()
        .map(|value| value.label.as_str())
        .collect();
    assert_eq!(labels, expected_labels, "{}", turn.summary());
}

#[tokio::test]
async fn turns_complete_without_the_parser_and_use_it_again_when_it_is_back() {
    let test = "turns_complete_without_the_parser_and_use_it_again_when_it_is_back";
    let Some(prerequisites) = gate::prerequisites(test).await else {
        return;
    };
    let options = StackOptions {
        runner_script: Some("slow-script.toml"),
        ..StackOptions::default()
    };
    Stack::start(&prerequisites, options)
        .await
        .run(async |stack| {
            let mut client = stack.client().await;
            let slow_labels = ["Run it again", "Something quick"];

            // With the sidecar up, it cleans the text: no fallback.
            let before = client
                .chat(request("", "Run the slow report", "tables_list"))
                .await;
            assert_parsed(&before, &slow_labels);
            assert!(
                !before.parser_fallback(),
                "{:?}",
                before.complete().diagnostics
            );
            let conversation = before.conversation_id.clone();

            // Killed after the first line reached the client, in the 3 s pause.
            let mut reader = client
                .open(request(
                    &conversation,
                    "Run the slow report again",
                    "tables_list",
                ))
                .await;
            assert!(
                reader.until_text("the first half is in.").await,
                "{}",
                reader.so_far().summary()
            );
            stack.kill(Service::Parser).await;
            let during = reader.finish().await;
            assert_parsed(&during, &slow_labels);
            assert!(
                during.parser_fallback(),
                "the turn the parser died in must say so: {:?}",
                during.complete().diagnostics
            );

            // While it is down, every turn falls back.
            let down = client
                .chat(request(&conversation, "Something quick", "tables_list"))
                .await;
            assert_parsed(&down, &["Slow report"]);
            assert!(down.parser_fallback(), "{:?}", down.complete().diagnostics);

            // Back up: the gateway reconnects and stops falling back.
            let took = stack.restart(Service::Parser).await;
            eprintln!("payload-parser SERVING again {took:?} after docker start");
            let started = Instant::now();
            let mut turns = 0;
            loop {
                turns += 1;
                let after = client
                    .chat(request(&conversation, "Something quick", "tables_list"))
                    .await;
                assert_parsed(&after, &["Slow report"]);
                if !after.parser_fallback() {
                    break;
                }
                assert!(
                    started.elapsed() < Duration::from_secs(15),
                    "still falling back {turns} turns after the parser came back: {:?}",
                    after.complete().diagnostics
                );
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            eprintln!("parser used again on turn {turns} after its restart");

            let stored = client.get_conversation(&conversation).await;
            assert_eq!(stored.messages.len(), 2 * (3 + turns));
        })
        .await;
}
