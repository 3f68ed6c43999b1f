//! Where a provider's API keys come from: at most one of `api_key_env`,
//! `api_key_file`, `api_keys_env` and `api_keys_file`, and the name each
//! key goes by in logs and metrics (its variable's name, or its file's
//! name without the directory; never its value).

use std::{
    collections::BTreeSet,
    path::{Path, PathBuf},
};

use parley_grpc::config::{ConfigError, invalid};

use super::ProviderConfig;

/// Where one key is read from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeySource {
    /// An environment variable, read at start.
    Env(String),
    /// A file (relative to the configuration file), read at start and
    /// again on SIGHUP.
    File(PathBuf),
}

/// One configured key: its name and where it is read from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeySpec {
    /// The key's name in logs and metrics labels.
    pub name: String,
    /// Where its value is.
    pub source: KeySource,
    /// The configuration field it was given by, for messages
    /// (`providers.openai.api_keys_file`).
    pub field: String,
}

impl ProviderConfig {
    /// The provider's keys in the configured order (none: requests go
    /// unauthenticated). An error names the field at fault: two of the
    /// four fields set, an empty list or name, or two keys of one name.
    pub fn key_specs(&self, provider: &str) -> Result<Vec<KeySpec>, ConfigError> {
        let single_env = self.api_key_env.as_ref().map(std::slice::from_ref);
        let single_file = self.api_key_file.as_ref().map(std::slice::from_ref);
        let set: Vec<&str> = [
            ("api_key_env", single_env.is_some()),
            ("api_key_file", single_file.is_some()),
            ("api_keys_env", self.api_keys_env.is_some()),
            ("api_keys_file", self.api_keys_file.is_some()),
        ]
        .into_iter()
        .filter_map(|(field, is_set)| is_set.then_some(field))
        .collect();
        if let [first, second, ..] = set.as_slice() {
            return Err(invalid(
                format!("providers.{provider}"),
                format!(
                    "set only one of `api_key_env`, `api_key_file`, `api_keys_env` and \
                     `api_keys_file` (here: `{first}` and `{second}`)"
                ),
            ));
        }
        let Some(&field) = set.first() else {
            return Ok(Vec::new());
        };
        let field = format!("providers.{provider}.{field}");
        let specs = if let Some(names) = single_env.or(self.api_keys_env.as_deref()) {
            names
                .iter()
                .map(|name| {
                    if name.trim().is_empty() {
                        return Err(invalid(&field, "names an empty variable"));
                    }
                    Ok(KeySpec {
                        name: name.clone(),
                        source: KeySource::Env(name.clone()),
                        field: field.clone(),
                    })
                })
                .collect::<Result<Vec<_>, _>>()?
        } else {
            let files = single_file.or(self.api_keys_file.as_deref()).unwrap_or(&[]);
            files
                .iter()
                .map(|file| {
                    let name = file_name(file)
                        .ok_or_else(|| invalid(&field, "names a path without a file name"))?;
                    Ok(KeySpec {
                        name,
                        source: KeySource::File(file.clone()),
                        field: field.clone(),
                    })
                })
                .collect::<Result<Vec<_>, _>>()?
        };
        if specs.is_empty() {
            return Err(invalid(&field, "is empty: name at least one key"));
        }
        let mut names = BTreeSet::new();
        for spec in &specs {
            if !names.insert(spec.name.as_str()) {
                return Err(invalid(
                    &field,
                    format!(
                        "names two keys `{}`: a key's name (its variable's or its file's name) \
                         labels its metrics and logs, so each must differ",
                        spec.name
                    ),
                ));
            }
        }
        Ok(specs)
    }
}

/// The last component of `path`, as text.
fn file_name(path: &Path) -> Option<String> {
    let name = path.file_name()?.to_string_lossy().into_owned();
    (!name.is_empty()).then_some(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn provider(toml: &str) -> ProviderConfig {
        toml::from_str(&format!("kind = \"openai\"\n{toml}")).expect("a provider table")
    }

    #[test]
    fn each_field_gives_keys_named_by_variable_or_file() {
        let specs = provider("api_keys_env = [\"OPENAI_KEY_1\", \"OPENAI_KEY_2\"]")
            .key_specs("openai")
            .expect("valid");
        let names: Vec<&str> = specs.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["OPENAI_KEY_1", "OPENAI_KEY_2"]);
        assert_eq!(specs[1].source, KeySource::Env("OPENAI_KEY_2".into()));
        assert_eq!(specs[0].field, "providers.openai.api_keys_env");

        let specs = provider("api_keys_file = [\"/run/keys/first\", \"keys/second\"]")
            .key_specs("openai")
            .expect("valid");
        let names: Vec<&str> = specs.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["first", "second"]);
        assert_eq!(specs[1].source, KeySource::File("keys/second".into()));

        let specs = provider("api_key_env = \"OPENAI_API_KEY\"")
            .key_specs("openai")
            .expect("valid");
        assert_eq!(specs.len(), 1);
        assert_eq!(specs[0].name, "OPENAI_API_KEY");
        assert_eq!(specs[0].field, "providers.openai.api_key_env");
        assert!(provider("").key_specs("openai").expect("valid").is_empty());
    }

    #[test]
    fn two_sources_an_empty_list_or_twin_names_are_refused_by_field() {
        let error = provider("api_key_env = \"K\"\napi_keys_env = [\"K1\"]")
            .key_specs("openai")
            .expect_err("two sources");
        let text = error.to_string();
        assert!(text.contains("providers.openai"), "{text}");
        assert!(text.contains("`api_key_env` and `api_keys_env`"), "{text}");
        let error = provider("api_keys_file = [\"a\"]\napi_keys_env = [\"K1\"]")
            .key_specs("openai")
            .expect_err("two sources");
        assert!(
            error
                .to_string()
                .contains("`api_keys_env` and `api_keys_file`"),
            "{error}"
        );
        let error = provider("api_keys_env = []")
            .key_specs("openai")
            .expect_err("empty");
        assert!(
            error.to_string().contains("providers.openai.api_keys_env"),
            "{error}"
        );
        let error = provider("api_keys_file = [\"/a/key\", \"/b/key\"]")
            .key_specs("openai")
            .expect_err("twins");
        let text = error.to_string();
        assert!(
            text.contains("providers.openai.api_keys_file") && text.contains("`key`"),
            "{text}"
        );
        let error = provider("api_keys_env = [\"K\", \"K\"]")
            .key_specs("openai")
            .expect_err("twins");
        assert!(error.to_string().contains("api_keys_env"), "{error}");
        let error = provider("api_keys_env = [\"\"]")
            .key_specs("openai")
            .expect_err("empty name");
        assert!(error.to_string().contains("api_keys_env"), "{error}");
    }
}
