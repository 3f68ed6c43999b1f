//! Assembling and serving the runner: the configuration validated, the
//! providers built, the loop and the `AgentRunner` service made, served
//! with health and reflection by `parley_grpc::serve`.
//!
//! The binary, the gateway's whole-stack test and the runner bench all
//! start the runner here, so they run the same thing.

use std::{collections::HashMap, future::Future, sync::Arc};

use parley_proto::runner::v1::agent_runner_server::AgentRunnerServer;
use tokio::net::TcpListener;

use crate::{
    agent_loop::Runner,
    config::{ConfigError, RunnerConfig},
    mcp::McpServers,
    provider::Providers,
    service::RunnerService,
    tools::ToolRuntime,
};

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
}

/// A runner ready to serve.
#[derive(Debug, Clone)]
pub struct RunnerApp {
    runner: Arc<Runner>,
    service: RunnerService,
    max_request_bytes: usize,
}

impl RunnerApp {
    /// Validates `config` and builds its providers; `lookup` reads the
    /// environment variables holding API keys.
    pub fn build(
        config: &RunnerConfig,
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, StartError> {
        config.validate()?;
        let providers = config.build_providers(&lookup)?;
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
            .chain(crate::mcp::server::PASSED_VARIABLES)
            .filter_map(|name| Some((name.to_owned(), lookup(name)?)))
            .collect();
        Ok(Self::assemble(
            config,
            providers,
            Arc::new(move |name: &str| variables.get(name).cloned()),
            client_tls,
        ))
    }

    /// The runner of `config` (limits, retry policy, admission, MCP
    /// servers reading the process's environment) with `providers` instead
    /// of the configured ones, for benches and tests that bring their own
    /// provider. `config` is not validated, and its `[client_tls]` is
    /// used by MCP servers only (`https://` ToolService endpoints are
    /// verified against the system's roots).
    pub fn with_providers(config: &RunnerConfig, providers: Providers) -> Self {
        Self::assemble(
            config,
            providers,
            Arc::new(|name: &str| std::env::var(name).ok()),
            parley_grpc::tls::ClientTls::default(),
        )
    }

    fn assemble(
        config: &RunnerConfig,
        providers: Providers,
        lookup: crate::mcp::Lookup,
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
        });
        let service = RunnerService::new(
            runner.clone(),
            config.limits(),
            config.max_concurrent_runs,
            config.event_buffer,
        );
        Self {
            runner,
            service,
            max_request_bytes: config.max_request_bytes,
        }
    }

    /// The tool loop, shared by every turn.
    pub fn runner(&self) -> &Arc<Runner> {
        &self.runner
    }

    /// The AgentRunner service as routes, decoding requests up to
    /// `max_request_bytes`.
    pub fn routes(&self) -> tonic::service::Routes {
        tonic::service::Routes::new(
            AgentRunnerServer::new(self.service.clone())
                .max_decoding_message_size(self.max_request_bytes),
        )
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
        parley_grpc::serve(listener, self.routes(), options, shutdown).await
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
