//! TLS and mutual TLS on a served listener, with certificates made here
//! (`parley_testkit::pki`): a verified TLS client; mutual TLS that admits the right client
//! certificate and refuses none or another CA's at the handshake; a
//! certificate rotated on disk that new connections get while an open
//! stream goes on; a broken new certificate that leaves the old one served.

use std::{path::Path, time::Duration};

use parley_grpc::{
    ServeOptions,
    tls::{ClientTls, ClientTlsConfig, ServerTls, ServerTlsConfig, TlsError},
};
use parley_testkit::pki::TestCa as Ca;
use tempfile::TempDir;
use tokio::sync::oneshot;
use tonic_health::pb::{
    HealthCheckRequest, health_check_response::ServingStatus, health_client::HealthClient,
};

fn write(dir: &Path, name: &str, contents: &str) -> std::path::PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, contents).expect("write a PEM file");
    path
}

/// A server with health and reflection on TLS; stops when dropped.
struct Server {
    port: u16,
    stop: Option<oneshot::Sender<()>>,
    served: tokio::task::JoinHandle<()>,
}

impl Server {
    async fn start(config: &ServerTlsConfig) -> Self {
        Self::start_with_health(config, None).await
    }

    async fn start_with_health(
        config: &ServerTlsConfig,
        health_listen: Option<std::net::SocketAddr>,
    ) -> Self {
        Self::start_with(config, health_listen, false).await
    }

    async fn start_with(
        config: &ServerTlsConfig,
        health_listen: Option<std::net::SocketAddr>,
        accept_http1: bool,
    ) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let mut options = ServeOptions::new("tls-test", vec![]);
        options.tls = ServerTls::from_config(config).expect("TLS loads");
        options.drain_timeout = Duration::from_secs(2);
        options.health_listen = health_listen;
        options.accept_http1 = accept_http1;
        let (stop, stopped) = oneshot::channel::<()>();
        let served = tokio::spawn(async move {
            parley_grpc::serve(
                listener,
                tonic::service::Routes::default(),
                options,
                async move {
                    let _ = stopped.await;
                },
            )
            .await
            .expect("serves");
        });
        Self {
            port,
            stop: Some(stop),
            served,
        }
    }

    /// Stops serving (health goes NOT_SERVING first) and waits for the end.
    async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let served = std::mem::replace(&mut self.served, tokio::spawn(async {}));
        let _ = tokio::time::timeout(Duration::from_secs(10), served).await;
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.served.abort();
    }
}

async fn client(
    scheme: &str,
    port: u16,
    tls: &ClientTls,
) -> Result<HealthClient<tonic::transport::Channel>, tonic::transport::Error> {
    let endpoint = tls
        .endpoint(&format!("{scheme}://localhost:{port}"))
        .expect("the test's URL is valid")
        .configure(|endpoint| endpoint.connect_timeout(Duration::from_secs(5)));
    Ok(HealthClient::new(endpoint.connect().await?))
}

/// The health status, or the failure's code.
async fn check(client: &mut HealthClient<tonic::transport::Channel>) -> Result<i32, tonic::Code> {
    client
        .check(HealthCheckRequest::default())
        .await
        .map(|response| response.into_inner().status)
        .map_err(|status| status.code())
}

fn client_tls(ca: &Path, identity: Option<(&Path, &Path)>) -> ClientTls {
    ClientTls::from_config(&ClientTlsConfig {
        ca: Some(ca.to_owned()),
        cert: identity.map(|(cert, _)| cert.to_owned()),
        key: identity.map(|(_, key)| key.to_owned()),
    })
    .expect("client TLS loads")
}

#[tokio::test]
async fn a_tls_server_answers_a_verifying_client_and_not_a_plaintext_one() {
    let dir = TempDir::new().expect("tempdir");
    let ca = Ca::new("server CA");
    let (cert, key) = ca.leaf("localhost");
    let config = ServerTlsConfig {
        cert: Some(write(dir.path(), "cert.pem", &cert)),
        key: Some(write(dir.path(), "key.pem", &key)),
        ..ServerTlsConfig::default()
    };
    let server = Server::start(&config).await;
    let ca_path = write(dir.path(), "ca.pem", ca.pem());

    let mut verified = client("https", server.port, &client_tls(&ca_path, None))
        .await
        .expect("a TLS connection");
    assert_eq!(
        check(&mut verified).await,
        Ok(ServingStatus::Serving as i32)
    );

    // Plaintext gRPC to the TLS port never gets an answer.
    let plaintext = match client("http", server.port, &ClientTls::default()).await {
        Ok(mut client) => check(&mut client).await.is_err(),
        Err(_) => true,
    };
    assert!(plaintext, "a plaintext client was served");

    // A client that trusts another CA refuses the server.
    let other = write(dir.path(), "other-ca.pem", Ca::new("other CA").pem());
    assert!(
        client("https", server.port, &client_tls(&other, None))
            .await
            .is_err(),
        "a client trusting another CA connected"
    );
    server.stop().await;
}

#[tokio::test]
async fn mutual_tls_admits_the_right_client_certificate_and_refuses_others_at_the_handshake() {
    let dir = TempDir::new().expect("tempdir");
    let server_ca = Ca::new("server CA");
    let client_ca = Ca::new("client CA");
    let (cert, key) = server_ca.leaf("localhost");
    let config = ServerTlsConfig {
        cert: Some(write(dir.path(), "cert.pem", &cert)),
        key: Some(write(dir.path(), "key.pem", &key)),
        client_ca: Some(write(dir.path(), "client-ca.pem", client_ca.pem())),
        ..ServerTlsConfig::default()
    };
    let server = Server::start(&config).await;
    let trust = write(dir.path(), "server-ca.pem", server_ca.pem());

    let (good_cert, good_key) = client_ca.leaf("localhost");
    let good = (
        write(dir.path(), "good.pem", &good_cert),
        write(dir.path(), "good-key.pem", &good_key),
    );
    let mut admitted = client(
        "https",
        server.port,
        &client_tls(&trust, Some((&good.0, &good.1))),
    )
    .await
    .expect("the right client certificate connects");
    assert_eq!(
        check(&mut admitted).await,
        Ok(ServingStatus::Serving as i32)
    );

    // No certificate, or one of another CA: the handshake fails, so the
    // call never reaches a service (no application status, no health).
    let (bad_cert, bad_key) = Ca::new("stranger CA").leaf("localhost");
    let bad = (
        write(dir.path(), "bad.pem", &bad_cert),
        write(dir.path(), "bad-key.pem", &bad_key),
    );
    for (name, tls, alert) in [
        (
            "no client certificate",
            client_tls(&trust, None),
            "CertificateRequired",
        ),
        (
            "another CA's certificate",
            client_tls(&trust, Some((&bad.0, &bad.1))),
            "UnknownCA",
        ),
    ] {
        // With TLS 1.3 the client learns of the refusal at its first read:
        // the connection or the first call fails with the server's alert.
        let refused = match client("https", server.port, &tls).await {
            Err(error) => format!("{error:?}"),
            Ok(mut client) => match client.check(HealthCheckRequest::default()).await {
                Err(status) => format!("{status:?}"),
                Ok(response) => panic!("{name}: served ({response:?})"),
            },
        };
        assert!(
            refused.contains(&format!("received fatal alert: {alert}")),
            "{name}: refused at the handshake, with the TLS alert: {refused}"
        );
    }
    server.stop().await;
}

#[tokio::test]
async fn a_rotated_certificate_reaches_new_connections_while_an_open_stream_goes_on() {
    let dir = TempDir::new().expect("tempdir");
    let first_ca = Ca::new("first CA");
    let second_ca = Ca::new("second CA");
    let (cert, key) = first_ca.leaf("localhost");
    let cert_path = write(dir.path(), "cert.pem", &cert);
    let key_path = write(dir.path(), "key.pem", &key);
    let config = ServerTlsConfig {
        cert: Some(cert_path.clone()),
        key: Some(key_path.clone()),
        reload_interval: Duration::from_millis(50),
        ..ServerTlsConfig::default()
    };
    let server = Server::start(&config).await;
    let trusts_first = client_tls(&write(dir.path(), "first.pem", first_ca.pem()), None);
    let trusts_second = client_tls(&write(dir.path(), "second.pem", second_ca.pem()), None);

    // A stream opened on the first certificate.
    let mut old = client("https", server.port, &trusts_first)
        .await
        .expect("connects with the first certificate");
    let mut watch = old
        .watch(HealthCheckRequest::default())
        .await
        .expect("watch")
        .into_inner();
    let first = watch.message().await.expect("watch event").expect("status");
    assert_eq!(first.status, ServingStatus::Serving as i32);

    // A half-written or broken certificate is not taken: the first one is
    // still served to new connections.
    std::fs::write(&cert_path, "-----BEGIN CERTIFICATE-----\nnot base64\n").expect("break");
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut still = client("https", server.port, &trusts_first)
        .await
        .expect("the first certificate is kept when the new one is broken");
    assert_eq!(check(&mut still).await, Ok(ServingStatus::Serving as i32));

    // The Secret is updated: the key first, then the certificate, as a
    // mounted volume may show them; the mismatched pair in between is
    // refused, the matching pair taken.
    let (new_cert, new_key) = second_ca.leaf("localhost");
    std::fs::write(&key_path, new_key).expect("new key");
    std::fs::write(&cert_path, new_cert).expect("new certificate");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let mut renewed = loop {
        match client("https", server.port, &trusts_second).await {
            Ok(client) => break client,
            Err(error) => {
                assert!(
                    tokio::time::Instant::now() < deadline,
                    "the new certificate was never served: {error:?}"
                );
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    };
    assert_eq!(check(&mut renewed).await, Ok(ServingStatus::Serving as i32));
    let first_refused = match client("https", server.port, &trusts_first).await {
        Err(_) => true,
        Ok(mut client) => check(&mut client).await.is_err(),
    };
    assert!(
        first_refused,
        "new connections get the new certificate only"
    );

    // The connection made before the rotation still carries calls, and its
    // open stream sees the server's drain.
    assert_eq!(check(&mut old).await, Ok(ServingStatus::Serving as i32));
    server.stop().await;
    let drained = tokio::time::timeout(Duration::from_secs(10), watch.message())
        .await
        .expect("the open stream hears of the drain");
    if let Ok(Some(update)) = drained {
        assert_eq!(update.status, ServingStatus::NotServing as i32);
    }
}

#[tokio::test]
async fn a_renewed_client_certificate_is_shown_to_new_connections_without_a_restart() {
    let dir = TempDir::new().expect("tempdir");
    let server_ca = Ca::new("server CA");
    let old_clients = Ca::new("old clients CA");
    let new_clients = Ca::new("new clients CA");
    let (cert, key) = server_ca.leaf("localhost");
    let config = ServerTlsConfig {
        cert: Some(write(dir.path(), "cert.pem", &cert)),
        key: Some(write(dir.path(), "key.pem", &key)),
        // The server already trusts only the new clients' CA.
        client_ca: Some(write(dir.path(), "clients.pem", new_clients.pem())),
        ..ServerTlsConfig::default()
    };
    let server = Server::start(&config).await;
    let trust = write(dir.path(), "server-ca.pem", server_ca.pem());
    let (old_cert, old_key) = old_clients.leaf("app");
    let cert_path = write(dir.path(), "app.pem", &old_cert);
    let key_path = write(dir.path(), "app-key.pem", &old_key);
    // One ClientTls for the whole test, as a binary holds one.
    let tls = client_tls(&trust, Some((&cert_path, &key_path)));
    let refused = match client("https", server.port, &tls).await {
        Err(_) => true,
        Ok(mut client) => check(&mut client).await.is_err(),
    };
    assert!(refused, "the old client certificate was accepted");

    // The client's Secret is renewed: the same ClientTls shows the new
    // certificate on its next connection.
    let (new_cert, new_key) = new_clients.leaf("app");
    std::fs::write(&key_path, new_key).expect("new key");
    std::fs::write(&cert_path, new_cert).expect("new certificate");
    let mut renewed = client("https", server.port, &tls)
        .await
        .expect("the renewed certificate connects");
    assert_eq!(check(&mut renewed).await, Ok(ServingStatus::Serving as i32));
    server.stop().await;
}

#[tokio::test]
async fn a_plaintext_health_port_answers_probes_beside_a_mutual_tls_listener() {
    let dir = TempDir::new().expect("tempdir");
    let ca = Ca::new("server CA");
    let (cert, key) = ca.leaf("localhost");
    let config = ServerTlsConfig {
        cert: Some(write(dir.path(), "cert.pem", &cert)),
        key: Some(write(dir.path(), "key.pem", &key)),
        client_ca: Some(write(dir.path(), "client-ca.pem", Ca::new("clients").pem())),
        ..ServerTlsConfig::default()
    };
    let health_port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free port");
    let server = Server::start_with_health(&config, Some(health_port)).await;
    let mut probe = None;
    for _ in 0..100 {
        if let Ok(client) = client("http", health_port.port(), &ClientTls::default()).await {
            probe = Some(client);
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut probe = probe.expect("the health port listens");
    assert_eq!(check(&mut probe).await, Ok(ServingStatus::Serving as i32));
    server.stop().await;
}

#[test]
fn half_configured_tls_is_refused_with_the_key_named() {
    let missing_key = ServerTlsConfig {
        cert: Some("/nonexistent/cert.pem".into()),
        ..ServerTlsConfig::default()
    };
    let error = ServerTls::from_config(&missing_key).expect_err("refused");
    assert!(matches!(error, TlsError::Incomplete(_)), "{error}");
    assert!(error.to_string().contains("server.tls.key"), "{error}");

    let unreadable = ServerTlsConfig {
        cert: Some("/nonexistent/cert.pem".into()),
        key: Some("/nonexistent/key.pem".into()),
        ..ServerTlsConfig::default()
    };
    let error = ServerTls::from_config(&unreadable).expect_err("refused");
    assert!(
        error
            .to_string()
            .contains("server.tls.cert `/nonexistent/cert.pem`"),
        "{error}"
    );
    assert!(
        ServerTls::from_config(&ServerTlsConfig::default())
            .expect("plaintext")
            .is_none()
    );

    let client = ClientTls::from_config(&ClientTlsConfig {
        cert: Some("/nonexistent/cert.pem".into()),
        ..ClientTlsConfig::default()
    })
    .expect_err("refused");
    assert!(client.to_string().contains("client_tls.cert"), "{client}");
}

/// The protocol a TLS client offering only `alpn` negotiates with the
/// server on `port`, or the handshake's failure.
async fn negotiate(port: u16, ca: &str, alpn: &[u8]) -> Result<Vec<u8>, std::io::Error> {
    use rustls::pki_types::{CertificateDer, ServerName, pem::PemObject};
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca.as_bytes()) {
        roots.add(cert.expect("a CA certificate")).expect("a root");
    }
    let mut config = rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("TLS versions")
    .with_root_certificates(roots)
    .with_no_client_auth();
    config.alpn_protocols = vec![alpn.to_vec()];
    let connector = tokio_rustls::TlsConnector::from(std::sync::Arc::new(config));
    let socket = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
    let name = ServerName::try_from("localhost").expect("a name");
    let stream = connector.connect(name, socket).await?;
    Ok(stream
        .get_ref()
        .1
        .alpn_protocol()
        .unwrap_or_default()
        .to_vec())
}

#[tokio::test]
async fn a_listener_that_accepts_http1_offers_it_in_alpn_and_one_that_does_not_refuses_it() {
    let dir = TempDir::new().expect("tempdir");
    let ca = Ca::new("server CA");
    let (cert, key) = ca.leaf("localhost");
    let config = ServerTlsConfig {
        cert: Some(write(dir.path(), "cert.pem", &cert)),
        key: Some(write(dir.path(), "key.pem", &key)),
        ..ServerTlsConfig::default()
    };
    let web = Server::start_with(&config, None, true).await;
    assert_eq!(
        negotiate(web.port, ca.pem(), b"http/1.1")
            .await
            .expect("a handshake"),
        b"http/1.1"
    );
    assert_eq!(
        negotiate(web.port, ca.pem(), b"h2")
            .await
            .expect("a handshake"),
        b"h2"
    );
    web.stop().await;
    let grpc_only = Server::start(&config).await;
    assert_eq!(
        negotiate(grpc_only.port, ca.pem(), b"h2")
            .await
            .expect("a handshake"),
        b"h2"
    );
    assert!(
        negotiate(grpc_only.port, ca.pem(), b"http/1.1")
            .await
            .is_err(),
        "a gRPC-only listener negotiated HTTP/1.1"
    );
    grpc_only.stop().await;
}
