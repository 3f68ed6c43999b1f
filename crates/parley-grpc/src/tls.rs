//! Transport security: TLS and mutual TLS for the servers, `https://` for
//! the clients, with rustls (ring) and no OpenSSL.
//!
//! **Servers** ([`ServerTls`]): given a certificate and a key (PEM files,
//! `[server.tls]` or `--tls-cert` / `--tls-key`), a binary serves TLS on its
//! listener, health and reflection included; given a CA
//! (`--tls-client-ca`) it also requires a client certificate signed by it
//! (mutual TLS), and a client without one fails the handshake — it never
//! reaches a service. The certificate and key are read again every
//! `reload_interval` and swapped in when they changed (the way Kubernetes
//! updates a mounted Secret): new connections get the new certificate,
//! open connections and their streams go on with the old one, and a new
//! pair that does not load (half-written, mismatched) is logged and the old
//! one kept. Handshakes run in their own tasks with a time limit, so a slow
//! or silent client never holds up the accept loop.
//!
//! **Clients** ([`ClientTls`]): an `https://` upstream is verified against
//! the configured CA, or the system's roots without one, and presented the
//! configured client certificate; `http://` stays plaintext.

use std::{
    net::SocketAddr,
    path::{Path, PathBuf},
    sync::{Arc, RwLock},
    time::Duration,
};

use rustls::{
    RootCertStore, ServerConfig as RustlsServerConfig,
    crypto::CryptoProvider,
    pki_types::{CertificateDer, PrivateKeyDer, pem::PemObject},
    server::{ClientHello, ResolvesServerCert, WebPkiClientVerifier},
    sign::CertifiedKey,
};
use serde::{Deserialize, Serialize};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::{TlsAcceptor, server::TlsStream};
use tokio_stream::wrappers::ReceiverStream;

use crate::duration;

/// `[server.tls]`: the server's certificate, and the CA its clients'
/// certificates must chain to (mutual TLS). Without `cert` the server is
/// plaintext.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServerTlsConfig {
    /// The certificate chain, PEM (flag `--tls-cert`).
    pub cert: Option<PathBuf>,
    /// Its private key, PEM: PKCS#8, PKCS#1 or SEC1 (flag `--tls-key`).
    pub key: Option<PathBuf>,
    /// When set, clients must present a certificate signed by one of these
    /// CAs, PEM (flag `--tls-client-ca`).
    pub client_ca: Option<PathBuf>,
    /// How often the certificate and key files are checked for a change.
    #[serde(with = "duration")]
    pub reload_interval: Duration,
    /// Longest time a client gets to finish its handshake.
    #[serde(with = "duration")]
    pub handshake_timeout: Duration,
}

impl Default for ServerTlsConfig {
    fn default() -> Self {
        Self {
            cert: None,
            key: None,
            client_ca: None,
            reload_interval: Duration::from_secs(10),
            handshake_timeout: Duration::from_secs(10),
        }
    }
}

/// `[client_tls]`: how the binary's `https://` clients verify servers and
/// identify themselves.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ClientTlsConfig {
    /// CAs the servers' certificates must chain to, PEM (without it: the
    /// system's roots).
    pub ca: Option<PathBuf>,
    /// The client certificate for mutual TLS, PEM.
    pub cert: Option<PathBuf>,
    /// Its private key, PEM.
    pub key: Option<PathBuf>,
}

/// Why certificates could not be used.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A file could not be read.
    #[error("cannot read {key} `{path}`: {source}")]
    Read {
        /// The configuration key naming the file.
        key: &'static str,
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A file holds no usable PEM item of the kind expected.
    #[error("{key} `{path}`: {message}")]
    Pem {
        /// The configuration key naming the file.
        key: &'static str,
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// One of a pair is configured without the other.
    #[error("{0}")]
    Incomplete(&'static str),
    /// rustls refused the certificates (for example a key that does not
    /// match the certificate).
    #[error("{context}: {source}")]
    Rustls {
        /// What was being built.
        context: &'static str,
        /// The cause.
        #[source]
        source: rustls::Error,
    },
    /// The client CA could not be turned into a verifier.
    #[error("server.tls.client_ca: {0}")]
    Verifier(String),
}

fn read(key: &'static str, path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|source| TlsError::Read {
        key,
        path: path.to_owned(),
        source,
    })
}

fn certificates(
    key: &'static str,
    path: &Path,
    pem: &[u8],
) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let bad = |message: String| TlsError::Pem {
        key,
        path: path.to_owned(),
        message,
    };
    let chain = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|error| bad(error.to_string()))?;
    if chain.is_empty() {
        return Err(bad("no CERTIFICATE in the file".into()));
    }
    Ok(chain)
}

fn private_key(
    key: &'static str,
    path: &Path,
    pem: &[u8],
) -> Result<PrivateKeyDer<'static>, TlsError> {
    PrivateKeyDer::from_pem_slice(pem).map_err(|error| TlsError::Pem {
        key,
        path: path.to_owned(),
        message: format!("no private key: {error}"),
    })
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// The certificate and key files and what they held when last loaded.
#[derive(Debug)]
struct CertFiles {
    cert: PathBuf,
    key: PathBuf,
    /// The bytes behind the served certificate, to notice a change.
    loaded: PemPair,
}

/// The bytes of a certificate file and its key file.
#[derive(Debug, PartialEq, Eq)]
struct PemPair {
    cert: Vec<u8>,
    key: Vec<u8>,
}

/// The configuration keys of a certificate and its key, for messages.
#[derive(Debug, Clone, Copy)]
struct PairKeys {
    cert: &'static str,
    key: &'static str,
    both: &'static str,
}

const SERVER_PAIR: PairKeys = PairKeys {
    cert: "server.tls.cert",
    key: "server.tls.key",
    both: "server.tls.cert and server.tls.key",
};

const CLIENT_PAIR: PairKeys = PairKeys {
    cert: "client_tls.cert",
    key: "client_tls.key",
    both: "client_tls.cert and client_tls.key",
};

/// Reads and checks a certificate chain and its key (they must match).
fn load_pair(
    keys: PairKeys,
    cert: &Path,
    key: &Path,
    provider: &CryptoProvider,
) -> Result<(Arc<CertifiedKey>, PemPair), TlsError> {
    let pem = PemPair {
        cert: read(keys.cert, cert)?,
        key: read(keys.key, key)?,
    };
    let chain = certificates(keys.cert, cert, &pem.cert)?;
    let private = private_key(keys.key, key, &pem.key)?;
    let certified =
        CertifiedKey::from_der(chain, private, provider).map_err(|source| TlsError::Rustls {
            context: keys.both,
            source,
        })?;
    Ok((Arc::new(certified), pem))
}

/// A certificate and its key, swapped in place when their files change:
/// the server's (checked every `reload_interval`) and the client's
/// (checked at each handshake).
#[derive(Debug)]
struct ReloadingPair {
    keys: PairKeys,
    current: RwLock<Arc<CertifiedKey>>,
    files: std::sync::Mutex<CertFiles>,
    provider: Arc<CryptoProvider>,
}

impl ReloadingPair {
    fn open(
        keys: PairKeys,
        cert: &Path,
        key: &Path,
        provider: Arc<CryptoProvider>,
    ) -> Result<Self, TlsError> {
        let (current, loaded) = load_pair(keys, cert, key, &provider)?;
        Ok(Self {
            keys,
            current: RwLock::new(current),
            files: std::sync::Mutex::new(CertFiles {
                cert: cert.to_owned(),
                key: key.to_owned(),
                loaded,
            }),
            provider,
        })
    }

    /// The pair in use.
    fn current(&self) -> Arc<CertifiedKey> {
        Arc::clone(
            &self
                .current
                .read()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        )
    }

    /// The PEM bytes of the pair in use.
    fn pem(&self) -> (Vec<u8>, Vec<u8>) {
        let files = self
            .files
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        (files.loaded.cert.clone(), files.loaded.key.clone())
    }

    /// Loads the files again when their bytes changed; `Ok(true)` when a
    /// new pair is now in use.
    fn reload(&self) -> Result<bool, TlsError> {
        let mut files = self
            .files
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let on_disk = PemPair {
            cert: read(self.keys.cert, &files.cert)?,
            key: read(self.keys.key, &files.key)?,
        };
        if on_disk == files.loaded {
            return Ok(false);
        }
        let (certified, loaded) = load_pair(self.keys, &files.cert, &files.key, &self.provider)?;
        *self
            .current
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = certified;
        files.loaded = loaded;
        Ok(true)
    }
}

impl ResolvesServerCert for ReloadingPair {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current())
    }
}

/// A server's TLS: the acceptor, its reloading certificate and its limits.
#[derive(Clone)]
pub struct ServerTls {
    acceptor: TlsAcceptor,
    cert: Arc<ReloadingPair>,
    reload_interval: Duration,
    handshake_timeout: Duration,
    mutual: bool,
}

impl std::fmt::Debug for ServerTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerTls")
            .field("mutual", &self.mutual)
            .field("reload_interval", &self.reload_interval)
            .field("handshake_timeout", &self.handshake_timeout)
            .finish_non_exhaustive()
    }
}

impl ServerTls {
    /// The TLS of `config`, or `None` when it names no certificate
    /// (plaintext).
    pub fn from_config(config: &ServerTlsConfig) -> Result<Option<Self>, TlsError> {
        let (cert, key) = match (&config.cert, &config.key) {
            (None, None) => {
                if config.client_ca.is_some() {
                    return Err(TlsError::Incomplete(
                        "server.tls.client_ca needs server.tls.cert and server.tls.key",
                    ));
                }
                return Ok(None);
            }
            (Some(cert), Some(key)) => (cert, key),
            (Some(_), None) => {
                return Err(TlsError::Incomplete(
                    "server.tls.cert is set without server.tls.key",
                ));
            }
            (None, Some(_)) => {
                return Err(TlsError::Incomplete(
                    "server.tls.key is set without server.tls.cert",
                ));
            }
        };
        let provider = provider();
        let reloading = Arc::new(ReloadingPair::open(
            SERVER_PAIR,
            cert,
            key,
            Arc::clone(&provider),
        )?);
        let builder = RustlsServerConfig::builder_with_provider(Arc::clone(&provider))
            .with_safe_default_protocol_versions()
            .map_err(|source| TlsError::Rustls {
                context: "server TLS versions",
                source,
            })?;
        let builder = match &config.client_ca {
            None => builder.with_no_client_auth(),
            Some(path) => {
                let pem = read("server.tls.client_ca", path)?;
                let mut roots = RootCertStore::empty();
                for ca in certificates("server.tls.client_ca", path, &pem)? {
                    roots.add(ca).map_err(|source| TlsError::Rustls {
                        context: "server.tls.client_ca",
                        source,
                    })?;
                }
                let verifier =
                    WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                        .build()
                        .map_err(|error| TlsError::Verifier(error.to_string()))?;
                builder.with_client_cert_verifier(verifier)
            }
        };
        let mut server = builder.with_cert_resolver(Arc::clone(&reloading) as _);
        // gRPC is HTTP/2 only.
        server.alpn_protocols = vec![b"h2".to_vec()];
        Ok(Some(Self {
            acceptor: TlsAcceptor::from(Arc::new(server)),
            cert: reloading,
            reload_interval: config.reload_interval,
            handshake_timeout: config.handshake_timeout,
            mutual: config.client_ca.is_some(),
        }))
    }

    /// Whether clients must present a certificate.
    pub fn is_mutual(&self) -> bool {
        self.mutual
    }

    /// Checks the certificate files every `reload_interval` until the
    /// returned task is aborted; a change is served to new connections, a
    /// pair that does not load is logged and the old one kept.
    pub fn spawn_reloader(&self) -> tokio::task::JoinHandle<()> {
        let cert = Arc::clone(&self.cert);
        let interval = self.reload_interval.max(Duration::from_millis(10));
        tokio::spawn(async move {
            let mut ticks = tokio::time::interval(interval);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            ticks.tick().await;
            loop {
                ticks.tick().await;
                match cert.reload() {
                    Ok(true) => tracing::info!("TLS certificate reloaded: new connections get it"),
                    Ok(false) => {}
                    Err(error) => tracing::warn!(
                        %error,
                        "TLS certificate not reloaded: the previous one is still served"
                    ),
                }
            }
        })
    }

    /// The TLS connections of `listener`, each handshake in its own task
    /// (bounded by `handshake_timeout`; a failed one is logged and dropped).
    /// Accepting stops when the returned stream is dropped.
    pub fn incoming(
        &self,
        listener: TcpListener,
    ) -> ReceiverStream<std::io::Result<TlsStream<TcpStream>>> {
        let (sender, receiver) = tokio::sync::mpsc::channel(64);
        let acceptor = self.acceptor.clone();
        let handshake_timeout = self.handshake_timeout;
        tokio::spawn(async move {
            loop {
                let accepted = tokio::select! {
                    accepted = listener.accept() => accepted,
                    () = sender.closed() => return,
                };
                let (socket, peer) = match accepted {
                    Ok(accepted) => accepted,
                    Err(error) => {
                        // Out of descriptors and the like: wait instead of
                        // spinning; the listener itself stays open.
                        tracing::warn!(%error, "cannot accept a connection");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                if let Err(error) = socket.set_nodelay(true) {
                    tracing::warn!(%error, "cannot disable nagle on an accepted socket");
                }
                let acceptor = acceptor.clone();
                let sender = sender.clone();
                tokio::spawn(async move {
                    match tokio::time::timeout(handshake_timeout, acceptor.accept(socket)).await {
                        Ok(Ok(stream)) => {
                            let _ = sender.send(Ok(stream)).await;
                        }
                        Ok(Err(error)) => handshake_failed(peer, &error.to_string()),
                        Err(_) => handshake_failed(peer, "timed out"),
                    }
                });
            }
        });
        ReceiverStream::new(receiver)
    }
}

fn handshake_failed(peer: SocketAddr, why: &str) {
    tracing::info!(%peer, error = why, "TLS handshake failed");
}

/// The client certificate: each handshake (a new connection) compares the
/// files with what was loaded and takes a new pair that loads; one that
/// does not is logged and the old one shown.
#[derive(Debug)]
struct ClientCert(ReloadingPair);

impl rustls::client::ResolvesClientCert for ClientCert {
    fn resolve(
        &self,
        _root_hint_subjects: &[&[u8]],
        _sigschemes: &[rustls::SignatureScheme],
    ) -> Option<Arc<CertifiedKey>> {
        match self.0.reload() {
            Ok(true) => tracing::info!("client certificate reloaded: new connections show it"),
            Ok(false) => {}
            Err(error) => tracing::warn!(
                %error,
                "client certificate not reloaded: the previous one is still shown"
            ),
        }
        Some(self.0.current())
    }

    fn has_certs(&self) -> bool {
        true
    }
}

/// A rustls client configuration for gRPC: ALPN h2 and no session
/// resumption, so every new connection verifies the server's current
/// certificate and shows the current client certificate (a resumed session
/// would skip both; gRPC connections live long, so a full handshake per
/// connection costs nothing that shows).
fn client_config(
    provider: Arc<CryptoProvider>,
    roots: RootCertStore,
    client_cert: Option<ClientCert>,
) -> Result<rustls::ClientConfig, TlsError> {
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|source| TlsError::Rustls {
            context: "client TLS versions",
            source,
        })?
        .with_root_certificates(roots);
    let mut config = match client_cert {
        None => builder.with_no_client_auth(),
        Some(cert) => builder.with_client_cert_resolver(Arc::new(cert)),
    };
    config.alpn_protocols = vec![b"h2".to_vec()];
    config.resumption = rustls::client::Resumption::disabled();
    Ok(config)
}

/// The client configuration without `[client_tls]`: the system's roots,
/// no client certificate; read once.
fn default_client_config() -> Option<Arc<rustls::ClientConfig>> {
    static DEFAULT: std::sync::OnceLock<Option<Arc<rustls::ClientConfig>>> =
        std::sync::OnceLock::new();
    DEFAULT
        .get_or_init(|| {
            client_config(provider(), native_roots(), None)
                .map(Arc::new)
                .map_err(|error| tracing::warn!(%error, "no default client TLS"))
                .ok()
        })
        .clone()
}

/// A binary's client-side TLS: the CA (or the system's roots) servers are
/// verified against, and the client certificate, re-read when its files
/// change.
#[derive(Debug, Clone, Default)]
pub struct ClientTls {
    /// For the OTLP exporter, which takes tonic's settings (read once).
    config: Option<tonic::transport::ClientTlsConfig>,
    /// For gRPC channels (see [`ClientTls::endpoint`]).
    rustls: Option<Arc<rustls::ClientConfig>>,
}

/// An endpoint made by [`ClientTls::endpoint`]: for an `https://` URL
/// tonic dials the `http://` form of the address and sends the `https://`
/// origin, while the connector does the TLS (tonic's own TLS reads its
/// certificates once; this one's client certificate follows its files);
/// for a `unix:` URL the connector dials the socket ([`crate::unix`]).
#[derive(Debug, Clone)]
pub struct ClientEndpoint {
    endpoint: tonic::transport::Endpoint,
    dial: Dial,
}

/// How a [`ClientEndpoint`] opens its connections.
#[derive(Debug, Clone)]
enum Dial {
    /// tonic's own TCP connector (`http://`).
    Tcp,
    /// TCP then this TLS (`https://`).
    Tls(Arc<rustls::ClientConfig>),
    /// This Unix socket (`unix:`), plaintext.
    #[cfg(unix)]
    Unix(crate::unix::UnixConnector),
}

/// Why an upstream URL cannot be dialled.
#[derive(Debug, thiserror::Error)]
pub enum EndpointError {
    /// Not a URL tonic takes.
    #[error(transparent)]
    Uri(#[from] tonic::transport::Error),
    /// A `unix:` URL that names no usable socket path.
    #[error("{0}")]
    Unix(String),
}

impl ClientEndpoint {
    /// The endpoint with tonic's settings applied by `configure` (time-outs,
    /// keep-alive, Nagle).
    pub fn configure(
        mut self,
        configure: impl FnOnce(tonic::transport::Endpoint) -> tonic::transport::Endpoint,
    ) -> Self {
        self.endpoint = configure(self.endpoint);
        self
    }

    /// The address dialled (the `http://` form of an `https://` URL;
    /// `http://localhost` for a Unix socket).
    pub fn uri(&self) -> &http::Uri {
        self.endpoint.uri()
    }

    /// A channel that connects on first use (and again after the peer
    /// comes back).
    pub fn connect_lazy(self) -> tonic::transport::Channel {
        match self.dial {
            Dial::Tcp => self.endpoint.connect_lazy(),
            Dial::Tls(tls) => self
                .endpoint
                .connect_with_connector_lazy(TlsConnector { tls }),
            #[cfg(unix)]
            Dial::Unix(unix) => self.endpoint.connect_with_connector_lazy(unix),
        }
    }

    /// A channel, connected now.
    pub async fn connect(self) -> Result<tonic::transport::Channel, tonic::transport::Error> {
        match self.dial {
            Dial::Tcp => self.endpoint.connect().await,
            Dial::Tls(tls) => {
                self.endpoint
                    .connect_with_connector(TlsConnector { tls })
                    .await
            }
            #[cfg(unix)]
            Dial::Unix(unix) => self.endpoint.connect_with_connector(unix).await,
        }
    }
}

/// Dials TCP (Nagle off) and does the TLS handshake of [`ClientTls`].
#[derive(Debug, Clone)]
struct TlsConnector {
    tls: Arc<rustls::ClientConfig>,
}

type TlsIo = hyper_util::rt::TokioIo<tokio_rustls::client::TlsStream<TcpStream>>;

impl tower::Service<http::Uri> for TlsConnector {
    type Response = TlsIo;
    type Error = std::io::Error;
    type Future =
        std::pin::Pin<Box<dyn std::future::Future<Output = Result<TlsIo, std::io::Error>> + Send>>;

    fn poll_ready(
        &mut self,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Self::Error>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, uri: http::Uri) -> Self::Future {
        let connector = tokio_rustls::TlsConnector::from(Arc::clone(&self.tls));
        Box::pin(async move {
            let invalid =
                |message: String| std::io::Error::new(std::io::ErrorKind::InvalidInput, message);
            let host = uri
                .host()
                .ok_or_else(|| invalid(format!("`{uri}` has no host")))?
                .trim_start_matches('[')
                .trim_end_matches(']')
                .to_owned();
            let port = uri.port_u16().unwrap_or(443);
            let tcp = TcpStream::connect((host.as_str(), port)).await?;
            tcp.set_nodelay(true)?;
            let name = rustls::pki_types::ServerName::try_from(host)
                .map_err(|error| invalid(error.to_string()))?;
            let tls = connector.connect(name, tcp).await?;
            Ok(hyper_util::rt::TokioIo::new(tls))
        })
    }
}

impl ClientTls {
    /// Reads the CA and the client certificate of `config` (checked here,
    /// so a bad file stops start-up rather than the first call).
    pub fn from_config(config: &ClientTlsConfig) -> Result<Self, TlsError> {
        let provider = provider();
        let mut tonic_tls = tonic::transport::ClientTlsConfig::new();
        let mut roots = RootCertStore::empty();
        match &config.ca {
            Some(path) => {
                let pem = read("client_tls.ca", path)?;
                for ca in certificates("client_tls.ca", path, &pem)? {
                    roots.add(ca).map_err(|source| TlsError::Rustls {
                        context: "client_tls.ca",
                        source,
                    })?;
                }
                tonic_tls = tonic_tls.ca_certificate(tonic::transport::Certificate::from_pem(pem));
            }
            None => {
                tonic_tls = tonic_tls.with_native_roots();
                roots = native_roots();
            }
        }
        let client_cert = match (&config.cert, &config.key) {
            (None, None) => None,
            (Some(cert), Some(key)) => {
                let pair = ReloadingPair::open(CLIENT_PAIR, cert, key, Arc::clone(&provider))?;
                let (cert_pem, key_pem) = pair.pem();
                tonic_tls =
                    tonic_tls.identity(tonic::transport::Identity::from_pem(cert_pem, key_pem));
                Some(ClientCert(pair))
            }
            _ => {
                return Err(TlsError::Incomplete(
                    "client_tls.cert and client_tls.key go together",
                ));
            }
        };
        let rustls = client_config(provider, roots, client_cert)?;
        Ok(Self {
            config: Some(tonic_tls),
            rustls: Some(Arc::new(rustls)),
        })
    }

    /// tonic's TLS settings for an `https://` endpoint (the OTLP exporter's;
    /// its client certificate is read once).
    pub fn tonic_config(&self) -> tonic::transport::ClientTlsConfig {
        self.config
            .clone()
            .unwrap_or_else(|| tonic::transport::ClientTlsConfig::new().with_native_roots())
    }

    /// The endpoint of `url`: with this TLS when its scheme is `https`,
    /// plaintext for `http`, and the Unix socket of a `unix:/path` or
    /// `unix:///path` URL (plaintext: the socket's file permissions say
    /// who may connect).
    pub fn endpoint(&self, url: &str) -> Result<ClientEndpoint, EndpointError> {
        if let Some(path) = crate::unix::socket_path(url) {
            let path = path.map_err(EndpointError::Unix)?;
            return unix_endpoint(path);
        }
        let endpoint = tonic::transport::Endpoint::from_shared(url.to_owned())?;
        if endpoint.uri().scheme_str() != Some("https") {
            return Ok(ClientEndpoint {
                endpoint,
                dial: Dial::Tcp,
            });
        }
        let origin = endpoint.uri().clone();
        let authority = origin
            .authority()
            .map(|authority| authority.as_str().to_owned())
            .unwrap_or_default();
        let dialled =
            tonic::transport::Endpoint::from_shared(format!("http://{authority}"))?.origin(origin);
        let Some(tls) = self.rustls.clone().or_else(default_client_config) else {
            // tonic then says that https:// needs TLS, at the first call.
            return Ok(ClientEndpoint {
                endpoint,
                dial: Dial::Tcp,
            });
        };
        Ok(ClientEndpoint {
            endpoint: dialled,
            dial: Dial::Tls(tls),
        })
    }
}

/// The endpoint of a Unix socket: tonic needs an `http://` URI for the
/// request's `:authority`, `localhost` as gRPC's own clients send.
#[cfg(unix)]
fn unix_endpoint(path: PathBuf) -> Result<ClientEndpoint, EndpointError> {
    Ok(ClientEndpoint {
        endpoint: tonic::transport::Endpoint::from_static("http://localhost"),
        dial: Dial::Unix(crate::unix::UnixConnector {
            path: Arc::from(path),
        }),
    })
}

#[cfg(not(unix))]
fn unix_endpoint(path: PathBuf) -> Result<ClientEndpoint, EndpointError> {
    Err(EndpointError::Unix(format!(
        "`unix:{}`: Unix domain sockets are not supported on this platform",
        path.display()
    )))
}

/// The system's trust roots (those that do not parse are left out).
fn native_roots() -> RootCertStore {
    let mut roots = RootCertStore::empty();
    let found = rustls_native_certs::load_native_certs();
    for error in &found.errors {
        tracing::warn!(%error, "a system root certificate could not be read");
    }
    let (added, ignored) = roots.add_parsable_certificates(found.certs);
    if ignored > 0 {
        tracing::debug!(added, ignored, "system root certificates");
    }
    roots
}
