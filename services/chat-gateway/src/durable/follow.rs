//! Following a turn: the stream a client reads, from the `Chat` call that
//! started the turn or from `ResumeTurn` on any replica.
//!
//! A follower delivers the turn's events with `seq > after_seq`, in order,
//! through its `complete`. While the turn runs on this replica it reads the
//! turn's [`Journal`] (events are released once stored); otherwise it reads
//! the turn's wire log from the store, woken by [`Watchers`] when another
//! replica stores more (PostgreSQL NOTIFY, or this replica's sweep) and
//! re-reading at an interval in case a notification was lost. A follower
//! never holds the turn up: a slow client only delays its own stream.

use std::{
    collections::{HashMap, VecDeque},
    pin::Pin,
    sync::{Arc, Mutex, PoisonError},
    time::Duration,
};

use futures::Stream;
use parley_proto::gateway::v1::{self as gw, ChatEvent, chat_event::Event};
use tokio::sync::{Notify, watch};
use tonic::Status;

use super::journal::{self, End, Journal, Release};
use crate::{
    convert::{self, TurnIds},
    error::GatewayError,
    store::{Store, TurnRecord, TurnState},
};

/// The stream a `Chat`, `ExecuteAction` or `ResumeTurn` call returns.
pub type EventStream = Pin<Box<dyn Stream<Item = Result<ChatEvent, Status>> + Send>>;

/// Wakes the followers of turns that run elsewhere when their wire log
/// grows or they end.
#[derive(Debug, Default)]
pub struct Watchers {
    turns: Mutex<HashMap<String, (Arc<Notify>, usize)>>,
}

/// A follower's interest in one turn; dropping it ends the interest.
#[derive(Debug)]
pub struct Watch {
    watchers: Arc<Watchers>,
    turn_id: String,
    notify: Arc<Notify>,
}

impl Watchers {
    /// Registers interest in `turn_id`.
    pub fn watch(self: &Arc<Self>, turn_id: &str) -> Watch {
        let mut turns = self.turns.lock().unwrap_or_else(PoisonError::into_inner);
        let entry = turns
            .entry(turn_id.to_owned())
            .or_insert_with(|| (Arc::new(Notify::new()), 0));
        entry.1 += 1;
        Watch {
            watchers: self.clone(),
            turn_id: turn_id.to_owned(),
            notify: entry.0.clone(),
        }
    }

    /// Wakes the followers of `turn_id`.
    pub fn wake(&self, turn_id: &str) {
        let turns = self.turns.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((notify, _)) = turns.get(turn_id) {
            notify.notify_waiters();
        }
    }

    /// Wakes every follower (notifications may have been lost).
    pub fn wake_all(&self) {
        let turns = self.turns.lock().unwrap_or_else(PoisonError::into_inner);
        for (notify, _) in turns.values() {
            notify.notify_waiters();
        }
    }
}

impl Watch {
    /// Completes at the next wake-up of this turn's followers.
    pub fn notified(&self) -> tokio::sync::futures::Notified<'_> {
        self.notify.notified()
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        let mut turns = self
            .watchers
            .turns
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(entry) = turns.get_mut(&self.turn_id) {
            entry.1 -= 1;
            if entry.1 == 0 {
                turns.remove(&self.turn_id);
            }
        }
    }
}

/// What a store follower needs.
#[derive(Debug, Clone)]
pub struct StoreSource {
    /// The store.
    pub store: Store,
    /// Wakes it.
    pub watchers: Arc<Watchers>,
    /// The turn's owner (reads are owner-checked).
    pub owner: String,
    /// The turn.
    pub turn_id: String,
    /// The longest wait between reads when no notification comes.
    pub poll: Duration,
    /// How often a follower of a turn running elsewhere tells the store it
    /// is there (so that the turn is not taken for abandoned), and for how
    /// long each time.
    pub heartbeat: Duration,
    /// See `heartbeat`.
    pub watch_for: Duration,
}

enum Source {
    Local {
        journal: Arc<Journal>,
        release: watch::Receiver<Release>,
        store: StoreSource,
    },
    Stored(StoreSource),
    Done,
}

struct Follower {
    source: Source,
    /// The seq of the last event handed out (or skipped).
    sent: u64,
    pending: VecDeque<ChatEvent>,
    /// When this follower last told the store it follows the turn.
    heartbeat_at: Option<std::time::Instant>,
}

/// Follows a turn running on this replica from `after_seq`.
pub fn local(journal: Arc<Journal>, store: StoreSource, after_seq: u64) -> EventStream {
    let release = journal.subscribe();
    stream(Follower {
        source: Source::Local {
            journal,
            release,
            store,
        },
        sent: after_seq,
        pending: VecDeque::new(),
        heartbeat_at: None,
    })
}

/// Follows a turn through the store from `after_seq`.
pub fn stored(store: StoreSource, after_seq: u64) -> EventStream {
    stream(Follower {
        source: Source::Stored(store),
        sent: after_seq,
        pending: VecDeque::new(),
        heartbeat_at: None,
    })
}

fn stream(follower: Follower) -> EventStream {
    Box::pin(futures::stream::unfold(
        follower,
        |mut follower| async move {
            let next = follower.next().await?;
            Some((next, follower))
        },
    ))
}

fn store_error(error: crate::store::StoreError) -> Status {
    Status::from(GatewayError::from(error))
}

impl Follower {
    async fn next(&mut self) -> Option<Result<ChatEvent, Status>> {
        loop {
            if let Some(event) = self.pending.pop_front() {
                if matches!(event.event, Some(Event::Complete(_))) {
                    self.source = Source::Done;
                }
                return Some(Ok(event));
            }
            match &mut self.source {
                Source::Done => return None,
                Source::Local {
                    journal,
                    release,
                    store,
                } => {
                    let now = *release.borrow_and_update();
                    if now.upto > self.sent {
                        self.pending.extend(journal.events(self.sent, now.upto));
                        self.sent = now.upto;
                        continue;
                    }
                    match now.end {
                        End::Open => {
                            if release.changed().await.is_err() {
                                // The journal is gone: the turn ended and
                                // everything was released before that.
                                self.source = Source::Done;
                            }
                        }
                        End::Done => self.source = Source::Done,
                        End::Store => self.source = Source::Stored(store.clone()),
                    }
                }
                Source::Stored(store) => {
                    let store = store.clone();
                    // Boxed: the store's query futures are large and most
                    // followers never read the store; the stream's state
                    // stays small for them.
                    if let Err(status) = Box::pin(self.read_store(&store)).await {
                        self.source = Source::Done;
                        return Some(Err(status));
                    }
                }
            }
        }
    }

    /// Reads what the store has after `sent`; waits for more when it has
    /// nothing new and the turn still runs.
    async fn read_store(&mut self, source: &StoreSource) -> Result<(), Status> {
        let watch = source.watchers.watch(&source.turn_id);
        let notified = watch.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        if self.take_stored(source).await? {
            return Ok(());
        }
        let turn = source
            .store
            .turn(&source.owner, &source.turn_id)
            .await
            .map_err(store_error)?;
        let Some(turn) = turn else {
            // Deleted meanwhile: nothing more to send.
            self.source = Source::Done;
            return Ok(());
        };
        if turn.state != TurnState::Running {
            // It ended (or paused) in one transaction: what it stored is
            // there now. A paused turn's stream ends with its pause.
            if !self.take_stored(source).await? {
                if turn.state == TurnState::AwaitingInput {
                    self.source = Source::Done;
                    return Ok(());
                }
                self.pending.extend(
                    replay_outcome(&turn)
                        .into_iter()
                        .filter(|event| event.seq > self.sent),
                );
                if self.pending.is_empty() {
                    self.source = Source::Done;
                }
            }
            return Ok(());
        }
        // Still running (elsewhere): say this client is here, so that the
        // replica running it does not take it for abandoned.
        if self
            .heartbeat_at
            .is_none_or(|at| at.elapsed() >= source.heartbeat)
        {
            self.heartbeat_at = Some(std::time::Instant::now());
            let watch_for = crate::store::millis(source.watch_for);
            if let Err(error) = source
                .store
                .watch_turn(&source.owner, &source.turn_id, watch_for)
                .await
            {
                tracing::debug!(%error, turn = %source.turn_id, "could not record a follower");
            }
        }
        let _ = tokio::time::timeout(source.poll, notified).await;
        Ok(())
    }

    /// Queues the stored events after `sent`; true when there were any.
    async fn take_stored(&mut self, source: &StoreSource) -> Result<bool, Status> {
        let batches = source
            .store
            .wire_events(&source.owner, &source.turn_id, self.sent)
            .await
            .map_err(store_error)?;
        let before = self.pending.len();
        for batch in &batches {
            let Some(events) = journal::decode(batch) else {
                tracing::error!(turn = %source.turn_id, first_seq = batch.first_seq, "a stored wire batch does not decode");
                return Err(Status::data_loss(
                    "a stored event of this turn is unreadable",
                ));
            };
            for event in events {
                if event.seq > self.sent {
                    self.sent = event.seq;
                    self.pending.push_back(event);
                }
            }
        }
        Ok(self.pending.len() > before)
    }
}

/// The events of a finished turn whose wire log is gone (pruned after the
/// resume window, or never kept): a status, then its stored `complete`.
pub fn replay_outcome(turn: &TurnRecord) -> Vec<ChatEvent> {
    let ids = TurnIds {
        conversation_id: turn.conversation_id.clone(),
        turn_id: turn.id.clone(),
    };
    let complete = turn
        .outcome
        .as_deref()
        .and_then(convert::decode_outcome)
        .unwrap_or_else(|| gw::TurnComplete {
            success: false,
            message: "The answer to this request is not available.".into(),
            conversation_id: turn.conversation_id.clone(),
            turn_id: turn.id.clone(),
            state: convert::state_to_wire(turn.state) as i32,
            ..Default::default()
        });
    [
        ids.status(gw::TurnPhase::Started, "Replaying the stored answer"),
        Event::Complete(Box::new(complete)),
    ]
    .into_iter()
    .zip(1_u64..)
    .map(|(event, seq)| ChatEvent {
        seq,
        event: Some(event),
    })
    .collect()
}
