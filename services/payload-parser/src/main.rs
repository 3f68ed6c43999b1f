//! The `payload-parser` binary: parses its configuration, loads the named
//! profiles (a bad file stops it before any port is bound), then serves
//! `parley.parser.v1.PayloadParser` with health and reflection until SIGTERM,
//! draining in-flight calls within `--drain-timeout`, and flushes its spans.
//! Metrics are served on `--metrics-listen` (default 127.0.0.1:9466).

use std::{path::PathBuf, time::Duration};

use anyhow::{Context, bail};
use clap::Parser;
use parley_grpc::{
    ServeOptions,
    telemetry::{self, LogFormat, MetricsListen, TelemetryOptions},
};
use parley_proto::parser::v1::payload_parser_server::PayloadParserServer;
use payload_parser::{
    DEFAULT_MAX_BYTES, DEFAULT_MAX_DEPTH, HARD_MAX_BYTES, HARD_MAX_DEPTH, Limits, Profiles,
    service::{DEFAULT_PROFILE_CACHE, ParserService, ServiceOptions},
};
use tonic::server::NamedService;

/// Parley's payload parser: turns model text into typed messages.
#[derive(Debug, Parser)]
#[command(name = "payload-parser", version, about)]
struct Args {
    /// Address to listen on (HOST:PORT).
    #[arg(long, env = "PARLEY_LISTEN", default_value = "127.0.0.1:50053")]
    listen: String,
    /// JSON file of named profiles (`{"profiles": {"<name>": ParseProfile}}`).
    #[arg(long, env = "PARLEY_PARSER_PROFILES")]
    profiles: Option<PathBuf>,
    /// Largest text accepted, in bytes (a stream: the sum of its deltas).
    #[arg(long, env = "PARLEY_PARSER_MAX_BYTES", default_value_t = DEFAULT_MAX_BYTES)]
    max_bytes: usize,
    /// Deepest JSON nesting accepted in an element (1 to 127).
    #[arg(long, env = "PARLEY_PARSER_MAX_DEPTH", default_value_t = DEFAULT_MAX_DEPTH)]
    max_depth: usize,
    /// Longest time in-flight calls get to finish after SIGTERM (e.g. `20s`, `500ms`).
    #[arg(long, default_value = "20s", value_parser = parse_duration)]
    drain_timeout: Duration,
    /// Longest pause between two messages of a ParseStream call.
    #[arg(long, default_value = "120s", value_parser = parse_duration)]
    stream_idle_timeout: Duration,
    /// Longest lifetime of a ParseStream call.
    #[arg(long, default_value = "30m", value_parser = parse_duration)]
    stream_max_duration: Duration,
    /// Inline profiles kept compiled (callers such as the gateway send the
    /// same few profiles with every stream); 0 compiles each one.
    #[arg(long, env = "PARLEY_PARSER_PROFILE_CACHE", default_value_t = DEFAULT_PROFILE_CACHE)]
    profile_cache: usize,
    /// Log format: `json` or `text`.
    #[arg(long, env = "PARLEY_LOG_FORMAT", default_value = "json")]
    log_format: LogFormat,
    /// Prometheus metrics at http://ADDR/metrics, or `off`.
    #[arg(long, env = "PARLEY_METRICS_LISTEN", default_value = "127.0.0.1:9466")]
    metrics_listen: MetricsListen,
}

/// `250ms`, `20s`, `5m`, `1h`, or a bare number of seconds.
fn parse_duration(value: &str) -> Result<Duration, String> {
    let value = value.trim();
    let split = value
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(value.len());
    let (digits, unit) = value.split_at(split);
    let amount: u64 = digits
        .parse()
        .map_err(|_| format!("`{value}` is not a duration such as 20s or 500ms"))?;
    let seconds = |factor: u64| amount.checked_mul(factor).map(Duration::from_secs);
    match unit {
        "ms" => Some(Duration::from_millis(amount)),
        "" | "s" => Some(Duration::from_secs(amount)),
        "m" => seconds(60),
        "h" => seconds(3600),
        _ => None,
    }
    .ok_or_else(|| format!("`{value}` is not a duration such as 20s or 500ms"))
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let options =
        TelemetryOptions::binary("payload-parser", env!("CARGO_PKG_VERSION"), args.log_format);
    telemetry::run_main(options, run(args)).await
}

async fn run(args: Args) -> anyhow::Result<()> {
    if args.max_bytes == 0 || args.max_bytes > HARD_MAX_BYTES {
        bail!("--max-bytes must be between 1 and {HARD_MAX_BYTES}");
    }
    if args.max_depth == 0 || args.max_depth > HARD_MAX_DEPTH {
        bail!("--max-depth must be between 1 and {HARD_MAX_DEPTH}");
    }
    let limits = Limits {
        max_bytes: args.max_bytes,
        max_depth: args.max_depth,
    };
    let profiles = match &args.profiles {
        Some(path) => Profiles::load(path)
            .with_context(|| format!("loading profiles from {}", path.display()))?,
        None => Profiles::empty(),
    };
    tracing::info!(
        profiles = ?profiles.names().collect::<Vec<_>>(),
        max_bytes = limits.max_bytes,
        max_depth = limits.max_depth,
        "configuration loaded"
    );

    let listener = tokio::net::TcpListener::bind(&args.listen)
        .await
        .with_context(|| format!("binding {}", args.listen))?;
    args.metrics_listen
        .serve()
        .await
        .context("cannot open the metrics port (--metrics-listen)")?;
    let service = ParserService::with_options(
        profiles,
        limits,
        ServiceOptions {
            idle_timeout: args.stream_idle_timeout,
            max_stream_duration: args.stream_max_duration,
            profile_cache: args.profile_cache,
        },
    );
    let routes = tonic::service::Routes::new(service.into_server());
    let mut options = ServeOptions::new(
        "payload-parser",
        vec![<PayloadParserServer<ParserService> as NamedService>::NAME],
    );
    options.drain_timeout = args.drain_timeout;
    parley_grpc::serve(listener, routes, options, parley_grpc::shutdown_signal()).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse() {
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("20s"), Ok(Duration::from_secs(20)));
        assert_eq!(parse_duration("20"), Ok(Duration::from_secs(20)));
        assert_eq!(parse_duration("5m"), Ok(Duration::from_secs(300)));
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
        assert!(parse_duration("soon").is_err());
        assert!(parse_duration("5d").is_err());
    }

    #[test]
    fn arguments_have_the_documented_defaults() {
        // Only arguments without an environment variable, so the test does
        // not depend on the environment it runs in.
        let args = Args::try_parse_from(["payload-parser"]).expect("defaults parse");
        assert_eq!(args.drain_timeout, Duration::from_secs(20));
        assert_eq!(args.stream_idle_timeout, Duration::from_secs(120));
        assert_eq!(args.stream_max_duration, Duration::from_secs(1800));
        let args = Args::try_parse_from([
            "payload-parser",
            "--max-bytes",
            "42",
            "--drain-timeout",
            "1s",
        ])
        .expect("parses");
        assert_eq!(
            (args.max_bytes, args.drain_timeout),
            (42, Duration::from_secs(1))
        );
    }
}
