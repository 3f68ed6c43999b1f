//! The agent-runner binary: telemetry and configuration first, then the
//! ports (gRPC, metrics), then serve until SIGTERM, drain within a bound and
//! flush the spans. SIGHUP reads the secret files again
//! ([`RunnerApp::reload_secrets`]). As PID 1 it first becomes a minimal
//! init that reaps orphans and runs the runner as its child
//! ([`agent_runner::init`]).

use std::path::PathBuf;

use agent_runner::{
    app::RunnerApp,
    config::{Flags, RunnerConfig},
};
use clap::Parser;
use parley_grpc::{
    config::{SHORT_HELP_FOOTER, help_footer, print_if_asked},
    telemetry::{self, TelemetryOptions},
};

/// Runs the LLM tool loop as a gRPC service (`parley.runner.v1.AgentRunner`).
#[derive(Debug, Parser)]
#[command(
    name = "agent-runner",
    version,
    after_help = SHORT_HELP_FOOTER,
    after_long_help = help_footer("deploy/config/runner.toml", &RunnerConfig::default())
)]
struct Args {
    /// Configuration file (TOML; see deploy/config/runner.toml). Without
    /// providers in it, the scripted provider plays the demo script.
    #[arg(long, env = "PARLEY_RUNNER_CONFIG")]
    config: Option<PathBuf>,
    /// The flags, each the override of one key.
    #[command(flatten)]
    flags: Flags,
}

fn main() -> anyhow::Result<()> {
    // PID 1 (the FROM scratch image): be a minimal init that reaps orphans
    // and run the runner as its child (agent_runner::init).
    if agent_runner::init::is_pid1() {
        match agent_runner::init::supervise() {
            Ok(code) => std::process::exit(code),
            Err(error) => eprintln!(
                "agent-runner: cannot start itself as the child of PID 1 ({error}); \
                 running as PID 1, orphaned processes will not be reaped"
            ),
        }
    }
    let args = Args::parse();
    let options = TelemetryOptions::binary(
        "agent-runner",
        env!("CARGO_PKG_VERSION"),
        args.flags.server.log_format,
    );
    parley_grpc::runtime::build()?.block_on(telemetry::run_main(options, run(args)))
}

async fn run(args: Args) -> anyhow::Result<()> {
    let config = RunnerConfig::load(args.config.as_deref(), std::env::vars(), args.flags.clone())?;
    if print_if_asked(&args.flags.server, &config) {
        return Ok(());
    }
    let app = RunnerApp::build(&config, |name| std::env::var(name).ok())?;
    reload_on_sighup(app.clone())?;
    let listener = config.server.bind().await?;
    app.serve(listener, &config.server, parley_grpc::shutdown_signal())
        .await?;
    Ok(())
}

/// Reads the secret files again on each SIGHUP.
fn reload_on_sighup(app: RunnerApp) -> anyhow::Result<()> {
    #[cfg(unix)]
    {
        let mut hangups = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())?;
        tokio::spawn(async move {
            while hangups.recv().await.is_some() {
                tracing::info!("SIGHUP: reading the secrets again");
                app.reload_secrets();
            }
        });
    }
    #[cfg(not(unix))]
    let _ = app;
    Ok(())
}
