//! The replica's event log writer: one task that stores the pending wire
//! events of every turn running here.
//!
//! A turn's [`Journal`] queues itself here when it has events to store. The
//! writer takes everything queued and writes it in one transaction — one
//! statement that checks and advances the turns it still holds, one insert
//! of a batch per turn — then waits `turns.log_interval` before the next
//! write, so a busy replica stores many events per statement instead of a
//! transaction per event. A turn whose stream would otherwise wait for the
//! log (`turns.stream_ahead` reached) cuts the wait short. A write that
//! fails stops every turn in it with `STORE_UNAVAILABLE`; a turn the replica
//! no longer holds (its lease expired and another replica ended it) is
//! stopped as lost.

use std::{
    sync::{Arc, Mutex, PoisonError},
    time::Duration,
};

use tokio::{sync::Notify, time::Instant};
use tokio_util::sync::CancellationToken;

use super::journal::{Fault, Journal, Writer};
use crate::store::{Store, TurnBatch};

/// Stores the wire events of this replica's turns.
#[derive(Debug)]
pub struct EventLog {
    store: Store,
    replica: String,
    /// Least time between two writes.
    interval: Duration,
    /// Journals with events to store, each listed once.
    queue: Mutex<Vec<Arc<Journal>>>,
    /// Woken when a journal is queued.
    queued: Notify,
    /// Woken when a turn's stream waits for the log.
    hurry: Notify,
}

impl EventLog {
    /// Starts the writer of `replica`; it stops when `closing` is cancelled.
    pub fn start(
        store: Store,
        replica: String,
        interval: Duration,
        closing: CancellationToken,
    ) -> Arc<Self> {
        let log = Arc::new(Self {
            store,
            replica,
            interval,
            queue: Mutex::default(),
            queued: Notify::new(),
            hurry: Notify::new(),
        });
        tokio::spawn(log.clone().run(closing));
        log
    }

    async fn run(self: Arc<Self>, closing: CancellationToken) {
        loop {
            tokio::select! {
                () = closing.cancelled() => return,
                () = self.queued.notified() => {}
            }
            let started = Instant::now();
            self.write().await;
            tokio::select! {
                () = closing.cancelled() => return,
                () = tokio::time::sleep_until(started + self.interval) => {}
                () = self.hurry.notified() => {}
            }
        }
    }

    /// Writes whatever the queued journals have not stored yet.
    async fn write(&self) {
        let queued =
            std::mem::take(&mut *self.queue.lock().unwrap_or_else(PoisonError::into_inner));
        let mut journals = Vec::with_capacity(queued.len());
        let mut batches = Vec::with_capacity(queued.len());
        for journal in queued {
            if let Some(batch) = journal.take_batch() {
                batches.push(TurnBatch {
                    turn_id: journal.turn_id().to_owned(),
                    batch,
                });
                journals.push(journal);
            }
        }
        if journals.is_empty() {
            return;
        }
        let lasts: Vec<u64> = batches.iter().map(|turn| turn.batch.last_seq).collect();
        match self.store.append_wire(&self.replica, batches).await {
            Ok(held) => {
                for ((journal, last), held) in journals.iter().zip(lasts).zip(held) {
                    journal.settle(if held { Ok(last) } else { Err(Fault::Lost) });
                }
            }
            Err(error) => {
                tracing::error!(%error, turns = journals.len(), "cannot store the turns' events");
                for journal in &journals {
                    journal.settle(Err(Fault::Store));
                }
            }
        }
    }
}

impl Writer for EventLog {
    fn enqueue(&self, journal: Arc<Journal>) {
        self.queue
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(journal);
        self.queued.notify_one();
    }

    fn hurry(&self) {
        self.hurry.notify_one();
    }
}

#[cfg(test)]
mod tests {
    use parley_proto::gateway::v1::chat_event::Event;

    use super::*;
    use crate::{
        durable::journal::{self, End},
        store::{BeginTurn, EventBody, NewTurn, StoreOptions, StoredPage},
    };

    const REPLICA: &str = "replica-a";

    async fn store() -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().expect("temp dir");
        let url = format!("sqlite://{}?mode=rwc", dir.path().join("l.db").display());
        let store = Store::open(&url, &StoreOptions::default())
            .await
            .expect("open");
        (dir, store)
    }

    /// This replica's event log on `store`, writing at most every
    /// `interval`, and what stops it.
    fn start(store: &Store, interval: Duration) -> (Arc<EventLog>, CancellationToken) {
        let closing = CancellationToken::new();
        let log = EventLog::start(store.clone(), REPLICA.into(), interval, closing.clone());
        (log, closing)
    }

    /// Begins turn `id` (in its own conversation) on `replica`.
    async fn begin(store: &Store, id: &str, replica: &str) {
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
                conversation_id: &format!("c-{id}"),
                create: true,
                turn_id: id,
                replica,
                lease_ttl_ms: 60_000,
                stream_ahead: 0,
                request_id: None,
                parent: None,
                user_message: &message,
                title: "hello",
                admission: &Default::default(),
            })
            .await
            .expect("begin");
        assert!(matches!(begun, BeginTurn::Started { .. }), "{begun:?}");
    }

    fn text(t: &str) -> Event {
        Event::TextDelta(t.into())
    }

    /// The seqs of `turn`'s stored wire events.
    async fn stored_seqs(store: &Store, turn: &str) -> Vec<u64> {
        store
            .wire_events("alice", turn, 0)
            .await
            .expect("wire")
            .iter()
            .flat_map(|batch| journal::decode(batch).expect("decodes"))
            .map(|event| event.seq)
            .collect()
    }

    /// Waits until the journal releases through `upto` (or ends).
    async fn released(journal: &Journal, upto: u64) -> journal::Release {
        let mut release = journal.subscribe();
        let reached = release
            .wait_for(|release| release.upto >= upto || release.end != End::Open)
            .await
            .expect("journal alive");
        *reached
    }

    #[tokio::test]
    async fn events_stream_ahead_of_the_log_and_are_stored_together() {
        let (_dir, store) = store().await;
        // A long interval: what is stored after the first write waits for it.
        let (log, closing) = start(&store, Duration::from_secs(3600));
        begin(&store, "t1", REPLICA).await;
        begin(&store, "t2", REPLICA).await;
        let one = Journal::logged("t1", log.clone(), 2);
        let two = Journal::logged("t2", log.clone(), 2);
        one.push(text("a"));
        // The first write goes at once, then the interval holds the next.
        // Waited for until the journal knows (the row is visible a moment
        // before): pushed earlier, "c" would be more than 2 ahead of
        // nothing stored and hurry the next write.
        tokio::time::timeout(Duration::from_secs(5), async {
            while one.stored() < 1 {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await
        .expect("the first event stored at once");
        assert_eq!(stored_seqs(&store, "t1").await, [1]);
        one.push(text("b"));
        one.push(text("c"));
        two.push(text("x"));
        // Released while unstored, up to `ahead` past the stored seq 1.
        assert_eq!(released(&one, 3).await.upto, 3);
        assert_eq!(released(&two, 1).await.upto, 1);
        assert_eq!(stored_seqs(&store, "t1").await, [1]);
        // A fourth event would be more than 2 ahead: the log is written now,
        // both turns in that write.
        one.push(text("d"));
        assert_eq!(released(&one, 4).await.upto, 4);
        assert_eq!(stored_seqs(&store, "t1").await, [1, 2, 3, 4]);
        assert_eq!(stored_seqs(&store, "t2").await, [1]);
        let tail = one.close().await;
        assert_eq!((tail.stored, tail.next_seq), (4, 5));
        closing.cancel();
    }

    #[tokio::test]
    async fn with_nothing_ahead_only_stored_events_are_released() {
        let (_dir, store) = store().await;
        let (log, closing) = start(&store, Duration::from_millis(1));
        begin(&store, "t1", REPLICA).await;
        let journal = Journal::logged("t1", log, 0);
        let release = journal.subscribe();
        journal.push(text("a"));
        assert_eq!(release.borrow().upto, 0, "not before it is stored");
        assert_eq!(released(&journal, 1).await.upto, 1);
        assert_eq!(stored_seqs(&store, "t1").await, [1]);
        closing.cancel();
    }

    #[tokio::test]
    async fn a_turn_this_replica_lost_or_a_failing_store_stops_the_turn() {
        let (_dir, store) = store().await;
        let (log, closing) = start(&store, Duration::from_millis(1));
        // Another replica holds this turn.
        begin(&store, "theirs", "replica-b").await;
        let lost = Journal::logged("theirs", log.clone(), 0);
        let stop = CancellationToken::new();
        lost.stop_on_fault(stop.clone());
        lost.push(text("a"));
        tokio::time::timeout(Duration::from_secs(5), stop.cancelled())
            .await
            .expect("stopped");
        assert_eq!(lost.fault(), Some(Fault::Lost));
        assert!(stored_seqs(&store, "theirs").await.is_empty());

        begin(&store, "mine", REPLICA).await;
        store.faults().fail_writes(true);
        let failing = Journal::logged("mine", log, 0);
        let stop = CancellationToken::new();
        failing.stop_on_fault(stop.clone());
        failing.push(text("a"));
        tokio::time::timeout(Duration::from_secs(5), stop.cancelled())
            .await
            .expect("stopped");
        assert_eq!(failing.fault(), Some(Fault::Store));
        assert_eq!(failing.subscribe().borrow().upto, 0, "nothing released");
        store.faults().fail_writes(false);
        closing.cancel();
    }
}
