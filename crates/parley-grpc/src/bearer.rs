//! A shared bearer token between two Parley services (the gateway calling
//! the runner): [`Bearer`] puts `authorization: Bearer <token>` on every
//! call a channel carries, streams included; [`TokenCheck`] refuses a call
//! without it (`UNAUTHENTICATED`, reason [`MISSING_TOKEN`]) or with another
//! token ([`INVALID_TOKEN`]), comparing SHA-256 digests in constant time.
//! Both read the token from a [`SharedSecret`], so SIGHUP can replace it
//! while calls run. Neither logs the token or puts it in an error.

use std::task::{Context, Poll};

use secrecy::ExposeSecret;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;
use tonic::{Code, Request, Status, metadata::MetadataMap};

use crate::secret::SharedSecret;

/// The reason of a call that carries no bearer token.
pub const MISSING_TOKEN: &str = "MISSING_TOKEN";
/// The reason of a call whose bearer token is not the configured one.
pub const INVALID_TOKEN: &str = "INVALID_TOKEN";

/// A channel that sends `authorization: Bearer <token>` with every call
/// while `token` holds a value (and nothing while it holds none).
#[derive(Debug, Clone)]
pub struct Bearer<S> {
    inner: S,
    token: SharedSecret,
}

impl<S> Bearer<S> {
    /// Wraps `inner`, sending the value `token` holds at each call.
    pub fn new(inner: S, token: SharedSecret) -> Self {
        Self { inner, token }
    }
}

impl<S, B> tower::Service<http::Request<B>> for Bearer<S>
where
    S: tower::Service<http::Request<B>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: http::Request<B>) -> Self::Future {
        if let Some(token) = self.token.get()
            && let Ok(mut value) =
                http::HeaderValue::try_from(format!("Bearer {}", token.expose_secret()))
        {
            value.set_sensitive(true);
            request
                .headers_mut()
                .insert(http::header::AUTHORIZATION, value);
        }
        self.inner.call(request)
    }
}

/// The interceptor that lets a call through only with the bearer token the
/// slot holds (every call, when the slot holds none).
#[derive(Debug, Clone)]
pub struct TokenCheck {
    token: SharedSecret,
}

impl TokenCheck {
    /// Checks calls against the value `token` holds at each call.
    pub fn new(token: SharedSecret) -> Self {
        Self { token }
    }

    /// Whether `metadata` carries the token: `Ok` when it does or no token
    /// is configured, else the refusal.
    pub fn check(&self, metadata: &MetadataMap) -> Result<(), Status> {
        let Some(expected) = self.token.get() else {
            return Ok(());
        };
        let presented = metadata
            .get(http::header::AUTHORIZATION.as_str())
            .and_then(|value| value.to_str().ok())
            .map(str::trim)
            .filter(|value| !value.is_empty())
            .filter(|value| !value.eq_ignore_ascii_case("bearer"))
            .ok_or_else(|| refusal(MISSING_TOKEN))?;
        let token = presented
            .split_once(' ')
            .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
            .map(|(_, token)| token.trim())
            .ok_or_else(|| refusal(INVALID_TOKEN))?;
        if token.is_empty() {
            return Err(refusal(MISSING_TOKEN));
        }
        let presented: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        let expected: [u8; 32] = Sha256::digest(expected.expose_secret().as_bytes()).into();
        if bool::from(presented.ct_eq(&expected)) {
            Ok(())
        } else {
            Err(refusal(INVALID_TOKEN))
        }
    }
}

impl tonic::service::Interceptor for TokenCheck {
    fn call(&mut self, request: Request<()>) -> Result<Request<()>, Status> {
        self.check(request.metadata())?;
        Ok(request)
    }
}

/// The refusal with `reason` ([`MISSING_TOKEN`] or [`INVALID_TOKEN`]).
pub fn refusal(reason: &str) -> Status {
    let message = if reason == MISSING_TOKEN {
        "this service needs a bearer token (authorization: Bearer <token>)"
    } else {
        "the bearer token is not the one this service accepts"
    };
    crate::status::error(Code::Unauthenticated, reason, message)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn metadata(value: Option<&str>) -> MetadataMap {
        let mut metadata = MetadataMap::new();
        if let Some(value) = value {
            metadata.insert("authorization", value.parse().expect("ascii"));
        }
        metadata
    }

    #[test]
    fn only_the_configured_token_passes() {
        let check = TokenCheck::new(SharedSecret::new("s3cret-token"));
        assert!(check.check(&metadata(Some("Bearer s3cret-token"))).is_ok());
        assert!(check.check(&metadata(Some("bearer s3cret-token"))).is_ok());
        for (value, reason) in [
            (None, MISSING_TOKEN),
            (Some("Bearer "), MISSING_TOKEN),
            (Some("Bearer s3cret-tokeN"), INVALID_TOKEN),
            (Some("Bearer s3cret"), INVALID_TOKEN),
            (Some("Basic s3cret-token"), INVALID_TOKEN),
            (Some("s3cret-token"), INVALID_TOKEN),
        ] {
            let status = check.check(&metadata(value)).expect_err("refused");
            assert_eq!(status.code(), Code::Unauthenticated, "{value:?}");
            assert_eq!(
                crate::status::reason(&status).as_deref(),
                Some(reason),
                "{value:?}"
            );
            assert!(!status.message().contains("s3cret"), "{value:?}");
        }
        // No token configured: the check lets every call through.
        assert!(
            TokenCheck::new(SharedSecret::default())
                .check(&metadata(None))
                .is_ok()
        );
    }
}
