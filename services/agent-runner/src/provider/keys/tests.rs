//! The key pool on paused time: turns, cooldowns, refusals, reloads.

use super::*;

fn pool(names: &[&str]) -> ApiKeys {
    ApiKeys::new(
        names
            .iter()
            .map(|name| ApiKey {
                name: (*name).to_owned(),
                secret: SharedSecret::new(format!("sk-{name}")),
            })
            .collect(),
    )
}

/// The names of `count` first picks.
fn picks(keys: &ApiKeys, count: usize) -> Vec<String> {
    (0..count)
        .map(|_| {
            let key = keys.pick(&[]).expect("a key");
            keys.name(key.index()).to_owned()
        })
        .collect()
}

fn http(status: u16, body: &str, retry_after: Option<Duration>) -> Result<(), ProviderError> {
    Err(ProviderError::Http {
        status,
        body: body.into(),
        retry_after,
        should_retry: None,
    })
}

#[test]
fn requests_take_the_keys_in_turn() {
    let keys = pool(&["K1", "K2", "K3"]);
    assert_eq!(picks(&keys, 6), ["K1", "K2", "K3", "K1", "K2", "K3"]);
    let key = keys.pick(&[]).expect("a key");
    assert_eq!(key.expose(), "sk-K1");
}

#[tokio::test(start_paused = true)]
async fn a_rate_limited_key_is_skipped_until_its_cooldown_ends() {
    let keys = pool(&["K1", "K2"]);
    let first = keys.pick(&[]).expect("a key");
    assert_eq!(keys.name(first.index()), "K1");
    let outcome = KeyOutcome::of(&http(429, "", Some(Duration::from_secs(60))));
    assert_eq!(outcome, KeyOutcome::RateLimited(Duration::from_secs(60)));
    keys.record("p", first.index(), outcome);

    // The same request moves on to K2 at once; later ones skip K1.
    let next = keys.pick(&[first.index()]).expect("another key");
    assert_eq!(keys.name(next.index()), "K2");
    assert_eq!(picks(&keys, 3), ["K2", "K2", "K2"]);

    tokio::time::advance(Duration::from_secs(59)).await;
    assert_eq!(picks(&keys, 2), ["K2", "K2"], "still cooling");
    tokio::time::advance(Duration::from_secs(1)).await;
    let mut after = picks(&keys, 2);
    after.sort();
    assert_eq!(after, ["K1", "K2"], "ready again");
}

#[tokio::test(start_paused = true)]
async fn the_keys_left_share_the_requests_evenly() {
    let keys = pool(&["K1", "K2", "K3"]);
    keys.record("p", 0, KeyOutcome::RateLimited(Duration::from_secs(60)));
    assert_eq!(picks(&keys, 4), ["K2", "K3", "K2", "K3"]);
    keys.record("p", 2, KeyOutcome::Rejected);
    assert_eq!(picks(&keys, 2), ["K2", "K2"]);
}

#[tokio::test(start_paused = true)]
async fn a_429_without_a_delay_cools_down_thirty_seconds() {
    let keys = pool(&["K1", "K2"]);
    let outcome = KeyOutcome::of(&http(429, "", None));
    assert_eq!(outcome, KeyOutcome::RateLimited(DEFAULT_COOLDOWN));
    keys.record("p", 0, outcome);
    tokio::time::advance(DEFAULT_COOLDOWN - Duration::from_millis(1)).await;
    assert_eq!(picks(&keys, 2), ["K2", "K2"]);
    tokio::time::advance(Duration::from_millis(1)).await;
    assert!(picks(&keys, 2).contains(&"K1".to_owned()));
}

#[tokio::test(start_paused = true)]
async fn when_every_key_cools_the_one_ready_first_is_used() {
    let keys = pool(&["K1", "K2", "K3"]);
    keys.record("p", 0, KeyOutcome::RateLimited(Duration::from_secs(40)));
    keys.record("p", 1, KeyOutcome::RateLimited(Duration::from_secs(10)));
    keys.record("p", 2, KeyOutcome::Rejected);
    assert_eq!(picks(&keys, 3), ["K2", "K2", "K2"]);
    // A request already refused on K2 has nowhere to go.
    assert!(keys.pick(&[1]).is_none());
    // An accepted request makes the cooling key ready again.
    keys.record("p", 1, KeyOutcome::Ok);
    keys.record("p", 0, KeyOutcome::Ok);
    let mut ready = picks(&keys, 2);
    ready.sort();
    assert_eq!(ready, ["K1", "K2"]);
}

#[tokio::test(start_paused = true)]
async fn a_refused_key_is_out_until_its_secret_is_read_again() {
    let keys = pool(&["K1", "K2"]);
    assert_eq!(KeyOutcome::of(&http(401, "", None)), KeyOutcome::Rejected);
    keys.record("p", 0, KeyOutcome::Rejected);
    tokio::time::advance(Duration::from_secs(3600)).await;
    assert_eq!(picks(&keys, 4), ["K2", "K2", "K2", "K2"]);
    // Alone, a refused key is still used: the provider's 401 is the answer.
    let only = pool(&["K1"]);
    only.record("p", 0, KeyOutcome::Rejected);
    assert_eq!(picks(&only, 1), ["K1"]);
    // SIGHUP sets the secret again.
    keys.0.keys[0].secret.set(Some("sk-new".into()));
    let mut after = picks(&keys, 2);
    after.sort();
    assert_eq!(after, ["K1", "K2"]);
}

#[test]
fn keys_without_a_value_are_skipped() {
    let keys = ApiKeys::new(vec![
        ApiKey {
            name: "UNSET".into(),
            secret: SharedSecret::default(),
        },
        ApiKey {
            name: "SET".into(),
            secret: SharedSecret::new("sk-set"),
        },
    ]);
    assert_eq!(picks(&keys, 3), ["SET", "SET", "SET"]);
    let none = ApiKeys::single("MISSING", SharedSecret::default());
    assert!(none.pick(&[]).is_none(), "unauthenticated");
    assert!(ApiKeys::default().pick(&[]).is_none());
}

#[test]
fn what_an_answer_says_about_its_key() {
    let ok: Result<(), ProviderError> = Ok(());
    assert_eq!(KeyOutcome::of(&ok), KeyOutcome::Ok);
    for (status, body, outcome) in [
        (401, "", KeyOutcome::Rejected),
        (
            400,
            r#"{"error":{"code":400,"message":"API key not valid. Please pass a valid API key.","status":"INVALID_ARGUMENT","details":[{"reason":"API_KEY_INVALID"}]}}"#,
            KeyOutcome::Rejected,
        ),
        (
            403,
            r#"{"error":{"message":"Your API key was reported as leaked. Please use another API key."}}"#,
            KeyOutcome::Rejected,
        ),
        (
            403,
            r#"{"type":"error","error":{"type":"permission_error","message":"Your API key does not have permission to use the specified resource."}}"#,
            KeyOutcome::Error,
        ),
        (
            400,
            r#"{"error":{"message":"bad tool schema"}}"#,
            KeyOutcome::Error,
        ),
        (503, "", KeyOutcome::Error),
    ] {
        assert_eq!(
            KeyOutcome::of(&http(status, body, None)),
            outcome,
            "{status} {body}"
        );
    }
    let lost: Result<(), ProviderError> = Err(ProviderError::Connection("reset".into()));
    assert_eq!(KeyOutcome::of(&lost), KeyOutcome::Error);
    assert!(KeyOutcome::Rejected.moves_on());
    assert!(!KeyOutcome::Error.moves_on());
}

#[test]
fn keys_are_counted_by_name_and_never_shown() {
    let keys = pool(&["METRIC_KEY_A", "METRIC_KEY_B"]);
    keys.record("metrics-test", 0, KeyOutcome::Ok);
    keys.record("metrics-test", 1, KeyOutcome::Rejected);
    let m = metrics();
    assert_eq!(
        m.provider_key_requests
            .with_label_values(&["metrics-test", "METRIC_KEY_A", "ok"])
            .get(),
        1
    );
    assert_eq!(
        m.provider_key_cooldowns
            .with_label_values(&["metrics-test", "METRIC_KEY_B", "rejected"])
            .get(),
        1
    );
    let rendered = m.render();
    assert!(
        rendered.contains(
            "parley_provider_key_requests_total{key=\"METRIC_KEY_A\",outcome=\"ok\",provider=\"metrics-test\"} 1"
        ),
        "{rendered}"
    );
    assert!(!rendered.contains("sk-METRIC_KEY"), "{rendered}");
    let shown = format!("{keys:?} {:?}", keys.pick(&[]).expect("a key"));
    assert!(shown.contains("METRIC_KEY_A"), "{shown}");
    assert!(!shown.contains("sk-"), "{shown}");
}
