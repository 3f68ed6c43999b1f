//! What this replica does for the turns of every replica, in the
//! background: renew the leases of its own turns, end the turns whose
//! lease expired (their replica died), prune old wire logs, and act on what
//! the other replicas say (PostgreSQL NOTIFY: stop a turn, a followed turn
//! stored more).
//!
//! Every `lease_renew` the replica renews all its running turns in one
//! statement, in a task of its own: no sweep, prune or notice delays it. A renewed turn with `cancel_requested` set is stopped here
//! (the NOTIFY may have been lost); one this process no longer runs is an
//! orphan whose task could not store its end (the store failed), and is
//! ended now as `STORE_UNAVAILABLE`. Every `lease_renew` it also sweeps:
//! each running turn whose lease has expired is ended as `REPLICA_LOST`
//! with the partial answer its clients saw ([`crate::turn::recover`]), at most
//! `turns.sweep_batch` a sweep (a full sweep runs again at once, between
//! the notices). The sweep runs at start-up
//! too; on SQLite, whose file belongs to one process, turns of any other
//! replica id are ended at start-up without waiting for their lease.

use std::{sync::Arc, time::Duration};

use tokio::sync::mpsc;

use super::{Engine, decide::Closing};
use crate::durable::manager::StopCause;
use crate::store::{ReapIf, StoreError, listen::Notice, millis, now_ms};
use crate::turn::recover;

/// How often old wire logs, quota days and abandoned uploads are pruned.
const PRUNE_EVERY: Duration = Duration::from_secs(60);

/// What one sweep did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Swept {
    /// How many turns it ended.
    pub ended: usize,
    /// Whether it stopped at `turns.sweep_batch`: more may have expired.
    pub more: bool,
}

/// A new id for this replica: the host name (the pod name on Kubernetes)
/// and a random suffix, so a restarted process is a new replica.
pub fn replica_id() -> String {
    let host = std::env::var("HOSTNAME")
        .ok()
        .filter(|host| !host.trim().is_empty())
        .unwrap_or_else(|| "gateway".to_owned());
    let suffix = uuid::Uuid::new_v4().simple().to_string();
    format!("{host}-{}", &suffix[..8])
}

impl Engine {
    /// Renews this replica's leases and handles what the renewal found.
    pub async fn renew_leases(&self) -> Result<(), StoreError> {
        let ttl = millis(self.shared.config.lease_ttl);
        let held = self
            .shared
            .store
            .renew_leases(&self.shared.replica, ttl)
            .await?;
        let grace = self.shared.config.abandoned_turn_grace;
        let unfollowed = if grace.is_zero() {
            Vec::new()
        } else {
            self.turns.unfollowed(grace, std::time::Instant::now())
        };
        for turn in held {
            if self.turns.runs(&turn.id) {
                if turn.cancel_requested {
                    self.turns.stop_turn(&turn.id, StopCause::Cancelled);
                } else if unfollowed.contains(&turn.id) && !turn.watched {
                    self.abandon(&turn.id);
                }
                continue;
            }
            // Checked again: the turn may have ended since the renewal.
            let ended = self
                .shared
                .store
                .reap(
                    &turn.id,
                    ReapIf::HeldBy(self.shared.replica.clone()),
                    recover::finalize(recover::store_unavailable()),
                )
                .await?;
            if ended {
                tracing::warn!(turn = %turn.id, "ended a turn of this replica whose end could not be stored");
                self.watchers.wake(&turn.id);
            }
        }
        Ok(())
    }

    /// Cancels a turn nobody has followed for `turns.abandoned_turn_grace`
    /// (its client went away and nobody resumed it, here or elsewhere): it
    /// ends as cancelled with its partial answer stored.
    fn abandon(&self, turn_id: &str) {
        if self
            .turns
            .stop_turn(turn_id, StopCause::Abandoned)
            .is_some()
        {
            tracing::info!(
                turn = %turn_id,
                grace_secs = self.shared.config.abandoned_turn_grace.as_secs(),
                "cancelled a turn nobody followed any more"
            );
        }
    }

    /// Ends at most `turns.sweep_batch` turns whose lease expired.
    pub async fn sweep(&self) -> Result<Swept, StoreError> {
        let batch = self.shared.config.sweep_batch.max(1);
        let expired = self.shared.store.expired_turns(batch).await?;
        let more = expired.len() >= batch;
        let mut ended = 0;
        for turn_id in expired {
            if self
                .shared
                .store
                .reap(
                    &turn_id,
                    ReapIf::LeaseExpired,
                    recover::finalize(recover::replica_lost()),
                )
                .await?
            {
                tracing::warn!(turn = %turn_id, "ended a turn whose replica stopped renewing its lease");
                self.watchers.wake(&turn_id);
                ended += 1;
            }
        }
        Ok(Swept { ended, more })
    }

    /// At start-up on SQLite: ends every turn another process left running.
    pub async fn recover_sqlite(&self) -> Result<usize, StoreError> {
        let mut ended = 0;
        for turn_id in self.shared.store.running_turns().await? {
            if self
                .shared
                .store
                .reap(
                    &turn_id,
                    ReapIf::NotHeldBy(self.shared.replica.clone()),
                    recover::finalize(recover::replica_lost()),
                )
                .await?
            {
                ended += 1;
            }
        }
        if ended > 0 {
            tracing::warn!(
                turns = ended,
                "ended turns left running by a gateway that stopped without draining"
            );
        }
        Ok(ended)
    }

    fn on_notice(&self, notice: Notice) {
        match notice {
            Notice::TurnEvents(turn_id) => self.watchers.wake(&turn_id),
            Notice::Cancel(turn_id) => {
                if self
                    .turns
                    .stop_turn(&turn_id, StopCause::Cancelled)
                    .is_some()
                {
                    tracing::info!(turn = %turn_id, "turn cancelled from another replica");
                }
            }
            Notice::Lost => self.watchers.wake_all(),
        }
    }

    /// Renews this replica's leases every `lease_renew` until
    /// [`Engine::close`].
    async fn renew_until_closed(self: Arc<Self>) {
        let mut renew = tokio::time::interval(self.shared.config.lease_renew);
        renew.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = self.closing.cancelled() => return,
                _ = renew.tick() => {
                    if let Err(error) = self.renew_leases().await {
                        tracing::warn!(%error, "cannot renew this replica's turn leases");
                    }
                }
            }
        }
    }

    /// Closes the paused turns whose pause expired (`turns.input_ttl`), a
    /// batch every `lease_renew`, until [`Engine::close`]; every replica
    /// does, and the store gives each turn to one.
    async fn close_expired_until_closed(self: Arc<Self>) {
        let mut tick = tokio::time::interval(self.shared.config.lease_renew);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let batch = u32::try_from(self.shared.config.sweep_batch.max(1)).unwrap_or(u32::MAX);
        loop {
            tokio::select! {
                () = self.closing.cancelled() => return,
                _ = tick.tick() => {}
            }
            let expired = match self.shared.store.expired_pauses(batch).await {
                Ok(expired) => expired,
                Err(error) => {
                    tracing::warn!(%error, "cannot read expired paused turns");
                    continue;
                }
            };
            for pause in expired {
                if let Err(error) = self
                    .close_paused(&pause.owner, &pause.turn_id, Closing::Expired)
                    .await
                {
                    tracing::warn!(%error, turn = %pause.turn_id, "cannot close an expired paused turn");
                }
            }
        }
    }

    /// Spawns this replica's background work until [`Engine::close`]:
    /// the store's notices and sweeps ([`Engine::run_replica`]) and the
    /// renewal of the stream leases.
    pub fn spawn_background(self: &Arc<Self>) {
        tokio::spawn(self.clone().run_replica(self.shared.store.listen()));
        tokio::spawn(
            self.stream_leases
                .clone()
                .run(self.shared.config.lease_renew, self.closing.clone()),
        );
    }

    /// Runs the background work until [`Engine::close`].
    pub async fn run_replica(self: Arc<Self>, mut notices: Option<mpsc::Receiver<Notice>>) {
        tokio::spawn(self.clone().renew_until_closed());
        tokio::spawn(self.clone().close_expired_until_closed());
        let mut sweep = tokio::time::interval(self.shared.config.lease_renew);
        sweep.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut prune = tokio::time::interval(PRUNE_EVERY);
        prune.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = self.closing.cancelled() => return,
                Some(notice) = async {
                    match notices.as_mut() {
                        Some(rx) => rx.recv().await,
                        None => std::future::pending().await,
                    }
                } => self.on_notice(notice),
                _ = sweep.tick() => match self.sweep().await {
                    // More expired: the next sweep comes at once, after
                    // any notices that wait.
                    Ok(Swept { more: true, .. }) => sweep.reset_immediately(),
                    Ok(_) => {}
                    Err(error) => tracing::warn!(%error, "cannot end turns whose lease expired"),
                },
                _ = prune.tick() => {
                    let before = now_ms() - millis(self.shared.config.resume_retention);
                    match self.shared.store.prune_wire(before).await {
                        Ok(0) => {}
                        Ok(pruned) => tracing::info!(batches = pruned, "pruned wire events past the resume window"),
                        Err(error) => tracing::warn!(%error, "cannot prune old wire events"),
                    }
                    if let Err(error) = self.shared.store.prune_quota_days(now_ms()).await {
                        tracing::warn!(%error, "cannot prune old quota token counts");
                    }
                    if let Err(error) = self.shared.store.prune_admissions(now_ms()).await {
                        tracing::warn!(%error, "cannot prune old quota admissions");
                    }
                    // Uploads whose gateway died mid-stream: begun twice
                    // their timeout ago (room for replicas' clocks), none
                    // is still running.
                    let abandoned =
                        now_ms() - 2 * millis(self.shared.attachments.upload_timeout);
                    match self.shared.store.sweep_uploads(abandoned).await {
                        Ok(0) => {}
                        Ok(swept) => tracing::info!(swept, "deleted uploads their gateway left unfinished"),
                        Err(error) => tracing::warn!(%error, "cannot delete unfinished uploads"),
                    }
                    // Files never sent with a message, past their time.
                    let idle = now_ms() - millis(self.shared.attachments.unattached_ttl);
                    match self.shared.store.sweep_unattached(idle).await {
                        Ok(0) => {}
                        Ok(swept) => tracing::info!(swept, "deleted attachments never sent (attachments.unattached_ttl)"),
                        Err(error) => tracing::warn!(%error, "cannot delete attachments never sent"),
                    }
                    // Their objects, and those whose deletion failed before.
                    match self.shared.blobs.purge_pending().await {
                        Ok(0) => {}
                        Ok(purged) => tracing::info!(purged, "deleted the objects of deleted attachments"),
                        Err(error) => tracing::warn!(%error, "cannot read the attachment objects to delete"),
                    }
                }
            }
        }
    }
}
