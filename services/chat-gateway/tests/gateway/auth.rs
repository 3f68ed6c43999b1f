//! Auth through the wire: tokens name the user, bad tokens are refused
//! with a reason, health needs no token, dev mode needs nothing.

use chat_gateway::{
    auth::Authenticator,
    config::{AuthConfig, JwtAlgorithm, JwtConfig, StaticTokenConfig},
};
use jsonwebtoken::{Algorithm, EncodingKey, Header, encode, get_current_timestamp};
use parley_proto::gateway::v1 as gw;
use tonic::Code;

use crate::harness::{Harness, Options, chat, chat_request, reason, with_token};

const SECRET: &str = "gateway-test-secret-of-at-least-32-bytes";
pub const CI_TOKEN: &str = "ci-token-0123456789abcdef";

/// The JWT issuers and the static token of these tests.
pub fn authenticator() -> Authenticator {
    Authenticator::from_config(
        &AuthConfig {
            dev: false,
            leeway: std::time::Duration::ZERO,
            jwt: vec![
                JwtConfig {
                    issuer: "https://id.example".into(),
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
                    issuer: "https://rsa.example".into(),
                    audience: "parley".into(),
                    algorithm: JwtAlgorithm::RS256,
                    secret: None,
                    secret_env: None,
                    secret_file: None,
                    jwks_url: None,
                    jwks_file: None,
                    jwks_refresh: std::time::Duration::from_secs(600),
                    public_key_file: Some(
                        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                            .join("testdata/jwt_rs256_public.pem"),
                    ),
                },
            ],
            static_tokens: vec![StaticTokenConfig {
                user: "ci-bot".into(),
                token: Some(CI_TOKEN.into()),
                token_env: None,
                token_file: None,
                admin: false,
                tenant: None,
            }],
            ..AuthConfig::default()
        },
        false,
    )
    .expect("auth config")
}

/// An HS256 token for `sub`, expiring `exp_in` seconds from now, for `aud`.
pub fn hs256(sub: &str, aud: &str, exp_in: i64) -> String {
    let now = i64::try_from(get_current_timestamp()).expect("time");
    let claims = serde_json::json!({"iss": "https://id.example", "aud": aud, "sub": sub, "exp": now + exp_in});
    encode(
        &Header::new(Algorithm::HS256),
        &claims,
        &EncodingKey::from_secret(SECRET.as_bytes()),
    )
    .expect("sign")
}

/// An HS256 token for `sub` in `tenant` (the `tenant` claim).
fn hs256_in(sub: &str, tenant: &str) -> String {
    let now = i64::try_from(get_current_timestamp()).expect("time");
    let claims = serde_json::json!({"iss": "https://id.example", "aud": "parley", "sub": sub, "tenant": tenant, "exp": now + 600});
    encode(
        &Header::new(Algorithm::HS256),
        &claims,
        &EncodingKey::from_secret(SECRET.as_bytes()),
    )
    .expect("sign")
}

fn rs256(sub: &str) -> String {
    let now = i64::try_from(get_current_timestamp()).expect("time");
    let claims = serde_json::json!({"iss": "https://rsa.example", "aud": "parley", "sub": sub, "exp": now + 600});
    let pem = std::fs::read(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/jwt_rs256_private.pem"),
    )
    .expect("key");
    encode(
        &Header::new(Algorithm::RS256),
        &claims,
        &EncodingKey::from_rsa_pem(&pem).expect("pem"),
    )
    .expect("sign")
}

/// A stack with JWT and static-token auth.
pub async fn secured() -> Harness {
    Harness::start(Options {
        auth: authenticator(),
        ..Options::default()
    })
    .await
}

#[tokio::test]
async fn tokens_name_the_user_the_runner_sees() {
    let mut stack = secured().await;
    for (token, user) in [
        (hs256("alice", "parley", 600), "alice"),
        (rs256("bob"), "bob"),
        (CI_TOKEN.to_owned(), "ci-bot"),
    ] {
        let turn = chat(
            &mut stack.client,
            with_token(chat_request("", "Hello", "tables_list"), &token),
        )
        .await;
        assert!(turn.complete.success);
        assert_eq!(
            stack.runner.seen().last().expect("a run").request.user_id,
            user
        );
    }
    stack.stop().await;
}

#[tokio::test]
async fn missing_and_bad_tokens_are_unauthenticated_with_a_reason() {
    let mut stack = secured().await;
    let cases = [
        (None, "MISSING_TOKEN"),
        (Some(hs256("alice", "parley", -60)), "TOKEN_EXPIRED"),
        (
            Some(hs256("alice", "another-service", 600)),
            "INVALID_TOKEN",
        ),
        (Some("not-a-token".to_owned()), "INVALID_TOKEN"),
    ];
    for (token, expected) in cases {
        let message = chat_request("", "Hello", "tables_list");
        let request = match &token {
            Some(token) => with_token(message, token),
            None => tonic::Request::new(message),
        };
        let status = stack.client.chat(request).await.expect_err("refused");
        assert_eq!(
            (status.code(), reason(&status).as_str()),
            (Code::Unauthenticated, expected),
            "{token:?}"
        );
        let status = stack
            .client
            .list_conversations(gw::ListConversationsRequest::default())
            .await
            .expect_err("every method is checked");
        assert_eq!(status.code(), Code::Unauthenticated);
    }
    assert!(stack.runner.seen().is_empty(), "no turn ran");
    stack.stop().await;
}

#[tokio::test]
async fn health_and_reflection_need_no_token() {
    let stack = secured().await;
    let channel = tonic::transport::Channel::from_shared(format!("http://{}", stack.addr))
        .expect("url")
        .connect()
        .await
        .expect("connect");
    let mut health = tonic_health::pb::health_client::HealthClient::new(channel);
    let response = health
        .check(tonic_health::pb::HealthCheckRequest {
            service: "parley.gateway.v1.ChatGateway".into(),
        })
        .await
        .expect("health without a token")
        .into_inner();
    assert_eq!(
        response.status,
        tonic_health::pb::health_check_response::ServingStatus::Serving as i32
    );
    stack.stop().await;
}

#[tokio::test]
async fn dev_mode_needs_no_token_and_calls_everyone_dev() {
    let mut stack = Harness::start(Options::default()).await;
    let turn = chat(&mut stack.client, chat_request("", "Hello", "tables_list")).await;
    assert!(turn.complete.success);
    assert_eq!(stack.runner.seen()[0].request.user_id, "dev");
    stack.stop().await;
}

#[tokio::test]
async fn the_same_user_id_from_two_issuers_or_tenants_is_two_users() {
    let mut stack = secured().await;
    // `ci-bot` four times: two JWT issuers, a static token, and a tenant.
    let tokens = [
        hs256("ci-bot", "parley", 600),
        rs256("ci-bot"),
        CI_TOKEN.to_owned(),
        hs256_in("ci-bot", "acme"),
    ];
    let mut conversations = Vec::new();
    for token in &tokens {
        let turn = chat(
            &mut stack.client,
            with_token(chat_request("", "Hello", "tables_list"), token),
        )
        .await;
        assert!(turn.complete.success);
        conversations.push(turn.conversation_id());
    }
    for (mine, token) in tokens.iter().enumerate() {
        let listed = stack
            .client
            .list_conversations(with_token(gw::ListConversationsRequest::default(), token))
            .await
            .expect("list")
            .into_inner();
        let ids: Vec<&str> = listed.conversations.iter().map(|c| c.id.as_str()).collect();
        assert_eq!(
            ids,
            [conversations[mine].as_str()],
            "token {mine} sees only its own"
        );
        for (theirs, id) in conversations.iter().enumerate() {
            if theirs == mine {
                continue;
            }
            let status = stack
                .client
                .get_conversation(with_token(
                    gw::GetConversationRequest {
                        conversation_id: id.clone(),
                        ..Default::default()
                    },
                    token,
                ))
                .await
                .expect_err("another principal's conversation");
            assert_eq!(
                status.code(),
                Code::NotFound,
                "token {mine} reading {theirs}"
            );
        }
    }
    let issuers: Vec<String> = stack
        .runner
        .seen()
        .iter()
        .map(|run| {
            format!(
                "{}|{}|{}",
                run.request.user_issuer, run.request.tenant, run.request.user_id
            )
        })
        .collect();
    assert_eq!(
        issuers,
        [
            "jwt:https://id.example||ci-bot",
            "jwt:https://rsa.example||ci-bot",
            "static||ci-bot",
            "jwt:https://id.example|acme|ci-bot"
        ]
    );
    stack.stop().await;
}

#[tokio::test]
async fn a_tenant_restricted_to_some_models_gets_them_and_is_refused_the_others() {
    let mut stack = Harness::start(Options {
        auth: authenticator(),
        registry: Some(
            chat_gateway::registry::Registry::from_str(
                "version: 1\npages:\n  routed:\n    model: smart\n    models_allowed: [smart, cheap]\n",
                "routed.yaml",
            )
            .expect("a valid registry"),
        ),
        tweak: |config| {
            config.tenants.insert(
                "frugal".into(),
                chat_gateway::config::TenantConfig {
                    models_allowed: Some(vec!["cheap".into(), "openai/gpt-4.1-nano".into()]),
                },
            );
        },
        ..Options::default()
    })
    .await;
    let frugal = hs256_in("ann", "frugal");
    let other = hs256_in("bea", "lavish");

    // The page's default is not the tenant's: its turn runs on the first
    // model both allow; another tenant's runs on the page's default.
    for token in [&frugal, &other] {
        let turn = chat(
            &mut stack.client,
            with_token(chat_request("", "Hello", "routed"), token),
        )
        .await;
        assert!(turn.complete.success, "{:?}", turn.complete);
    }
    let models: Vec<String> = stack
        .runner
        .seen()
        .iter()
        .map(|run| run.request.model.clone().unwrap_or_default().model)
        .collect();
    assert_eq!(models, ["cheap", "smart"]);

    // Naming a model the page allows but the tenant does not is refused
    // before any model is called, naming what the tenant may use here.
    let mut smart = chat_request("", "Hello", "routed");
    smart.model = "smart".into();
    let refused = stack
        .client
        .chat(with_token(smart.clone(), &frugal))
        .await
        .expect_err("not the tenant's");
    assert_eq!(refused.code(), Code::InvalidArgument);
    assert_eq!(reason(&refused), "MODEL_NOT_ALLOWED");
    let details =
        tonic_types::StatusExt::get_details_bad_request(&refused).expect("field violations");
    assert!(
        details.field_violations.iter().any(|v| v.field == "model"
            && v.description
                .contains("for tenant `frugal`; allowed: cheap")),
        "{details:?}"
    );
    assert_eq!(stack.runner.seen().len(), 2, "no run for the refused turn");
    // The other tenant may name it.
    let allowed = chat(&mut stack.client, with_token(smart, &other)).await;
    assert!(allowed.complete.success);

    // DescribePage tells each caller what it may use.
    for (token, model, allowed) in [
        (&frugal, "cheap", vec!["cheap"]),
        (&other, "smart", vec!["smart", "cheap"]),
    ] {
        let described = stack
            .client
            .describe_page(with_token(
                gw::DescribePageRequest {
                    page: Some(gw::PageContext {
                        page: "routed".into(),
                        ..Default::default()
                    }),
                    ..Default::default()
                },
                token,
            ))
            .await
            .expect("describe")
            .into_inner();
        assert_eq!(
            (described.model.as_str(), described.models_allowed),
            (model, allowed.iter().map(|m| (*m).to_owned()).collect())
        );
    }
    stack.stop().await;
}
