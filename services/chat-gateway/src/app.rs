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
    store::{
        AssistantMessage, Backend, EventBody, FinishTurn, Store, StoreError, StoreOptions,
        TurnState, model::StoredError,
    },
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

/// Stores turns left running by a gateway that stopped without draining
/// (killed, crashed) as failed, reason `INTERRUPTED`. Only for SQLite: its
/// file belongs to this one process, whereas a PostgreSQL database may be
/// shared with replicas whose turns are running right now.
async fn recover_interrupted(store: &Store) -> Result<(), StoreError> {
    let running = store.running_turns().await?;
    for (owner, conversation_id, turn_id) in &running {
        let answer = AssistantMessage {
            text: String::new(),
            payload: None,
            suggested_values: Vec::new(),
            suggested_actions: Vec::new(),
            structured: None,
            usage: None,
            state: TurnState::Failed,
            stop_reason: "error".into(),
            error: Some(StoredError {
                reason: "INTERRUPTED".into(),
                message: "the gateway stopped while this turn was running".into(),
                retryable: true,
            }),
        };
        store
            .finish_turn(&FinishTurn {
                owner,
                conversation_id,
                turn_id,
                state: TurnState::Failed,
                outcome: None,
                events: vec![EventBody::AssistantMessage(answer)],
            })
            .await?;
    }
    if !running.is_empty() {
        tracing::warn!(
            turns = running.len(),
            "stored turns interrupted by an unclean stop as failed"
        );
    }
    Ok(())
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
                write_batch: usize::try_from(config.store.write_batch).unwrap_or(usize::MAX),
            },
        )
        .await?;
        if store.backend() == Backend::Sqlite {
            recover_interrupted(&store).await?;
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{BeginTurn, NewTurn, StoredPage};

    #[tokio::test]
    async fn turns_left_running_by_a_crash_are_stored_as_failed_at_start() {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut config = GatewayConfig::default();
        config.store.database_url =
            format!("sqlite://{}?mode=rwc", dir.path().join("g.db").display());
        let store = Store::open(&config.store.database_url, &StoreOptions::default())
            .await
            .expect("open");
        let message = EventBody::UserMessage {
            text: "hello".into(),
            page: StoredPage::default(),
            response_schema: None,
            request_id: None,
            action: None,
        };
        let begun = store
            .begin_turn(&NewTurn {
                owner: "alice",
                conversation_id: "c1",
                create: true,
                turn_id: "t1",
                request_id: None,
                user_message: &message,
                title: "hello",
            })
            .await
            .expect("begin");
        assert_eq!(begun, BeginTurn::Started { turn_index: 0 });
        store.close().await;

        let gateway = Gateway::build(&config, Registry::example(), Authenticator::dev())
            .await
            .expect("build");
        let store = &gateway.engine().store;
        let turn = store
            .turn("alice", "t1")
            .await
            .expect("read")
            .expect("exists");
        assert_eq!(turn.state, TurnState::Failed);
        let events = store.events("alice", "c1").await.expect("events");
        let Some(EventBody::AssistantMessage(answer)) = events.last().map(|event| &event.body)
        else {
            panic!("{events:?}")
        };
        assert_eq!(
            answer.error.as_ref().map(|error| error.reason.as_str()),
            Some("INTERRUPTED")
        );
        assert!(store.running_turns().await.expect("running").is_empty());
    }
}
