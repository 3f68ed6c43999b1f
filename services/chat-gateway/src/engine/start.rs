//! Starting a turn: the request id, the conversation, a slot here and the
//! turn in the store (which decides across replicas), then the turn's task.

use std::sync::Arc;

use tracing::Instrument;

use super::{Engine, Followed, count_refused_turn, decide::Closing};
use crate::{
    auth::Principal,
    durable::{
        follow,
        journal::Journal,
        manager::{ReserveError, StopCause, TurnSlot},
    },
    error::GatewayError,
    store::{
        BeginTurn, EventBody, NewTurn, TurnRecord, TurnState, millis, quota::Admission, title_from,
    },
    turn::{StartTurn, TurnSpec, flow, observe},
};

/// Longest conversation title, in characters.
const TITLE_CHARS: usize = 80;

/// The `stream_ahead` recorded for a turn whose events are not stored
/// (`turns.event_log = false`): its clients may have seen any seq, so a
/// replica that ends it after its own died numbers the end past them all.
const UNLOGGED_AHEAD: u64 = 1 << 20;

/// Whether a retried request id starts a new turn: its turn failed with a
/// retryable error (the client was told to retry).
fn reruns(turn: &TurnRecord) -> bool {
    turn.state == TurnState::Failed && turn.retryable
}

/// A turn the store did not start.
enum NotStarted {
    /// Its request id started this turn before.
    Duplicate(Box<TurnRecord>),
    /// Why not.
    Refused(GatewayError),
}

/// Whether the turn is branched, when the store started it.
fn started(begun: BeginTurn) -> Result<bool, NotStarted> {
    match begun {
        BeginTurn::Started { branched, .. } => Ok(branched),
        BeginTurn::DuplicateRequest(turn) => Err(NotStarted::Duplicate(turn)),
        BeginTurn::NotFound => Err(NotStarted::Refused(GatewayError::ConversationNotFound)),
        BeginTurn::Busy { turn_id } => Err(NotStarted::Refused(GatewayError::TurnInProgress {
            turn_id,
        })),
        BeginTurn::OverQuota(refused) => Err(NotStarted::Refused(GatewayError::OverQuota(refused))),
    }
}

/// What starting a turn's task needs besides the request.
struct Launch<'a> {
    turn_id: &'a str,
    /// Whether the turn creates its conversation.
    create: bool,
    journal: Arc<Journal>,
    /// The limits it was admitted against (its stream's lease).
    admission: &'a Admission,
}

impl Engine {
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

    /// [`Engine::start_turn`] without the counting of refusals.
    async fn begin(self: &Arc<Self>, mut start: StartTurn) -> Result<Followed, GatewayError> {
        if let Some(request_id) = &start.request_id
            && let Some(turn) = self
                .shared
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
        if !create {
            // One read: the conversation is the caller's, and whether a
            // turn of it waits for decisions.
            let paused = self
                .shared
                .store
                .conversation_paused(start.principal.owner(), &conversation_id)
                .await?
                .ok_or(GatewayError::ConversationNotFound)?;
            if let Some(paused) = paused {
                self.leave_paused(&start, &paused).await?;
            }
        }
        let turn_id = uuid::Uuid::now_v7().to_string();
        let (journal, stream_ahead) = match &self.log {
            Some(log) => (
                Journal::logged(&turn_id, log.clone(), self.shared.config.stream_ahead),
                self.shared.config.stream_ahead,
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
            attachments: start.attachments.clone(),
        };
        let title = title_from(&start.message, TITLE_CHARS);
        let admission = self.admission(&start.principal, true);
        // Owned, so that `start` can go to the turn's task while the store
        // still writes.
        let owner = start.principal.owner().to_owned();
        let (request_id, parent) = (start.request_id.clone(), start.parent.clone());
        let new_turn = NewTurn {
            owner: &owner,
            conversation_id: &conversation_id,
            create,
            turn_id: &turn_id,
            replica: &self.shared.replica,
            lease_ttl_ms: millis(self.shared.config.lease_ttl),
            stream_ahead,
            request_id: request_id.as_deref(),
            parent: parent.as_deref(),
            user_message: &user_message,
            title: &title,
            admission: &admission,
        };
        let turn = Launch {
            turn_id: &turn_id,
            create,
            journal,
            admission: &admission,
        };
        // A new conversation's turn with nothing to read back from the
        // store (no files) can call the runner while its start commits.
        if create && start.attachments.is_empty() {
            return self.begin_early(start, &new_turn, slot, turn).await;
        }
        let mut begun = self.shared.store.begin_turn(&new_turn).await?;
        if let BeginTurn::Busy { turn_id: running } = &begun
            && start.cancel_running
        {
            // The running turn is another replica's: stop it there.
            self.stop_anywhere(&owner, running, StopCause::Superseded)
                .await?;
            begun = self.shared.store.begin_turn(&new_turn).await?;
        }
        let branched = match started(begun) {
            Ok(branched) => branched,
            Err(not) => {
                drop(slot);
                return self.not_started(&start.principal, not).await;
            }
        };
        if !start.attachments.is_empty() {
            // Deleted with the first conversation they are sent in.
            // (The turn has begun: a failure here leaves them the user's
            // until deleted with their upload's owner, and the turn runs.)
            let ids = start
                .attachments
                .iter()
                .map(|file| file.id.clone())
                .collect();
            if let Err(error) = self
                .shared
                .store
                .link_attachments(start.principal.owner(), &conversation_id, ids)
                .await
            {
                tracing::warn!(%error, "cannot tie the message's files to its conversation");
            }
        }
        start.conversation_id = conversation_id;
        let followed = self.launch(start, branched, slot, &turn);
        // The turn's task goes first: its runner call is on the wire before
        // the client's response starts, and the response's headers then
        // leave with the `started` status in one write.
        tokio::task::yield_now().await;
        Ok(followed)
    }

    /// Begins a turn that reads nothing back from the store before its
    /// runner call (a new conversation's, without files): its task starts
    /// as soon as the store has decided to start it, so the runner call
    /// goes out while the decision commits, and the client's stream is
    /// returned only once it has committed. Where the store cannot decide
    /// before committing ([`crate::store::Store::begin_turn_early`]), or
    /// refuses the turn (a limit), the task starts after the commit, or
    /// not at all, as for any turn. A start that then fails to commit stops
    /// the task (its runner call is cancelled; nothing of it was shown).
    async fn begin_early(
        self: &Arc<Self>,
        mut start: StartTurn,
        new_turn: &NewTurn<'_>,
        slot: TurnSlot,
        turn: Launch<'_>,
    ) -> Result<Followed, GatewayError> {
        let (told, decided) = tokio::sync::oneshot::channel();
        let begin = self.shared.store.begin_turn_early(new_turn, told);
        tokio::pin!(begin);
        start.conversation_id = new_turn.conversation_id.to_owned();
        let begun = tokio::select! {
            biased;
            begun = &mut begin => begun?,
            Ok((_, branched)) = decided => {
                let stop = slot.cancel_token().clone();
                let principal = start.principal.clone();
                let followed = self.launch(start, branched, slot, &turn);
                let not = match begin.await.map(started) {
                    Ok(Ok(_)) => return Ok(followed),
                    Ok(Err(not)) => not,
                    Err(error) => NotStarted::Refused(error.into()),
                };
                // Nothing of it was committed: the turn did not start.
                tracing::warn!(turn = %turn.turn_id, "a turn's start did not commit; its task stops");
                stop.cancel();
                return self.not_started(&principal, not).await;
            }
        };
        match started(begun) {
            Ok(branched) => {
                let followed = self.launch(start, branched, slot, &turn);
                tokio::task::yield_now().await;
                Ok(followed)
            }
            Err(not) => {
                drop(slot);
                self.not_started(&start.principal, not).await
            }
        }
    }

    /// Starts the turn's task and follows its journal from the start.
    fn launch(
        self: &Arc<Self>,
        start: StartTurn,
        branched: bool,
        slot: TurnSlot,
        turn: &Launch<'_>,
    ) -> Followed {
        let spec = TurnSpec {
            start,
            turn_id: turn.turn_id.to_owned(),
            new_conversation: turn.create,
            branched,
            resume: None,
        };
        tracing::info!(conversation = %spec.start.conversation_id, turn = %spec.turn_id, new = spec.new_conversation, "turn started");
        let source = self.source(spec.start.principal.owner(), &spec.turn_id);
        let stream = follow::local(turn.journal.clone(), source, 0);
        let span = observe::turn_span(&spec);
        let journal = turn.journal.clone();
        tokio::spawn(flow::run(self.shared.clone(), spec, slot, journal).instrument(span));
        Followed {
            stream,
            lease: turn
                .admission
                .stream
                .as_ref()
                .map(|stream| self.stream_leases.lease(stream)),
        }
    }

    /// What the caller gets for a turn the store did not start: the turn
    /// its request id already started, followed, or the refusal.
    async fn not_started(
        self: &Arc<Self>,
        principal: &Principal,
        not: NotStarted,
    ) -> Result<Followed, GatewayError> {
        match not {
            NotStarted::Duplicate(turn) => self.follow_leased(principal, *turn, 0).await,
            NotStarted::Refused(error) => Err(error),
        }
    }

    /// Closes the conversation's turn that waits for decisions, `paused`:
    /// the user moved on (or cancels it, with `cancel_running`). With
    /// `turns.block_on_pending`, only `cancel_running` may close it.
    async fn leave_paused(
        self: &Arc<Self>,
        start: &StartTurn,
        paused: &str,
    ) -> Result<(), GatewayError> {
        let owner = start.principal.owner();
        let closing = if start.cancel_running {
            Closing::Cancelled
        } else if self.shared.config.block_on_pending {
            return Err(GatewayError::TurnAwaitingInput {
                turn_id: paused.to_owned(),
            });
        } else {
            Closing::MovedOn
        };
        self.close_paused(owner, paused, closing).await?;
        Ok(())
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
                    stopping.stored(self.shared.config.cancel_wait).await;
                }
                self.turns
                    .reserve(conversation_id, journal)
                    .map_err(refused)
            }
            reserved => reserved.map_err(refused),
        }
    }
}
