//! Stopping a turn wherever it runs: here through the turn manager, on
//! another replica by asking it through the store and waiting for the end.

use std::{sync::Arc, time::Duration};

use tokio::time::Instant;

use super::{Engine, FOLLOW_POLL, decide::Closing};
use crate::{
    durable::manager::StopCause,
    error::GatewayError,
    store::{Store, TurnState},
};

impl Engine {
    /// Stops a running turn of `owner` wherever it runs and waits (at most
    /// `cancel_wait`) for it to end; false when it was not running.
    pub(super) async fn stop_anywhere(
        &self,
        owner: &str,
        turn_id: &str,
        cause: StopCause,
    ) -> Result<bool, GatewayError> {
        if let Some(stopping) = self.turns.stop_turn(turn_id, cause) {
            if !stopping.stored(self.shared.config.cancel_wait).await {
                tracing::warn!(turn = %turn_id, "stopped turn not stored within the wait");
            }
            return Ok(true);
        }
        let Some(replica) = self.shared.store.request_cancel(owner, turn_id).await? else {
            return Ok(false);
        };
        tracing::info!(turn = %turn_id, %replica, "asked the turn's replica to stop it");
        if !self
            .wait_ended(owner, turn_id, self.shared.config.cancel_wait)
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
                .shared
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
        self: &Arc<Self>,
        owner: &str,
        conversation_id: &str,
        turn_id: Option<&str>,
    ) -> Result<Option<String>, GatewayError> {
        let running = self
            .conversation_turn(owner, conversation_id, turn_id, Store::running_turn)
            .await?;
        let running = match running {
            Some(turn) => Some(turn),
            // A turn that waits for decisions is cancelled too.
            None if turn_id.is_none() => match self
                .shared
                .store
                .paused_turn(owner, conversation_id)
                .await?
            {
                Some(paused) => self.shared.store.turn(owner, &paused).await?,
                None => None,
            },
            None => None,
        };
        if let Some(turn) = running
            .as_ref()
            .filter(|turn| turn.state == TurnState::AwaitingInput)
        {
            let closed = self
                .close_paused(owner, &turn.id, Closing::Cancelled)
                .await?;
            return Ok(closed.then(|| turn.id.clone()));
        }
        let Some(turn) = running.filter(|turn| turn.state == TurnState::Running) else {
            return Ok(None);
        };
        let stopped = self
            .stop_anywhere(owner, &turn.id, StopCause::Cancelled)
            .await?;
        Ok(stopped.then_some(turn.id))
    }
}
