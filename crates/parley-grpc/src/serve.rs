//! The server builder shared by the three binaries.
//!
//! `serve` runs the service's routes plus health and reflection until the
//! shutdown future resolves. It then marks every service `NOT_SERVING` (so a
//! readiness probe takes the pod out of rotation), stops accepting new calls
//! and lets in-flight calls finish for at most `drain_timeout`: tonic's own
//! graceful shutdown has no time limit, so this one adds it. Every call
//! goes through the telemetry layer (`telemetry::rpc::server`): a span when
//! tracing is on, duration and active-stream metrics always; inside it, the
//! edge layer ([`crate::edge`]) answers a request that fails to decode with
//! the client's code and writes the audit line of every rejected call (so
//! metrics and spans see the code the client gets). With TLS in the options
//! ([`crate::tls`]) the same listener serves TLS or mutual TLS, health and
//! reflection included. With `uds_listen` the same router (layers, health,
//! reflection) is also served on a Unix domain socket, always plaintext
//! ([`crate::unix`]); it drains with the TCP listener and its file is
//! removed when serving ends.
//!
//! A binary that also serves web clients (the gateway: gRPC-Web, Connect,
//! plain HTTP routes) sets [`ServeOptions::accept_http1`] and
//! [`ServeOptions::http_layer`]: the layer wraps everything above,
//! outermost, so the telemetry and edge layers see the gRPC call it
//! translates a web request into.

use std::{future::Future, sync::Arc, time::Duration};

use tokio::net::TcpListener;
use tokio_stream::{StreamExt, wrappers::TcpListenerStream};
use tonic::{service::Routes, transport::Server};
use tonic_health::ServingStatus;

use crate::telemetry::rpc::server::RpcServerLayer;

/// The standard health service every binary serves.
pub const HEALTH_SERVICE: &str = "grpc.health.v1.Health";

/// The descriptors of [`HEALTH_SERVICE`] (for reflection, and for web
/// protocols that translate its calls).
pub const HEALTH_FILE_DESCRIPTOR_SET: &[u8] = tonic_health::pb::FILE_DESCRIPTOR_SET;

/// How a service is served.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// Used in logs.
    pub name: &'static str,
    /// Fully qualified gRPC service names reported by `grpc.health.v1`.
    pub services: Vec<&'static str>,
    /// Longest time in-flight calls get to finish after a shutdown signal.
    pub drain_timeout: Duration,
    /// Bounds the lifetime of one HTTP/2 connection's idle keep-alive.
    pub http2_keepalive: Duration,
    /// TLS (and mutual TLS) on the listener; `None` is plaintext.
    pub tls: Option<crate::tls::ServerTls>,
    /// A plaintext port serving only `grpc.health.v1`, the same statuses
    /// as the main listener (for probes that cannot do TLS).
    pub health_listen: Option<std::net::SocketAddr>,
    /// A Unix domain socket serving the same router as the listener, in
    /// plaintext even when the listener serves TLS.
    pub uds_listen: Option<std::path::PathBuf>,
    /// Also accept HTTP/1.1 on the listener (and offer it in TLS's ALPN):
    /// what browsers and Connect clients speak where HTTP/2 is not
    /// negotiated. gRPC itself stays HTTP/2.
    pub accept_http1: bool,
    /// The outermost layer of every request on every listener, if any.
    pub http_layer: Option<HttpLayer>,
}

/// Every HTTP request a listener serves, as one boxed service: what an
/// [`HttpLayer`] wraps and returns.
pub type HttpService = tower::util::BoxCloneSyncService<
    http::Request<tonic::body::Body>,
    http::Response<tonic::body::Body>,
    tower::BoxError,
>;

/// A layer over every request the listeners serve ([`ServeOptions::http_layer`]).
#[derive(Clone)]
pub struct HttpLayer(Arc<dyn Fn(HttpService) -> HttpService + Send + Sync>);

impl HttpLayer {
    /// The layer that wraps the served service with `wrap`.
    pub fn new(wrap: impl Fn(HttpService) -> HttpService + Send + Sync + 'static) -> Self {
        Self(Arc::new(wrap))
    }
}

impl std::fmt::Debug for HttpLayer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("HttpLayer")
    }
}

impl<S> tower::Layer<S> for HttpLayer
where
    S: tower::Service<
            http::Request<tonic::body::Body>,
            Response = http::Response<tonic::body::Body>,
        > + Clone
        + Send
        + Sync
        + 'static,
    S::Error: Into<tower::BoxError>,
    S::Future: Send + 'static,
{
    type Service = HttpService;

    fn layer(&self, inner: S) -> HttpService {
        use tower::ServiceExt;
        (self.0)(HttpService::new(inner.map_err(Into::into)))
    }
}

impl ServeOptions {
    /// Options with Parley's defaults: 20 s drain, 30 s keep-alive.
    pub fn new(name: &'static str, services: Vec<&'static str>) -> Self {
        Self {
            name,
            services,
            drain_timeout: Duration::from_secs(20),
            http2_keepalive: Duration::from_secs(30),
            tls: None,
            health_listen: None,
            uds_listen: None,
            accept_http1: false,
            http_layer: None,
        }
    }

    /// These options with the `[server]` settings of `config`: its drain
    /// timeout, its TLS, its health port and its Unix socket.
    pub fn configured(mut self, config: &crate::config::ServerConfig) -> Result<Self, ServeError> {
        self.drain_timeout = config.drain_timeout;
        self.tls = crate::tls::ServerTls::from_config(&config.tls)?;
        self.health_listen = config.health_addr()?;
        self.uds_listen = config.uds_path()?;
        Ok(self)
    }
}

/// Why serving ended abnormally.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The transport failed.
    #[error("transport error: {0}")]
    Transport(#[from] tonic::transport::Error),
    /// Reflection could not load the descriptor set (a build problem).
    #[error("reflection setup failed: {0}")]
    Reflection(#[from] tonic_reflection::server::Error),
    /// The listener's address could not be read.
    #[error("listener error: {0}")]
    Io(#[from] std::io::Error),
    /// The TLS certificates could not be loaded.
    #[error("TLS: {0}")]
    Tls(#[from] crate::tls::TlsError),
    /// A `[server]` value does not parse.
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    /// The health port could not be opened.
    #[error("cannot listen on {addr} (server.health_listen): {source}")]
    HealthListen {
        /// The address.
        addr: std::net::SocketAddr,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The Unix socket could not be opened.
    #[error(transparent)]
    UnixListen(#[from] crate::unix::UnixListenError),
}

/// Serves `routes` with health and reflection on `listener` until `shutdown`
/// resolves, then drains for at most `opts.drain_timeout`.
pub async fn serve(
    listener: TcpListener,
    routes: Routes,
    opts: ServeOptions,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServeError> {
    let addr = listener.local_addr()?;
    // Bound first, so a path in use fails before anything is served; the
    // file is removed when `unix` drops, at the end of this function.
    let mut unix = match &opts.uds_listen {
        None => None,
        Some(path) => Some(bind_unix(path)?),
    };
    let (reporter, health) = tonic_health::server::health_reporter();
    for name in &opts.services {
        reporter
            .set_service_status(*name, ServingStatus::Serving)
            .await;
    }
    reporter
        .set_service_status("", ServingStatus::Serving)
        .await;

    // Reflection lists only what this binary serves: the descriptor set
    // holds every Parley service, and listing the others would send
    // grpcurl users to UNIMPLEMENTED. It also describes the `google.rpc`
    // error details (`ErrorInfo`, `BadRequest`, `RetryInfo`...) of every
    // error status, so grpcurl prints them decoded.
    let reflection = |own: &'static str| {
        let builder = tonic_reflection::server::Builder::configure()
            .register_encoded_file_descriptor_set(parley_proto::FILE_DESCRIPTOR_SET)
            .register_encoded_file_descriptor_set(parley_proto::GOOGLE_RPC_FILE_DESCRIPTOR_SET)
            .register_encoded_file_descriptor_set(HEALTH_FILE_DESCRIPTOR_SET);
        opts.services
            .iter()
            .copied()
            .chain([HEALTH_SERVICE, own])
            .fold(builder, |builder, name| builder.with_service_name(name))
    };
    let reflection_v1 = reflection("grpc.reflection.v1.ServerReflection").build_v1()?;
    let reflection_v1alpha =
        reflection("grpc.reflection.v1alpha.ServerReflection").build_v1alpha()?;

    // The plaintext health port: the same reporter, so it goes NOT_SERVING
    // with the main listener when the drain starts.
    let health_port = match opts.health_listen {
        None => None,
        Some(addr) => {
            let listener = TcpListener::bind(addr)
                .await
                .map_err(|source| ServeError::HealthListen { addr, source })?;
            tracing::info!(service = opts.name, %addr, "health (plaintext) listening");
            let health = health.clone();
            Some(tokio::spawn(
                Server::builder()
                    .add_service(health)
                    .serve_with_incoming(TcpListenerStream::new(listener)),
            ))
        }
    };
    let routes = routes
        .add_service(health)
        .add_service(reflection_v1)
        .add_service(reflection_v1alpha);

    // The drain starts when `shutdown` resolves: health goes NOT_SERVING and
    // every listener stops accepting; `drain_timeout` bounds how long we
    // wait after that.
    let (drain_tx, drain_rx) = tokio::sync::watch::channel(false);
    let drained = |mut drain: tokio::sync::watch::Receiver<bool>| async move {
        // An error means the sender is gone, which is a drain too.
        let _ = drain.wait_for(|started| *started).await;
    };
    let services = opts.services.clone();
    let graceful = async move {
        shutdown.await;
        tracing::info!("shutdown signal received, draining");
        for name in &services {
            reporter
                .set_service_status(*name, ServingStatus::NotServing)
                .await;
        }
        reporter
            .set_service_status("", ServingStatus::NotServing)
            .await;
        let _ = drain_tx.send(true);
    };

    let router = Server::builder()
        .http2_keepalive_interval(Some(opts.http2_keepalive))
        .accept_http1(opts.accept_http1)
        .layer(tower::util::option_layer(opts.http_layer.clone()))
        // One error type under either arm of the optional layer (tonic's
        // routes cannot fail: their errors are statuses in responses).
        .layer(tower::util::MapErrLayer::new(
            |never: std::convert::Infallible| -> tower::BoxError { match never {} },
        ))
        .layer(RpcServerLayer::new())
        .add_routes(routes);
    let mut reloader = None;
    let mut unix_server: Option<ServerFuture> = None;
    #[cfg(unix)]
    if let Some(listener) = unix
        .as_mut()
        .and_then(crate::unix::UnixSocket::take_listener)
    {
        let path = unix
            .as_ref()
            .map(|socket| socket.path().display().to_string())
            .unwrap_or_default();
        tracing::info!(service = opts.name, %path, tls = false, "listening (unix socket)");
        unix_server = Some(Box::pin(router.clone().serve_with_incoming_shutdown(
            tokio_stream::wrappers::UnixListenerStream::new(listener),
            drained(drain_rx.clone()),
        )));
    }
    let tls = match opts.tls.clone() {
        Some(tls) if opts.accept_http1 => Some(tls.with_http1()),
        tls => tls,
    };
    let tcp_server: ServerFuture = match &tls {
        Some(tls) => {
            tracing::info!(
                service = opts.name,
                %addr,
                tls = true,
                mutual_tls = tls.is_mutual(),
                "listening"
            );
            reloader = Some(tls.spawn_reloader());
            Box::pin(router.serve_with_incoming_shutdown(tls.incoming(listener), drained(drain_rx)))
        }
        None => {
            tracing::info!(service = opts.name, %addr, "listening");
            // `Server::tcp_nodelay` only applies when tonic binds the
            // socket itself; with our own listener every accepted socket
            // needs it, or Nagle's algorithm holds each streamed event
            // back for up to ~40 ms.
            let incoming = TcpListenerStream::new(listener).map(|accepted| {
                if let Ok(stream) = &accepted
                    && let Err(error) = stream.set_nodelay(true)
                {
                    tracing::warn!(%error, "cannot disable nagle on an accepted socket");
                }
                accepted
            });
            Box::pin(router.serve_with_incoming_shutdown(incoming, drained(drain_rx)))
        }
    };
    // Every listener until the drain; one that fails ends them all.
    let mut server = std::pin::pin!(async move {
        match unix_server {
            Some(unix_server) => tokio::try_join!(tcp_server, unix_server).map(drop),
            None => tcp_server.await,
        }
    });

    tokio::select! {
        result = &mut server => result?,
        () = graceful => {
            match tokio::time::timeout(opts.drain_timeout, &mut server).await {
                Ok(result) => result?,
                Err(_) => tracing::warn!(
                    timeout_ms = opts.drain_timeout.as_millis() as u64,
                    "drain timeout reached, closing remaining calls"
                ),
            }
        }
    }
    if let Some(reloader) = reloader {
        reloader.abort();
    }
    if let Some(health_port) = health_port {
        health_port.abort();
    }
    // The socket file goes with it.
    drop(unix);
    tracing::info!(service = opts.name, "stopped");
    Ok(())
}

/// One listener's server, until its drain ends.
type ServerFuture =
    std::pin::Pin<Box<dyn Future<Output = Result<(), tonic::transport::Error>> + Send>>;

#[cfg(unix)]
fn bind_unix(path: &std::path::Path) -> Result<crate::unix::UnixSocket, ServeError> {
    Ok(crate::unix::bind(path)?)
}

#[cfg(not(unix))]
fn bind_unix(_path: &std::path::Path) -> Result<std::convert::Infallible, ServeError> {
    Err(crate::unix::UnixListenError::Unsupported.into())
}

/// Resolves on SIGTERM or Ctrl-C.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        if let Err(error) = tokio::signal::ctrl_c().await {
            tracing::error!(%error, "cannot listen for ctrl-c");
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(error) => {
                tracing::error!(%error, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {},
        () = terminate => {},
    }
}
