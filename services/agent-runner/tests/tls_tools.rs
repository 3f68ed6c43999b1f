//! An `https://` ToolService: the runner verifies the tool server against
//! the `[client_tls]` CA and presents its client certificate (the server
//! requires one: mutual TLS); without the CA the call fails as a tool error
//! the model sees, and the turn still ends.

mod support;

use std::path::Path;

use agent_runner::{events::EventKind, tools::ToolRuntime};
use parley_grpc::tls::{ClientTls, ClientTlsConfig, ServerTlsConfig};
use parley_testkit::{
    pki::{PemFiles, TestCa},
    tools::{ToolOptions, ToolServer},
};
use serde_json::json;
use support::turns::*;

/// A CA and a `localhost` certificate it signed: the CA's file, the pair.
fn issue(dir: &Path, name: &str) -> (std::path::PathBuf, PemFiles) {
    let ca = TestCa::new(&format!("{name} CA"));
    (
        ca.write_ca(dir, &format!("{name}-ca.pem")),
        ca.write_leaf(dir, name),
    )
}

/// The tool server on TLS, requiring client certificates of `client_ca`,
/// answering every call with "over TLS".
async fn serve(cert: &Path, key: &Path, client_ca: &Path) -> String {
    let server = ToolServer::start(ToolOptions {
        tls: Some(ServerTlsConfig {
            cert: Some(cert.to_owned()),
            key: Some(key.to_owned()),
            client_ca: Some(client_ca.to_owned()),
            ..ServerTlsConfig::default()
        }),
        answer: Some("over TLS".into()),
        ..ToolOptions::default()
    })
    .await;
    server.url()
}

async fn call(tls: ClientTls, address: &str) -> (bool, String) {
    let provider = scripted(
        "[default]\nsteps = [{ tool_call = { name = \"secure\", id = \"s1\" } }, { text = \"done\" }]",
    );
    let mut runner = runner(provider);
    runner.tools = ToolRuntime::with_builtins().with_client_tls(tls);
    let mut turn = turn("go");
    turn.tools = vec![remote("secure", address, json!({"type": "object"}), None)];
    let events = run(&runner, turn).await;
    assert!(
        events
            .iter()
            .any(|event| matches!(event.kind, EventKind::Finished(_))),
        "the turn ends either way"
    );
    events
        .iter()
        .find_map(|event| match &event.kind {
            EventKind::ToolComplete(done) => Some((done.success, done.result_text.clone())),
            _ => None,
        })
        .expect("a tool_complete")
}

#[tokio::test]
async fn an_https_tool_server_is_called_with_the_configured_ca_and_client_certificate() {
    let dir = tempfile::TempDir::new().expect("tempdir");
    let (server_ca, server) = issue(dir.path(), "server");
    let (client_ca, client) = issue(dir.path(), "client");
    let address = serve(&server.cert, &server.key, &client_ca).await;

    let configured = ClientTls::from_config(&ClientTlsConfig {
        ca: Some(server_ca.clone()),
        cert: Some(client.cert),
        key: Some(client.key),
    })
    .expect("client TLS");
    assert_eq!(call(configured, &address).await, (true, "over TLS".into()));

    // Without a client certificate the server refuses the handshake: a
    // tool failure the model is told of, not a hung or failed turn.
    let anonymous = ClientTls::from_config(&ClientTlsConfig {
        ca: Some(server_ca),
        ..ClientTlsConfig::default()
    })
    .expect("client TLS");
    let (success, text) = call(anonymous, &address).await;
    assert!(!success, "served without a client certificate: {text}");
}
