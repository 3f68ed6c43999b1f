//! Who is calling: the bearer token in the `authorization` metadata becomes
//! a [`Principal`] (issuer, tenant, subject), and its owner key is what
//! every store query is filtered by. The identity never comes from the
//! request body, and it is scoped by its issuer: `alice` of one identity
//! provider, `alice` of another and the static token of user `alice` are
//! three owners that never see each other's conversations; a tenant claim
//! separates the same way.
//!
//! Accepted tokens are JWTs (HS256, RS256, ES256 or EdDSA, with issuer,
//! audience and expiry checked; public keys from a PEM file or the
//! issuer's JWKS, see [`jwks`]) and static tokens from the configuration,
//! compared as
//! SHA-256 digests in constant time. Dev mode (no token needed, every
//! caller is user `dev`) is on only when asked for (`--dev-auth` or
//! `auth.dev = true`); with no verifier and no dev flag the gateway refuses
//! to start, and dev mode on an address other than loopback needs
//! `auth.dev_allow_remote = true` too (see [`check_dev_exposure`]). Known
//! placeholder secrets (the `change-me...` values once shipped as examples)
//! are refused at start-up. The check wraps only the ChatGateway service
//! (see [`AuthInterceptor`]); health and reflection need no token.
//!
//! Secrets come inline, from environment variables or from files
//! ([`crate::secret`]); [`Authenticator::reload`] reads them again (on
//! SIGHUP) and swaps the verifiers at once, so every call is checked by one
//! whole configuration, the old or the new.

pub mod jwks;
mod verifiers;

use verifiers::{JwtVerifier, StaticToken};

use std::sync::Arc;

use parley_grpc::status::ServiceError;
use tokio_util::sync::{CancellationToken, DropGuard};
use tonic::{Code, Request, Status, metadata::MetadataMap};

use crate::config::{AdminClaim, AuthConfig};

/// The user every call is attributed to in dev mode.
pub const DEV_USER: &str = "dev";

/// The issuer of dev mode's user.
pub const DEV_ISSUER: &str = "dev";

/// The issuer of the configured static tokens.
pub const STATIC_ISSUER: &str = "static";

/// Longest subject or tenant accepted from a token, in bytes.
pub const MAX_ID_BYTES: usize = 256;

/// The authenticated caller, put in the request's extensions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    /// Where the identity comes from: `jwt:<iss>`, [`STATIC_ISSUER`] or
    /// [`DEV_ISSUER`].
    pub issuer: String,
    /// The tenant (a JWT's tenant claim, a static token's `tenant`).
    pub tenant: Option<String>,
    /// The user within the issuer (a JWT's `sub`, a static token's user).
    pub subject: String,
    /// Whether the caller may read assembled system prompts: a JWT with
    /// `auth.admin_claim`, a static token with `admin = true`, or dev mode.
    pub admin: bool,
    owner: String,
}

impl Principal {
    /// The caller `subject` of `issuer`, in `tenant`.
    pub fn new(
        issuer: impl Into<String>,
        tenant: Option<String>,
        subject: impl Into<String>,
    ) -> Self {
        let issuer = issuer.into();
        let subject = subject.into();
        let owner = owner_key(&issuer, tenant.as_deref(), &subject);
        Self {
            issuer,
            tenant,
            subject,
            admin: false,
            owner,
        }
    }

    /// The same caller, an administrator or not.
    #[must_use]
    pub fn with_admin(mut self, admin: bool) -> Self {
        self.admin = admin;
        self
    }

    /// Dev mode's caller (an administrator: dev mode is for the developer
    /// of the pages).
    pub fn dev() -> Self {
        Self::new(DEV_ISSUER, None, DEV_USER).with_admin(true)
    }

    /// The key of the caller's tenant (issuer and tenant, as in the owner
    /// key), when it has one: what the per-tenant limits count by.
    pub fn tenant_key(&self) -> Option<String> {
        self.tenant.as_deref().map(|tenant| {
            owner_key(&self.issuer, Some(tenant), "")
                .trim_end()
                .to_owned()
        })
    }

    /// The key the caller's conversations and turns are stored under:
    /// `<issuer> <tenant> <subject>`, the issuer and tenant with `%` and
    /// spaces escaped, so that no two principals share one.
    pub fn owner(&self) -> &str {
        &self.owner
    }
}

/// `<issuer> <tenant> <subject>`, see [`Principal::owner`].
pub fn owner_key(issuer: &str, tenant: Option<&str>, subject: &str) -> String {
    let escape = |part: &str| part.replace('%', "%25").replace(' ', "%20");
    format!(
        "{} {} {subject}",
        escape(issuer),
        escape(tenant.unwrap_or_default())
    )
}

/// The owner-key prefix of every principal of `issuer` without a tenant
/// (what rows stored before owners were scoped are adopted into).
pub fn issuer_prefix(issuer: &str) -> String {
    owner_key(issuer, None, "")
}

/// Why the auth configuration is unusable.
#[derive(Debug, thiserror::Error)]
pub enum AuthConfigError {
    /// A JWT entry lacks its key material.
    #[error("auth.jwt entry {index} ({issuer}): {message}")]
    Jwt {
        /// Position in `[[auth.jwt]]`.
        index: usize,
        /// Its issuer.
        issuer: String,
        /// What is wrong.
        message: String,
    },
    /// Neither a verifier nor dev mode is configured.
    #[error(
        "no caller could be authenticated: configure [[auth.jwt]] (issuer, audience, algorithm and its key) or [[auth.static_tokens]] (user and token_env), or turn dev auth on explicitly for local use (--dev-auth or auth.dev = true)"
    )]
    NoVerifier,
    /// Dev mode on a listen address other than loopback, not allowed.
    #[error(
        "dev auth serves every caller as user `dev`, and server.listen ({listen}) is not a loopback address: listen on 127.0.0.1, configure [[auth.jwt]] or [[auth.static_tokens]], or set auth.dev_allow_remote = true to accept this"
    )]
    DevRemote {
        /// The listen address.
        listen: String,
    },
    /// A static token entry lacks its token.
    #[error("auth.static_tokens entry {index} (user {user}): {message}")]
    Static {
        /// Position in `[[auth.static_tokens]]`.
        index: usize,
        /// Its user.
        user: String,
        /// What is wrong.
        message: String,
    },
}

/// Why a call was not authenticated.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    /// No `authorization` metadata.
    #[error("a bearer token is required in the `authorization` metadata")]
    MissingToken,
    /// The token is not accepted (bad signature, issuer, audience, format...).
    #[error("the bearer token is not valid")]
    InvalidToken,
    /// The token has expired.
    #[error("the bearer token has expired")]
    Expired,
    /// The call reached a handler without a caller (the interceptor put
    /// none in its extensions).
    #[error("the caller is not authenticated")]
    NoCaller,
}

/// `UNAUTHENTICATED` with an `ErrorInfo`.
impl ServiceError for AuthError {
    fn code(&self) -> Code {
        Code::Unauthenticated
    }

    fn reason(&self) -> &'static str {
        match self {
            Self::MissingToken | Self::NoCaller => "MISSING_TOKEN",
            Self::InvalidToken => "INVALID_TOKEN",
            Self::Expired => "TOKEN_EXPIRED",
        }
    }
}

parley_grpc::status_from!(AuthError);

/// One whole auth configuration, swapped at once by
/// [`Authenticator::reload`].
struct Verifiers {
    dev: bool,
    jwt: Vec<JwtVerifier>,
    statics: Vec<StaticToken>,
    /// The JWT claim naming the caller's tenant.
    tenant_claim: String,
    /// The JWT claim marking an administrator.
    admin_claim: Option<AdminClaim>,
    /// Stops the JWKS refreshers of these verifiers when they are replaced.
    stop: CancellationToken,
    _stop_on_drop: DropGuard,
}

/// Checks bearer tokens.
pub struct Authenticator {
    current: std::sync::RwLock<Arc<Verifiers>>,
    force_dev: bool,
}

impl std::fmt::Debug for Authenticator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let current = self.verifiers();
        f.debug_struct("Authenticator")
            .field("dev", &current.dev)
            .field("jwt_issuers", &current.jwt.len())
            .field("static_tokens", &current.statics.len())
            .finish()
    }
}

impl Authenticator {
    /// Builds the verifiers; `force_dev` (the `--dev-auth` flag) turns dev
    /// mode on regardless, as `auth.dev` does. With no verifier and no dev
    /// flag it fails with [`AuthConfigError::NoVerifier`]. Issuers with a
    /// JWKS have no key until [`Authenticator::start`] (or use
    /// [`Authenticator::load`]).
    pub fn from_config(config: &AuthConfig, force_dev: bool) -> Result<Self, AuthConfigError> {
        Ok(Self {
            current: std::sync::RwLock::new(Arc::new(Verifiers::build(config, force_dev)?)),
            force_dev,
        })
    }

    /// [`Authenticator::from_config`], then [`Authenticator::start`].
    pub async fn load(config: &AuthConfig, force_dev: bool) -> Result<Self, AuthConfigError> {
        let auth = Self::from_config(config, force_dev)?;
        auth.start().await?;
        Ok(auth)
    }

    /// Fetches the issuers' JWKS (an issuer whose set cannot be fetched
    /// stops start-up) and keeps them fresh in the background until the
    /// verifiers are replaced or dropped.
    pub async fn start(&self) -> Result<(), AuthConfigError> {
        self.verifiers().start().await
    }

    /// Builds the verifiers from `config` again, reading every secret file,
    /// environment variable and JWKS anew, and swaps them in at once; on
    /// an error the current ones stay.
    pub async fn reload(&self, config: &AuthConfig) -> Result<(), AuthConfigError> {
        let fresh = Verifiers::build(config, self.force_dev)?;
        fresh.start().await?;
        let fresh = Arc::new(fresh);
        match self.current.write() {
            Ok(mut current) => *current = fresh,
            Err(poisoned) => *poisoned.into_inner() = fresh,
        }
        Ok(())
    }

    /// An authenticator in dev mode.
    pub fn dev() -> Self {
        Self {
            current: std::sync::RwLock::new(Arc::new(Verifiers::dev())),
            force_dev: true,
        }
    }

    fn verifiers(&self) -> Arc<Verifiers> {
        self.current
            .read()
            .map(|current| current.clone())
            .unwrap_or_else(|poisoned| poisoned.into_inner().clone())
    }

    /// The issuer whose principals own what was stored before owners were
    /// scoped by issuer (bare user ids): `configured` (`auth.legacy_issuer`)
    /// when set, else the only identity source there is (dev mode, the
    /// static tokens, or a single JWT issuer); `None` when several could
    /// have written those rows.
    pub fn legacy_issuer(&self, configured: Option<&str>) -> Option<String> {
        if let Some(issuer) = configured {
            return Some(match issuer {
                DEV_ISSUER | STATIC_ISSUER => issuer.to_owned(),
                url => format!("jwt:{url}"),
            });
        }
        let current = self.verifiers();
        if current.dev {
            return Some(DEV_ISSUER.to_owned());
        }
        match (current.jwt.as_slice(), current.statics.is_empty()) {
            ([], false) => Some(STATIC_ISSUER.to_owned()),
            ([only], true) => Some(only.issuer.clone()),
            _ => None,
        }
    }

    /// Whether every call is accepted as user `dev`.
    pub fn is_dev(&self) -> bool {
        self.verifiers().dev
    }

    /// The caller named by the request's bearer token.
    pub fn authenticate(&self, metadata: &MetadataMap) -> Result<Principal, AuthError> {
        self.verifiers().authenticate(metadata)
    }
}

pub use parley_grpc::config::is_loopback;

/// Checks dev mode against where the gateway listens: on loopback it is
/// allowed; elsewhere only with `auth.dev_allow_remote`. Returns whether dev
/// mode is exposed beyond this host (the gateway then warns every
/// [`DEV_REMOTE_WARNING_PERIOD`]).
pub fn check_dev_exposure(
    dev: bool,
    config: &AuthConfig,
    listen: &str,
) -> Result<bool, AuthConfigError> {
    if !dev || is_loopback(listen) {
        return Ok(false);
    }
    if config.dev_allow_remote {
        Ok(true)
    } else {
        Err(AuthConfigError::DevRemote {
            listen: listen.to_owned(),
        })
    }
}

/// How often a gateway serving dev auth beyond loopback says so.
pub const DEV_REMOTE_WARNING_PERIOD: std::time::Duration = std::time::Duration::from_secs(60);

/// Logs a warning every `period` (the first at once) that dev auth is
/// served beyond loopback, until `stop` is cancelled.
pub async fn warn_dev_remote(
    listen: String,
    period: std::time::Duration,
    stop: tokio_util::sync::CancellationToken,
) {
    let mut ticks = tokio::time::interval(period);
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            _ = ticks.tick() => tracing::warn!(
                %listen,
                user = DEV_USER,
                "DEV AUTH IS SERVED BEYOND LOOPBACK (auth.dev_allow_remote): no token is checked and every caller who reaches this address is user `dev`"
            ),
        }
    }
}

/// The tonic interceptor that authenticates each call and puts the
/// [`Principal`] in its extensions.
#[derive(Debug, Clone)]
pub struct AuthInterceptor(pub std::sync::Arc<Authenticator>);

impl tonic::service::Interceptor for AuthInterceptor {
    fn call(&mut self, mut request: Request<()>) -> Result<Request<()>, Status> {
        let principal = self
            .0
            .authenticate(request.metadata())
            .map_err(Status::from)?;
        request.extensions_mut().insert(principal);
        Ok(request)
    }
}

#[cfg(test)]
mod tests;
