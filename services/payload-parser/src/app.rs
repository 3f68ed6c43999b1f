//! Assembling and serving the parser: the configuration validated, the
//! named profiles loaded (a bad file stops the start before any port is
//! bound), the `PayloadParser` service made with the configured limits and
//! stream bounds, and served with health and reflection by
//! `parley_grpc::serve`.

use std::{future::Future, path::PathBuf};

use parley_grpc::{
    binary::BinaryError,
    config::{ConfigError, ServerConfig, ServiceConfig},
};
use parley_parse::{ProfileError, Profiles};
use parley_proto::parser::v1::payload_parser_server::PayloadParserServer;
use tokio::net::TcpListener;
use tonic::server::NamedService;

use crate::{config::ParserConfig, service::ParserService};

/// The fully qualified name of the service, for health checks.
pub const SERVICE_NAME: &str = <PayloadParserServer<ParserService> as NamedService>::NAME;

/// Why the parser could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The configuration is invalid.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The named profiles file cannot be read, or a profile in it does not
    /// compile.
    #[error("loading profiles from {}", path.display())]
    Profiles {
        /// The profiles file (`profiles`).
        path: PathBuf,
        /// What is wrong with it.
        #[source]
        source: ProfileError,
    },
}

/// A parser ready to serve.
#[derive(Debug, Clone)]
pub struct ParserApp {
    service: ParserService,
}

impl ParserApp {
    /// Validates `config` and loads its named profiles (none without a
    /// `profiles` file).
    pub fn build(config: &ParserConfig) -> Result<Self, StartError> {
        config.validate()?;
        let limits = config.limits();
        let profiles = match &config.profiles {
            Some(path) => Profiles::load(path).map_err(|source| StartError::Profiles {
                path: path.clone(),
                source,
            })?,
            None => Profiles::empty(),
        };
        tracing::info!(
            profiles = ?profiles.names().collect::<Vec<_>>(),
            max_bytes = limits.max_bytes,
            max_depth = limits.max_depth,
            "configuration loaded"
        );
        let service = ParserService::with_options(profiles, limits, config.service_options());
        Ok(Self { service })
    }

    /// The PayloadParser service.
    pub fn service(&self) -> &ParserService {
        &self.service
    }

    /// The PayloadParser service as routes, with message sizes set from
    /// the limits.
    pub fn routes(&self) -> tonic::service::Routes {
        tonic::service::Routes::new(self.service.clone().into_server())
    }

    /// Serves with the `[server]` settings (TLS included) until `shutdown`
    /// resolves, then drains in-flight calls for at most
    /// `server.drain_timeout`.
    pub async fn serve(
        self,
        listener: TcpListener,
        server: &ServerConfig,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<(), parley_grpc::serve::ServeError> {
        let options = parley_grpc::ServeOptions::new("payload-parser", vec![SERVICE_NAME])
            .configured(server)?;
        parley_grpc::serve(listener, self.routes(), options, shutdown).await
    }
}

impl parley_grpc::binary::Binary for ParserApp {
    const NAME: &'static str = "payload-parser";
    const ABOUT: &'static str = "Parley's payload parser: turns model text into typed messages.";
    const CONFIG_ENV: &'static str = "PARLEY_PARSER_CONFIG";
    const CONFIG_EXAMPLE: &'static str = "deploy/config/parser.toml";
    const CONFIG_HELP: &'static str = "Configuration file (TOML; see deploy/config/parser.toml).";
    type Config = ParserConfig;
    type Flags = crate::config::Flags;

    fn server(config: &ParserConfig) -> &ServerConfig {
        &config.server
    }

    async fn build(config: &ParserConfig) -> Result<Self, BinaryError> {
        Ok(ParserApp::build(config)?)
    }

    /// The parser holds no secrets.
    async fn reload_secrets(&self, _config: &ParserConfig) {}

    async fn serve(
        self,
        listener: TcpListener,
        config: &ParserConfig,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<(), BinaryError> {
        Ok(ParserApp::serve(self, listener, &config.server, shutdown).await?)
    }
}
