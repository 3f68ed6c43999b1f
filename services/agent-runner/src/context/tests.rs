use std::sync::Arc;

use serde_json::json;

use super::*;
use crate::provider::{Message, ToolCall, ToolResult};

fn window(tokens: u64) -> Window {
    Window {
        model: Arc::from("test-model"),
        tokens,
        counter: Counter::Estimate,
    }
}

/// `turns` earlier turns of a user message and an answer of `bytes` bytes
/// each, then the turn's own message.
fn conversation(turns: usize, bytes: usize) -> Arc<[Message]> {
    let mut messages = Vec::new();
    for n in 0..turns {
        messages.push(Message::user(format!("question {n}")));
        messages.push(Message::Assistant {
            reasoning: Vec::new(),
            text: format!("answer {n} {}", "x".repeat(bytes)),
            tool_calls: Vec::new(),
        });
    }
    messages.push(Message::user("the new question"));
    messages.into()
}

fn users(messages: &[Message]) -> Vec<String> {
    messages
        .iter()
        .filter_map(|m| match m {
            Message::User { text, .. } => Some(text.clone()),
            _ => None,
        })
        .collect()
}

#[test]
fn a_history_that_fits_in_bytes_is_sent_whole_and_not_counted() {
    let messages = conversation(10, 100);
    let fitted = fit(&messages, "system", &[], None, &window(100_000), 1.0);
    assert!(Arc::ptr_eq(&fitted.messages, &messages));
    assert_eq!((fitted.turns_left_out, fitted.counted), (0, None));
}

#[test]
fn the_oldest_turns_go_first_and_the_new_message_always_stays() {
    // 100 turns of about 3 000 bytes (about 1 000 estimated tokens each)
    // into a window that holds the answer's 4 096 tokens and about ten turns.
    let messages = conversation(100, 3_000);
    let fitted = fit(&messages, "be brief", &[], None, &window(16_000), 1.0);
    let kept = users(&fitted.messages);
    assert_eq!(kept.last().map(String::as_str), Some("the new question"));
    assert!(
        (8..=12).contains(&(kept.len() - 1)),
        "about ten earlier turns: {kept:?}"
    );
    assert_eq!(fitted.turns_left_out as usize, 100 - (kept.len() - 1));
    // The newest ones, whole: a user message first, answers after theirs.
    assert_eq!(kept[0], format!("question {}", 100 - (kept.len() - 1)));
    assert!(matches!(fitted.messages[0], Message::User { .. }));
    let counted = fitted.counted.expect("counted");
    assert!(counted <= 16_000 - 800 - 4_096, "{counted}");
    // A window too small for even the new message sends it alone.
    let fitted = fit(&messages, "be brief", &[], Some(100), &window(10), 1.0);
    assert_eq!(users(&fitted.messages), ["the new question"]);
    assert_eq!(fitted.turns_left_out, 100);
}

#[test]
fn the_turns_own_tool_rounds_are_never_cut_and_a_calibration_shrinks_the_room() {
    let mut messages: Vec<Message> = conversation(20, 3_000).to_vec();
    messages.push(Message::Assistant {
        reasoning: Vec::new(),
        text: String::new(),
        tool_calls: vec![ToolCall {
            id: "c1".into(),
            name: "lookup".into(),
            input: json!({"q": "y".repeat(6_000)}),
            provider_data: None,
        }],
    });
    messages.push(Message::ToolResults(vec![ToolResult {
        call_id: "c1".into(),
        name: "lookup".into(),
        text: "z".repeat(6_000),
        is_error: false,
        attachments: Vec::new(),
    }]));
    let messages: Arc<[Message]> = messages.into();
    let fitted = fit(&messages, "", &[], Some(1_000), &window(12_000), 1.0);
    let n = fitted.messages.len();
    assert!(matches!(fitted.messages[n - 1], Message::ToolResults(_)));
    assert!(matches!(fitted.messages[n - 2], Message::Assistant { .. }));
    let plain = fitted.turns_left_out;
    assert!(plain > 0);
    // Counts found to be twice too low leave more out.
    let doubled = fit(&messages, "", &[], Some(1_000), &window(12_000), 2.0);
    assert!(
        doubled.turns_left_out > plain,
        "{} > {plain}",
        doubled.turns_left_out
    );
}

#[test]
fn openai_models_are_counted_with_their_encoding_and_known_models_have_windows() {
    let counter = Counter::of("openai", "gpt-4o");
    assert!(matches!(counter, Counter::Encoding(_)));
    assert_eq!(counter.count("hello world"), 2);
    assert!(matches!(
        Counter::of("anthropic", "claude-sonnet-4"),
        Counter::Estimate
    ));
    assert!(matches!(Counter::of("openai", "llama3"), Counter::Estimate));
    assert_eq!(default_window("openai", "gpt-4o"), Some(128_000));
    assert_eq!(
        default_window("anthropic", "claude-sonnet-4-5"),
        Some(200_000)
    );
    assert_eq!(
        default_window("gcp.gemini", "gemini-2.5-flash"),
        Some(1_048_576)
    );
    assert_eq!(default_window("parley.scripted", "scripted-demo"), None);
    assert_eq!(default_window("openai", "llama3"), None);
}

#[test]
fn the_calibration_learns_the_ratio_of_reported_to_counted_tokens_within_bounds() {
    let calibration = Calibration::default();
    let model: Arc<str> = Arc::from("m");
    assert_eq!(calibration.factor("m"), 1.0);
    calibration.learn(&model, 1_000, 1_500);
    assert!((calibration.factor("m") - 1.5).abs() < 1e-9);
    // The next count was scaled by 1.5: 3 000 counted is 2 000 raw.
    calibration.learn(&model, 3_000, 2_000);
    assert!((calibration.factor("m") - 1.0).abs() < 1e-9);
    calibration.learn(&model, 1_000, 100_000);
    assert_eq!(calibration.factor("m"), 3.0);
    calibration.learn(&model, 0, 10);
    assert_eq!(calibration.factor("m"), 3.0);
}
