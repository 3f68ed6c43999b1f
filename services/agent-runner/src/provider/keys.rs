//! The API keys of one provider, and which one a request carries.
//!
//! A provider may have several keys (`api_keys_env`, `api_keys_file`).
//! Requests take the keys that are *ready* in turn (round robin: each
//! request the next ready key after the last one used). A key
//! the provider answered 429 cools down for the delay the answer asked for
//! (`retry-after-ms`, `retry-after` in seconds or as an HTTP date, Gemini's
//! `retryDelay`: what [`super::http`] reads for retries) or
//! [`DEFAULT_COOLDOWN`] without one; a key it refused (401, or a 400 or 403
//! whose body says the key is invalid) is set aside until SIGHUP reads its
//! file again or the runner restarts. Either way the same request goes out
//! again at once with the next ready key
//! ([`SseProvider`](super::wire::SseProvider) does it, before the retry
//! policy sees anything), so one key's rate limit costs no wait.
//!
//! When no key is ready, a request still goes out, with the key whose
//! cooldown ends first (a refused key last): the provider's own answer (a
//! 429 the retry policy waits out, or the 401) is what the caller gets, as
//! with one key, rather than a refusal made up here from a cooldown that
//! was only the provider's estimate. A provider with one key therefore
//! behaves exactly as before keys were pooled. A key whose variable is
//! unset or whose file is missing is skipped until it has a value; with no
//! key at all, requests go unauthenticated (local servers).
//!
//! Each key has a name, its variable's or its file's, used in logs and in
//! the metrics `parley_provider_key_requests_total{provider,key,outcome}`
//! and `parley_provider_key_cooldowns_total{provider,key,reason}`; a key's
//! value shows nowhere (`Debug` prints the names).

use std::{
    fmt,
    sync::{Arc, Mutex, PoisonError},
    time::Duration,
};

use parley_grpc::{secret::SharedSecret, telemetry::metrics};
use secrecy::{ExposeSecret, SecretString};
use tokio::time::Instant;

use super::ProviderError;

/// How long a key cools down after a 429 that asked for no delay.
pub const DEFAULT_COOLDOWN: Duration = Duration::from_secs(30);

/// Error bodies (lowercased) that say the key itself is invalid, on a 400
/// (Gemini's `API_KEY_INVALID`) or a 403 (a key revoked or reported as
/// leaked); a 401 always does.
const INVALID_KEY_MARKERS: &[&str] = &[
    "api_key_invalid",
    "invalid_api_key",
    "invalid api key",
    "incorrect api key",
    "api key not valid",
    "api key expired",
    "api_key_expired",
    "reported as leaked",
];

/// One key of a provider.
#[derive(Clone)]
pub struct ApiKey {
    /// Its name in logs and metrics: the variable's or the file's name.
    pub name: String,
    /// Its value (SIGHUP may replace it); unset while its variable or file
    /// gives none.
    pub secret: SharedSecret,
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ApiKey")
            .field("name", &self.name)
            .field("secret", &self.secret)
            .finish()
    }
}

/// The keys of one provider and their states, shared by every clone.
#[derive(Clone, Default)]
pub struct ApiKeys(Arc<Pool>);

#[derive(Default)]
struct Pool {
    keys: Vec<ApiKey>,
    turns: Mutex<Turns>,
}

/// Whose turn it is, and which keys may take it.
#[derive(Default)]
struct Turns {
    /// Where the next pick starts looking: after the last key picked.
    next: usize,
    /// One state per key, in the order of the keys.
    states: Vec<KeyState>,
}

/// Whether a key may be picked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum KeyState {
    /// Ready.
    Ready,
    /// Rate-limited until then.
    Cooling { until: Instant },
    /// Refused by the provider while its secret was at this generation:
    /// ready again once the secret is set again (SIGHUP).
    Rejected { generation: u64 },
}

/// The key a request carries.
pub struct PickedKey {
    index: usize,
    secret: SecretString,
}

impl PickedKey {
    /// The key's value, for the adapter's auth header.
    pub fn expose(&self) -> &str {
        self.secret.expose_secret()
    }

    /// The key's position in the provider's list.
    pub fn index(&self) -> usize {
        self.index
    }
}

impl fmt::Debug for PickedKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PickedKey")
            .field("index", &self.index)
            .finish_non_exhaustive()
    }
}

/// What a provider's answer says about the key it was sent with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyOutcome {
    /// The request was accepted.
    Ok,
    /// 429: the key cools down this long.
    RateLimited(Duration),
    /// The provider refused the key.
    Rejected,
    /// Any other failure (5xx, a lost connection...): nothing about the key.
    Error,
}

impl KeyOutcome {
    /// The outcome of an answer.
    pub fn of<T>(result: &Result<T, ProviderError>) -> Self {
        let Err(error) = result else {
            return Self::Ok;
        };
        match error {
            ProviderError::Http {
                status: 429,
                retry_after,
                ..
            } => Self::RateLimited(retry_after.unwrap_or(DEFAULT_COOLDOWN)),
            ProviderError::Http { status: 401, .. } => Self::Rejected,
            ProviderError::Http {
                status: 400 | 403,
                body,
                ..
            } if names_an_invalid_key(body) => Self::Rejected,
            _ => Self::Error,
        }
    }

    /// The `outcome` label.
    pub fn label(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::RateLimited(_) => "rate_limited",
            Self::Rejected => "rejected",
            Self::Error => "error",
        }
    }

    /// Whether another key should be tried at once.
    pub fn moves_on(self) -> bool {
        matches!(self, Self::RateLimited(_) | Self::Rejected)
    }
}

/// Whether an error body says the key is invalid.
fn names_an_invalid_key(body: &str) -> bool {
    let body = body.to_ascii_lowercase();
    INVALID_KEY_MARKERS
        .iter()
        .any(|marker| body.contains(marker))
}

impl ApiKeys {
    /// The keys `keys`, all ready.
    pub fn new(keys: Vec<ApiKey>) -> Self {
        let turns = Turns {
            next: 0,
            states: vec![KeyState::Ready; keys.len()],
        };
        Self(Arc::new(Pool {
            keys,
            turns: Mutex::new(turns),
        }))
    }

    /// One key named `name` holding `secret`.
    pub fn single(name: impl Into<String>, secret: SharedSecret) -> Self {
        Self::new(vec![ApiKey {
            name: name.into(),
            secret,
        }])
    }

    /// The keys' names, in order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.0.keys.iter().map(|key| key.name.as_str())
    }

    /// The name of the key at `index`.
    pub fn name(&self, index: usize) -> &str {
        self.0.keys.get(index).map_or("", |key| key.name.as_str())
    }

    /// Whether no key is configured.
    pub fn is_empty(&self) -> bool {
        self.0.keys.is_empty()
    }

    /// The key for a request. First (`tried` empty): the next ready key in
    /// turn, else the one whose cooldown ends first, else a refused one;
    /// `None` when no key holds a value. After a key moved on (`tried`
    /// lists the keys this request was sent with): the next ready key not
    /// tried, else `None`.
    pub fn pick(&self, tried: &[usize]) -> Option<PickedKey> {
        let pool = &*self.0;
        let count = pool.keys.len();
        if count == 0 {
            return None;
        }
        let now = Instant::now();
        let mut turns = pool.turns.lock().unwrap_or_else(PoisonError::into_inner);
        let Turns { next, states } = &mut *turns;
        let start = *next % count;
        // The key to use when none is ready: the cooling one that is ready
        // first, else the first refused one in turn.
        let mut waiting: Option<((u8, Option<Instant>), usize)> = None;
        for offset in 0..count {
            let index = (start + offset) % count;
            let key = &pool.keys[index];
            if tried.contains(&index) || !key.secret.is_set() {
                continue;
            }
            let state = match states[index] {
                KeyState::Cooling { until } if until <= now => KeyState::Ready,
                KeyState::Rejected { generation } if generation != key.secret.generation() => {
                    KeyState::Ready
                }
                state => state,
            };
            states[index] = state;
            let rank = match state {
                KeyState::Ready => match key.secret.get() {
                    Some(secret) => {
                        *next = index + 1;
                        return Some(PickedKey { index, secret });
                    }
                    None => continue,
                },
                KeyState::Cooling { until } => (0, Some(until)),
                KeyState::Rejected { .. } => (1, None),
            };
            if waiting.is_none_or(|(best, _)| rank < best) {
                waiting = Some((rank, index));
            }
        }
        if !tried.is_empty() {
            return None;
        }
        let (_, index) = waiting?;
        let secret = pool.keys[index].secret.get()?;
        *next = index + 1;
        Some(PickedKey { index, secret })
    }

    /// Records the `outcome` of a request sent to `provider` with the key
    /// at `index`: its metrics, and its state (a 429 cools it down, a
    /// refusal sets it aside, an accepted request makes it ready).
    pub fn record(&self, provider: &str, index: usize, outcome: KeyOutcome) {
        let pool = &*self.0;
        let Some(key) = pool.keys.get(index) else {
            return;
        };
        let m = metrics();
        m.provider_key_requests
            .with_label_values(&[provider, &key.name, outcome.label()])
            .inc();
        let state = match outcome {
            KeyOutcome::Ok => KeyState::Ready,
            KeyOutcome::Error => return,
            KeyOutcome::RateLimited(cooldown) => {
                tracing::warn!(
                    provider,
                    key = %key.name,
                    cooldown_seconds = cooldown.as_secs_f64(),
                    "the provider rate-limited an API key; it cools down"
                );
                KeyState::Cooling {
                    until: Instant::now() + cooldown,
                }
            }
            KeyOutcome::Rejected => {
                tracing::error!(
                    provider,
                    key = %key.name,
                    "the provider refused an API key; it is set aside until SIGHUP reads it again or the runner restarts"
                );
                KeyState::Rejected {
                    generation: key.secret.generation(),
                }
            }
        };
        if outcome.moves_on() {
            m.provider_key_cooldowns
                .with_label_values(&[provider, &key.name, outcome.label()])
                .inc();
        }
        let mut turns = pool.turns.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(slot) = turns.states.get_mut(index) {
            *slot = state;
        }
    }
}

impl fmt::Debug for ApiKeys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.0.keys.iter()).finish()
    }
}

/// One key named `api_key` (tests and hand-built configurations).
impl From<&str> for ApiKeys {
    fn from(value: &str) -> Self {
        Self::single("api_key", SharedSecret::new(value))
    }
}

#[cfg(test)]
mod tests;
