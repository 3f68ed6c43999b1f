//! `chat-gateway`: the Parley chat API.
//!
//! Reads the configuration (defaults, file, `PARLEY_<SECTION>__<KEY>`
//! variables, flags: see [`parley_grpc::config`]), validates it and the page registry before binding any port,
//! then serves until SIGTERM or Ctrl-C and drains within a bound. With no
//! flags and no file it forms the local stack: it listens on
//! 127.0.0.1:50051, uses the runner on 50052 and the parser on 50053, keeps
//! conversations in `parley.db` in the working directory, serves the example
//! registry and runs in dev auth. Metrics are served on
//! `server.metrics_listen` (default 127.0.0.1:9464); spans go to the OTLP endpoint of the standard
//! `OTEL_*` variables, and are flushed at shutdown.

use std::{path::PathBuf, time::Duration};

use anyhow::{Context, Result};
use chat_gateway::{
    app::Gateway,
    auth::Authenticator,
    config::{Flags, GatewayConfig},
    registry::Registry,
};
use clap::Parser;
use parley_grpc::{
    config::{help_footer, parse_duration},
    telemetry::{self, LogFormat, TelemetryOptions},
};

/// Parley's chat gateway: streaming Chat API, conversations, pages, auth.
#[derive(Debug, Parser)]
#[command(
    name = "chat-gateway",
    version,
    after_help = "`--help` also prints every configuration key with its default.",
    after_long_help = help_footer("deploy/config/gateway.toml", &GatewayConfig::default())
)]
struct Args {
    /// Configuration file (TOML; see deploy/config/gateway.toml).
    #[arg(long, env = "PARLEY_GATEWAY_CONFIG")]
    config: Option<PathBuf>,
    /// Address to listen on: server.listen.
    #[arg(long, env = "PARLEY_LISTEN")]
    listen: Option<String>,
    /// Prometheus metrics at http://ADDR/metrics, or `off`: server.metrics_listen.
    #[arg(long, env = "PARLEY_METRICS_LISTEN")]
    metrics_listen: Option<String>,
    /// Time running turns get to finish after SIGTERM (`20s`): server.drain_timeout.
    #[arg(long, env = "PARLEY_DRAIN_TIMEOUT", value_parser = parse_duration)]
    drain_timeout: Option<Duration>,
    /// Conversation store, sqlite://FILE?mode=rwc or postgres://...: store.database_url.
    #[arg(long, env = "PARLEY_DATABASE_URL")]
    database_url: Option<String>,
    /// The agent-runner: upstream.runner_url.
    #[arg(long, env = "PARLEY_RUNNER_URL")]
    runner: Option<String>,
    /// The payload-parser sidecar: upstream.parser_url.
    #[arg(long, env = "PARLEY_PARSER_URL")]
    parser: Option<String>,
    /// The page registry (YAML); unset serves the built-in example: registry.
    #[arg(long, env = "PARLEY_REGISTRY")]
    registry: Option<PathBuf>,
    /// Turns running at once: turns.max_concurrent.
    #[arg(long, env = "PARLEY_MAX_CONCURRENT_TURNS")]
    max_concurrent_turns: Option<usize>,
    /// Dev auth: no token needed, every caller is user `dev`. Never in production.
    #[arg(long, env = "PARLEY_DEV_AUTH")]
    dev_auth: bool,
    /// Log format: json or text.
    #[arg(long, env = "PARLEY_LOG_FORMAT", default_value = "json")]
    log_format: LogFormat,
    /// Print the configuration these layers give (TOML, secrets left out) and exit.
    #[arg(long)]
    print_config: bool,
}

#[tokio::main]
async fn main() -> Result<()> {
    let args = Args::parse();
    let options =
        TelemetryOptions::binary("chat-gateway", env!("CARGO_PKG_VERSION"), args.log_format);
    telemetry::run_main(options, run(args)).await
}

async fn run(args: Args) -> Result<()> {
    let config = GatewayConfig::load(
        args.config.as_deref(),
        std::env::vars(),
        Flags {
            listen: args.listen,
            metrics_listen: args.metrics_listen,
            drain_timeout: args.drain_timeout,
            database_url: args.database_url,
            runner_url: args.runner,
            parser_url: args.parser,
            registry: args.registry,
            max_concurrent_turns: args.max_concurrent_turns,
            dev_auth: args.dev_auth,
        },
    )?;
    if args.print_config {
        print!("{}", parley_grpc::config::defaults_toml(&config));
        return Ok(());
    }
    let registry = match &config.registry {
        Some(path) => Registry::load(path)?,
        None => Registry::example(),
    };
    tracing::info!(registry = registry.origin(), "page registry loaded");
    let auth = Authenticator::from_config(&config.auth, false)?;
    let addr = config.server.listen_addr()?;
    let metrics = config.server.metrics()?;

    let gateway = Gateway::build(&config, registry, auth).await?;
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("cannot listen on {addr}"))?;
    metrics
        .serve()
        .await
        .context("cannot open the metrics port (server.metrics_listen)")?;
    gateway
        .serve(
            listener,
            config.server.drain_timeout,
            parley_grpc::shutdown_signal(),
        )
        .await?;
    Ok(())
}
