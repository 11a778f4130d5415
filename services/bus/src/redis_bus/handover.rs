//! Partitions moving between processes. One given up (its lease lost, or beyond the fair
//! share) is forgotten at once, then, in the background, its agents are passivated once what
//! the reader handed over for it is acknowledged, and only then is its lease released (kept
//! renewed until then). The agents of one taken
//! are resumed, since their acknowledged work waits in their durable inboxes.

use super::status::lease_changed;
use super::{RedisBus, partition_index};
use crate::streams::be;
use agentd_ports::Inbound;
use std::collections::BTreeSet;
use std::sync::atomic::Ordering;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

/// Why a partition is being handed over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Handing {
    /// Its lease names another process now.
    Lost,
    /// Beyond the fair share: its lease is kept (renewed) until its agents here have stopped,
    /// then released.
    Surplus,
}

impl RedisBus {
    /// Gives up the partitions whose lease was `lost` and the `surplus` beyond the fair share:
    /// forgets them at once, then, in the background (a lease round goes on meanwhile), waits
    /// for the reads and deliveries under way, passivates their agents and releases the
    /// surplus leases. A partition is not taken again while it is being handed over.
    pub(super) fn give_up(
        self: Arc<Self>,
        system: &Arc<dyn Inbound>,
        lost: &[u32],
        surplus: &[u32],
    ) {
        let gone: Vec<u32> = lost.iter().chain(surplus.iter()).copied().collect();
        if let Ok(mut h) = self.handing_over.write() {
            h.extend(lost.iter().map(|k| (*k, Handing::Lost)));
            h.extend(surplus.iter().map(|k| (*k, Handing::Surplus)));
        }
        remove_all(&self.owned, &gone);
        // A partition taken again later starts a fresh drain and claim; until then its
        // pending entries belong to whoever owns it.
        remove_all(&self.draining, &gone);
        remove_all(&self.to_claim, &gone);
        if let Ok(mut r) = self.renewed.write() {
            for k in &gone {
                r.remove(k);
            }
        }
        let system = system.clone();
        let (lost, surplus) = (lost.to_vec(), surplus.to_vec());
        actix_rt::spawn(async move {
            // What the reader handed over for these partitions is durably queued (or left
            // pending) before their agents stop: a delivery refused by a stopping agent would
            // be routed again, to the partition's next owner, behind newer entries.
            self.wait_for_read_round().await;
            self.wait_for_deliveries(&gone).await;
            let partitions = self.cfg.partitions;
            let set: BTreeSet<u32> = gone.iter().copied().collect();
            let stopped = system
                .passivate(Box::new(move |id| {
                    set.contains(&partition_index(id, partitions))
                }))
                .await;
            for k in &surplus {
                if let Err(e) = self.release_lease(*k).await {
                    tracing::warn!(partition = *k, error = %be(e), "releasing a partition's lease failed; it expires");
                }
            }
            if let Ok(mut h) = self.handing_over.write() {
                for k in &gone {
                    h.remove(k);
                }
            }
            lease_changed("lost", lost.len());
            lease_changed("released", surplus.len());
            tracing::info!(lost = ?lost, released = ?surplus, passivated = stopped, "partitions moved away");
        });
    }

    /// Resumes the agents of the partitions just `taken`, in the background. Agents stopped
    /// when a partition moved (here, after a lost lease, or in a dead owner) hold acknowledged
    /// work only in their durable inboxes: activated, or they would wait for another message
    /// to arrive.
    pub(super) fn resume_taken(&self, system: &Arc<dyn Inbound>, taken: BTreeSet<u32>) {
        let system = system.clone();
        let partitions = self.cfg.partitions;
        actix_rt::spawn(async move {
            let filter = move |id: &str| taken.contains(&partition_index(id, partitions));
            match system.recover_where(Box::new(filter)).await {
                Ok(n) => tracing::info!(agents = n, "agents of taken partitions resumed"),
                Err(e) => {
                    tracing::warn!(error = %e, "resuming the agents of taken partitions failed")
                }
            }
        });
    }

    /// Waits until a read under way has come back (it blocks at most the takeover margin; this
    /// waits at most half). A partition given up is left out of every read started after it
    /// was dropped from `owned`; what a read already under way returns for it stays pending
    /// here, and is claimed by the next owner, who can only take the lease once this process
    /// releases it, after this wait.
    pub(super) async fn wait_for_read_round(&self) {
        let seen = self.read_rounds.load(Ordering::SeqCst);
        let deadline = Instant::now() + Duration::from_millis(self.cfg.lease_ms / 2);
        while self.reading.load(Ordering::SeqCst)
            && self.read_rounds.load(Ordering::SeqCst) == seen
            && Instant::now() < deadline
        {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// Waits (at most half a lease) until no entry of `partitions` is between the router and
    /// its acknowledgement.
    pub(super) async fn wait_for_deliveries(&self, partitions: &[u32]) {
        let deadline = Instant::now() + Duration::from_millis(self.cfg.lease_ms / 2);
        let busy = || {
            partitions.iter().any(|k| {
                self.delivering
                    .get(*k as usize)
                    .is_some_and(|n| n.load(Ordering::SeqCst) > 0)
            })
        };
        while busy() && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }
}

/// Removes partitions `gone` from `set`.
fn remove_all(set: &RwLock<BTreeSet<u32>>, gone: &[u32]) {
    if let Ok(mut s) = set.write() {
        for k in gone {
            s.remove(k);
        }
    }
}
