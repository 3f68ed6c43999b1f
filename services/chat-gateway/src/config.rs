//! The gateway's settings: a TOML file (`deploy/config/gateway.toml`
//! documents every key), overridden by command-line flags and their
//! environment variables, with defaults that form the local stack (runner on
//! 50052, parser on 50053, SQLite in the working directory, dev auth).
//!
//! Everything is parsed and validated here, before the binary binds a port:
//! a bad value stops start-up with a message naming the key.

use std::{net::SocketAddr, path::PathBuf, time::Duration};

use serde::Deserialize;

/// Why the configuration was refused.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The file is not valid TOML or has unknown keys.
    #[error("{path}: {message}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// What is wrong, with the key.
        message: String,
    },
    /// A value is out of range or malformed.
    #[error("invalid setting `{key}`: {message}")]
    Invalid {
        /// The key, as written in the file.
        key: &'static str,
        /// What is wrong.
        message: String,
    },
}

fn invalid(key: &'static str, message: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        key,
        message: message.into(),
    }
}

/// The whole file.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct GatewayConfig {
    /// `[server]`.
    pub server: ServerConfig,
    /// `[store]`.
    pub store: StoreConfig,
    /// `[upstream]`.
    pub upstream: UpstreamConfig,
    /// `[turns]`.
    pub turns: TurnConfig,
    /// `[auth]`.
    pub auth: AuthConfig,
    /// `registry`: the page registry file; unset uses the shipped example.
    pub registry: Option<PathBuf>,
}

/// `[server]`: where and how the gateway listens.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ServerConfig {
    /// Address to listen on.
    pub listen: String,
    /// Longest time running turns get to finish after SIGTERM.
    pub drain_timeout_secs: u64,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            listen: "127.0.0.1:50051".into(),
            drain_timeout_secs: 20,
        }
    }
}

/// `[store]`: the conversation database.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct StoreConfig {
    /// `sqlite://FILE?mode=rwc` or `postgres://user:pass@host/db`.
    pub database_url: String,
    /// Most pooled connections.
    pub max_connections: u32,
    /// Longest wait for a pooled connection, in milliseconds.
    pub acquire_timeout_ms: u64,
    /// Most writes SQLite commits in one transaction when writes queue up
    /// (group commit); PostgreSQL commits each write on its own.
    pub write_batch: u32,
}

impl Default for StoreConfig {
    fn default() -> Self {
        Self {
            database_url: "sqlite://parley.db?mode=rwc".into(),
            max_connections: 8,
            acquire_timeout_ms: 5_000,
            write_batch: 64,
        }
    }
}

/// `[upstream]`: the agent-runner and the payload-parser sidecar.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct UpstreamConfig {
    /// The agent-runner.
    pub runner_url: String,
    /// The payload-parser sidecar.
    pub parser_url: String,
    /// Longest time to open a connection to either, in milliseconds.
    pub connect_timeout_ms: u64,
    /// Longest time for one unary `Parse` call, in milliseconds; past it
    /// the in-process parser answers.
    pub parse_timeout_ms: u64,
}

impl Default for UpstreamConfig {
    fn default() -> Self {
        Self {
            runner_url: "http://127.0.0.1:50052".into(),
            parser_url: "http://127.0.0.1:50053".into(),
            connect_timeout_ms: 2_000,
            parse_timeout_ms: 2_000,
        }
    }
}

/// `[turns]`: limits on turns and what they send.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TurnConfig {
    /// Turns running at once on this gateway; more are refused with
    /// `RESOURCE_EXHAUSTED` (`TOO_MANY_TURNS`).
    pub max_concurrent: usize,
    /// Longest a turn may run when the caller sets no (shorter) deadline.
    pub max_duration_secs: u64,
    /// How many earlier turns the model's history is rebuilt from.
    pub history_max_turns: u32,
    /// Largest user message, in bytes.
    pub max_message_bytes: usize,
    /// Largest UI state (`page.state`) as JSON, in bytes.
    pub max_state_bytes: usize,
    /// Largest `response_schema` as JSON, in bytes.
    pub max_schema_bytes: usize,
    /// How long `CancelTurn` waits for the cancelled turn to be stored.
    pub cancel_wait_ms: u64,
    /// How often this replica renews the leases of its running turns.
    pub lease_renew_ms: u64,
    /// How long a lease lasts: a turn whose replica has not renewed it for
    /// this long is ended by any replica as `REPLICA_LOST`.
    pub lease_ttl_ms: u64,
    /// How long the wire events of a finished turn are kept for
    /// `ResumeTurn`; conversation history is kept regardless.
    pub resume_retention_secs: u64,
    /// Whether a turn's wire events are stored (in batches) as clients
    /// receive them, which makes `ResumeTurn` exact on any replica and keeps
    /// the partial answer of a gateway that dies. Off, only the answer is
    /// stored and a resume replays only what the turn stored at its end.
    pub event_log: bool,
    /// How many events a turn's stream may run ahead of its stored log.
    /// A gateway that dies loses at most these from the stored partial
    /// answer (its clients saw them); 0 delivers only committed events, at
    /// the price of a commit's latency on every event.
    pub stream_ahead: u64,
    /// Least time between two writes of the event log: a busy replica
    /// stores all its turns' new events in one transaction per interval.
    pub log_interval_ms: u64,
    /// Whether tool calls the model writes into its text are run
    /// (docs/output-format.md#tool-calls-in-the-text).
    pub text_tool_calls: bool,
}

/// Largest `turns.stream_ahead`: far more than a turn streams within a
/// log interval, and small enough that the seq gap before the `error` of a
/// turn whose replica died stays readable.
pub const MAX_STREAM_AHEAD: u64 = 4096;

impl Default for TurnConfig {
    fn default() -> Self {
        Self {
            max_concurrent: 256,
            max_duration_secs: 300,
            history_max_turns: 50,
            max_message_bytes: 32 * 1024,
            max_state_bytes: 64 * 1024,
            max_schema_bytes: 64 * 1024,
            cancel_wait_ms: 2_000,
            lease_renew_ms: 2_000,
            lease_ttl_ms: 10_000,
            resume_retention_secs: 24 * 60 * 60,
            event_log: true,
            stream_ahead: 32,
            log_interval_ms: 50,
            text_tool_calls: false,
        }
    }
}

impl TurnConfig {
    /// `max_duration_secs` as a duration.
    pub fn max_duration(&self) -> Duration {
        Duration::from_secs(self.max_duration_secs)
    }

    /// `cancel_wait_ms` as a duration.
    pub fn cancel_wait(&self) -> Duration {
        Duration::from_millis(self.cancel_wait_ms)
    }

    /// `lease_renew_ms` as a duration.
    pub fn lease_renew(&self) -> Duration {
        Duration::from_millis(self.lease_renew_ms)
    }

    /// `lease_ttl_ms` as a duration.
    pub fn lease_ttl(&self) -> Duration {
        Duration::from_millis(self.lease_ttl_ms)
    }

    /// `log_interval_ms` as a duration.
    pub fn log_interval(&self) -> Duration {
        Duration::from_millis(self.log_interval_ms)
    }

    /// `resume_retention_secs` as a duration.
    pub fn resume_retention(&self) -> Duration {
        Duration::from_secs(self.resume_retention_secs)
    }
}

/// `[auth]`: who may call. With no JWT issuer and no static token the
/// gateway runs in dev mode (every call is user `dev`, loudly logged).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AuthConfig {
    /// Forces dev mode even when verifiers are configured.
    pub dev: bool,
    /// Clock skew allowed on `exp` and `nbf`, in seconds.
    pub leeway_secs: u64,
    /// `[[auth.jwt]]`: accepted JWT issuers.
    pub jwt: Vec<JwtConfig>,
    /// `[[auth.static_tokens]]`: fixed tokens, each naming its user.
    pub static_tokens: Vec<StaticTokenConfig>,
}

impl Default for AuthConfig {
    fn default() -> Self {
        Self {
            dev: false,
            leeway_secs: 30,
            jwt: Vec::new(),
            static_tokens: Vec::new(),
        }
    }
}

/// The JWT signature algorithms the gateway accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub enum JwtAlgorithm {
    /// HMAC with SHA-256 and a shared secret.
    HS256,
    /// RSA PKCS#1 v1.5 with SHA-256 and a public key.
    RS256,
}

/// One accepted issuer.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JwtConfig {
    /// The required `iss` claim.
    pub issuer: String,
    /// The required `aud` claim.
    pub audience: String,
    /// The signature algorithm.
    pub algorithm: JwtAlgorithm,
    /// HS256: the secret, inline (prefer `secret_env`).
    pub secret: Option<String>,
    /// HS256: the environment variable holding the secret.
    pub secret_env: Option<String>,
    /// RS256: a PEM file with the public key.
    pub public_key_file: Option<PathBuf>,
}

/// One fixed token.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StaticTokenConfig {
    /// The user id the token stands for.
    pub user: String,
    /// The token, inline (prefer `token_env`).
    pub token: Option<String>,
    /// The environment variable holding the token.
    pub token_env: Option<String>,
}

impl GatewayConfig {
    /// Reads a TOML file; unknown keys are errors.
    pub fn load(path: &std::path::Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_owned(),
            source,
        })?;
        Self::parse(&text, path)
    }

    /// Parses TOML text; `path` names it in errors.
    pub fn parse(text: &str, path: &std::path::Path) -> Result<Self, ConfigError> {
        toml::from_str(text).map_err(|error| ConfigError::Parse {
            path: path.to_owned(),
            message: error.to_string(),
        })
    }

    /// Checks every value that can be checked without connecting anywhere.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.listen_addr()?;
        crate::store::Backend::from_url(&self.store.database_url)
            .map_err(|error| invalid("store.database_url", error.to_string()))?;
        check_url("upstream.runner_url", &self.upstream.runner_url)?;
        check_url("upstream.parser_url", &self.upstream.parser_url)?;
        positive(
            "store.max_connections",
            u64::from(self.store.max_connections),
        )?;
        positive("store.acquire_timeout_ms", self.store.acquire_timeout_ms)?;
        positive("store.write_batch", u64::from(self.store.write_batch))?;
        positive(
            "upstream.connect_timeout_ms",
            self.upstream.connect_timeout_ms,
        )?;
        positive("upstream.parse_timeout_ms", self.upstream.parse_timeout_ms)?;
        positive("turns.max_concurrent", self.turns.max_concurrent as u64)?;
        positive("turns.max_duration_secs", self.turns.max_duration_secs)?;
        positive(
            "turns.history_max_turns",
            u64::from(self.turns.history_max_turns),
        )?;
        positive(
            "turns.max_message_bytes",
            self.turns.max_message_bytes as u64,
        )?;
        positive("turns.lease_renew_ms", self.turns.lease_renew_ms)?;
        if self.turns.stream_ahead > MAX_STREAM_AHEAD {
            return Err(invalid(
                "turns.stream_ahead",
                format!("must be at most {MAX_STREAM_AHEAD}"),
            ));
        }
        positive(
            "turns.resume_retention_secs",
            self.turns.resume_retention_secs,
        )?;
        if self.turns.lease_ttl_ms <= self.turns.lease_renew_ms {
            return Err(invalid(
                "turns.lease_ttl_ms",
                format!(
                    "must be longer than turns.lease_renew_ms ({} ms), or every lease would expire before its renewal",
                    self.turns.lease_renew_ms
                ),
            ));
        }
        for (index, jwt) in self.auth.jwt.iter().enumerate() {
            if jwt.issuer.trim().is_empty() || jwt.audience.trim().is_empty() {
                return Err(invalid(
                    "auth.jwt",
                    format!("entry {index}: issuer and audience are required"),
                ));
            }
        }
        for (index, token) in self.auth.static_tokens.iter().enumerate() {
            if token.user.trim().is_empty() {
                return Err(invalid(
                    "auth.static_tokens",
                    format!("entry {index}: user is required"),
                ));
            }
        }
        Ok(())
    }

    /// `server.listen` as a socket address.
    pub fn listen_addr(&self) -> Result<SocketAddr, ConfigError> {
        self.server.listen.parse().map_err(|error| {
            invalid(
                "server.listen",
                format!("`{}`: {error}", self.server.listen),
            )
        })
    }

    /// `server.drain_timeout_secs` as a duration.
    pub fn drain_timeout(&self) -> Duration {
        Duration::from_secs(self.server.drain_timeout_secs)
    }
}

/// Values given on the command line (or their environment variables);
/// each one set replaces the file's value.
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    /// `--listen`.
    pub listen: Option<String>,
    /// `--database-url`.
    pub database_url: Option<String>,
    /// `--runner`.
    pub runner_url: Option<String>,
    /// `--parser`.
    pub parser_url: Option<String>,
    /// `--registry`.
    pub registry: Option<PathBuf>,
    /// `--drain-timeout`, in seconds.
    pub drain_timeout_secs: Option<u64>,
    /// `--max-concurrent-turns`.
    pub max_concurrent_turns: Option<usize>,
    /// `--dev-auth`.
    pub dev_auth: bool,
}

impl GatewayConfig {
    /// Applies the command line over the file.
    pub fn apply(&mut self, overrides: Overrides) {
        if let Some(listen) = overrides.listen {
            self.server.listen = listen;
        }
        if let Some(url) = overrides.database_url {
            self.store.database_url = url;
        }
        if let Some(url) = overrides.runner_url {
            self.upstream.runner_url = url;
        }
        if let Some(url) = overrides.parser_url {
            self.upstream.parser_url = url;
        }
        if let Some(path) = overrides.registry {
            self.registry = Some(path);
        }
        if let Some(secs) = overrides.drain_timeout_secs {
            self.server.drain_timeout_secs = secs;
        }
        if let Some(max) = overrides.max_concurrent_turns {
            self.turns.max_concurrent = max;
        }
        self.auth.dev |= overrides.dev_auth;
    }
}

fn positive(key: &'static str, value: u64) -> Result<(), ConfigError> {
    if value == 0 {
        Err(invalid(key, "must be greater than 0"))
    } else {
        Ok(())
    }
}

fn check_url(key: &'static str, url: &str) -> Result<(), ConfigError> {
    let uri: http::Uri = url
        .parse()
        .map_err(|error| invalid(key, format!("`{url}` is not a URL: {error}")))?;
    match uri.scheme_str() {
        Some("http" | "https") if uri.host().is_some() => Ok(()),
        _ => Err(invalid(
            key,
            format!("`{url}` must be an http:// or https:// URL with a host"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    #[test]
    fn defaults_form_the_local_stack() {
        let config = GatewayConfig::default();
        config.validate().expect("defaults are valid");
        assert_eq!(
            config.listen_addr().expect("addr").to_string(),
            "127.0.0.1:50051"
        );
        assert_eq!(config.upstream.runner_url, "http://127.0.0.1:50052");
        assert_eq!(config.upstream.parser_url, "http://127.0.0.1:50053");
        assert_eq!(config.store.database_url, "sqlite://parley.db?mode=rwc");
        assert!(config.auth.jwt.is_empty() && config.auth.static_tokens.is_empty());
    }

    #[test]
    fn the_documented_file_parses_and_validates() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/config/gateway.toml");
        let config = GatewayConfig::load(&path).expect("deploy/config/gateway.toml parses");
        config.validate().expect("and is valid");
    }

    #[test]
    fn unknown_keys_and_bad_values_are_named() {
        let error = GatewayConfig::parse("[turns]\nmax_concurent = 3\n", Path::new("g.toml"))
            .expect_err("typo is refused");
        assert!(error.to_string().contains("max_concurent"), "{error}");

        let mut config = GatewayConfig::default();
        config.upstream.runner_url = "localhost:50052".into();
        let error = config.validate().expect_err("scheme required");
        assert!(error.to_string().contains("upstream.runner_url"), "{error}");

        let mut config = GatewayConfig::default();
        config.store.database_url = "mysql://db".into();
        assert!(
            config
                .validate()
                .expect_err("mysql")
                .to_string()
                .contains("store.database_url")
        );

        let mut config = GatewayConfig::default();
        config.turns.max_concurrent = 0;
        assert!(
            config
                .validate()
                .expect_err("zero")
                .to_string()
                .contains("turns.max_concurrent")
        );
    }

    #[test]
    fn flags_override_the_file() {
        let mut config =
            GatewayConfig::parse("[server]\nlisten = \"0.0.0.0:1\"\n", Path::new("g.toml"))
                .expect("parses");
        config.apply(Overrides {
            listen: Some("127.0.0.1:9".into()),
            runner_url: Some("http://runner:1".into()),
            max_concurrent_turns: Some(3),
            dev_auth: true,
            ..Overrides::default()
        });
        assert_eq!(config.server.listen, "127.0.0.1:9");
        assert_eq!(config.upstream.runner_url, "http://runner:1");
        assert_eq!(config.upstream.parser_url, "http://127.0.0.1:50053");
        assert_eq!(config.turns.max_concurrent, 3);
        assert!(config.auth.dev);
    }

    #[test]
    fn auth_sections_parse() {
        let text = r#"
            [auth]
            leeway_secs = 5
            [[auth.jwt]]
            issuer = "https://id.example"
            audience = "parley"
            algorithm = "RS256"
            public_key_file = "/etc/parley/jwt.pem"
            [[auth.static_tokens]]
            user = "ci"
            token_env = "PARLEY_CI_TOKEN"
        "#;
        let config = GatewayConfig::parse(text, Path::new("g.toml")).expect("parses");
        assert_eq!(config.auth.jwt[0].algorithm, JwtAlgorithm::RS256);
        assert_eq!(config.auth.static_tokens[0].user, "ci");
        config.validate().expect("valid");
    }
}
