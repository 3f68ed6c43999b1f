//! A running turn's events: numbered, stored, released to whoever follows
//! the turn.
//!
//! The turn pushes its `ChatEvent`s here and never waits for a client or
//! the store. The replica's event log ([`Writer`]) stores them in the
//! turn's wire log
//! (`turn_events`): one writer for all the replica's turns, one transaction
//! for whatever every turn pushed since its last write, at most every
//! `turns.log_interval`. Followers — the client's own stream, and
//! `ResumeTurn` calls on this replica — deliver an event once it is
//! *released*: at once while the turn's stream is at most
//! `turns.stream_ahead` events ahead of what is stored, otherwise when the
//! log catches up ([`Release`]). So a client on any replica can resume from
//! its last seq, and a gateway that dies mid-turn leaves its partial answer
//! stored but for at most its last `stream_ahead` events (in practice the
//! last `log_interval`): the turn's row records `stream_ahead`, and the
//! replica that ends the lost turn numbers its `error` after them, so a
//! resuming client never gets a seq it already has. With `stream_ahead = 0`
//! an event reaches clients only once it is committed.
//!
//! The turn's last events (`error`, `complete`) are stored with its answer
//! in one transaction ([`crate::turn::flow`]); only then are they released, so a
//! `complete` always follows a stored answer. When the store fails, the turn
//! ends with `STORE_UNAVAILABLE` and its events are released uncommitted, so
//! the client learns what happened; what the store shows is then exactly
//! what was committed.
//!
//! With the event log off (`turns.event_log = false`) events are released
//! as they are pushed and only the answer is stored.

use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError, Weak};

use base64::{Engine, engine::general_purpose::STANDARD};
use parley_proto::gateway::v1::{ChatEvent, chat_event::Event};
use prost::Message;
use tokio::sync::{Notify, watch};
use tokio_util::sync::CancellationToken;

use crate::store::WireBatch;

/// How far followers may deliver, and what comes after.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Release {
    /// Events up to this seq may be delivered.
    pub upto: u64,
    /// What follows them.
    pub end: End,
}

/// What follows the released events.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    /// More will come.
    Open,
    /// Nothing: the released events end with the turn's `complete`.
    Done,
    /// This replica lost the turn (another replica ended it after its lease
    /// expired): the rest is in the store.
    Store,
}

/// Why the turn's events could not be stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// The store failed (disk full, connection lost...).
    Store,
    /// The turn is no longer this replica's: its lease expired and another
    /// replica ended it, or its conversation was deleted.
    Lost,
}

#[derive(Debug, Default)]
struct Inner {
    /// Every event of the turn so far; `events[i].seq == i + 1`.
    events: Vec<ChatEvent>,
    /// The seq of the last committed event.
    stored: u64,
    /// Listed in the event log's queue of journals to write.
    queued: bool,
    /// Part of the batch the event log is writing now.
    writing: bool,
    /// Set by [`Journal::close`]: the turn's end stores the rest.
    closing: bool,
    /// Why storing stopped, when it did.
    fault: Option<Fault>,
}

/// What stores journals' events: the replica's event log
/// (`crate::durable::eventlog`), which takes the batches of the journals queued on it
/// and settles them.
pub trait Writer: Send + Sync + std::fmt::Debug {
    /// Lists `journal` among those with events to store (each once).
    fn enqueue(&self, journal: Arc<Journal>);
    /// Asks for the next write now: a turn's stream waits for it.
    fn hurry(&self);
}

/// A running turn's events.
#[derive(Debug)]
pub struct Journal {
    turn_id: String,
    inner: Mutex<Inner>,
    release: watch::Sender<Release>,
    /// The replica's event log; `None` when events are not stored.
    log: Option<Arc<dyn Writer>>,
    /// How many events may be released ahead of the stored ones.
    ahead: u64,
    /// This journal, for queueing itself on the event log.
    me: Weak<Journal>,
    /// Woken when a write of this journal's events settles.
    settled: Notify,
    /// Cancelled when the turn's events cannot be stored: stops the turn.
    stop: OnceLock<CancellationToken>,
}

/// What a closed journal has not stored yet.
#[derive(Debug)]
pub struct Tail {
    /// The seq of the last committed event.
    pub stored: u64,
    /// The seq the next event gets.
    pub next_seq: u64,
}

fn lock(inner: &Mutex<Inner>) -> MutexGuard<'_, Inner> {
    inner.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Encodes events as a wire batch: base64 of the length-delimited
/// `ChatEvent`s.
pub fn encode(events: &[ChatEvent]) -> Option<WireBatch> {
    let first = events.first()?.seq;
    let last = events.last()?.seq;
    let mut bytes = Vec::with_capacity(events.iter().map(|e| e.encoded_len() + 4).sum());
    for event in events {
        // Writing into a Vec cannot fail.
        let _ = event.encode_length_delimited(&mut bytes);
    }
    Some(WireBatch {
        first_seq: first,
        last_seq: last,
        events: STANDARD.encode(bytes),
    })
}

/// Decodes a wire batch; `None` when it is not one.
pub fn decode(batch: &WireBatch) -> Option<Vec<ChatEvent>> {
    let bytes = STANDARD.decode(&batch.events).ok()?;
    let mut rest = bytes.as_slice();
    let mut events = Vec::new();
    while !rest.is_empty() {
        events.push(ChatEvent::decode_length_delimited(&mut rest).ok()?);
    }
    Some(events)
}

impl Journal {
    /// A journal whose events `log` stores, released at most `ahead` events
    /// before they are stored.
    pub fn logged(turn_id: &str, log: Arc<dyn Writer>, ahead: u64) -> Arc<Self> {
        Self::new(turn_id, Some(log), ahead)
    }

    /// A journal whose events are released as pushed and not stored.
    pub fn unlogged(turn_id: &str) -> Arc<Self> {
        Self::new(turn_id, None, 0)
    }

    /// The journal of a turn that continues after a pause, holding its
    /// stored `events` (seqs 1, 2, ... without gaps), all released; the
    /// turn's next event follows them. `log` stores the new ones.
    pub fn continued(
        turn_id: &str,
        log: Option<Arc<dyn Writer>>,
        ahead: u64,
        events: Vec<ChatEvent>,
    ) -> Arc<Self> {
        let journal = Self::new(turn_id, log, ahead);
        let upto = events.len() as u64;
        {
            let mut inner = lock(&journal.inner);
            inner.events = events;
            inner.stored = upto;
        }
        journal.release_upto(upto);
        journal
    }

    fn new(turn_id: &str, log: Option<Arc<dyn Writer>>, ahead: u64) -> Arc<Self> {
        Arc::new_cyclic(|me| Self {
            turn_id: turn_id.to_owned(),
            inner: Mutex::default(),
            release: watch::Sender::new(Release {
                upto: 0,
                end: End::Open,
            }),
            log,
            ahead,
            me: me.clone(),
            settled: Notify::new(),
            stop: OnceLock::new(),
        })
    }

    /// The turn.
    pub fn turn_id(&self) -> &str {
        &self.turn_id
    }

    /// Cancels `stop` when the turn's events cannot be stored (the store
    /// failed, or another replica ended the turn).
    pub fn stop_on_fault(&self, stop: CancellationToken) {
        let _ = self.stop.set(stop);
    }

    /// How far followers may deliver now.
    fn releasable(&self, inner: &Inner) -> u64 {
        let pushed = inner.events.len() as u64;
        if self.log.is_none() {
            return pushed;
        }
        pushed.min(inner.stored.saturating_add(self.ahead))
    }

    /// Moves the release position forward to `upto`.
    fn release_upto(&self, upto: u64) {
        self.release.send_if_modified(|release| {
            let moved = upto > release.upto && release.end == End::Open;
            if moved {
                release.upto = upto;
            }
            moved
        });
    }

    /// Adds the next event; returns its seq.
    pub fn push(&self, event: Event) -> u64 {
        let (seq, queue, blocked, upto) = {
            let mut inner = lock(&self.inner);
            let seq = inner.events.len() as u64 + 1;
            inner.events.push(ChatEvent {
                seq,
                event: Some(event),
            });
            let queue =
                self.log.is_some() && !inner.queued && !inner.closing && inner.fault.is_none();
            inner.queued |= queue;
            let upto = self.releasable(&inner);
            (seq, queue, upto < seq, upto)
        };
        if let Some(log) = &self.log {
            if queue && let Some(me) = self.me.upgrade() {
                log.enqueue(me);
            }
            if blocked {
                // A follower waits for the log: write it now.
                log.hurry();
            }
        }
        self.release_upto(upto);
        seq
    }

    /// The events to write next, for the event log: those after the stored
    /// ones, unless the turn is closing or storing failed.
    pub(super) fn take_batch(&self) -> Option<WireBatch> {
        let mut inner = lock(&self.inner);
        inner.queued = false;
        if inner.closing || inner.fault.is_some() {
            return None;
        }
        let from = usize::try_from(inner.stored).unwrap_or(usize::MAX);
        let batch = inner.events.get(from..).and_then(encode)?;
        inner.writing = true;
        Some(batch)
    }

    /// The event log's write of [`Journal::take_batch`] ended: stored
    /// through `Ok(last)`, or not at all.
    pub(super) fn settle(&self, written: Result<u64, Fault>) {
        let upto = {
            let mut inner = lock(&self.inner);
            inner.writing = false;
            match written {
                Ok(last) => inner.stored = inner.stored.max(last),
                Err(fault) => inner.fault = Some(fault),
            }
            self.releasable(&inner)
        };
        self.settled.notify_waiters();
        match written {
            Ok(_) => self.release_upto(upto),
            Err(_) => {
                if let Some(stop) = self.stop.get() {
                    stop.cancel();
                }
            }
        }
    }

    /// A receiver of the release position.
    pub fn subscribe(&self) -> watch::Receiver<Release> {
        self.release.subscribe()
    }

    /// Whether anyone follows the turn now.
    pub fn followed(&self) -> bool {
        self.release.receiver_count() > 0
    }

    /// Copies events `after+1 ..= upto`.
    pub fn events(&self, after: u64, upto: u64) -> Vec<ChatEvent> {
        let inner = lock(&self.inner);
        let from = usize::try_from(after).unwrap_or(usize::MAX);
        let to = usize::try_from(upto)
            .unwrap_or(usize::MAX)
            .min(inner.events.len());
        inner
            .events
            .get(from..to)
            .map(<[_]>::to_vec)
            .unwrap_or_default()
    }

    /// The seq of the last committed event, as the event log settled it.
    #[cfg(test)]
    pub(super) fn stored(&self) -> u64 {
        lock(&self.inner).stored
    }

    /// Why storing stopped, when it did.
    pub fn fault(&self) -> Option<Fault> {
        lock(&self.inner).fault
    }

    /// Stops storing the turn's events here (after a write in progress,
    /// which it waits for) and tells what is not stored yet: the turn's
    /// end stores it.
    pub async fn close(&self) -> Tail {
        loop {
            let settled = self.settled.notified();
            tokio::pin!(settled);
            settled.as_mut().enable();
            {
                let mut inner = lock(&self.inner);
                inner.closing = true;
                if !inner.writing {
                    return Tail {
                        stored: if self.log.is_some() {
                            inner.stored
                        } else {
                            inner.events.len() as u64
                        },
                        next_seq: inner.events.len() as u64 + 1,
                    };
                }
            }
            settled.await;
        }
    }

    /// The wire batch of the events after `stored` followed by `last`
    /// (numbered from the next seq), for the turn's final write.
    pub fn final_batch(&self, stored: u64, last: &[Event]) -> Option<WireBatch> {
        let inner = lock(&self.inner);
        let from = usize::try_from(stored).unwrap_or(usize::MAX);
        let mut events: Vec<ChatEvent> = inner
            .events
            .get(from..)
            .map(<[_]>::to_vec)
            .unwrap_or_default();
        let next = inner.events.len() as u64 + 1;
        events.extend((next..).zip(last).map(|(seq, event)| ChatEvent {
            seq,
            event: Some(event.clone()),
        }));
        encode(&events)
    }

    /// Adds the turn's last events and releases everything: the turn is
    /// over (stored, or not storable: see the module docs).
    pub fn finish(&self, last: Vec<Event>) {
        let upto = {
            let mut inner = lock(&self.inner);
            for event in last {
                let seq = inner.events.len() as u64 + 1;
                inner.events.push(ChatEvent {
                    seq,
                    event: Some(event),
                });
            }
            inner.events.len() as u64
        };
        self.release.send_replace(Release {
            upto,
            end: End::Done,
        });
    }

    /// This replica lost the turn: followers read the rest from the store.
    pub fn hand_to_store(&self) {
        let stored = lock(&self.inner).stored;
        self.release.send_replace(Release {
            upto: stored,
            end: End::Store,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(t: &str) -> Event {
        Event::TextDelta(t.into())
    }

    #[test]
    fn wire_batches_round_trip() {
        let events: Vec<ChatEvent> = (1..=3)
            .map(|seq| ChatEvent {
                seq,
                event: Some(text(&format!("part {seq}"))),
            })
            .collect();
        let batch = encode(&events).expect("not empty");
        assert_eq!((batch.first_seq, batch.last_seq), (1, 3));
        assert_eq!(decode(&batch), Some(events));
        assert_eq!(encode(&[]), None);
        let garbage = WireBatch {
            first_seq: 1,
            last_seq: 1,
            events: "%%".into(),
        };
        assert_eq!(decode(&garbage), None);
    }

    #[tokio::test]
    async fn without_the_log_events_are_released_as_pushed() {
        let journal = Journal::unlogged("t");
        let mut release = journal.subscribe();
        assert_eq!(journal.push(text("a")), 1);
        assert_eq!(journal.push(text("b")), 2);
        assert_eq!(release.borrow_and_update().upto, 2);
        let tail = journal.close().await;
        assert_eq!((tail.stored, tail.next_seq), (2, 3));
        journal.finish(vec![text("end")]);
        let last = *release.borrow_and_update();
        assert_eq!(
            last,
            Release {
                upto: 3,
                end: End::Done
            }
        );
        assert_eq!(journal.events(1, 3).len(), 2);
    }

    #[tokio::test]
    async fn the_final_batch_numbers_the_last_events_after_the_rest() {
        let journal = Journal::unlogged("t");
        journal.push(text("a"));
        journal.push(text("b"));
        let batch = journal
            .final_batch(1, &[text("c")])
            .expect("events to store");
        let events = decode(&batch).expect("decodes");
        let seqs: Vec<u64> = events.iter().map(|e| e.seq).collect();
        assert_eq!(seqs, [2, 3]);
    }
}
