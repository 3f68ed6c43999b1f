//! Building the providers a configuration names: each one's HTTP
//! configuration, its API keys (each from a variable, or from a file SIGHUP
//! reads again) and, for the scripted provider, its script. The configuration
//! says what; this is where the runner makes it.

use std::{collections::BTreeMap, path::Path, sync::Arc};

use parley_grpc::{
    config::{ConfigError, invalid},
    secret::{Reloadable, SharedSecret},
};

use crate::config::{
    DEMO_SCRIPT_PATH, KeySource, KeySpec, ProviderConfig, ProviderKind, RunnerConfig,
};
use crate::provider::{
    Provider, ProviderEntry, Providers,
    anthropic::AnthropicProvider,
    gemini::GeminiProvider,
    http::HttpProviderConfig,
    http::ResponseLimits,
    keys::{ApiKey, ApiKeys},
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
        let keys = api_keys(name, provider, &config.base_dir, &lookup, reloadable)?;
        let entry = build_provider(name, provider, limits, &config.base_dir, keys)?;
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
    api_keys: ApiKeys,
) -> Result<ProviderEntry, ConfigError> {
    let invalid = |message: String| invalid(format!("providers.{name}"), message);
    let http = || HttpProviderConfig {
        name: name.to_owned(),
        base_url: config.base_url.clone().unwrap_or_default(),
        api_keys: api_keys.clone(),
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

/// The provider's API keys ([`ProviderConfig::key_specs`]): each one from
/// its file (added to `reloadable`; a file that exists but cannot be read
/// is an error) or from its variable.
fn api_keys(
    name: &str,
    config: &ProviderConfig,
    base_dir: &Path,
    lookup: &impl Fn(&str) -> Option<String>,
    reloadable: &mut Vec<Reloadable>,
) -> Result<ApiKeys, ConfigError> {
    let keys = config
        .key_specs(name)?
        .into_iter()
        .map(|spec| {
            let secret = match &spec.source {
                KeySource::File(file) => key_file(name, &spec, &base_dir.join(file), lookup, reloadable)?,
                KeySource::Env(variable) => {
                    let key = lookup(variable).filter(|key| !key.is_empty());
                    if key.is_none() {
                        tracing::warn!(provider = name, variable = %variable, "api key variable is not set; the provider's other keys serve, or calls go unauthenticated");
                    }
                    let slot = SharedSecret::default();
                    slot.set(key);
                    slot
                }
            };
            Ok(ApiKey {
                name: spec.name,
                secret,
            })
        })
        .collect::<Result<Vec<_>, ConfigError>>()?;
    Ok(ApiKeys::new(keys))
}

/// The key in `path`, read now and again on SIGHUP (added to
/// `reloadable`).
fn key_file(
    name: &str,
    spec: &KeySpec,
    path: &Path,
    lookup: &impl Fn(&str) -> Option<String>,
    reloadable: &mut Vec<Reloadable>,
) -> Result<SharedSecret, ConfigError> {
    let key = Reloadable {
        key: spec.field.clone(),
        env: None,
        file: Some(path.to_path_buf()),
        slot: SharedSecret::default(),
    };
    // Like an unset variable: a key not (yet) in the mounted Secret (an
    // optional volume leaves it out) lets the other keys and providers
    // serve; SIGHUP reads it once it is there. A file that exists but
    // cannot be read is a deployment error.
    if path.exists() {
        key.load(lookup)
            .map_err(|problem| invalid(spec.field.clone(), problem))?;
    } else {
        tracing::warn!(provider = name, file = %path.display(), "api key file does not exist; the provider's other keys serve, or calls go unauthenticated, until it does and the runner gets SIGHUP");
    }
    let slot = key.slot.clone();
    reloadable.push(key);
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

#[cfg(test)]
mod tests {
    use super::*;

    fn provider(toml: &str) -> ProviderConfig {
        toml::from_str(&format!(
            "kind = \"openai\"\nbase_url = \"http://127.0.0.1:9/v1\"\ndefault_model = \"m\"\n{toml}"
        ))
        .expect("a provider table")
    }

    /// The names of `count` picks of `keys`.
    fn picks(keys: &ApiKeys, count: usize) -> Vec<String> {
        (0..count)
            .filter_map(|_| keys.pick(&[]))
            .map(|key| keys.name(key.index()).to_owned())
            .collect()
    }

    #[test]
    fn keys_from_variables_are_named_by_them_and_unset_ones_skipped() {
        let config = provider("api_keys_env = [\"OPENAI_KEY_1\", \"OPENAI_KEY_2\", \"UNSET\"]");
        let keys = api_keys(
            "openai",
            &config,
            Path::new("."),
            &|name: &str| {
                name.starts_with("OPENAI_KEY_")
                    .then(|| format!("sk-{name}"))
            },
            &mut Vec::new(),
        )
        .expect("keys");
        assert_eq!(
            keys.names().collect::<Vec<_>>(),
            ["OPENAI_KEY_1", "OPENAI_KEY_2", "UNSET"]
        );
        assert_eq!(
            picks(&keys, 4),
            [
                "OPENAI_KEY_1",
                "OPENAI_KEY_2",
                "OPENAI_KEY_1",
                "OPENAI_KEY_2"
            ]
        );
        let shown = format!("{keys:?}");
        assert!(!shown.contains("sk-"), "{shown}");
    }

    #[test]
    fn key_files_are_read_again_on_reload_and_a_missing_one_waits_for_it() {
        let dir = tempfile::tempdir().expect("dir");
        std::fs::write(dir.path().join("openai-1"), "sk-one\n").expect("write");
        let config = provider("api_keys_file = [\"openai-1\", \"openai-2\"]");
        let mut reloadable = Vec::new();
        let keys = api_keys(
            "openai",
            &config,
            dir.path(),
            &|_: &str| None,
            &mut reloadable,
        )
        .expect("keys");
        assert_eq!(keys.names().collect::<Vec<_>>(), ["openai-1", "openai-2"]);
        assert_eq!(reloadable.len(), 2, "both files are read again on SIGHUP");
        assert!(
            reloadable
                .iter()
                .all(|r| r.key == "providers.openai.api_keys_file")
        );
        assert_eq!(picks(&keys, 2), ["openai-1", "openai-1"], "one key so far");

        std::fs::write(dir.path().join("openai-2"), "sk-two\n").expect("write");
        for secret in &reloadable {
            assert!(secret.reload(|_| None));
        }
        let mut both = picks(&keys, 2);
        both.sort();
        assert_eq!(both, ["openai-1", "openai-2"]);
        let key = keys.pick(&[]).expect("a key");
        assert!(["sk-one", "sk-two"].contains(&key.expose()));
    }

    #[test]
    fn a_key_file_that_cannot_be_read_is_an_error_naming_its_field() {
        let dir = tempfile::tempdir().expect("dir");
        std::fs::create_dir(dir.path().join("openai-1")).expect("a directory");
        let config = provider("api_keys_file = [\"openai-1\"]");
        let error = api_keys(
            "openai",
            &config,
            dir.path(),
            &|_: &str| None,
            &mut Vec::new(),
        )
        .expect_err("unreadable");
        assert!(
            error.to_string().contains("providers.openai.api_keys_file"),
            "{error}"
        );
    }
}
