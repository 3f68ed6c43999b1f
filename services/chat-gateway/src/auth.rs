//! Who is calling: the bearer token in the `authorization` metadata becomes
//! a [`Principal`] (issuer, tenant, subject), and its owner key is what
//! every store query is filtered by. The identity never comes from the
//! request body, and it is scoped by its issuer: `alice` of one identity
//! provider, `alice` of another and the static token of user `alice` are
//! three owners that never see each other's conversations; a tenant claim
//! separates the same way.
//!
//! Accepted tokens are JWTs (HS256 or RS256, with issuer, audience and
//! expiry checked) and static tokens from the configuration, compared as
//! SHA-256 digests in constant time. Dev mode (no token needed, every
//! caller is user `dev`) is on only when asked for (`--dev-auth` or
//! `auth.dev = true`); with no verifier and no dev flag the gateway refuses
//! to start, and dev mode on an address other than loopback needs
//! `auth.dev_allow_remote = true` too (see [`check_dev_exposure`]). Known
//! placeholder secrets (the `change-me...` values once shipped as examples)
//! are refused at start-up. The check wraps only the ChatGateway service
//! (see [`AuthInterceptor`]); health and reflection need no token.

use jsonwebtoken::{Algorithm, DecodingKey, Validation, errors::ErrorKind};
use sha2::{Digest, Sha256};
use subtle::{ConditionallySelectable, ConstantTimeEq};
use tonic::{Code, Request, Status, metadata::MetadataMap};

use crate::config::{AuthConfig, JwtAlgorithm, JwtConfig, StaticTokenConfig};

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
            owner,
        }
    }

    /// Dev mode's caller.
    pub fn dev() -> Self {
        Self::new(DEV_ISSUER, None, DEV_USER)
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

struct JwtVerifier {
    issuer: String,
    key: DecodingKey,
    validation: Validation,
    algorithm: Algorithm,
}

/// A static token: the SHA-256 of the token, and who it stands for.
struct StaticToken {
    digest: [u8; 32],
    principal: Principal,
}

/// Checks bearer tokens.
pub struct Authenticator {
    dev: bool,
    jwt: Vec<JwtVerifier>,
    statics: Vec<StaticToken>,
    /// The JWT claim naming the caller's tenant.
    tenant_claim: String,
}

impl std::fmt::Debug for Authenticator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authenticator")
            .field("dev", &self.dev)
            .field("jwt_issuers", &self.jwt.len())
            .field("static_tokens", &self.statics.len())
            .finish()
    }
}

fn digest(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

fn env_or_inline(inline: &Option<String>, env: &Option<String>) -> Result<String, String> {
    match (inline, env) {
        (Some(_), Some(_)) => {
            Err("set only one of the inline value and its `_env` variable".into())
        }
        (Some(value), None) => Ok(value.clone()),
        (None, Some(name)) => {
            std::env::var(name).map_err(|_| format!("environment variable {name} is not set"))
        }
        (None, None) => Err("missing: set the value or its `_env` variable".into()),
    }
}

fn build_jwt(
    index: usize,
    config: &JwtConfig,
    leeway: std::time::Duration,
) -> Result<JwtVerifier, AuthConfigError> {
    let fail = |message: String| AuthConfigError::Jwt {
        index,
        issuer: config.issuer.clone(),
        message,
    };
    let (algorithm, key) = match config.algorithm {
        JwtAlgorithm::HS256 => {
            if config.public_key_file.is_some() {
                return Err(fail(
                    "public_key_file is for RS256; HS256 takes secret or secret_env".into(),
                ));
            }
            let secret = env_or_inline(&config.secret, &config.secret_env)
                .map_err(|m| fail(format!("secret {m}")))?;
            if secret.len() < 32 {
                return Err(fail("the HS256 secret must be at least 32 bytes".into()));
            }
            (
                Algorithm::HS256,
                DecodingKey::from_secret(secret.as_bytes()),
            )
        }
        JwtAlgorithm::RS256 => {
            if config.secret.is_some() || config.secret_env.is_some() {
                return Err(fail(
                    "secret is for HS256; RS256 takes public_key_file".into(),
                ));
            }
            let path = config
                .public_key_file
                .as_ref()
                .ok_or_else(|| fail("public_key_file is required".into()))?;
            let pem = std::fs::read(path)
                .map_err(|e| fail(format!("cannot read {}: {e}", path.display())))?;
            let key = DecodingKey::from_rsa_pem(&pem).map_err(|e| {
                fail(format!(
                    "{} is not an RSA public key in PEM: {e}",
                    path.display()
                ))
            })?;
            (Algorithm::RS256, key)
        }
    };
    let mut validation = Validation::new(algorithm);
    validation.set_issuer(&[config.issuer.as_str()]);
    validation.set_audience(&[config.audience.as_str()]);
    validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
    validation.validate_exp = true;
    validation.validate_nbf = true;
    validation.leeway = leeway.as_secs();
    Ok(JwtVerifier {
        issuer: format!("jwt:{}", config.issuer),
        key,
        validation,
        algorithm,
    })
}

fn build_static(index: usize, config: &StaticTokenConfig) -> Result<StaticToken, AuthConfigError> {
    let token = env_or_inline(&config.token, &config.token_env).map_err(|message| {
        AuthConfigError::Static {
            index,
            user: config.user.clone(),
            message: format!("token {message}"),
        }
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
        principal: Principal::new(STATIC_ISSUER, config.tenant.clone(), config.user.clone()),
    })
}

impl Authenticator {
    /// Builds the verifiers; `force_dev` (the `--dev-auth` flag) turns dev
    /// mode on regardless, as `auth.dev` does. With no verifier and no dev
    /// flag it fails with [`AuthConfigError::NoVerifier`].
    pub fn from_config(config: &AuthConfig, force_dev: bool) -> Result<Self, AuthConfigError> {
        let jwt = config
            .jwt
            .iter()
            .enumerate()
            .map(|(index, entry)| build_jwt(index, entry, config.leeway))
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
        Ok(Self {
            dev,
            jwt,
            statics,
            tenant_claim: config.tenant_claim.clone(),
        })
    }

    /// An authenticator in dev mode.
    pub fn dev() -> Self {
        Self {
            dev: true,
            jwt: Vec::new(),
            statics: Vec::new(),
            tenant_claim: String::new(),
        }
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
        if self.dev {
            return Some(DEV_ISSUER.to_owned());
        }
        match (self.jwt.as_slice(), self.statics.is_empty()) {
            ([], false) => Some(STATIC_ISSUER.to_owned()),
            ([only], true) => Some(only.issuer.clone()),
            _ => None,
        }
    }

    /// Whether every call is accepted as user `dev`.
    pub fn is_dev(&self) -> bool {
        self.dev
    }

    /// The caller named by the request's bearer token.
    pub fn authenticate(&self, metadata: &MetadataMap) -> Result<Principal, AuthError> {
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
            match jsonwebtoken::decode::<serde_json::Map<String, serde_json::Value>>(
                token,
                &verifier.key,
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
        Ok(Principal::new(issuer, tenant, subject))
    }
}

/// Whether `listen` (`server.listen`) is reachable only from this host: an
/// IP loopback address or `localhost`.
pub fn is_loopback(listen: &str) -> bool {
    if let Ok(addr) = listen.parse::<std::net::SocketAddr>() {
        return addr.ip().is_loopback();
    }
    listen
        .rsplit_once(':')
        .is_some_and(|(host, _)| host.eq_ignore_ascii_case("localhost"))
}

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
