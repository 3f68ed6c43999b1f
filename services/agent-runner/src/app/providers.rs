//! Building the providers a configuration names: each one's HTTP
//! configuration, its API key (from a variable, or from a file SIGHUP reads
//! again) and, for the scripted provider, its script. The configuration
//! says what; this is where the runner makes it.

use std::{collections::BTreeMap, path::Path, sync::Arc};

use parley_grpc::{
    config::{ConfigError, invalid},
    secret::{Reloadable, SharedSecret},
};

use crate::config::{DEMO_SCRIPT_PATH, ProviderConfig, ProviderKind, RunnerConfig};
use crate::provider::{
    Provider, ProviderEntry, Providers,
    anthropic::AnthropicProvider,
    gemini::GeminiProvider,
    http::HttpProviderConfig,
    http::ResponseLimits,
    openai::OpenAiProvider,
    scripted::{EMBEDDED_DEMO_SCRIPT, Script, ScriptedProvider},
};

/// Builds every provider of `config`; `lookup` reads the API key
/// variables.
pub fn build_providers(
    config: &RunnerConfig,
    lookup: impl Fn(&str) -> Option<String>,
) -> Result<Providers, ConfigError> {
    build_providers_reloadable(config, lookup, &mut Vec::new())
}

/// [`build_providers`], adding to `reloadable` the keys read from files
/// (SIGHUP reads them again).
pub fn build_providers_reloadable(
    config: &RunnerConfig,
    lookup: impl Fn(&str) -> Option<String>,
    reloadable: &mut Vec<Reloadable>,
) -> Result<Providers, ConfigError> {
    let mut entries = BTreeMap::new();
    let limits = config.providers.limits();
    for (name, provider) in config.providers.iter() {
        let api_key = api_key(name, provider, &config.base_dir, &lookup, reloadable)?;
        let entry = build_provider(name, provider, limits, &config.base_dir, api_key)?;
        entries.insert(name.clone(), entry);
    }
    Providers::new(entries, config.default_provider.clone()).map_err(|unknown| {
        invalid(
            "default_provider",
            format!("`{}` is not configured", unknown.0),
        )
    })
}

fn build_provider(
    name: &str,
    config: &ProviderConfig,
    limits: ResponseLimits,
    base_dir: &Path,
    api_key: SharedSecret,
) -> Result<ProviderEntry, ConfigError> {
    let invalid = |message: String| invalid(format!("providers.{name}"), message);
    let http = || HttpProviderConfig {
        name: name.to_owned(),
        base_url: config.base_url.clone().unwrap_or_default(),
        api_key: api_key.clone(),
        extra_headers: config
            .headers
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
        connect_timeout: config.connect_timeout,
        structured_output: config.structured_output,
        no_structured_output_models: config.no_structured_output_models.clone(),
        limits,
        // On by default where the hints are part of the API (Anthropic);
        // many OpenAI-compatible servers refuse unknown parameters.
        prompt_cache: config
            .prompt_cache
            .unwrap_or(config.kind == ProviderKind::Anthropic),
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

/// The API key from the file the provider names (an error when it cannot
/// be read; added to `reloadable`), else from its variable, if set.
fn api_key(
    name: &str,
    config: &ProviderConfig,
    base_dir: &Path,
    lookup: &impl Fn(&str) -> Option<String>,
    reloadable: &mut Vec<Reloadable>,
) -> Result<SharedSecret, ConfigError> {
    if let Some(file) = &config.api_key_file {
        let path = base_dir.join(file);
        let key = Reloadable {
            key: format!("providers.{name}.api_key_file"),
            env: None,
            file: Some(path.clone()),
            slot: SharedSecret::default(),
        };
        // Like an unset variable: a key not (yet) in the mounted Secret
        // (an optional volume leaves it out) lets the other providers
        // serve; SIGHUP reads it once it is there. A file that exists
        // but cannot be read is a deployment error.
        if !path.exists() {
            tracing::warn!(provider = name, file = %path.display(), "api key file does not exist; calls will be unauthenticated until it does and the runner gets SIGHUP");
            let slot = key.slot.clone();
            reloadable.push(key);
            return Ok(slot);
        }
        key.load(lookup)
            .map_err(|problem| invalid(format!("providers.{name}.api_key_file"), problem))?;
        let slot = key.slot.clone();
        reloadable.push(key);
        return Ok(slot);
    }
    let Some(variable) = config.api_key_env.as_ref() else {
        return Ok(SharedSecret::default());
    };
    let key = lookup(variable).filter(|key| !key.is_empty());
    if key.is_none() {
        tracing::warn!(provider = name, variable = %variable, "api key variable is not set; calls will be unauthenticated");
    }
    let slot = SharedSecret::default();
    slot.set(key);
    Ok(slot)
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
