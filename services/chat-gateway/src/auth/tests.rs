//! Auth tests: tokens are made here with the test keys in `testdata/`.

use std::path::PathBuf;

use jsonwebtoken::{EncodingKey, Header, encode, get_current_timestamp};
use serde_json::json;

use super::*;

const SECRET: &str = "0123456789abcdef0123456789abcdef-test-only";
const STATIC_TOKEN: &str = "static-token-for-ci-0001";

fn testdata(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("testdata")
        .join(name)
}

fn config() -> AuthConfig {
    AuthConfig {
        dev: false,
        leeway: std::time::Duration::ZERO,
        jwt: vec![
            JwtConfig {
                issuer: "https://hs.example".into(),
                audience: "parley".into(),
                algorithm: JwtAlgorithm::HS256,
                secret: Some(SECRET.into()),
                secret_env: None,
                public_key_file: None,
            },
            JwtConfig {
                issuer: "https://rs.example".into(),
                audience: "parley".into(),
                algorithm: JwtAlgorithm::RS256,
                secret: None,
                secret_env: None,
                public_key_file: Some(testdata("jwt_rs256_public.pem")),
            },
        ],
        static_tokens: vec![
            StaticTokenConfig {
                user: "ci".into(),
                token: Some(STATIC_TOKEN.into()),
                token_env: None,
            },
            StaticTokenConfig {
                user: "ops".into(),
                token: Some("another-static-token-2".into()),
                token_env: None,
            },
        ],
    }
}

fn authenticator() -> Authenticator {
    Authenticator::from_config(&config(), false).expect("valid config")
}

fn claims(iss: &str, aud: &str, sub: &str, exp_offset: i64) -> serde_json::Value {
    let now = i64::try_from(get_current_timestamp()).expect("time fits");
    json!({ "iss": iss, "aud": aud, "sub": sub, "exp": now + exp_offset, "iat": now })
}

fn hs256(claims: &serde_json::Value, secret: &str) -> String {
    encode(
        &Header::new(Algorithm::HS256),
        claims,
        &EncodingKey::from_secret(secret.as_bytes()),
    )
    .expect("sign hs256")
}

fn rs256(claims: &serde_json::Value, key_file: &str) -> String {
    let pem = std::fs::read(testdata(key_file)).expect("read test key");
    let key = EncodingKey::from_rsa_pem(&pem).expect("rsa private key");
    encode(&Header::new(Algorithm::RS256), claims, &key).expect("sign rs256")
}

fn bearer(token: &str) -> MetadataMap {
    let mut metadata = MetadataMap::new();
    metadata.insert(
        "authorization",
        format!("Bearer {token}").parse().expect("ascii header"),
    );
    metadata
}

#[test]
fn hs256_tokens_name_their_subject() {
    let token = hs256(
        &claims("https://hs.example", "parley", "alice", 600),
        SECRET,
    );
    assert_eq!(
        authenticator().authenticate(&bearer(&token)),
        Ok(User("alice".into()))
    );
}

#[test]
fn rs256_tokens_name_their_subject() {
    let token = rs256(
        &claims("https://rs.example", "parley", "bob", 600),
        "jwt_rs256_private.pem",
    );
    assert_eq!(
        authenticator().authenticate(&bearer(&token)),
        Ok(User("bob".into()))
    );
}

#[test]
fn static_tokens_name_their_user() {
    assert_eq!(
        authenticator().authenticate(&bearer(STATIC_TOKEN)),
        Ok(User("ci".into()))
    );
    assert_eq!(
        authenticator().authenticate(&bearer("another-static-token-2")),
        Ok(User("ops".into()))
    );
    assert_eq!(
        authenticator().authenticate(&bearer("static-token-for-ci-0002")),
        Err(AuthError::InvalidToken)
    );
}

#[test]
fn bad_tokens_are_refused_with_a_reason() {
    let auth = authenticator();
    let cases = [
        (
            "expired",
            hs256(
                &claims("https://hs.example", "parley", "alice", -120),
                SECRET,
            ),
            AuthError::Expired,
        ),
        (
            "wrong audience",
            hs256(
                &claims("https://hs.example", "other-app", "alice", 600),
                SECRET,
            ),
            AuthError::InvalidToken,
        ),
        (
            "wrong issuer",
            hs256(
                &claims("https://evil.example", "parley", "alice", 600),
                SECRET,
            ),
            AuthError::InvalidToken,
        ),
        (
            "wrong secret",
            hs256(
                &claims("https://hs.example", "parley", "alice", 600),
                "a-different-secret-of-32-bytes-or-more",
            ),
            AuthError::InvalidToken,
        ),
        (
            "wrong rsa key",
            rs256(
                &claims("https://rs.example", "parley", "bob", 600),
                "jwt_rs256_other_private.pem",
            ),
            AuthError::InvalidToken,
        ),
        (
            "hs256 signed with the rsa public key (algorithm confusion)",
            hs256(
                &claims("https://rs.example", "parley", "bob", 600),
                &std::fs::read_to_string(testdata("jwt_rs256_public.pem")).expect("pem"),
            ),
            AuthError::InvalidToken,
        ),
        (
            "empty subject",
            hs256(&claims("https://hs.example", "parley", " ", 600), SECRET),
            AuthError::InvalidToken,
        ),
        ("garbage", "not.a.jwt".to_owned(), AuthError::InvalidToken),
    ];
    for (name, token, expected) in cases {
        assert_eq!(auth.authenticate(&bearer(&token)), Err(expected), "{name}");
    }
}

#[test]
fn missing_or_malformed_headers_are_refused() {
    let auth = authenticator();
    assert_eq!(
        auth.authenticate(&MetadataMap::new()),
        Err(AuthError::MissingToken)
    );
    let mut basic = MetadataMap::new();
    basic.insert(
        "authorization",
        "Basic YWxpY2U6cHc=".parse().expect("header"),
    );
    assert_eq!(auth.authenticate(&basic), Err(AuthError::InvalidToken));
    let mut bare = MetadataMap::new();
    bare.insert("authorization", STATIC_TOKEN.parse().expect("header"));
    assert_eq!(auth.authenticate(&bare), Err(AuthError::InvalidToken));
    let status = AuthError::MissingToken.to_status();
    assert_eq!(status.code(), Code::Unauthenticated);
    assert_eq!(
        parley_grpc::status::reason(&status).as_deref(),
        Some("MISSING_TOKEN")
    );
}

#[test]
fn dev_mode_needs_no_token_and_is_the_default() {
    let auth = Authenticator::from_config(&AuthConfig::default(), false).expect("empty config");
    assert!(auth.is_dev());
    assert_eq!(
        auth.authenticate(&MetadataMap::new()),
        Ok(User(DEV_USER.into()))
    );
    let forced = Authenticator::from_config(&config(), true).expect("config");
    assert!(forced.is_dev());
    assert!(!authenticator().is_dev());
}

#[test]
fn unusable_key_material_is_named() {
    let mut short = config();
    short.jwt[0].secret = Some("short".into());
    let error = Authenticator::from_config(&short, false).expect_err("short secret");
    assert!(error.to_string().contains("auth.jwt entry 0"), "{error}");

    let mut missing = config();
    missing.jwt[1].public_key_file = Some(testdata("does-not-exist.pem"));
    let error = Authenticator::from_config(&missing, false).expect_err("missing key");
    assert!(error.to_string().contains("does-not-exist.pem"), "{error}");

    let mut unset = config();
    unset.static_tokens[0].token = None;
    unset.static_tokens[0].token_env = Some("PARLEY_TEST_SURELY_UNSET_VARIABLE".into());
    let error = Authenticator::from_config(&unset, false).expect_err("unset env");
    assert!(
        error
            .to_string()
            .contains("PARLEY_TEST_SURELY_UNSET_VARIABLE"),
        "{error}"
    );
}
