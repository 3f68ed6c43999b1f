//! Mutual TLS on every hop: the three real binaries as child processes and
//! the app's ToolService in the test, each serving TLS with a certificate
//! of one test CA (made here with rcgen) and requiring a client
//! certificate of it. One `Chat` turn crosses every hop — the app's client
//! to the gateway, the gateway to the runner and to the parser sidecar,
//! the runner to the ToolService — and must complete with both tool calls
//! answered and the sidecar used (no in-process parser fallback). A client
//! without a certificate is refused at the gateway's handshake.

#[allow(dead_code)]
#[path = "../trace/support/mod.rs"]
mod support;

use std::{
    path::{Path, PathBuf},
    time::Duration,
};

use parley_grpc::tls::{ClientTls, ClientTlsConfig, ServerTlsConfig};
use parley_proto::{
    gateway::v1::{
        ChatRequest, PageContext, chat_event::Event, chat_gateway_client::ChatGatewayClient,
    },
    parser::v1::DiagnosticKind,
};
use parley_testkit::{
    pki::{PemFiles, TestCa},
    process::repo_root,
    stack::{Service, ServiceOptions, Stack, StackOptions},
    tools::{self, ToolOptions, ToolServer},
};
use tonic::transport::Channel;

/// The test CA and the PEM files it signed, in a temporary directory.
struct Pki {
    dir: tempfile::TempDir,
    ca: TestCa,
    ca_file: PathBuf,
}

impl Pki {
    fn new() -> Self {
        let dir = tempfile::tempdir().expect("certificate directory");
        let ca = TestCa::new("parley test CA");
        let ca_file = ca.write_ca(dir.path(), "ca.pem");
        Self { dir, ca, ca_file }
    }

    fn ca(&self) -> PathBuf {
        self.ca_file.clone()
    }

    /// A `localhost` certificate named `name` (servers and clients alike).
    fn issue(&self, name: &str) -> PemFiles {
        self.ca.write_leaf(self.dir.path(), name)
    }

    /// The client side: this CA, and `identity` as the client certificate.
    fn client(&self, identity: Option<&PemFiles>) -> ClientTls {
        ClientTls::from_config(&ClientTlsConfig {
            ca: Some(self.ca()),
            cert: identity.map(|id| id.cert.clone()),
            key: identity.map(|id| id.key.clone()),
        })
        .expect("client TLS")
    }

    /// The server side: `identity`, requiring clients of this CA.
    fn server(&self, identity: &PemFiles) -> ServerTlsConfig {
        ServerTlsConfig {
            cert: Some(identity.cert.clone()),
            key: Some(identity.key.clone()),
            client_ca: Some(self.ca()),
            ..ServerTlsConfig::default()
        }
    }
}

/// One service's flags: its certificate, clients required to show one of
/// the test CA, and (for the gateway and the runner, which call other
/// services) `identity` as their client certificate.
fn service(name: &str, identity: &PemFiles, pki: &Pki) -> ServiceOptions {
    let mut options = ServiceOptions::default()
        .args(["--listen=127.0.0.1:0", "--metrics-listen=off"])
        .args([Path::new("--tls-cert"), &identity.cert])
        .args([Path::new("--tls-key"), &identity.key])
        .args([Path::new("--tls-client-ca"), &pki.ca()]);
    if name != "payload-parser" {
        options = options
            .env("PARLEY_CLIENT_TLS__CA", pki.ca())
            .env("PARLEY_CLIENT_TLS__CERT", &identity.cert)
            .env("PARLEY_CLIENT_TLS__KEY", &identity.key);
    }
    options
}

async fn channel(port: u16, tls: &ClientTls) -> Result<Channel, tonic::transport::Error> {
    tls.endpoint(&format!("https://localhost:{port}"))
        .expect("the test's URL is valid")
        .configure(|endpoint| endpoint.connect_timeout(Duration::from_secs(2)))
        .connect()
        .await
}

#[tokio::test]
async fn one_turn_crosses_every_hop_over_mutual_tls() {
    let pki = Pki::new();
    let app = pki.issue("app");
    let app_tls = pki.client(Some(&app));

    // The app's ToolService, mutual TLS: one row for every query.
    let app_tools = ToolServer::start(ToolOptions {
        tls: Some(pki.server(&pki.issue("tools"))),
        answer: Some(tools::ROW.into()),
        ..ToolOptions::default()
    })
    .await;

    let state = tempfile::tempdir().expect("state directory");
    let dir = state.path();
    let registry = support::registry_with_tools(dir, &app_tools.url());
    let mut options = StackOptions::new(dir);
    options.tls = Some(app_tls.clone());
    options.parser = service("payload-parser", &pki.issue("parser"), &pki).args([
        "--profiles".into(),
        repo_root().join("deploy/config/parser-profiles.json"),
    ]);
    // The runner may dial the tool endpoints of the gateway's registry.
    options.runner = service("agent-runner", &pki.issue("runner"), &pki)
        .env("PARLEY_TOOLS__REGISTRY", &registry)
        .args([Path::new("--script"), &support::script()]);
    options.gateway = service("chat-gateway", &pki.issue("gateway"), &pki).args([
        "--registry".into(),
        registry.clone().into_os_string(),
        format!(
            "--database-url=sqlite://{}?mode=rwc",
            dir.join("parley.db").display()
        )
        .into(),
        "--dev-auth".into(),
    ]);
    let children = Stack::start(&options).await;
    let gateway_port = children.addr(Service::Gateway).port();

    // One turn over every hop.
    let mut client = ChatGatewayClient::new(
        channel(gateway_port, &app_tls)
            .await
            .expect("the app connects with its certificate"),
    );
    let request = ChatRequest {
        message: "please look up the rows".into(),
        page: Some(PageContext {
            page: "table_view".into(),
            ..Default::default()
        }),
        ..Default::default()
    };
    let mut stream = client
        .chat(request)
        .await
        .unwrap_or_else(|status| panic!("chat refused: {status:?}\n{}", children.logs()))
        .into_inner();
    let (mut tools_done, mut complete) = (Vec::new(), None);
    while let Some(event) = stream.message().await.expect("the stream stays healthy") {
        match event.event {
            Some(Event::ToolComplete(done)) => tools_done.push((done.success, done.error)),
            Some(Event::Complete(done)) => complete = Some(done),
            _ => {}
        }
    }
    let complete = complete.expect("a complete event");
    assert!(complete.success, "{complete:?}\n{}", children.logs());
    assert_eq!(
        tools_done,
        vec![(true, String::new()), (true, String::new())],
        "both calls reached the ToolService over mutual TLS\n{}",
        children.logs()
    );
    assert!(
        !complete
            .diagnostics
            .iter()
            .any(|diagnostic| diagnostic.kind == DiagnosticKind::ParserFallback as i32),
        "the gateway reached its parser sidecar over mutual TLS: {:?}",
        complete.diagnostics
    );

    // An app without a client certificate never gets past the handshake.
    let anonymous = pki.client(None);
    let refused = match channel(gateway_port, &anonymous).await {
        Err(error) => format!("{error:?}"),
        Ok(channel) => match ChatGatewayClient::new(channel)
            .list_conversations(parley_proto::gateway::v1::ListConversationsRequest::default())
            .await
        {
            Err(status) => format!("{status:?}"),
            Ok(response) => panic!("served without a client certificate: {response:?}"),
        },
    };
    // The server's alert (CertificateRequired) or, when the client writes
    // before reading it, the closed or broken connection: a transport
    // failure either way, never a gRPC status from the gateway.
    assert!(
        [
            "CertificateRequired",
            "transport error",
            "connection closed"
        ]
        .iter()
        .any(|sign| refused.contains(sign)),
        "refused at the handshake: {refused}"
    );
}
