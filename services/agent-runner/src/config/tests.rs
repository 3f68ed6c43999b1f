//! Configuration layers, validation and provider building.

use super::*;
use crate::app::providers::{build_providers, build_providers_reloadable};

fn vars(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

/// The configuration of a file holding `text` (and the given variables).
fn with_file(text: &str, env: &[(&str, &str)]) -> Result<RunnerConfig, ConfigError> {
    let mut file = tempfile::Builder::new()
        .suffix(".toml")
        .tempfile()
        .expect("a temporary file");
    std::io::Write::write_all(&mut file, text.as_bytes()).expect("write it");
    RunnerConfig::load(Some(file.path()), vars(env), Flags::default())
}

#[test]
fn the_shipped_runner_config_is_valid() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/config/runner.toml");
    let config = RunnerConfig::load(Some(&path), [], Flags::default()).expect("valid");
    assert_eq!(config.default_provider, "scripted");
    assert_eq!(config.limits.tool_timeout, Duration::from_secs(30));
    let providers = build_providers(&config, |_| None).expect("should succeed");
    assert!(providers.get("scripted").is_some());
    for name in ["openai", "ollama", "openrouter", "anthropic", "gemini"] {
        assert!(providers.get(name).is_some(), "{name}");
    }
}

/// The runner configuration `kubectl apply -k deploy` ships: valid, its
/// providers' keys read from the mounted Secret's files, and a runner
/// whose Secret lacks a provider's key still starts (that provider calls
/// unauthenticated until the file appears and SIGHUP reads it).
#[test]
fn the_shipped_kubernetes_runner_config_is_valid_and_reads_keys_from_files() {
    use secrecy::ExposeSecret;
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/config/runner.kubernetes.toml");
    let config = RunnerConfig::load(Some(&path), [], Flags::default()).expect("valid");
    assert_eq!(config.default_provider, "scripted");
    assert_eq!(
        config
            .tools
            .registry
            .as_ref()
            .map(|file| config.base_dir.join(file)),
        Some(path.with_file_name("registry.yaml")),
        "the registry the kustomization ships beside it"
    );
    for name in ["openai", "anthropic", "gemini"] {
        let provider = config.providers.entries.get(name).expect(name);
        assert!(
            provider.api_key_env.is_none(),
            "{name}: no key from the environment"
        );
        let file = provider.api_key_file.as_ref().expect("a key file");
        assert!(
            file.starts_with("/var/run/secrets/parley/providers/"),
            "{name}: {}",
            file.display()
        );
    }
    let mut reloadable = Vec::new();
    let providers = build_providers_reloadable(&config, |_| None, &mut reloadable)
        .expect("starts without the key files");
    assert!(providers.get("openai").is_some());
    assert_eq!(reloadable.len(), 3, "each key file is read again on SIGHUP");
    config
        .allowed(&providers)
        .expect("the registry's endpoints");

    // A key file that appears later is read by the next reload.
    let dir = tempfile::tempdir().expect("temp dir");
    let key = dir.path().join("OPENAI_API_KEY");
    let text = format!(
        "default_provider = \"openai\"\n[providers.openai]\nkind = \"openai\"\n\
         base_url = \"http://127.0.0.1:9/v1\"\napi_key_file = \"{}\"\n\
         default_model = \"m\"\n",
        key.display()
    );
    let config = with_file(&text, &[]).expect("valid");
    let mut reloadable = Vec::new();
    build_providers_reloadable(&config, |_| None, &mut reloadable).expect("starts");
    let [slot] = <[_; 1]>::try_from(reloadable).expect("one key");
    assert!(slot.slot.get().is_none(), "no key yet");
    std::fs::write(&key, "sk-later\n").expect("write key");
    assert!(slot.reload(|_| None), "read again");
    assert_eq!(slot.slot.get().expect("a key").expose_secret(), "sk-later");
}

#[test]
fn no_config_means_the_scripted_demo() {
    let config = RunnerConfig::load(None, [], Flags::default()).expect("valid");
    assert_eq!(config.server.listen, "127.0.0.1:50052");
    assert_eq!(config.server.metrics_listen, "127.0.0.1:9465");
    let providers = build_providers(&config, |_| None).expect("should succeed");
    let resolved = providers.resolve(crate::provider::ModelChoice {
        provider: String::new(),
        model: String::new(),
        params: Default::default(),
    });
    assert_eq!(
        resolved.map(|c| (c.provider, c.model)),
        Ok(("scripted".to_owned(), "scripted-demo".to_owned()))
    );

    let script = PathBuf::from("/tmp/my-script.toml");
    let config = RunnerConfig::load(
        None,
        [],
        Flags {
            script: Some(script.clone()),
            ..Flags::default()
        },
    )
    .expect("valid");
    assert_eq!(config.providers[SCRIPTED].script, Some(script));
}

const LOCAL: &str = r#"
    default_provider = "local"
    [providers.local]
    kind = "openai"
    base_url = "http://127.0.0.1:11434/v1"
    default_model = "llama3.2"
    [providers.my-box]
    kind = "openai"
    base_url = "http://127.0.0.1:1/v1"
    default_model = "m"
    [providers.scripted]
    kind = "scripted"
"#;

#[test]
fn environment_and_flags_override_the_file() {
    let config = with_file(
        LOCAL,
        &[
            ("PARLEY_PROVIDERS__LOCAL__DEFAULT_MODEL", "qwen3"),
            ("PARLEY_LIMITS__TOOL_TIMEOUT", "5s"),
            ("PARLEY_MAX_CONCURRENT_RUNS", "8"), // a flag's variable: the flag reads it
        ],
    )
    .expect("valid");
    assert_eq!(
        config.providers["local"].default_model.as_deref(),
        Some("qwen3")
    );
    assert_eq!(config.limits.tool_timeout, Duration::from_secs(5));
    assert_eq!(config.max_concurrent_runs, 256);

    let mut file = tempfile::Builder::new()
        .suffix(".toml")
        .tempfile()
        .expect("a temporary file");
    std::io::Write::write_all(&mut file, LOCAL.as_bytes()).expect("write it");
    let config = RunnerConfig::load(
        Some(file.path()),
        [],
        Flags {
            default_provider: Some("scripted".into()),
            max_concurrent_runs: Some(8),
            server: ServerFlags {
                drain_timeout: Some(Duration::from_secs(60)),
                ..ServerFlags::default()
            },
            ..Flags::default()
        },
    )
    .expect("valid");
    assert_eq!(config.default_provider, "scripted");
    assert_eq!(config.max_concurrent_runs, 8);
    assert_eq!(config.server.drain_timeout, Duration::from_secs(60));

    let error =
        with_file(LOCAL, &[("PARLEY_LIMITS__MAX_ITERATIONS", "many")]).expect_err("not a number");
    assert!(
        error.to_string().contains("PARLEY_LIMITS__MAX_ITERATIONS"),
        "{error}"
    );
}

#[test]
fn inconsistent_configs_are_refused() {
    let error = with_file(
        "default_provider = \"x\"\n[providers.s]\nkind = \"scripted\"",
        &[],
    )
    .expect_err("unknown default");
    assert!(error.to_string().contains("default_provider"), "{error}");
    let error = with_file(
        "default_provider = \"o\"\n[providers.o]\nkind = \"openai\"\ndefault_model = \"m\"",
        &[],
    )
    .expect_err("no url");
    assert!(
        error.to_string().contains("providers.o.base_url"),
        "{error}"
    );
    let error = with_file(
        "default_provider = \"o\"\napi_key = \"sk-secret\"\n[providers.o]\nkind = \"scripted\"",
        &[],
    )
    .expect_err("a key in the file");
    assert!(error.to_string().contains("api_key"), "{error}");
    let error = with_file("[limits]\nmax_iterations = 0\n", &[]).expect_err("zero");
    assert!(
        error.to_string().contains("limits.max_iterations"),
        "{error}"
    );
    let error = with_file("[limits]\ntool_timeout = \"0s\"\n", &[]).expect_err("zero");
    assert!(error.to_string().contains("limits.tool_timeout"), "{error}");
}

/// An OpenAI provider whose key is in `MY_KEY`.
fn keyed(kind: &str) -> RunnerConfig {
    with_file(
        &format!(
            "default_provider = \"p\"\n[providers.p]\nkind = \"{kind}\"\nbase_url = \"http://127.0.0.1:1\"\ndefault_model = \"m\"\napi_key_env = \"MY_KEY\""
        ),
        &[],
    )
    .expect("valid")
}

#[test]
fn api_keys_come_from_the_environment() {
    let config = keyed("openai");
    let seen = std::sync::Mutex::new(Vec::new());
    build_providers(&config, |name| {
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
        let providers = build_providers(&keyed(kind), |_| Some("sk-very-secret".into()))
            .expect("should succeed");
        let text = format!("{providers:?}");
        assert!(text.contains("api_key"), "{kind}: {text}");
        assert!(!text.contains("sk-very-secret"), "{kind}: {text}");
    }
}

const MCP: &str = r#"
[mcp_servers.time]
command = ["python3", "-m", "mcp_server_time"]
env = { API_TOKEN = "TIME_API_TOKEN" }

[mcp_servers.search]
url = "http://search:8000/mcp"
headers = { Authorization = "SEARCH_AUTHORIZATION" }
"#;

#[test]
fn mcp_servers_load_from_the_file_and_the_environment() {
    let config = with_file(
        MCP,
        &[
            ("PARLEY_MCP_SERVERS__TIME__STARTUP_TIMEOUT", "5s"),
            (
                "PARLEY_MCP_SERVERS__SEARCH__URL",
                "http://search-2:8000/mcp",
            ),
            ("PARLEY_MCP_SERVERS__EXTRA__URL", "http://extra:9000/mcp"),
            // The secrets themselves are not configuration: never read as such.
            ("TIME_API_TOKEN", "sk-secret"),
        ],
    )
    .expect("valid");
    let time = &config.mcp_servers["time"];
    assert_eq!(
        time.command.as_deref(),
        Some(&["python3".to_owned(), "-m".into(), "mcp_server_time".into()][..])
    );
    // The file names the variable; the value is read when the server starts.
    assert_eq!(time.env["API_TOKEN"], "TIME_API_TOKEN");
    assert_eq!(time.startup_timeout, Duration::from_secs(5));
    assert_eq!(time.restart_backoff, Duration::from_millis(500));
    let search = &config.mcp_servers["search"];
    assert_eq!(search.url.as_deref(), Some("http://search-2:8000/mcp"));
    assert_eq!(search.headers["Authorization"], "SEARCH_AUTHORIZATION");
    // A whole server from the environment, with the defaults.
    let extra = &config.mcp_servers["extra"];
    assert_eq!(extra.url.as_deref(), Some("http://extra:9000/mcp"));
    assert_eq!(extra.max_output_bytes, 1024 * 1024);
    assert!(!format!("{config:?}").contains("sk-secret"));
}

/// A file, variables, and the key the error must name.
type BadCase = (
    &'static str,
    &'static [(&'static str, &'static str)],
    &'static str,
);

#[test]
fn a_bad_mcp_server_entry_names_its_key() {
    let cases: [BadCase; 6] = [
        (
            "[mcp_servers.time]\ncommand = []\n",
            &[],
            "mcp_servers.time.command",
        ),
        (
            "[mcp_servers.time]\ncommand = [\"prog\"]\nurl = \"http://h:1/mcp\"\n",
            &[],
            "mcp_servers.time",
        ),
        // A secret written into the file instead of a variable's name.
        (
            "[mcp_servers.time]\ncommand = [\"prog\"]\nenv = { API_TOKEN = \"token=sk-123\" }\n",
            &[],
            "mcp_servers.time",
        ),
        (
            "[mcp_servers.time]\ncommand = [\"prog\"]\ncommnd = [\"prog\"]\n",
            &[],
            "commnd",
        ),
        (
            "[mcp_servers.time]\ncommand = [\"prog\"]\n",
            &[("PARLEY_MCP_SERVERS__TIME__STARTUP_TIMEOUT", "soon")],
            "PARLEY_MCP_SERVERS__TIME__STARTUP_TIMEOUT",
        ),
        (
            "[mcp_servers.\"a__b\"]\ncommand = [\"prog\"]\n",
            &[],
            "mcp_servers.a__b",
        ),
    ];
    for (file, env, key) in cases {
        let error = with_file(file, env).expect_err(file);
        assert!(error.to_string().contains(key), "{file}: {error}");
    }
}

#[test]
fn provider_answer_limits_load_beside_the_providers() {
    let config = RunnerConfig::load(None, [], Flags::default()).expect("valid");
    assert_eq!(config.providers.limits(), ResponseLimits::DEFAULT);
    let config = with_file(
        "default_provider = \"local\"\n[providers]\nmax_event_bytes = 4096\n\
         [providers.local]\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:1/v1\"\n\
         default_model = \"m\"\n",
        &[("PARLEY_PROVIDERS__MAX_RESPONSE_BYTES", "65536")],
    )
    .expect("valid");
    assert_eq!(
        config.providers.limits(),
        ResponseLimits {
            max_event_bytes: 4096,
            max_response_bytes: 65536,
        }
    );
    assert!(config.providers.contains_key("local"));
    assert_eq!(config.providers.len(), 1);
    let error = with_file("[providers]\nmax_event_bytes = 0\n", &[]).expect_err("zero");
    assert!(
        error.to_string().contains("providers.max_event_bytes"),
        "{error}"
    );
}

#[test]
fn allow_list_patterns_are_checked_with_their_keys() {
    let config = with_file(
        "[tools]\nallowed_endpoints = [\"*.tools.svc.cluster.local:443\", \"tools.example.com:*\"]\nregistry = \"registry.yaml\"\n[models]\nallowed = [\"scripted/scripted-*\"]\n",
        &[],
    )
    .expect("valid");
    assert_eq!(config.tools.registry, Some(PathBuf::from("registry.yaml")));
    assert_eq!(config.models.allowed.as_ref().map(Vec::len), Some(1));
    // The registry is read when the runner is built: missing, it stops the start.
    let providers = build_providers(&config, |_| None).expect("providers");
    let error = config.allowed(&providers).expect_err("no registry file");
    assert!(error.to_string().contains("tools.registry"), "{error}");

    for (text, key) in [
        (
            "[tools]\nallowed_endpoints = [\"*:443\"]\n",
            "tools.allowed_endpoints",
        ),
        (
            "[tools]\nallowed_endpoints = [\"a.*.b:443\"]\n",
            "tools.allowed_endpoints",
        ),
        (
            "[tools]\nallowed_endpoints = [\"http://a:443\"]\n",
            "tools.allowed_endpoints",
        ),
        (
            "[models]\nallowed = [\"openai/gpt-4.1*\"]\n",
            "models.allowed",
        ),
        ("[models]\nallowed = [\"scripted/a*b\"]\n", "models.allowed"),
        ("[tools]\nallowed = []\n", "allowed"),
    ] {
        let error = with_file(text, &[]).expect_err(text);
        assert!(error.to_string().contains(key), "{text}: {error}");
    }
}

#[test]
fn without_allow_lists_no_endpoint_and_only_default_models_are_allowed() {
    let config = RunnerConfig::load(None, [], Flags::default()).expect("valid");
    let providers = build_providers(&config, |_| None).expect("providers");
    let allowed = config.allowed(&providers).expect("allowed");
    assert!(allowed.endpoints.describe().is_empty());
    assert_eq!(
        allowed.models.describe(),
        vec!["scripted/scripted-demo".to_owned()]
    );
}
