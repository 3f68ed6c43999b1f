//! `[auth]`: who may call the runner.
//!
//! ```toml
//! [auth]
//! token_file = "/var/run/secrets/parley/runner/token"  # or token_env = "PARLEY_RUNNER_TOKEN"
//! allow_unauthenticated = false
//! ```
//!
//! With a token (`token_file` or `token_env`, one of them), every call of
//! the `AgentRunner` service (`Run`, `RunFenced`, `ListTools`) must carry
//! `authorization: Bearer <token>` — the gateway sends its
//! `upstream.runner_token_file` — or it is refused with `UNAUTHENTICATED`
//! (`MISSING_TOKEN`, `INVALID_TOKEN`), compared in constant time
//! ([`parley_grpc::bearer`]). The file is read at start and again on
//! SIGHUP. `grpc.health.v1` stays open (the kubelet's probes carry no
//! token), and so does reflection: it describes only the public API
//! (`proto/`), never data.
//!
//! On loopback the runner serves without a token. Beyond loopback it
//! refuses to start unless a token is configured, its TLS requires client
//! certificates (`server.tls.client_ca`: mutual TLS), or
//! `allow_unauthenticated = true` says the network is private; the runner
//! then logs a warning every minute.

use std::{path::PathBuf, time::Duration};

use parley_grpc::{
    config::{ServerConfig, is_loopback},
    secret::{Reloadable, SharedSecret},
};
use serde::{Deserialize, Serialize};

/// `[auth]`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AuthConfig {
    /// A file holding the bearer token every call must carry (trailing
    /// line ends trimmed; read at start and on SIGHUP).
    pub token_file: Option<PathBuf>,
    /// An environment variable holding the token (instead of the file).
    pub token_env: Option<String>,
    /// Serve without a token or mutual TLS on an address beyond loopback
    /// (a private network only); warned about every minute.
    pub allow_unauthenticated: bool,
}

/// Why the runner will not start with its `[auth]`.
#[derive(Debug, thiserror::Error)]
pub enum AuthConfigError {
    /// The token cannot be read.
    #[error("{0}")]
    Token(String),
    /// Beyond loopback with no token, no mutual TLS and no switch.
    #[error(
        "server.listen ({listen}) is not a loopback address and the runner would serve every caller who reaches it: set auth.token_file (or auth.token_env) to the bearer token the gateway sends (upstream.runner_token_file), require client certificates (server.tls.client_ca), or set auth.allow_unauthenticated = true on a private network"
    )]
    Exposed {
        /// `server.listen`.
        listen: String,
    },
}

/// How often a runner served without authentication beyond loopback says so.
pub const UNAUTHENTICATED_WARNING_PERIOD: Duration = Duration::from_secs(60);

impl AuthConfig {
    /// The token, read into a slot (none when no token is configured), and
    /// how to read it again. Relative files are under `base_dir`.
    pub fn load(
        &self,
        base_dir: &std::path::Path,
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<(SharedSecret, Option<Reloadable>), AuthConfigError> {
        if self.token_file.is_none() && self.token_env.is_none() {
            return Ok((SharedSecret::default(), None));
        }
        let key = if self.token_file.is_some() {
            "auth.token_file"
        } else {
            "auth.token_env"
        };
        let token = Reloadable {
            key: key.into(),
            env: self.token_env.clone(),
            file: self.token_file.as_ref().map(|file| base_dir.join(file)),
            slot: SharedSecret::default(),
        };
        token
            .load(lookup)
            .map_err(|problem| AuthConfigError::Token(format!("{key}: {problem}")))?;
        Ok((token.slot.clone(), Some(token)))
    }

    /// Checks the exposure of `server` with this `[auth]` (`token`: whether
    /// a token is configured). Returns whether the runner serves without
    /// authentication beyond loopback (allowed by `allow_unauthenticated`).
    pub fn check_exposure(
        &self,
        server: &ServerConfig,
        token: bool,
    ) -> Result<bool, AuthConfigError> {
        if token || server.tls.client_ca.is_some() || is_loopback(&server.listen) {
            return Ok(false);
        }
        if self.allow_unauthenticated {
            Ok(true)
        } else {
            Err(AuthConfigError::Exposed {
                listen: server.listen.clone(),
            })
        }
    }
}

/// Logs a warning every `period` (the first at once) that the runner serves
/// every caller on `listen`; runs until aborted.
pub async fn warn_unauthenticated(listen: String, period: Duration) {
    let mut ticks = tokio::time::interval(period);
    loop {
        ticks.tick().await;
        tracing::warn!(
            %listen,
            "RUNNER SERVED WITHOUT AUTHENTICATION BEYOND LOOPBACK (auth.allow_unauthenticated): every caller who reaches this address can run turns and tools; set auth.token_file or server.tls.client_ca"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server(listen: &str) -> ServerConfig {
        ServerConfig {
            listen: listen.into(),
            ..ServerConfig::local(50052, 9465)
        }
    }

    #[test]
    fn beyond_loopback_needs_a_token_mutual_tls_or_the_switch() {
        let open = AuthConfig::default();
        for listen in ["127.0.0.1:50052", "[::1]:50052", "localhost:50052"] {
            assert!(!open.check_exposure(&server(listen), false).expect(listen));
        }
        let error = open
            .check_exposure(&server("0.0.0.0:50052"), false)
            .expect_err("exposed");
        assert!(error.to_string().contains("auth.token_file"), "{error}");
        assert!(
            !open
                .check_exposure(&server("0.0.0.0:50052"), true)
                .expect("token")
        );
        let mut mutual = server("0.0.0.0:50052");
        mutual.tls.client_ca = Some("ca.pem".into());
        assert!(!open.check_exposure(&mutual, false).expect("mtls"));
        let allowed = AuthConfig {
            allow_unauthenticated: true,
            ..AuthConfig::default()
        };
        assert!(
            allowed
                .check_exposure(&server("0.0.0.0:50052"), false)
                .expect("allowed")
        );
    }

    #[test]
    fn the_token_comes_from_one_source() {
        let dir = tempfile::tempdir().expect("dir");
        std::fs::write(dir.path().join("token"), "t0k3n\n").expect("write");
        let config = AuthConfig {
            token_file: Some("token".into()),
            ..AuthConfig::default()
        };
        let (token, reload) = config.load(dir.path(), |_| None).expect("load");
        assert_eq!(token.with_exposed(str::to_owned), "t0k3n");
        assert!(reload.is_some());
        let both = AuthConfig {
            token_env: Some("T".into()),
            ..config
        };
        assert!(both.load(dir.path(), |_| Some("x".into())).is_err());
        let (none, reload) = AuthConfig::default()
            .load(dir.path(), |_| None)
            .expect("none");
        assert!(!none.is_set() && reload.is_none());
    }
}
