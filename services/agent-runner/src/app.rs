//! Assembling and serving the runner: the configuration validated, the
//! providers built, the loop and the `AgentRunner` service made, served
//! with health and reflection by `parley_grpc::serve`, every call of the
//! service checked against `[auth]`'s token ([`crate::auth`]). The secret
//! files are read at start and again by [`RunnerApp::reload_secrets`]
//! (SIGHUP).
//!
//! The binary, the gateway's whole-stack test and the runner bench all
//! start the runner here, so they run the same thing.

use std::{collections::HashMap, future::Future, sync::Arc};

use parley_grpc::{
    bearer::TokenCheck,
    binary::BinaryError,
    config::ServiceConfig,
    secret::{Reloadable, SharedSecret},
};
use parley_proto::runner::v1::agent_runner_server::AgentRunnerServer;
use tokio::net::TcpListener;

use crate::{
    agent_loop::Runner,
    allow::Allowed,
    config::{ConfigError, RunnerConfig},
    provider::Providers,
    service::RunnerService,
    tools::{ToolRuntime, mcp::McpServers},
};

pub mod providers;

/// The fully qualified name of the service, for health checks.
pub const SERVICE_NAME: &str = "parley.runner.v1.AgentRunner";

/// Why the runner could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The configuration is invalid, or a provider cannot be built from it.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The `[client_tls]` certificates cannot be used.
    #[error(transparent)]
    ClientTls(#[from] parley_grpc::tls::TlsError),
    /// `[auth]`: the token cannot be read, or the runner would serve
    /// everyone beyond loopback.
    #[error(transparent)]
    Auth(#[from] crate::auth::AuthConfigError),
}

/// A runner ready to serve.
#[derive(Debug, Clone)]
pub struct RunnerApp {
    runner: Arc<Runner>,
    service: RunnerService,
    max_request_bytes: usize,
    /// The bearer token every call must carry (none: no check).
    token: SharedSecret,
    /// The secrets read from files, read again on SIGHUP.
    reloadable: Arc<Vec<Reloadable>>,
    /// `server.listen`, when the runner serves it without authentication
    /// (`auth.allow_unauthenticated`): warned about while serving.
    unauthenticated: Option<String>,
}

impl RunnerApp {
    /// Validates `config`, reads its secrets and builds its providers;
    /// `lookup` reads the environment variables holding API keys and the
    /// token. Beyond loopback, refuses to serve without authentication
    /// unless `auth.allow_unauthenticated` says so.
    pub fn build(
        config: &RunnerConfig,
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, StartError> {
        config.validate()?;
        let (token, token_reload) = config.auth.load(&config.base_dir, &lookup)?;
        let unauthenticated = config
            .auth
            .check_exposure(&config.server, token.is_set())?
            .then(|| config.server.listen.clone());
        let mut reloadable: Vec<Reloadable> = token_reload.into_iter().collect();
        let providers = providers::build_providers_reloadable(config, &lookup, &mut reloadable)?;
        let mut config = config.clone();
        for (name, server) in &mut config.mcp_servers {
            reloadable.extend(server.load_header_files(name, &config.base_dir)?);
        }
        let config = &config;
        let allowed = config.allowed(&providers)?;
        let client_tls = parley_grpc::tls::ClientTls::from_config(&config.client_tls)?;
        tracing::info!(
            default_provider = %config.default_provider,
            providers = ?providers.names().collect::<Vec<_>>(),
            "configuration loaded"
        );
        // The variables the MCP servers read, read now.
        let variables: HashMap<String, String> = config
            .mcp_servers
            .values()
            .flat_map(|server| server.env.values().chain(server.headers.values()))
            .map(String::as_str)
            .chain(crate::tools::mcp::server::PASSED_VARIABLES)
            .filter_map(|name| Some((name.to_owned(), lookup(name)?)))
            .collect();
        let mut app = Self::assemble(
            config,
            providers,
            allowed,
            Arc::new(move |name: &str| variables.get(name).cloned()),
            client_tls,
        );
        app.token = token;
        app.reloadable = Arc::new(reloadable);
        app.unauthenticated = unauthenticated;
        Ok(app)
    }

    /// Reads the secret files again (SIGHUP): provider keys, MCP header
    /// files and the token, each used from then on by new model calls, new
    /// MCP connections and calls checked. A file that cannot be read is
    /// logged (its key and the problem, never a value) and the value held
    /// stays. Returns how many secrets were read.
    pub fn reload_secrets(&self) -> usize {
        let read = self
            .reloadable
            .iter()
            .filter(|secret| secret.reload(|name| std::env::var(name).ok()))
            .count();
        tracing::info!(
            read,
            failed = self.reloadable.len() - read,
            "secrets read again"
        );
        read
    }

    /// The runner of `config` (limits, retry policy, admission, MCP
    /// servers reading the process's environment) with `providers` instead
    /// of the configured ones, for benches and tests that bring their own
    /// provider. `config` is not validated, and its `[client_tls]` is
    /// used by MCP servers only (`https://` ToolService endpoints are
    /// verified against the system's roots). Its `[tools]` and `[models]`
    /// apply to `providers`; when they do not (a registry that cannot be
    /// read, a model pattern naming another provider) the error is logged
    /// and requests may name no ToolService endpoint and only the default
    /// models.
    pub fn with_providers(config: &RunnerConfig, providers: Providers) -> Self {
        let allowed = config.allowed(&providers).unwrap_or_else(|error| {
            tracing::error!(%error, "the allow lists do not apply; using the defaults");
            Allowed::defaults_of(&providers)
        });
        Self::assemble(
            config,
            providers,
            allowed,
            Arc::new(|name: &str| std::env::var(name).ok()),
            parley_grpc::tls::ClientTls::default(),
        )
    }

    fn assemble(
        config: &RunnerConfig,
        providers: Providers,
        allowed: Allowed,
        lookup: crate::tools::mcp::Lookup,
        client_tls: parley_grpc::tls::ClientTls,
    ) -> Self {
        let mut tools = ToolRuntime::with_builtins().with_client_tls(client_tls);
        if !config.mcp_servers.is_empty() {
            let reserved = tools.local_names().map(str::to_owned).collect();
            tools = tools.with_mcp(McpServers::start(
                &config.mcp_servers,
                &config.base_dir,
                lookup,
                reserved,
                &config.client_tls,
            ));
        }
        let runner = Arc::new(Runner {
            providers: Arc::new(providers),
            tools,
            retry: config.retry_policy(),
            prices: Arc::new(allowed.prices.clone()),
        });
        tracing::info!(
            tool_endpoints = ?allowed.endpoints.describe(),
            models = ?allowed.models.describe(),
            "requests may name these ToolService endpoints and models (tools.allowed_endpoints, tools.registry, models.allowed)"
        );
        let service = RunnerService::new(
            runner.clone(),
            config.limits(),
            config.max_concurrent_runs,
            config.event_buffer,
        )
        .with_allowed(allowed)
        .with_max_streamed_bytes(config.max_request_bytes)
        .with_request_read_timeout(config.request_read_timeout);
        Self {
            runner,
            service,
            max_request_bytes: config.max_request_bytes,
            token: SharedSecret::default(),
            reloadable: Arc::default(),
            unauthenticated: None,
        }
    }

    /// The tool loop, shared by every turn.
    pub fn runner(&self) -> &Arc<Runner> {
        &self.runner
    }

    /// The AgentRunner service as routes, decoding requests up to
    /// `max_request_bytes`, each call refused without the `[auth]` token
    /// when one is configured.
    pub fn routes(&self) -> tonic::service::Routes {
        tonic::service::Routes::new(tonic::service::interceptor::InterceptedService::new(
            AgentRunnerServer::new(self.service.clone())
                .max_decoding_message_size(self.max_request_bytes),
            TokenCheck::new(self.token.clone()),
        ))
    }

    /// Serves with the `[server]` settings (TLS included) until `shutdown`
    /// resolves, then lets running turns finish for at most
    /// `server.drain_timeout`.
    pub async fn serve(
        self,
        listener: TcpListener,
        server: &parley_grpc::config::ServerConfig,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<(), parley_grpc::serve::ServeError> {
        let options = parley_grpc::ServeOptions::new("agent-runner", vec![SERVICE_NAME])
            .configured(server)?;
        let warning = self.unauthenticated.clone().map(|listen| {
            tokio::spawn(crate::auth::warn_unauthenticated(
                listen,
                crate::auth::UNAUTHENTICATED_WARNING_PERIOD,
            ))
        });
        let served = parley_grpc::serve(listener, self.routes(), options, shutdown).await;
        if let Some(warning) = warning {
            warning.abort();
        }
        served
    }
}

impl parley_grpc::binary::Binary for RunnerApp {
    const NAME: &'static str = "agent-runner";
    const ABOUT: &'static str =
        "Runs the LLM tool loop as a gRPC service (`parley.runner.v1.AgentRunner`).";
    const CONFIG_ENV: &'static str = "PARLEY_RUNNER_CONFIG";
    const CONFIG_EXAMPLE: &'static str = "deploy/config/runner.toml";
    const CONFIG_HELP: &'static str = "Configuration file (TOML; see deploy/config/runner.toml). \
        Without providers in it, the scripted provider plays the demo script.";
    type Config = RunnerConfig;
    type Flags = crate::config::Flags;

    fn server(config: &RunnerConfig) -> &parley_grpc::config::ServerConfig {
        &config.server
    }

    /// [`RunnerApp::build`] with the process's environment.
    async fn build(config: &RunnerConfig) -> Result<Self, BinaryError> {
        Ok(RunnerApp::build(config, |name| std::env::var(name).ok())?)
    }

    async fn reload_secrets(&self, _config: &RunnerConfig) {
        RunnerApp::reload_secrets(self);
    }

    async fn serve(
        self,
        listener: TcpListener,
        config: &RunnerConfig,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<(), BinaryError> {
        Ok(RunnerApp::serve(self, listener, &config.server, shutdown).await?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_invalid_configuration_stops_the_start() {
        let mut config = RunnerConfig::scripted_demo();
        config.default_provider = "missing".into();
        let error = RunnerApp::build(&config, |_| None).expect_err("invalid");
        assert!(
            error.to_string().contains("`default_provider`: `missing`"),
            "{error}"
        );
    }

    #[test]
    fn the_scripted_configuration_builds() {
        let app = RunnerApp::build(&RunnerConfig::scripted_demo(), |_| None).expect("build");
        assert_eq!(app.runner().providers.default_name(), "scripted");
    }
}
