//! The `payload-parser` binary: reads its configuration (defaults, file,
//! `PARLEY_<SECTION>__<KEY>` variables, flags: see
//! [`parley_grpc::config`]), builds the parser ([`ParserApp`]: a bad
//! profiles file stops it before any port is bound), then serves
//! `parley.parser.v1.PayloadParser` with health and reflection until
//! SIGTERM, draining in-flight calls within `server.drain_timeout`, and
//! flushes its spans. Metrics are served on `server.metrics_listen`
//! (default 127.0.0.1:9466).

use std::path::PathBuf;

use clap::Parser;
use parley_grpc::{
    config::{SHORT_HELP_FOOTER, help_footer, print_if_asked},
    telemetry::{self, TelemetryOptions},
};
use payload_parser::{
    app::ParserApp,
    config::{Flags, ParserConfig},
};

/// Parley's payload parser: turns model text into typed messages.
#[derive(Debug, Parser)]
#[command(
    name = "payload-parser",
    version,
    about,
    after_help = SHORT_HELP_FOOTER,
    after_long_help = help_footer("deploy/config/parser.toml", &ParserConfig::default())
)]
struct Args {
    /// Configuration file (TOML; see deploy/config/parser.toml).
    #[arg(long, env = "PARLEY_PARSER_CONFIG")]
    config: Option<PathBuf>,
    /// The flags, each the override of one key.
    #[command(flatten)]
    flags: Flags,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let options = TelemetryOptions::binary(
        "payload-parser",
        env!("CARGO_PKG_VERSION"),
        args.flags.server.log_format,
    );
    parley_grpc::runtime::build()?.block_on(telemetry::run_main(options, run(args)))
}

async fn run(args: Args) -> anyhow::Result<()> {
    let config = ParserConfig::load(args.config.as_deref(), std::env::vars(), args.flags.clone())?;
    if print_if_asked(&args.flags.server, &config) {
        return Ok(());
    }
    let app = ParserApp::build(&config)?;
    let listener = config.server.bind().await?;
    app.serve(listener, &config.server, parley_grpc::shutdown_signal())
        .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn flags_parse_into_the_layers() {
        // Only flags without an environment variable, so the test does not
        // depend on the environment it runs in.
        let args = Args::try_parse_from(["payload-parser"]).expect("no flags");
        assert_eq!(args.flags.stream_idle_timeout, None);
        let args = Args::try_parse_from([
            "payload-parser",
            "--stream-idle-timeout",
            "1s",
            "--stream-max-duration",
            "1h 30m",
        ])
        .expect("parses");
        assert_eq!(
            (
                args.flags.stream_idle_timeout,
                args.flags.stream_max_duration
            ),
            (
                Some(Duration::from_secs(1)),
                Some(Duration::from_secs(5400))
            )
        );
        let error = Args::try_parse_from(["payload-parser", "--stream-idle-timeout", "20"])
            .expect_err("a duration needs its unit");
        assert!(error.to_string().contains("20s"), "{error}");
    }
}
