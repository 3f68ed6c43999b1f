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

use std::sync::Arc;

use jsonwebtoken::{Algorithm, DecodingKey, Validation, errors::ErrorKind};
use sha2::{Digest, Sha256};
use subtle::{ConditionallySelectable, ConstantTimeEq};
use tokio_util::sync::{CancellationToken, DropGuard};
use tonic::{Code, Request, Status, metadata::MetadataMap};

use crate::config::{AdminClaim, AuthConfig, JwtAlgorithm, JwtConfig, StaticTokenConfig};

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
}

impl AuthError {
    /// The stable `ErrorInfo.reason`.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::MissingToken => "MISSING_TOKEN",
            Self::InvalidToken => "INVALID_TOKEN",
            Self::Expired => "TOKEN_EXPIRED",
        }
    }

    /// `UNAUTHENTICATED` with an `ErrorInfo`.
    pub fn to_status(&self) -> Status {
        parley_grpc::status::error(Code::Unauthenticated, self.reason(), self.to_string())
    }
}

/// Where a verifier's key comes from.
enum Keys {
    /// A secret or a PEM public key.
    Fixed(DecodingKey),
    /// The issuer's key set, chosen by `kid`.
    Jwks(Arc<jwks::Jwks>),
}

struct JwtVerifier {
    issuer: String,
    keys: Keys,
    validation: Validation,
    algorithm: Algorithm,
    refresh: std::time::Duration,
}

/// A static token: the SHA-256 of the token, and who it stands for.
struct StaticToken {
    digest: [u8; 32],
    principal: Principal,
}

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

fn digest(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

fn build_jwt(
    index: usize,
    config: &JwtConfig,
    auth: &AuthConfig,
) -> Result<JwtVerifier, AuthConfigError> {
    let fail = |message: String| AuthConfigError::Jwt {
        index,
        issuer: config.issuer.clone(),
        message,
    };
    let public_sources = [
        config.public_key_file.is_some(),
        config.jwks_url.is_some(),
        config.jwks_file.is_some(),
    ]
    .into_iter()
    .filter(|set| *set)
    .count();
    let secret_set =
        config.secret.is_some() || config.secret_env.is_some() || config.secret_file.is_some();
    let (algorithm, keys) = match config.algorithm {
        JwtAlgorithm::HS256 => {
            if public_sources > 0 {
                return Err(fail(
                    "public_key_file and jwks_* are for RS256, ES256 and EdDSA; HS256 takes secret, secret_env or secret_file".into(),
                ));
            }
            let secret = crate::secret::read(
                config.secret.as_deref(),
                config.secret_env.as_deref(),
                config.secret_file.as_deref(),
            )
            .map_err(|m| fail(format!("secret {m}")))?;
            if secret.len() < 32 {
                return Err(fail("the HS256 secret must be at least 32 bytes".into()));
            }
            (
                Algorithm::HS256,
                Keys::Fixed(DecodingKey::from_secret(secret.as_bytes())),
            )
        }
        public => {
            let algorithm = match public {
                JwtAlgorithm::RS256 => Algorithm::RS256,
                JwtAlgorithm::ES256 => Algorithm::ES256,
                _ => Algorithm::EdDSA,
            };
            if secret_set {
                return Err(fail(format!(
                    "secret is for HS256; {algorithm:?} takes public_key_file, jwks_url or jwks_file"
                )));
            }
            if public_sources != 1 {
                return Err(fail(
                    "set exactly one of public_key_file, jwks_url and jwks_file".into(),
                ));
            }
            let limits = jwks::Limits {
                timeout: auth.jwks_timeout,
                max_bytes: auth.jwks_max_bytes,
                refresh: config.jwks_refresh,
                min_interval: auth.jwks_min_interval,
            };
            let keys = if let Some(url) = &config.jwks_url {
                Keys::Jwks(Arc::new(
                    jwks::Jwks::new(jwks::Source::Url(url.clone()), algorithm, limits)
                        .map_err(fail)?,
                ))
            } else if let Some(path) = &config.jwks_file {
                Keys::Jwks(Arc::new(
                    jwks::Jwks::new(jwks::Source::File(path.clone()), algorithm, limits)
                        .map_err(fail)?,
                ))
            } else {
                let path = config
                    .public_key_file
                    .as_ref()
                    .ok_or_else(|| fail("public_key_file is required".into()))?;
                let pem = std::fs::read(path)
                    .map_err(|e| fail(format!("cannot read {}: {e}", path.display())))?;
                let key = match algorithm {
                    Algorithm::RS256 => DecodingKey::from_rsa_pem(&pem),
                    Algorithm::ES256 => DecodingKey::from_ec_pem(&pem),
                    _ => DecodingKey::from_ed_pem(&pem),
                }
                .map_err(|e| {
                    fail(format!(
                        "{} is not a {algorithm:?} public key in PEM: {e}",
                        path.display()
                    ))
                })?;
                Keys::Fixed(key)
            };
            (algorithm, keys)
        }
    };
    let mut validation = Validation::new(algorithm);
    validation.set_issuer(&[config.issuer.as_str()]);
    validation.set_audience(&[config.audience.as_str()]);
    validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
    validation.validate_exp = true;
    validation.validate_nbf = true;
    validation.leeway = auth.leeway.as_secs();
    Ok(JwtVerifier {
        issuer: format!("jwt:{}", config.issuer),
        keys,
        validation,
        algorithm,
        refresh: config.jwks_refresh,
    })
}

fn build_static(index: usize, config: &StaticTokenConfig) -> Result<StaticToken, AuthConfigError> {
    let token = crate::secret::read(
        config.token.as_deref(),
        config.token_env.as_deref(),
        config.token_file.as_deref(),
    )
    .map_err(|message| AuthConfigError::Static {
        index,
        user: config.user.clone(),
        message: format!("token {message}"),
    })?;
    if token.len() < 16 {
        return Err(AuthConfigError::Static {
            index,
            user: config.user.clone(),
            message: "the token must be at least 16 bytes".into(),
        });
    }
    Ok(StaticToken {
        digest: digest(&token),
        principal: Principal::new(STATIC_ISSUER, config.tenant.clone(), config.user.clone())
            .with_admin(config.admin),
    })
}

impl Verifiers {
    fn build(config: &AuthConfig, force_dev: bool) -> Result<Self, AuthConfigError> {
        let jwt = config
            .jwt
            .iter()
            .enumerate()
            .map(|(index, entry)| build_jwt(index, entry, config))
            .collect::<Result<Vec<_>, _>>()?;
        let statics = config
            .static_tokens
            .iter()
            .enumerate()
            .map(|(index, entry)| build_static(index, entry))
            .collect::<Result<Vec<_>, _>>()?;
        let dev = force_dev || config.dev;
        if !dev && jwt.is_empty() && statics.is_empty() {
            return Err(AuthConfigError::NoVerifier);
        }
        let stop = CancellationToken::new();
        Ok(Self {
            dev,
            jwt,
            statics,
            tenant_claim: config.tenant_claim.clone(),
            admin_claim: config.admin_claim.clone(),
            _stop_on_drop: stop.clone().drop_guard(),
            stop,
        })
    }

    fn dev() -> Self {
        let stop = CancellationToken::new();
        Self {
            dev: true,
            jwt: Vec::new(),
            statics: Vec::new(),
            tenant_claim: String::new(),
            admin_claim: None,
            _stop_on_drop: stop.clone().drop_guard(),
            stop,
        }
    }

    /// Fetches every JWKS once (a failure stops start-up or the reload)
    /// and starts their refreshers.
    async fn start(&self) -> Result<(), AuthConfigError> {
        for (index, verifier) in self.jwt.iter().enumerate() {
            if let Keys::Jwks(set) = &verifier.keys {
                let keys = set.fetch().await.map_err(|error| AuthConfigError::Jwt {
                    index,
                    issuer: verifier.issuer.clone(),
                    message: format!("JWKS: {error}"),
                })?;
                tracing::info!(issuer = %verifier.issuer, keys, refresh = ?verifier.refresh, "JWKS fetched");
                tokio::spawn(
                    set.clone()
                        .refresh(verifier.issuer.clone(), self.stop.clone()),
                );
            }
        }
        Ok(())
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

impl Verifiers {
    fn authenticate(&self, metadata: &MetadataMap) -> Result<Principal, AuthError> {
        if self.dev {
            return Ok(Principal::dev());
        }
        let header = metadata
            .get("authorization")
            .ok_or(AuthError::MissingToken)?;
        let header = header.to_str().map_err(|_| AuthError::InvalidToken)?;
        let (scheme, token) = header
            .trim()
            .split_once(' ')
            .ok_or(AuthError::InvalidToken)?;
        if !scheme.eq_ignore_ascii_case("bearer") {
            return Err(AuthError::InvalidToken);
        }
        let token = token.trim();
        if token.is_empty() {
            return Err(AuthError::MissingToken);
        }
        if let Some(principal) = self.static_principal(token) {
            return Ok(principal);
        }
        self.jwt_principal(token)
    }

    /// Compares against every static token without an early exit.
    fn static_principal(&self, token: &str) -> Option<Principal> {
        if self.statics.is_empty() {
            return None;
        }
        let presented = digest(token);
        let mut found = subtle::Choice::from(0);
        let mut index = 0_u32;
        for (position, known) in self.statics.iter().enumerate() {
            let matches = presented.ct_eq(&known.digest);
            let position = u32::try_from(position).unwrap_or(u32::MAX);
            index = u32::conditional_select(&index, &position, matches);
            found |= matches;
        }
        bool::from(found)
            .then(|| {
                self.statics
                    .get(index as usize)
                    .map(|known| known.principal.clone())
            })
            .flatten()
    }

    fn jwt_principal(&self, token: &str) -> Result<Principal, AuthError> {
        let header = jsonwebtoken::decode_header(token).map_err(|_| AuthError::InvalidToken)?;
        let mut outcome = Err(AuthError::InvalidToken);
        for verifier in self
            .jwt
            .iter()
            .filter(|verifier| verifier.algorithm == header.alg)
        {
            let fetched;
            let key = match &verifier.keys {
                Keys::Fixed(key) => key,
                Keys::Jwks(set) => match set.key(header.kid.as_deref()) {
                    Some(key) => {
                        fetched = key;
                        &fetched
                    }
                    None => continue,
                },
            };
            match jsonwebtoken::decode::<serde_json::Map<String, serde_json::Value>>(
                token,
                key,
                &verifier.validation,
            ) {
                Ok(data) => return self.principal_of(&verifier.issuer, &data.claims),
                Err(error) => {
                    tracing::debug!(kind = ?error.kind(), "jwt rejected");
                    if matches!(error.kind(), ErrorKind::ExpiredSignature) {
                        outcome = Err(AuthError::Expired);
                    }
                }
            }
        }
        outcome
    }

    /// The principal of a verified token's claims: `sub` (required, at
    /// most [`MAX_ID_BYTES`]) and the tenant claim when present (a string,
    /// as long at most).
    fn principal_of(
        &self,
        issuer: &str,
        claims: &serde_json::Map<String, serde_json::Value>,
    ) -> Result<Principal, AuthError> {
        let id = |value: &serde_json::Value| {
            value
                .as_str()
                .map(str::trim)
                .filter(|id| !id.is_empty() && id.len() <= MAX_ID_BYTES)
                .map(str::to_owned)
                .ok_or(AuthError::InvalidToken)
        };
        let subject = claims.get("sub").map(id).ok_or(AuthError::InvalidToken)??;
        let tenant = match claims.get(&self.tenant_claim) {
            None | Some(serde_json::Value::Null) => None,
            Some(value) => Some(id(value)?),
        };
        let admin = self
            .admin_claim
            .as_ref()
            .is_some_and(|admin| claim_holds(claims.get(&admin.claim), &admin.value));
        Ok(Principal::new(issuer, tenant, subject).with_admin(admin))
    }
}

/// Whether a claim is `value`, a space-separated list of words with
/// `value` among them, or an array with `value` among its strings.
fn claim_holds(claim: Option<&serde_json::Value>, value: &str) -> bool {
    match claim {
        Some(serde_json::Value::String(text)) => text.split_ascii_whitespace().any(|w| w == value),
        Some(serde_json::Value::Array(items)) => {
            items.iter().any(|item| item.as_str() == Some(value))
        }
        _ => false,
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
            .map_err(|error| error.to_status())?;
        request.extensions_mut().insert(principal);
        Ok(request)
    }
}

#[cfg(test)]
mod tests;
