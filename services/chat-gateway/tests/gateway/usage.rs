//! What turns used, through the gateway: every count the runner reports
//! (cache reads and writes, reasoning) in `complete.usage`, in each stored
//! turn and the conversation's total of `GetConversation`, and in
//! `parley_tokens_total`; what they cost, in `parley_cost_total` too.

use parley_proto::{
    gateway::v1 as gw,
    runner::v1::{self as runner, run_event::Event},
};

use crate::harness::{
    Harness, Options, chat, chat_request,
    fake_runner::{Reply, Step},
};

/// The model the fake runner names: this file's own metric label.
const MODEL: &str = "usage-test-model";

fn usage(
    input: u64,
    cached: u64,
    written: u64,
    output: u64,
    reasoning: u64,
    cost_micros: i64,
) -> runner::Usage {
    runner::Usage {
        cost_micros,
        currency: "USD".into(),
        input_tokens: input,
        output_tokens: output,
        cached_input_tokens: cached,
        cache_write_tokens: written,
        reasoning_tokens: reasoning,
        model: Some(runner::ModelRef {
            provider: "anthropic".into(),
            model: MODEL.into(),
            parameters: None,
        }),
    }
}

/// A turn of three model calls with `calls`' usage, then the runner's
/// total of them.
fn three_calls(text: &str, calls: [runner::Usage; 3]) -> Reply {
    let mut total = runner::Usage::default();
    let mut steps = Vec::new();
    for call in calls {
        total.input_tokens += call.input_tokens;
        total.output_tokens += call.output_tokens;
        total.cached_input_tokens += call.cached_input_tokens;
        total.cache_write_tokens += call.cache_write_tokens;
        total.reasoning_tokens += call.reasoning_tokens;
        total.cost_micros += call.cost_micros;
        total.currency.clone_from(&call.currency);
        steps.push(Step::Send(Event::Usage(call)));
    }
    steps.push(Step::Send(Event::TextDelta(text.into())));
    steps.push(Step::Send(Event::Finished(Box::new(runner::Finished {
        stop_reason: runner::StopReason::EndTurn as i32,
        raw_stop_reason: "end_turn".into(),
        text: text.into(),
        structured: None,
        usage: Some(total),
        iterations: 3,
        response_model: MODEL.into(),
        response_id: "resp_usage".into(),
        history_turns_left_out: 0,
    }))));
    Reply::Steps(steps)
}

/// `parley_cost_total` of this file's model, in USD.
fn cost() -> f64 {
    parley_grpc::telemetry::metrics()
        .cost
        .with_label_values(&["", MODEL, "USD"])
        .get()
}

fn tokens(kind: &str) -> u64 {
    parley_grpc::telemetry::metrics()
        .tokens
        .with_label_values(&[MODEL, kind])
        .get()
}

#[tokio::test]
async fn cache_and_reasoning_tokens_reach_complete_the_stored_turns_the_total_and_the_metric() {
    let mut stack = Harness::start(Options::default()).await;
    let kinds = [
        "input",
        "output",
        "cached_input",
        "cache_write",
        "reasoning",
    ];
    let before: Vec<u64> = kinds.iter().map(|kind| tokens(kind)).collect();
    let cost_before = cost();

    stack.runner.push(three_calls(
        "First answer.",
        [
            usage(2012, 0, 2000, 40, 16, 8_136),
            usage(2090, 2000, 60, 35, 8, 1_440),
            usage(2085, 2060, 0, 80, 0, 1_893),
        ],
    ));
    let first = chat(
        &mut stack.client,
        chat_request("", "What time is it?", "tables_list"),
    )
    .await;
    let first_usage = gw::Usage {
        input_tokens: 6187,
        output_tokens: 155,
        model_calls: 3,
        model: MODEL.into(),
        cached_input_tokens: 4060,
        cache_write_tokens: 2060,
        reasoning_tokens: 24,
        cost_micros: 11_469,
        currency: "USD".into(),
    };
    assert!(first.complete.success);
    assert_eq!(first.complete.usage.as_ref(), Some(&first_usage));

    let conversation_id = first.conversation_id();
    stack.runner.push(three_calls(
        "Second answer.",
        [
            usage(2100, 2060, 0, 20, 4, 1_000),
            usage(2120, 2100, 0, 25, 0, 1_100),
            usage(2150, 2100, 40, 30, 2, 1_200),
        ],
    ));
    let second = chat(
        &mut stack.client,
        chat_request(&conversation_id, "And now?", "tables_list"),
    )
    .await;
    let second_usage = gw::Usage {
        input_tokens: 6370,
        output_tokens: 75,
        model_calls: 3,
        model: MODEL.into(),
        cached_input_tokens: 6260,
        cache_write_tokens: 40,
        reasoning_tokens: 6,
        cost_micros: 3_300,
        currency: "USD".into(),
    };
    assert_eq!(second.complete.usage.as_ref(), Some(&second_usage));

    let stored = stack
        .client
        .get_conversation(gw::GetConversationRequest {
            conversation_id: conversation_id.clone(),
            ..Default::default()
        })
        .await
        .expect("get")
        .into_inner();
    let answers: Vec<Option<&gw::Usage>> = stored
        .messages
        .iter()
        .filter(|m| m.role == gw::MessageRole::Assistant as i32)
        .map(|m| m.usage.as_ref())
        .collect();
    assert_eq!(answers, [Some(&first_usage), Some(&second_usage)]);
    assert!(
        stored
            .messages
            .iter()
            .filter(|m| m.role == gw::MessageRole::User as i32)
            .all(|m| m.usage.is_none()),
        "usage is the answer's"
    );
    assert_eq!(
        stored.usage,
        Some(gw::Usage {
            input_tokens: 6187 + 6370,
            output_tokens: 155 + 75,
            model_calls: 6,
            model: String::new(),
            cached_input_tokens: 4060 + 6260,
            cache_write_tokens: 2060 + 40,
            reasoning_tokens: 24 + 6,
            cost_micros: 11_469 + 3_300,
            currency: "USD".into(),
        }),
        "the conversation's total covers both turns"
    );

    // A page of one turn still carries the whole conversation's total.
    let last_page = stack
        .client
        .get_conversation(gw::GetConversationRequest {
            conversation_id,
            page_size: 1,
            ..Default::default()
        })
        .await
        .expect("get a page")
        .into_inner();
    assert_eq!(last_page.messages.len(), 2, "one turn");
    assert_eq!(last_page.usage, stored.usage);

    let counted: Vec<u64> = kinds
        .iter()
        .zip(&before)
        .map(|(kind, before)| tokens(kind) - before)
        .collect();
    assert_eq!(
        counted,
        [6187 + 6370, 155 + 75, 4060 + 6260, 2060 + 40, 24 + 6],
        "parley_tokens_total by kind: {kinds:?}"
    );
    let spent = cost() - cost_before;
    assert!(
        (spent - 0.014_769).abs() < 1e-9,
        "parley_cost_total counts both turns in USD: {spent}"
    );
}
