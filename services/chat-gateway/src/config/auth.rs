//! `[auth]`: who may call — JWT issuers (a secret, a PEM key or a JWKS),
//! static tokens, the tenant and admin claims, and dev mode.

use std::{path::PathBuf, time::Duration};

use parley_grpc::config::duration;
use serde::{Deserialize, Serialize};

/// `[auth]`: who may call. At least one JWT issuer or static token is
/// required, unless dev mode is asked for explicitly (`dev = true` or
/// `--dev-auth`: every call is user `dev`, loudly logged); with neither the
/// gateway refuses to start.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AuthConfig {
    /// Dev mode: no token is checked and every caller is user `dev`, even
    /// when verifiers are configured. Off unless asked for (this key or
    /// `--dev-auth`). For local use: on a `server.listen` address other
    /// than loopback it also needs `dev_allow_remote`.
    pub dev: bool,
    /// Allows dev mode on a listen address other than loopback (a
    /// container's `0.0.0.0` in a test stack); the gateway then logs a
    /// warning every minute. Never in production.
    pub dev_allow_remote: bool,
    /// Clock skew allowed on `exp` and `nbf`.
    #[serde(with = "duration")]
    pub leeway: Duration,
    /// `[[auth.jwt]]`: accepted JWT issuers.
    pub jwt: Vec<JwtConfig>,
    /// `[[auth.static_tokens]]`: fixed tokens, each naming its user.
    pub static_tokens: Vec<StaticTokenConfig>,
    /// The JWT claim that names the caller's tenant (absent: no tenant).
    /// Tenants group users for limits and metrics, and separate owners:
    /// the same `sub` in two tenants is two users.
    pub tenant_claim: String,
    /// `[auth.admin_claim]`: the JWT claim that marks an administrator,
    /// who may read a page's assembled system prompt (`DescribePage` with
    /// `include_system_prompt`); everyone else gets the page's payload
    /// types, tools and actions without it. Unset, no JWT caller is one
    /// (static tokens say so with their own `admin`; dev mode's user is).
    pub admin_claim: Option<AdminClaim>,
    /// Longest time one JWKS fetch (`jwks_url`) may take, connection
    /// included.
    #[serde(with = "duration")]
    pub jwks_timeout: Duration,
    /// Largest JWKS document read, in bytes; a larger one fails the fetch
    /// (the last good key set is kept).
    pub jwks_max_bytes: usize,
    /// Least time between two JWKS fetches of one issuer that a token with
    /// an unknown `kid` asks for.
    #[serde(with = "duration")]
    pub jwks_min_interval: Duration,
    /// Who owns what was stored before owners were scoped by issuer:
    /// `dev`, `static` or a JWT issuer. Unset, the only identity source
    /// configured adopts those rows; with several, they stay hidden (and
    /// the gateway says so at start-up) until this is set.
    pub legacy_issuer: Option<String>,
}

impl Default for AuthConfig {
    fn default() -> Self {
        Self {
            dev: false,
            dev_allow_remote: false,
            leeway: Duration::from_secs(30),
            jwt: Vec::new(),
            static_tokens: Vec::new(),
            tenant_claim: "tenant".into(),
            admin_claim: None,
            jwks_timeout: Duration::from_secs(5),
            jwks_max_bytes: 512 * 1024,
            jwks_min_interval: Duration::from_secs(30),
            legacy_issuer: None,
        }
    }
}

/// `[auth.admin_claim]`: a JWT marks an administrator when its claim
/// `claim` is the string `value`, a space-separated list of words with
/// `value` among them (as OAuth's `scope`), or an array with `value` among
/// its strings.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AdminClaim {
    /// The claim's name, e.g. `roles`.
    pub claim: String,
    /// The value it must hold, e.g. `parley-admin`.
    pub value: String,
}

/// The JWT signature algorithms the gateway accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum JwtAlgorithm {
    /// HMAC with SHA-256 and a shared secret.
    HS256,
    /// RSA PKCS#1 v1.5 with SHA-256 and a public key.
    RS256,
    /// ECDSA on P-256 with SHA-256 and a public key.
    ES256,
    /// Ed25519 and a public key.
    EdDSA,
}

fn default_jwks_refresh() -> Duration {
    Duration::from_secs(600)
}

/// One accepted issuer.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JwtConfig {
    /// The required `iss` claim.
    pub issuer: String,
    /// The required `aud` claim.
    pub audience: String,
    /// The signature algorithm.
    pub algorithm: JwtAlgorithm,
    /// HS256: the secret, inline (prefer `secret_env`); never printed.
    #[serde(skip_serializing)]
    pub secret: Option<String>,
    /// HS256: the environment variable holding the secret.
    pub secret_env: Option<String>,
    /// HS256: a file holding the secret (read at start and on SIGHUP,
    /// trailing line end trimmed).
    pub secret_file: Option<PathBuf>,
    /// RS256, ES256, EdDSA: a PEM file with the public key.
    pub public_key_file: Option<PathBuf>,
    /// RS256, ES256, EdDSA: the issuer's JWKS (`https://.../jwks.json`),
    /// keys chosen by the token's `kid`; fetched at start, every
    /// `jwks_refresh` and when a token names an unknown `kid`. Printed
    /// without a password it may carry.
    #[serde(serialize_with = "crate::secret::serialize_redacted_opt")]
    pub jwks_url: Option<String>,
    /// RS256, ES256, EdDSA: a JWKS file, read like `jwks_url`.
    pub jwks_file: Option<PathBuf>,
    /// How often the JWKS is fetched again; a failed fetch keeps the last
    /// good key set.
    #[serde(with = "duration", default = "default_jwks_refresh")]
    pub jwks_refresh: Duration,
}

/// One fixed token.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StaticTokenConfig {
    /// The user id the token stands for.
    pub user: String,
    /// The token, inline (prefer `token_env`); never printed.
    #[serde(skip_serializing)]
    pub token: Option<String>,
    /// The environment variable holding the token.
    pub token_env: Option<String>,
    /// A file holding the token (read at start and on SIGHUP, trailing
    /// line end trimmed).
    pub token_file: Option<PathBuf>,
    /// The tenant the token's user belongs to.
    pub tenant: Option<String>,
    /// Whether the token's user may read assembled system prompts (see
    /// `auth.admin_claim`).
    #[serde(default)]
    pub admin: bool,
}
