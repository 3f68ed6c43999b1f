//! `tracing` set-up shared by the binaries: JSON lines by default (for log
//! pipelines), human-readable with `--log-format text`. The filter comes from
//! `RUST_LOG` (default `info`).

use tracing_subscriber::{EnvFilter, fmt};

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LogFormat {
    /// One JSON object per line.
    #[default]
    Json,
    /// Human-readable lines.
    Text,
}

impl std::str::FromStr for LogFormat {
    type Err = String;
    fn from_str(value: &str) -> Result<Self, Self::Err> {
        match value {
            "json" => Ok(Self::Json),
            "text" => Ok(Self::Text),
            other => Err(format!(
                "unknown log format `{other}` (expected `json` or `text`)"
            )),
        }
    }
}

/// Installs the global subscriber. Call once, at the top of `main`.
pub fn init(format: LogFormat) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = fmt().with_env_filter(filter).with_writer(std::io::stderr);
    match format {
        LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .with_current_span(true)
            .init(),
        LogFormat::Text => builder.init(),
    }
}
