//! Configuration parsing, overrides and validation.

use super::*;

#[test]
fn the_shipped_runner_config_is_valid() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/config/runner.toml");
    let config = RunnerConfig::from_file(&path).expect("should succeed");
    config.validate().expect("should succeed");
    assert_eq!(config.default_provider, "scripted");
    let providers = config.build_providers(|_| None).expect("should succeed");
    assert!(providers.get("scripted").is_some());
    for name in ["openai", "ollama", "openrouter", "anthropic", "gemini"] {
        assert!(providers.get(name).is_some(), "{name}");
    }
}

#[test]
fn no_config_means_the_scripted_demo() {
    let config = RunnerConfig::scripted_only(None);
    config.validate().expect("should succeed");
    let providers = config.build_providers(|_| None).expect("should succeed");
    let resolved = providers.resolve(crate::turn::ModelChoice {
        provider: String::new(),
        model: String::new(),
        params: Default::default(),
    });
    assert_eq!(
        resolved.map(|c| (c.provider, c.model)),
        Ok(("scripted".to_owned(), "scripted-demo".to_owned()))
    );
}

#[test]
fn environment_overrides_apply() {
    let mut config = RunnerConfig::from_toml(
        r#"
        default_provider = "local"
        [providers.local]
        kind = "openai"
        base_url = "http://127.0.0.1:11434/v1"
        default_model = "llama3.2"
        [providers.scripted]
        kind = "scripted"
        "#,
    )
    .expect("should succeed");
    config
        .apply_env(|name| match name {
            "PARLEY_DEFAULT_PROVIDER" => Some("scripted".into()),
            "PARLEY_PROVIDER_LOCAL_MODEL" => Some("qwen3".into()),
            "PARLEY_MAX_CONCURRENT_RUNS" => Some("8".into()),
            _ => None,
        })
        .expect("should succeed");
    assert_eq!(config.default_provider, "scripted");
    assert_eq!(config.max_concurrent_runs, 8);
    assert_eq!(
        config.providers["local"].default_model.as_deref(),
        Some("qwen3")
    );
    assert!(
        config
            .apply_env(|name| (name == "PARLEY_MAX_CONCURRENT_RUNS").then(|| "many".into()))
            .is_err()
    );
}

#[test]
fn inconsistent_configs_are_refused() {
    let unknown_default =
        RunnerConfig::from_toml("default_provider = \"x\"\n[providers.s]\nkind = \"scripted\"")
            .expect("should succeed");
    assert!(unknown_default.validate().is_err());
    let no_url = RunnerConfig::from_toml(
        "default_provider = \"o\"\n[providers.o]\nkind = \"openai\"\ndefault_model = \"m\"",
    )
    .expect("should succeed");
    assert!(no_url.validate().is_err());
    assert!(
        RunnerConfig::from_toml(
            "default_provider = \"o\"\napi_key = \"sk-secret\"\n[providers.o]\nkind = \"scripted\""
        )
        .is_err()
    );
    let zero = RunnerConfig::from_toml("default_provider = \"s\"\n[limits]\nmax_iterations = 0\n[providers.s]\nkind = \"scripted\"").expect("should succeed");
    assert!(zero.validate().is_err());
}

#[test]
fn api_keys_come_from_the_environment() {
    let config = RunnerConfig::from_toml(
        "default_provider = \"o\"\n[providers.o]\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:1/v1\"\ndefault_model = \"m\"\napi_key_env = \"MY_KEY\"",
    )
    .expect("should succeed");
    let seen = std::sync::Mutex::new(Vec::new());
    config
        .build_providers(|name| {
            seen.lock().expect("should succeed").push(name.to_owned());
            Some("sk-test".into())
        })
        .expect("should succeed");
    assert_eq!(
        *seen.lock().expect("should succeed"),
        vec!["MY_KEY".to_owned()]
    );
}

#[test]
fn configured_providers_never_show_their_keys() {
    for kind in ["openai", "anthropic", "gemini"] {
        let config = RunnerConfig::from_toml(&format!(
            "default_provider = \"p\"\n[providers.p]\nkind = \"{kind}\"\nbase_url = \"http://127.0.0.1:1\"\ndefault_model = \"m\"\napi_key_env = \"MY_KEY\""
        ))
        .expect("should succeed");
        let providers = config
            .build_providers(|_| Some("sk-very-secret".into()))
            .expect("should succeed");
        let text = format!("{providers:?}");
        assert!(text.contains("api_key"), "{kind}: {text}");
        assert!(!text.contains("sk-very-secret"), "{kind}: {text}");
    }
}
