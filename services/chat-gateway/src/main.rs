//! `chat-gateway`: the Parley chat API.
//!
//! Reads the configuration (defaults, file, `PARLEY_<SECTION>__<KEY>`
//! variables, flags: see [`parley_grpc::config`]), validates it and the page registry before binding any port,
//! then serves until SIGTERM or Ctrl-C and drains within a bound. With no
//! flags and no file it forms the local stack: it listens on
//! 127.0.0.1:50051, uses the runner on 50052 and the parser on 50053, keeps
//! conversations in `parley.db` in the working directory and serves the example
//! registry. It needs a verifier (`[[auth.jwt]]`, `[[auth.static_tokens]]`)
//! or dev auth asked for explicitly (`--dev-auth`), and refuses to start
//! without one; SIGHUP reads its secret files again. Metrics are served on
//! `server.metrics_listen` (default 127.0.0.1:9464); spans go to the OTLP endpoint of the standard
//! `OTEL_*` variables, and are flushed at shutdown.

use std::path::PathBuf;

use anyhow::Result;
use chat_gateway::{
    app::Gateway,
    auth::Authenticator,
    config::{Flags, GatewayConfig},
    registry::Registry,
};
use clap::Parser;
use parley_grpc::{
    config::{SHORT_HELP_FOOTER, help_footer, print_if_asked},
    telemetry::{self, TelemetryOptions},
};

/// Parley's chat gateway: streaming Chat API, conversations, pages, auth.
#[derive(Debug, Parser)]
#[command(
    name = "chat-gateway",
    version,
    after_help = SHORT_HELP_FOOTER,
    after_long_help = help_footer("deploy/config/gateway.toml", &GatewayConfig::default())
)]
struct Args {
    /// Configuration file (TOML; see deploy/config/gateway.toml).
    #[arg(long, env = "PARLEY_GATEWAY_CONFIG")]
    config: Option<PathBuf>,
    /// The flags, each the override of one key.
    #[command(flatten)]
    flags: Flags,
}

fn main() -> Result<()> {
    let args = Args::parse();
    let options = TelemetryOptions::binary(
        "chat-gateway",
        env!("CARGO_PKG_VERSION"),
        args.flags.server.log_format,
    );
    parley_grpc::runtime::build()?.block_on(telemetry::run_main(options, run(args)))
}

async fn run(args: Args) -> Result<()> {
    let config = GatewayConfig::load(args.config.as_deref(), std::env::vars(), args.flags.clone())?;
    if print_if_asked(&args.flags.server, &config) {
        return Ok(());
    }
    let registry = match &config.registry {
        Some(path) => Registry::load(path)?,
        None => Registry::example(),
    };
    tracing::info!(registry = registry.origin(), "page registry loaded");
    let auth = Authenticator::load(&config.auth, false).await?;
    let gateway = Gateway::build(&config, registry, auth).await?;
    reload_on_sighup(gateway.clone(), config.clone())?;
    let listener = config.server.bind().await?;
    gateway
        .serve(listener, &config.server, parley_grpc::shutdown_signal())
        .await?;
    Ok(())
}

/// Reads the secrets again on each SIGHUP ([`Gateway::reload_secrets`]).
fn reload_on_sighup(gateway: Gateway, config: GatewayConfig) -> Result<()> {
    #[cfg(unix)]
    {
        let mut hangups = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())?;
        tokio::spawn(async move {
            while hangups.recv().await.is_some() {
                tracing::info!("SIGHUP: reading the secrets again");
                gateway.reload_secrets(&config).await;
            }
        });
    }
    #[cfg(not(unix))]
    let _ = (gateway, config);
    Ok(())
}
