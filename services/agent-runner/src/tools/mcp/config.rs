//! `[mcp_servers.NAME]`: the MCP servers the runner may use, and nothing
//! else (no request can name a server that is not here).
//!
//! ```toml
//! [mcp_servers.time]                    # stdio: a child process, no shell
//! command = ["python3", "-m", "mcp_server_time"]
//! env = { API_TOKEN = "TIME_API_TOKEN" } # the child's API_TOKEN = the runner's $TIME_API_TOKEN
//! cwd = "/srv/time"                      # optional; relative to this file
//!
//! [mcp_servers.search]                  # Streamable HTTP
//! url = "http://search:8000/mcp"
//! headers = { Authorization = "SEARCH_AUTHORIZATION" }  # the value of $SEARCH_AUTHORIZATION
//! headers_files = { "X-Api-Key" = "/var/run/secrets/parley/mcp/search-key" }  # a file's content
//! ```
//!
//! Values of `env` and `headers` name environment variables of the runner,
//! so secrets never sit in the file; `headers_files` name files (relative
//! to the configuration file), read at start and again on SIGHUP (new
//! connections then send the new value; a header is in `headers` or
//! `headers_files`, not both). A child process gets only those and
//! `PATH`, `HOME`, `LANG`, `LC_ALL`, `TZ`, `TMPDIR` from the runner (not the
//! providers' keys).

use std::{collections::BTreeMap, path::PathBuf, time::Duration};

use parley_grpc::{
    config::{ConfigError, duration, invalid, positive, positive_duration},
    secret::{Reloadable, SharedSecret},
};
use serde::{Deserialize, Serialize};

/// The longest server name.
pub const MAX_SERVER_NAME_LEN: usize = 32;

/// One MCP server.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpServerConfig {
    /// stdio: the program and its arguments, run without a shell.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<Vec<String>>,
    /// stdio: the child's variables, each read from the runner's variable
    /// named by the value.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// stdio: the child's working directory (relative to the file's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<PathBuf>,
    /// Streamable HTTP: the endpoint, `http(s)://…/mcp`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Streamable HTTP: headers sent with every request, each the value of
    /// the runner's variable named by the value.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
    /// Streamable HTTP: headers sent with every request, each the content
    /// of the file named by the value (read at start and on SIGHUP).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers_files: BTreeMap<String, PathBuf>,
    /// The values of `headers_files`, as last read (set when the runner
    /// starts; not a key of `[mcp_servers.NAME]`).
    #[serde(skip)]
    pub header_secrets: BTreeMap<String, SharedSecret>,
    /// Time to start (or connect), initialise and list the tools.
    #[serde(default = "default_startup_timeout", with = "duration")]
    pub startup_timeout: Duration,
    /// The first wait before starting (or connecting) again after the
    /// server went down; doubled after each failure.
    #[serde(default = "default_restart_backoff", with = "duration")]
    pub restart_backoff: Duration,
    /// The longest wait between two attempts.
    #[serde(default = "default_max_restart_backoff", with = "duration")]
    pub max_restart_backoff: Duration,
    /// The largest result one call may return (its JSON, in bytes); a
    /// larger one fails the call.
    #[serde(default = "default_max_output_bytes")]
    pub max_output_bytes: usize,
    /// The most tools read from the server; more are left out with a warning.
    #[serde(default = "default_max_tools")]
    pub max_tools: usize,
    /// How an `https://` server is verified and the client certificate it
    /// is shown: the runner's `[client_tls]`, set when the servers start
    /// (not a key of `[mcp_servers.NAME]`).
    #[serde(skip)]
    pub client_tls: parley_grpc::tls::ClientTlsConfig,
}

fn default_startup_timeout() -> Duration {
    Duration::from_secs(20)
}

fn default_restart_backoff() -> Duration {
    Duration::from_millis(500)
}

fn default_max_restart_backoff() -> Duration {
    Duration::from_secs(30)
}

fn default_max_output_bytes() -> usize {
    1024 * 1024
}

fn default_max_tools() -> usize {
    128
}

/// How the runner reaches a server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TransportKind {
    /// A child process's stdin and stdout.
    Stdio,
    /// Streamable HTTP.
    Http,
}

impl TransportKind {
    /// `stdio` or `http`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Stdio => "stdio",
            Self::Http => "http",
        }
    }
}

impl McpServerConfig {
    /// A stdio server running `command`.
    pub fn stdio(command: Vec<String>) -> Self {
        Self {
            command: Some(command),
            env: BTreeMap::new(),
            cwd: None,
            url: None,
            headers: BTreeMap::new(),
            headers_files: BTreeMap::new(),
            header_secrets: BTreeMap::new(),
            startup_timeout: default_startup_timeout(),
            restart_backoff: default_restart_backoff(),
            max_restart_backoff: default_max_restart_backoff(),
            max_output_bytes: default_max_output_bytes(),
            max_tools: default_max_tools(),
            client_tls: parley_grpc::tls::ClientTlsConfig::default(),
        }
    }

    /// A Streamable HTTP server at `url`.
    pub fn http(url: impl Into<String>) -> Self {
        Self {
            command: None,
            url: Some(url.into()),
            ..Self::stdio(Vec::new())
        }
    }

    /// stdio or HTTP.
    pub fn transport(&self) -> TransportKind {
        if self.url.is_some() {
            TransportKind::Http
        } else {
            TransportKind::Stdio
        }
    }

    /// Checks the entry `mcp_servers.<name>`.
    pub fn validate(&self, name: &str) -> Result<(), ConfigError> {
        let key = |field: &str| format!("mcp_servers.{name}.{field}");
        check_server_name(name)
            .map_err(|problem| invalid(format!("mcp_servers.{name}"), problem))?;
        match (&self.command, &self.url) {
            (Some(_), Some(_)) => {
                return Err(invalid(
                    format!("mcp_servers.{name}"),
                    "set either `command` (stdio) or `url` (Streamable HTTP), not both",
                ));
            }
            (None, None) => {
                return Err(invalid(
                    format!("mcp_servers.{name}"),
                    "needs `command` (stdio) or `url` (Streamable HTTP)",
                ));
            }
            (Some(command), None) => {
                if command.first().is_none_or(String::is_empty) {
                    return Err(invalid(key("command"), "needs the program to run"));
                }
                if !self.headers.is_empty() || !self.headers_files.is_empty() {
                    return Err(invalid(key("headers"), "only an HTTP server takes headers"));
                }
            }
            (None, Some(url)) => {
                check_url(url).map_err(|problem| invalid(key("url"), problem))?;
                if !self.env.is_empty() || self.cwd.is_some() {
                    return Err(invalid(
                        format!("mcp_servers.{name}"),
                        "only a stdio server takes `env` and `cwd`",
                    ));
                }
                for header in self.headers.keys().chain(self.headers_files.keys()) {
                    reqwest::header::HeaderName::from_bytes(header.as_bytes()).map_err(|_| {
                        invalid(key("headers"), format!("`{header}` is not a header name"))
                    })?;
                }
                if let Some(header) = self
                    .headers_files
                    .keys()
                    .find(|header| self.headers.contains_key(*header))
                {
                    return Err(invalid(
                        key("headers_files"),
                        format!("`{header}` is in `headers` too: set it in one of them"),
                    ));
                }
            }
        }
        for (variable, source) in self.env.iter().chain(&self.headers) {
            if variable.is_empty() || variable.contains(['=', '\0']) {
                return Err(invalid(
                    key("env"),
                    format!("`{variable}` is not a variable name"),
                ));
            }
            if source.is_empty() || source.contains(['=', '\0']) {
                return Err(invalid(
                    format!("mcp_servers.{name}"),
                    format!(
                        "`{variable}` must name an environment variable of the runner, not `{source}`"
                    ),
                ));
            }
        }
        positive_duration(&key("startup_timeout"), self.startup_timeout)?;
        positive_duration(&key("restart_backoff"), self.restart_backoff)?;
        positive_duration(&key("max_restart_backoff"), self.max_restart_backoff)?;
        positive(&key("max_output_bytes"), self.max_output_bytes as u64)?;
        positive(&key("max_tools"), self.max_tools as u64)?;
        Ok(())
    }
}

impl McpServerConfig {
    /// Reads the `headers_files` of the entry `mcp_servers.<name>` (relative
    /// to `base_dir`) into `header_secrets`; returns how to read them again.
    pub fn load_header_files(
        &mut self,
        name: &str,
        base_dir: &std::path::Path,
    ) -> Result<Vec<Reloadable>, ConfigError> {
        let mut reloadable = Vec::new();
        for (header, file) in &self.headers_files {
            let key = format!("mcp_servers.{name}.headers_files.{header}");
            let secret = Reloadable {
                key: key.clone(),
                env: None,
                file: Some(base_dir.join(file)),
                slot: SharedSecret::default(),
            };
            secret
                .load(|_| None)
                .map_err(|problem| invalid(key, problem))?;
            self.header_secrets
                .insert(header.clone(), secret.slot.clone());
            reloadable.push(secret);
        }
        Ok(reloadable)
    }
}

/// Letters, digits, `-` and `_` (never two `_` in a row, which separate the
/// server from the tool in the model's name), at most 32 characters.
pub fn check_server_name(name: &str) -> Result<(), String> {
    if name.is_empty() || name.len() > MAX_SERVER_NAME_LEN {
        return Err(format!(
            "a server name has 1 to {MAX_SERVER_NAME_LEN} characters"
        ));
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        || name.contains("__")
    {
        return Err(format!(
            "`{name}`: a server name has letters, digits, `-` and single `_` only"
        ));
    }
    Ok(())
}

fn check_url(url: &str) -> Result<(), String> {
    crate::tools::remote::check_address(url)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_server_is_either_stdio_or_http() {
        assert!(
            McpServerConfig::stdio(vec!["prog".into()])
                .validate("a")
                .is_ok()
        );
        assert!(
            McpServerConfig::http("http://h:1/mcp")
                .validate("a")
                .is_ok()
        );
        let mut both = McpServerConfig::http("http://h:1/mcp");
        both.command = Some(vec!["prog".into()]);
        assert!(both.validate("a").is_err());
        let mut neither = McpServerConfig::http("x");
        neither.url = None;
        assert!(
            neither
                .validate("a")
                .expect_err("invalid")
                .to_string()
                .contains("needs `command`")
        );
        assert!(McpServerConfig::stdio(vec![]).validate("a").is_err());
        assert!(McpServerConfig::http("ftp://h/mcp").validate("a").is_err());
    }

    #[test]
    fn names_and_variables_are_checked() {
        let stdio = McpServerConfig::stdio(vec!["prog".into()]);
        for bad in ["", "a__b", "a/b", "a b", &"x".repeat(33)] {
            assert!(stdio.validate(bad).is_err(), "{bad}");
        }
        let mut env = stdio.clone();
        env.env.insert("TOKEN".into(), "sk-literal=secret".into());
        assert!(env.validate("a").is_err());
        let mut headers = McpServerConfig::http("http://h:1/mcp");
        headers.headers.insert("bad header".into(), "VAR".into());
        assert!(headers.validate("a").is_err());
    }
}
