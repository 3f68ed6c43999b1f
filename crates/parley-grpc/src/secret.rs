//! Secret values of the configuration, for every Parley binary: each one
//! given inline, by the name of an environment variable (`*_env`) or by a
//! file (`*_file`, as Kubernetes mounts a Secret), exactly one of them.
//! Files are read whole (at most [`MAX_SECRET_FILE_BYTES`]) with trailing
//! line ends trimmed, at start and again on SIGHUP (a value that changes
//! while the process runs sits in a [`SharedSecret`]). Values the examples
//! once shipped (`change-me...`) are refused, and a URL is printed without
//! its password. No message here holds a secret: they name the variable or
//! the file.

use std::{
    io::Read,
    path::Path,
    sync::{Arc, PoisonError, RwLock},
};

use secrecy::{ExposeSecret, SecretString};

/// Largest secret file read, in bytes: far more than any key or URL.
pub const MAX_SECRET_FILE_BYTES: u64 = 64 * 1024;

/// The content of the secret file at `path`, without trailing line ends.
pub fn read_file(path: &Path) -> Result<String, String> {
    let file = std::fs::File::open(path)
        .map_err(|error| format!("cannot read {}: {error}", path.display()))?;
    let mut bytes = Vec::new();
    file.take(MAX_SECRET_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|error| format!("cannot read {}: {error}", path.display()))?;
    if bytes.len() as u64 > MAX_SECRET_FILE_BYTES {
        return Err(format!(
            "{} is larger than {MAX_SECRET_FILE_BYTES} bytes",
            path.display()
        ));
    }
    let text =
        String::from_utf8(bytes).map_err(|_| format!("{} is not UTF-8 text", path.display()))?;
    Ok(text.trim_end_matches(['\n', '\r']).to_owned())
}

/// The secret given by exactly one of `inline`, the environment variable
/// named `env` and the file `file`; the message says what is wrong.
pub fn read(
    inline: Option<&str>,
    env: Option<&str>,
    file: Option<&Path>,
) -> Result<String, String> {
    read_with(inline, env, file, |name| std::env::var(name).ok())
}

/// [`read`], with the environment read by `lookup`.
pub fn read_with(
    inline: Option<&str>,
    env: Option<&str>,
    file: Option<&Path>,
    lookup: impl Fn(&str) -> Option<String>,
) -> Result<String, String> {
    let value = match (inline, env, file) {
        (Some(value), None, None) => value.to_owned(),
        (None, Some(name), None) => {
            lookup(name).ok_or_else(|| format!("environment variable {name} is not set"))?
        }
        (None, None, Some(path)) => read_file(path)?,
        (None, None, None) => {
            return Err("missing: set the value, its `_env` variable or its `_file`".into());
        }
        _ => {
            return Err(
                "set only one of the inline value, its `_env` variable and its `_file`".into(),
            );
        }
    };
    if is_placeholder(&value) {
        return Err(PLACEHOLDER.into());
    }
    Ok(value)
}

/// What a refused placeholder is told.
pub const PLACEHOLDER: &str = "is a placeholder from the examples (`change-me...`), which anyone can read: set a random value, e.g. `openssl rand -base64 48`";

/// Whether `value` is one of the placeholders the examples shipped
/// (`change-me`, `change-me-to-a-long-random-string`, `changeme`...), in
/// any case.
pub fn is_placeholder(value: &str) -> bool {
    let value = value.trim().to_ascii_lowercase();
    ["change-me", "changeme", "change_me", "replace-me"]
        .iter()
        .any(|prefix| value.starts_with(prefix))
}

/// The password of a URL (`scheme://user:password@host/...`), if any.
fn password_span(url: &str) -> Option<(usize, usize)> {
    let start = url.find("://")? + 3;
    let authority_end = url[start..]
        .find(['/', '?', '#'])
        .map_or(url.len(), |end| start + end);
    let at = url[start..authority_end].rfind('@')? + start;
    let colon = url[start..at].find(':')? + start;
    Some((colon + 1, at))
}

/// Whether the URL's password is a placeholder.
pub fn url_has_placeholder_password(url: &str) -> bool {
    password_span(url).is_some_and(|(from, to)| is_placeholder(&url[from..to]))
        || query_password(url).is_some_and(|(from, to)| is_placeholder(&url[from..to]))
}

/// The value of a `password=` query parameter.
fn query_password(url: &str) -> Option<(usize, usize)> {
    let query = url.find('?')? + 1;
    let mut offset = query;
    for pair in url[query..].split('&') {
        if let Some(value) = pair.strip_prefix("password=") {
            let from = offset + "password=".len();
            return Some((from, from + value.len()));
        }
        offset += pair.len() + 1;
    }
    None
}

/// `url` with its password (in the authority or a `password=` query
/// parameter) replaced by `***`.
pub fn redact_url(url: &str) -> String {
    let mut url = url.to_owned();
    if let Some((from, to)) = query_password(&url) {
        url.replace_range(from..to, "***");
    }
    if let Some((from, to)) = password_span(&url) {
        url.replace_range(from..to, "***");
    }
    url
}

/// Serializes a URL without its password (`--print-config`).
pub fn serialize_redacted<S: serde::Serializer>(
    url: &str,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(&redact_url(url))
}

/// Serializes an optional URL without its password (`--print-config`).
pub fn serialize_redacted_opt<S: serde::Serializer>(
    url: &Option<String>,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    match url {
        Some(url) => serializer.serialize_some(&redact_url(url)),
        None => serializer.serialize_none(),
    }
}

/// A secret that SIGHUP may replace while the process runs: cheap to clone
/// (every clone sees the replacement), `[REDACTED]` in `Debug`, zeroized
/// when dropped. Clones are equal; two secrets made apart are not. Each
/// [`SharedSecret::set`] counts one [`SharedSecret::generation`], so a
/// holder can tell that the value was read again (a key a provider refused
/// gets another chance once SIGHUP reloaded it).
#[derive(Clone, Default)]
pub struct SharedSecret(Arc<RwLock<Slot>>);

/// The value of a [`SharedSecret`] and how often it was set.
#[derive(Default)]
struct Slot {
    value: Option<SecretString>,
    generation: u64,
}

impl SharedSecret {
    /// A secret holding `value`.
    pub fn new(value: impl Into<String>) -> Self {
        let shared = Self::default();
        shared.set(Some(value.into()));
        shared
    }

    /// The current value, if any.
    pub fn get(&self) -> Option<SecretString> {
        // A writer cannot panic while holding the lock (it only assigns).
        self.0.read().map_or(None, |slot| slot.value.clone())
    }

    /// Whether a value is held.
    pub fn is_set(&self) -> bool {
        self.0.read().is_ok_and(|slot| slot.value.is_some())
    }

    /// How many times the value was set (read again): 0 for a secret never
    /// set.
    pub fn generation(&self) -> u64 {
        self.0.read().map_or(0, |slot| slot.generation)
    }

    /// Replaces the value (`None` clears it; an empty string counts as none).
    pub fn set(&self, value: Option<String>) {
        let value = value.filter(|v| !v.is_empty()).map(SecretString::from);
        let mut slot = self.0.write().unwrap_or_else(PoisonError::into_inner);
        slot.value = value;
        slot.generation = slot.generation.wrapping_add(1);
    }

    /// Runs `f` on the exposed value (the empty string when none is held).
    pub fn with_exposed<T>(&self, f: impl FnOnce(&str) -> T) -> T {
        match self.get() {
            Some(value) => f(value.expose_secret()),
            None => f(""),
        }
    }
}

impl std::fmt::Debug for SharedSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.is_set() { "[REDACTED]" } else { "None" })
    }
}

impl PartialEq for SharedSecret {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl From<&str> for SharedSecret {
    fn from(value: &str) -> Self {
        Self::new(value)
    }
}

/// Where one reloadable secret comes from, and the slot it is kept in: read
/// with [`Reloadable::load`] at start (an error stops the start) and with
/// [`Reloadable::reload`] on SIGHUP (an error keeps the value held).
#[derive(Debug, Clone)]
pub struct Reloadable {
    /// The configuration key, for messages (`providers.openai.api_key_file`).
    pub key: String,
    /// The environment variable, when the secret is given by one.
    pub env: Option<String>,
    /// The file, when the secret is given by one.
    pub file: Option<std::path::PathBuf>,
    /// Where the value is kept.
    pub slot: SharedSecret,
}

impl Reloadable {
    /// Reads the secret into its slot; the message says what is wrong
    /// (the variable or the file), never the value.
    pub fn load(&self, lookup: impl Fn(&str) -> Option<String>) -> Result<(), String> {
        let value = read_with(None, self.env.as_deref(), self.file.as_deref(), lookup)?;
        self.slot.set(Some(value));
        Ok(())
    }

    /// Reads the secret again: a value that cannot be read is logged (as
    /// [`Reloadable::load`] words it) and the one held stays. Returns
    /// whether the value was read.
    pub fn reload(&self, lookup: impl Fn(&str) -> Option<String>) -> bool {
        match self.load(lookup) {
            Ok(()) => true,
            Err(error) => {
                tracing::warn!(key = %self.key, %error, "a secret could not be read again; the current value stays");
                false
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_are_left_out_of_printed_urls() {
        for (url, printed) in [
            (
                "postgres://parley:s3cr%40t@db.internal:5432/parley",
                "postgres://parley:***@db.internal:5432/parley",
            ),
            (
                "postgres://db/parley?user=parley&password=s3cret&sslmode=require",
                "postgres://db/parley?user=parley&password=***&sslmode=require",
            ),
            ("postgres://parley@db/parley", "postgres://parley@db/parley"),
            ("sqlite://parley.db?mode=rwc", "sqlite://parley.db?mode=rwc"),
        ] {
            assert_eq!(redact_url(url), printed);
        }
    }

    #[test]
    fn secrets_come_from_one_source_and_files_lose_their_line_end() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("secret");
        std::fs::write(&path, "from-a-file-0123456789\n").expect("write");
        assert_eq!(
            read(None, None, Some(&path)).as_deref(),
            Ok("from-a-file-0123456789")
        );
        assert!(read(Some("x"), None, Some(&path)).is_err());
        assert!(
            read(None, None, Some(&dir.path().join("absent")))
                .expect_err("missing file")
                .contains("absent")
        );
        std::fs::write(&path, vec![b'a'; 70 * 1024]).expect("write");
        assert!(
            read(None, None, Some(&path))
                .expect_err("too large")
                .contains("larger")
        );
    }

    #[test]
    fn shipped_placeholders_are_refused() {
        for value in [
            "change-me-to-a-long-random-string",
            "change-me",
            "CHANGEME-please",
        ] {
            assert!(read(Some(value), None, None).is_err(), "{value}");
        }
        assert!(url_has_placeholder_password(
            "postgres://parley:change-me@postgres.parley.svc:5432/parley"
        ));
        assert!(!url_has_placeholder_password(
            "postgres://parley:Xk3v9@postgres/parley"
        ));
    }

    #[test]
    fn a_shared_secret_is_replaced_in_every_clone_and_never_printed() {
        let secret = SharedSecret::new("sk-one");
        let clone = secret.clone();
        assert_eq!(format!("{clone:?}"), "[REDACTED]");
        secret.set(Some("sk-two".into()));
        assert_eq!(clone.with_exposed(str::to_owned), "sk-two");
        secret.set(Some(String::new()));
        assert!(!clone.is_set());
        assert_eq!(format!("{clone:?}"), "None");
        assert_ne!(SharedSecret::new("a"), SharedSecret::new("a"));
        let generation = clone.generation();
        secret.set(Some("sk-three".into()));
        assert_eq!(clone.generation(), generation + 1, "every set counts");
    }

    #[test]
    fn a_failed_reload_keeps_the_value() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("key");
        std::fs::write(&path, "sk-first\n").expect("write");
        let secret = Reloadable {
            key: "providers.p.api_key_file".into(),
            env: None,
            file: Some(path.clone()),
            slot: SharedSecret::default(),
        };
        secret.load(|_| None).expect("load");
        std::fs::write(&path, "sk-second\n").expect("write");
        assert!(secret.reload(|_| None));
        assert_eq!(secret.slot.with_exposed(str::to_owned), "sk-second");
        std::fs::remove_file(&path).expect("remove");
        assert!(!secret.reload(|_| None));
        assert_eq!(secret.slot.with_exposed(str::to_owned), "sk-second");
        let error = secret.load(|_| None).expect_err("absent");
        assert!(error.contains("cannot read"), "{error}");
    }
}
