//! The agent-runner binary: telemetry and configuration first, then the
//! ports (gRPC, metrics), then serve until SIGTERM, drain within a bound and
//! flush the spans.

use std::{net::SocketAddr, path::PathBuf, time::Duration};

use agent_runner::{app::RunnerApp, config::RunnerConfig};
use anyhow::Context;
use clap::Parser;
use parley_grpc::telemetry::{self, LogFormat, MetricsListen, TelemetryOptions};

/// Runs the LLM tool loop as a gRPC service (`parley.runner.v1.AgentRunner`).
#[derive(Debug, Parser)]
#[command(name = "agent-runner", version)]
struct Args {
    /// Address to listen on.
    #[arg(long, env = "PARLEY_LISTEN", default_value = "127.0.0.1:50052")]
    listen: SocketAddr,
    /// Configuration file; without it the scripted provider plays the demo script.
    #[arg(long, env = "PARLEY_RUNNER_CONFIG")]
    config: Option<PathBuf>,
    /// Script for the scripted provider when no configuration file is given.
    #[arg(long, env = "PARLEY_SCRIPT")]
    script: Option<PathBuf>,
    /// Log format: `json` or `text`.
    #[arg(long, env = "PARLEY_LOG_FORMAT", default_value = "json")]
    log_format: LogFormat,
    /// Longest time in-flight turns get to finish after SIGTERM, in seconds.
    #[arg(long, env = "PARLEY_DRAIN_TIMEOUT", default_value_t = 20)]
    drain_timeout: u64,
    /// Prometheus metrics at http://ADDR/metrics, or `off`.
    #[arg(long, env = "PARLEY_METRICS_LISTEN", default_value = "127.0.0.1:9465")]
    metrics_listen: MetricsListen,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let options =
        TelemetryOptions::binary("agent-runner", env!("CARGO_PKG_VERSION"), args.log_format);
    telemetry::run_main(options, run(args)).await
}

async fn run(args: Args) -> anyhow::Result<()> {
    let mut config = match &args.config {
        Some(path) => RunnerConfig::from_file(path)?,
        None => RunnerConfig::scripted_only(args.script.clone()),
    };
    config.apply_env(|name| std::env::var(name).ok())?;
    let app = RunnerApp::build(&config, |name| std::env::var(name).ok())?;

    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("cannot listen on {}", args.listen))?;
    args.metrics_listen
        .serve()
        .await
        .context("cannot open the metrics port (--metrics-listen)")?;
    app.serve(
        listener,
        Duration::from_secs(args.drain_timeout),
        parley_grpc::shutdown_signal(),
    )
    .await?;
    Ok(())
}
