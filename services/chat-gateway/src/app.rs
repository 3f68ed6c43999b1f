//! Assembling and serving the gateway: the store (migrated), the upstream
//! clients, the turn engine and the authenticated service, served with
//! health and reflection by `parley_grpc::serve`.
//!
//! Shutdown: `serve` drains in-flight calls for the drain timeout; turns
//! whose clients went away keep running in their tasks, so they get the
//! same time to finish on their own. Any turn still running then is stopped
//! and stored as failed (reason `SHUTDOWN`) — never lost — while the server
//! still serves its stream, so its client learns why.
//!
//! Start-up ends the turns other replicas left behind: on SQLite (one
//! process owns the file) every turn still running; on PostgreSQL those
//! whose lease expired. Then the replica's background work runs
//! ([`Engine::spawn_background`]) until the gateway stops.

use std::{future::Future, sync::Arc, time::Duration};

use parley_grpc::{binary::BinaryError, config::ServiceConfig, tls::ClientTls};
use tokio::{net::TcpListener, time::Instant};

use crate::{
    auth::{AuthConfigError, Authenticator},
    clients::{UpstreamError, Upstreams},
    config::{ConfigError, GatewayConfig},
    engine::{self, Engine},
    registry::Registry,
    service::GatewayService,
    store::{Backend, Store, StoreError, StoreOptions},
};

/// How long stopped turns get to store their partial answers at shutdown.
const SHUTDOWN_STORE_WAIT: Duration = Duration::from_secs(5);
/// How long the server then waits for the stopped turns' last events to
/// reach their clients.
const SHUTDOWN_FLUSH_WAIT: Duration = Duration::from_secs(1);

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
    /// The `[client_tls]` certificates.
    #[error(transparent)]
    ClientTls(#[from] parley_grpc::tls::TlsError),
    /// The store could not be opened or migrated.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The web protocols' settings.
    #[error("web: {0}")]
    Web(#[from] parley_web::WebError),
}

/// A gateway ready to serve.
#[derive(Debug, Clone)]
pub struct Gateway {
    engine: Arc<Engine>,
    auth: Arc<Authenticator>,
    web: crate::config::WebConfig,
    /// gRPC-Web, Connect and CORS in front of the listener.
    web_layer: parley_grpc::HttpLayer,
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
        let web_layer = crate::web::layer(&config.web, SERVICE_NAME)?;
        let dev_remote =
            crate::auth::check_dev_exposure(auth.is_dev(), &config.auth, &config.server.listen)?;
        let client_tls = ClientTls::from_config(&config.client_tls)?;
        let upstreams = Upstreams::new(
            &config.upstream.runner_url,
            &config.upstream.parser_url,
            config.upstream.connect_timeout,
            config.upstream.parse_timeout,
            &client_tls,
        )?
        .with_parsing(config.upstream.parsing)
        .with_runner_max_request(config.upstream.runner_max_request_bytes);
        upstreams.runner_token.set(config.upstream.runner_token()?);
        let store = Store::open(
            &config.store.url()?,
            &StoreOptions {
                max_connections: config.store.max_connections,
                acquire_timeout: config.store.acquire_timeout,
                write_batch: usize::try_from(config.store.write_batch).unwrap_or(usize::MAX),
                lock_timeout: config.store.lock_timeout,
                idle_in_transaction_timeout: config.store.idle_in_transaction_timeout,
            },
        )
        .await?;
        let legacy_issuer = auth.legacy_issuer(config.auth.legacy_issuer.as_deref());
        let legacy = store
            .adopt_legacy_owners(
                legacy_issuer
                    .as_deref()
                    .map(crate::auth::issuer_prefix)
                    .as_deref(),
            )
            .await?;
        if legacy.adopted > 0 {
            tracing::info!(
                adopted = legacy.adopted,
                issuer = legacy_issuer.as_deref().unwrap_or_default(),
                "conversations stored before owners were scoped by issuer now belong to that issuer's users"
            );
        }
        if legacy.waiting > 0 {
            tracing::warn!(
                waiting = legacy.waiting,
                "conversations stored before owners were scoped by issuer are hidden: several identity sources could have written them; set auth.legacy_issuer to the one that did"
            );
        }
        if auth.is_dev() {
            tracing::warn!(
                user = crate::auth::DEV_USER,
                "DEV AUTH IS ON: no token is checked and every caller is user `dev`; configure [auth] before exposing this gateway"
            );
        }
        // The runner's MCP tools, for the pages that allow them.
        registry.mcp_catalog().spawn_refresh(
            upstreams.runner.clone(),
            registry.limits().mcp_tools_refresh,
        );
        let blobs = if config.attachments.s3.is_unset() {
            crate::blobs::Blobs::db(store.clone())
        } else {
            let s3 = crate::blobs::s3::S3Blobs::new(&config.attachments.s3, store.clone())?;
            crate::blobs::Blobs::with_s3(
                store.clone(),
                s3,
                config.attachments.store == crate::config::AttachmentStore::S3,
            )
        };
        let engine = Arc::new(Engine::new(
            blobs,
            Arc::new(registry),
            upstreams,
            config.turns.clone(),
            config.tenants.clone(),
            config.attachments.clone(),
            engine::replica_id(),
        ));
        if engine.store().backend() == Backend::Sqlite {
            engine.recover_sqlite().await?;
        } else {
            engine.sweep().await?;
        }
        if dev_remote {
            tokio::spawn(crate::auth::warn_dev_remote(
                config.server.listen.clone(),
                crate::auth::DEV_REMOTE_WARNING_PERIOD,
                engine.closing(),
            ));
        }
        tracing::info!(replica = %engine.replica(), "gateway replica ready");
        engine.spawn_background();
        Ok(Self {
            engine,
            auth: Arc::new(auth),
            web: config.web.clone(),
            web_layer,
        })
    }

    /// Reads the secrets again (SIGHUP): the auth configuration's secret
    /// files, variables and JWKS, swapped in at once,
    /// `upstream.runner_token_file`, which runner calls from then on send,
    /// and `store.database_url_file`, which the connections the pool opens
    /// from then on use. What cannot be read is logged and the current
    /// values stay.
    pub async fn reload_secrets(&self, config: &GatewayConfig) {
        match self.auth.reload(&config.auth).await {
            Ok(()) => tracing::info!("auth configuration read again"),
            Err(error) => tracing::warn!(
                %error,
                "the auth configuration could not be read again; the current one stays"
            ),
        }
        if config.upstream.runner_token_file.is_some() || config.upstream.runner_token_env.is_some()
        {
            match config.upstream.runner_token() {
                Ok(token) => {
                    self.engine.upstreams().runner_token.set(token);
                    tracing::info!("runner token read again; runner calls from now on send it");
                }
                Err(error) => tracing::warn!(
                    %error,
                    "the runner token could not be read again; the current one stays"
                ),
            }
        }
        self.engine.blobs().reload_secrets();
        if config.store.database_url_file.is_some() {
            match config.store.url() {
                Ok(url) => match self.engine.store().set_url(&url) {
                    Ok(()) => tracing::info!("database URL read again; new connections use it"),
                    Err(error) => {
                        tracing::warn!(%error, "the database URL read again is unusable; the current one stays")
                    }
                },
                Err(error) => {
                    tracing::warn!(%error, "the database URL could not be read again; the current one stays")
                }
            }
        }
    }

    /// The authenticator (swapped by [`Gateway::reload_secrets`]).
    pub fn auth(&self) -> &Arc<Authenticator> {
        &self.auth
    }

    /// The turn engine (store, registry, running turns).
    pub fn engine(&self) -> &Arc<Engine> {
        &self.engine
    }

    /// The authenticated ChatGateway service as routes, with the plain
    /// HTTP routes of [`crate::web::routes`] beside it.
    pub fn routes(&self) -> tonic::service::Routes {
        let grpc = tonic::service::Routes::new(GatewayService::authenticated(
            self.engine.clone(),
            self.auth.clone(),
        ));
        crate::web::routes(grpc, &self.web, self.engine.clone(), self.auth.clone())
    }

    /// Serves with the `[server]` settings (TLS included) until `shutdown`
    /// resolves, drains for at most `server.drain_timeout`, then stops and
    /// stores the turns still running.
    ///
    /// Turns still running when the drain time is up are stopped while the
    /// server still serves their streams, so each of their clients gets the
    /// turn's `SHUTDOWN` error and `complete` before its connection closes
    /// cleanly; the server waits [`SHUTDOWN_STORE_WAIT`] and
    /// [`SHUTDOWN_FLUSH_WAIT`] past the drain time for that. (Stopping them
    /// once the server had given up raced the last events against the
    /// process's exit: a client could see its connection break instead.)
    pub async fn serve(
        self,
        listener: TcpListener,
        server: &parley_grpc::config::ServerConfig,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<(), parley_grpc::serve::ServeError> {
        let (signalled, drain_started) = tokio::sync::oneshot::channel::<Instant>();
        let shutdown = async move {
            shutdown.await;
            let _ = signalled.send(Instant::now());
        };
        let drain = server.drain_timeout;
        let engine = self.engine.clone();
        let stopper = tokio::spawn(async move {
            // The drain starts at the signal; without one (the server
            // failed, or stopped on its own) it starts now.
            let since = drain_started.await.unwrap_or_else(|_| Instant::now());
            let left = drain.saturating_sub(since.elapsed());
            let turns = engine.turns();
            if !turns.is_empty() && !turns.wait_idle(left).await {
                let stopped = turns.shutdown(SHUTDOWN_STORE_WAIT).await;
                tracing::warn!(
                    turns = stopped,
                    "stopped turns still running at shutdown; stored as failed"
                );
            }
        });
        let mut options = parley_grpc::ServeOptions::new("chat-gateway", vec![SERVICE_NAME])
            .configured(server)?;
        options.drain_timeout = drain + SHUTDOWN_STORE_WAIT + SHUTDOWN_FLUSH_WAIT;
        // Browsers and Connect clients: HTTP/1.1 next to HTTP/2, and the
        // web protocols translated to gRPC in front of everything.
        options.accept_http1 = true;
        options.http_layer = Some(self.web_layer.clone());
        let served = parley_grpc::serve(listener, self.routes(), options, shutdown).await;
        if let Err(error) = stopper.await {
            tracing::error!(%error, "the shutdown of running turns failed");
        }
        self.engine.close().await;
        served
    }
}

impl parley_grpc::binary::Binary for Gateway {
    const NAME: &'static str = "chat-gateway";
    const ABOUT: &'static str =
        "Parley's chat gateway: streaming Chat API, conversations, pages, auth.";
    const CONFIG_ENV: &'static str = "PARLEY_GATEWAY_CONFIG";
    const CONFIG_EXAMPLE: &'static str = "deploy/config/gateway.toml";
    const CONFIG_HELP: &'static str = "Configuration file (TOML; see deploy/config/gateway.toml).";
    type Config = GatewayConfig;
    type Flags = crate::config::Flags;

    fn server(config: &GatewayConfig) -> &parley_grpc::config::ServerConfig {
        &config.server
    }

    /// The page registry (the example one without `registry`), the
    /// authenticator, then [`Gateway::build`].
    async fn build(config: &GatewayConfig) -> Result<Self, BinaryError> {
        let registry = match &config.registry {
            Some(path) => Registry::load(path)?,
            None => Registry::example(),
        };
        tracing::info!(registry = registry.origin(), "page registry loaded");
        let auth = Authenticator::load(&config.auth, false).await?;
        Ok(Gateway::build(config, registry, auth).await?)
    }

    async fn reload_secrets(&self, config: &GatewayConfig) {
        Gateway::reload_secrets(self, config).await;
    }

    async fn serve(
        self,
        listener: TcpListener,
        config: &GatewayConfig,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<(), BinaryError> {
        Ok(Gateway::serve(self, listener, &config.server, shutdown).await?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        durable::journal,
        store::{BeginTurn, EventBody, NewTurn, StoredPage, TurnBatch, TurnState, WireBatch},
    };
    use parley_proto::gateway::v1::{ChatEvent, chat_event::Event};

    #[tokio::test]
    async fn turns_left_running_by_a_crash_end_at_start_with_their_partial_answer() {
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
            attachments: Vec::new(),
        };
        let begun = store
            .begin_turn(&NewTurn {
                owner: "alice",
                conversation_id: "c1",
                create: true,
                turn_id: "t1",
                replica: "crashed",
                // A live lease: SQLite recovery does not wait for it.
                lease_ttl_ms: 60_000,
                stream_ahead: 8,
                request_id: None,
                parent: None,
                user_message: &message,
                title: "hello",
                admission: &Default::default(),
            })
            .await
            .expect("begin");
        assert_eq!(
            begun,
            BeginTurn::Started {
                turn_index: 0,
                branched: false
            }
        );
        let seen: Vec<ChatEvent> = ["Hel", "lo there"]
            .into_iter()
            .zip(1..)
            .map(|(text, seq)| ChatEvent {
                seq,
                event: Some(Event::TextDelta(text.into())),
            })
            .collect();
        let batch: WireBatch = journal::encode(&seen).expect("events");
        let held = store
            .append_wire(
                "crashed",
                vec![TurnBatch {
                    turn_id: "t1".into(),
                    batch,
                }],
            )
            .await
            .expect("append");
        assert_eq!(held, [true]);
        store.close().await;

        let gateway = Gateway::build(&config, Registry::example(), Authenticator::dev())
            .await
            .expect("build");
        let store = gateway.engine().store();
        let turn = store
            .turn("alice", "t1")
            .await
            .expect("read")
            .expect("exists");
        assert_eq!(turn.state, TurnState::Failed);
        assert!(turn.retryable);
        let events = store.events("alice", "c1").await.expect("events");
        let Some(EventBody::AssistantMessage(answer)) = events.last().map(|event| &event.body)
        else {
            panic!("{events:?}")
        };
        assert_eq!(answer.text, "Hello there");
        assert_eq!(
            answer.error.as_ref().map(|error| error.reason.as_str()),
            Some("REPLICA_LOST")
        );
        // The wire log ends with the error and a failed complete, numbered
        // after what the client may have seen: the 2 stored events and the
        // 8 the crashed replica could stream ahead of them.
        let wire = store.wire_events("alice", "t1", 2).await.expect("wire");
        let tail: Vec<ChatEvent> = wire
            .iter()
            .flat_map(|b| journal::decode(b).expect("decodes"))
            .filter(|e| e.seq > 2)
            .collect();
        assert_eq!(tail.iter().map(|e| e.seq).collect::<Vec<_>>(), [11, 12]);
        assert!(matches!(&tail[1].event, Some(Event::Complete(c)) if !c.success));
        assert!(
            store
                .running_turn("alice", "c1")
                .await
                .expect("read")
                .is_none()
        );
    }
}
