//! What a request may make the runner reach: the tool servers it may dial
//! and the models it may call. The runner is not an open proxy: a
//! `RunRequest` naming a `ToolEndpoint.grpc` address or a model its
//! configuration does not allow is refused before any model call and
//! before any connection, with `TOOL_ENDPOINT_NOT_ALLOWED`
//! (`FAILED_PRECONDITION`) or `MODEL_NOT_ALLOWED` (`INVALID_ARGUMENT`).
//!
//! ```toml
//! [tools]
//! # host:port patterns of the ToolService endpoints requests may name
//! allowed_endpoints = ["127.0.0.1:50061", "*.tools.svc.cluster.local:443", "tools.example.com:*"]
//! # the gateway's page registry (relative to this file): the `grpc:`
//! # endpoints of its tools are allowed as well
//! registry = "registry.yaml"
//!
//! [models]
//! # PROVIDER/MODEL, a trailing `*` for a prefix; unset: every provider's
//! # default_model
//! allowed = ["openai/gpt-4.1*", "anthropic/claude-sonnet-4-5"]
//! ```
//!
//! **Endpoint patterns** are `HOST:PORT`. `HOST` is a DNS name or an IP
//! address (IPv6 in brackets, `[::1]:50061`), compared without regard to
//! case; its first label may be `*` alone, which stands for exactly one
//! label that is not empty (`*.tools.svc.cluster.local` allows
//! `search.tools.svc.cluster.local`, neither `tools.svc.cluster.local` nor
//! `a.b.tools.svc.cluster.local`, and never an IP address). `PORT` is a
//! number or `*` for any port. An address's port is its explicit one, else
//! 80 for `http://` and 443 for `https://`. No other wildcard, no scheme
//! and no path is accepted, nor a bare `*` host. A name is compared as
//! written: `localhost:50061` does not allow `127.0.0.1:50061`.
//!
//! With neither key set no ToolService endpoint is allowed. Built-in tools
//! and the MCP servers of the runner's own configuration are not affected.
//!
//! **Model patterns** are `PROVIDER/MODEL` as the runner resolves a
//! request (an empty provider is `default_provider`, an empty model that
//! provider's `default_model`), compared exactly, or by prefix when the
//! pattern ends in `*` (`openai/gpt-4.1*`, `ollama/*`). `PROVIDER` must be
//! a configured provider.

use std::{
    net::IpAddr,
    path::{Path, PathBuf},
};

use parley_grpc::config::{ConfigError, invalid};
use parley_proto::runner::v1::{self as pb, tool_endpoint::Kind};
use serde::{Deserialize, Serialize};
use tonic::codegen::http::Uri;

use crate::{
    error::RunError,
    provider::{ModelChoice, Providers},
};

/// `[tools]`: the ToolService endpoints requests may name.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ToolsConfig {
    /// `HOST:PORT` patterns (see the module documentation).
    pub allowed_endpoints: Vec<String>,
    /// The gateway's page registry (YAML, relative to the configuration
    /// file): the `grpc:` endpoints of its tools are allowed too.
    pub registry: Option<PathBuf>,
}

/// `[models]`: the models requests may name, and the routes
/// (`[models.NAME]`, see [`crate::routes`]) they may name instead.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ModelsConfig {
    /// `PROVIDER/MODEL` patterns, a trailing `*` for a prefix; unset: the
    /// configured providers' default models.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allowed: Option<Vec<String>>,
    /// The routes, by name (every other key of `[models]`).
    #[serde(flatten)]
    pub routes: std::collections::BTreeMap<String, crate::routes::RouteConfig>,
}

/// One `HOST:PORT` pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndpointPattern {
    host: HostPattern,
    /// `None`: any port.
    port: Option<u16>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum HostPattern {
    /// This host, lower-cased.
    Exact(String),
    /// One label, then `.` and this suffix (lower-cased, without the dot).
    AnyLabelOf(String),
}

impl EndpointPattern {
    /// Parses `HOST:PORT` (see the module documentation).
    pub fn parse(pattern: &str) -> Result<Self, String> {
        let pattern = pattern.trim();
        if pattern.contains("://") || pattern.contains('/') {
            return Err(format!(
                "`{pattern}` must be HOST:PORT, without a scheme or a path"
            ));
        }
        let (host, port) = if let Some(rest) = pattern.strip_prefix('[') {
            let (inside, port) = rest
                .split_once("]:")
                .ok_or_else(|| format!("`{pattern}` must be [IPV6]:PORT"))?;
            let ip: std::net::Ipv6Addr = inside
                .parse()
                .map_err(|_| format!("`{pattern}`: `{inside}` is not an IPv6 address"))?;
            (format!("[{ip}]"), port)
        } else {
            let (host, port) = pattern
                .rsplit_once(':')
                .ok_or_else(|| format!("`{pattern}` needs a port (HOST:PORT, `*` for any)"))?;
            if host.contains(':') {
                return Err(format!("`{pattern}`: write an IPv6 address in brackets"));
            }
            (host.to_ascii_lowercase(), port)
        };
        let port = match port {
            "*" => None,
            number => match number.parse::<u16>() {
                Ok(port) if port > 0 => Some(port),
                _ => return Err(format!("`{pattern}`: the port must be 1-65535 or `*`")),
            },
        };
        let host = if host.starts_with('[') {
            HostPattern::Exact(host)
        } else if let Some(suffix) = host.strip_prefix("*.") {
            check_name(pattern, suffix)?;
            HostPattern::AnyLabelOf(suffix.to_owned())
        } else if host == "*" {
            return Err(format!(
                "`{pattern}`: `*` alone would allow any host; list the hosts (`*.DOMAIN` for one label)"
            ));
        } else {
            check_name(pattern, &host)?;
            HostPattern::Exact(host)
        };
        Ok(Self { host, port })
    }

    /// Whether this pattern allows `host` (as [`host_port`] gives it) at `port`.
    fn allows(&self, host: &str, port: u16) -> bool {
        if self.port.is_some_and(|allowed| allowed != port) {
            return false;
        }
        match &self.host {
            HostPattern::Exact(exact) => *exact == host,
            HostPattern::AnyLabelOf(suffix) => {
                let is_ip = host.starts_with('[') || host.parse::<IpAddr>().is_ok();
                !is_ip
                    && host
                        .strip_suffix(suffix.as_str())
                        .and_then(|rest| rest.strip_suffix('.'))
                        .is_some_and(|label| !label.is_empty() && !label.contains('.'))
            }
        }
    }
}

impl std::fmt::Display for EndpointPattern {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.host {
            HostPattern::Exact(host) => write!(f, "{host}")?,
            HostPattern::AnyLabelOf(suffix) => write!(f, "*.{suffix}")?,
        }
        match self.port {
            Some(port) => write!(f, ":{port}"),
            None => write!(f, ":*"),
        }
    }
}

/// A DNS name or IPv4 address of a pattern: dot-separated labels of
/// letters, digits, `-` and `_`, none empty, no wildcard.
fn check_name(pattern: &str, name: &str) -> Result<(), String> {
    let label_ok = |label: &str| {
        !label.is_empty()
            && label
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    };
    if name.split('.').all(label_ok) {
        Ok(())
    } else if name.contains('*') {
        Err(format!(
            "`{pattern}`: `*` may only be the whole first label of the host"
        ))
    } else {
        Err(format!("`{pattern}`: `{name}` is not a host name"))
    }
}

/// The host (lower-cased, IPv6 in brackets) and port an `http://` or
/// `https://` address dials: its explicit port, else the scheme's.
pub fn host_port(address: &str) -> Option<(String, u16)> {
    let uri: Uri = address.parse().ok()?;
    let host = uri.host().filter(|host| !host.is_empty())?;
    let default_port = match uri.scheme_str() {
        Some("http") => 80,
        Some("https") => 443,
        _ => return None,
    };
    let port = uri.port_u16().unwrap_or(default_port);
    let host = host.to_ascii_lowercase();
    // One spelling of an IPv6 address, as the patterns have it.
    let host = match host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .and_then(|h| h.parse::<std::net::Ipv6Addr>().ok())
    {
        Some(ip) => format!("[{ip}]"),
        None => host,
    };
    Some((host, port))
}

/// The ToolService endpoints requests may name.
#[derive(Debug, Clone, Default)]
pub struct AllowedEndpoints {
    patterns: Vec<EndpointPattern>,
}

impl AllowedEndpoints {
    /// None: no request may name a ToolService endpoint.
    pub fn none() -> Self {
        Self::default()
    }

    /// The endpoints of `patterns` (see [`EndpointPattern::parse`]).
    pub fn parse<'a>(patterns: impl IntoIterator<Item = &'a str>) -> Result<Self, String> {
        let patterns = patterns
            .into_iter()
            .map(EndpointPattern::parse)
            .collect::<Result<_, _>>()?;
        Ok(Self { patterns })
    }

    /// Whether a request may name `address`; one the runner could not
    /// dial as `http(s)://HOST[:PORT]` is not allowed.
    pub fn allows(&self, address: &str) -> bool {
        host_port(address).is_some_and(|(host, port)| {
            self.patterns
                .iter()
                .any(|pattern| pattern.allows(&host, port))
        })
    }

    /// The patterns, for the start-up log.
    pub fn describe(&self) -> Vec<String> {
        self.patterns.iter().map(ToString::to_string).collect()
    }
}

/// One `PROVIDER/MODEL` pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelPattern {
    text: String,
    prefix: bool,
}

impl ModelPattern {
    /// Parses `PROVIDER/MODEL` or `PROVIDER/PREFIX*`; `providers` are the
    /// configured names.
    pub fn parse(pattern: &str, providers: &[&str]) -> Result<Self, String> {
        let (text, prefix) = match pattern.strip_suffix('*') {
            Some(text) => (text, true),
            None => (pattern, false),
        };
        let Some((provider, model)) = text.split_once('/') else {
            return Err(format!("`{pattern}` must be PROVIDER/MODEL"));
        };
        if text.contains('*') {
            return Err(format!("`{pattern}`: `*` may only end a pattern"));
        }
        if !prefix && model.is_empty() {
            return Err(format!(
                "`{pattern}` names no model (`{provider}/*` for all)"
            ));
        }
        if !providers.contains(&provider) {
            return Err(format!("`{pattern}`: `{provider}` is not in [providers]"));
        }
        Ok(Self {
            text: text.to_owned(),
            prefix,
        })
    }

    fn allows(&self, model: &str) -> bool {
        if self.prefix {
            model.starts_with(&self.text)
        } else {
            model == self.text
        }
    }
}

/// The models requests may name, as `PROVIDER/MODEL`.
#[derive(Debug, Clone, Default)]
pub struct AllowedModels {
    patterns: Vec<ModelPattern>,
}

impl AllowedModels {
    /// Every provider's default model, exactly.
    pub fn defaults_of(providers: &Providers) -> Self {
        let patterns = providers
            .default_models()
            .map(|(provider, model)| ModelPattern {
                text: format!("{provider}/{model}"),
                prefix: false,
            })
            .collect();
        Self { patterns }
    }

    /// The models of `patterns` (see [`ModelPattern::parse`]).
    pub fn parse<'a>(
        patterns: impl IntoIterator<Item = &'a str>,
        providers: &[&str],
    ) -> Result<Self, String> {
        let patterns = patterns
            .into_iter()
            .map(|pattern| ModelPattern::parse(pattern, providers))
            .collect::<Result<_, _>>()?;
        Ok(Self { patterns })
    }

    /// Whether `provider`'s `model` may be called.
    pub fn allows(&self, provider: &str, model: &str) -> bool {
        let name = format!("{provider}/{model}");
        self.patterns.iter().any(|pattern| pattern.allows(&name))
    }

    /// The patterns, for the start-up log.
    pub fn describe(&self) -> Vec<String> {
        self.patterns
            .iter()
            .map(|p| format!("{}{}", p.text, if p.prefix { "*" } else { "" }))
            .collect()
    }
}

/// Both allow lists, and the model routes.
#[derive(Debug, Clone, Default)]
pub struct Allowed {
    /// The ToolService endpoints.
    pub endpoints: AllowedEndpoints,
    /// The models.
    pub models: AllowedModels,
    /// The routes requests may name (their models are allowed through
    /// them).
    pub routes: crate::routes::Routes,
    /// The routes' prices, in `[pricing] currency`.
    pub prices: crate::pricing::PriceTable,
}

impl Allowed {
    /// The secure default for `providers`: no ToolService endpoint, every
    /// provider's default model.
    pub fn defaults_of(providers: &Providers) -> Self {
        Self {
            endpoints: AllowedEndpoints::none(),
            models: AllowedModels::defaults_of(providers),
            routes: crate::routes::Routes::default(),
            prices: crate::pricing::PriceTable::default(),
        }
    }

    /// The lists of `tools` and `models` (`models.allowed` unset: the
    /// default models of `providers`); the registry is read from
    /// `base_dir` when relative.
    pub fn from_config(
        tools: &ToolsConfig,
        models: &ModelsConfig,
        base_dir: &Path,
        providers: &Providers,
    ) -> Result<Self, ConfigError> {
        let mut endpoints =
            AllowedEndpoints::parse(tools.allowed_endpoints.iter().map(String::as_str))
                .map_err(|problem| invalid("tools.allowed_endpoints", problem))?;
        if let Some(registry) = &tools.registry {
            let path = if registry.is_relative() {
                base_dir.join(registry)
            } else {
                registry.clone()
            };
            endpoints.patterns.extend(
                registry_endpoints(&path).map_err(|problem| invalid("tools.registry", problem))?,
            );
        }
        let routes = crate::routes::Routes::from_config(&models.routes, providers)?;
        let mut models = match &models.allowed {
            None => AllowedModels::defaults_of(providers),
            Some(patterns) => {
                let names: Vec<&str> = providers.names().collect();
                AllowedModels::parse(patterns.iter().map(String::as_str), &names)
                    .map_err(|problem| invalid("models.allowed", problem))?
            }
        };
        // What a route calls is the operator's choice: allowed through it.
        models
            .patterns
            .extend(routes.models().map(|choice| ModelPattern {
                text: format!("{}/{}", choice.provider, choice.model),
                prefix: false,
            }));
        Ok(Self {
            endpoints,
            models,
            routes,
            prices: crate::pricing::PriceTable::default(),
        })
    }

    /// Refuses the first tool of `tools` whose `grpc` endpoint is not
    /// allowed (the log has its host and port; the refusal names the tool
    /// only).
    pub fn check_tools(&self, tools: &[pb::ToolDefinition]) -> Result<(), RunError> {
        for tool in tools {
            let Some(Kind::Grpc(address)) = tool.endpoint.as_ref().and_then(|e| e.kind.as_ref())
            else {
                continue;
            };
            // An address that is no http(s) URL is refused as invalid by
            // the preparation of the tools, which never dials it.
            if crate::tools::remote::check_address(address).is_err() {
                continue;
            }
            if !self.endpoints.allows(address) {
                // Host and port only: an address's user-info may hold a secret.
                let (host, port) = host_port(address).unwrap_or_default();
                tracing::warn!(
                    tool = ?tool.name,
                    host = ?host,
                    port,
                    "refused: the tool endpoint is not allowed (tools.allowed_endpoints, tools.registry)"
                );
                return Err(RunError::ToolEndpointNotAllowed {
                    tool: tool.name.clone(),
                });
            }
        }
        Ok(())
    }

    /// Refuses the first of `choices` (the request's model, then its
    /// fallbacks) that resolves, on `providers`, to a model not allowed.
    /// A choice naming an unknown provider is left to the turn's
    /// preparation, which refuses it.
    pub fn check_models<'a>(
        &self,
        providers: &Providers,
        choices: impl IntoIterator<Item = &'a ModelChoice>,
    ) -> Result<(), RunError> {
        for (index, choice) in choices.into_iter().enumerate() {
            let Ok(resolved) = providers.resolve(choice.clone()) else {
                continue;
            };
            if !self.models.allows(&resolved.provider, &resolved.model) {
                return Err(RunError::ModelNotAllowed {
                    field: if index == 0 {
                        "model".to_owned()
                    } else {
                        format!("fallbacks[{}]", index - 1)
                    },
                    model: format!("{}/{}", resolved.provider, resolved.model),
                });
            }
        }
        Ok(())
    }
}

/// The gateway's registry, as far as the runner reads it.
#[derive(Debug, Deserialize)]
struct Registry {
    #[serde(default)]
    tools: std::collections::BTreeMap<String, RegistryTool>,
}

#[derive(Debug, Deserialize)]
struct RegistryTool {
    #[serde(default)]
    grpc: Option<String>,
}

/// The `grpc:` endpoints of the tools of the registry at `path`.
pub fn registry_endpoints(path: &Path) -> Result<Vec<EndpointPattern>, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|error| format!("cannot read {}: {error}", path.display()))?;
    let registry: Registry =
        serde_yaml_ng::from_str(&text).map_err(|error| format!("{}: {error}", path.display()))?;
    registry
        .tools
        .iter()
        .filter_map(|(name, tool)| Some((name, tool.grpc.as_deref()?)))
        .map(|(name, address)| {
            let (host, port) = host_port(address).ok_or_else(|| {
                format!(
                    "{}: the grpc endpoint of tool `{name}` is not an http(s) URL",
                    path.display()
                )
            })?;
            Ok(EndpointPattern {
                host: HostPattern::Exact(host),
                port: Some(port),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests;
