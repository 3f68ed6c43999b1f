//! Durations written with their unit (`500ms`, `20s`, `5m`, `1h 30m`), as
//! configuration files and flags write them: parse, format, and serde with
//! `#[serde(with = "duration")]` (re-exported by [`crate::config`]).

use std::time::Duration;

use serde::{Deserializer, Serializer, de};

/// `500ms`, `20s`, `5m`, `1h 30m`; a bare number is refused.
pub fn parse(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!(
            "`{text}` has no unit: write it as {text}s or {text}ms"
        ));
    }
    humantime::parse_duration(text)
        .map_err(|error| format!("`{text}` is not a duration such as 20s or 500ms: {error}"))
}

/// Writes `duration` as `20s`, `1m 30s`, `50ms`.
pub fn format(duration: Duration) -> String {
    humantime::format_duration(duration).to_string()
}

/// Serializes as a humantime string.
pub fn serialize<S: Serializer>(value: &Duration, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(&format(*value))
}

/// Deserializes a humantime string.
pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Duration, D::Error> {
    deserializer.deserialize_any(Visitor)
}

/// The same for `Option<Duration>`, with `#[serde(default, with =
/// "duration::option")]`.
pub mod option {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    /// Serializes `Some` as a humantime string.
    pub fn serialize<S: Serializer>(
        value: &Option<Duration>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        match value {
            Some(duration) => serializer.serialize_some(&super::format(*duration)),
            None => serializer.serialize_none(),
        }
    }

    /// Deserializes a humantime string, or nothing.
    pub fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Option<Duration>, D::Error> {
        struct Humantime(Duration);

        impl<'de> Deserialize<'de> for Humantime {
            fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                super::deserialize(deserializer).map(Humantime)
            }
        }

        Option::<Humantime>::deserialize(deserializer).map(|value| value.map(|h| h.0))
    }
}

struct Visitor;

impl de::Visitor<'_> for Visitor {
    type Value = Duration;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a duration with its unit, such as \"20s\" or \"500ms\"")
    }

    fn visit_str<E: de::Error>(self, text: &str) -> Result<Duration, E> {
        parse(text).map_err(E::custom)
    }

    fn visit_u64<E: de::Error>(self, amount: u64) -> Result<Duration, E> {
        Err(E::custom(format!(
            "`{amount}` has no unit: write it as \"{amount}s\" or \"{amount}ms\""
        )))
    }

    fn visit_i64<E: de::Error>(self, amount: i64) -> Result<Duration, E> {
        Err(E::custom(format!(
            "`{amount}` has no unit: write it as \"{amount}s\" or \"{amount}ms\""
        )))
    }
}
