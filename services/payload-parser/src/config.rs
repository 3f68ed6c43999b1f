//! The `payload-parser` binary's settings and their defaults, read by
//! [`parley_grpc::config::Layers`] like every Parley binary's: defaults,
//! a TOML file (`--config`, documented in `deploy/config/parser.toml`),
//! `PARLEY_<SECTION>__<KEY>` variables, then flags. Durations carry their
//! unit (`120s`, `30m`).
//!
//! (The parsing library reads no configuration: its callers pass
//! [`Limits`] themselves, and the service's callers [`ServiceOptions`].)

use std::{path::PathBuf, time::Duration};

use parley_grpc::config::{
    ConfigError, ServerConfig, ServerFlags, ServiceConfig, duration, invalid, parse_duration,
    positive_duration,
};
use parley_parse::{DEFAULT_MAX_BYTES, DEFAULT_MAX_DEPTH, HARD_MAX_BYTES, HARD_MAX_DEPTH, Limits};
use serde::{Deserialize, Serialize};

use crate::service::{DEFAULT_PROFILE_CACHE, ServiceOptions};

/// The whole configuration.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ParserConfig {
    /// A JSON file of named profiles (`{"profiles": {"<name>": ParseProfile}}`).
    pub profiles: Option<PathBuf>,
    /// `[server]`: where the parser listens and how it stops.
    pub server: ServerConfig,
    /// `[limits]`: what one text may be.
    pub limits: LimitsConfig,
    /// `[streams]`: `ParseStream` calls.
    pub streams: StreamsConfig,
}

/// `[limits]`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LimitsConfig {
    /// Largest text accepted, in bytes (a stream: the sum of its deltas).
    pub max_bytes: usize,
    /// Deepest JSON nesting accepted in an element (1 to 127).
    pub max_depth: usize,
}

/// `[streams]`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct StreamsConfig {
    /// Longest pause between two messages of a `ParseStream` call.
    #[serde(with = "duration")]
    pub idle_timeout: Duration,
    /// Longest lifetime of a `ParseStream` call.
    #[serde(with = "duration")]
    pub max_duration: Duration,
    /// Inline profiles kept compiled (callers such as the gateway send the
    /// same few profiles with every stream); 0 compiles each one.
    pub profile_cache: usize,
}

impl Default for ParserConfig {
    fn default() -> Self {
        Self {
            profiles: None,
            server: ServerConfig::local(50053, 9466),
            limits: LimitsConfig::default(),
            streams: StreamsConfig::default(),
        }
    }
}

impl Default for LimitsConfig {
    fn default() -> Self {
        Self {
            max_bytes: DEFAULT_MAX_BYTES,
            max_depth: DEFAULT_MAX_DEPTH,
        }
    }
}

impl Default for StreamsConfig {
    fn default() -> Self {
        Self {
            idle_timeout: Duration::from_secs(120),
            max_duration: Duration::from_secs(30 * 60),
            profile_cache: DEFAULT_PROFILE_CACHE,
        }
    }
}

/// The parser's flags (or the short variables that stand for them),
/// declared once: each field is a clap argument and serialises under the
/// key it sets, so this struct is the command-line layer
/// ([`Layers::flags`]); each flag given replaces the file's and the
/// environment's value.
#[derive(Debug, Clone, Default, clap::Args, Serialize)]
pub struct Flags {
    /// `--listen`, `--metrics-listen`, `--drain-timeout`, TLS: `[server]`.
    #[command(flatten)]
    #[serde(flatten)]
    pub server: ServerFlags,
    /// JSON file of named profiles (`{"profiles": {"<name>": ParseProfile}}`): profiles.
    #[arg(long, env = "PARLEY_PARSER_PROFILES")]
    pub profiles: Option<PathBuf>,
    /// Largest text accepted, in bytes (a stream: the sum of its deltas): limits.max_bytes.
    #[arg(long, env = "PARLEY_PARSER_MAX_BYTES")]
    #[serde(rename = "limits.max_bytes")]
    pub max_bytes: Option<usize>,
    /// Deepest JSON nesting accepted in an element (1 to 127): limits.max_depth.
    #[arg(long, env = "PARLEY_PARSER_MAX_DEPTH")]
    #[serde(rename = "limits.max_depth")]
    pub max_depth: Option<usize>,
    /// Longest pause between two messages of a ParseStream call: streams.idle_timeout.
    #[arg(long, value_parser = parse_duration)]
    #[serde(rename = "streams.idle_timeout", with = "duration::option")]
    pub stream_idle_timeout: Option<Duration>,
    /// Longest lifetime of a ParseStream call: streams.max_duration.
    #[arg(long, value_parser = parse_duration)]
    #[serde(rename = "streams.max_duration", with = "duration::option")]
    pub stream_max_duration: Option<Duration>,
    /// Inline profiles kept compiled; 0 compiles each one: streams.profile_cache.
    #[arg(long, env = "PARLEY_PARSER_PROFILE_CACHE")]
    #[serde(rename = "streams.profile_cache")]
    pub profile_cache: Option<usize>,
}

impl ServiceConfig for ParserConfig {
    type Flags = Flags;

    /// Checks the ranges.
    fn validate(&self) -> Result<(), ConfigError> {
        self.server.validate()?;
        if !(1..=HARD_MAX_BYTES).contains(&self.limits.max_bytes) {
            return Err(invalid(
                "limits.max_bytes",
                format!("must be between 1 and {HARD_MAX_BYTES}"),
            ));
        }
        if !(1..=HARD_MAX_DEPTH).contains(&self.limits.max_depth) {
            return Err(invalid(
                "limits.max_depth",
                format!("must be between 1 and {HARD_MAX_DEPTH}"),
            ));
        }
        positive_duration("streams.idle_timeout", self.streams.idle_timeout)?;
        positive_duration("streams.max_duration", self.streams.max_duration)?;
        Ok(())
    }
}

impl ParserConfig {
    /// The parser's limits.
    pub fn limits(&self) -> Limits {
        Limits {
            max_bytes: self.limits.max_bytes,
            max_depth: self.limits.max_depth,
        }
    }

    /// The service's options.
    pub fn service_options(&self) -> ServiceOptions {
        ServiceOptions {
            idle_timeout: self.streams.idle_timeout,
            max_stream_duration: self.streams.max_duration,
            profile_cache: self.streams.profile_cache,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    #[test]
    fn the_documented_file_holds_the_defaults() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/config/parser.toml");
        let written = std::fs::read_to_string(&path).expect("read");
        let defaults = parley_grpc::config::defaults_toml(&ParserConfig::default());
        for line in defaults.lines().filter(|line| line.contains(" = ")) {
            assert!(
                written.lines().any(|w| w == line),
                "parser.toml lacks `{line}`"
            );
        }
        let loaded = ParserConfig::load(Some(&path), [], Flags::default()).expect("valid");
        assert_eq!(parley_grpc::config::defaults_toml(&loaded), defaults);
    }

    #[test]
    fn flags_and_variables_apply_and_ranges_are_checked() {
        let config = ParserConfig::load(
            None,
            [("PARLEY_STREAMS__IDLE_TIMEOUT".to_owned(), "5s".to_owned())],
            Flags {
                max_bytes: Some(42),
                server: ServerFlags {
                    drain_timeout: Some(Duration::from_secs(1)),
                    ..ServerFlags::default()
                },
                ..Flags::default()
            },
        )
        .expect("valid");
        assert_eq!(config.limits().max_bytes, 42);
        assert_eq!(config.server.drain_timeout, Duration::from_secs(1));
        assert_eq!(
            config.service_options().idle_timeout,
            Duration::from_secs(5)
        );
        assert_eq!(config.streams.max_duration, Duration::from_secs(1800));

        let error = ParserConfig::load(
            None,
            [],
            Flags {
                max_depth: Some(500),
                ..Flags::default()
            },
        )
        .expect_err("too deep");
        assert!(error.to_string().contains("limits.max_depth"), "{error}");
    }
}
