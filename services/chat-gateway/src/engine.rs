//! The turn engine: what every turn shares, and turns as durable objects
//! across replicas: starting one (idempotency, one turn per conversation,
//! the user message stored first; [`start`]), following it wherever it runs
//! ([`crate::durable::follow`]), stopping it ([`stop`]) and, for every
//! replica, keeping turns honest in the store ([`replica`]).
//!
//! A turn runs independently of the client's stream: a client that
//! disconnects loses nothing (the turn completes and is stored, and the
//! client can resume). One turn's own work, from the runner call to the
//! stored answer, is the pipeline in [`crate::turn`]; the parts that make it
//! durable (journal, event log, the turns running here, followers, stream
//! leases) are in [`crate::durable`].

pub mod decide;
pub mod feedback;
pub mod replica;
pub mod start;
pub mod stop;

use std::{sync::Arc, time::Duration};

use tokio_util::sync::CancellationToken;

use crate::{
    auth::Principal,
    clients::Upstreams,
    config::TurnConfig,
    durable::{
        EventStream,
        eventlog::EventLog,
        follow::{self, StoreSource, Watchers},
        manager::TurnManager,
        streams,
    },
    error::GatewayError,
    registry::Registry,
    store::{Store, TurnRecord, quota::Admission},
    turn::Shared,
};
pub use replica::{Swept, replica_id};

/// How long a follower of a turn running elsewhere waits for a notification
/// before reading the store again (notifications can be lost).
const FOLLOW_POLL: Duration = Duration::from_millis(250);

/// What every turn shares.
#[derive(Debug)]
pub struct Engine {
    /// What each turn's pipeline uses: the store, the registry, the
    /// upstreams, the turn limits and this replica's id.
    shared: Arc<Shared>,
    /// The turns running on this replica.
    turns: TurnManager,
    /// Followers of turns that run elsewhere.
    watchers: Arc<Watchers>,
    /// Stores the wire events of the turns running here; `None` when the
    /// event log is off.
    log: Option<Arc<EventLog>>,
    /// Cancelled when the gateway stops: ends the background work.
    closing: CancellationToken,
    /// The event streams open at once (`turns.max_streams`).
    streams: Arc<tokio::sync::Semaphore>,
    /// The store leases of this replica's streams (the streams limits).
    stream_leases: Arc<streams::StreamLeases>,
}

/// A client's stream of a turn, and the store lease that counts it
/// against its user's streams (when a streams limit is set).
pub struct Followed {
    /// The events.
    pub stream: EventStream,
    /// The lease, held as long as the stream.
    pub lease: Option<streams::Lease>,
}

impl Engine {
    /// An engine for `replica`, on the conversation store of `blobs` (and
    /// where they keep attachment bytes).
    pub fn new(
        blobs: crate::blobs::Blobs,
        registry: Arc<Registry>,
        upstreams: Upstreams,
        config: TurnConfig,
        tenants: crate::config::Tenants,
        attachments: crate::config::AttachmentsConfig,
        replica: String,
    ) -> Self {
        let store = blobs.store().clone();
        let closing = CancellationToken::new();
        let log = config.event_log.then(|| {
            EventLog::start(
                store.clone(),
                replica.clone(),
                config.log_interval,
                closing.clone(),
            )
        });
        let stream_leases = Arc::new(streams::StreamLeases::new(
            store.clone(),
            replica.clone(),
            config.lease_ttl,
        ));
        Self {
            turns: TurnManager::new(config.max_concurrent),
            streams: Arc::new(tokio::sync::Semaphore::new(config.max_streams.max(1))),
            stream_leases,
            shared: Arc::new(Shared {
                store,
                registry,
                upstreams,
                config,
                replica,
                tenants,
                attachments,
                blobs,
            }),
            watchers: Arc::default(),
            log,
            closing,
        }
    }

    /// The conversation store.
    pub fn store(&self) -> &Store {
        &self.shared.store
    }

    /// The page registry.
    pub fn registry(&self) -> &Arc<Registry> {
        &self.shared.registry
    }

    /// The runner and the parser sidecar.
    pub fn upstreams(&self) -> &Upstreams {
        &self.shared.upstreams
    }

    /// Turn limits.
    pub fn config(&self) -> &TurnConfig {
        &self.shared.config
    }

    /// The limits of uploaded files (`[attachments]`).
    pub fn attachments(&self) -> &crate::config::AttachmentsConfig {
        &self.shared.attachments
    }

    /// Where attachment bytes are kept (`attachments.store`).
    pub fn blobs(&self) -> &crate::blobs::Blobs {
        &self.shared.blobs
    }

    /// The tenants' restrictions (`[tenants.NAME]`).
    pub fn tenants(&self) -> &crate::config::Tenants {
        &self.shared.tenants
    }

    /// This replica's id, recorded on the turns it runs.
    pub fn replica(&self) -> &str {
        &self.shared.replica
    }

    /// The turns running on this replica.
    pub fn turns(&self) -> &TurnManager {
        &self.turns
    }

    /// Cancelled when the gateway stops ([`Engine::close`]).
    pub fn closing(&self) -> CancellationToken {
        self.closing.clone()
    }

    /// Ends the background work and closes the store.
    pub async fn close(&self) {
        self.closing.cancel();
        self.shared.store.close().await;
    }

    fn source(&self, owner: &str, turn_id: &str) -> StoreSource {
        StoreSource {
            store: self.shared.store.clone(),
            watchers: self.watchers.clone(),
            owner: owner.to_owned(),
            turn_id: turn_id.to_owned(),
            poll: FOLLOW_POLL,
            heartbeat: self.shared.config.lease_renew,
            watch_for: self.shared.config.lease_ttl,
        }
    }

    /// Follows `turn` of `owner` from `after_seq`, wherever it runs.
    fn follow(&self, owner: &str, turn: TurnRecord, after_seq: u64) -> EventStream {
        match self.turns.journal(&turn.id) {
            Some(journal) => follow::local(journal, self.source(owner, &turn.id), after_seq),
            None => follow::stored(self.source(owner, &turn.id), after_seq),
        }
    }

    /// Admits one more event stream, or refuses at once when
    /// `turns.max_streams` are open. The permit goes with the stream
    /// ([`streams::held`]).
    pub fn admit_stream(&self) -> Result<tokio::sync::OwnedSemaphorePermit, GatewayError> {
        self.streams
            .clone()
            .try_acquire_owned()
            .map_err(|_| GatewayError::TooManyStreams)
    }

    /// [`Engine::admit_stream`] for a call that starts a turn: it also
    /// finds out here, cheaply, that no turn slot is free. A refusal counts
    /// in the caller's tenant's refused turns.
    pub fn admit_turn_stream(
        &self,
        principal: &Principal,
    ) -> Result<tokio::sync::OwnedSemaphorePermit, GatewayError> {
        let admitted = self.admit_stream().and_then(|permit| {
            if self.turns.has_room() {
                Ok(permit)
            } else {
                Err(GatewayError::TooManyTurns)
            }
        });
        if let Err(refused) = &admitted {
            count_refused_turn(principal.tenant.as_deref(), refused);
        }
        admitted
    }

    /// What `principal`'s turns and streams are admitted against; with
    /// `stream`, a new stream lease comes with it when a streams limit
    /// counts the caller's streams.
    fn admission(&self, principal: &Principal, stream: bool) -> Admission {
        let mut admission = Admission {
            tenant: principal.tenant_key(),
            user: self.shared.config.per_user,
            tenant_quota: self.shared.config.per_tenant,
            stream: None,
        };
        if stream && admission.counts_streams() {
            admission.stream = Some(self.stream_leases.new_stream());
        }
        admission
    }

    /// A lease for a stream of `principal` that follows a turn (it starts
    /// none), unless a streams limit refuses it.
    async fn open_stream(
        &self,
        principal: &Principal,
    ) -> Result<Option<streams::Lease>, GatewayError> {
        let admission = self.admission(principal, true);
        let Some(stream) = &admission.stream else {
            return Ok(None);
        };
        if let Some(refused) = self
            .shared
            .store
            .open_stream(principal.owner(), &self.shared.replica, &admission)
            .await?
        {
            return Err(GatewayError::OverQuota(refused));
        }
        Ok(Some(self.stream_leases.lease(stream)))
    }

    /// Follows `turn` of `principal` from `after_seq` with a stream lease
    /// of its own.
    async fn follow_leased(
        &self,
        principal: &Principal,
        turn: TurnRecord,
        after_seq: u64,
    ) -> Result<Followed, GatewayError> {
        let lease = self.open_stream(principal).await?;
        Ok(Followed {
            stream: self.follow(principal.owner(), turn, after_seq),
            lease,
        })
    }

    /// A turn of a conversation of `owner`: `turn_id`, or the one `pick`
    /// chooses when it is `None`. Another owner's conversation, or a turn
    /// of another conversation, is missing.
    async fn conversation_turn<'a, F>(
        &'a self,
        owner: &'a str,
        conversation_id: &'a str,
        turn_id: Option<&str>,
        pick: impl FnOnce(&'a Store, &'a str, &'a str) -> F,
    ) -> Result<Option<TurnRecord>, GatewayError>
    where
        F: Future<Output = Result<Option<TurnRecord>, crate::store::StoreError>>,
    {
        if self
            .shared
            .store
            .conversation(owner, conversation_id)
            .await?
            .is_none()
        {
            return Err(GatewayError::ConversationNotFound);
        }
        Ok(match turn_id {
            Some(turn_id) => self
                .shared
                .store
                .turn(owner, turn_id)
                .await?
                .filter(|turn| turn.conversation_id == conversation_id),
            None => pick(&self.shared.store, owner, conversation_id).await?,
        })
    }

    /// Follows a turn of `owner` (the conversation's latest when `turn_id`
    /// is `None`) from `after_seq`, wherever it runs: its events exactly as
    /// first sent, through its `complete`.
    pub async fn resume_turn(
        &self,
        principal: &Principal,
        conversation_id: &str,
        turn_id: Option<&str>,
        after_seq: u64,
    ) -> Result<Followed, GatewayError> {
        let owner = principal.owner();
        let turn = self
            .conversation_turn(owner, conversation_id, turn_id, Store::latest_turn)
            .await?
            .ok_or(GatewayError::TurnNotFound)?;
        tracing::info!(turn = %turn.id, after_seq, "resuming a turn's stream");
        self.follow_leased(principal, turn, after_seq).await
    }
}

/// Counts a turn refused before it started, by the caller's tenant and
/// the reason (`parley_tenant_turns_rejected_total`).
fn count_refused_turn(tenant: Option<&str>, refused: &GatewayError) {
    let m = parley_grpc::telemetry::metrics();
    m.tenant_rejected
        .with_label_values(&[m.tenant_label(tenant), refused.reason()])
        .inc();
}
