//! gRPC over a Unix domain socket: the sidecar hop inside one pod.
//!
//! **Servers** (`server.uds_listen`, flag `--uds-listen`): [`bind`] opens
//! the socket beside the TCP listener, and [`crate::serve`] serves the same
//! router on it (health, reflection, the same layers, the same drain). A
//! socket file left by a process that died is replaced; a file that is not
//! a socket, or a socket another server still answers on, is refused. The
//! socket is made `0660` (owner and group may connect) and removed when the
//! server stops. The socket is always plaintext, also when the TCP listener
//! serves TLS: who may connect is decided by the file's permissions (and,
//! in Kubernetes, by which containers mount the volume), not by
//! certificates.
//!
//! **Clients** ([`socket_path`], used by [`crate::tls::ClientTls::endpoint`]):
//! an upstream URL `unix:/path/to.sock` or `unix:///path/to.sock` (an
//! absolute path), or `unix:relative.sock`, dials the socket; the
//! HTTP/2 `:authority` sent is `localhost`.

use std::path::{Path, PathBuf};

/// The longest socket path the kernel takes (`sun_path` holds 108 bytes,
/// the last one a NUL).
pub const MAX_PATH_BYTES: usize = 107;

/// The scheme of a Unix-socket URL.
const SCHEME: &str = "unix:";

/// The socket path of a `unix:` URL: `None` when `url` is not one,
/// `Some(Err(why))` when it is one that names no usable path.
pub fn socket_path(url: &str) -> Option<Result<PathBuf, String>> {
    let scheme = url.get(..SCHEME.len())?;
    if !scheme.eq_ignore_ascii_case(SCHEME) {
        return None;
    }
    let rest = &url[SCHEME.len()..];
    let path = match rest.strip_prefix("//") {
        // unix:///abs: an empty authority, then the absolute path.
        Some(after) if after.starts_with('/') => after,
        Some(_) => {
            return Some(Err(format!(
                "`{url}` names a host: a Unix socket URL is unix:/path/to.sock or unix:///path/to.sock"
            )));
        }
        None => rest,
    };
    Some(check_path(path).map_err(|why| format!("`{url}`: {why}")))
}

/// Checks a socket path: not empty, no NUL, short enough for the kernel.
pub fn check_path(path: &str) -> Result<PathBuf, String> {
    if path.is_empty() {
        return Err("names no socket path".to_owned());
    }
    if path.contains('\0') {
        return Err("the socket path holds a NUL byte".to_owned());
    }
    if path.len() > MAX_PATH_BYTES {
        return Err(format!(
            "the socket path is {} bytes long; the kernel takes at most {MAX_PATH_BYTES}",
            path.len()
        ));
    }
    Ok(PathBuf::from(path))
}

/// Why the socket could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum UnixListenError {
    /// Something other than a socket is at the path.
    #[error("cannot listen on {} (server.uds_listen): the file exists and is not a socket", path.display())]
    NotASocket {
        /// The path.
        path: PathBuf,
    },
    /// Another server answers on the socket.
    #[error("cannot listen on {} (server.uds_listen): another server is listening on it", path.display())]
    InUse {
        /// The path.
        path: PathBuf,
    },
    /// The system refused (no such directory, no permission...).
    #[error("cannot listen on {} (server.uds_listen): {source}", path.display())]
    Io {
        /// The path.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// Unix sockets do not exist on this platform.
    #[error("server.uds_listen: Unix domain sockets are not supported on this platform")]
    Unsupported,
}

/// A bound socket and its file, removed when this is dropped (unless
/// another process has put its own socket there since).
#[cfg(unix)]
#[derive(Debug)]
pub struct UnixSocket {
    listener: Option<tokio::net::UnixListener>,
    file: SocketFile,
}

#[cfg(unix)]
impl UnixSocket {
    /// The path.
    pub fn path(&self) -> &Path {
        &self.file.path
    }

    /// The listener, taken once (the file stays with `self`).
    pub fn take_listener(&mut self) -> Option<tokio::net::UnixListener> {
        self.listener.take()
    }
}

/// The socket's file, removed on drop if it is still the one bound.
#[cfg(unix)]
#[derive(Debug)]
struct SocketFile {
    path: PathBuf,
    /// (device, inode) of the socket when it was bound.
    identity: Option<(u64, u64)>,
}

#[cfg(unix)]
fn identity(path: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::symlink_metadata(path)
        .ok()
        .map(|meta| (meta.dev(), meta.ino()))
}

#[cfg(unix)]
impl Drop for SocketFile {
    fn drop(&mut self) {
        if self.identity.is_some() && identity(&self.path) == self.identity {
            match std::fs::remove_file(&self.path) {
                Ok(()) => tracing::debug!(path = %self.path.display(), "socket file removed"),
                Err(error) => tracing::warn!(
                    path = %self.path.display(),
                    %error,
                    "cannot remove the socket file"
                ),
            }
        }
    }
}

/// Binds `path`: a stale socket file (nobody answers on it) is removed
/// first; the socket is made `0660`. Must run inside a Tokio runtime.
#[cfg(unix)]
pub fn bind(path: &Path) -> Result<UnixSocket, UnixListenError> {
    use std::os::unix::fs::{FileTypeExt, PermissionsExt};

    let io = |source| UnixListenError::Io {
        path: path.to_owned(),
        source,
    };
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_socket() => {
            match std::os::unix::net::UnixStream::connect(path) {
                Ok(_) => {
                    return Err(UnixListenError::InUse {
                        path: path.to_owned(),
                    });
                }
                Err(error) => {
                    tracing::info!(
                        path = %path.display(),
                        %error,
                        "removing a stale socket file (nobody answers on it)"
                    );
                    std::fs::remove_file(path).map_err(io)?;
                }
            }
        }
        Ok(_) => {
            return Err(UnixListenError::NotASocket {
                path: path.to_owned(),
            });
        }
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
        Err(error) => return Err(io(error)),
    }
    let listener = tokio::net::UnixListener::bind(path).map_err(io)?;
    let file = SocketFile {
        path: path.to_owned(),
        identity: identity(path),
    };
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o660)).map_err(io)?;
    Ok(UnixSocket {
        listener: Some(listener),
        file,
    })
}

/// Dials the socket at `path` for every connection tonic opens.
#[cfg(unix)]
#[derive(Debug, Clone)]
pub(crate) struct UnixConnector {
    pub(crate) path: std::sync::Arc<Path>,
}

#[cfg(unix)]
type UnixIo = hyper_util::rt::TokioIo<tokio::net::UnixStream>;

#[cfg(unix)]
impl tower::Service<http::Uri> for UnixConnector {
    type Response = UnixIo;
    type Error = std::io::Error;
    type Future =
        std::pin::Pin<Box<dyn std::future::Future<Output = Result<UnixIo, std::io::Error>> + Send>>;

    fn poll_ready(
        &mut self,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Self::Error>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, _uri: http::Uri) -> Self::Future {
        let path = std::sync::Arc::clone(&self.path);
        Box::pin(async move {
            let stream = tokio::net::UnixStream::connect(&*path)
                .await
                .map_err(|error| {
                    std::io::Error::new(error.kind(), format!("{}: {error}", path.display()))
                })?;
            Ok(hyper_util::rt::TokioIo::new(stream))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unix_urls_give_their_path() {
        for (url, path) in [
            ("unix:/run/parley/parser.sock", "/run/parley/parser.sock"),
            ("unix:///run/parley/parser.sock", "/run/parley/parser.sock"),
            ("UNIX:/tmp/p.sock", "/tmp/p.sock"),
            ("unix:parser.sock", "parser.sock"),
        ] {
            assert_eq!(
                socket_path(url).map(|p| p.expect("valid")),
                Some(PathBuf::from(path)),
                "{url}"
            );
        }
    }

    #[test]
    fn other_urls_are_not_unix() {
        for url in [
            "http://127.0.0.1:50053",
            "https://parser:1",
            "",
            "uni",
            "unixx:/a",
        ] {
            assert!(socket_path(url).is_none(), "{url}");
        }
    }

    #[test]
    fn bad_unix_urls_say_why() {
        for (url, why) in [
            ("unix:", "names no socket path"),
            ("unix://", "names a host"),
            ("unix://parser/run/p.sock", "names a host"),
            ("unix:/a\0b", "NUL"),
        ] {
            let error = socket_path(url).expect("a unix: URL").expect_err("invalid");
            assert!(error.contains(why), "{url}: {error}");
        }
        let long = format!("unix:/{}", "x".repeat(MAX_PATH_BYTES));
        let error = socket_path(&long)
            .expect("a unix: URL")
            .expect_err("too long");
        assert!(error.contains("at most 107"), "{error}");
    }
}
