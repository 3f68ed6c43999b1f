//! An MCP server over Streamable HTTP with TLS (the Python SDK fixture
//! behind uvicorn, requiring a client certificate): the runner verifies it
//! against `[client_tls] ca`, shows `[client_tls] cert`, and lists its
//! tools; without the client certificate the server stays down with the
//! TLS failure as its error, and no tool of it is offered.

use std::{path::Path, sync::Arc, time::Duration};

use agent_runner::{
    app::RunnerApp,
    config::RunnerConfig,
    provider::{Providers, scripted::Script, scripted::ScriptedProvider},
    tools::mcp::{McpServerConfig, ServerState},
};
use parley_grpc::tls::ClientTlsConfig;
use parley_testkit::pki::{PemFiles, TestCa};

const FIXTURE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/mcp/fixture_server.py"
);

/// Files of one test CA: the CA, a `localhost` server pair, a client pair.
struct Pki {
    ca: std::path::PathBuf,
    server: PemFiles,
    client: PemFiles,
}

fn pki(dir: &Path) -> Pki {
    let ca = TestCa::new("parley test CA");
    Pki {
        ca: ca.write_ca(dir, "ca.crt"),
        server: ca.write_leaf(dir, "server"),
        client: ca.write_leaf(dir, "client"),
    }
}

fn runner(url: &str, client_tls: ClientTlsConfig) -> RunnerApp {
    let mut server = McpServerConfig::http(url);
    server.restart_backoff = Duration::from_millis(100);
    server.max_restart_backoff = Duration::from_millis(500);
    let mut config = RunnerConfig::scripted_demo();
    config.client_tls = client_tls;
    config.mcp_servers.insert("fixture".into(), server);
    let script = Script::from_toml("model = \"m\"\n[default]\nsteps = [{ text = \"hi\" }]\n")
        .expect("script");
    RunnerApp::with_providers(
        &config,
        Providers::single(
            "scripted",
            Arc::new(ScriptedProvider::new("scripted", script)),
            "m",
        ),
    )
}

#[tokio::test]
async fn an_https_mcp_server_is_verified_and_shown_the_client_certificate() {
    let test = "an_https_mcp_server_is_verified_and_shown_the_client_certificate";
    let Some(python) = parley_testkit::mcp_python(test) else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let pki = pki(dir.path());
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|addr| addr.port())
        .expect("a free port");
    let _fixture = tokio::process::Command::new(&python)
        .arg(FIXTURE)
        .arg("https")
        .arg(dir.path())
        .arg(port.to_string())
        .arg(&pki.server.cert)
        .arg(&pki.server.key)
        .arg(&pki.ca)
        .kill_on_drop(true)
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("start the HTTPS fixture");
    let url = format!("https://localhost:{port}/mcp");
    let trusted = runner(
        &url,
        ClientTlsConfig {
            ca: Some(pki.ca.clone()),
            cert: Some(pki.client.cert.clone()),
            key: Some(pki.client.key.clone()),
        },
    );
    let server = trusted
        .runner()
        .tools
        .mcp
        .get("fixture")
        .expect("configured")
        .clone();
    let mut watch = server.watch();
    let ready = tokio::time::timeout(
        Duration::from_secs(60),
        watch.wait_for(|snapshot| snapshot.state == ServerState::Ready),
    )
    .await;
    assert!(
        matches!(ready, Ok(Ok(_))),
        "not ready over TLS: {:?}",
        server.snapshot()
    );
    assert!(
        !server.snapshot().tools.is_empty(),
        "the tools were listed over TLS"
    );

    // The same server without a client certificate: the handshake fails,
    // the server is not ready and says why.
    let anonymous = runner(
        &url,
        ClientTlsConfig {
            ca: Some(pki.ca.clone()),
            ..ClientTlsConfig::default()
        },
    );
    let refused = anonymous
        .runner()
        .tools
        .mcp
        .get("fixture")
        .expect("configured")
        .clone();
    let mut watch = refused.watch();
    let failed = tokio::time::timeout(
        Duration::from_secs(60),
        watch.wait_for(|snapshot| snapshot.connects >= 1 && !snapshot.error.is_empty()),
    )
    .await;
    assert!(
        matches!(failed, Ok(Ok(_))),
        "no failed connect: {:?}",
        refused.snapshot()
    );
    let snapshot = refused.snapshot();
    assert_ne!(snapshot.state, ServerState::Ready, "{snapshot:?}");
    assert!(snapshot.tools.is_empty(), "{snapshot:?}");
}
