//! Auth tests: tokens are made here with the test keys in `testdata/`.

use std::path::PathBuf;

use jsonwebtoken::{Algorithm, EncodingKey, Header, encode, get_current_timestamp};
use serde_json::json;

use super::*;
use crate::config::{JwtAlgorithm, JwtConfig, StaticTokenConfig};

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
                secret_file: None,
                jwks_url: None,
                jwks_file: None,
                jwks_refresh: std::time::Duration::from_secs(600),
                public_key_file: None,
            },
            JwtConfig {
                issuer: "https://rs.example".into(),
                audience: "parley".into(),
                algorithm: JwtAlgorithm::RS256,
                secret: None,
                secret_env: None,
                secret_file: None,
                jwks_url: None,
                jwks_file: None,
                jwks_refresh: std::time::Duration::from_secs(600),
                public_key_file: Some(testdata("jwt_rs256_public.pem")),
            },
        ],
        static_tokens: vec![
            StaticTokenConfig {
                user: "ci".into(),
                token: Some(STATIC_TOKEN.into()),
                token_env: None,
                token_file: None,
                admin: false,
                tenant: None,
            },
            StaticTokenConfig {
                user: "ops".into(),
                token: Some("another-static-token-2".into()),
                token_env: None,
                token_file: None,
                admin: false,
                tenant: Some("acme".into()),
            },
        ],
        ..AuthConfig::default()
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
        Ok(Principal::new("jwt:https://hs.example", None, "alice"))
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
        Ok(Principal::new("jwt:https://rs.example", None, "bob"))
    );
}

#[test]
fn static_tokens_name_their_user() {
    assert_eq!(
        authenticator().authenticate(&bearer(STATIC_TOKEN)),
        Ok(Principal::new(STATIC_ISSUER, None, "ci"))
    );
    assert_eq!(
        authenticator().authenticate(&bearer("another-static-token-2")),
        Ok(Principal::new(STATIC_ISSUER, Some("acme".into()), "ops"))
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
    let status = Status::from(AuthError::MissingToken);
    assert_eq!(status.code(), Code::Unauthenticated);
    assert_eq!(
        parley_grpc::status::reason(&status).as_deref(),
        Some("MISSING_TOKEN")
    );
}

#[test]
fn dev_mode_needs_no_token_and_is_on_only_when_asked_for() {
    let asked = AuthConfig {
        dev: true,
        ..AuthConfig::default()
    };
    let auth = Authenticator::from_config(&asked, false).expect("dev asked for");
    assert!(auth.is_dev());
    assert_eq!(auth.authenticate(&MetadataMap::new()), Ok(Principal::dev()));
    let flagged = Authenticator::from_config(&AuthConfig::default(), true).expect("--dev-auth");
    assert!(flagged.is_dev());
    let forced = Authenticator::from_config(&config(), true).expect("config");
    assert!(forced.is_dev());
    assert!(!authenticator().is_dev());
}

#[test]
fn dev_mode_beyond_loopback_needs_its_own_switch() {
    let config = AuthConfig::default();
    for listen in ["127.0.0.1:50051", "[::1]:0", "localhost:50051"] {
        assert!(
            !check_dev_exposure(true, &config, listen).expect("loopback"),
            "{listen}"
        );
    }
    for listen in [
        "0.0.0.0:50051",
        "10.1.2.3:50051",
        "[::]:50051",
        "gateway:50051",
    ] {
        let error = check_dev_exposure(true, &config, listen).expect_err("refused");
        let message = error.to_string();
        assert!(
            message.contains("auth.dev_allow_remote") && message.contains(listen),
            "{message}"
        );
        assert!(!check_dev_exposure(false, &config, listen).expect("no dev mode"));
    }
    let allowed = AuthConfig {
        dev_allow_remote: true,
        ..AuthConfig::default()
    };
    assert!(check_dev_exposure(true, &allowed, "0.0.0.0:50051").expect("allowed"));
}

#[derive(Clone, Default)]
struct Lines(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Lines {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().expect("lock").extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test(start_paused = true)]
async fn dev_mode_beyond_loopback_warns_every_minute_until_the_gateway_stops() {
    let lines = Lines::default();
    let writer = lines.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);
    let stop = tokio_util::sync::CancellationToken::new();
    let task = tokio::spawn(warn_dev_remote(
        "0.0.0.0:50051".into(),
        DEV_REMOTE_WARNING_PERIOD,
        stop.clone(),
    ));
    let count = || {
        String::from_utf8_lossy(&lines.0.lock().expect("lock"))
            .matches("DEV AUTH IS SERVED BEYOND LOOPBACK")
            .count()
    };
    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    assert_eq!(count(), 1, "one warning at once");
    tokio::time::sleep(std::time::Duration::from_secs(60 * 3)).await;
    assert_eq!(count(), 4, "then one a minute");
    stop.cancel();
    task.await.expect("the warning task ends");
    tokio::time::sleep(std::time::Duration::from_secs(60 * 3)).await;
    assert_eq!(count(), 4, "none once stopped");
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

#[test]
fn owners_are_scoped_by_issuer_and_tenant() {
    let auth = authenticator();
    let hs = auth
        .authenticate(&bearer(&hs256(
            &claims("https://hs.example", "parley", "ci", 600),
            SECRET,
        )))
        .expect("a JWT");
    let rs = auth
        .authenticate(&bearer(&rs256(
            &claims("https://rs.example", "parley", "ci", 600),
            "jwt_rs256_private.pem",
        )))
        .expect("a JWT");
    let fixed = auth.authenticate(&bearer(STATIC_TOKEN)).expect("static");
    assert_eq!(hs.subject, "ci");
    assert_eq!(rs.subject, "ci");
    assert_eq!(fixed.subject, "ci");
    let owners = [hs.owner(), rs.owner(), fixed.owner()];
    assert_eq!(
        owners,
        [
            "jwt:https://hs.example  ci",
            "jwt:https://rs.example  ci",
            "static  ci"
        ]
    );

    let mut in_acme = claims("https://hs.example", "parley", "ci", 600);
    in_acme["tenant"] = json!("acme");
    let tenant = auth
        .authenticate(&bearer(&hs256(&in_acme, SECRET)))
        .expect("a JWT with a tenant");
    assert_eq!(tenant.tenant.as_deref(), Some("acme"));
    assert_eq!(tenant.owner(), "jwt:https://hs.example acme ci");

    // Separators in an issuer or tenant are escaped, so no two principals
    // can be made to share a key.
    assert_ne!(owner_key("a b", None, "c"), owner_key("a", Some("b"), "c"),);
    assert_eq!(owner_key("a b", Some("x%y"), "c d"), "a%20b x%25y c d");
}

#[test]
fn the_tenant_claim_is_configurable_and_must_be_a_short_string() {
    let mut config = config();
    config.tenant_claim = "org_id".into();
    let auth = Authenticator::from_config(&config, false).expect("valid");
    let mut with_org = claims("https://hs.example", "parley", "alice", 600);
    with_org["org_id"] = json!("org-7");
    with_org["tenant"] = json!("ignored");
    let principal = auth
        .authenticate(&bearer(&hs256(&with_org, SECRET)))
        .expect("valid");
    assert_eq!(principal.tenant.as_deref(), Some("org-7"));

    for bad in [
        json!(7),
        json!(["a"]),
        json!(""),
        json!("x".repeat(MAX_ID_BYTES + 1)),
    ] {
        let mut token = claims("https://hs.example", "parley", "alice", 600);
        token["org_id"] = bad.clone();
        assert_eq!(
            auth.authenticate(&bearer(&hs256(&token, SECRET))),
            Err(AuthError::InvalidToken),
            "{bad}"
        );
    }
}

#[test]
fn legacy_rows_go_to_the_only_identity_source() {
    assert_eq!(
        Authenticator::dev().legacy_issuer(None).as_deref(),
        Some(DEV_ISSUER)
    );
    // Two JWT issuers and static tokens: nobody adopts them unless told.
    assert_eq!(authenticator().legacy_issuer(None), None);
    assert_eq!(
        authenticator()
            .legacy_issuer(Some("https://hs.example"))
            .as_deref(),
        Some("jwt:https://hs.example")
    );
    assert_eq!(
        authenticator().legacy_issuer(Some("static")).as_deref(),
        Some(STATIC_ISSUER)
    );
    let mut only_static = config();
    only_static.jwt.clear();
    let auth = Authenticator::from_config(&only_static, false).expect("valid");
    assert_eq!(auth.legacy_issuer(None).as_deref(), Some(STATIC_ISSUER));
    let mut one_issuer = config();
    one_issuer.jwt.truncate(1);
    one_issuer.static_tokens.clear();
    let auth = Authenticator::from_config(&one_issuer, false).expect("valid");
    assert_eq!(
        auth.legacy_issuer(None).as_deref(),
        Some("jwt:https://hs.example")
    );
}

#[test]
fn no_verifier_and_no_dev_flag_refuses_to_start_naming_the_keys() {
    let error = Authenticator::from_config(&AuthConfig::default(), false)
        .expect_err("nothing configured is refused");
    let message = error.to_string();
    for key in ["auth.jwt", "auth.static_tokens", "auth.dev", "--dev-auth"] {
        assert!(message.contains(key), "{message}");
    }
}

/// A JWKS server of the test's own: serves `body` with `status`, counts
/// requests; `stall` makes it accept and never answer.
#[derive(Clone, Default)]
struct JwksServer {
    state: std::sync::Arc<std::sync::Mutex<(u16, String, bool)>>,
    requests: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

impl JwksServer {
    async fn start(keys: &[&str]) -> (Self, String) {
        let server = Self::default();
        server.serve(keys);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let url = format!("http://{}/jwks.json", listener.local_addr().expect("addr"));
        let shared = server.clone();
        tokio::spawn(async move {
            use tokio::io::{AsyncReadExt, AsyncWriteExt};
            while let Ok((mut socket, _)) = listener.accept().await {
                let shared = shared.clone();
                tokio::spawn(async move {
                    let mut request = Vec::new();
                    let mut buf = [0_u8; 1024];
                    while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                        match socket.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => request.extend_from_slice(&buf[..n]),
                        }
                    }
                    shared
                        .requests
                        .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    let (status, body, stall) = shared.state.lock().expect("lock").clone();
                    if stall {
                        std::future::pending::<()>().await;
                    }
                    let response = format!(
                        "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                        body.len()
                    );
                    let _ = socket.write_all(response.as_bytes()).await;
                });
            }
        });
        (server, url)
    }

    fn serve(&self, kids: &[&str]) {
        let all: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(testdata("jwks_test_keys.json")).expect("read keys"),
        )
        .expect("json");
        let keys: Vec<serde_json::Value> = kids.iter().map(|kid| all[*kid].clone()).collect();
        *self.state.lock().expect("lock") = (200, json!({ "keys": keys }).to_string(), false);
    }

    fn answer(&self, status: u16, body: &str, stall: bool) {
        *self.state.lock().expect("lock") = (status, body.to_owned(), stall);
    }
}

fn signed(algorithm: Algorithm, kid: &str, key_file: &str, iss: &str) -> String {
    let pem = std::fs::read(testdata(key_file)).expect("read test key");
    let key = match algorithm {
        Algorithm::RS256 => EncodingKey::from_rsa_pem(&pem),
        Algorithm::ES256 => EncodingKey::from_ec_pem(&pem),
        _ => EncodingKey::from_ed_pem(&pem),
    }
    .expect("private key");
    let mut header = Header::new(algorithm);
    header.kid = Some(kid.to_owned());
    encode(&header, &claims(iss, "parley", "alice", 600), &key).expect("sign")
}

fn jwks_entry(issuer: &str, algorithm: JwtAlgorithm, url: &str) -> JwtConfig {
    JwtConfig {
        issuer: issuer.into(),
        audience: "parley".into(),
        algorithm,
        secret: None,
        secret_env: None,
        secret_file: None,
        public_key_file: None,
        jwks_url: Some(url.into()),
        jwks_file: None,
        jwks_refresh: std::time::Duration::from_secs(600),
    }
}

#[tokio::test]
async fn jwks_keys_are_chosen_by_kid_for_rs256_es256_and_eddsa_and_follow_rotation() {
    let (server, url) = JwksServer::start(&["rsa-a", "ec-a", "ed-a"]).await;
    let config = AuthConfig {
        jwt: vec![
            jwks_entry("https://rs.example", JwtAlgorithm::RS256, &url),
            jwks_entry("https://ec.example", JwtAlgorithm::ES256, &url),
            jwks_entry("https://ed.example", JwtAlgorithm::EdDSA, &url),
        ],
        jwks_min_interval: std::time::Duration::ZERO,
        ..AuthConfig::default()
    };
    let auth = Authenticator::load(&config, false)
        .await
        .expect("the key sets are fetched at start");
    let rsa_a = signed(
        Algorithm::RS256,
        "rsa-a",
        "jwt_rs256_private.pem",
        "https://rs.example",
    );
    let rsa_b = signed(
        Algorithm::RS256,
        "rsa-b",
        "jwt_rs256_other_private.pem",
        "https://rs.example",
    );
    for (token, issuer) in [
        (rsa_a.clone(), "jwt:https://rs.example"),
        (
            signed(
                Algorithm::ES256,
                "ec-a",
                "jwt_es256_private.pem",
                "https://ec.example",
            ),
            "jwt:https://ec.example",
        ),
        (
            signed(
                Algorithm::EdDSA,
                "ed-a",
                "jwt_ed25519_private.pem",
                "https://ed.example",
            ),
            "jwt:https://ed.example",
        ),
    ] {
        let principal = auth.authenticate(&bearer(&token)).expect("accepted");
        assert_eq!(
            (principal.issuer.as_str(), principal.subject.as_str()),
            (issuer, "alice")
        );
    }
    // A key signed as another kid of the set does not verify.
    let forged = signed(
        Algorithm::RS256,
        "rsa-a",
        "jwt_rs256_other_private.pem",
        "https://rs.example",
    );
    assert_eq!(
        auth.authenticate(&bearer(&forged)),
        Err(AuthError::InvalidToken)
    );

    // Rotation: the issuer publishes rsa-b and drops rsa-a. A token with the
    // unknown kid asks for a fetch; once it is done rsa-b is accepted and
    // rsa-a refused.
    server.serve(&["rsa-b", "ec-a", "ed-a"]);
    let mut accepted = false;
    for _ in 0..500 {
        if auth.authenticate(&bearer(&rsa_b)).is_ok() {
            accepted = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert!(accepted, "the new key was never fetched");
    assert_eq!(
        auth.authenticate(&bearer(&rsa_a)),
        Err(AuthError::InvalidToken)
    );
}

#[tokio::test]
async fn a_failed_jwks_fetch_keeps_the_last_good_set_and_fetches_are_bounded() {
    let (server, url) = JwksServer::start(&["rsa-a"]).await;
    let limits = jwks::Limits {
        timeout: std::time::Duration::from_millis(300),
        max_bytes: 16 * 1024,
        refresh: std::time::Duration::from_secs(600),
        min_interval: std::time::Duration::ZERO,
    };
    let set = jwks::Jwks::new(jwks::Source::Url(url), Algorithm::RS256, limits).expect("set");
    assert_eq!(set.fetch().await.expect("fetched"), 1);
    let failures = [
        (500, "oops".to_owned(), false, "HTTP 500"),
        (200, "not json".to_owned(), false, "not a JWKS"),
        (200, json!({"keys": []}).to_string(), false, "no usable"),
        (
            200,
            json!({"keys": [{"kty": "oct", "kid": "rsa-a", "k": "c2VjcmV0"}]}).to_string(),
            false,
            "no usable",
        ),
        (200, "x".repeat(20 * 1024), false, "larger than"),
        (200, String::new(), true, "within"),
    ];
    for (status, body, stall, expected) in failures {
        server.answer(status, &body, stall);
        let error = set.fetch().await.expect_err(expected).to_string();
        assert!(error.contains(expected), "{expected}: {error}");
        assert!(
            set.key(Some("rsa-a")).is_some(),
            "the last good set stays ({expected})"
        );
    }
    // A file source is bounded too.
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("jwks.json");
    std::fs::write(&path, "x".repeat(20 * 1024)).expect("write");
    let file = jwks::Jwks::new(jwks::Source::File(path), Algorithm::RS256, limits).expect("set");
    assert!(
        file.fetch()
            .await
            .expect_err("too large")
            .to_string()
            .contains("larger than")
    );
}

#[tokio::test]
async fn a_jwks_issuer_whose_set_cannot_be_fetched_stops_start_up() {
    let (server, url) = JwksServer::start(&["rsa-a"]).await;
    server.answer(503, "", false);
    let config = AuthConfig {
        jwt: vec![jwks_entry("https://rs.example", JwtAlgorithm::RS256, &url)],
        ..AuthConfig::default()
    };
    let error = Authenticator::load(&config, false)
        .await
        .expect_err("refused")
        .to_string();
    assert!(
        error.contains("auth.jwt entry 0") && error.contains("HTTP 503"),
        "{error}"
    );
}

#[tokio::test]
async fn secret_files_are_read_again_on_reload_and_swapped_at_once() {
    let dir = tempfile::tempdir().expect("dir");
    let secret = dir.path().join("jwt-secret");
    let token = dir.path().join("token");
    std::fs::write(&secret, format!("{SECRET}\n")).expect("write");
    std::fs::write(&token, "first-static-token-0001\n").expect("write");
    let mut config = config();
    config.jwt.truncate(1);
    config.jwt[0].secret = None;
    config.jwt[0].secret_file = Some(secret.clone());
    config.static_tokens.truncate(1);
    config.static_tokens[0].token = None;
    config.static_tokens[0].token_file = Some(token.clone());
    let auth = Authenticator::load(&config, false).await.expect("loads");
    let jwt = hs256(
        &claims("https://hs.example", "parley", "alice", 600),
        SECRET,
    );
    assert!(auth.authenticate(&bearer(&jwt)).is_ok());
    assert!(
        auth.authenticate(&bearer("first-static-token-0001"))
            .is_ok()
    );

    let rotated = "another-secret-of-at-least-32-bytes-0123";
    std::fs::write(&secret, rotated).expect("write");
    std::fs::write(&token, "second-static-token-0002\r\n").expect("write");
    auth.reload(&config).await.expect("reloads");
    assert_eq!(
        auth.authenticate(&bearer(&jwt)),
        Err(AuthError::InvalidToken)
    );
    let fresh = hs256(
        &claims("https://hs.example", "parley", "alice", 600),
        rotated,
    );
    assert!(auth.authenticate(&bearer(&fresh)).is_ok());
    assert!(
        auth.authenticate(&bearer("second-static-token-0002"))
            .is_ok()
    );
    assert_eq!(
        auth.authenticate(&bearer("first-static-token-0001")),
        Err(AuthError::InvalidToken)
    );

    // A reload that fails keeps what was there.
    std::fs::write(&secret, "change-me-to-a-long-random-string").expect("write");
    let error = auth.reload(&config).await.expect_err("placeholder");
    assert!(error.to_string().contains("placeholder"), "{error}");
    assert!(auth.authenticate(&bearer(&fresh)).is_ok());
}
