//! The runner's configuration: its defaults, the providers it names, and
//! their validation (plain data: the providers are built by
//! [`crate::app::providers`]).
//!
//! Read by [`parley_grpc::config::Layers`] like every Parley binary's:
//! defaults, then a TOML file (`--config`, documented in
//! `deploy/config/runner.toml`), then `PARLEY_<SECTION>__<KEY>` variables
//! (`PARLEY_PROVIDERS__OLLAMA__BASE_URL`, `PARLEY_LIMITS__TOOL_TIMEOUT=10s`),
//! then flags. Durations carry their unit (`30s`, `500ms`).
//!
//! ```toml
//! default_provider = "scripted"
//! max_concurrent_runs = 256
//!
//! [limits]            # defaults for requests that leave a limit unset
//! max_iterations = 10
//! tool_timeout = "30s"
//!
//! [retry]
//! max_attempts = 3
//!
//! [providers.scripted]
//! kind = "scripted"
//! script = "demo-script.toml"          # relative to this file
//!
//! [providers.openai]
//! kind = "openai"                       # openai | anthropic | gemini | scripted
//! base_url = "https://api.openai.com/v1"
//! api_key_env = "OPENAI_API_KEY"        # the key comes from the environment, never the file,
//! # api_key_file = "/var/run/secrets/parley/providers/openai"  # or a file (read at start
//! #                                     # and again on SIGHUP), or several keys taken in
//! #                                     # turn (a 429 cools one down, a 401 sets it aside):
//! # api_keys_env = ["OPENAI_KEY_1", "OPENAI_KEY_2"]
//! # api_keys_file = ["keys/openai-1", "keys/openai-2"]   # one of the four
//! default_model = "gpt-4.1-mini"
//! structured_output = true
//! no_structured_output_models = ["gpt-3.5*"]
//! headers = { "OpenAI-Organization" = "org-..." }
//!
//! [mcp_servers.time]                    # an MCP server's tools (see `tools::mcp::config`)
//! command = ["uvx", "mcp-server-time"]
//!
//! [auth]                                # who may call the runner (see `auth`)
//! token_file = "/var/run/secrets/parley/runner/token"
//!
//! [tools]                               # what requests may reach (see `allow`)
//! allowed_endpoints = ["127.0.0.1:50061", "*.tools.svc.cluster.local:443"]
//! registry = "registry.yaml"            # its tools' grpc: endpoints; relative to this file
//!
//! [models]
//! allowed = ["openai/gpt-4.1*"]         # unset: every provider's default_model
//! ```
//!
//! SIGHUP reads the secret files again (`api_key_file`, `api_keys_file`,
//! `headers_files`, `auth.token_file`): model calls, MCP connections and
//! calls checked from then on use the new values (a key the provider had
//! refused is tried again); a file that cannot be read is logged (without
//! its content) and the value held stays.
//!
//! A configuration that names no provider (no file, say) gets one: the
//! scripted provider playing `--script` or the demo script.

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
    time::Duration,
};

pub use parley_grpc::config::ConfigError;
use parley_grpc::config::{
    ServerConfig, ServerFlags, ServiceConfig, duration, invalid, positive, positive_duration,
};
use serde::{Deserialize, Serialize};

use crate::{
    provider::{Providers, http::ResponseLimits},
    retry::RetryPolicy,
    tools::mcp::McpServerConfig,
    turn::Limits,
};

/// Where the demo script is looked for when no configuration names one.
pub const DEMO_SCRIPT_PATH: &str = "deploy/config/demo-script.toml";

/// The default `max_request_bytes`: the gateway's default
/// `upstream.runner_max_request_bytes`.
pub const DEFAULT_MAX_REQUEST_BYTES: usize = 32 * 1024 * 1024;

/// The name of the provider a configuration without providers gets.
pub const SCRIPTED: &str = "scripted";

/// The whole configuration.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RunnerConfig {
    /// `[server]`: where the runner listens and how it stops.
    pub server: ServerConfig,
    /// The provider used when a request names none.
    pub default_provider: String,
    /// Turns running at once; more are refused with `RESOURCE_EXHAUSTED`.
    pub max_concurrent_runs: usize,
    /// Events buffered per turn before the loop waits for the client.
    pub event_buffer: usize,
    /// The largest request message decoded, in bytes (a `RunRequest`
    /// carries the conversation's history); larger ones are refused with
    /// `RESOURCE_EXHAUSTED` (`REQUEST_TOO_LARGE`).
    pub max_request_bytes: usize,
    /// How long a `RunFenced` call may take to send its start and the
    /// bytes of its files (its own deadline when shorter); a client that
    /// stalls longer is refused with `DEADLINE_EXCEEDED` and its admission
    /// freed.
    #[serde(with = "duration")]
    pub request_read_timeout: Duration,
    /// Defaults for unset request limits.
    pub limits: LimitsConfig,
    /// The retry policy of model calls.
    pub retry: RetryConfig,
    /// The providers, by name, and the limits on every provider's answers.
    pub providers: ProvidersConfig,
    /// The MCP servers whose tools requests may use, by name.
    pub mcp_servers: BTreeMap<String, McpServerConfig>,
    /// `[client_tls]`: how `https://` tool servers are verified, and the
    /// client certificate presented to them.
    pub client_tls: parley_grpc::tls::ClientTlsConfig,
    /// `[auth]`: the bearer token every call must carry, and whether the
    /// runner may serve without one beyond loopback.
    pub auth: crate::auth::AuthConfig,
    /// `[tools]`: the ToolService endpoints requests may name (none by
    /// default; see [`crate::allow`]).
    pub tools: crate::allow::ToolsConfig,
    /// `[models]`: the models requests may name (by default every
    /// provider's default model; see [`crate::allow`]).
    pub models: crate::allow::ModelsConfig,
    /// `[pricing]`: the currency of the routes' prices (see
    /// [`crate::pricing`]).
    pub pricing: crate::pricing::PricingConfig,
    /// The directory relative paths are resolved against (the file's own).
    #[serde(skip)]
    pub base_dir: PathBuf,
}

impl Default for RunnerConfig {
    fn default() -> Self {
        Self {
            server: ServerConfig::local(50052, 9465),
            default_provider: SCRIPTED.into(),
            max_concurrent_runs: 256,
            event_buffer: 64,
            max_request_bytes: DEFAULT_MAX_REQUEST_BYTES,
            request_read_timeout: Duration::from_secs(30),
            limits: LimitsConfig::default(),
            retry: RetryConfig::default(),
            providers: ProvidersConfig::default(),
            mcp_servers: BTreeMap::new(),
            client_tls: parley_grpc::tls::ClientTlsConfig::default(),
            auth: crate::auth::AuthConfig::default(),
            tools: crate::allow::ToolsConfig::default(),
            models: crate::allow::ModelsConfig::default(),
            pricing: crate::pricing::PricingConfig::default(),
            base_dir: PathBuf::new(),
        }
    }
}

/// `[providers]`: the limits on every provider's answers, and beside them
/// the providers themselves, one table each by name (so no provider may be
/// called `max_event_bytes` or `max_response_bytes`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct ProvidersConfig {
    /// The longest line or event (its `event:` and `data:` fields) of a
    /// provider's stream, in bytes; past it the call fails with
    /// `PROVIDER_RESPONSE_TOO_LARGE`.
    pub max_event_bytes: usize,
    /// The most bytes of one model call's answer; past it the call fails
    /// with `PROVIDER_RESPONSE_TOO_LARGE`.
    pub max_response_bytes: usize,
    /// The providers, by name.
    #[serde(flatten)]
    pub entries: BTreeMap<String, ProviderConfig>,
}

impl Default for ProvidersConfig {
    fn default() -> Self {
        let limits = ResponseLimits::DEFAULT;
        Self {
            max_event_bytes: limits.max_event_bytes,
            max_response_bytes: limits.max_response_bytes,
            entries: BTreeMap::new(),
        }
    }
}

impl ProvidersConfig {
    /// The limits on one answer.
    pub fn limits(&self) -> ResponseLimits {
        ResponseLimits {
            max_event_bytes: self.max_event_bytes,
            max_response_bytes: self.max_response_bytes,
        }
    }
}

impl std::ops::Deref for ProvidersConfig {
    type Target = BTreeMap<String, ProviderConfig>;

    fn deref(&self) -> &Self::Target {
        &self.entries
    }
}

impl std::ops::DerefMut for ProvidersConfig {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.entries
    }
}

/// Default limits.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LimitsConfig {
    /// Model calls per turn.
    pub max_iterations: u32,
    /// Output tokens per model call (0 leaves the provider's default).
    pub max_output_tokens: u32,
    /// Time per tool call.
    #[serde(with = "duration")]
    pub tool_timeout: Duration,
    /// Time to a model's first streamed event.
    #[serde(with = "duration")]
    pub first_token_timeout: Duration,
    /// Longest silence within a model stream.
    #[serde(with = "duration")]
    pub idle_timeout: Duration,
    /// Time per turn.
    #[serde(with = "duration")]
    pub total_timeout: Duration,
    /// Tool calls running at once.
    pub max_parallel_tools: u32,
}

impl Default for LimitsConfig {
    fn default() -> Self {
        let limits = Limits::default();
        Self {
            max_iterations: limits.max_iterations,
            max_output_tokens: limits.max_output_tokens.unwrap_or(0),
            tool_timeout: limits.tool_timeout,
            first_token_timeout: limits.first_token_timeout,
            idle_timeout: limits.idle_timeout,
            total_timeout: limits.total_timeout,
            max_parallel_tools: limits.max_parallel_tools,
        }
    }
}

/// The retry policy.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RetryConfig {
    /// Attempts per model, the first included.
    pub max_attempts: u32,
    /// The first backoff step.
    #[serde(with = "duration")]
    pub base_delay: Duration,
    /// The largest backoff step.
    #[serde(with = "duration")]
    pub max_delay: Duration,
    /// Provider `retry-after` values above this are ignored.
    #[serde(with = "duration")]
    pub max_retry_after: Duration,
}

impl Default for RetryConfig {
    fn default() -> Self {
        let policy = RetryPolicy::default();
        Self {
            max_attempts: policy.max_attempts,
            base_delay: policy.base_delay,
            max_delay: policy.max_delay,
            max_retry_after: policy.max_retry_after,
        }
    }
}

/// Which adapter a provider uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProviderKind {
    /// Deterministic turns from a script.
    Scripted,
    /// OpenAI Chat Completions and compatible servers.
    Openai,
    /// Anthropic Messages.
    Anthropic,
    /// Gemini `streamGenerateContent`.
    Gemini,
}

/// One provider.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProviderConfig {
    /// The adapter.
    pub kind: ProviderKind,
    /// The API root (HTTP providers).
    pub base_url: Option<String>,
    /// The environment variable holding the API key.
    pub api_key_env: Option<String>,
    /// A file holding the API key (instead of `api_key_env`; relative to
    /// the configuration file), read at start and again on SIGHUP.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key_file: Option<PathBuf>,
    /// Several variables, one API key each (instead of `api_key_env`):
    /// requests take them in turn, skipping keys the provider rate-limited
    /// or refused (see [`crate::provider::keys`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_keys_env: Option<Vec<String>>,
    /// Several files, one API key each (instead of `api_key_file`; relative
    /// to the configuration file), read at start and again on SIGHUP.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_keys_file: Option<Vec<PathBuf>>,
    /// The model used when a request names none.
    pub default_model: Option<String>,
    /// Whether the provider offers native structured output.
    #[serde(default = "yes")]
    pub structured_output: bool,
    /// Models without native structured output (`*` suffix for prefixes).
    #[serde(default)]
    pub no_structured_output_models: Vec<String>,
    /// Headers sent with every request.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// TCP + TLS connect timeout.
    #[serde(default = "default_connect_timeout", with = "duration")]
    pub connect_timeout: Duration,
    /// The script file (scripted providers); the demo script when absent.
    pub script: Option<PathBuf>,
    /// Whether requests carry prompt-cache hints: Anthropic `cache_control`
    /// breakpoints after the stable part of the system prompt and on the
    /// last message (default on), OpenAI's `prompt_cache_key` (default
    /// off: many compatible servers refuse unknown parameters). Gemini
    /// caches implicitly; nothing is sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_cache: Option<bool>,
}

impl ProviderConfig {
    /// A scripted provider playing `script`, else the demo script.
    pub fn scripted(script: Option<PathBuf>) -> Self {
        Self {
            kind: ProviderKind::Scripted,
            base_url: None,
            api_key_env: None,
            api_key_file: None,
            api_keys_env: None,
            api_keys_file: None,
            default_model: None,
            structured_output: true,
            no_structured_output_models: Vec::new(),
            headers: BTreeMap::new(),
            connect_timeout: default_connect_timeout(),
            script,
            prompt_cache: None,
        }
    }
}

fn yes() -> bool {
    true
}

fn default_connect_timeout() -> Duration {
    Duration::from_secs(10)
}

/// The runner's flags (or the short variables that stand for them),
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
    /// The provider for requests that name none: default_provider.
    #[arg(long, env = "PARLEY_DEFAULT_PROVIDER")]
    pub default_provider: Option<String>,
    /// Turns running at once: max_concurrent_runs.
    #[arg(long, env = "PARLEY_MAX_CONCURRENT_RUNS")]
    pub max_concurrent_runs: Option<usize>,
    /// Script of the scripted provider when the configuration names no provider.
    #[arg(long, env = "PARLEY_SCRIPT")]
    #[serde(skip)]
    pub script: Option<PathBuf>,
}

impl ServiceConfig for RunnerConfig {
    type Flags = Flags;

    /// Checks consistency: known default provider, sane limits.
    fn validate(&self) -> Result<(), ConfigError> {
        self.server.validate()?;
        if !self.providers.contains_key(&self.default_provider) {
            return Err(invalid(
                "default_provider",
                format!("`{}` is not in [providers]", self.default_provider),
            ));
        }
        positive("max_concurrent_runs", self.max_concurrent_runs as u64)?;
        positive("event_buffer", self.event_buffer as u64)?;
        positive("max_request_bytes", self.max_request_bytes as u64)?;
        positive_duration("request_read_timeout", self.request_read_timeout)?;
        let l = &self.limits;
        positive("limits.max_iterations", u64::from(l.max_iterations))?;
        positive("limits.max_parallel_tools", u64::from(l.max_parallel_tools))?;
        positive_duration("limits.tool_timeout", l.tool_timeout)?;
        positive_duration("limits.first_token_timeout", l.first_token_timeout)?;
        positive_duration("limits.idle_timeout", l.idle_timeout)?;
        positive_duration("limits.total_timeout", l.total_timeout)?;
        positive("retry.max_attempts", u64::from(self.retry.max_attempts))?;
        positive(
            "providers.max_event_bytes",
            self.providers.max_event_bytes as u64,
        )?;
        positive(
            "providers.max_response_bytes",
            self.providers.max_response_bytes as u64,
        )?;
        for (name, server) in &self.mcp_servers {
            server.validate(name)?;
        }
        self.validate_allow_lists()?;
        for (name, provider) in self.providers.iter() {
            provider.key_specs(name)?;
            if provider.kind == ProviderKind::Scripted {
                continue;
            }
            if provider.base_url.as_deref().is_none_or(str::is_empty) {
                return Err(invalid(format!("providers.{name}.base_url"), "is required"));
            }
            if provider.default_model.as_deref().is_none_or(str::is_empty) {
                return Err(invalid(
                    format!("providers.{name}.default_model"),
                    "is required",
                ));
            }
        }
        Ok(())
    }

    /// A file's directory is where the paths in it are relative to; with no
    /// provider configured, the scripted one plays `--script` (or the demo
    /// script).
    fn settle(&mut self, file: Option<&Path>, flags: &Flags) {
        if let Some(dir) = file.and_then(Path::parent) {
            self.base_dir = dir.to_path_buf();
        }
        if self.providers.is_empty() {
            self.providers.insert(
                SCRIPTED.to_owned(),
                ProviderConfig::scripted(flags.script.clone()),
            );
        }
    }
}

impl RunnerConfig {
    /// The configuration without a file or environment: one scripted
    /// provider playing the demo script, default limits.
    pub fn scripted_demo() -> Self {
        let mut config = Self::default();
        config
            .providers
            .insert(SCRIPTED.to_owned(), ProviderConfig::scripted(None));
        config
    }

    /// The `[tools]` and `[models]` patterns (the registry file is read
    /// when the runner is built, [`Self::allowed`]).
    fn validate_allow_lists(&self) -> Result<(), ConfigError> {
        crate::allow::AllowedEndpoints::parse(
            self.tools.allowed_endpoints.iter().map(String::as_str),
        )
        .map_err(|problem| invalid("tools.allowed_endpoints", problem))?;
        if let Some(patterns) = &self.models.allowed {
            let names: Vec<&str> = self.providers.keys().map(String::as_str).collect();
            crate::allow::AllowedModels::parse(patterns.iter().map(String::as_str), &names)
                .map_err(|problem| invalid("models.allowed", problem))?;
        }
        Ok(())
    }

    /// What requests may reach on `providers` (built from this
    /// configuration): `[tools]` (its registry read now) and `[models]`.
    pub fn allowed(&self, providers: &Providers) -> Result<crate::allow::Allowed, ConfigError> {
        let mut allowed = crate::allow::Allowed::from_config(
            &self.tools,
            &self.models,
            &self.base_dir,
            providers,
        )?;
        allowed.prices = allowed
            .routes
            .price_table(self.pricing.checked_currency()?)?;
        Ok(allowed)
    }

    /// The default limits.
    pub fn limits(&self) -> Limits {
        let l = &self.limits;
        Limits {
            max_iterations: l.max_iterations,
            max_output_tokens: (l.max_output_tokens > 0).then_some(l.max_output_tokens),
            tool_timeout: l.tool_timeout,
            first_token_timeout: l.first_token_timeout,
            idle_timeout: l.idle_timeout,
            total_timeout: l.total_timeout,
            max_parallel_tools: l.max_parallel_tools,
        }
    }

    /// The retry policy.
    pub fn retry_policy(&self) -> RetryPolicy {
        RetryPolicy {
            max_attempts: self.retry.max_attempts,
            base_delay: self.retry.base_delay,
            max_delay: self.retry.max_delay,
            max_retry_after: self.retry.max_retry_after,
        }
    }
}

mod keys;

pub use keys::{KeySource, KeySpec};

#[cfg(test)]
mod tests;
