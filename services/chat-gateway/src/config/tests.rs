//! Tests of `config`.

use std::path::Path;

use super::*;

fn from_toml(text: &str) -> Result<GatewayConfig, ConfigError> {
    let mut file = tempfile::Builder::new()
        .suffix(".toml")
        .tempfile()
        .expect("a temporary file");
    std::io::Write::write_all(&mut file, text.as_bytes()).expect("write it");
    GatewayConfig::load(Some(file.path()), [], Flags::default())
}

#[test]
fn defaults_form_the_local_stack() {
    let config = GatewayConfig::load(None, [], Flags::default()).expect("defaults are valid");
    assert_eq!(config.server.listen, "127.0.0.1:50051");
    assert_eq!(config.server.metrics_listen, "127.0.0.1:9464");
    assert_eq!(config.upstream.runner_url, "http://127.0.0.1:50052");
    assert_eq!(config.upstream.parser_url, "http://127.0.0.1:50053");
    assert_eq!(config.store.database_url, "sqlite://parley.db?mode=rwc");
    assert!(config.auth.jwt.is_empty() && config.auth.static_tokens.is_empty());
}

#[test]
fn the_documented_file_parses_and_validates() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/config");
    for name in ["gateway.toml", "gateway.kubernetes.toml"] {
        GatewayConfig::load(Some(&root.join(name)), [], Flags::default())
            .unwrap_or_else(|error| panic!("{name}: {error}"));
    }
}

#[test]
fn every_default_is_in_the_documented_file() {
    // deploy/config/gateway.toml writes every key with its default, so
    // the file a reader opens and the code agree.
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/config/gateway.toml");
    let written: toml::Table =
        toml::from_str(&std::fs::read_to_string(path).expect("read")).expect("TOML");
    let defaults: toml::Table = toml::from_str(&parley_grpc::config::defaults_toml(
        &GatewayConfig::default(),
    ))
    .expect("the defaults as TOML");
    for (section, table) in &defaults {
        let Some(table) = table.as_table() else {
            continue;
        };
        for (key, value) in table {
            if value.is_array() {
                continue; // [[auth.jwt]], [[auth.static_tokens]]: examples only
            }
            let documented = written
                .get(section)
                .and_then(|s| s.get(key))
                .unwrap_or_else(|| panic!("gateway.toml lacks {section}.{key}"));
            assert_eq!(documented, value, "{section}.{key}");
        }
    }
}

#[test]
fn unknown_keys_and_bad_values_are_named() {
    let error = from_toml("[turns]\nmax_concurent = 3\n").expect_err("typo is refused");
    assert!(error.to_string().contains("max_concurent"), "{error}");

    let error =
        from_toml("[upstream]\nrunner_url = \"localhost:50052\"\n").expect_err("scheme required");
    assert!(error.to_string().contains("upstream.runner_url"), "{error}");

    let error = from_toml("[store]\ndatabase_url = \"mysql://db\"\n").expect_err("mysql");
    assert!(error.to_string().contains("store.database_url"), "{error}");

    for bad in ["\"\"", "\"open ai/x\"", "\"openai/\""] {
        let error = from_toml(&format!("[tenants.acme]\nmodels_allowed = [{bad}]\n"))
            .expect_err("not a model's name");
        assert!(
            error.to_string().contains("tenants.acme.models_allowed"),
            "{error}"
        );
    }
    let config = from_toml(
        "[tenants.acme]\nmodels_allowed = [\"cheap\", \"openai/gpt-4.1-nano\"]\n\
         [attachments]\nmax_bytes = 1048576\nupload_timeout = \"30s\"\n",
    )
    .expect("valid");
    assert_eq!(
        config.tenants["acme"].models_allowed.as_deref(),
        Some(&["cheap".to_owned(), "openai/gpt-4.1-nano".to_owned()][..])
    );
    assert_eq!(config.attachments.max_bytes, 1_048_576);
    let error = from_toml("[attachments]\nmax_bytes = 0\n").expect_err("zero");
    assert!(
        error.to_string().contains("attachments.max_bytes"),
        "{error}"
    );

    let error = from_toml("[turns]\nmax_concurrent = 0\n").expect_err("zero");
    assert!(
        error.to_string().contains("turns.max_concurrent"),
        "{error}"
    );

    let error = from_toml(
        "[turns]\nhistory_max_bytes = 8388608\n[upstream]\nrunner_max_request_bytes = 16777216\n",
    )
    .expect_err("a history budget the runner cannot take");
    assert!(
        error.to_string().contains("turns.history_max_bytes")
            && error
                .to_string()
                .contains("upstream.runner_max_request_bytes"),
        "{error}"
    );
    from_toml(
        "[turns]\nhistory_max_bytes = 8388608\n[upstream]\nrunner_max_request_bytes = 41943040\n",
    )
    .expect("room when the runner takes more");

    let error = from_toml("[turns]\nlease_renew = \"5s\"\nlease_ttl = \"5s\"\n")
        .expect_err("a lease shorter than its renewal");
    assert!(error.to_string().contains("turns.lease_ttl"), "{error}");
}

#[test]
fn upstreams_may_be_unix_sockets_and_a_bad_one_names_its_key() {
    let config = from_toml(
        "[upstream]\nparser_url = \"unix:/run/parley/parser.sock\"\nrunner_url = \"unix:///run/parley/runner.sock\"\n",
    )
    .expect("unix: URLs are valid");
    assert_eq!(config.upstream.parser_url, "unix:/run/parley/parser.sock");

    for (url, why) in [
        ("unix:", "names no socket path"),
        ("unix://parser/run/parser.sock", "names a host"),
    ] {
        let error = from_toml(&format!("[upstream]\nparser_url = \"{url}\"\n"))
            .expect_err("refused")
            .to_string();
        assert!(
            error.contains("upstream.parser_url") && error.contains(why),
            "{error}"
        );
    }
}

#[test]
fn layers_apply_in_order() {
    let mut file = tempfile::Builder::new()
        .suffix(".toml")
        .tempfile()
        .expect("a temporary file");
    std::io::Write::write_all(
        &mut file,
        b"[server]\nlisten = \"0.0.0.0:1\"\n[turns]\nlease_ttl = \"20s\"\n",
    )
    .expect("write");
    let vars = [
        ("PARLEY_TURNS__LEASE_TTL".to_owned(), "30s".to_owned()),
        ("PARLEY_TURNS__MAX_CONCURRENT".to_owned(), "7".to_owned()),
    ];
    let config = GatewayConfig::load(
        Some(file.path()),
        vars,
        Flags {
            server: ServerFlags {
                listen: Some("127.0.0.1:9".into()),
                drain_timeout: Some(Duration::from_millis(1500)),
                ..ServerFlags::default()
            },
            runner_url: Some("http://runner:1".into()),
            max_concurrent_turns: Some(3),
            dev_auth: true,
            ..Flags::default()
        },
    )
    .expect("loads");
    assert_eq!(config.server.listen, "127.0.0.1:9");
    assert_eq!(config.server.drain_timeout, Duration::from_millis(1500));
    assert_eq!(config.upstream.runner_url, "http://runner:1");
    assert_eq!(config.upstream.parser_url, "http://127.0.0.1:50053");
    assert_eq!(config.turns.max_concurrent, 3, "the flag wins");
    assert_eq!(
        config.turns.lease_ttl,
        Duration::from_secs(30),
        "the environment over the file"
    );
    assert!(config.auth.dev);
}

#[test]
fn auth_sections_parse() {
    let text = r#"
        [auth]
        leeway = "5s"
        [[auth.jwt]]
        issuer = "https://id.example"
        audience = "parley"
        algorithm = "RS256"
        public_key_file = "/etc/parley/jwt.pem"
        [[auth.static_tokens]]
        user = "ci"
        token_env = "PARLEY_CI_TOKEN"
        token = "inline-secret"
    "#;
    let config = from_toml(text).expect("parses");
    assert_eq!(config.auth.jwt[0].algorithm, JwtAlgorithm::RS256);
    assert_eq!(config.auth.static_tokens[0].user, "ci");
    assert_eq!(config.auth.leeway, Duration::from_secs(5));
    let printed = parley_grpc::config::defaults_toml(&config);
    assert!(!printed.contains("inline-secret"), "{printed}");

    let with_secrets = from_toml(
        r#"
        [store]
        database_url = "postgres://parley:db-password@db/parley"
        [[auth.jwt]]
        issuer = "https://id.example"
        audience = "parley"
        algorithm = "RS256"
        jwks_url = "https://client:jwks-password@id.example/jwks.json"
        "#,
    )
    .expect("parses");
    let printed = parley_grpc::config::defaults_toml(&with_secrets);
    assert!(
        !printed.contains("db-password") && !printed.contains("jwks-password"),
        "{printed}"
    );
    assert!(
        printed.contains("https://client:***@id.example/jwks.json"),
        "{printed}"
    );
}

#[test]
fn the_object_store_is_checked_at_start_and_takes_no_inline_secret() {
    let s3 = |extra: &str| {
        from_toml(&format!(
            "[attachments]\nstore = \"s3\"\n[attachments.s3]\nendpoint = \"http://127.0.0.1:9000\"\nbucket = \"parley-files\"\npath_style = true\n{extra}"
        ))
    };
    let config = s3("access_key_id_env = \"KEY\"\nsecret_access_key_file = \"/run/s3-secret\"\n")
        .expect("valid");
    assert_eq!(config.attachments.store, AttachmentStore::S3);
    let (key, secret, token) = config.attachments.s3.credentials();
    assert_eq!(key.env.as_deref(), Some("KEY"));
    assert_eq!(secret.file.as_deref(), Some(Path::new("/run/s3-secret")));
    assert!(token.is_none());
    // The variables AWS's tools read, unless told otherwise.
    let (key, secret, _) = s3("").expect("valid").attachments.s3.credentials();
    assert_eq!(
        (key.env.as_deref(), secret.env.as_deref()),
        (Some("AWS_ACCESS_KEY_ID"), Some("AWS_SECRET_ACCESS_KEY"))
    );
    for (extra, key) in [
        ("secret_access_key = \"abc\"\n", "secret_access_key"),
        ("path_style = false\n", "attachments.s3.path_style"),
        ("bucket = \"Bad_Bucket\"\n", "attachments.s3.bucket"),
        ("prefix = \"/x\"\n", "attachments.s3.prefix"),
        (
            "access_key_id_env = \"K\"\naccess_key_id_file = \"/k\"\n",
            "access_key_id_file",
        ),
    ] {
        // Later keys of the same name are refused by TOML itself; write
        // the table again with the change.
        let text = format!(
            "[attachments]\nstore = \"s3\"\n[attachments.s3]\nendpoint = \"http://127.0.0.1:9000\"\n{}{extra}",
            if extra.starts_with("bucket") {
                ""
            } else {
                "bucket = \"parley-files\"\n"
            },
        );
        let text = if extra.starts_with("path_style") {
            text
        } else {
            text.replace(
                "[attachments.s3]\n",
                "[attachments.s3]\npath_style = true\n",
            )
        };
        let error = from_toml(&text).expect_err(extra);
        assert!(error.to_string().contains(key), "{extra}: {error}");
    }
    let error = from_toml("[attachments]\nstore = \"s3\"\n").expect_err("no bucket");
    assert!(
        error.to_string().contains("attachments.s3.bucket"),
        "{error}"
    );
}

#[test]
fn web_origins_are_named_ones_and_off_by_default() {
    let config = GatewayConfig::default();
    assert!(!config.web.enabled && config.web.allowed_origins.is_empty());
    for bad in ["*", "https://app.example.com/", "app.example.com"] {
        let error = from_toml(&format!("[web]\nallowed_origins = [\"{bad}\"]\n"))
            .expect_err("not an origin");
        assert!(error.to_string().contains("web.allowed_origins"), "{error}");
    }
    let config = from_toml(
        "[web]\nenabled = true\nallowed_origins = [\"https://app.example.com\", \"http://localhost:3000\"]\n",
    )
    .expect("valid");
    assert_eq!(config.web.allowed_origins.len(), 2);
    let error = from_toml("[web]\nmax_request_bytes = 0\n").expect_err("zero");
    assert!(
        error.to_string().contains("web.max_request_bytes"),
        "{error}"
    );
}
