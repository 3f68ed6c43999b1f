//! A running turn's events: numbered, stored, then released to whoever
//! follows the turn.
//!
//! The turn pushes its `ChatEvent`s here and never waits for a client. A
//! flusher task stores them in the turn's wire log (`turn_events`) in
//! batches: whatever queued while the previous batch was being committed
//! goes in the next one, so an idle turn commits each event at once and a
//! busy gateway commits many events per transaction (on SQLite the store's
//! group commit also shares one transaction among turns). Followers — the
//! client's own stream, and `ResumeTurn` calls on this replica — deliver an
//! event only once it is committed ([`Release`]): whatever a client has
//! seen is in the store, so a client can resume from its last seq on any
//! replica, and a gateway that dies mid-turn leaves exactly what its clients
//! saw as the partial answer.
//!
//! The turn's last events (`error`, `complete`) are stored with its answer
//! in one transaction ([`super::flow`]); only then are they released. When
//! the store fails, the turn ends with `STORE_UNAVAILABLE` and its events
//! are released uncommitted, so the client learns what happened; what the
//! store shows is then exactly what was committed.
//!
//! With the event log off (`turns.event_log = false`) events are released
//! as they are pushed and only the answer is stored.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use base64::{Engine, engine::general_purpose::STANDARD};
use parley_proto::gateway::v1::{ChatEvent, chat_event::Event};
use prost::Message;
use tokio::sync::{Notify, watch};
use tokio_util::sync::CancellationToken;

use crate::store::{Store, WireBatch};

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
    /// Set when the flusher must stop after its current batch.
    closing: bool,
    /// Why storing stopped, when it did.
    fault: Option<Fault>,
}

/// A running turn's events.
#[derive(Debug)]
pub struct Journal {
    turn_id: String,
    inner: Mutex<Inner>,
    release: watch::Sender<Release>,
    /// Wakes the flusher.
    flush: Notify,
    /// Whether events are stored before they are released.
    logged: bool,
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
    /// A journal for a turn; `logged` stores events before releasing them.
    pub fn new(turn_id: &str, logged: bool) -> Arc<Self> {
        Arc::new(Self {
            turn_id: turn_id.to_owned(),
            inner: Mutex::default(),
            release: watch::Sender::new(Release {
                upto: 0,
                end: End::Open,
            }),
            flush: Notify::new(),
            logged,
        })
    }

    /// The turn.
    pub fn turn_id(&self) -> &str {
        &self.turn_id
    }

    /// Adds the next event; returns its seq.
    pub fn push(&self, event: Event) -> u64 {
        let seq = {
            let mut inner = lock(&self.inner);
            let seq = inner.events.len() as u64 + 1;
            inner.events.push(ChatEvent {
                seq,
                event: Some(event),
            });
            seq
        };
        if self.logged {
            self.flush.notify_one();
        } else {
            self.release.send_modify(|release| release.upto = seq);
        }
        seq
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

    /// Why storing stopped, when it did.
    pub fn fault(&self) -> Option<Fault> {
        lock(&self.inner).fault
    }

    /// Starts the flusher: it stores pushed events in batches as `replica`
    /// until [`Journal::close`]; on a store failure or a lost turn it
    /// records the fault and cancels `stop`.
    pub fn start_flusher(
        self: &Arc<Self>,
        store: Store,
        replica: String,
        stop: CancellationToken,
    ) -> Option<tokio::task::JoinHandle<()>> {
        if !self.logged {
            return None;
        }
        let journal = self.clone();
        Some(tokio::spawn(async move {
            journal.flush_loop(&store, &replica, &stop).await;
        }))
    }

    async fn flush_loop(&self, store: &Store, replica: &str, stop: &CancellationToken) {
        loop {
            // Armed before looking: a push after the look wakes us.
            let notified = self.flush.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let (batch, closing) = {
                let inner = lock(&self.inner);
                let from = usize::try_from(inner.stored).unwrap_or(usize::MAX);
                (inner.events.get(from..).and_then(encode), inner.closing)
            };
            let Some(batch) = batch else {
                if closing {
                    return;
                }
                notified.await;
                continue;
            };
            let last = batch.last_seq;
            let fault = match store.append_wire(&self.turn_id, replica, batch).await {
                Ok(true) => {
                    lock(&self.inner).stored = last;
                    self.release.send_modify(|release| release.upto = last);
                    continue;
                }
                Ok(false) => Fault::Lost,
                Err(error) => {
                    tracing::error!(%error, turn = %self.turn_id, "cannot store the turn's events");
                    Fault::Store
                }
            };
            lock(&self.inner).fault = Some(fault);
            stop.cancel();
            return;
        }
    }

    /// Stops the flusher (after its batch in flight, which `flusher` is
    /// awaited for) and tells what is not stored yet.
    pub async fn close(&self, flusher: Option<tokio::task::JoinHandle<()>>) -> Tail {
        lock(&self.inner).closing = true;
        self.flush.notify_one();
        if let Some(flusher) = flusher {
            let _ = flusher.await;
        }
        let inner = lock(&self.inner);
        Tail {
            stored: if self.logged {
                inner.stored
            } else {
                inner.events.len() as u64
            },
            next_seq: inner.events.len() as u64 + 1,
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
        let journal = Journal::new("t", false);
        let mut release = journal.subscribe();
        assert_eq!(journal.push(text("a")), 1);
        assert_eq!(journal.push(text("b")), 2);
        assert_eq!(release.borrow_and_update().upto, 2);
        let tail = journal.close(None).await;
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
        let journal = Journal::new("t", true);
        journal.push(text("a"));
        journal.push(text("b"));
        let batch = journal
            .final_batch(1, &[text("c")])
            .expect("events to store");
        let events = decode(&batch).expect("decodes");
        let seqs: Vec<u64> = events.iter().map(|e| e.seq).collect();
        assert_eq!(seqs, [2, 3]);
        // Nothing was released: nothing was stored.
        assert_eq!(journal.subscribe().borrow().upto, 0);
    }
}
