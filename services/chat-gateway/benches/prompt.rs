//! Cost of the per-turn registry work on the gateway's hot path: resolving a
//! page and building its system prompt (the example registry's `table_view`
//! with a realistic UI state and payload history), and loading the registry
//! (start-up only).

use std::hint::black_box;

use chat_gateway::prompt::{Decision, HistoryPayload, PromptInput, build_system_prompt};
use chat_gateway::registry::{PageRef, Registry};
use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::json;

fn state() -> serde_json::Value {
    let text = include_str!("../tests/golden/table_view_state.json");
    serde_json::from_str(text).unwrap_or_default()
}

fn history() -> Vec<HistoryPayload> {
    (0..6)
        .map(|i| HistoryPayload {
            turn_index: i,
            payload_type: if i % 2 == 0 { "schema_proposal" } else { "data_proposal" }.into(),
            data: json!({"mode": "update", "reasoning": "tidy up", "operations": [{"action": "add"}, {"action": "update"}]}),
            decision: (i % 3 == 0).then_some(Decision::Accepted),
        })
        .collect()
}

fn bench(c: &mut Criterion) {
    let registry = Registry::example();
    let page = PageRef::new("table_view", "rows", "selection");
    let state = state();
    let history = history();

    c.bench_function("resolve_table_view_subtab", |b| {
        b.iter(|| black_box(registry.resolve(black_box(&page))))
    });
    c.bench_function("resolve_and_build_prompt_table_view", |b| {
        b.iter(|| {
            let resolved = registry.resolve(&page);
            let prompt = build_system_prompt(&PromptInput {
                registry: &registry,
                page: &resolved,
                stream_id: Some("sales-pipeline"),
                state: Some(&state),
                history_payloads: &history,
                response_schema: None,
                attachments: &[],
            });
            black_box(prompt)
        })
    });
    c.bench_function("build_prompt_table_view_no_state_no_history", |b| {
        let resolved = registry.resolve(&page);
        b.iter(|| {
            black_box(build_system_prompt(&PromptInput {
                registry: &registry,
                page: &resolved,
                stream_id: None,
                state: None,
                history_payloads: &[],
                response_schema: None,
                attachments: &[],
            }))
        })
    });
    c.bench_function("parse_profile_table_view", |b| {
        let resolved = registry.resolve(&page);
        b.iter(|| black_box(resolved.parse_profile()))
    });
    c.bench_function("load_example_registry", |b| {
        b.iter(|| black_box(Registry::example()))
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
