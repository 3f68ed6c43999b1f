//! PostgreSQL notifications between gateway replicas: a turn stored wire
//! events or ended ([`super::TURN_EVENTS_CHANNEL`]), or a replica is asked to
//! stop a turn ([`super::TURN_CANCEL_CHANNEL`]).
//!
//! One `LISTEN` connection per replica (sqlx's `PgListener`, beside the
//! `sqlx::any` pool), read by one task that hands each notification to the
//! caller. When the connection drops, notifications sent meanwhile are lost:
//! the task reconnects and reports [`Notice::Lost`], so the caller re-reads
//! what it waits for. SQLite has one process, so nothing listens there.

use std::time::Duration;

use sqlx::postgres::PgListener;
use tokio::sync::mpsc;

use super::{Store, TURN_CANCEL_CHANNEL, TURN_EVENTS_CHANNEL};

/// What another replica said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Notice {
    /// A turn stored wire events or ended.
    TurnEvents(String),
    /// A turn should stop.
    Cancel(String),
    /// The listening connection was lost and restored; notifications may
    /// have been missed.
    Lost,
}

/// Longest pause between reconnection attempts.
const MAX_BACKOFF: Duration = Duration::from_secs(5);

impl Store {
    /// Starts listening to the other replicas; `None` on SQLite. The task
    /// ends when the receiver is dropped.
    pub fn listen(&self) -> Option<mpsc::Receiver<Notice>> {
        if !self.notifies() {
            return None;
        }
        let (tx, rx) = mpsc::channel(1024);
        tokio::spawn(run(self.url.clone(), tx));
        Some(rx)
    }
}

async fn connect(url: &str) -> Result<PgListener, sqlx::Error> {
    let mut listener = PgListener::connect(url).await?;
    listener
        .listen_all([TURN_EVENTS_CHANNEL, TURN_CANCEL_CHANNEL])
        .await?;
    Ok(listener)
}

async fn run(url: String, tx: mpsc::Sender<Notice>) {
    let mut backoff = Duration::from_millis(100);
    loop {
        let mut listener = match connect(&url).await {
            Ok(listener) => listener,
            Err(error) => {
                tracing::warn!(%error, "cannot listen to the other replicas; retrying");
                tokio::select! {
                    () = tokio::time::sleep(backoff) => {}
                    () = tx.closed() => return,
                }
                backoff = (backoff * 2).min(MAX_BACKOFF);
                continue;
            }
        };
        backoff = Duration::from_millis(100);
        // Anything sent before this connection listened may be missed.
        if tx.send(Notice::Lost).await.is_err() {
            return;
        }
        loop {
            let received = tokio::select! {
                received = listener.try_recv() => received,
                () = tx.closed() => return,
            };
            let notice = match received {
                Ok(Some(notification)) => {
                    let turn = notification.payload().to_owned();
                    if notification.channel() == TURN_CANCEL_CHANNEL {
                        Notice::Cancel(turn)
                    } else {
                        Notice::TurnEvents(turn)
                    }
                }
                // The connection was lost; `try_recv` reconnects next time.
                Ok(None) => Notice::Lost,
                Err(error) => {
                    tracing::warn!(%error, "the replicas' notification connection failed");
                    break;
                }
            };
            if tx.send(notice).await.is_err() {
                return;
            }
        }
    }
}
