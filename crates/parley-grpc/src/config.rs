//! The one way a Parley binary reads its configuration.
//!
//! A setting comes from four layers, each overriding the one before:
//!
//! 1. the service's defaults: its configuration type's `Default`, the one
//!    place they are written (and what `--help` prints, see [`defaults_toml`]);
//! 2. a TOML file (`--config FILE`);
//! 3. environment variables `PARLEY_<SECTION>__<KEY>`: the key's path in the
//!    file, upper-cased, sections joined by a double underscore
//!    (`PARLEY_TURNS__LEASE_TTL=15s` sets `[turns] lease_ttl`);
//! 4. command-line flags, and the short variables that stand for them
//!    (`--listen` or `PARLEY_LISTEN`): each binary declares them once, in
//!    a clap struct that is also this layer ([`Layers::flags`]).
//!
//! Durations are written the same way in all four: a number with its unit,
//! `500ms`, `20s`, `5m`, `1h 30m`, `1day` (see [`duration`]). A bare number
//! is refused, since it cannot say whether it means seconds or milliseconds.
//!
//! Unknown keys are errors in every layer, and an error names the key and
//! the layer it came from (the file's path, the variable, the flag).

use std::{
    net::SocketAddr,
    path::{Path, PathBuf},
    time::Duration,
};

use figment::{
    Figment, Metadata, Profile, Provider,
    value::{Dict, Map, Value},
};
use serde::{Deserialize, Serialize, de::DeserializeOwned};

use crate::telemetry::{LogFormat, MetricsListen};

/// The prefix of every Parley environment variable.
pub const ENV_PREFIX: &str = "PARLEY_";

/// Why a configuration was refused.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The file is not TOML.
    #[error("{path} is not valid TOML: {message}")]
    Toml {
        /// The file.
        path: PathBuf,
        /// What is wrong, with its line.
        message: String,
    },
    /// A value has the wrong shape or a key is unknown; the message names
    /// the key and the layer it came from.
    #[error("{0}")]
    Value(String),
    /// A value is well-formed but out of range or inconsistent.
    #[error("invalid setting `{key}`: {message}")]
    Invalid {
        /// The key, as written in the file.
        key: String,
        /// What is wrong.
        message: String,
    },
}

/// A [`ConfigError::Invalid`] for `key`.
pub fn invalid(key: impl Into<String>, message: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        key: key.into(),
        message: message.into(),
    }
}

/// `Ok` when `value` is not zero, else an error naming `key`.
pub fn positive(key: &str, value: u64) -> Result<(), ConfigError> {
    if value == 0 {
        Err(invalid(key, "must be greater than 0"))
    } else {
        Ok(())
    }
}

/// `Ok` when `value` is a non-zero duration, else an error naming `key`.
pub fn positive_duration(key: &str, value: Duration) -> Result<(), ConfigError> {
    if value.is_zero() {
        Err(invalid(key, "must be longer than 0s"))
    } else {
        Ok(())
    }
}

/// A service's configuration: plain data with its defaults, read from its
/// layers and checked as a whole before anything starts.
pub trait ServiceConfig: Default + Serialize + DeserializeOwned {
    /// The command-line flags, each the override of one key.
    type Flags: Serialize;

    /// Checks every value that can be checked without connecting anywhere.
    fn validate(&self) -> Result<(), ConfigError>;

    /// What the layers leave to the service, before validation (paths
    /// relative to the file, defaults that depend on a flag); nothing by
    /// default.
    fn settle(&mut self, _file: Option<&Path>, _flags: &Self::Flags) {}

    /// The configuration from its layers ([`Layers::read`]: the defaults,
    /// `file` when given, the `PARLEY_<SECTION>__<KEY>` variables among
    /// `vars`, then `flags`), settled and validated.
    fn load(
        file: Option<&Path>,
        vars: impl IntoIterator<Item = (String, String)>,
        flags: Self::Flags,
    ) -> Result<Self, ConfigError> {
        let mut config: Self = Layers::read(&Self::default(), file, vars, &flags)?;
        config.settle(file, &flags);
        config.validate()?;
        Ok(config)
    }
}

/// The layers of one binary's configuration, merged in the order they are
/// added. Build it with [`Layers::new`], add the file, the environment and
/// the flags, then [`Layers::extract`].
#[derive(Debug)]
pub struct Layers {
    figment: Figment,
}

impl Layers {
    /// A service's configuration from its usual layers, in order: its
    /// defaults, `file` when given, the `PARLEY_<SECTION>__<KEY>` variables
    /// among `vars`, then the command line's `flags` (only those given).
    pub fn read<T: Serialize + DeserializeOwned, F: Serialize>(
        defaults: &T,
        file: Option<&Path>,
        vars: impl IntoIterator<Item = (String, String)>,
        flags: &F,
    ) -> Result<T, ConfigError> {
        Self::new(defaults)?
            .file_if(file)?
            .env_from(vars)
            .flags(flags)?
            .extract()
    }

    /// Starts from the service's defaults.
    pub fn new<T: Serialize>(defaults: &T) -> Result<Self, ConfigError> {
        let dict = to_dict(defaults)?;
        Ok(Self {
            figment: Figment::from(Layer::new("the defaults", dict, dotted)),
        })
    }

    /// Merges a TOML file over what is there.
    pub fn file(mut self, path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_owned(),
            source,
        })?;
        let table: toml::Table = toml::from_str(&text).map_err(|error| ConfigError::Toml {
            path: path.to_owned(),
            message: error.to_string(),
        })?;
        let dict = to_dict(&table)?;
        let name = format!("{}", path.display());
        self.figment = self.figment.merge(Layer::new(name, dict, dotted));
        Ok(self)
    }

    /// Merges a file when one is given.
    pub fn file_if(self, path: Option<&Path>) -> Result<Self, ConfigError> {
        match path {
            Some(path) => self.file(path),
            None => Ok(self),
        }
    }

    /// Merges the process's `PARLEY_<SECTION>__<KEY>` variables.
    pub fn env(self) -> Self {
        self.env_from(std::env::vars())
    }

    /// Merges `PARLEY_<SECTION>__<KEY>` variables from `vars` (tests pass
    /// their own). Variables without a double underscore are left to the
    /// flags that read them (`PARLEY_LISTEN`) or to other tools.
    pub fn env_from(mut self, vars: impl IntoIterator<Item = (String, String)>) -> Self {
        let mut dict = Dict::new();
        for (name, value) in vars {
            let Some(path) = env_key(&name) else { continue };
            let keys: Vec<&str> = path.split('.').collect();
            insert(&mut dict, &keys, Value::from(value));
        }
        self.figment = self
            .figment
            .merge(Layer::new("the environment", dict, env_name));
        self
    }

    /// Merges a binary's flags, the command-line layer: `flags` is its clap
    /// struct, which serialises each field under the key it sets (a dotted
    /// path, `#[serde(rename = "server.listen")]`; [`ServerFlags`] is
    /// `#[serde(flatten)]`ed in). A flag not given serialises to `None`
    /// and leaves the key alone; a field that is no key is
    /// `#[serde(skip)]`.
    pub fn flags<F: Serialize>(self, flags: &F) -> Result<Self, ConfigError> {
        let given = to_dict(flags)?
            .into_iter()
            .filter(|(_, value)| !matches!(value, Value::Empty(..)));
        Ok(self.command_line(given))
    }

    /// Sets `key` (a dotted path such as `server.listen`) from one flag
    /// when the flag was given.
    pub fn flag<V: Serialize>(self, key: &str, value: Option<V>) -> Result<Self, ConfigError> {
        let Some(value) = value else { return Ok(self) };
        let value = Value::serialize(value).map_err(|error| value_error(&error))?;
        Ok(self.command_line([(key.to_owned(), value)]))
    }

    /// Merges `(dotted key, value)` pairs as a command-line layer.
    fn command_line(mut self, given: impl IntoIterator<Item = (String, Value)>) -> Self {
        let mut dict = Dict::new();
        for (key, value) in given {
            let keys: Vec<&str> = key.split('.').collect();
            insert(&mut dict, &keys, value);
        }
        self.figment =
            self.figment
                .merge(Layer::new("the command line", dict, |keys: &[&str]| {
                    format!("--{}", keys.join("."))
                }));
        self
    }

    /// The merged configuration. Numbers and booleans written as strings
    /// (as every environment variable is) are read as such.
    pub fn extract<T: DeserializeOwned>(&self) -> Result<T, ConfigError> {
        self.figment
            .extract_lossy()
            .map_err(|error| value_error(&error))
    }
}

/// `PARLEY_TURNS__LEASE_TTL` → `turns.lease_ttl`; `None` for variables that
/// are not nested configuration keys.
fn env_key(name: &str) -> Option<String> {
    let rest = name.strip_prefix(ENV_PREFIX)?;
    if !rest.contains("__") {
        return None;
    }
    let path = rest.to_ascii_lowercase().replace("__", ".");
    (!path.split('.').any(str::is_empty)).then_some(path)
}

/// Puts `value` at `keys` in `dict`, creating the tables on the way.
fn insert(dict: &mut Dict, keys: &[&str], value: Value) {
    match keys {
        [] => {}
        [last] => {
            dict.insert((*last).to_owned(), value);
        }
        [first, rest @ ..] => {
            let entry = dict
                .entry((*first).to_owned())
                .or_insert_with(|| Value::from(Dict::new()));
            if !matches!(entry, Value::Dict(..)) {
                *entry = Value::from(Dict::new());
            }
            if let Value::Dict(_, inner) = entry {
                insert(inner, rest, value);
            }
        }
    }
}

fn to_dict<T: Serialize>(value: &T) -> Result<Dict, ConfigError> {
    match Value::serialize(value).map_err(|error| value_error(&error))? {
        Value::Dict(_, dict) => Ok(dict),
        _ => Err(ConfigError::Value(
            "a configuration must be a table of keys".into(),
        )),
    }
}

fn value_error(error: &figment::Error) -> ConfigError {
    let messages: Vec<String> = error.clone().into_iter().map(|e| e.to_string()).collect();
    ConfigError::Value(messages.join("; "))
}

fn dotted(keys: &[&str]) -> String {
    keys.join(".")
}

/// `["turns", "lease_ttl"]` → `PARLEY_TURNS__LEASE_TTL`.
fn env_name(keys: &[&str]) -> String {
    format!("{ENV_PREFIX}{}", keys.join("__").to_uppercase())
}

/// One layer: its values and how its keys are named in errors.
struct Layer {
    name: String,
    dict: Dict,
    key_name: fn(&[&str]) -> String,
}

impl Layer {
    fn new(name: impl Into<String>, dict: Dict, key_name: fn(&[&str]) -> String) -> Self {
        Self {
            name: name.into(),
            dict,
            key_name,
        }
    }
}

impl Provider for Layer {
    fn metadata(&self) -> Metadata {
        let key_name = self.key_name;
        Metadata::named(self.name.clone())
            .interpolater(move |_: &Profile, keys: &[&str]| key_name(keys))
    }

    fn data(&self) -> Result<Map<Profile, Dict>, figment::Error> {
        Ok(Map::from([(Profile::Default, self.dict.clone())]))
    }
}

/// The defaults as TOML, for `--help`: every key a file may set, with its
/// default value (keys without a default are left out).
pub fn defaults_toml<T: Serialize>(defaults: &T) -> String {
    match toml::to_string_pretty(defaults) {
        Ok(text) => text,
        Err(error) => format!("(the defaults cannot be shown: {error})"),
    }
}

/// The text `--help` ends with: the layers and the defaults.
pub fn help_footer<T: Serialize>(file_example: &str, defaults: &T) -> String {
    format!(
        "Configuration: defaults < TOML file (--config) < PARLEY_<SECTION>__<KEY> variables \
         < flags. Durations are written with their unit: 500ms, 20s, 5m, 1h.\n\
         See {file_example} for every key. The defaults:\n\n{}",
        defaults_toml(defaults)
    )
}

mod server;

pub use server::{BindError, ServerConfig, ServerFlags, is_loopback, print_if_asked};

/// `after_help` of every binary.
pub const SHORT_HELP_FOOTER: &str =
    "`--help` also prints every configuration key with its default.";

/// Parses a duration flag: a number with its unit (`500ms`, `20s`, `5m`).
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    duration::parse(text)
}

/// Durations with their unit, for `#[serde(with = "duration")]` in
/// configuration structs.
pub use crate::duration;

#[cfg(test)]
mod tests;
