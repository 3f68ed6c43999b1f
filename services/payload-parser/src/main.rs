//! The `payload-parser` binary: reads its configuration (defaults, file,
//! `PARLEY_<SECTION>__<KEY>` variables, flags: see
//! [`parley_grpc::config`]), builds the parser ([`ParserApp`]: a bad
//! profiles file stops it before any port is bound), then serves
//! `parley.parser.v1.PayloadParser` with health and reflection until
//! SIGTERM, draining in-flight calls within `server.drain_timeout`, and
//! flushes its spans. Metrics are served on `server.metrics_listen`
//! (default 127.0.0.1:9466).

use payload_parser::app::ParserApp;

fn main() -> std::process::ExitCode {
    parley_grpc::binary::main::<ParserApp>(env!("CARGO_PKG_VERSION"))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use parley_grpc::binary::parse;

    use super::*;

    const VERSION: &str = env!("CARGO_PKG_VERSION");

    #[test]
    fn flags_parse_into_the_layers() {
        // Only flags without an environment variable, so the test does not
        // depend on the environment it runs in.
        let flags = parse::<ParserApp>(VERSION, ["payload-parser"])
            .expect("no flags")
            .flags;
        assert_eq!(flags.stream_idle_timeout, None);
        let flags = parse::<ParserApp>(
            VERSION,
            [
                "payload-parser",
                "--stream-idle-timeout",
                "1s",
                "--stream-max-duration",
                "1h 30m",
            ],
        )
        .expect("parses")
        .flags;
        assert_eq!(
            (flags.stream_idle_timeout, flags.stream_max_duration),
            (
                Some(Duration::from_secs(1)),
                Some(Duration::from_secs(5400))
            )
        );
        let error = parse::<ParserApp>(VERSION, ["payload-parser", "--stream-idle-timeout", "20"])
            .expect_err("a duration needs its unit");
        assert!(error.to_string().contains("20s"), "{error}");
    }
}
