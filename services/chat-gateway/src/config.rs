//! The gateway's settings and their defaults (the local stack: runner on
//! 50052, parser on 50053, SQLite in the working directory, dev auth).
//! `deploy/config/gateway.toml` documents every key; they are read by
//! [`parley_grpc::config::Layers`] (defaults, file, `PARLEY_<SECTION>__<KEY>`
//! variables, flags), durations written with their unit (`2s`, `50ms`).
//!
//! Everything is validated here, before the binary binds a port: a bad
//! value stops start-up with a message naming the key.

use std::{path::PathBuf, time::Duration};

pub use crate::store::quota::Quota;
pub use parley_grpc::config::ConfigError;
use parley_grpc::config::{
    ServerConfig, ServerFlags, ServiceConfig, duration, invalid, positive, positive_duration,
};
use parley_grpc::tls::ClientTlsConfig;
use serde::{Deserialize, Serialize};

/// The whole file.
#[derive(Debug, Clone, Serialize, Deserialize)]
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
    /// `[client_tls]`: how `https://` upstreams are verified, and the
    /// client certificate presented to them.
    pub client_tls: ClientTlsConfig,
    /// `[tenants.NAME]`: what one tenant's users may use beyond what the
    /// pages allow (a tenant not listed: what the pages allow).
    #[serde(skip_serializing_if = "Tenants::is_empty")]
    pub tenants: Tenants,
    /// `[attachments]`: the limits of uploaded files.
    pub attachments: AttachmentsConfig,
    /// `[web]`: browsers (CORS origins, the chat page, web request limits).
    pub web: WebConfig,
}

/// Each tenant's restrictions, by the tenant key its tokens carry.
pub type Tenants = std::collections::BTreeMap<String, TenantConfig>;

/// `[tenants.NAME]`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TenantConfig {
    /// The models (route names or `provider/model`, as pages name them)
    /// this tenant's turns may use, among those each page allows; unset:
    /// every model the page allows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub models_allowed: Option<Vec<String>>,
}

impl Default for GatewayConfig {
    fn default() -> Self {
        Self {
            server: ServerConfig::local(50051, 9464),
            store: StoreConfig::default(),
            upstream: UpstreamConfig::default(),
            turns: TurnConfig::default(),
            auth: AuthConfig::default(),
            registry: None,
            client_tls: ClientTlsConfig::default(),
            tenants: Tenants::new(),
            attachments: AttachmentsConfig::default(),
            web: WebConfig::default(),
        }
    }
}

/// `[store]`: the conversation database.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct StoreConfig {
    /// `sqlite://FILE?mode=rwc` or `postgres://user:pass@host/db`; printed
    /// without its password.
    #[serde(serialize_with = "crate::secret::serialize_redacted")]
    pub database_url: String,
    /// A file holding the database URL (a mounted Secret), which replaces
    /// `database_url` when set. Read at start; on SIGHUP it is read again
    /// and the connections the pool opens from then on use it (open ones
    /// keep theirs; PostgreSQL's notification listener keeps the URL it
    /// started with).
    pub database_url_file: Option<PathBuf>,
    /// Most pooled connections.
    pub max_connections: u32,
    /// Longest wait for a pooled connection.
    #[serde(with = "duration")]
    pub acquire_timeout: Duration,
    /// Most writes SQLite commits in one transaction when writes queue up
    /// (group commit); PostgreSQL commits each write on its own.
    pub write_batch: u32,
    /// PostgreSQL: longest wait for a row lock (`lock_timeout`); past it
    /// the write fails as the store being unavailable, never hangs.
    #[serde(with = "duration")]
    pub lock_timeout: Duration,
    /// PostgreSQL: how long a session may sit idle inside a transaction
    /// before the server ends it and frees its locks
    /// (`idle_in_transaction_session_timeout`): a replica frozen between
    /// two statements of a write holds no row past it. Shorter than
    /// `lock_timeout`, so that a writer waiting on such a lock outlasts it.
    #[serde(with = "duration")]
    pub idle_in_transaction_timeout: Duration,
}

impl StoreConfig {
    /// The database URL: the content of `database_url_file` when set, else
    /// `database_url`; a URL whose password is a shipped placeholder is
    /// refused.
    pub fn url(&self) -> Result<String, ConfigError> {
        let (key, url) = match &self.database_url_file {
            Some(path) => (
                "store.database_url_file",
                crate::secret::read_file(path)
                    .map_err(|message| invalid("store.database_url_file", message))?,
            ),
            None => ("store.database_url", self.database_url.clone()),
        };
        crate::store::Backend::from_url(&url).map_err(|error| invalid(key, error.to_string()))?;
        if crate::secret::url_has_placeholder_password(&url) {
            return Err(invalid(
                key,
                format!("the password {}", crate::secret::PLACEHOLDER),
            ));
        }
        Ok(url)
    }
}

impl Default for StoreConfig {
    fn default() -> Self {
        Self {
            database_url: "sqlite://parley.db?mode=rwc".into(),
            database_url_file: None,
            max_connections: 8,
            acquire_timeout: Duration::from_secs(5),
            write_batch: 64,
            lock_timeout: Duration::from_secs(10),
            idle_in_transaction_timeout: Duration::from_secs(5),
        }
    }
}

/// `[upstream]`: the agent-runner and the payload-parser sidecar.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct UpstreamConfig {
    /// The agent-runner: `http://HOST:PORT`, `https://HOST:PORT` or
    /// `unix:/path/to.sock`.
    pub runner_url: String,
    /// The payload-parser sidecar, the same forms (`unix:` when it serves
    /// `server.uds_listen` in the same pod).
    pub parser_url: String,
    /// Longest time to open a connection to either.
    #[serde(with = "duration")]
    pub connect_timeout: Duration,
    /// Longest time for one unary `Parse` call; past it the in-process
    /// parser answers.
    #[serde(with = "duration")]
    pub parse_timeout: Duration,
    /// Who cleans a turn's text while it streams and parses the answer.
    pub parsing: Parsing,
    /// The largest request the runner decodes (its `max_request_bytes`):
    /// the gateway sends none larger, and `turns.history_max_bytes` must
    /// leave room below it for the rest of a request.
    pub runner_max_request_bytes: usize,
    /// A file holding the bearer token sent to the runner on every call
    /// (the runner's `auth.token_file`; trailing line ends trimmed; read
    /// at start and on SIGHUP). Unset: no token is sent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub runner_token_file: Option<PathBuf>,
    /// An environment variable holding that token (instead of the file).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub runner_token_env: Option<String>,
}

impl UpstreamConfig {
    /// The runner token of `runner_token_file` / `runner_token_env`, if
    /// one is configured; the message names the key, never the value.
    pub fn runner_token(&self) -> Result<Option<String>, ConfigError> {
        if self.runner_token_file.is_none() && self.runner_token_env.is_none() {
            return Ok(None);
        }
        crate::secret::read(
            None,
            self.runner_token_env.as_deref(),
            self.runner_token_file.as_deref(),
        )
        .map(Some)
        .map_err(|problem| {
            parley_grpc::config::invalid("upstream.runner_token_file / runner_token_env", problem)
        })
    }
}

/// `turns.history_strategy`: what happens to the turns a model's context
/// window no longer holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HistoryStrategy {
    /// They are left out (the runner fits each call to its model's window).
    #[default]
    Window,
    /// A rolling summary of them, written by a model call after the turn
    /// that left them out and stored, goes into the system prompt in their
    /// place.
    Summarize,
}

/// `upstream.parsing`: where the gateway parses the model's text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Parsing {
    /// The payload-parser at `parser_url`: a `ParseStream` per turn, one
    /// message each way per text delta; the library in-process when it
    /// cannot answer (`PARSER_FALLBACK`).
    #[default]
    Sidecar,
    /// The parser library in the gateway's process (the same code and
    /// results, without the hop); `parser_url` is not called.
    InProcess,
}

impl Default for UpstreamConfig {
    fn default() -> Self {
        Self {
            runner_url: "http://127.0.0.1:50052".into(),
            parser_url: "http://127.0.0.1:50053".into(),
            connect_timeout: Duration::from_secs(2),
            parse_timeout: Duration::from_secs(2),
            parsing: Parsing::default(),
            runner_max_request_bytes: 32 * 1024 * 1024,
            runner_token_file: None,
            runner_token_env: None,
        }
    }
}

/// `[turns]`: limits on turns and what they send.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TurnConfig {
    /// Turns running at once on this gateway; more are refused with
    /// `RESOURCE_EXHAUSTED` (`TOO_MANY_TURNS`).
    pub max_concurrent: usize,
    /// Event streams open at once on this gateway (`Chat`, `ExecuteAction`
    /// and `ResumeTurn`, each counted until the client's stream ends);
    /// more are refused at once with `RESOURCE_EXHAUSTED`
    /// (`TOO_MANY_STREAMS`), before any other work.
    pub max_streams: usize,
    /// Longest a turn may run when the caller sets no (shorter) deadline.
    #[serde(with = "duration")]
    pub max_duration: Duration,
    /// How many earlier turns the model's history is rebuilt from.
    pub history_max_turns: u32,
    /// Most bytes of earlier messages sent to the model: the newest turns
    /// are kept whole, the oldest dropped.
    pub history_max_bytes: usize,
    /// Earlier turns whose files are sent to the model again with their
    /// messages (newest first, within `attachments.max_message_bytes`
    /// with the new message's); older files are named in their message.
    pub history_attachment_turns: u32,
    /// What happens to the earlier turns a model's window no longer holds:
    /// left out (`window`), or summarised (`summarize`).
    pub history_strategy: HistoryStrategy,
    /// The model that writes summaries (`summarize`): a runner route or
    /// `provider/model`; empty: the model of the turn that left turns out.
    pub summary_model: String,
    /// The model that titles a conversation after its first turn: a runner
    /// route or `provider/model`; empty: no model call, the first message
    /// clipped is the title.
    pub title_model: String,
    /// Largest answer (text and structured text) a turn may stream; past
    /// it the turn fails with `ANSWER_TOO_LARGE`, its partial answer kept.
    pub max_answer_bytes: usize,
    /// Largest user message, in bytes.
    pub max_message_bytes: usize,
    /// Largest UI state (`page.state`) as JSON, in bytes.
    pub max_state_bytes: usize,
    /// Largest `response_schema` as JSON, in bytes.
    pub max_schema_bytes: usize,
    /// How long `CancelTurn` waits for the cancelled turn to be stored.
    #[serde(with = "duration")]
    pub cancel_wait: Duration,
    /// How often this replica renews the leases of its running turns.
    #[serde(with = "duration")]
    pub lease_renew: Duration,
    /// How long a lease lasts: a turn whose replica has not renewed it for
    /// this long is ended by any replica as `REPLICA_LOST`.
    #[serde(with = "duration")]
    pub lease_ttl: Duration,
    /// Most turns whose lease expired that one sweep ends; a sweep that
    /// found this many runs again at once, the others every
    /// `lease_renew`. Renewal runs beside the sweeps, never behind them.
    pub sweep_batch: usize,
    /// How long the wire events of a finished turn are kept for
    /// `ResumeTurn`; conversation history is kept regardless.
    #[serde(with = "duration")]
    pub resume_retention: Duration,
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
    #[serde(with = "duration")]
    pub log_interval: Duration,
    /// Whether tool calls the model writes into its text are run
    /// (docs/output-format.md#tool-calls-in-the-text).
    pub text_tool_calls: bool,
    /// How long a turn runs on once no client follows it (its `Chat`
    /// stream was dropped and nobody resumed it, on any replica) before it
    /// is cancelled and stored with its partial answer; `0s` never cancels.
    #[serde(with = "duration")]
    pub abandoned_turn_grace: Duration,
    /// How long an event stream may go unread (its client takes none of
    /// the events ready for it) before it is ended with `SLOW_CONSUMER`,
    /// freeing its place among `max_streams` and its user's streams.
    #[serde(with = "duration")]
    pub follower_stall: Duration,
    /// How long a turn paused for decisions on its tool calls waits for
    /// `SubmitToolDecisions`; then any replica closes it as if every
    /// waiting call were declined.
    #[serde(with = "duration")]
    pub input_ttl: Duration,
    /// When a turn awaits input on a conversation, refuse a new `Chat`
    /// there (`FAILED_PRECONDITION`, `TURN_AWAITING_INPUT`) unless it sets
    /// `cancel_running`; off, the new message closes the paused turn (the
    /// user moved on).
    pub block_on_pending: bool,
    /// `[turns.per_user]`: what each user may start (0: unlimited); the
    /// counts hold across replicas (they live in the store).
    pub per_user: Quota,
    /// `[turns.per_tenant]`: what all users of one tenant may start.
    pub per_tenant: Quota,
}

/// Largest `turns.stream_ahead`: far more than a turn streams within a
/// log interval, and small enough that the seq gap before the `error` of a
/// turn whose replica died stays readable.
pub const MAX_STREAM_AHEAD: u64 = 4096;

impl Default for TurnConfig {
    fn default() -> Self {
        Self {
            max_concurrent: 256,
            max_streams: 1024,
            max_duration: Duration::from_secs(300),
            history_max_turns: 50,
            history_max_bytes: 4 * 1024 * 1024,
            history_attachment_turns: 2,
            history_strategy: HistoryStrategy::Window,
            summary_model: String::new(),
            title_model: String::new(),
            max_answer_bytes: 256 * 1024,
            max_message_bytes: 32 * 1024,
            max_state_bytes: 64 * 1024,
            max_schema_bytes: 64 * 1024,
            cancel_wait: Duration::from_secs(2),
            lease_renew: Duration::from_secs(2),
            lease_ttl: Duration::from_secs(10),
            sweep_batch: 100,
            resume_retention: Duration::from_secs(24 * 60 * 60),
            event_log: true,
            stream_ahead: 32,
            log_interval: Duration::from_millis(50),
            text_tool_calls: false,
            abandoned_turn_grace: Duration::from_secs(60),
            follower_stall: Duration::from_secs(30),
            input_ttl: Duration::from_secs(24 * 60 * 60),
            block_on_pending: false,
            per_user: Quota {
                concurrent_turns: 4,
                turns_per_minute: 30,
                tokens_per_day: 2_000_000,
                // Off: the currency and prices are the runner's to set.
                cost_per_day: crate::store::quota::Cost::ZERO,
                streams: 16,
                awaiting: 8,
            },
            per_tenant: Quota {
                concurrent_turns: 64,
                turns_per_minute: 600,
                tokens_per_day: 50_000_000,
                cost_per_day: crate::store::quota::Cost::ZERO,
                streams: 512,
                awaiting: 0,
            },
        }
    }
}

pub mod attachments;
mod auth;
pub mod web;

pub use attachments::{AttachmentStore, AttachmentsConfig, S3Config};
pub use auth::{AdminClaim, AuthConfig, JwtAlgorithm, JwtConfig, StaticTokenConfig};
pub use web::WebConfig;

impl ServiceConfig for GatewayConfig {
    type Flags = Flags;

    /// Checks every value that can be checked without connecting anywhere.
    fn validate(&self) -> Result<(), ConfigError> {
        self.server.validate()?;
        crate::store::Backend::from_url(&self.store.database_url)
            .map_err(|error| invalid("store.database_url", error.to_string()))?;
        check_url("upstream.runner_url", &self.upstream.runner_url)?;
        check_url("upstream.parser_url", &self.upstream.parser_url)?;
        positive(
            "store.max_connections",
            u64::from(self.store.max_connections),
        )?;
        positive_duration("store.acquire_timeout", self.store.acquire_timeout)?;
        positive("store.write_batch", u64::from(self.store.write_batch))?;
        positive_duration("store.lock_timeout", self.store.lock_timeout)?;
        positive_duration(
            "store.idle_in_transaction_timeout",
            self.store.idle_in_transaction_timeout,
        )?;
        positive_duration("upstream.connect_timeout", self.upstream.connect_timeout)?;
        positive_duration("upstream.parse_timeout", self.upstream.parse_timeout)?;
        let turns = &self.turns;
        positive("turns.max_concurrent", turns.max_concurrent as u64)?;
        positive("turns.max_streams", turns.max_streams as u64)?;
        positive_duration("turns.max_duration", turns.max_duration)?;
        positive(
            "turns.history_max_turns",
            u64::from(turns.history_max_turns),
        )?;
        positive("turns.max_message_bytes", turns.max_message_bytes as u64)?;
        positive("turns.max_answer_bytes", turns.max_answer_bytes as u64)?;
        positive("turns.history_max_bytes", turns.history_max_bytes as u64)?;
        check_request_room(
            turns,
            &self.attachments,
            self.upstream.runner_max_request_bytes,
        )?;
        positive_duration("turns.lease_renew", turns.lease_renew)?;
        positive("turns.sweep_batch", turns.sweep_batch as u64)?;
        if turns.stream_ahead > MAX_STREAM_AHEAD {
            return Err(invalid(
                "turns.stream_ahead",
                format!("must be at most {MAX_STREAM_AHEAD}"),
            ));
        }
        positive_duration("turns.resume_retention", turns.resume_retention)?;
        positive_duration("turns.follower_stall", turns.follower_stall)?;
        positive_duration("turns.input_ttl", turns.input_ttl)?;
        if turns.lease_ttl <= turns.lease_renew {
            return Err(invalid(
                "turns.lease_ttl",
                format!(
                    "must be longer than turns.lease_renew ({}), or every lease would expire before its renewal",
                    duration::format(turns.lease_renew)
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
            positive_duration("auth.jwt.jwks_refresh", jwt.jwks_refresh)?;
        }
        for (name, tenant) in &self.tenants {
            if name.trim().is_empty() {
                return Err(invalid("tenants", "a tenant's name is not empty"));
            }
            for model in tenant.models_allowed.iter().flatten() {
                // As pages name models: a route's name or provider/model.
                let named = !model.is_empty()
                    && model.len() <= 256
                    && !model.chars().any(char::is_whitespace)
                    && model
                        .split_once('/')
                        .is_none_or(|(provider, name)| !provider.is_empty() && !name.is_empty());
                if !named {
                    return Err(invalid(
                        format!("tenants.{name}.models_allowed"),
                        format!(
                            "`{}` is not a route's name or `provider/model`",
                            crate::text::truncate(model, 64)
                        ),
                    ));
                }
            }
        }
        self.attachments.validate()?;
        self.web.validate()?;
        positive_duration("auth.jwks_timeout", self.auth.jwks_timeout)?;
        positive("auth.jwks_max_bytes", self.auth.jwks_max_bytes as u64)?;
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
}

/// The gateway's flags (or the short variables that stand for them, such
/// as `PARLEY_LISTEN`), declared once: each field is a clap argument and
/// serialises under the key it sets, so this struct is the command-line
/// layer ([`Layers::flags`]); each flag given replaces the file's and the
/// environment's value.
#[derive(Debug, Clone, Default, clap::Args, Serialize)]
pub struct Flags {
    /// `--listen`, `--metrics-listen`, `--drain-timeout`, TLS: `[server]`.
    #[command(flatten)]
    #[serde(flatten)]
    pub server: ServerFlags,
    /// Conversation store, sqlite://FILE?mode=rwc or postgres://...: store.database_url.
    #[arg(long, env = "PARLEY_DATABASE_URL")]
    #[serde(rename = "store.database_url")]
    pub database_url: Option<String>,
    /// The agent-runner (http://, https:// or unix:/path/to.sock): upstream.runner_url.
    #[arg(long = "runner", value_name = "RUNNER", env = "PARLEY_RUNNER_URL")]
    #[serde(rename = "upstream.runner_url")]
    pub runner_url: Option<String>,
    /// The payload-parser sidecar (http://, https:// or unix:/path/to.sock): upstream.parser_url.
    #[arg(long = "parser", value_name = "PARSER", env = "PARLEY_PARSER_URL")]
    #[serde(rename = "upstream.parser_url")]
    pub parser_url: Option<String>,
    /// The page registry (YAML); unset serves the built-in example: registry.
    #[arg(long, env = "PARLEY_REGISTRY")]
    pub registry: Option<PathBuf>,
    /// Turns running at once: turns.max_concurrent.
    #[arg(long, env = "PARLEY_MAX_CONCURRENT_TURNS")]
    #[serde(rename = "turns.max_concurrent")]
    pub max_concurrent_turns: Option<usize>,
    /// Dev auth: no token needed, every caller is user `dev`; beyond loopback only with auth.dev_allow_remote. Never in production.
    #[arg(long, env = "PARLEY_DEV_AUTH")]
    #[serde(rename = "auth.dev", skip_serializing_if = "std::ops::Not::not")]
    pub dev_auth: bool,
}

/// Room in a runner request for what is not history: the system prompt
/// (registry text, the payload manifest), tool definitions and framing.
pub const REQUEST_RESERVE_BYTES: usize = 1024 * 1024;

/// The largest runner request `turns` can make, history at its budget and
/// every other part at its limit, must fit the runner's decode limit: no
/// conversation can then grow into one the runner refuses on every turn.
fn check_request_room(
    turns: &TurnConfig,
    attachments: &AttachmentsConfig,
    runner_max: usize,
) -> Result<(), ConfigError> {
    // The page state goes into the prompt and the request's context; the
    // message's files go with it.
    let files = usize::try_from(attachments.max_message_bytes).unwrap_or(usize::MAX);
    let largest = turns
        .history_max_bytes
        .saturating_add(files)
        .saturating_add(turns.max_message_bytes)
        .saturating_add(turns.max_state_bytes.saturating_mul(2))
        .saturating_add(turns.max_schema_bytes)
        .saturating_add(REQUEST_RESERVE_BYTES);
    if largest > runner_max {
        return Err(invalid(
            "turns.history_max_bytes",
            format!(
                "a runner request could reach {largest} bytes (history, attachments.max_message_bytes, message, twice the state, schema and {REQUEST_RESERVE_BYTES} for the prompt), over upstream.runner_max_request_bytes ({runner_max})"
            ),
        ));
    }
    Ok(())
}

fn check_url(key: &'static str, url: &str) -> Result<(), ConfigError> {
    if let Some(path) = parley_grpc::unix::socket_path(url) {
        return path.map(drop).map_err(|message| invalid(key, message));
    }
    let uri: http::Uri = url
        .parse()
        .map_err(|error| invalid(key, format!("`{url}` is not a URL: {error}")))?;
    match uri.scheme_str() {
        Some("http" | "https") if uri.host().is_some() => Ok(()),
        _ => Err(invalid(
            key,
            format!(
                "`{url}` must be an http:// or https:// URL with a host, or unix:/path/to.sock"
            ),
        )),
    }
}

#[cfg(test)]
mod tests;
