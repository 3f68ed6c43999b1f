//! The gateway's spans and metrics of a turn.
//!
//! A turn runs in a `turn` span (child of the `Chat` or `ExecuteAction`
//! server span) carrying the conversation and turn ids, so every log line of
//! the turn has them too. Its stages have spans of their own
//! (`store.load_history`, `prompt.build`, `store.finish_turn`); the calls to
//! the runner and the parser are CLIENT spans of the traced channels. No
//! message text or prompt goes on a span; the turn's token counts do
//! (`gen_ai.usage.*`), `parley_tokens_total` counts them by model and
//! `parley_cost_total` what they cost by tenant and model.

use parley_grpc::telemetry::{metrics, semconv as sc};
use parley_proto::{gateway::v1 as gw, parser::v1::Diagnostic};
use tracing::{Span, field::Empty};
use tracing_opentelemetry::OpenTelemetrySpanExt;

use super::{TurnSpec, outcome::Ending};

/// The span a turn runs in.
pub fn turn_span(spec: &TurnSpec) -> Span {
    tracing::info_span!(
        "turn",
        otel.name = "turn",
        { sc::GEN_AI_CONVERSATION_ID } = spec.start.conversation_id.as_str(),
        { sc::PARLEY_TURN_ID } = spec.turn_id.as_str(),
        { sc::PARLEY_PAGE } = spec.start.page.page.as_str(),
        { sc::PARLEY_TURN_OUTCOME } = Empty,
        { sc::ERROR_TYPE } = Empty,
        { sc::GEN_AI_USAGE_INPUT_TOKENS } = Empty,
        { sc::GEN_AI_USAGE_OUTPUT_TOKENS } = Empty,
        { sc::GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS } = Empty,
        { sc::GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS } = Empty,
    )
}

/// Records what an ended turn used on its `span` and counts it, once per
/// turn, in `parley_tokens_total` under the model that answered and, when
/// priced, in `parley_cost_total` under `tenant` too.
pub fn turn_usage(span: &Span, usage: &gw::Usage, tenant: Option<&str>) {
    span.record(sc::GEN_AI_USAGE_INPUT_TOKENS, usage.input_tokens);
    span.record(sc::GEN_AI_USAGE_OUTPUT_TOKENS, usage.output_tokens);
    span.record(
        sc::GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS,
        usage.cached_input_tokens,
    );
    span.record(
        sc::GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS,
        usage.cache_write_tokens,
    );
    metrics().count_tokens(
        &usage.model,
        &[
            ("input", usage.input_tokens),
            ("output", usage.output_tokens),
            ("cached_input", usage.cached_input_tokens),
            ("cache_write", usage.cache_write_tokens),
            ("reasoning", usage.reasoning_tokens),
        ],
    );
    if !usage.currency.is_empty() && usage.cost_micros > 0 {
        let m = metrics();
        let cost = crate::store::quota::Cost(usage.cost_micros.unsigned_abs());
        m.cost
            .with_label_values(&[
                m.tenant_label(tenant),
                m.models.admit(&usage.model),
                m.currencies.admit(&usage.currency),
            ])
            .inc_by(cost.units());
    }
}

/// Counts a turn of `tenant` (how it ended, its tokens, whether it was
/// abandoned) in the per-tenant metrics.
pub fn tenant_turn(tenant: Option<&str>, ending: &Ending, tokens: u64, abandoned: bool) {
    let m = metrics();
    let tenant = m.tenant_label(tenant);
    m.tenant_turns
        .with_label_values(&[tenant, ending.state().as_str()])
        .inc();
    m.tenant_tokens.with_label_values(&[tenant]).inc_by(tokens);
    if abandoned {
        m.tenant_abandoned.with_label_values(&[tenant]).inc();
    }
}

/// Records how the turn ended on `span` and in the metrics. The turn's
/// diagnostics count as this process's parses only when the in-process
/// parser answered (`fallback`); otherwise the sidecar counted them.
pub fn turn_ended(span: &Span, ending: &Ending, diagnostics: &[Diagnostic], fallback: bool) {
    let outcome = ending.state().as_str();
    let reason = ending
        .failure()
        .map_or("", |failure| failure.reason.as_str());
    span.record(sc::PARLEY_TURN_OUTCOME, outcome);
    if !reason.is_empty() {
        span.record(sc::ERROR_TYPE, reason);
        span.set_status(opentelemetry::trace::Status::error(reason.to_owned()));
    }
    let m = metrics();
    m.turns.with_label_values(&[outcome, reason]).inc();
    if fallback {
        for diagnostic in diagnostics {
            m.count_parser_diagnostic(diagnostic.kind);
        }
    }
}
