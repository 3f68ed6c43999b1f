//! Secrets and what the gateway shows of them: `--print-config` without
//! the database password, the examples' placeholder secrets refused at
//! start-up, secret files read again on SIGHUP by the real binary, and the
//! assembled system prompt of `DescribePage` for administrators only.

use std::{
    path::Path,
    process::{Command, Stdio},
    time::Duration,
};

use chat_gateway::{
    auth::Authenticator,
    config::{Flags, GatewayConfig},
};
use jsonwebtoken::{Algorithm, EncodingKey, Header, encode, get_current_timestamp};
use parley_grpc::config::ServiceConfig;
use parley_proto::gateway::v1::{self as gw, chat_gateway_client::ChatGatewayClient};
use tonic::{Code, transport::Channel};

use crate::harness::{Harness, Options, reason, with_token};

const BIN: &str = env!("CARGO_BIN_EXE_chat-gateway");
const SECRET: &str = "describe-test-secret-of-at-least-32-bytes";

fn config_from(dir: &Path, toml: &str) -> GatewayConfig {
    let file = dir.join("gateway.toml");
    std::fs::write(&file, toml).expect("write config");
    GatewayConfig::load(Some(&file), [], Flags::default()).expect("the config loads")
}

#[test]
fn print_config_leaves_the_database_password_out() {
    let output = Command::new(BIN)
        .args([
            "--print-config",
            "--database-url",
            "postgres://parley:hunter2-do-not-print@db.internal:5432/parley",
        ])
        .env_remove("PARLEY_DATABASE_URL")
        .env_remove("PARLEY_GATEWAY_CONFIG")
        .output()
        .expect("run chat-gateway --print-config");
    let printed = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{printed}");
    assert!(!printed.contains("hunter2"), "{printed}");
    assert!(
        printed.contains("postgres://parley:***@db.internal:5432/parley"),
        "{printed}"
    );
}

#[test]
fn the_examples_placeholder_secrets_stop_start_up() {
    let dir = tempfile::tempdir().expect("dir");
    for (what, toml) in [
        (
            "jwt secret",
            "[[auth.jwt]]\nissuer = \"https://auth.example.com/\"\naudience = \"parley\"\nalgorithm = \"HS256\"\nsecret = \"change-me-to-a-long-random-string\"\n",
        ),
        (
            "static token",
            "[[auth.static_tokens]]\nuser = \"ci\"\ntoken = \"change-me-0123456789abcdef\"\n",
        ),
    ] {
        let config = config_from(dir.path(), toml);
        let error = Authenticator::from_config(&config.auth, false)
            .expect_err(what)
            .to_string();
        assert!(error.contains("placeholder"), "{what}: {error}");
    }
    // The example database URL's password: the binary stops before it
    // connects anywhere, naming the key.
    let output = Command::new(BIN)
        .args([
            "--dev-auth",
            "--listen",
            "127.0.0.1:0",
            "--metrics-listen",
            "off",
            "--database-url",
            "postgres://parley:change-me@127.0.0.1:1/parley",
        ])
        .env_remove("PARLEY_DATABASE_URL")
        .env_remove("PARLEY_GATEWAY_CONFIG")
        .stdin(Stdio::null())
        .output()
        .expect("run chat-gateway");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert!(
        stderr.contains("store.database_url") && stderr.contains("placeholder"),
        "{stderr}"
    );
}

/// Runs the binary with `args` (its own SQLite file, no metrics port) and
/// returns its exit status and stderr once it exits; fails the test if it
/// is still running (serving) after 20 s.
fn run_to_exit(args: &[&str]) -> (std::process::ExitStatus, String) {
    let dir = tempfile::tempdir().expect("dir");
    let log = dir.path().join("stderr");
    let mut child = Command::new(BIN)
        .args(args)
        .arg("--metrics-listen=off")
        .arg(format!(
            "--database-url=sqlite://{}?mode=rwc",
            dir.path().join("g.db").display()
        ))
        .env_remove("PARLEY_DATABASE_URL")
        .env_remove("PARLEY_GATEWAY_CONFIG")
        .env_remove("PARLEY_DEV_AUTH")
        .env_remove("PARLEY_LISTEN")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::from(std::fs::File::create(&log).expect("log")))
        .spawn()
        .expect("run chat-gateway");
    for _ in 0..2000 {
        if let Some(status) = child.try_wait().expect("wait") {
            return (status, std::fs::read_to_string(&log).unwrap_or_default());
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let _ = child.kill();
    let _ = child.wait();
    panic!(
        "chat-gateway started instead of refusing to:\n{}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
}

#[test]
fn the_binary_without_a_verifier_or_dev_flag_refuses_to_start_naming_the_keys() {
    let (status, stderr) = run_to_exit(&["--listen=127.0.0.1:0"]);
    assert!(!status.success(), "{stderr}");
    for key in [
        "[[auth.jwt]]",
        "[[auth.static_tokens]]",
        "--dev-auth",
        "auth.dev",
    ] {
        assert!(stderr.contains(key), "{key}: {stderr}");
    }
}

#[test]
fn the_binary_refuses_dev_auth_beyond_loopback_without_its_second_switch() {
    let (status, stderr) = run_to_exit(&["--dev-auth", "--listen=0.0.0.0:0"]);
    assert!(!status.success(), "{stderr}");
    assert!(
        stderr.contains("auth.dev_allow_remote") && stderr.contains("0.0.0.0:0"),
        "{stderr}"
    );
}

fn hs256(sub: &str, extra: serde_json::Value) -> String {
    let now = i64::try_from(get_current_timestamp()).expect("time");
    let mut claims = serde_json::json!({"iss": "https://id.example", "aud": "parley", "sub": sub, "exp": now + 600});
    if let (Some(claims), Some(extra)) = (claims.as_object_mut(), extra.as_object()) {
        claims.extend(extra.clone());
    }
    encode(
        &Header::new(Algorithm::HS256),
        &claims,
        &EncodingKey::from_secret(SECRET.as_bytes()),
    )
    .expect("sign")
}

fn describe(include_system_prompt: bool) -> gw::DescribePageRequest {
    gw::DescribePageRequest {
        page: Some(gw::PageContext {
            page: "table_view".into(),
            tab: "rows".into(),
            ..Default::default()
        }),
        include_system_prompt,
    }
}

/// JWT auth with the secret in a file, and `extra` configuration.
fn jwt_auth(extra: &str) -> Authenticator {
    let dir = tempfile::tempdir().expect("dir");
    let secret = dir.path().join("secret");
    std::fs::write(&secret, format!("{SECRET}\n")).expect("write");
    let toml = format!(
        "[[auth.jwt]]\nissuer = \"https://id.example\"\naudience = \"parley\"\nalgorithm = \"HS256\"\nsecret_file = \"{}\"\n",
        secret.display()
    );
    let config = config_from(dir.path(), &format!("{extra}\n{toml}"));
    Authenticator::from_config(&config.auth, false).expect("auth")
}

#[tokio::test]
async fn describe_page_hides_the_prompt_from_callers_without_the_admin_claim() {
    let dir = tempfile::tempdir().expect("dir");
    let config = config_from(
        dir.path(),
        "[[auth.static_tokens]]\nuser = \"viewer\"\ntoken = \"viewer-token-0123456789\"\n",
    );
    let auth = Authenticator::from_config(&config.auth, false).expect("auth");
    let mut stack = Harness::start(Options {
        auth,
        ..Options::default()
    })
    .await;
    let described = stack
        .client
        .describe_page(with_token(describe(true), "viewer-token-0123456789"))
        .await
        .expect("describe")
        .into_inner();
    assert!(described.known_page);
    assert!(
        described
            .payload_types
            .iter()
            .any(|p| p.name == "data_proposal")
    );
    assert!(described.tools.iter().any(|t| t.name == "lookup_rows"));
    assert!(
        described.system_prompt.is_empty(),
        "a caller without the admin claim read the prompt:\n{}",
        &described.system_prompt[..described.system_prompt.len().min(200)]
    );
    stack.stop().await;
}

#[tokio::test]
async fn describe_page_shows_the_prompt_to_callers_with_the_admin_claim() {
    let auth = jwt_auth("[auth.admin_claim]\nclaim = \"roles\"\nvalue = \"parley-admin\"\n");
    let mut stack = Harness::start(Options {
        auth,
        ..Options::default()
    })
    .await;
    for (claims, admin) in [
        (
            serde_json::json!({"roles": ["viewer", "parley-admin"]}),
            true,
        ),
        (serde_json::json!({"roles": "openid parley-admin"}), true),
        (serde_json::json!({"roles": ["viewer"]}), false),
        (serde_json::json!({"roles": "parley-admin-not"}), false),
        (serde_json::json!({}), false),
    ] {
        let token = hs256("alice", claims.clone());
        let described = stack
            .client
            .describe_page(with_token(describe(true), &token))
            .await
            .expect("describe")
            .into_inner();
        assert!(described.tools.iter().any(|t| t.name == "lookup_rows"));
        assert_eq!(
            described.system_prompt.contains("## FORMAT RULES"),
            admin,
            "{claims}"
        );
    }
    stack.stop().await;
}

/// The address of a gateway started with JSON logs into `log`.
async fn bound(child: &mut tokio::process::Child, log: &Path) -> String {
    for _ in 0..1500 {
        if let Ok(Some(status)) = child.try_wait() {
            panic!(
                "chat-gateway exited ({status}):\n{}",
                std::fs::read_to_string(log).unwrap_or_default()
            );
        }
        let text = std::fs::read_to_string(log).unwrap_or_default();
        if let Some(addr) = text.lines().find_map(|line| {
            let entry: serde_json::Value = serde_json::from_str(line).ok()?;
            (entry.get("message")?.as_str()? == "listening")
                .then(|| entry.get("addr")?.as_str().map(str::to_owned))
                .flatten()
        }) {
            return addr;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("chat-gateway logged no listening address");
}

async fn list(client: &mut ChatGatewayClient<Channel>, token: &str) -> Result<(), tonic::Status> {
    client
        .list_conversations(with_token(gw::ListConversationsRequest::default(), token))
        .await
        .map(drop)
}

#[tokio::test]
async fn a_token_file_is_read_again_on_sighup() {
    let dir = tempfile::tempdir().expect("dir");
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, "first-token-0123456789\n").expect("write");
    let config = dir.path().join("gateway.toml");
    std::fs::write(
        &config,
        format!(
            "[server]\nlisten = \"127.0.0.1:0\"\nmetrics_listen = \"off\"\n\n\
             [store]\ndatabase_url = \"sqlite://{}?mode=rwc\"\n\n\
             [[auth.static_tokens]]\nuser = \"ci\"\ntoken_file = \"{}\"\n",
            dir.path().join("g.db").display(),
            token_file.display()
        ),
    )
    .expect("write config");
    let log = dir.path().join("gateway.log");
    let out = std::fs::File::create(&log).expect("log");
    let mut child = tokio::process::Command::new(BIN)
        .arg("--config")
        .arg(&config)
        .args(["--log-format", "json"])
        .env_remove("PARLEY_DATABASE_URL")
        .env_remove("PARLEY_LISTEN")
        .env_remove("PARLEY_DEV_AUTH")
        .stdout(Stdio::from(out.try_clone().expect("log")))
        .stderr(Stdio::from(out))
        .kill_on_drop(true)
        .spawn()
        .expect("start chat-gateway");
    let addr = bound(&mut child, &log).await;
    let channel = Channel::from_shared(format!("http://{addr}"))
        .expect("url")
        .connect()
        .await
        .expect("connect");
    let mut client = ChatGatewayClient::new(channel);
    list(&mut client, "first-token-0123456789")
        .await
        .expect("the first token is accepted");

    std::fs::write(&token_file, "second-token-0123456789\n").expect("rotate");
    let pid = child.id().expect("pid").to_string();
    let status = Command::new("kill")
        .args(["-HUP", &pid])
        .status()
        .expect("kill -HUP");
    assert!(status.success());
    let mut accepted = false;
    for _ in 0..500 {
        if list(&mut client, "second-token-0123456789").await.is_ok() {
            accepted = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        accepted,
        "the rotated token was never accepted:\n{}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    let refused = list(&mut client, "first-token-0123456789")
        .await
        .expect_err("the old token is refused");
    assert_eq!(refused.code(), Code::Unauthenticated);
    assert_eq!(reason(&refused), "INVALID_TOKEN");
    assert!(child.try_wait().expect("status").is_none(), "still serving");
    let _ = child.start_kill();
}

async fn backends_named(application_name: &str) -> i64 {
    let base = std::env::var("PARLEY_TEST_POSTGRES_URL").expect("set");
    let pool = sqlx::AnyPool::connect(&base).await.expect("connect");
    let count: i64 =
        sqlx::query_scalar("SELECT count(*) FROM pg_stat_activity WHERE application_name = $1")
            .bind(application_name)
            .fetch_one(&pool)
            .await
            .expect("count");
    pool.close().await;
    count
}

#[tokio::test]
async fn a_database_url_file_is_read_again_and_new_connections_use_it() {
    let test = "a_database_url_file_is_read_again_and_new_connections_use_it";
    let Some((url, schema)) = crate::postgres::fresh_schema(test).await else {
        return;
    };
    let (first, second) = (format!("{schema}_first"), format!("{schema}_second"));
    let dir = tempfile::tempdir().expect("dir");
    let file = dir.path().join("database-url");
    std::fs::write(&file, format!("{url}&application_name={first}\n")).expect("write");
    let mut config = GatewayConfig::default();
    config.store.database_url = "sqlite://not-used.db?mode=ro".into();
    config.store.database_url_file = Some(file.clone());
    let gateway = chat_gateway::app::Gateway::build(
        &config,
        chat_gateway::registry::Registry::example(),
        Authenticator::dev(),
    )
    .await
    .expect("the gateway opens the URL of the file");
    assert!(backends_named(&first).await > 0);

    // The Secret is rotated: the file names another connection, and the
    // connections open so far end (as a password change ends them).
    std::fs::write(&file, format!("{url}&application_name={second}\n")).expect("write");
    gateway.reload_secrets(&config).await;
    let base = std::env::var("PARLEY_TEST_POSTGRES_URL").expect("set");
    let pool = sqlx::AnyPool::connect(&base).await.expect("connect");
    sqlx::query(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1",
    )
    .bind(first.as_str())
    .execute(&pool)
    .await
    .expect("terminate");
    pool.close().await;

    let store = gateway.engine().store();
    let mut read = false;
    for _ in 0..50 {
        if store.turn("alice", "no-such-turn").await.is_ok() {
            read = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(read, "the store reads again after the rotation");
    assert!(
        backends_named(&second).await > 0,
        "new connections use the URL read again"
    );
    gateway.engine().close().await;
    crate::postgres::drop_schema(&schema).await;
}
