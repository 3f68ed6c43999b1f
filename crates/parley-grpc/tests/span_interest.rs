//! The installed subscriber creates no span nobody records. Its own test
//! binary with one test: whether a callsite is wanted is cached per callsite
//! across every subscriber alive in the process, so beside other tests'
//! subscribers the answer would be theirs too.
//!
//! Without an OTLP endpoint and at `warn`, h2's trace-level spans around
//! every frame must not be created: creating and closing them costs about
//! 9.5 % of the gateway's CPU under load, and an unfiltered log-correlation
//! layer or an absent (`None`) OpenTelemetry layer would each want every
//! span.

use parley_grpc::telemetry::{self, LogFormat, TelemetryOptions, TraceSettings, semconv};

#[tokio::test]
async fn spans_below_the_log_level_are_not_created_when_tracing_is_off() {
    let settings = TraceSettings::from_env(|_| None).expect("no tracing settings");
    let options = TelemetryOptions {
        default_log_filter: "warn",
        ..TelemetryOptions::binary("test", "0", LogFormat::Json)
    };
    let _telemetry = telemetry::init_with(options, &settings).expect("installs");
    assert!(tracing::trace_span!("poll").is_disabled());
    assert!(tracing::debug_span!("frame").is_disabled());
    assert!(tracing::info_span!("store.load_history").is_disabled());
    // A span with the correlation ids is kept for the log lines inside it.
    let turn = tracing::info_span!("turn", { semconv::PARLEY_TURN_ID } = "t-1");
    assert!(!turn.is_disabled());
}
