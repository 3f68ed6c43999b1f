//! The agent-runner binary: telemetry and configuration first, then the
//! ports (gRPC, metrics), then serve until SIGTERM, drain within a bound and
//! flush the spans.

use std::{path::PathBuf, time::Duration};

use agent_runner::{
    app::RunnerApp,
    config::{Flags, RunnerConfig},
};
use anyhow::Context;
use clap::Parser;
use parley_grpc::{
    config::{help_footer, parse_duration},
    telemetry::{self, LogFormat, TelemetryOptions},
};

/// Runs the LLM tool loop as a gRPC service (`parley.runner.v1.AgentRunner`).
#[derive(Debug, Parser)]
#[command(
    name = "agent-runner",
    version,
    after_help = "`--help` also prints every configuration key with its default.",
    after_long_help = help_footer("deploy/config/runner.toml", &RunnerConfig::default())
)]
struct Args {
    /// Configuration file (TOML; see deploy/config/runner.toml). Without
    /// providers in it, the scripted provider plays the demo script.
    #[arg(long, env = "PARLEY_RUNNER_CONFIG")]
    config: Option<PathBuf>,
    /// Address to listen on: server.listen.
    #[arg(long, env = "PARLEY_LISTEN")]
    listen: Option<String>,
    /// Prometheus metrics at http://ADDR/metrics, or `off`: server.metrics_listen.
    #[arg(long, env = "PARLEY_METRICS_LISTEN")]
    metrics_listen: Option<String>,
    /// Time in-flight turns get to finish after SIGTERM (`20s`): server.drain_timeout.
    #[arg(long, env = "PARLEY_DRAIN_TIMEOUT", value_parser = parse_duration)]
    drain_timeout: Option<Duration>,
    /// The provider for requests that name none: default_provider.
    #[arg(long, env = "PARLEY_DEFAULT_PROVIDER")]
    default_provider: Option<String>,
    /// Turns running at once: max_concurrent_runs.
    #[arg(long, env = "PARLEY_MAX_CONCURRENT_RUNS")]
    max_concurrent_runs: Option<usize>,
    /// Script of the scripted provider when the configuration names no provider.
    #[arg(long, env = "PARLEY_SCRIPT")]
    script: Option<PathBuf>,
    /// Log format: `json` or `text`.
    #[arg(long, env = "PARLEY_LOG_FORMAT", default_value = "json")]
    log_format: LogFormat,
    /// Print the configuration these layers give (TOML) and exit.
    #[arg(long)]
    print_config: bool,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let options =
        TelemetryOptions::binary("agent-runner", env!("CARGO_PKG_VERSION"), args.log_format);
    telemetry::run_main(options, run(args)).await
}

async fn run(args: Args) -> anyhow::Result<()> {
    let config = RunnerConfig::load(
        args.config.as_deref(),
        std::env::vars(),
        Flags {
            listen: args.listen,
            metrics_listen: args.metrics_listen,
            drain_timeout: args.drain_timeout,
            default_provider: args.default_provider,
            max_concurrent_runs: args.max_concurrent_runs,
            script: args.script,
        },
    )?;
    if args.print_config {
        print!("{}", parley_grpc::config::defaults_toml(&config));
        return Ok(());
    }
    let app = RunnerApp::build(&config, |name| std::env::var(name).ok())?;
    let metrics = config.server.metrics()?;

    let listener = tokio::net::TcpListener::bind(&config.server.listen)
        .await
        .with_context(|| format!("cannot listen on {}", config.server.listen))?;
    metrics
        .serve()
        .await
        .context("cannot open the metrics port (server.metrics_listen)")?;
    app.serve(
        listener,
        config.server.drain_timeout,
        parley_grpc::shutdown_signal(),
    )
    .await?;
    Ok(())
}
