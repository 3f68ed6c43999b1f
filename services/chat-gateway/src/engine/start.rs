//! Starting a turn: the request id, the conversation, a slot here and the
//! turn in the store (which decides across replicas), then the turn's task.

use std::sync::Arc;

use tracing::Instrument;

use super::{Engine, Followed, count_refused_turn, decide::Closing};
use crate::{
    durable::{
        follow,
        journal::Journal,
        manager::{ReserveError, StopCause, TurnSlot},
    },
    error::GatewayError,
    store::{BeginTurn, EventBody, NewTurn, TurnRecord, TurnState, millis, title_from},
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
        let new_turn = NewTurn {
            owner: start.principal.owner(),
            conversation_id: &conversation_id,
            create,
            turn_id: &turn_id,
            replica: &self.shared.replica,
            lease_ttl_ms: millis(self.shared.config.lease_ttl),
            stream_ahead,
            request_id: start.request_id.as_deref(),
            parent: start.parent.as_deref(),
            user_message: &user_message,
            title: &title,
            admission: &admission,
        };
        let mut begun = self.shared.store.begin_turn(&new_turn).await?;
        if let BeginTurn::Busy { turn_id: running } = &begun
            && start.cancel_running
        {
            // The running turn is another replica's: stop it there.
            self.stop_anywhere(start.principal.owner(), running, StopCause::Superseded)
                .await?;
            begun = self.shared.store.begin_turn(&new_turn).await?;
        }
        let branched = match begun {
            BeginTurn::Started { branched, .. } => branched,
            BeginTurn::DuplicateRequest(turn) => {
                drop(slot);
                return self.follow_leased(&start.principal, *turn, 0).await;
            }
            BeginTurn::NotFound => return Err(GatewayError::ConversationNotFound),
            BeginTurn::Busy { turn_id } => return Err(GatewayError::TurnInProgress { turn_id }),
            BeginTurn::OverQuota(refused) => return Err(GatewayError::OverQuota(refused)),
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
        let spec = TurnSpec {
            start,
            turn_id,
            new_conversation: create,
            branched,
            resume: None,
        };
        tracing::info!(conversation = %spec.start.conversation_id, turn = %spec.turn_id, new = spec.new_conversation, "turn started");
        let source = self.source(spec.start.principal.owner(), &spec.turn_id);
        let stream = follow::local(journal.clone(), source, 0);
        let span = observe::turn_span(&spec);
        tokio::spawn(flow::run(self.shared.clone(), spec, slot, journal).instrument(span));
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
