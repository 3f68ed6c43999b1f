//! The runner's configuration: a TOML file, environment overrides, and the
//! providers built from it.
//!
//! ```toml
//! default_provider = "scripted"
//! max_concurrent_runs = 256
//!
//! [limits]            # defaults for requests that leave a limit unset
//! max_iterations = 10
//! tool_timeout_ms = 30000
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
//! api_key_env = "OPENAI_API_KEY"        # the key comes from the environment, never the file
//! default_model = "gpt-4.1-mini"
//! structured_output = true
//! no_structured_output_models = ["gpt-3.5*"]
//! headers = { "OpenAI-Organization" = "org-..." }
//! ```
//!
//! Environment overrides: `PARLEY_DEFAULT_PROVIDER`,
//! `PARLEY_MAX_CONCURRENT_RUNS`, and per provider
//! `PARLEY_PROVIDER_<NAME>_BASE_URL` / `PARLEY_PROVIDER_<NAME>_MODEL`
//! (`<NAME>` upper-cased, `-` as `_`). With no file at all the runner uses
//! the scripted provider and the demo script (see [`RunnerConfig::scripted_only`]).

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
    sync::Arc,
    time::Duration,
};

use secrecy::SecretString;
use serde::Deserialize;

use crate::{
    provider::{
        Provider,
        anthropic::AnthropicProvider,
        gemini::GeminiProvider,
        http::HttpProviderConfig,
        openai::OpenAiProvider,
        scripted::{EMBEDDED_DEMO_SCRIPT, Script, ScriptedProvider},
    },
    provider::{ProviderEntry, Providers},
    retry::RetryPolicy,
    turn::Limits,
};

/// Where the demo script is looked for when no configuration names one.
pub const DEMO_SCRIPT_PATH: &str = "deploy/config/demo-script.toml";

/// Why the configuration cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The file is not valid TOML for this schema.
    #[error("invalid configuration {path}: {message}")]
    Parse {
        /// The file.
        path: String,
        /// What is wrong.
        message: String,
    },
    /// The configuration is well-formed but inconsistent.
    #[error("invalid configuration: {0}")]
    Invalid(String),
}

/// The whole configuration file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunnerConfig {
    /// The provider used when a request names none.
    pub default_provider: String,
    /// Turns running at once; more are refused with `RESOURCE_EXHAUSTED`.
    #[serde(default = "default_max_concurrent_runs")]
    pub max_concurrent_runs: usize,
    /// Events buffered per turn before the loop waits for the client.
    #[serde(default = "default_event_buffer")]
    pub event_buffer: usize,
    /// Defaults for unset request limits.
    #[serde(default)]
    pub limits: LimitsConfig,
    /// The retry policy of model calls.
    #[serde(default)]
    pub retry: RetryConfig,
    /// The providers, by name.
    pub providers: BTreeMap<String, ProviderConfig>,
    /// The directory relative paths are resolved against (the file's own).
    #[serde(skip)]
    pub base_dir: PathBuf,
}

fn default_max_concurrent_runs() -> usize {
    256
}

fn default_event_buffer() -> usize {
    64
}

/// Default limits, in milliseconds where they are durations.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LimitsConfig {
    /// Model calls per turn.
    pub max_iterations: u32,
    /// Output tokens per model call (0 leaves the provider's default).
    pub max_output_tokens: u32,
    /// Time per tool call.
    pub tool_timeout_ms: u64,
    /// Time to a model's first streamed event.
    pub first_token_timeout_ms: u64,
    /// Longest silence within a model stream.
    pub idle_timeout_ms: u64,
    /// Time per turn.
    pub total_timeout_ms: u64,
    /// Tool calls running at once.
    pub max_parallel_tools: u32,
}

impl Default for LimitsConfig {
    fn default() -> Self {
        let limits = Limits::default();
        Self {
            max_iterations: limits.max_iterations,
            max_output_tokens: limits.max_output_tokens.unwrap_or(0),
            tool_timeout_ms: limits.tool_timeout.as_millis() as u64,
            first_token_timeout_ms: limits.first_token_timeout.as_millis() as u64,
            idle_timeout_ms: limits.idle_timeout.as_millis() as u64,
            total_timeout_ms: limits.total_timeout.as_millis() as u64,
            max_parallel_tools: limits.max_parallel_tools,
        }
    }
}

/// The retry policy, in milliseconds.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RetryConfig {
    /// Attempts per model, the first included.
    pub max_attempts: u32,
    /// The first backoff step.
    pub base_delay_ms: u64,
    /// The largest backoff step.
    pub max_delay_ms: u64,
    /// Provider `retry-after` values above this are ignored.
    pub max_retry_after_ms: u64,
}

impl Default for RetryConfig {
    fn default() -> Self {
        let policy = RetryPolicy::default();
        Self {
            max_attempts: policy.max_attempts,
            base_delay_ms: policy.base_delay.as_millis() as u64,
            max_delay_ms: policy.max_delay.as_millis() as u64,
            max_retry_after_ms: policy.max_retry_after.as_millis() as u64,
        }
    }
}

/// Which adapter a provider uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
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
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProviderConfig {
    /// The adapter.
    pub kind: ProviderKind,
    /// The API root (HTTP providers).
    pub base_url: Option<String>,
    /// The environment variable holding the API key.
    pub api_key_env: Option<String>,
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
    #[serde(default = "default_connect_timeout_ms")]
    pub connect_timeout_ms: u64,
    /// The script file (scripted providers); the demo script when absent.
    pub script: Option<PathBuf>,
}

fn yes() -> bool {
    true
}

fn default_connect_timeout_ms() -> u64 {
    10_000
}

impl RunnerConfig {
    /// Reads and parses a configuration file (not yet validated).
    pub fn from_file(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.display().to_string(),
            source,
        })?;
        let mut config = Self::from_toml(&text).map_err(|message| ConfigError::Parse {
            path: path.display().to_string(),
            message,
        })?;
        config.base_dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
        Ok(config)
    }

    /// Parses TOML text.
    pub fn from_toml(text: &str) -> Result<Self, String> {
        toml::from_str(text).map_err(|error| error.to_string())
    }

    /// The configuration used without a file: one scripted provider playing
    /// `script` (or the demo script) with default limits.
    pub fn scripted_only(script: Option<PathBuf>) -> Self {
        let provider = ProviderConfig {
            kind: ProviderKind::Scripted,
            base_url: None,
            api_key_env: None,
            default_model: None,
            structured_output: true,
            no_structured_output_models: Vec::new(),
            headers: BTreeMap::new(),
            connect_timeout_ms: default_connect_timeout_ms(),
            script,
        };
        Self {
            default_provider: "scripted".into(),
            max_concurrent_runs: default_max_concurrent_runs(),
            event_buffer: default_event_buffer(),
            limits: LimitsConfig::default(),
            retry: RetryConfig::default(),
            providers: BTreeMap::from([("scripted".to_owned(), provider)]),
            base_dir: PathBuf::new(),
        }
    }

    /// Applies environment overrides; `lookup` reads one variable.
    pub fn apply_env(
        &mut self,
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<(), ConfigError> {
        if let Some(provider) = lookup("PARLEY_DEFAULT_PROVIDER") {
            self.default_provider = provider;
        }
        if let Some(runs) = lookup("PARLEY_MAX_CONCURRENT_RUNS") {
            self.max_concurrent_runs = runs.parse().map_err(|_| {
                ConfigError::Invalid(format!(
                    "PARLEY_MAX_CONCURRENT_RUNS=`{runs}` is not a number"
                ))
            })?;
        }
        for (name, provider) in &mut self.providers {
            let prefix = format!("PARLEY_PROVIDER_{}", name.to_uppercase().replace('-', "_"));
            if let Some(url) = lookup(&format!("{prefix}_BASE_URL")) {
                provider.base_url = Some(url);
            }
            if let Some(model) = lookup(&format!("{prefix}_MODEL")) {
                provider.default_model = Some(model);
            }
        }
        Ok(())
    }

    /// Checks consistency: known default provider, sane limits.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let invalid = |message: String| Err(ConfigError::Invalid(message));
        if !self.providers.contains_key(&self.default_provider) {
            return invalid(format!(
                "default_provider `{}` is not in [providers]",
                self.default_provider
            ));
        }
        if self.max_concurrent_runs == 0 || self.event_buffer == 0 {
            return invalid("max_concurrent_runs and event_buffer must be at least 1".into());
        }
        let l = &self.limits;
        if l.max_iterations == 0 || l.max_parallel_tools == 0 {
            return invalid(
                "limits.max_iterations and limits.max_parallel_tools must be at least 1".into(),
            );
        }
        if [
            l.tool_timeout_ms,
            l.first_token_timeout_ms,
            l.idle_timeout_ms,
            l.total_timeout_ms,
        ]
        .contains(&0)
        {
            return invalid("limit timeouts must be positive".into());
        }
        if self.retry.max_attempts == 0 {
            return invalid("retry.max_attempts must be at least 1".into());
        }
        for (name, provider) in &self.providers {
            if provider.kind != ProviderKind::Scripted
                && provider.base_url.as_deref().is_none_or(str::is_empty)
            {
                return invalid(format!("providers.{name}: base_url is required"));
            }
            if provider.kind != ProviderKind::Scripted
                && provider.default_model.as_deref().is_none_or(str::is_empty)
            {
                return invalid(format!("providers.{name}: default_model is required"));
            }
        }
        Ok(())
    }

    /// The default limits.
    pub fn limits(&self) -> Limits {
        let l = &self.limits;
        Limits {
            max_iterations: l.max_iterations,
            max_output_tokens: (l.max_output_tokens > 0).then_some(l.max_output_tokens),
            tool_timeout: Duration::from_millis(l.tool_timeout_ms),
            first_token_timeout: Duration::from_millis(l.first_token_timeout_ms),
            idle_timeout: Duration::from_millis(l.idle_timeout_ms),
            total_timeout: Duration::from_millis(l.total_timeout_ms),
            max_parallel_tools: l.max_parallel_tools,
        }
    }

    /// The retry policy.
    pub fn retry_policy(&self) -> RetryPolicy {
        RetryPolicy {
            max_attempts: self.retry.max_attempts,
            base_delay: Duration::from_millis(self.retry.base_delay_ms),
            max_delay: Duration::from_millis(self.retry.max_delay_ms),
            max_retry_after: Duration::from_millis(self.retry.max_retry_after_ms),
        }
    }

    /// Builds every provider; `lookup` reads the API key variables.
    pub fn build_providers(
        &self,
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<Providers, ConfigError> {
        let mut entries = BTreeMap::new();
        for (name, config) in &self.providers {
            let entry = build_provider(name, config, &self.base_dir, &lookup)?;
            entries.insert(name.clone(), entry);
        }
        Providers::new(entries, self.default_provider.clone()).map_err(|unknown| {
            ConfigError::Invalid(format!(
                "default_provider `{}` is not configured",
                unknown.0
            ))
        })
    }
}

fn build_provider(
    name: &str,
    config: &ProviderConfig,
    base_dir: &Path,
    lookup: &impl Fn(&str) -> Option<String>,
) -> Result<ProviderEntry, ConfigError> {
    let invalid = |message: String| ConfigError::Invalid(format!("providers.{name}: {message}"));
    let http = || HttpProviderConfig {
        name: name.to_owned(),
        base_url: config.base_url.clone().unwrap_or_default(),
        api_key: api_key(name, config, lookup),
        extra_headers: config
            .headers
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
        connect_timeout: Duration::from_millis(config.connect_timeout_ms),
        structured_output: config.structured_output,
        no_structured_output_models: config.no_structured_output_models.clone(),
    };
    let provider: Arc<dyn Provider> = match config.kind {
        ProviderKind::Scripted => {
            let script = load_script(config.script.as_deref(), base_dir)
                .map_err(|e| invalid(e.to_string()))?;
            let provider = ScriptedProvider::new(name, script);
            let default_model = config
                .default_model
                .clone()
                .unwrap_or_else(|| provider.default_model().to_owned());
            return Ok(ProviderEntry {
                provider: Arc::new(provider),
                default_model,
            });
        }
        ProviderKind::Openai => {
            Arc::new(OpenAiProvider::new(http()).map_err(|e| invalid(e.to_string()))?)
        }
        ProviderKind::Anthropic => {
            Arc::new(AnthropicProvider::new(http()).map_err(|e| invalid(e.to_string()))?)
        }
        ProviderKind::Gemini => {
            Arc::new(GeminiProvider::new(http()).map_err(|e| invalid(e.to_string()))?)
        }
    };
    Ok(ProviderEntry {
        provider,
        default_model: config.default_model.clone().unwrap_or_default(),
    })
}

/// The API key from the variable the provider names, if set.
fn api_key(
    name: &str,
    config: &ProviderConfig,
    lookup: &impl Fn(&str) -> Option<String>,
) -> Option<SecretString> {
    let variable = config.api_key_env.as_ref()?;
    let key = lookup(variable).filter(|key| !key.is_empty());
    if key.is_none() {
        tracing::warn!(provider = name, variable = %variable, "api key variable is not set; calls will be unauthenticated");
    }
    key.map(SecretString::from)
}

/// The script at `path` (relative to `base_dir`), else the demo script in
/// the working directory, else the compiled-in copy.
pub fn load_script(
    path: Option<&Path>,
    base_dir: &Path,
) -> Result<Script, crate::provider::scripted::ScriptError> {
    if let Some(path) = path {
        let path = if path.is_relative() {
            base_dir.join(path)
        } else {
            path.to_path_buf()
        };
        return Script::from_file(&path);
    }
    let demo = Path::new(DEMO_SCRIPT_PATH);
    if demo.is_file() {
        return Script::from_file(demo);
    }
    Script::from_toml(EMBEDDED_DEMO_SCRIPT)
}

#[cfg(test)]
mod tests;
