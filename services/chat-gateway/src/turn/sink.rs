//! Where a turn's events go: the client's stream, numbered 1, 2, 3... per
//! turn. A client that went away closes the channel; the turn notices, stops
//! sending and carries on (its answer is still stored). A client that is
//! slow makes the turn wait (bounded buffer) until the turn is stopped or its
//! deadline passes, so it can never hold a turn forever.

use parley_proto::gateway::v1::{ChatEvent, chat_event::Event};
use std::time::Duration;

use tokio::{sync::mpsc, time::Instant};
use tokio_util::sync::CancellationToken;
use tonic::Status;

/// How long a stopped turn waits for a slow client to take its last events.
const LAST_EVENTS_WAIT: Duration = Duration::from_secs(1);

/// The sending half of a turn's event stream.
pub type EventSender = mpsc::Sender<Result<ChatEvent, Status>>;

/// Numbers events and sends them while the client listens.
#[derive(Debug)]
pub struct EventSink {
    tx: Option<EventSender>,
    seq: u64,
    stop: CancellationToken,
    deadline: Instant,
}

impl EventSink {
    /// A sink over `tx`; sending gives up waiting once `stop` is cancelled
    /// or `deadline` passes.
    pub fn new(tx: EventSender, stop: CancellationToken, deadline: Instant) -> Self {
        Self {
            tx: Some(tx),
            seq: 0,
            stop,
            deadline,
        }
    }

    /// Whether the client still listens.
    pub fn is_open(&self) -> bool {
        self.tx.as_ref().is_some_and(|tx| !tx.is_closed())
    }

    /// The number of the last event.
    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// Sends the next event.
    pub async fn send(&mut self, event: Event) {
        self.seq += 1;
        let Some(tx) = &self.tx else { return };
        let message = Ok(ChatEvent {
            seq: self.seq,
            event: Some(event),
        });
        // The common case, the client keeps up: there is room, no wait.
        let sent = match tx.try_send(message) {
            Ok(()) => true,
            Err(mpsc::error::TrySendError::Closed(_)) => false,
            Err(mpsc::error::TrySendError::Full(message)) => self.wait_to_send(tx, message).await,
        };
        if !sent {
            tracing::debug!(seq = self.seq, "client went away; the turn continues");
            self.tx = None;
        }
    }

    /// Waits for room for a slow client; false when it went away. Gives up
    /// (dropping the event) when the turn is stopped or its deadline passes.
    async fn wait_to_send(&self, tx: &EventSender, message: Result<ChatEvent, Status>) -> bool {
        if self.stop.is_cancelled() || Instant::now() >= self.deadline {
            // The turn is ending: deliver its last events if the client
            // takes them soon, never wait longer.
            return match tokio::time::timeout(LAST_EVENTS_WAIT, tx.send(message)).await {
                Ok(sent) => sent.is_ok(),
                Err(_) => true,
            };
        }
        tokio::select! {
            biased;
            sent = tx.send(message) => sent.is_ok(),
            // The event is dropped; the turn goes on to store its answer.
            () = self.stop.cancelled() => true,
            () = tokio::time::sleep_until(self.deadline) => true,
        }
    }
}
