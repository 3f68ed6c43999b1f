//! Turns: starting one (idempotency, one turn per conversation, the user
//! message stored first), running it in its own task ([`flow`]), following
//! it ([`follow`]), stopping it ([`manager`]) and, for every replica,
//! keeping turns honest in the store ([`replica`]).
//!
//! A turn is a durable object in the store: the database allows one running
//! turn per conversation, the turn's replica holds a lease on it, and its
//! wire events are stored as clients receive them ([`journal`]). So any
//! replica can refuse a second turn, stop the turn (`CancelTurn`), follow it
//! (`ResumeTurn`), and end it when its replica died. A turn runs
//! independently of the client's stream: a client that disconnects loses
//! nothing (the turn completes and is stored, and the client can resume).

pub mod cleaner;
pub mod eventlog;
pub mod flow;
pub mod follow;
pub mod history;
pub mod journal;
pub mod manager;
pub mod observe;
pub mod outcome;
pub mod parse;
pub mod partials;
pub mod recover;
pub mod relay;
pub mod replica;
pub mod streams;

use std::{sync::Arc, time::Duration};

use parley_proto::runner::v1 as runner;
use serde_json::Value;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::{
    auth::Principal,
    clients::Upstreams,
    config::TurnConfig,
    error::GatewayError,
    registry::{Registry, ResolvedPage},
    store::{
        BeginTurn, EventBody, NewTurn, Store, StoredPage, TurnRecord, TurnState, quota::Admission,
        title_from,
    },
};
use eventlog::EventLog;
pub use follow::EventStream;
use follow::{StoreSource, Watchers};
use journal::Journal;
use manager::{ReserveError, StopCause, TurnManager, TurnSlot};

/// Longest conversation title, in characters.
const TITLE_CHARS: usize = 80;

/// The `stream_ahead` recorded for a turn whose events are not stored
/// (`turns.event_log = false`): its clients may have seen any seq, so a
/// replica that ends it after its own died numbers the end past them all.
const UNLOGGED_AHEAD: u64 = 1 << 20;

/// How long a follower of a turn running elsewhere waits for a notification
/// before reading the store again (notifications can be lost).
const FOLLOW_POLL: Duration = Duration::from_millis(250);

/// What every turn shares.
#[derive(Debug)]
pub struct Engine {
    /// The conversation store.
    pub store: Store,
    /// The page registry.
    pub registry: Arc<Registry>,
    /// The runner and the parser sidecar.
    pub upstreams: Upstreams,
    /// The turns running on this replica.
    pub turns: TurnManager,
    /// Turn limits.
    pub config: TurnConfig,
    /// This replica's id, recorded on the turns it runs.
    pub replica: String,
    /// Followers of turns that run elsewhere.
    pub watchers: Arc<Watchers>,
    /// Stores the wire events of the turns running here; `None` when the
    /// event log is off.
    pub log: Option<Arc<EventLog>>,
    /// Cancelled when the gateway stops: ends the background work.
    pub closing: CancellationToken,
    /// The event streams open at once (`turns.max_streams`).
    streams: Arc<tokio::sync::Semaphore>,
    /// The store leases of this replica's streams (the streams limits).
    pub stream_leases: Arc<streams::StreamLeases>,
}

/// A client's stream of a turn, and the store lease that counts it
/// against its user's streams (when a streams limit is set).
pub struct Followed {
    /// The events.
    pub stream: EventStream,
    /// The lease, held as long as the stream.
    pub lease: Option<streams::Lease>,
}

/// A request to start a turn, validated, with the page it resolved to.
#[derive(Debug, Clone)]
pub struct StartTurn {
    /// The authenticated caller; its owner key scopes every store access.
    pub principal: Principal,
    /// The conversation; empty starts a new one (then [`Engine::start_turn`]
    /// fills in the new id).
    pub conversation_id: String,
    /// The user message.
    pub message: String,
    /// Where the user is, as stored with the message.
    pub page: StoredPage,
    /// What that page allows, resolved once for the whole turn.
    pub resolved: Arc<ResolvedPage>,
    /// The output schema, when any.
    pub response_schema: Option<Value>,
    /// A model override.
    pub model: Option<runner::ModelRef>,
    /// The idempotency key, when sent.
    pub request_id: Option<String>,
    /// Cancel a running turn instead of refusing.
    pub cancel_running: bool,
    /// Run a model call that fails midway again (`step_reset`) instead of
    /// failing the turn.
    pub mid_answer_failover: bool,
    /// The server action the message was rendered from, when any.
    pub action: Option<String>,
    /// When the turn must end.
    pub deadline: Instant,
}

/// One turn to run: the request, with the conversation and turn it got.
#[derive(Debug, Clone)]
pub struct TurnSpec {
    /// The request; its `conversation_id` is set.
    pub start: StartTurn,
    /// The turn.
    pub turn_id: String,
    /// Whether this turn created the conversation (so its history is the
    /// user message alone, with nothing to read back).
    pub new_conversation: bool,
}

/// Whether a retried request id starts a new turn: its turn failed with a
/// retryable error (the client was told to retry).
fn reruns(turn: &TurnRecord) -> bool {
    turn.state == TurnState::Failed && turn.retryable
}

/// Counts a turn refused before it started, by the caller's tenant and
/// the reason (`parley_tenant_turns_rejected_total`).
fn count_refused_turn(tenant: Option<&str>, refused: &GatewayError) {
    let m = parley_grpc::telemetry::metrics();
    m.tenant_rejected
        .with_label_values(&[m.tenant_label(tenant), refused.reason()])
        .inc();
}

/// A new id for this replica: the host name (the pod name on Kubernetes)
/// and a random suffix, so a restarted process is a new replica.
pub fn replica_id() -> String {
    let host = std::env::var("HOSTNAME")
        .ok()
        .filter(|host| !host.trim().is_empty())
        .unwrap_or_else(|| "gateway".to_owned());
    let suffix = uuid::Uuid::new_v4().simple().to_string();
    format!("{host}-{}", &suffix[..8])
}

impl Engine {
    /// An engine for `replica`.
    pub fn new(
        store: Store,
        registry: Arc<Registry>,
        upstreams: Upstreams,
        config: TurnConfig,
        replica: String,
    ) -> Self {
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
            store,
            registry,
            upstreams,
            turns: TurnManager::new(config.max_concurrent),
            streams: Arc::new(tokio::sync::Semaphore::new(config.max_streams.max(1))),
            stream_leases,
            config,
            replica,
            watchers: Arc::default(),
            log,
            closing,
        }
    }

    fn source(&self, owner: &str, turn_id: &str) -> StoreSource {
        StoreSource {
            store: self.store.clone(),
            watchers: self.watchers.clone(),
            owner: owner.to_owned(),
            turn_id: turn_id.to_owned(),
            poll: FOLLOW_POLL,
            heartbeat: self.config.lease_renew,
            watch_for: self.config.lease_ttl,
        }
    }

    /// Follows `turn` of `owner` from `after_seq`, wherever it runs.
    fn follow(&self, owner: &str, turn: TurnRecord, after_seq: u64) -> EventStream {
        match self.turns.journal(&turn.id) {
            Some(journal) => follow::local(journal, self.source(owner, &turn.id), after_seq),
            None => follow::stored(self.source(owner, &turn.id), after_seq),
        }
    }

    /// Starts a turn: checks the request id and the conversation, takes
    /// the conversation (here, then in the store, which decides across
    /// replicas), stores the user message, then runs the turn in its own
    /// task and returns the client's stream of it.
    ///
    /// A request id already used by this caller starts nothing, except when
    /// its turn failed with a retryable error: a running turn is followed
    /// from its first event, a finished one replayed.
    pub async fn start_turn(self: &Arc<Self>, start: StartTurn) -> Result<Followed, GatewayError> {
        let tenant = start.principal.tenant.clone();
        let started = self.begin(start).await;
        if let Err(refused) = &started {
            count_refused_turn(tenant.as_deref(), refused);
        }
        started
    }

    /// Admits one more event stream, or refuses at once when
    /// `turns.max_streams` are open. The permit goes with the stream
    /// ([`follow::held`]).
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
            user: self.config.per_user,
            tenant_quota: self.config.per_tenant,
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
            .store
            .open_stream(principal.owner(), &self.replica, &admission)
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

    /// [`Engine::start_turn`] without the counting of refusals.
    async fn begin(self: &Arc<Self>, mut start: StartTurn) -> Result<Followed, GatewayError> {
        if let Some(request_id) = &start.request_id
            && let Some(turn) = self
                .store
                .turn_by_request(start.principal.owner(), request_id)
                .await?
        {
            if !reruns(&turn) {
                tracing::info!(turn = %turn.id, "a retried request follows its turn");
                return self.follow_leased(&start.principal, turn, 0).await;
            }
            // It runs again where it failed, also when it had created the
            // conversation.
            start.conversation_id = turn.conversation_id;
        }
        let create = start.conversation_id.is_empty();
        let conversation_id = if create {
            uuid::Uuid::now_v7().to_string()
        } else {
            start.conversation_id.clone()
        };
        if !create
            && self
                .store
                .conversation(start.principal.owner(), &conversation_id)
                .await?
                .is_none()
        {
            return Err(GatewayError::ConversationNotFound);
        }
        let turn_id = uuid::Uuid::now_v7().to_string();
        let (journal, stream_ahead) = match &self.log {
            Some(log) => (
                Journal::logged(&turn_id, log.clone(), self.config.stream_ahead),
                self.config.stream_ahead,
            ),
            None => (Journal::unlogged(&turn_id), UNLOGGED_AHEAD),
        };
        let slot = self
            .reserve(&conversation_id, &journal, start.cancel_running)
            .await?;
        let user_message = EventBody::UserMessage {
            text: start.message.clone(),
            page: start.page.clone(),
            response_schema: start.response_schema.clone(),
            request_id: start.request_id.clone(),
            action: start.action.clone(),
        };
        let title = title_from(&start.message, TITLE_CHARS);
        let admission = self.admission(&start.principal, true);
        let new_turn = NewTurn {
            owner: start.principal.owner(),
            conversation_id: &conversation_id,
            create,
            turn_id: &turn_id,
            replica: &self.replica,
            lease_ttl_ms: millis(self.config.lease_ttl),
            stream_ahead,
            request_id: start.request_id.as_deref(),
            user_message: &user_message,
            title: &title,
            admission: &admission,
        };
        let mut begun = self.store.begin_turn(&new_turn).await?;
        if let BeginTurn::Busy { turn_id: running } = &begun
            && start.cancel_running
        {
            // The running turn is another replica's: stop it there.
            self.stop_anywhere(start.principal.owner(), running, StopCause::Superseded)
                .await?;
            begun = self.store.begin_turn(&new_turn).await?;
        }
        match begun {
            BeginTurn::Started { .. } => {}
            BeginTurn::DuplicateRequest(turn) => {
                drop(slot);
                return self.follow_leased(&start.principal, turn, 0).await;
            }
            BeginTurn::NotFound => return Err(GatewayError::ConversationNotFound),
            BeginTurn::Busy { turn_id } => return Err(GatewayError::TurnInProgress { turn_id }),
            BeginTurn::OverQuota(refused) => return Err(GatewayError::OverQuota(refused)),
        }
        start.conversation_id = conversation_id;
        let spec = TurnSpec {
            start,
            turn_id,
            new_conversation: create,
        };
        tracing::info!(conversation = %spec.start.conversation_id, turn = %spec.turn_id, new = spec.new_conversation, "turn started");
        let source = self.source(spec.start.principal.owner(), &spec.turn_id);
        let stream = follow::local(journal.clone(), source, 0);
        let span = observe::turn_span(&spec);
        tokio::spawn(flow::run(self.clone(), spec, slot, journal).instrument(span));
        // The turn's task goes first: its runner call is on the wire before
        // the client's response starts, and the response's headers then
        // leave with the `started` status in one write.
        tokio::task::yield_now().await;
        Ok(Followed {
            stream,
            lease: admission
                .stream
                .as_ref()
                .map(|stream| self.stream_leases.lease(stream)),
        })
    }

    /// Takes the conversation on this replica; with `cancel_running`, a
    /// turn running on it here is stopped first.
    async fn reserve(
        &self,
        conversation_id: &str,
        journal: &Arc<Journal>,
        cancel_running: bool,
    ) -> Result<TurnSlot, GatewayError> {
        let refused = |error| match error {
            ReserveError::Full => GatewayError::TooManyTurns,
            ReserveError::Busy { turn_id } => GatewayError::TurnInProgress { turn_id },
        };
        match self.turns.reserve(conversation_id, journal) {
            Err(ReserveError::Busy { .. }) if cancel_running => {
                if let Some(stopping) =
                    self.turns
                        .stop(conversation_id, None, StopCause::Superseded)
                {
                    stopping.stored(self.config.cancel_wait).await;
                }
                self.turns
                    .reserve(conversation_id, journal)
                    .map_err(refused)
            }
            reserved => reserved.map_err(refused),
        }
    }

    /// Stops a running turn of `owner` wherever it runs and waits (at most
    /// `cancel_wait`) for it to end; false when it was not running.
    async fn stop_anywhere(
        &self,
        owner: &str,
        turn_id: &str,
        cause: StopCause,
    ) -> Result<bool, GatewayError> {
        if let Some(stopping) = self.turns.stop_turn(turn_id, cause) {
            if !stopping.stored(self.config.cancel_wait).await {
                tracing::warn!(turn = %turn_id, "stopped turn not stored within the wait");
            }
            return Ok(true);
        }
        let Some(replica) = self.store.request_cancel(owner, turn_id).await? else {
            return Ok(false);
        };
        tracing::info!(turn = %turn_id, %replica, "asked the turn's replica to stop it");
        if !self
            .wait_ended(owner, turn_id, self.config.cancel_wait)
            .await?
        {
            tracing::warn!(turn = %turn_id, %replica, "stopped turn not stored within the wait");
        }
        Ok(true)
    }

    /// Waits (at most `limit`) for a turn running elsewhere to end: woken
    /// when its replica stores its end (NOTIFY), re-reading at intervals.
    async fn wait_ended(
        &self,
        owner: &str,
        turn_id: &str,
        limit: Duration,
    ) -> Result<bool, GatewayError> {
        let until = Instant::now() + limit;
        let watch = self.watchers.watch(turn_id);
        loop {
            let notified = watch.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let running = self
                .store
                .turn(owner, turn_id)
                .await?
                .is_some_and(|turn| turn.state == TurnState::Running);
            if !running {
                return Ok(true);
            }
            let now = Instant::now();
            if now >= until {
                return Ok(false);
            }
            let _ = tokio::time::timeout(FOLLOW_POLL.min(until - now), notified).await;
        }
    }

    /// Cancels the running turn of a conversation of `owner` (only
    /// `turn_id`, when given), on whichever replica runs it, and waits (a
    /// bounded time) for its partial answer to be stored.
    pub async fn cancel_turn(
        &self,
        owner: &str,
        conversation_id: &str,
        turn_id: Option<&str>,
    ) -> Result<Option<String>, GatewayError> {
        let running = self
            .conversation_turn(owner, conversation_id, turn_id, Store::running_turn)
            .await?;
        let Some(turn) = running.filter(|turn| turn.state == TurnState::Running) else {
            return Ok(None);
        };
        let stopped = self
            .stop_anywhere(owner, &turn.id, StopCause::Cancelled)
            .await?;
        Ok(stopped.then_some(turn.id))
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
            .store
            .conversation(owner, conversation_id)
            .await?
            .is_none()
        {
            return Err(GatewayError::ConversationNotFound);
        }
        Ok(match turn_id {
            Some(turn_id) => self
                .store
                .turn(owner, turn_id)
                .await?
                .filter(|turn| turn.conversation_id == conversation_id),
            None => pick(&self.store, owner, conversation_id).await?,
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

/// A duration in milliseconds, as an `i64` for the store.
pub(crate) fn millis(duration: Duration) -> i64 {
    i64::try_from(duration.as_millis()).unwrap_or(i64::MAX)
}
