//! The verifiers of one auth configuration: JWT verifiers (a fixed key or
//! the issuer's JWKS) and static tokens, built from `[auth]` and checking a
//! bearer token into a [`Principal`].

use std::sync::Arc;

use jsonwebtoken::{Algorithm, DecodingKey, Validation, errors::ErrorKind};
use sha2::{Digest, Sha256};
use subtle::{ConditionallySelectable, ConstantTimeEq};
use tokio_util::sync::CancellationToken;
use tonic::metadata::MetadataMap;

use super::{AuthConfigError, AuthError, MAX_ID_BYTES, Principal, STATIC_ISSUER, Verifiers, jwks};
use crate::config::{AuthConfig, JwtAlgorithm, JwtConfig, StaticTokenConfig};

/// Where a verifier's key comes from.
pub(super) enum Keys {
    /// A secret or a PEM public key.
    Fixed(DecodingKey),
    /// The issuer's key set, chosen by `kid`.
    Jwks(Arc<jwks::Jwks>),
}

pub(super) struct JwtVerifier {
    pub(super) issuer: String,
    keys: Keys,
    validation: Validation,
    algorithm: Algorithm,
    refresh: std::time::Duration,
}

/// A static token: the SHA-256 of the token, and who it stands for.
pub(super) struct StaticToken {
    digest: [u8; 32],
    principal: Principal,
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
    pub(super) fn build(config: &AuthConfig, force_dev: bool) -> Result<Self, AuthConfigError> {
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

    pub(super) fn dev() -> Self {
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
    pub(super) async fn start(&self) -> Result<(), AuthConfigError> {
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

impl Verifiers {
    pub(super) fn authenticate(&self, metadata: &MetadataMap) -> Result<Principal, AuthError> {
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
    pub(super) fn static_principal(&self, token: &str) -> Option<Principal> {
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

    pub(super) fn jwt_principal(&self, token: &str) -> Result<Principal, AuthError> {
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
    pub(super) fn principal_of(
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
