//! The skeleton of the three Parley binaries: the command line (`--config`
//! and the service's flags, each the override of one key), telemetry, the
//! configuration read from its layers and validated, `--print-config`, the
//! app built from the configuration before any port is bound, SIGHUP
//! reading the secrets again, then serve until SIGTERM or Ctrl-C and drain
//! within a bound. A binary's `main.rs` names its [`Binary`] and calls
//! [`main`].

use std::{error::Error, future::Future, path::PathBuf, process::ExitCode};

use clap::{Args, CommandFactory, FromArgMatches, Parser};
use serde::Serialize;
use tokio::net::TcpListener;

use crate::{
    config::{
        SHORT_HELP_FOOTER, ServerConfig, ServerFlags, ServiceConfig, help_footer, print_if_asked,
    },
    telemetry::{self, TelemetryOptions},
};

/// The error a binary ends with (printed by `main`).
pub type BinaryError = Box<dyn Error + Send + Sync>;

/// What a binary is to the skeleton.
pub trait Binary: Clone + Send + Sync + Sized + 'static {
    /// The command's name (also the telemetry's `service.name`).
    const NAME: &'static str;
    /// What `--help` says the command does.
    const ABOUT: &'static str;
    /// The variable that names the configuration file.
    const CONFIG_ENV: &'static str;
    /// The example configuration file `--help` points at.
    const CONFIG_EXAMPLE: &'static str;
    /// What `--help` says of `--config`.
    const CONFIG_HELP: &'static str;
    /// The configuration, plain data.
    type Config: ServiceConfig<Flags = Self::Flags> + Clone + Send + Sync + 'static;
    /// The command-line flags, each the override of one key; they flatten
    /// the `[server]` flags ([`ServerFlags`]).
    type Flags: Args + Clone + Send + Serialize + 'static;

    /// The configuration's `[server]` section.
    fn server(config: &Self::Config) -> &ServerConfig;

    /// Builds the app from its configuration, before any port is bound.
    fn build(config: &Self::Config) -> impl Future<Output = Result<Self, BinaryError>> + Send;

    /// Reads the secret files again (SIGHUP); what cannot be read is
    /// logged and the current values stay.
    fn reload_secrets(&self, config: &Self::Config) -> impl Future<Output = ()> + Send;

    /// Serves on `listener` until `shutdown` resolves, then drains.
    fn serve(
        self,
        listener: TcpListener,
        config: &Self::Config,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> impl Future<Output = Result<(), BinaryError>> + Send;
}

/// The command line: the configuration file and the service's flags.
#[derive(Debug, Parser)]
struct Command<F: Args> {
    /// Configuration file (TOML).
    #[arg(long)]
    config: Option<PathBuf>,
    /// The flags, each the override of one key.
    #[command(flatten)]
    flags: F,
}

/// The command of `B`, as clap builds it (for `--help` and for tests).
pub fn command<B: Binary>(version: &'static str) -> clap::Command {
    Command::<B::Flags>::command()
        .name(B::NAME)
        .bin_name(B::NAME)
        .version(version)
        .about(B::ABOUT)
        .after_help(SHORT_HELP_FOOTER)
        .after_long_help(help_footer(B::CONFIG_EXAMPLE, &B::Config::default()))
        .mut_arg("config", |arg| arg.env(B::CONFIG_ENV).help(B::CONFIG_HELP))
}

/// `B`'s command line, parsed.
#[derive(Debug)]
pub struct CommandLine<F> {
    /// The configuration file.
    pub config: Option<PathBuf>,
    /// The service's flags.
    pub flags: F,
    /// The `[server]` flags among them (what the skeleton reads before
    /// the configuration: the log format, `--print-config`).
    pub server: ServerFlags,
}

/// Parses `arguments` (the first is the program) as `B`'s command line.
pub fn parse<B: Binary>(
    version: &'static str,
    arguments: impl IntoIterator<Item = impl Into<std::ffi::OsString> + Clone>,
) -> Result<CommandLine<B::Flags>, clap::Error> {
    let matches = command::<B>(version).try_get_matches_from(arguments)?;
    let parsed = Command::<B::Flags>::from_arg_matches(&matches)?;
    Ok(CommandLine {
        config: parsed.config,
        flags: parsed.flags,
        server: ServerFlags::from_arg_matches(&matches)?,
    })
}

/// Runs binary `B` of crate version `version` with the process's command
/// line and environment (see the module's doc). An error that stops it is
/// printed on stderr with its causes, and the process exits with 1.
pub fn main<B: Binary>(version: &'static str) -> ExitCode {
    let command_line =
        parse::<B>(version, std::env::args_os()).unwrap_or_else(|error| error.exit());
    let options = TelemetryOptions::binary(B::NAME, version, command_line.server.log_format);
    let ran = crate::runtime::build()
        .map_err(BinaryError::from)
        .and_then(|runtime| runtime.block_on(telemetry::run_main(options, run::<B>(command_line))));
    match ran {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("Error: {error}");
            let mut cause = error.source();
            if cause.is_some() {
                eprintln!("\nCaused by:");
            }
            let mut depth = 0;
            while let Some(error) = cause {
                eprintln!("    {depth}: {error}");
                depth += 1;
                cause = error.source();
            }
            ExitCode::FAILURE
        }
    }
}

async fn run<B: Binary>(command_line: CommandLine<B::Flags>) -> Result<(), BinaryError> {
    let CommandLine {
        config: file,
        flags,
        server,
    } = command_line;
    let config = B::Config::load(file.as_deref(), std::env::vars(), flags)?;
    if print_if_asked(&server, &config) {
        return Ok(());
    }
    let app = B::build(&config).await?;
    reload_on_sighup(app.clone(), config.clone())?;
    let listener = B::server(&config).bind().await?;
    app.serve(listener, &config, crate::shutdown_signal()).await
}

/// Reads the secrets again on each SIGHUP ([`Binary::reload_secrets`]).
fn reload_on_sighup<B: Binary>(app: B, config: B::Config) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        let mut hangups = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())?;
        tokio::spawn(async move {
            while hangups.recv().await.is_some() {
                tracing::info!("SIGHUP: reading the secrets again");
                app.reload_secrets(&config).await;
            }
        });
    }
    #[cfg(not(unix))]
    let _ = (app, config);
    Ok(())
}
