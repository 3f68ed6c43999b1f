//! The metrics every Parley process can record, as one Prometheus registry.
//!
//! Why the `prometheus` crate: it is the long-maintained Rust client (TiKV),
//! with default features off it adds no transitive crates beyond what the
//! workspace already has, and its text encoder is the exposition format
//! Prometheus scrapes. Metrics are always recorded (a few atomic adds per
//! call, whether or not anyone scrapes); [`super::admin`] serves them.
//! A family with no observations renders nothing, so each binary shows only
//! what it does. Names follow [`super::semconv`].

use std::{
    collections::HashSet,
    sync::{Mutex, OnceLock, PoisonError},
};

use parley_proto::parser::v1::DiagnosticKind;
use prometheus::{
    CounterVec, HistogramOpts, HistogramVec, IntCounterVec, IntGaugeVec, Opts, Registry,
};

use super::semconv as sc;

/// Seconds buckets of the OTel RPC and GenAI duration advice.
const SECONDS: &[f64] = &[
    0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.48, 40.96,
    81.92,
];
/// Token buckets of the `gen_ai.client.token.usage` advice.
const TOKENS: &[f64] = &[
    1.0, 4.0, 16.0, 64.0, 256.0, 1024.0, 4096.0, 16384.0, 65536.0, 262144.0, 1048576.0, 4194304.0,
    16777216.0, 67108864.0,
];

/// Distinct values a capped label may take before the rest become `_OTHER`.
pub const MAX_LABEL_VALUES: usize = 200;

/// Bounds a label whose values callers choose (model names, tool names):
/// the first [`MAX_LABEL_VALUES`] distinct values are kept, later new ones
/// are reported as `_OTHER`, so no client can grow the registry without end.
#[derive(Debug, Default)]
pub struct LabelCap {
    seen: Mutex<HashSet<String>>,
}

impl LabelCap {
    /// `value`, or `_OTHER` once the cap is reached by other values.
    pub fn admit<'a>(&self, value: &'a str) -> &'a str {
        let mut seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        if seen.contains(value) || (seen.len() < MAX_LABEL_VALUES && seen.insert(value.to_owned()))
        {
            value
        } else {
            sc::OTHER
        }
    }
}

/// Every metric family.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    /// Incoming call duration, by method and status.
    pub rpc_server_duration: HistogramVec,
    /// Outgoing call duration, by method, status and server.
    pub rpc_client_duration: HistogramVec,
    /// Incoming calls still running, by method.
    pub rpc_active: IntGaugeVec,
    /// Turns, by outcome and reason.
    pub turns: IntCounterVec,
    /// Tokens per model call, by operation, provider, model and token type.
    pub token_usage: HistogramVec,
    /// Model call duration, by operation, provider, model and error type.
    pub operation_duration: HistogramVec,
    /// Time to the first streamed chunk, by operation, provider and model.
    pub time_to_first_chunk: HistogramVec,
    /// Tool call duration, by tool and outcome.
    pub tool_duration: HistogramVec,
    /// Model call retries, by provider and reason.
    pub retries: IntCounterVec,
    /// Fallbacks to the next model, by the provider left and the reason.
    pub fallbacks: IntCounterVec,
    /// Parse diagnostics, by kind.
    pub parser_diagnostics: IntCounterVec,
    /// The gateway's turns, by tenant and outcome.
    pub tenant_turns: IntCounterVec,
    /// The gateway's turns' tokens, by tenant.
    pub tenant_tokens: IntCounterVec,
    /// The gateway's turns' tokens, by the model that answered and kind.
    pub tokens: IntCounterVec,
    /// The gateway's turns' cost in currency units, by tenant, the model
    /// that answered and the currency.
    pub cost: CounterVec,
    /// The runner's calls to models without a price, by provider and model.
    pub unpriced_calls: IntCounterVec,
    /// Turns refused before they started, by tenant and reason.
    pub tenant_rejected: IntCounterVec,
    /// Turns cancelled because nobody followed them, by tenant.
    pub tenant_abandoned: IntCounterVec,
    /// Users' decisions on proposal cards, by payload type and decision.
    pub payload_decisions: IntCounterVec,
    /// Users' ratings of turns, by page and rating.
    pub feedback: IntCounterVec,
    /// Each configured MCP server: 1 when ready, 0 when starting or down.
    pub mcp_server_up: IntGaugeVec,
    /// Attempts to start or connect an MCP server, by server and outcome
    /// (`ready` or `failed`).
    pub mcp_server_connects: IntCounterVec,
    /// The runner's requests to a provider, by configured provider, API
    /// key name and outcome.
    pub provider_key_requests: IntCounterVec,
    /// Times a provider's API key was set aside, by configured provider,
    /// API key name and reason (`rate_limited`, `rejected`).
    pub provider_key_cooldowns: IntCounterVec,
    /// Caps the tenant label values.
    pub tenants: LabelCap,
    /// Caps the model label values.
    pub models: LabelCap,
    /// Caps the tool label values.
    pub tools: LabelCap,
    /// Caps the currency label values.
    pub currencies: LabelCap,
}

fn histogram(
    registry: &Registry,
    name: &str,
    help: &str,
    buckets: &[f64],
    labels: &[&str],
) -> HistogramVec {
    let vec = HistogramVec::new(
        HistogramOpts::new(name, help).buckets(buckets.to_vec()),
        labels,
    )
    .expect("metric definitions are constants");
    registry
        .register(Box::new(vec.clone()))
        .expect("metric names are unique");
    vec
}

fn counter(registry: &Registry, name: &str, help: &str, labels: &[&str]) -> IntCounterVec {
    let vec = IntCounterVec::new(Opts::new(name, help), labels)
        .expect("metric definitions are constants");
    registry
        .register(Box::new(vec.clone()))
        .expect("metric names are unique");
    vec
}

impl Metrics {
    fn new() -> Self {
        let registry = Registry::new();
        let r = &registry;
        let rpc_active = IntGaugeVec::new(
            Opts::new(
                sc::METRIC_RPC_ACTIVE,
                "Incoming RPCs still running (open streams).",
            ),
            &[sc::LABEL_RPC_METHOD],
        )
        .expect("metric definitions are constants");
        registry
            .register(Box::new(rpc_active.clone()))
            .expect("metric names are unique");
        // Labelled by the servers of the runner's configuration only, so
        // bounded without a cap.
        let mcp_server_up = IntGaugeVec::new(
            Opts::new(
                sc::METRIC_MCP_SERVER_UP,
                "Whether each configured MCP server is ready (1) or starting or down (0).",
            ),
            &[sc::LABEL_MCP_SERVER],
        )
        .expect("metric definitions are constants");
        registry
            .register(Box::new(mcp_server_up.clone()))
            .expect("metric names are unique");
        let model = [sc::LABEL_OPERATION, sc::LABEL_PROVIDER, sc::LABEL_MODEL];
        Self {
            rpc_server_duration: histogram(
                r,
                sc::METRIC_RPC_SERVER_DURATION,
                "Duration of incoming RPCs (to the end of the response stream).",
                SECONDS,
                &[sc::LABEL_RPC_METHOD, sc::LABEL_RPC_STATUS],
            ),
            rpc_client_duration: histogram(
                r,
                sc::METRIC_RPC_CLIENT_DURATION,
                "Duration of outgoing RPCs (to the end of the response stream).",
                SECONDS,
                &[
                    sc::LABEL_RPC_METHOD,
                    sc::LABEL_RPC_STATUS,
                    sc::LABEL_SERVER_ADDRESS,
                ],
            ),
            rpc_active,
            turns: counter(
                r,
                sc::METRIC_TURNS,
                "Turns by how they ended (completed, failed, cancelled) and the failure reason.",
                &[sc::LABEL_OUTCOME, sc::LABEL_REASON],
            ),
            token_usage: histogram(
                r,
                sc::METRIC_TOKEN_USAGE,
                "Tokens used per model call (gen_ai.client.token.usage).",
                TOKENS,
                &[model[0], model[1], model[2], sc::LABEL_TOKEN_TYPE],
            ),
            operation_duration: histogram(
                r,
                sc::METRIC_OPERATION_DURATION,
                "Duration of model calls (gen_ai.client.operation.duration).",
                SECONDS,
                &[model[0], model[1], model[2], sc::LABEL_ERROR_TYPE],
            ),
            time_to_first_chunk: histogram(
                r,
                sc::METRIC_TIME_TO_FIRST_CHUNK,
                "Time from sending a model request to its first streamed chunk.",
                SECONDS,
                &model,
            ),
            tool_duration: histogram(
                r,
                sc::METRIC_TOOL_DURATION,
                "Duration of tool calls by tool and outcome (ok or the failure reason).",
                SECONDS,
                &[sc::LABEL_TOOL, sc::LABEL_OUTCOME],
            ),
            retries: counter(
                r,
                sc::METRIC_RETRIES,
                "Model call attempts retried, by provider and reason.",
                &[sc::LABEL_PROVIDER, sc::LABEL_REASON],
            ),
            fallbacks: counter(
                r,
                sc::METRIC_FALLBACKS,
                "Falls back to the next model, by the provider that failed and the reason.",
                &[sc::LABEL_PROVIDER, sc::LABEL_REASON],
            ),
            parser_diagnostics: counter(
                r,
                sc::METRIC_PARSER_DIAGNOSTICS,
                "Diagnostics of the parses this process made, by kind.",
                &[sc::LABEL_KIND],
            ),
            tenant_turns: counter(
                r,
                sc::METRIC_TENANT_TURNS,
                "The gateway's turns by the caller's tenant (empty: none) and how they ended.",
                &[sc::LABEL_TENANT, sc::LABEL_OUTCOME],
            ),
            tenant_tokens: counter(
                r,
                sc::METRIC_TENANT_TOKENS,
                "Input + output tokens of the gateway's turns, by the caller's tenant.",
                &[sc::LABEL_TENANT],
            ),
            tokens: counter(
                r,
                sc::METRIC_TOKENS,
                "Tokens of the gateway's turns, by the model that answered and the kind: input and output, \
                 and the parts of them cached_input, cache_write (of input) and reasoning (of output).",
                &[sc::LABEL_TURN_MODEL, sc::LABEL_KIND],
            ),
            cost: {
                let vec = CounterVec::new(
                    Opts::new(
                        sc::METRIC_COST,
                        "What the gateway's turns cost, in units of the currency, by the caller's tenant \
                         and the model that answered (the runner's prices).",
                    ),
                    &[sc::LABEL_TENANT, sc::LABEL_TURN_MODEL, sc::LABEL_CURRENCY],
                )
                .expect("metric definitions are constants");
                r.register(Box::new(vec.clone()))
                    .expect("metric names are unique");
                vec
            },
            unpriced_calls: counter(
                r,
                sc::METRIC_UNPRICED_CALLS,
                "Model calls to a model no route prices (they cost 0), by provider and model.",
                &[sc::LABEL_PROVIDER, sc::LABEL_MODEL],
            ),
            tenant_rejected: counter(
                r,
                sc::METRIC_TENANT_REJECTED,
                "Turns refused before they started, by the caller's tenant and the reason.",
                &[sc::LABEL_TENANT, sc::LABEL_REASON],
            ),
            tenant_abandoned: counter(
                r,
                sc::METRIC_TENANT_ABANDONED,
                "Turns cancelled after abandoned_turn_grace without anyone following them, by tenant.",
                &[sc::LABEL_TENANT],
            ),
            payload_decisions: counter(
                r,
                sc::METRIC_PAYLOAD_DECISIONS,
                "Users' decisions on proposal cards (RecordPayloadDecision), by payload type and decision.",
                &[sc::LABEL_PAYLOAD_TYPE, sc::LABEL_DECISION],
            ),
            feedback: counter(
                r,
                sc::METRIC_FEEDBACK,
                "Users' ratings of turns (SubmitFeedback), by the turn's page and the rating.",
                &[sc::LABEL_PAGE, sc::LABEL_RATING],
            ),
            mcp_server_up,
            mcp_server_connects: counter(
                r,
                sc::METRIC_MCP_SERVER_CONNECTS,
                "Attempts to start or connect each configured MCP server, by outcome (ready or failed).",
                &[sc::LABEL_MCP_SERVER, sc::LABEL_OUTCOME],
            ),
            // Labelled by configured providers and key names only.
            provider_key_requests: counter(
                r,
                sc::METRIC_PROVIDER_KEY_REQUESTS,
                "Requests to each configured provider by the name of the API key sent (its variable or file \
                 name) and the outcome (ok, rate_limited, rejected, error).",
                &[
                    sc::LABEL_CONFIGURED_PROVIDER,
                    sc::LABEL_PROVIDER_KEY,
                    sc::LABEL_OUTCOME,
                ],
            ),
            provider_key_cooldowns: counter(
                r,
                sc::METRIC_PROVIDER_KEY_COOLDOWNS,
                "Times an API key was set aside: rate_limited (cooling down for the provider's retry-after \
                 or 30 s) or rejected (until SIGHUP reads it again or the runner restarts).",
                &[
                    sc::LABEL_CONFIGURED_PROVIDER,
                    sc::LABEL_PROVIDER_KEY,
                    sc::LABEL_REASON,
                ],
            ),
            models: LabelCap::default(),
            tools: LabelCap::default(),
            currencies: LabelCap::default(),
            tenants: LabelCap::default(),
            registry,
        }
    }

    /// Counts one parse diagnostic in `parser_diagnostics`, labelled by its
    /// kind without the enum prefix (`INVALID_JSON`, `PARSER_FALLBACK`...;
    /// `_OTHER` for a value this build does not know).
    pub fn count_parser_diagnostic(&self, kind: i32) {
        self.parser_diagnostics
            .with_label_values(&[diagnostic_kind_label(kind)])
            .inc();
    }

    /// Counts a turn's tokens in `tokens`: each `(kind, count)` under the
    /// model that answered (capped); kinds with no tokens add nothing.
    pub fn count_tokens(&self, model: &str, counts: &[(&str, u64)]) {
        let model = self.models.admit(model);
        for &(kind, count) in counts {
            if count > 0 {
                self.tokens.with_label_values(&[model, kind]).inc_by(count);
            }
        }
    }

    /// The tenant label of `tenant` (empty without one), capped.
    pub fn tenant_label<'a>(&self, tenant: Option<&'a str>) -> &'a str {
        self.tenants.admit(tenant.unwrap_or_default())
    }

    /// The Prometheus text exposition of every family observed so far.
    pub fn render(&self) -> String {
        let mut text = String::new();
        if let Err(error) =
            prometheus::TextEncoder::new().encode_utf8(&self.registry.gather(), &mut text)
        {
            tracing::warn!(%error, "cannot encode metrics");
        }
        text
    }
}

/// A diagnostic kind as a label: `DIAGNOSTIC_KIND_INVALID_JSON` → `INVALID_JSON`.
fn diagnostic_kind_label(kind: i32) -> &'static str {
    DiagnosticKind::try_from(kind)
        .map(|kind| {
            let name = kind.as_str_name();
            name.strip_prefix("DIAGNOSTIC_KIND_").unwrap_or(name)
        })
        .unwrap_or(sc::OTHER)
}

/// The process's metrics.
pub fn metrics() -> &'static Metrics {
    static METRICS: OnceLock<Metrics> = OnceLock::new();
    METRICS.get_or_init(Metrics::new)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capped_labels_stop_growing() {
        let cap = LabelCap::default();
        for n in 0..MAX_LABEL_VALUES {
            assert_eq!(cap.admit(&format!("model-{n}")), format!("model-{n}"));
        }
        assert_eq!(cap.admit("model-0"), "model-0");
        assert_eq!(cap.admit("one-too-many"), "_OTHER");
    }

    #[test]
    fn diagnostic_kinds_are_short_labels() {
        assert_eq!(
            diagnostic_kind_label(DiagnosticKind::ParserFallback as i32),
            "PARSER_FALLBACK"
        );
        assert_eq!(diagnostic_kind_label(9999), "_OTHER");
    }

    #[test]
    fn observed_families_render_as_prometheus_text() {
        let m = metrics();
        m.turns
            .with_label_values(&["failed", "RUNNER_UNAVAILABLE"])
            .inc();
        m.token_usage
            .with_label_values(&["chat", "openai", "gpt-4.1", "input"])
            .observe(120.0);
        let text = m.render();
        assert!(
            text.contains("parley_turns_total{outcome=\"failed\",reason=\"RUNNER_UNAVAILABLE\"}"),
            "{text}"
        );
        assert!(
            text.contains("# TYPE gen_ai_client_token_usage histogram"),
            "{text}"
        );
        assert!(text.contains("gen_ai_token_type=\"input\""), "{text}");
    }
}
