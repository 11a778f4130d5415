//! Membership and leases: every lease round a process heartbeats in `{<ns>:members}`, renews the
//! leases it holds, gives up what it lost and what exceeds its fair share
//! (`ceil(partitions / live)`), and takes free partitions up to that share (`SET NX PX`).
//!
//! Self-fencing: a partition counts as held only while its lease was taken or renewed within
//! half the lease time by this process's own clock ([`RedisBus::fresh`]); a partition that
//! went stale and is renewed again is claimed and drained like one just taken.

use super::RedisBus;
use crate::streams::{be, now_ms};
use agentd_actors::AgentSystem;
use agentd_actors::fnv1a64;
use agentd_proto::AgentdError;
use agentd_store::RedisConnection;
use redis::cmd;
use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

impl RedisBus {
    /// Runs a lease round every quarter lease until the bus stops.
    pub(super) async fn lease_loop(self: Arc<Self>, system: AgentSystem) {
        // Four renewals per lease: one late round does not make a partition stale.
        let tick = Duration::from_millis((self.cfg.lease_ms / 4).max(25));
        while !self.stopping.load(Ordering::SeqCst) {
            tokio::time::sleep(tick).await;
            if self.stopping.load(Ordering::SeqCst) {
                break;
            }
            if let Err(e) = self.lease_round(&system).await {
                tracing::warn!(error = %e, "lease round failed; retrying");
            }
        }
    }

    /// One round: heartbeat, renew what we hold, drop what we lost, take our fair share of
    /// free partitions, give up the surplus.
    pub(super) async fn lease_round(&self, system: &AgentSystem) -> Result<(), AgentdError> {
        let mut con = self.con.clone();
        let live = self.heartbeat(&mut con).await?;
        let fair = (self.cfg.partitions as usize).div_ceil(live.max(1));
        let lost = self.renew_owned(&mut con).await?;
        let mut owned_now = self.owned().len() - lost.len();
        // Surplus: give back the highest partitions beyond the fair share.
        let mut surplus = Vec::new();
        if owned_now > fair {
            let mut mine: Vec<u32> = self
                .owned()
                .into_iter()
                .filter(|k| !lost.contains(k))
                .collect();
            mine.sort_unstable();
            surplus = mine.split_off(fair);
            owned_now = fair;
        }
        if !lost.is_empty() || !surplus.is_empty() {
            self.give_up(system, &lost, &surplus, &mut con).await?;
        }
        if owned_now < fair {
            let taken = self.take_free(fair, owned_now, &mut con).await?;
            if !taken.is_empty() {
                self.resume_taken(system, taken);
            }
        }
        if self.offers_holds() {
            self.trim_owned(&mut con).await;
        }
        Ok(())
    }

    /// Trims every owned partition's stream below what is still pending (see [`held`]).
    ///
    /// [`held`]: super::held
    async fn trim_owned(&self, con: &mut RedisConnection) {
        for k in self.owned() {
            self.trim(k, con).await;
        }
    }

    /// Notes this process live in `{<ns>:members}`, drops members silent for two lease times,
    /// and answers how many are live.
    async fn heartbeat(&self, con: &mut RedisConnection) -> Result<usize, AgentdError> {
        let now = now_ms();
        let members = self.keys.members();
        Ok(redis::pipe()
            .cmd("ZADD")
            .arg(&members)
            .arg(now)
            .arg(&self.cfg.process_id)
            .ignore()
            .cmd("ZREMRANGEBYSCORE")
            .arg(&members)
            .arg("-inf")
            .arg(now.saturating_sub(2 * self.cfg.lease_ms))
            .ignore()
            .cmd("ZCARD")
            .arg(&members)
            .query_async::<(usize,)>(con)
            .await
            .map_err(be)?
            .0)
    }

    /// Renews the lease of every partition owned; answers those whose lease is no longer
    /// this process's.
    async fn renew_owned(&self, con: &mut RedisConnection) -> Result<Vec<u32>, AgentdError> {
        let mut lost = Vec::new();
        for k in self.owned() {
            let sent = Instant::now();
            let kept: i64 = self
                .scripts
                .renew
                .key(self.keys.lease(k))
                .arg(&self.cfg.process_id)
                .arg(self.cfg.lease_ms)
                .invoke_async(con)
                .await
                .map_err(be)?;
            if kept == 0 {
                lost.push(k);
            } else {
                self.lease_held(k, sent);
            }
        }
        Ok(lost)
    }

    /// Takes free partitions until this process owns `fair` of them (it owns `owned_now`);
    /// answers those taken. Each is claimed and drained before it is read or delivered to.
    async fn take_free(
        &self,
        fair: usize,
        mut owned_now: usize,
        con: &mut RedisConnection,
    ) -> Result<BTreeSet<u32>, AgentdError> {
        let mut taken = BTreeSet::new();
        // Start at a process-specific offset so concurrent starters rarely collide.
        let offset = (fnv1a64(self.cfg.process_id.as_bytes())
            % u64::from(self.cfg.partitions.max(1))) as u32;
        for i in 0..self.cfg.partitions {
            if owned_now >= fair {
                break;
            }
            let k = (offset + i) % self.cfg.partitions;
            if self.owned().contains(&k) {
                continue;
            }
            let sent = Instant::now();
            let got: Option<String> = cmd("SET")
                .arg(self.keys.lease(k))
                .arg(&self.cfg.process_id)
                .arg("NX")
                .arg("PX")
                .arg(self.cfg.lease_ms)
                .query_async(con)
                .await
                .map_err(be)?;
            if got.is_some() {
                if let Ok(mut r) = self.renewed.write() {
                    r.insert(k, sent);
                }
                self.claim_and_drain(k);
                if let Ok(mut o) = self.owned.write() {
                    o.insert(k);
                }
                owned_now += 1;
                taken.insert(k);
                lease_changed("taken", 1);
                tracing::info!(partition = k, "partition lease taken");
            }
        }
        Ok(taken)
    }

    /// Deletes partition `k`'s lease if it still names this process.
    pub(super) async fn release_lease(
        &self,
        k: u32,
        con: &mut RedisConnection,
    ) -> redis::RedisResult<i64> {
        self.scripts
            .release
            .key(self.keys.lease(k))
            .arg(&self.cfg.process_id)
            .invoke_async(con)
            .await
    }

    /// Whether partition `k`'s lease was taken or renewed within half the lease time: only
    /// then does this process read it or deliver to its agents directly (see the module doc).
    pub(super) fn fresh(&self, k: u32) -> bool {
        let stale_after = Duration::from_millis(self.cfg.lease_ms / 2);
        self.renewed
            .read()
            .is_ok_and(|r| r.get(&k).is_some_and(|t| t.elapsed() < stale_after))
    }

    /// Records a lease taken or renewed by a request sent at `sent`. A partition that had gone
    /// stale meanwhile is claimed and drained again first (what it read then is pending here,
    /// and direct deliveries must not overtake what waits in its stream).
    fn lease_held(&self, k: u32, sent: Instant) {
        if !self.fresh(k) {
            self.claim_and_drain(k);
        }
        if let Ok(mut r) = self.renewed.write() {
            r.insert(k, sent);
        }
    }
}

/// Counts `n` lease changes of kind `change` (`taken`, `lost`, `released`).
pub(super) fn lease_changed(change: &str, n: usize) {
    agentd_actors::metrics::global().inc(
        "agentd_lease_changes_total",
        "Partition lease changes.",
        &[("change", change)],
        n as f64,
    );
}
