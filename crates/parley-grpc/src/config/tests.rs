use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::*;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct Sample {
    server: ServerConfig,
    turns: Turns,
    name: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct Turns {
    max_concurrent: u32,
    event_log: bool,
    #[serde(with = "duration")]
    lease_ttl: Duration,
}

impl Default for Sample {
    fn default() -> Self {
        Self {
            server: ServerConfig::local(50051, 9464),
            turns: Turns::default(),
            name: None,
        }
    }
}

impl Default for Turns {
    fn default() -> Self {
        Self {
            max_concurrent: 256,
            event_log: true,
            lease_ttl: Duration::from_secs(10),
        }
    }
}

/// A TOML file with `text`, removed when dropped.
fn toml_file(text: &str) -> tempfile::NamedTempFile {
    let mut file = tempfile::Builder::new()
        .suffix(".toml")
        .tempfile()
        .expect("a temporary file");
    std::io::Write::write_all(&mut file, text.as_bytes()).expect("write it");
    file
}

fn vars(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

#[test]
fn each_layer_overrides_the_one_before() {
    let file = toml_file(
        "[server]\nlisten = \"0.0.0.0:1\"\n[turns]\nmax_concurrent = 8\nlease_ttl = \"30s\"\n",
    );
    let config: Sample = Layers::new(&Sample::default())
        .expect("defaults")
        .file(file.path())
        .expect("file")
        .env_from(vars(&[
            ("PARLEY_TURNS__MAX_CONCURRENT", "16"),
            ("PARLEY_TURNS__EVENT_LOG", "false"),
            ("PARLEY_LISTEN", "ignored: a flag's variable"),
            ("HOME", "/root"),
        ]))
        .flag("server.listen", Some("127.0.0.1:9"))
        .expect("flag")
        .flag::<String>("name", None)
        .expect("unset flag")
        .extract()
        .expect("merges");
    assert_eq!(config.server.listen, "127.0.0.1:9", "flag over file");
    assert_eq!(
        config.server.metrics_listen, "127.0.0.1:9464",
        "default kept"
    );
    assert_eq!(config.turns.max_concurrent, 16, "environment over file");
    assert!(!config.turns.event_log, "a boolean from a string");
    assert_eq!(
        config.turns.lease_ttl,
        Duration::from_secs(30),
        "file over default"
    );
    assert_eq!(config.name, None);
}

#[test]
fn durations_are_humantime_everywhere() {
    assert_eq!(duration::parse("500ms"), Ok(Duration::from_millis(500)));
    assert_eq!(duration::parse("20s"), Ok(Duration::from_secs(20)));
    assert_eq!(duration::parse("1h 30m"), Ok(Duration::from_secs(5400)));
    assert_eq!(duration::parse("1day"), Ok(Duration::from_secs(86_400)));
    let bare = duration::parse("20").expect_err("no unit");
    assert!(bare.contains("20s or 20ms"), "{bare}");
    assert!(duration::parse("soon").is_err());
    assert_eq!(duration::format(Duration::from_millis(2_500)), "2s 500ms");

    let config: Sample = Layers::new(&Sample::default())
        .expect("defaults")
        .env_from(vars(&[("PARLEY_TURNS__LEASE_TTL", "1m")]))
        .extract()
        .expect("merges");
    assert_eq!(config.turns.lease_ttl, Duration::from_secs(60));

    let file = toml_file("[turns]\nlease_ttl = 10000\n");
    let error = Layers::new(&Sample::default())
        .expect("defaults")
        .file(file.path())
        .expect("file")
        .extract::<Sample>()
        .expect_err("a bare number");
    let message = error.to_string();
    assert!(
        message.contains("10000s") && message.contains("turns.lease_ttl"),
        "{message}"
    );
}

#[test]
fn errors_name_the_key_and_its_layer() {
    let file = toml_file("[turns]\nmax_concurent = 3\n");
    let message = Layers::new(&Sample::default())
        .expect("defaults")
        .file(file.path())
        .expect("file")
        .extract::<Sample>()
        .expect_err("typo")
        .to_string();
    assert!(message.contains("max_concurent"), "{message}");
    assert!(
        message.contains(&file.path().display().to_string()),
        "{message}"
    );

    let message = Layers::new(&Sample::default())
        .expect("defaults")
        .env_from(vars(&[("PARLEY_TURNS__MAX_CONCURRENT", "many")]))
        .extract::<Sample>()
        .expect_err("not a number")
        .to_string();
    assert!(
        message.contains("PARLEY_TURNS__MAX_CONCURRENT"),
        "{message}"
    );

    let message = Layers::new(&Sample::default())
        .expect("defaults")
        .flag("turns.lease_ttl", Some("soon"))
        .expect("flag")
        .extract::<Sample>()
        .expect_err("not a duration")
        .to_string();
    assert!(message.contains("--turns.lease_ttl"), "{message}");

    let missing = Layers::new(&Sample::default())
        .expect("defaults")
        .file(std::path::Path::new("/nonexistent/parley.toml"))
        .expect_err("no file");
    assert!(
        missing.to_string().contains("/nonexistent/parley.toml"),
        "{missing}"
    );

    let file = toml_file("[turns\n");
    let error = Layers::new(&Sample::default())
        .expect("defaults")
        .file(file.path())
        .expect_err("not TOML");
    assert!(error.to_string().contains("not valid TOML"), "{error}");
}

#[test]
fn the_help_footer_prints_every_default() {
    let footer = help_footer("deploy/config/x.toml", &Sample::default());
    assert!(footer.contains("[turns]\nmax_concurrent = 256"), "{footer}");
    assert!(footer.contains("lease_ttl = \"10s\""), "{footer}");
    assert!(footer.contains("drain_timeout = \"20s\""), "{footer}");
}

#[test]
fn server_addresses_are_checked() {
    let mut server = ServerConfig::local(1, 2);
    server.validate().expect("valid");
    server.metrics_listen = "off".into();
    assert_eq!(server.metrics().expect("off"), MetricsListen(None));
    server.listen = "localhost".into();
    assert!(
        server
            .validate()
            .expect_err("no port")
            .to_string()
            .contains("server.listen")
    );
}

#[test]
fn the_unix_socket_is_off_by_default_and_set_by_each_layer() {
    let defaults = Sample::default();
    assert_eq!(defaults.server.uds_path().expect("off"), None);
    assert!(
        defaults_toml(&defaults).contains("uds_listen = \"off\""),
        "--help and --print-config show it"
    );

    let file = toml_file("[server]\nuds_listen = \"/run/parley/file.sock\"\n");
    let layers = || {
        Layers::new(&Sample::default())
            .expect("defaults")
            .file(file.path())
            .expect("file")
    };
    let from_file: Sample = layers().extract().expect("merges");
    assert_eq!(
        from_file.server.uds_path().expect("a path"),
        Some(PathBuf::from("/run/parley/file.sock"))
    );
    let from_env: Sample = layers()
        .env_from(vars(&[(
            "PARLEY_SERVER__UDS_LISTEN",
            "/run/parley/env.sock",
        )]))
        .extract()
        .expect("merges");
    assert_eq!(from_env.server.uds_listen, "/run/parley/env.sock");
    let flags = ServerFlags {
        uds_listen: Some("/run/parley/flag.sock".into()),
        ..ServerFlags::default()
    };
    let from_flag: Sample = layers()
        .env_from(vars(&[(
            "PARLEY_SERVER__UDS_LISTEN",
            "/run/parley/env.sock",
        )]))
        .flags(&flags)
        .expect("flags")
        .extract()
        .expect("merges");
    assert_eq!(from_flag.server.uds_listen, "/run/parley/flag.sock");
    let off: Sample = layers()
        .env_from(vars(&[("PARLEY_SERVER__UDS_LISTEN", "off")]))
        .extract()
        .expect("merges");
    assert_eq!(off.server.uds_path().expect("off"), None);
}

#[test]
fn a_bad_unix_socket_path_names_its_key() {
    let mut server = ServerConfig::local(1, 2);
    for bad in [String::new(), format!("/{}", "x".repeat(200))] {
        server.uds_listen = bad;
        let error = server.validate().expect_err("refused").to_string();
        assert!(error.contains("server.uds_listen"), "{error}");
    }
}

/// A binary's flags as every service declares them: clap arguments that
/// serialise under the keys they set.
#[derive(Debug, Clone, Default, clap::Parser, Serialize)]
struct SampleFlags {
    #[command(flatten)]
    #[serde(flatten)]
    server: ServerFlags,
    #[arg(long)]
    #[serde(rename = "turns.max_concurrent")]
    max_turns: Option<u32>,
    #[arg(long, value_parser = parse_duration)]
    #[serde(rename = "turns.lease_ttl", with = "duration::option")]
    lease_ttl: Option<Duration>,
    #[arg(long)]
    #[serde(rename = "turns.event_log", skip_serializing_if = "std::ops::Not::not")]
    event_log: bool,
    #[arg(long)]
    #[serde(skip)]
    not_a_key: Option<String>,
}

#[test]
fn a_flags_struct_is_the_command_line_layer() {
    use clap::Parser;

    let file = toml_file(
        "[server]\nlisten = \"0.0.0.0:1\"\n[turns]\nmax_concurrent = 8\nevent_log = true\n",
    );
    let parse = |args: &[&str]| {
        let flags =
            SampleFlags::try_parse_from(std::iter::once("sample").chain(args.iter().copied()))
                .expect("flags parse");
        Layers::new(&Sample::default())
            .expect("defaults")
            .file(file.path())
            .expect("file")
            .flags(&flags)
            .expect("flags")
            .extract::<Sample>()
    };
    let config = parse(&[
        "--listen",
        "127.0.0.1:9",
        "--drain-timeout",
        "1m",
        "--lease-ttl",
        "1h 30m",
        "--not-a-key",
        "x",
        "--log-format",
        "text",
    ])
    .expect("merges");
    assert_eq!(config.server.listen, "127.0.0.1:9");
    assert_eq!(config.server.drain_timeout, Duration::from_secs(60));
    assert_eq!(config.turns.lease_ttl, Duration::from_secs(5400));
    assert_eq!(
        config.turns.max_concurrent, 8,
        "a flag not given leaves the file's"
    );
    assert!(
        config.turns.event_log,
        "a boolean flag not given leaves the file's"
    );
    assert_eq!(config.server.metrics_listen, "127.0.0.1:9464");

    let config = parse(&["--max-turns", "3", "--tls-cert", "/c.pem"]).expect("merges");
    assert_eq!(config.turns.max_concurrent, 3);
    assert_eq!(
        config.server.tls.cert.as_deref(),
        Some(std::path::Path::new("/c.pem"))
    );
}
