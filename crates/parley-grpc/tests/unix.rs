//! gRPC over a Unix domain socket (`server.uds_listen`, `unix:` upstream
//! URLs): the same router as the TCP listener (health, reflection) on a
//! socket made 0660, plaintext beside a TLS port; a stale socket file
//! replaced, a regular file or a live socket refused; the drain reaching
//! the socket's callers and the file removed at the end; a lazy `unix:`
//! channel that connects once the server is up; bad `unix:` URLs.

#![cfg(unix)]

use std::{
    os::unix::fs::{FileTypeExt, PermissionsExt},
    path::{Path, PathBuf},
    time::Duration,
};

use parley_grpc::{
    ServeOptions,
    serve::ServeError,
    tls::{ClientTls, ClientTlsConfig, EndpointError, ServerTls, ServerTlsConfig},
    unix::UnixListenError,
};
use parley_testkit::pki::TestCa;
use tempfile::TempDir;
use tokio::sync::oneshot;
use tonic::transport::Channel;
use tonic_health::pb::{
    HealthCheckRequest, health_check_response::ServingStatus, health_client::HealthClient,
};
use tonic_reflection::pb::v1;

/// A server on 127.0.0.1:0 and on a Unix socket; stops when told.
struct Server {
    port: u16,
    stop: Option<oneshot::Sender<()>>,
    served: tokio::task::JoinHandle<Result<(), ServeError>>,
}

impl Server {
    async fn start(socket: &Path, tls: Option<ServerTls>) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let mut options = ServeOptions::new("unix-test", vec![]);
        options.drain_timeout = Duration::from_secs(5);
        options.uds_listen = Some(socket.to_owned());
        options.tls = tls;
        let (stop, stopped) = oneshot::channel::<()>();
        let served = tokio::spawn(parley_grpc::serve(
            listener,
            tonic::service::Routes::default(),
            options,
            async move {
                let _ = stopped.await;
            },
        ));
        Self {
            port,
            stop: Some(stop),
            served,
        }
    }

    /// Starts the drain and waits (10 s at most) for serving to end.
    async fn stop(mut self) -> Result<(), ServeError> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        tokio::time::timeout(Duration::from_secs(10), &mut self.served)
            .await
            .expect("serving ends within 10 s")
            .expect("the serving task")
    }
}

/// A lazy channel to `url` as the binaries make them.
fn lazy(url: &str) -> Channel {
    ClientTls::default()
        .endpoint(url)
        .expect("a valid URL")
        .configure(|endpoint| endpoint.connect_timeout(Duration::from_secs(2)))
        .connect_lazy()
}

/// The health status, or the failure's code.
async fn health(channel: Channel) -> Result<i32, tonic::Code> {
    HealthClient::new(channel)
        .check(HealthCheckRequest::default())
        .await
        .map(|response| response.into_inner().status)
        .map_err(|status| status.code())
}

/// Polls health over the socket until it answers SERVING (5 s at most).
async fn serving(url: &str) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    loop {
        match health(lazy(url)).await {
            Ok(status) if status == ServingStatus::Serving as i32 => return,
            other => assert!(
                tokio::time::Instant::now() < deadline,
                "{url} not serving within 5 s: {other:?}"
            ),
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn socket_in(dir: &TempDir) -> (PathBuf, String) {
    let path = dir.path().join("server.sock");
    let url = format!("unix:{}", path.display());
    (path, url)
}

#[tokio::test]
async fn health_and_reflection_are_served_on_the_socket_beside_tcp() {
    let dir = TempDir::new().expect("tempdir");
    let (path, url) = socket_in(&dir);
    let server = Server::start(&path, None).await;
    serving(&url).await;

    let mode = std::fs::metadata(&path).expect("the socket").permissions();
    assert_eq!(mode.mode() & 0o777, 0o660, "owner and group may connect");
    // unix:///abs is the same socket.
    assert_eq!(
        health(lazy(&format!("unix://{}", path.display()))).await,
        Ok(ServingStatus::Serving as i32)
    );
    // TCP still serves.
    assert_eq!(
        health(lazy(&format!("http://127.0.0.1:{}", server.port))).await,
        Ok(ServingStatus::Serving as i32)
    );

    let mut reflection = v1::server_reflection_client::ServerReflectionClient::new(lazy(&url));
    let request = v1::ServerReflectionRequest {
        host: String::new(),
        message_request: Some(v1::server_reflection_request::MessageRequest::ListServices(
            String::new(),
        )),
    };
    let response = reflection
        .server_reflection_info(tokio_stream::iter([request]))
        .await
        .expect("reflection over the socket")
        .into_inner()
        .message()
        .await
        .expect("a response")
        .expect("one");
    let Some(v1::server_reflection_response::MessageResponse::ListServicesResponse(list)) =
        response.message_response
    else {
        panic!("not a service list: {response:?}")
    };
    assert!(
        list.service
            .iter()
            .any(|service| service.name == "grpc.health.v1.Health"),
        "{list:?}"
    );
    server.stop().await.expect("stops cleanly");
}

#[tokio::test]
async fn a_tls_listener_leaves_the_socket_plaintext() {
    let dir = TempDir::new().expect("tempdir");
    let ca = TestCa::new("unix test CA");
    let pair = ca.write_leaf(dir.path(), "localhost");
    let tls = ServerTls::from_config(&ServerTlsConfig {
        cert: Some(pair.cert),
        key: Some(pair.key),
        ..ServerTlsConfig::default()
    })
    .expect("TLS loads");
    let (path, url) = socket_in(&dir);
    let server = Server::start(&path, tls).await;
    serving(&url).await;

    // TCP wants TLS: a client trusting the CA is served.
    let verified = ClientTls::from_config(&ClientTlsConfig {
        ca: Some(ca.write_ca(dir.path(), "ca.pem")),
        ..ClientTlsConfig::default()
    })
    .expect("client TLS")
    .endpoint(&format!("https://localhost:{}", server.port))
    .expect("a valid URL")
    .connect_lazy();
    assert_eq!(health(verified).await, Ok(ServingStatus::Serving as i32));
    server.stop().await.expect("stops cleanly");
}

#[tokio::test]
async fn a_stale_socket_file_is_replaced() {
    let dir = TempDir::new().expect("tempdir");
    let (path, url) = socket_in(&dir);
    // A socket nobody listens on any more: what a killed server leaves.
    drop(std::os::unix::net::UnixListener::bind(&path).expect("bind"));
    assert!(
        std::fs::symlink_metadata(&path)
            .expect("the stale file")
            .file_type()
            .is_socket()
    );
    assert!(health(lazy(&url)).await.is_err(), "nobody answers yet");

    let server = Server::start(&path, None).await;
    serving(&url).await;
    server.stop().await.expect("stops cleanly");
}

#[tokio::test]
async fn a_regular_file_or_a_live_socket_is_refused() {
    let dir = TempDir::new().expect("tempdir");
    let (path, url) = socket_in(&dir);

    std::fs::write(&path, "keep me").expect("a regular file");
    let refused = Server::start(&path, None).await.stop().await;
    assert!(
        matches!(
            refused,
            Err(ServeError::UnixListen(UnixListenError::NotASocket { .. }))
        ),
        "{refused:?}"
    );
    let message = refused.err().map(|e| e.to_string()).unwrap_or_default();
    assert!(message.contains("server.uds_listen"), "{message}");
    assert_eq!(
        std::fs::read_to_string(&path).expect("left alone"),
        "keep me"
    );
    std::fs::remove_file(&path).expect("remove");

    let first = Server::start(&path, None).await;
    serving(&url).await;
    let second = Server::start(&path, None).await.stop().await;
    assert!(
        matches!(
            second,
            Err(ServeError::UnixListen(UnixListenError::InUse { .. }))
        ),
        "{second:?}"
    );
    // The first server's socket is untouched.
    assert_eq!(health(lazy(&url)).await, Ok(ServingStatus::Serving as i32));
    first.stop().await.expect("stops cleanly");
}

#[tokio::test]
async fn the_drain_reaches_the_socket_and_the_file_is_removed_at_the_end() {
    let dir = TempDir::new().expect("tempdir");
    let (path, url) = socket_in(&dir);
    let server = Server::start(&path, None).await;
    serving(&url).await;

    let mut watch = HealthClient::new(lazy(&url))
        .watch(HealthCheckRequest::default())
        .await
        .expect("watch over the socket")
        .into_inner();
    let first = watch.message().await.expect("ok").expect("a status");
    assert_eq!(first.status, ServingStatus::Serving as i32);

    let (stop, stopped) = (server.stop, server.served);
    if let Some(stop) = stop {
        let _ = stop.send(());
    }
    // The socket's caller sees the drain like a TCP one.
    let next = tokio::time::timeout(Duration::from_secs(5), watch.message())
        .await
        .expect("a status within 5 s")
        .expect("ok")
        .expect("a status");
    assert_eq!(next.status, ServingStatus::NotServing as i32);
    drop(watch);

    tokio::time::timeout(Duration::from_secs(10), stopped)
        .await
        .expect("stops within 10 s")
        .expect("the serving task")
        .expect("stops cleanly");
    assert!(!path.exists(), "the socket file is removed");
    let gone = health(lazy(&url)).await.expect_err("nobody listens");
    assert_eq!(gone, tonic::Code::Unavailable);
}

#[tokio::test]
async fn a_lazy_unix_channel_connects_once_the_server_is_up() {
    let dir = TempDir::new().expect("tempdir");
    let (path, url) = socket_in(&dir);
    let channel = lazy(&url);
    let down = health(channel.clone()).await.expect_err("no server yet");
    assert_eq!(down, tonic::Code::Unavailable);

    let server = Server::start(&path, None).await;
    serving(&url).await;
    // The same channel, made before the server existed.
    assert_eq!(health(channel).await, Ok(ServingStatus::Serving as i32));
    server.stop().await.expect("stops cleanly");
}

#[test]
fn bad_unix_urls_are_refused_saying_why() {
    for (url, why) in [
        ("unix:", "names no socket path"),
        ("unix://parser/run/p.sock", "names a host"),
    ] {
        let error = ClientTls::default()
            .endpoint(url)
            .map(drop)
            .expect_err("refused");
        assert!(matches!(error, EndpointError::Unix(_)), "{error:?}");
        assert!(error.to_string().contains(why), "{url}: {error}");
    }
}
