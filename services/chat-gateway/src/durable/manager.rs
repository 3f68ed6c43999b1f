//! The turns running on this gateway replica: at most `max_concurrent`, each
//! with its [`Journal`] and cancellable.
//!
//! A turn holds a [`TurnSlot`] for its whole life (it lives in the turn's
//! task, not in the client's stream, so a client that goes away does not end
//! the turn); dropping the slot frees the conversation and wakes whoever
//! waits for the turn to be stored. This is a cache of what runs here: the
//! store decides (one running turn per conversation across replicas, leases)
//! and this map answers quickly for the turns of this process.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex, PoisonError},
    time::{Duration, Instant},
};

use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};
use tokio_util::sync::CancellationToken;

use super::journal::Journal;

/// Why a turn was stopped before it finished.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopCause {
    /// `CancelTurn`.
    Cancelled,
    /// A new message with `cancel_running` replaced it.
    Superseded,
    /// The gateway is shutting down and the drain time ran out.
    Shutdown,
    /// Nobody followed it for `turns.abandoned_turn_grace`.
    Abandoned,
}

#[derive(Debug)]
struct Running {
    turn_id: String,
    cancel: CancellationToken,
    cause: Arc<Mutex<Option<StopCause>>>,
    done: watch::Receiver<bool>,
    journal: Arc<Journal>,
    /// Since when no client here has followed it.
    unfollowed_since: Option<Instant>,
}

#[derive(Debug, Default)]
struct Inner {
    by_conversation: HashMap<String, Running>,
    /// Turn id → conversation id.
    by_turn: HashMap<String, String>,
}

/// The registry of running turns.
#[derive(Debug, Clone)]
pub struct TurnManager {
    inner: Arc<Mutex<Inner>>,
    permits: Arc<Semaphore>,
    /// Cancelled on shutdown; every turn's token is a child of it.
    root: CancellationToken,
}

/// A turn's hold on its conversation.
#[derive(Debug)]
pub struct TurnSlot {
    inner: Arc<Mutex<Inner>>,
    conversation_id: String,
    turn_id: String,
    cancel: CancellationToken,
    cause: Arc<Mutex<Option<StopCause>>>,
    done: watch::Sender<bool>,
    _permit: OwnedSemaphorePermit,
}

/// Why a slot could not be taken.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReserveError {
    /// A turn is running on the conversation.
    Busy {
        /// The running turn.
        turn_id: String,
    },
    /// `max_concurrent` turns are running.
    Full,
}

/// A turn that was asked to stop.
#[derive(Debug)]
pub struct Stopping {
    /// The turn.
    pub turn_id: String,
    done: watch::Receiver<bool>,
}

impl Stopping {
    /// Waits (at most `limit`) for the turn to be stored; true when it was.
    pub async fn stored(mut self, limit: Duration) -> bool {
        matches!(
            tokio::time::timeout(limit, self.done.wait_for(|done| *done)).await,
            Ok(Ok(_))
        ) || *self.done.borrow()
    }
}

fn lock(inner: &Mutex<Inner>) -> std::sync::MutexGuard<'_, Inner> {
    inner.lock().unwrap_or_else(PoisonError::into_inner)
}

impl TurnManager {
    /// A manager allowing `max_concurrent` turns at once.
    pub fn new(max_concurrent: usize) -> Self {
        Self {
            inner: Arc::default(),
            permits: Arc::new(Semaphore::new(max_concurrent.max(1))),
            root: CancellationToken::new(),
        }
    }

    /// Takes the conversation for a new turn whose events go to `journal`.
    pub fn reserve(
        &self,
        conversation_id: &str,
        journal: &Arc<Journal>,
    ) -> Result<TurnSlot, ReserveError> {
        let turn_id = journal.turn_id();
        let mut inner = lock(&self.inner);
        if let Some(running) = inner.by_conversation.get(conversation_id) {
            return Err(ReserveError::Busy {
                turn_id: running.turn_id.clone(),
            });
        }
        let permit = self
            .permits
            .clone()
            .try_acquire_owned()
            .map_err(|_| ReserveError::Full)?;
        let cancel = self.root.child_token();
        let cause = Arc::new(Mutex::new(None));
        let (done_tx, done_rx) = watch::channel(false);
        inner.by_conversation.insert(
            conversation_id.to_owned(),
            Running {
                turn_id: turn_id.to_owned(),
                cancel: cancel.clone(),
                cause: cause.clone(),
                done: done_rx,
                journal: journal.clone(),
                unfollowed_since: None,
            },
        );
        inner
            .by_turn
            .insert(turn_id.to_owned(), conversation_id.to_owned());
        Ok(TurnSlot {
            inner: self.inner.clone(),
            conversation_id: conversation_id.to_owned(),
            turn_id: turn_id.to_owned(),
            cancel,
            cause,
            done: done_tx,
            _permit: permit,
        })
    }

    /// The turns running here that no client here has followed for
    /// `grace` as of `now`. Each call notes the moment a turn lost its last
    /// follower, so a turn is reported at most one call interval after its
    /// grace.
    pub fn unfollowed(&self, grace: Duration, now: Instant) -> Vec<String> {
        let mut inner = lock(&self.inner);
        let mut found = Vec::new();
        for running in inner.by_conversation.values_mut() {
            if running.journal.followed() {
                running.unfollowed_since = None;
                continue;
            }
            let since = *running.unfollowed_since.get_or_insert(now);
            if now.saturating_duration_since(since) >= grace {
                found.push(running.turn_id.clone());
            }
        }
        found
    }

    /// Whether a new turn could take a slot now (a cheap check before any
    /// work; [`TurnManager::reserve`] decides).
    pub fn has_room(&self) -> bool {
        self.permits.available_permits() > 0
    }

    /// The turn running on a conversation, if any.
    pub fn running(&self, conversation_id: &str) -> Option<String> {
        lock(&self.inner)
            .by_conversation
            .get(conversation_id)
            .map(|running| running.turn_id.clone())
    }

    /// The journal of a turn running here, if it is.
    pub fn journal(&self, turn_id: &str) -> Option<Arc<Journal>> {
        let inner = lock(&self.inner);
        let conversation = inner.by_turn.get(turn_id)?;
        inner
            .by_conversation
            .get(conversation)
            .map(|running| running.journal.clone())
    }

    /// Whether a turn runs here.
    pub fn runs(&self, turn_id: &str) -> bool {
        lock(&self.inner).by_turn.contains_key(turn_id)
    }

    /// Stops a turn running here, by its id.
    pub fn stop_turn(&self, turn_id: &str, cause: StopCause) -> Option<Stopping> {
        let conversation = lock(&self.inner).by_turn.get(turn_id).cloned()?;
        self.stop(&conversation, Some(turn_id), cause)
    }

    /// Stops the turn running on a conversation (only `turn_id`, when
    /// given). Returns `None` when no such turn is running.
    pub fn stop(
        &self,
        conversation_id: &str,
        turn_id: Option<&str>,
        cause: StopCause,
    ) -> Option<Stopping> {
        let inner = lock(&self.inner);
        let running = inner.by_conversation.get(conversation_id)?;
        if turn_id.is_some_and(|wanted| wanted != running.turn_id) {
            return None;
        }
        lock_cause(&running.cause).get_or_insert(cause);
        running.cancel.cancel();
        Some(Stopping {
            turn_id: running.turn_id.clone(),
            done: running.done.clone(),
        })
    }

    /// How many turns are running.
    pub fn len(&self) -> usize {
        lock(&self.inner).by_conversation.len()
    }

    /// Whether no turn is running.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Waits at most `limit` for the turns running now to end on their own;
    /// true when none is left.
    pub async fn wait_idle(&self, limit: Duration) -> bool {
        let waiting: Vec<watch::Receiver<bool>> = lock(&self.inner)
            .by_conversation
            .values()
            .map(|running| running.done.clone())
            .collect();
        let all = futures::future::join_all(waiting.into_iter().map(|mut done| async move {
            let _ = done.wait_for(|done| *done).await;
        }));
        tokio::time::timeout(limit, all).await.is_ok() && self.is_empty()
    }

    /// Stops every running turn (they are stored as failed, reason
    /// `SHUTDOWN`) and waits at most `limit` for them to be stored.
    pub async fn shutdown(&self, limit: Duration) -> usize {
        let waiting: Vec<watch::Receiver<bool>> = {
            let inner = lock(&self.inner);
            for running in inner.by_conversation.values() {
                lock_cause(&running.cause).get_or_insert(StopCause::Shutdown);
            }
            inner
                .by_conversation
                .values()
                .map(|running| running.done.clone())
                .collect()
        };
        self.root.cancel();
        let count = waiting.len();
        let all = futures::future::join_all(waiting.into_iter().map(|mut done| async move {
            let _ = done.wait_for(|done| *done).await;
        }));
        if tokio::time::timeout(limit, all).await.is_err() {
            tracing::warn!(
                turns = count,
                "turns still running after the shutdown limit"
            );
        }
        count
    }
}

fn lock_cause(cause: &Mutex<Option<StopCause>>) -> std::sync::MutexGuard<'_, Option<StopCause>> {
    cause.lock().unwrap_or_else(PoisonError::into_inner)
}

impl TurnSlot {
    /// The token that stops the turn.
    pub fn cancel_token(&self) -> &CancellationToken {
        &self.cancel
    }

    /// Why the turn was stopped, once it was.
    pub fn stop_cause(&self) -> Option<StopCause> {
        if !self.cancel.is_cancelled() {
            return None;
        }
        Some((*lock_cause(&self.cause)).unwrap_or(StopCause::Shutdown))
    }

    /// The turn's id.
    pub fn turn_id(&self) -> &str {
        &self.turn_id
    }
}

impl Drop for TurnSlot {
    fn drop(&mut self) {
        let mut inner = lock(&self.inner);
        if inner
            .by_conversation
            .get(&self.conversation_id)
            .is_some_and(|running| running.turn_id == self.turn_id)
        {
            inner.by_conversation.remove(&self.conversation_id);
        }
        inner.by_turn.remove(&self.turn_id);
        drop(inner);
        let _ = self.done.send(true);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn one_turn_per_conversation_and_the_slot_frees_it() {
        let manager = TurnManager::new(4);
        let slot = manager
            .reserve("c1", &Journal::unlogged("t1"))
            .expect("free");
        assert_eq!(
            manager
                .reserve("c1", &Journal::unlogged("t2"))
                .expect_err("busy"),
            ReserveError::Busy {
                turn_id: "t1".into()
            }
        );
        let other = manager
            .reserve("c2", &Journal::unlogged("t3"))
            .expect("other conversation");
        assert_eq!(manager.running("c1").as_deref(), Some("t1"));
        drop(slot);
        assert_eq!(manager.running("c1"), None);
        manager
            .reserve("c1", &Journal::unlogged("t4"))
            .expect("free again");
        drop(other);
    }

    #[tokio::test]
    async fn the_concurrency_limit_counts_live_slots() {
        let manager = TurnManager::new(2);
        let a = manager
            .reserve("a", &Journal::unlogged("1"))
            .expect("first");
        let _b = manager
            .reserve("b", &Journal::unlogged("2"))
            .expect("second");
        assert_eq!(
            manager
                .reserve("c", &Journal::unlogged("3"))
                .expect_err("full"),
            ReserveError::Full
        );
        drop(a);
        manager
            .reserve("c", &Journal::unlogged("3"))
            .expect("a permit came back");
    }

    #[tokio::test]
    async fn stop_cancels_records_the_cause_and_waits_for_the_store() {
        let manager = TurnManager::new(2);
        let slot = manager.reserve("c", &Journal::unlogged("t")).expect("free");
        assert!(
            manager
                .stop("c", Some("other-turn"), StopCause::Cancelled)
                .is_none()
        );
        assert!(
            manager
                .stop("unknown", None, StopCause::Cancelled)
                .is_none()
        );
        let stopping = manager
            .stop("c", Some("t"), StopCause::Cancelled)
            .expect("running");
        assert!(slot.cancel_token().is_cancelled());
        assert_eq!(slot.stop_cause(), Some(StopCause::Cancelled));
        // A later cause does not overwrite the first.
        manager
            .stop("c", None, StopCause::Shutdown)
            .expect("still running");
        assert_eq!(slot.stop_cause(), Some(StopCause::Cancelled));
        let waiter = tokio::spawn(stopping.stored(Duration::from_secs(30)));
        drop(slot);
        assert!(waiter.await.expect("join"));
    }

    #[tokio::test(start_paused = true)]
    async fn waiting_for_a_stuck_turn_is_bounded() {
        let manager = TurnManager::new(2);
        let _slot = manager.reserve("c", &Journal::unlogged("t")).expect("free");
        let stopping = manager
            .stop("c", None, StopCause::Cancelled)
            .expect("running");
        assert!(!stopping.stored(Duration::from_millis(50)).await);
    }

    #[tokio::test(start_paused = true)]
    async fn wait_idle_returns_when_turns_end_or_the_limit_passes() {
        let manager = TurnManager::new(4);
        assert!(manager.wait_idle(Duration::from_secs(1)).await);
        let slot = manager.reserve("c", &Journal::unlogged("t")).expect("free");
        assert!(!manager.wait_idle(Duration::from_millis(100)).await);
        let ender = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(10)).await;
            drop(slot);
        });
        assert!(manager.wait_idle(Duration::from_secs(1)).await);
        ender.await.expect("join");
    }

    #[tokio::test(start_paused = true)]
    async fn shutdown_stops_every_turn_as_shutdown() {
        let manager = TurnManager::new(4);
        let slot = manager.reserve("c", &Journal::unlogged("t")).expect("free");
        let token = slot.cancel_token().clone();
        let holder = tokio::spawn(async move {
            token.cancelled().await;
            let cause = slot.stop_cause();
            drop(slot);
            cause
        });
        assert_eq!(manager.shutdown(Duration::from_secs(5)).await, 1);
        assert_eq!(holder.await.expect("join"), Some(StopCause::Shutdown));
        assert!(manager.is_empty());
    }
}
