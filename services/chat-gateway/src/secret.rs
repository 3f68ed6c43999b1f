//! Secret values of the configuration: each one given inline, by the name of
//! an environment variable (`*_env`) or by a file (`*_file`, as Kubernetes
//! mounts a Secret), exactly one of them. Files are read whole (at most
//! [`MAX_SECRET_FILE_BYTES`]) with trailing line ends trimmed, at start and
//! again on SIGHUP. Values the examples once shipped (`change-me...`) are
//! refused, and a database URL is printed without its password.

use std::{io::Read, path::Path};

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
    let value = match (inline, env, file) {
        (Some(value), None, None) => value.to_owned(),
        (None, Some(name), None) => {
            std::env::var(name).map_err(|_| format!("environment variable {name} is not set"))?
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

#[cfg(test)]
mod tests {
    use serde::Deserialize;

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

    fn deploy() -> std::path::PathBuf {
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy")
    }

    #[test]
    fn the_default_deployment_applies_no_secret_and_mounts_the_gateways_as_files() {
        let kustomization: serde_yaml_ng::Value = serde_yaml_ng::from_str(
            &std::fs::read_to_string(deploy().join("kustomization.yaml")).expect("read"),
        )
        .expect("yaml");
        let resources: Vec<&str> = kustomization["resources"]
            .as_sequence()
            .expect("resources")
            .iter()
            .filter_map(|r| r.as_str())
            .collect();
        for resource in &resources {
            let path = deploy().join(resource);
            if path.is_file() {
                let text = std::fs::read_to_string(&path).expect("read");
                assert!(
                    !text.lines().any(|line| line.trim() == "kind: Secret"),
                    "`kubectl apply -k deploy` applies the Secret of {resource}"
                );
            }
        }
        let gateway = std::fs::read_to_string(deploy().join("base/gateway.yaml")).expect("read");
        assert!(
            !gateway.contains("secretKeyRef"),
            "the gateway's secrets are files, not variables"
        );
        for mounted in ["secretName: parley-auth", "secretName: parley-postgres"] {
            assert!(gateway.contains(mounted), "{mounted}");
        }
        let config =
            std::fs::read_to_string(deploy().join("config/gateway.kubernetes.toml")).expect("read");
        assert!(
            config.contains("secret_file = \"/var/run/secrets/parley/auth/jwt-secret\""),
            "{config}"
        );
        assert!(gateway.contains("/var/run/secrets/parley/postgres/url"));
        // The example, outside the composition, shows only refused values.
        let example =
            std::fs::read_to_string(deploy().join("example/secrets.example.yaml")).expect("read");
        for document in serde_yaml_ng::Deserializer::from_str(&example) {
            let secret = serde_yaml_ng::Value::deserialize(document).expect("yaml");
            let data = secret["stringData"].as_mapping().expect("stringData");
            for (key, value) in data {
                let value = value.as_str().unwrap_or_default();
                assert!(
                    value.is_empty()
                        || is_placeholder(value)
                        || url_has_placeholder_password(value),
                    "{key:?} = {value}"
                );
            }
        }
    }
}
