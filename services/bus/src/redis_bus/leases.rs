//! Membership and leases. Every lease round (a sixteenth of the lease) a process renews the
//! leases it holds, all at once, on a connection of its own ([`Lease`]); heartbeats in
//! `{<ns>:members}` on its heartbeat connection, which it registers there; gives up what it
//! lost and what exceeds its fair share (`ceil(partitions / live)`); and takes partitions up to
//! that share: free ones, and those of a process found gone.
//!
//! Self-fencing: a partition counts as held only while its lease was renewed within the fence
//! time (a quarter of the lease) by this process's own clock ([`RedisBus::fresh`]); a partition
//! that went stale and is renewed again is claimed and drained like one just taken.
//!
//! Takeover: a process whose heartbeat is late and whose heartbeat connection is gone from
//! Redis (`CLIENT LIST ID`: a process killed loses its connections at once) is *gone*: it is
//! dropped from the member set, and its leases are taken (the `TAKE` script) as soon as it has
//! not renewed them for the fence time and a margin — when it has fenced itself even if it is
//! alive and merely cut off from Redis. A process that stalls with its connection open keeps
//! its leases until they expire, as before. So the lease, the self-fence and the takeover move
//! together: a dead process's partitions move within about the fence time, with the default
//! 5 s lease in about 1.5 s.

use super::RedisBus;
use super::handover::Handing;
use super::status::lease_changed;
use super::times::LeaseTimes;
use crate::blocking::BlockingConnection;
use crate::streams::be;
use agentd_ports::Inbound;
use agentd_ports::fnv1a64;
use agentd_proto::AgentdError;
use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// The members as one heartbeat saw them, by the Redis clock (ms).
struct Members {
    /// When the heartbeat ran.
    now: u64,
    /// Each member's last heartbeat.
    beats: HashMap<String, u64>,
    /// Each member's heartbeat connection (its client id on the member set's node).
    clients: HashMap<String, i64>,
}

/// The connection a process heartbeats on, to the node of the member set: its client id there
/// is registered with each heartbeat, and its absence tells the others this process is gone.
pub(super) struct Heartbeats {
    con: BlockingConnection,
    /// The client id of a connection to one Redis (on a cluster, the node's connection knows
    /// its own).
    single_id: Option<i64>,
}

impl Heartbeats {
    async fn connect(bus: &RedisBus) -> Result<Self, AgentdError> {
        let mut con = BlockingConnection::connect(&bus.cfg.target)
            .await
            .map_err(be)?;
        let single_id = match con.blocked_client() {
            Some(_) => None,
            None => Some(
                redis::cmd("CLIENT")
                    .arg("ID")
                    .query_async(&mut con)
                    .await
                    .map_err(be)?,
            ),
        };
        Ok(Heartbeats { con, single_id })
    }

    fn client_id(&self) -> i64 {
        self.single_id
            .or_else(|| self.con.blocked_client().map(|(_, _, id)| id))
            .unwrap_or(0)
    }
}

impl RedisBus {
    /// Runs lease rounds until the bus stops: every lease round, or sooner when a process found
    /// gone will have been silent long enough for its partitions to be taken.
    pub(super) async fn lease_loop(self: Arc<Self>, system: Arc<dyn Inbound>) {
        let times = self.times();
        let mut next = times.round;
        while !self.stopping.load(Ordering::SeqCst) {
            tokio::time::sleep(next).await;
            if self.stopping.load(Ordering::SeqCst) {
                break;
            }
            next = match self.clone().lease_round(&system).await {
                Ok(next) => next,
                Err(e) => {
                    tracing::warn!(error = %e, "lease round failed; retrying");
                    times.round
                }
            };
        }
    }

    /// The lease's derived times (see [`LeaseTimes`]).
    pub(super) fn times(&self) -> LeaseTimes {
        LeaseTimes::of(self.cfg.lease_ms)
    }

    /// One round: renew what we hold, heartbeat, find who is gone, give up what we lost and
    /// the surplus, take our fair share. Answers when the next round should run. Nothing in a
    /// round waits longer than a round for Redis (a node that does not answer costs its own
    /// partitions a renewal, not the others theirs), and giving partitions up goes on in the
    /// background.
    pub(super) async fn lease_round(
        self: Arc<Self>,
        system: &Arc<dyn Inbound>,
    ) -> Result<Duration, AgentdError> {
        let times = self.times();
        // Renewals first, then the heartbeat: a member's heartbeat is never older than its
        // renewals, so one found gone by its heartbeat has leases at least as old.
        let lost = self.renew_owned(times).await;
        self.renew_handed_over(times).await;
        let steady = self.in_contact_within(times.round * 3);
        let members = self.heartbeat(times).await;
        let trim_round = self.trims_this_round();
        let Some(members) = members else {
            // No view of the members: what was lost is given up, nothing is taken.
            if !lost.is_empty() {
                self.clone().give_up(system, &lost, &[]);
            }
            return Err(AgentdError::new(
                agentd_proto::ErrorCode::Unavailable,
                "redis: no heartbeat within a lease round",
            ));
        };
        let (gone, next) = if steady {
            self.find_gone(&members, times).await
        } else {
            // Back from a gap of its own: whoever seems silent may have been cut off by the
            // same failure and be reconnecting; judged in the next round.
            (Vec::new(), times.round)
        };
        self.forget(&members, &gone).await;
        let live = members.beats.len().saturating_sub(gone.len()).max(1);
        let fair = (self.cfg.partitions as usize).div_ceil(live);
        let owned: Vec<u32> = self
            .owned()
            .into_iter()
            .filter(|k| !lost.contains(k))
            .collect();
        // Surplus: give back the highest partitions beyond the fair share.
        let surplus = if owned.len() > fair {
            let mut mine = owned.clone();
            mine.sort_unstable();
            mine.split_off(fair)
        } else {
            Vec::new()
        };
        if !lost.is_empty() || !surplus.is_empty() {
            self.clone().give_up(system, &lost, &surplus);
        }
        let owned_now = owned.len() - surplus.len();
        if owned_now < fair {
            let taken = self.take(fair - owned_now, &gone, times).await;
            if !taken.is_empty() {
                self.resume_taken(system, taken);
                self.wake_reader();
            }
        }
        if trim_round && self.offers_holds() {
            self.trim_owned();
        }
        Ok(next)
    }

    /// Whether this round trims the owned partitions' streams: about every quarter lease.
    fn trims_this_round(&self) -> bool {
        self.lease_rounds
            .fetch_add(1, Ordering::SeqCst)
            .is_multiple_of(4)
    }

    /// Trims every owned partition's stream below what is still pending (see [`held`]), in
    /// the background.
    ///
    /// [`held`]: super::held
    fn trim_owned(self: &Arc<Self>) {
        let me = self.clone();
        actix_rt::spawn(async move {
            let mut con = me.con.clone();
            for k in me.owned() {
                me.trim(k, &mut con).await;
            }
        });
    }

    /// Renews partition `k`'s lease for this process, waiting a round at most: `0` when the
    /// lease is no longer this process's.
    async fn renew(
        &self,
        k: u32,
        times: LeaseTimes,
    ) -> Result<redis::RedisResult<i64>, tokio::time::error::Elapsed> {
        let mut con = self.lease_con.clone();
        tokio::time::timeout(
            times.wait(),
            self.scripts
                .renew
                .key(self.keys.lease(k))
                .arg(&self.cfg.process_id)
                .arg(self.cfg.lease_ms)
                .invoke_async::<i64>(&mut con),
        )
        .await
    }

    /// Renews the lease of every owned partition, all at once, each waiting a round at most;
    /// answers those whose lease is no longer this process's. A renewal that fails or does not
    /// answer in time leaves its partition to go stale if it keeps failing.
    async fn renew_owned(&self, times: LeaseTimes) -> Vec<u32> {
        let renewals = self.owned().into_iter().map(|k| async move {
            let sent = Instant::now();
            (k, sent, self.renew(k, times).await)
        });
        let mut lost = Vec::new();
        for (k, sent, kept) in futures::future::join_all(renewals).await {
            match kept {
                Ok(Ok(0)) => lost.push(k),
                Ok(Ok(_)) => self.lease_held(k, sent),
                Ok(Err(e)) => {
                    tracing::debug!(partition = k, error = %e, "lease renewal failed")
                }
                Err(_) => tracing::debug!(partition = k, "lease renewal not answered in time"),
            }
        }
        lost
    }

    /// Keeps the leases of the partitions being handed over (beyond the fair share) until
    /// they are released: no one else takes one while its agents here are still stopping.
    async fn renew_handed_over(&self, times: LeaseTimes) {
        let handing: Vec<u32> = self
            .handing_over
            .read()
            .map(|h| {
                h.iter()
                    .filter(|(_, why)| **why == Handing::Surplus)
                    .map(|(k, _)| *k)
                    .collect()
            })
            .unwrap_or_default();
        let renewals = handing.into_iter().map(|k| async move {
            let _ = self.renew(k, times).await;
        });
        futures::future::join_all(renewals).await;
    }

    /// Whether this process's last heartbeat reached Redis within `within`.
    pub(super) fn in_contact_within(&self, within: Duration) -> bool {
        self.last_heartbeat
            .lock()
            .ok()
            .and_then(|t| *t)
            .is_some_and(|t| t.elapsed() <= within)
    }

    /// Heartbeats on the heartbeat connection, waiting a round's wait at most: the members as
    /// Redis has them now, or `None` if it did not answer. Without a connection (lost, or
    /// never made) it connects one in the background and answers `None` this round: a round
    /// never waits for a connection.
    async fn heartbeat(self: &Arc<Self>, times: LeaseTimes) -> Option<Members> {
        self.heartbeat_within(times.wait()).await
    }

    /// [`Self::heartbeat`], waiting `wait` at most.
    async fn heartbeat_within(self: &Arc<Self>, wait: Duration) -> Option<Members> {
        let mut slot = self.heartbeats.lock().await;
        let Some(hb) = slot.as_mut() else {
            drop(slot);
            self.reconnect_heartbeats();
            return None;
        };
        let client = hb.client_id();
        type Reply = (u64, Vec<(String, u64)>, HashMap<String, i64>);
        let beat = tokio::time::timeout(
            wait,
            self.scripts
                .heartbeat
                .key(self.keys.members())
                .key(self.keys.members_clients())
                .arg(&self.cfg.process_id)
                .arg(client)
                .arg(self.cfg.lease_ms)
                .invoke_async::<Reply>(&mut hb.con),
        )
        .await;
        match beat {
            Ok(Ok((now, beats, clients))) => {
                if let Ok(mut t) = self.last_heartbeat.lock() {
                    *t = Some(Instant::now());
                }
                Some(Members {
                    now,
                    beats: beats.into_iter().collect(),
                    clients,
                })
            }
            Ok(Err(e)) => {
                tracing::debug!(error = %e, "heartbeat failed; reconnecting");
                *slot = None;
                drop(slot);
                self.reconnect_heartbeats();
                None
            }
            // Slow, not broken: the connection is kept (a late answer is dropped by it).
            Err(_) => {
                tracing::debug!("heartbeat not answered within a round");
                None
            }
        }
    }

    /// Connects the heartbeat connection and heartbeats once before the first lease round,
    /// patiently (its node found, its script loaded there), failing if Redis cannot be
    /// reached, as the start does.
    pub(super) async fn connect_heartbeats(self: &Arc<Self>) -> Result<(), AgentdError> {
        let hb = Heartbeats::connect(self).await?;
        *self.heartbeats.lock().await = Some(hb);
        match self.heartbeat_within(Duration::from_secs(10)).await {
            Some(_) => Ok(()),
            None => Err(AgentdError::new(
                agentd_proto::ErrorCode::Unavailable,
                "redis: the first heartbeat got no answer",
            )),
        }
    }

    /// Connects the heartbeat connection again in the background, unless that is under way.
    fn reconnect_heartbeats(self: &Arc<Self>) {
        if self.heartbeats_connecting.swap(true, Ordering::SeqCst) {
            return;
        }
        let me = self.clone();
        actix_rt::spawn(async move {
            match Heartbeats::connect(&me).await {
                Ok(hb) => *me.heartbeats.lock().await = Some(hb),
                Err(e) => tracing::debug!(error = %e, "connecting the heartbeat connection failed"),
            }
            me.heartbeats_connecting.store(false, Ordering::SeqCst);
        });
    }

    /// The members gone: silent for the fence time and the margin, with their heartbeat
    /// connection gone from Redis. Answers them, and when the next round should run: at the
    /// latest when a member silent and without its connection now will have been silent that
    /// long.
    async fn find_gone(&self, members: &Members, times: LeaseTimes) -> (Vec<String>, Duration) {
        let late: Vec<(&String, u64)> = members
            .beats
            .iter()
            .filter(|(m, _)| **m != self.cfg.process_id)
            .map(|(m, beat)| (m, members.now.saturating_sub(*beat)))
            .filter(|(_, silent)| *silent > times.round.as_millis() as u64)
            .collect();
        if late.is_empty() {
            return (Vec::new(), times.round);
        }
        let ids: Vec<i64> = late
            .iter()
            .filter_map(|(m, _)| members.clients.get(*m).copied())
            .collect();
        let connected = self.connected(&ids, times).await;
        let Some(connected) = connected else {
            return (Vec::new(), times.round);
        };
        let takeover_ms = times.takeover_age().as_millis() as u64;
        let mut gone = Vec::new();
        let mut next = times.round;
        for (m, silent) in late {
            // A member that registered no connection (an agentd of an earlier version, whose
            // self-fence is later) is never judged gone: its leases expire.
            let present = members
                .clients
                .get(m)
                .is_none_or(|id| connected.contains(id));
            if present {
                // Stalled or frozen with its connection open: its leases expire.
                continue;
            }
            if silent >= takeover_ms {
                gone.push(m.clone());
            } else {
                next = next.min(Duration::from_millis(takeover_ms - silent + 5));
            }
        }
        (gone, next)
    }

    /// Which of the client ids `ids` are connected to the member set's node now (`None` if it
    /// did not answer within a round).
    async fn connected(&self, ids: &[i64], times: LeaseTimes) -> Option<BTreeSet<i64>> {
        if ids.is_empty() {
            return Some(BTreeSet::new());
        }
        let mut slot = self.heartbeats.lock().await;
        let hb = slot.as_mut()?;
        let mut list = redis::cmd("CLIENT");
        list.arg("LIST").arg("ID");
        for id in ids {
            list.arg(*id);
        }
        let listed: String = tokio::time::timeout(times.wait(), list.query_async(&mut hb.con))
            .await
            .ok()?
            .ok()?;
        Some(
            listed
                .lines()
                .filter_map(|l| {
                    l.split_whitespace()
                        .find_map(|f| f.strip_prefix("id="))
                        .and_then(|id| id.parse().ok())
                })
                .collect(),
        )
    }

    /// Drops the members found gone from the member set (unless one heartbeat meanwhile), so
    /// every process counts them out of the fair share.
    async fn forget(&self, members: &Members, gone: &[String]) {
        if gone.is_empty() {
            return;
        }
        let mut slot = self.heartbeats.lock().await;
        let Some(hb) = slot.as_mut() else { return };
        for m in gone {
            let beat = members.beats.get(m).copied().unwrap_or(0);
            let dropped: redis::RedisResult<i64> = self
                .scripts
                .forget
                .key(self.keys.members())
                .key(self.keys.members_clients())
                .arg(m)
                .arg(beat)
                .invoke_async(&mut hb.con)
                .await;
            tracing::info!(process = %m, silent_ms = members.now.saturating_sub(beat), dropped = dropped.is_ok_and(|n| n == 1), "a process gone from Redis: its partitions are taken over");
        }
    }

    /// Takes up to `wanted` partitions: free ones, and those of the processes `gone` whose
    /// leases are old enough. Every candidate's lease is read at once, then those that may be
    /// taken are taken at once, each waiting a round at most. Answers those taken; each is
    /// claimed and drained before it is read or delivered to.
    async fn take(&self, wanted: usize, gone: &[String], times: LeaseTimes) -> BTreeSet<u32> {
        let handing: BTreeSet<u32> = self
            .handing_over
            .read()
            .map(|h| h.keys().copied().collect())
            .unwrap_or_default();
        let owned = self.owned();
        // Start at a process-specific offset so concurrent starters rarely collide.
        let offset = (fnv1a64(self.cfg.process_id.as_bytes())
            % u64::from(self.cfg.partitions.max(1))) as u32;
        let candidates: Vec<u32> = (0..self.cfg.partitions)
            .map(|i| (offset + i) % self.cfg.partitions)
            .filter(|k| !owned.contains(k) && !handing.contains(k))
            .collect();
        let holders = futures::future::join_all(candidates.iter().map(|k| async move {
            let mut con = self.lease_con.clone();
            let holder = tokio::time::timeout(
                times.wait(),
                redis::cmd("GET")
                    .arg(self.keys.lease(*k))
                    .query_async::<Option<String>>(&mut con),
            )
            .await;
            (*k, holder)
        }))
        .await;
        let takeable: Vec<u32> = holders
            .into_iter()
            .filter_map(|(k, holder)| match holder {
                Ok(Ok(None)) => Some(k),
                Ok(Ok(Some(h))) if gone.contains(&h) => Some(k),
                _ => None,
            })
            .take(wanted)
            .collect();
        let takeover_ms = times.takeover_age().as_millis() as u64;
        let attempts = takeable.into_iter().map(|k| async move {
            let sent = Instant::now();
            let mut con = self.lease_con.clone();
            let mut take = self.scripts.take.key(self.keys.lease(k));
            take.arg(&self.cfg.process_id)
                .arg(self.cfg.lease_ms)
                .arg(takeover_ms);
            for g in gone {
                take.arg(g);
            }
            let got = tokio::time::timeout(times.wait(), take.invoke_async::<i64>(&mut con)).await;
            (k, sent, got)
        });
        let mut taken = BTreeSet::new();
        for (k, sent, got) in futures::future::join_all(attempts).await {
            let Ok(Ok(how)) = got else { continue };
            if how == 0 {
                continue;
            }
            if let Ok(mut r) = self.renewed.write() {
                r.insert(k, sent);
            }
            self.claim_and_drain(k);
            if let Ok(mut o) = self.owned.write() {
                o.insert(k);
            }
            taken.insert(k);
            lease_changed("taken", 1);
            if how == 2 {
                tracing::info!(partition = k, "partition lease taken from a process gone");
            } else {
                tracing::info!(partition = k, "partition lease taken");
            }
        }
        taken
    }

    /// Deletes partition `k`'s lease if it still names this process.
    pub(super) async fn release_lease(&self, k: u32) -> redis::RedisResult<i64> {
        let mut con = self.lease_con.clone();
        self.scripts
            .release
            .key(self.keys.lease(k))
            .arg(&self.cfg.process_id)
            .invoke_async(&mut con)
            .await
    }

    /// Whether partition `k`'s lease was taken or renewed within the fence time: only then
    /// does this process read it or deliver to its agents directly (see the module doc).
    pub(super) fn fresh(&self, k: u32) -> bool {
        let stale_after = self.times().fence;
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
