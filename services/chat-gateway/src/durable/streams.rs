//! The event streams a client holds open: what each one holds while it is
//! open, and how a stream whose client stopped reading is let go.
//!
//! Every `Chat`, `ExecuteAction` and `ResumeTurn` stream holds a place
//! among this replica's `turns.max_streams` and, when a streams limit is
//! set, a lease in the store that counts it against its user's and
//! tenant's `streams` on every replica ([`crate::store::streams`]). Both
//! go when the stream ends or is dropped, or when it stalls: a client
//! that takes none of the events ready for it for `turns.follower_stall`
//! gets `SLOW_CONSUMER` at its next read, and its places are freed at the
//! stall. A stream is only polled while its client's HTTP/2 window has
//! room, so "not polled since an event was ready for it" is "not read".
//! An event is ready when one was handed out (the client may ask for the
//! next at once) or when the turn woke the stream with a new one.
//!
//! [`StreamLeases`] deletes the leases of closed streams in batches and
//! renews this replica's leases beside its turn leases.

use std::{
    pin::Pin,
    sync::{Arc, Mutex, PoisonError, Weak},
    task::{Context, Poll, Wake, Waker},
    time::Duration,
};

use futures::Stream;
use parley_proto::gateway::v1::ChatEvent;
use tokio::{
    sync::{OwnedSemaphorePermit, mpsc, oneshot},
    time::Instant,
};
use tokio_util::sync::CancellationToken;
use tonic::Status;

use super::EventStream;
use crate::{
    error::GatewayError,
    store::{Store, millis, quota::NewStream},
};

/// The store leases of this replica's streams.
#[derive(Debug)]
pub struct StreamLeases {
    store: Store,
    replica: String,
    /// How long a lease holds unless renewed.
    ttl: Duration,
    released: mpsc::UnboundedSender<String>,
    /// Taken by [`StreamLeases::run`].
    closed: Mutex<Option<mpsc::UnboundedReceiver<String>>>,
}

/// A stream's lease in the store; dropping it deletes the lease (soon,
/// in a batch).
#[derive(Debug)]
pub struct Lease {
    id: String,
    released: mpsc::UnboundedSender<String>,
}

impl Drop for Lease {
    fn drop(&mut self) {
        // The keeper is gone when the gateway stops: the lease expires.
        let _ = self.released.send(std::mem::take(&mut self.id));
    }
}

/// Most closed leases deleted in one write.
const RELEASE_BATCH: usize = 1024;

impl StreamLeases {
    /// The leases of `replica`'s streams, held `ttl` unless renewed.
    pub fn new(store: Store, replica: String, ttl: Duration) -> Self {
        let (released, closed) = mpsc::unbounded_channel();
        Self {
            store,
            replica,
            ttl,
            released,
            closed: Mutex::new(Some(closed)),
        }
    }

    /// A new lease's id and time to live, for the store.
    pub fn new_stream(&self) -> NewStream {
        NewStream {
            id: uuid::Uuid::new_v4().simple().to_string(),
            ttl_ms: millis(self.ttl),
        }
    }

    /// The guard of a lease the store took for `stream`.
    pub fn lease(&self, stream: &NewStream) -> Lease {
        Lease {
            id: stream.id.clone(),
            released: self.released.clone(),
        }
    }

    /// The replica whose leases these are.
    pub fn replica(&self) -> &str {
        &self.replica
    }

    /// Deletes the leases of closed streams as they close (those closed
    /// meanwhile in one write), and renews this replica's leases every
    /// `renew`, until `closing`.
    pub async fn run(self: Arc<Self>, renew: Duration, closing: CancellationToken) {
        let Some(mut closed) = self
            .closed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
        else {
            return;
        };
        let mut tick = tokio::time::interval(renew);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut batch = Vec::new();
        loop {
            tokio::select! {
                () = closing.cancelled() => return,
                count = closed.recv_many(&mut batch, RELEASE_BATCH) => {
                    if count == 0 {
                        return;
                    }
                    let ids = std::mem::take(&mut batch);
                    if let Err(error) = self.store.release_streams(ids).await {
                        // They expire instead.
                        tracing::warn!(%error, "cannot release closed streams' leases");
                    }
                }
                _ = tick.tick() => {
                    match self.store.renew_streams(&self.replica, millis(self.ttl)).await {
                        Ok(0) => {}
                        Ok(expired) => tracing::info!(leases = expired, "deleted expired stream leases"),
                        Err(error) => tracing::warn!(%error, "cannot renew this replica's stream leases"),
                    }
                }
            }
        }
    }
}

/// What an open stream holds.
#[derive(Debug)]
pub struct Admitted {
    /// Its place among `turns.max_streams`.
    pub permit: OwnedSemaphorePermit,
    /// Its lease in the store, when a streams limit is set.
    pub lease: Option<Lease>,
}

#[derive(Debug)]
struct Watch {
    /// Released at the stream's end or stall.
    held: Option<Admitted>,
    /// Since when an event has been ready for the client (handed out, or
    /// the turn woke the stream) without a read.
    waiting_since: Option<Instant>,
    stalled: bool,
}

type Shared = Arc<Mutex<Watch>>;

fn lock(watch: &Mutex<Watch>) -> std::sync::MutexGuard<'_, Watch> {
    watch.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A client's stream holding `admitted` until it ends, is dropped or
/// stalls for `stall` (then it ends with `SLOW_CONSUMER`).
struct Held {
    inner: EventStream,
    watch: Shared,
    stall: Duration,
    done: bool,
    /// The waker the inner stream was last given: it marks the watch when
    /// the turn has an event ready, then wakes the client's task; kept
    /// while the client's task stays the same.
    waker: Option<(Waker, Waker)>,
    /// Dropped with the stream: ends its watchdog.
    _ended: oneshot::Sender<()>,
}

/// Wakes the client's task for a ready event, noting since when the event
/// has waited: a client whose HTTP/2 window is full does not poll again,
/// and so does not take it.
struct ReadyWaker {
    watch: Weak<Mutex<Watch>>,
    client: Waker,
}

impl Wake for ReadyWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        if let Some(watch) = self.watch.upgrade() {
            lock(&watch).waiting_since.get_or_insert_with(Instant::now);
        }
        self.client.wake_by_ref();
    }
}

impl Held {
    /// The waker to give the inner stream for the client's `task`.
    fn ready_waker(&mut self, task: &Waker) -> Waker {
        match &self.waker {
            Some((client, ready)) if client.will_wake(task) => ready.clone(),
            _ => {
                let ready = Waker::from(Arc::new(ReadyWaker {
                    watch: Arc::downgrade(&self.watch),
                    client: task.clone(),
                }));
                self.waker = Some((task.clone(), ready.clone()));
                ready
            }
        }
    }
}

/// `stream`, holding `admitted` (see [`Held`]).
pub fn held(stream: EventStream, admitted: Admitted, stall: Duration) -> EventStream {
    let watch = Arc::new(Mutex::new(Watch {
        held: Some(admitted),
        waiting_since: None,
        stalled: false,
    }));
    let (ended_tx, ended_rx) = oneshot::channel();
    tokio::spawn(watchdog(Arc::downgrade(&watch), stall, ended_rx));
    Box::pin(Held {
        inner: stream,
        watch,
        stall,
        done: false,
        waker: None,
        _ended: ended_tx,
    })
}

/// Marks the stream stalled once an event has waited `stall` for a read,
/// and frees what it holds.
async fn watchdog(watch: Weak<Mutex<Watch>>, stall: Duration, mut ended: oneshot::Receiver<()>) {
    let mut wait = stall;
    loop {
        tokio::select! {
            _ = &mut ended => return,
            () = tokio::time::sleep(wait) => {}
        }
        let Some(watch) = watch.upgrade() else { return };
        let mut state = lock(&watch);
        let now = Instant::now();
        match state.waiting_since {
            Some(since) if now.saturating_duration_since(since) >= stall => {
                state.stalled = true;
                let freed = state.held.take();
                drop(state);
                drop(freed);
                tracing::info!(
                    stall_secs = stall.as_secs(),
                    "dropped a stream whose client stopped reading"
                );
                return;
            }
            Some(since) => wait = stall - now.saturating_duration_since(since),
            None => wait = stall,
        }
        if state.held.is_none() {
            return;
        }
    }
}

impl Stream for Held {
    type Item = Result<ChatEvent, Status>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if self.done {
            return Poll::Ready(None);
        }
        {
            let mut state = lock(&self.watch);
            state.waiting_since = None;
            if state.stalled {
                drop(state);
                self.done = true;
                let stall = self.stall;
                return Poll::Ready(Some(Err(GatewayError::SlowConsumer { stall }.into())));
            }
        }
        let ready = self.ready_waker(cx.waker());
        match self
            .inner
            .as_mut()
            .poll_next(&mut Context::from_waker(&ready))
        {
            Poll::Ready(Some(item)) => {
                lock(&self.watch).waiting_since = Some(Instant::now());
                Poll::Ready(Some(item))
            }
            Poll::Ready(None) => {
                self.done = true;
                let freed = lock(&self.watch).held.take();
                drop(freed);
                Poll::Ready(None)
            }
            Poll::Pending => Poll::Pending,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use futures::StreamExt;
    use parley_proto::gateway::v1::ChatEvent;
    use tokio::sync::Semaphore;

    use super::*;

    fn events(count: u64) -> EventStream {
        Box::pin(futures::stream::iter(
            (1..=count).map(|seq| Ok(ChatEvent { seq, event: None })),
        ))
    }

    fn admitted(places: &Arc<Semaphore>) -> Admitted {
        Admitted {
            permit: places.clone().try_acquire_owned().expect("a place"),
            lease: None,
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_stream_nobody_reads_is_dropped_with_slow_consumer_after_the_stall() {
        let places = Arc::new(Semaphore::new(1));
        let stall = Duration::from_secs(30);
        let mut stream = held(events(3), admitted(&places), stall);
        // One event read, then none for a while: the place is still held
        // just before the stall...
        assert_eq!(stream.next().await.expect("first").expect("ok").seq, 1);
        tokio::time::sleep(stall - Duration::from_secs(1)).await;
        assert_eq!(places.available_permits(), 0);
        // ...and freed once it has passed, with nothing read meanwhile.
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert_eq!(places.available_permits(), 1, "freed at the stall");
        let status = stream
            .next()
            .await
            .expect("an item")
            .expect_err("slow consumer");
        assert_eq!(status.code(), tonic::Code::ResourceExhausted);
        assert_eq!(
            parley_grpc::status::reason(&status).as_deref(),
            Some("SLOW_CONSUMER")
        );
        assert!(stream.next().await.is_none(), "then it ends");
    }

    #[tokio::test(start_paused = true)]
    async fn an_event_that_arrives_while_the_client_has_stopped_polling_counts_as_unread() {
        let places = Arc::new(Semaphore::new(1));
        let stall = Duration::from_secs(30);
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let quiet: EventStream = Box::pin(tokio_stream::wrappers::UnboundedReceiverStream::new(rx));
        let mut stream = held(quiet, admitted(&places), stall);
        // The client polled while the turn had nothing, then its window
        // filled: it polls no more. The turn's next event wakes it...
        assert!(futures::poll!(stream.next()).is_pending());
        tx.send(Ok(ChatEvent {
            seq: 1,
            event: None,
        }))
        .expect("send");
        // ...and, untaken for the stall, frees its place.
        tokio::time::sleep(stall + Duration::from_secs(1)).await;
        assert_eq!(places.available_permits(), 1, "freed at the stall");
        let status = stream
            .next()
            .await
            .expect("an item")
            .expect_err("slow consumer");
        assert_eq!(
            parley_grpc::status::reason(&status).as_deref(),
            Some("SLOW_CONSUMER")
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_stream_waiting_for_its_turn_or_read_in_time_is_not_a_slow_consumer() {
        let places = Arc::new(Semaphore::new(1));
        let stall = Duration::from_secs(30);
        // The turn has nothing for a long time: the stream waits on it, not
        // on its client.
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let quiet: EventStream = Box::pin(tokio_stream::wrappers::UnboundedReceiverStream::new(rx));
        let mut stream = held(quiet, admitted(&places), stall);
        let reader = tokio::spawn(async move {
            let mut seqs = Vec::new();
            while let Some(item) = stream.next().await {
                seqs.push(item.expect("no error").seq);
            }
            seqs
        });
        tokio::time::sleep(stall * 3).await;
        tx.send(Ok(ChatEvent {
            seq: 1,
            event: None,
        }))
        .expect("send");
        // A client that reads every 20 s never stalls.
        for seq in 2..=4 {
            tokio::time::sleep(Duration::from_secs(20)).await;
            tx.send(Ok(ChatEvent { seq, event: None })).expect("send");
        }
        drop(tx);
        assert_eq!(reader.await.expect("join"), vec![1, 2, 3, 4]);
        assert_eq!(places.available_permits(), 1, "freed at its end");
    }
}
