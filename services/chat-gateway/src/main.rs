//! `chat-gateway`: the Parley chat API.
//!
//! Reads the configuration (file, then flags and their environment
//! variables), validates it and the page registry before binding any port,
//! then serves until SIGTERM or Ctrl-C and drains within a bound. With no
//! flags and no file it forms the local stack: it listens on
//! 127.0.0.1:50051, uses the runner on 50052 and the parser on 50053, keeps
//! conversations in `parley.db` in the working directory, serves the example
//! registry and runs in dev auth. Metrics are served on `--metrics-listen`
//! (default 127.0.0.1:9464); spans go to the OTLP endpoint of the standard
//! `OTEL_*` variables, and are flushed at shutdown.

use std::path::PathBuf;

use anyhow::{Context, Result};
use chat_gateway::{
    app::Gateway,
    auth::Authenticator,
    config::{GatewayConfig, Overrides},
    registry::Registry,
};
use clap::Parser;
use parley_grpc::telemetry::{self, LogFormat, MetricsListen, TelemetryOptions};

/// Parley's chat gateway: streaming Chat API, conversations, pages, auth.
#[derive(Debug, Parser)]
#[command(name = "chat-gateway", version)]
struct Args {
    /// Configuration file (TOML; see deploy/config/gateway.toml).
    #[arg(long, env = "PARLEY_GATEWAY_CONFIG")]
    config: Option<PathBuf>,
    /// Address to listen on [default: 127.0.0.1:50051].
    #[arg(long, env = "PARLEY_LISTEN")]
    listen: Option<String>,
    /// Conversation store: sqlite://FILE?mode=rwc or postgres://... [default: sqlite://parley.db?mode=rwc].
    #[arg(long, env = "PARLEY_DATABASE_URL")]
    database_url: Option<String>,
    /// The agent-runner [default: http://127.0.0.1:50052].
    #[arg(long, env = "PARLEY_RUNNER_URL")]
    runner: Option<String>,
    /// The payload-parser sidecar [default: http://127.0.0.1:50053].
    #[arg(long, env = "PARLEY_PARSER_URL")]
    parser: Option<String>,
    /// The page registry (YAML) [default: the built-in example].
    #[arg(long, env = "PARLEY_REGISTRY")]
    registry: Option<PathBuf>,
    /// Dev auth: no token needed, every caller is user `dev`. Never in production.
    #[arg(long, env = "PARLEY_DEV_AUTH")]
    dev_auth: bool,
    /// Log format: json or text.
    #[arg(long, env = "PARLEY_LOG_FORMAT", default_value = "json")]
    log_format: LogFormat,
    /// Seconds running turns get to finish after SIGTERM [default: 20].
    #[arg(long, env = "PARLEY_DRAIN_TIMEOUT")]
    drain_timeout: Option<u64>,
    /// Turns running at once [default: 256].
    #[arg(long, env = "PARLEY_MAX_CONCURRENT_TURNS")]
    max_concurrent_turns: Option<usize>,
    /// Prometheus metrics at http://ADDR/metrics, or `off`.
    #[arg(long, env = "PARLEY_METRICS_LISTEN", default_value = "127.0.0.1:9464")]
    metrics_listen: MetricsListen,
}

#[tokio::main]
async fn main() -> Result<()> {
    let args = Args::parse();
    let options =
        TelemetryOptions::binary("chat-gateway", env!("CARGO_PKG_VERSION"), args.log_format);
    telemetry::run_main(options, run(args)).await
}

async fn run(args: Args) -> Result<()> {
    let mut config = match &args.config {
        Some(path) => GatewayConfig::load(path)?,
        None => GatewayConfig::default(),
    };
    config.apply(Overrides {
        listen: args.listen,
        database_url: args.database_url,
        runner_url: args.runner,
        parser_url: args.parser,
        registry: args.registry,
        drain_timeout_secs: args.drain_timeout,
        max_concurrent_turns: args.max_concurrent_turns,
        dev_auth: args.dev_auth,
    });
    config.validate()?;
    let registry = match &config.registry {
        Some(path) => Registry::load(path)?,
        None => Registry::example(),
    };
    tracing::info!(registry = registry.origin(), "page registry loaded");
    let auth = Authenticator::from_config(&config.auth, false)?;
    let addr = config.listen_addr()?;

    let gateway = Gateway::build(&config, registry, auth).await?;
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("cannot listen on {addr}"))?;
    args.metrics_listen
        .serve()
        .await
        .context("cannot open the metrics port (--metrics-listen)")?;
    gateway
        .serve(
            listener,
            config.drain_timeout(),
            parley_grpc::shutdown_signal(),
        )
        .await?;
    Ok(())
}
