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

mod client;
mod server;

pub use client::{ClientEndpoint, ClientTls, EndpointError};
pub use server::ServerTls;
