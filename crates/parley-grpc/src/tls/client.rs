//! A client's TLS ([`ClientTls`]): `https://` upstreams verified against
//! the configured CA or the system's roots, the client certificate shown
//! and reloaded, and `unix:` sockets dialled directly.

use super::*;

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
