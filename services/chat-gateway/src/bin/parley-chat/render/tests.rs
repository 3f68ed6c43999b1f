//! Tests of how `parley-chat` draws a proposal card and the usage footer.

use super::*;

fn partial(data: serde_json::Value, complete_paths: &[&str]) -> PayloadPartial {
    PayloadPartial {
        r#type: "schema_proposal".into(),
        data: Some(parley_proto::json::to_struct_wrapped(&data)),
        complete_paths: complete_paths.iter().map(|p| (*p).to_owned()).collect(),
        revision: 1,
        offset: 7,
        diagnostic: None,
    }
}

#[test]
fn a_card_grows_with_its_operations_and_offers_accept_once_whole() {
    let style = Style { plain: true };
    let growing = partial(
        serde_json::json!({"table_name": "Jobs", "operations": [{"action": "add", "column": {"name": "Company", "type": "te"}}]}),
        &["/table_name"],
    );
    assert_eq!(
        card_lines(&style, &growing),
        ["  ┌ schema proposal Jobs", "  │ + Company (te)", "  └ …"]
    );
    let whole = partial(
        serde_json::json!({"table_name": "Jobs", "operations": [{"action": "remove", "column_id": "c1"}]}),
        &[""],
    );
    assert_eq!(
        card_lines(&style, &whole),
        [
            "  ┌ schema proposal Jobs",
            "  │ - c1",
            "  └ [ Accept ] [ Dismiss ]"
        ]
    );
}

#[test]
fn a_data_card_shows_the_values_of_the_rows_it_adds_and_changes() {
    let style = Style { plain: true };
    let mut card = partial(
        serde_json::json!({"operations": [
            {"action": "add", "data": {"Company": "Acme", "Salary": 90000}},
            {"action": "update", "row_id": 7, "changes": {"Status": "Offer"}},
            {"action": "add", "data": {"Notes": "x".repeat(100)}}
        ]}),
        &[""],
    );
    card.r#type = "data_proposal".into();
    let lines = card_lines(&style, &card);
    assert_eq!(lines[1], "  │ + add row {Company: Acme, Salary: 90000}");
    assert_eq!(lines[2], "  │ ~ update row 7: {Status: Offer}");
    assert!(
        lines[3].ends_with("xxx…}") && lines[3].chars().count() < 100,
        "{}",
        lines[3]
    );
}

#[test]
fn the_footer_shows_cached_and_reasoning_tokens_only_when_there_are_any() {
    let mut usage = Usage {
        input_tokens: 4270,
        output_tokens: 333,
        model_calls: 2,
        model: "claude-sonnet-4-5".into(),
        cached_input_tokens: 3900,
        ..Usage::default()
    };
    assert_eq!(
        usage_line(&usage),
        "claude-sonnet-4-5 · 4270 in (3900 cached) / 333 out tokens · 2 model call(s)"
    );
    usage.cached_input_tokens = 0;
    usage.reasoning_tokens = 128;
    assert_eq!(
        usage_line(&usage),
        "claude-sonnet-4-5 · 4270 in / 333 out (128 reasoning) tokens · 2 model call(s)"
    );
    usage.cost_micros = 11_469;
    usage.currency = "USD".into();
    assert_eq!(
        usage_line(&usage),
        "claude-sonnet-4-5 · 4270 in / 333 out (128 reasoning) tokens · 2 model call(s) · 0.0114 USD"
    );
}

#[test]
fn costs_show_cents_or_the_digits_that_matter_below_one() {
    for (micros, text) in [
        (2_500_000, "2.50"),
        (12_345_678, "12.34"),
        (0, "0.00"),
        (11_469, "0.0114"),
        (125, "0.000125"),
        (1, "0.000001"),
        (150_000, "0.15"),
        (100_000, "0.10"),
    ] {
        assert_eq!(cost_text(micros), text, "{micros}");
    }
}
