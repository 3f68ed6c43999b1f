//! A server's TLS ([`ServerTls`]): its acceptor, the certificate read
//! again every `reload_interval`, and handshakes in tasks of their own with
//! a time limit.

use super::*;

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
        // gRPC is HTTP/2 only; `with_http1` adds HTTP/1.1 for web clients.
        server.alpn_protocols = vec![b"h2".to_vec()];
        Ok(Some(Self {
            acceptor: TlsAcceptor::from(Arc::new(server)),
            cert: reloading,
            reload_interval: config.reload_interval,
            handshake_timeout: config.handshake_timeout,
            mutual: config.client_ca.is_some(),
        }))
    }

    /// The same TLS, also offering HTTP/1.1 in ALPN after `h2`: for a
    /// listener that serves browsers' and Connect clients' HTTP/1.1 next to
    /// gRPC (see [`crate::ServeOptions::accept_http1`]).
    pub fn with_http1(mut self) -> Self {
        let mut config = rustls::ServerConfig::clone(self.acceptor.config());
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        self.acceptor = TlsAcceptor::from(Arc::new(config));
        self
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
