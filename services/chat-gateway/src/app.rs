//! Assembling and serving the gateway: the store (migrated), the upstream
//! clients, the turn engine and the authenticated service, served with
//! health and reflection by `parley_grpc::serve`.
//!
//! Shutdown: `serve` drains in-flight calls for the drain timeout; turns
//! whose clients went away keep running in their tasks, so they get what is
//! left of the drain timeout to finish on their own. Any turn still running
//! then is stopped and stored as failed (reason `SHUTDOWN`) — never lost.

use std::{
    future::Future,
    sync::{Arc, Mutex, PoisonError},
    time::Duration,
};

use tokio::{net::TcpListener, time::Instant};

use crate::{
    auth::{AuthConfigError, Authenticator},
    clients::{UpstreamError, Upstreams},
    config::{ConfigError, GatewayConfig},
    registry::Registry,
    service::GatewayService,
    store::{Store, StoreError, StoreOptions},
    turn::{Engine, manager::TurnManager},
};

/// How long stopped turns get to store their partial answers at shutdown.
const SHUTDOWN_STORE_WAIT: Duration = Duration::from_secs(5);

/// The fully qualified name of the service, for health checks.
pub const SERVICE_NAME: &str = "parley.gateway.v1.ChatGateway";

/// Why the gateway could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The configuration is invalid.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The auth configuration is unusable.
    #[error(transparent)]
    Auth(#[from] AuthConfigError),
    /// An upstream URL is unusable.
    #[error(transparent)]
    Upstream(#[from] UpstreamError),
    /// The store could not be opened or migrated.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// A gateway ready to serve.
#[derive(Debug, Clone)]
pub struct Gateway {
    engine: Arc<Engine>,
    auth: Arc<Authenticator>,
}

impl Gateway {
    /// Validates `config`, opens the store (running migrations) and makes
    /// the upstream clients (connected lazily).
    pub async fn build(
        config: &GatewayConfig,
        registry: Registry,
        auth: Authenticator,
    ) -> Result<Self, StartError> {
        config.validate()?;
        let upstreams = Upstreams::new(
            &config.upstream.runner_url,
            &config.upstream.parser_url,
            Duration::from_millis(config.upstream.connect_timeout_ms),
            Duration::from_millis(config.upstream.parse_timeout_ms),
        )?;
        let store = Store::open(
            &config.store.database_url,
            &StoreOptions {
                max_connections: config.store.max_connections,
                acquire_timeout: Duration::from_millis(config.store.acquire_timeout_ms),
            },
        )
        .await?;
        if auth.is_dev() {
            tracing::warn!(
                user = crate::auth::DEV_USER,
                "DEV AUTH IS ON: no token is checked and every caller is user `dev`; configure [auth] before exposing this gateway"
            );
        }
        let engine = Engine {
            store,
            registry: Arc::new(registry),
            upstreams,
            turns: TurnManager::new(config.turns.max_concurrent),
            config: config.turns.clone(),
        };
        Ok(Self {
            engine: Arc::new(engine),
            auth: Arc::new(auth),
        })
    }

    /// The turn engine (store, registry, running turns).
    pub fn engine(&self) -> &Arc<Engine> {
        &self.engine
    }

    /// The authenticated ChatGateway service as routes.
    pub fn routes(&self) -> tonic::service::Routes {
        tonic::service::Routes::new(GatewayService::authenticated(
            self.engine.clone(),
            self.auth.clone(),
        ))
    }

    /// Serves until `shutdown` resolves, drains for at most `drain_timeout`,
    /// then stops and stores the turns still running.
    pub async fn serve(
        self,
        listener: TcpListener,
        drain_timeout: Duration,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<(), parley_grpc::serve::ServeError> {
        let signalled: Arc<Mutex<Option<Instant>>> = Arc::default();
        let mark = signalled.clone();
        let shutdown = async move {
            shutdown.await;
            *mark.lock().unwrap_or_else(PoisonError::into_inner) = Some(Instant::now());
        };
        let mut options = parley_grpc::ServeOptions::new("chat-gateway", vec![SERVICE_NAME]);
        options.drain_timeout = drain_timeout;
        let served = parley_grpc::serve(listener, self.routes(), options, shutdown).await;

        let since = signalled
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .unwrap_or_else(Instant::now);
        let left = drain_timeout.saturating_sub(since.elapsed());
        let turns = &self.engine.turns;
        if !turns.is_empty() && !turns.wait_idle(left).await {
            let stopped = turns.shutdown(SHUTDOWN_STORE_WAIT).await;
            tracing::warn!(
                turns = stopped,
                "stopped turns still running at shutdown; stored as failed"
            );
        }
        self.engine.store.close().await;
        served
    }
}
