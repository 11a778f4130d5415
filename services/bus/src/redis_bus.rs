//! The Redis streams bus: agents are spread over `partitions` streams (`<ns>:p:{k}`, agent →
//! `fnv1a64(id) % partitions`). Each partition is owned by one live process at a time through a
//! lease (`SET NX PX`, renewed every lease/4); live processes heartbeat in `<ns>:members` and
//! each takes at most `ceil(partitions / live)` leases, so partitions spread evenly and move
//! when a process dies. The owner reads its partitions with one blocking `XREADGROUP` on a
//! dedicated connection (no response timeout), claims what a dead owner left pending
//! (`XAUTOCLAIM`), hands each entry to the receiving agent's durable inbox, and acknowledges
//! (`XACK`) only after that. Entries that cannot be decoded or delivered go to `<ns>:dead`.
//! The reader reads on while the deliveries of earlier reads finish (each batch's
//! acknowledgement is a task; at most 2,048 entries are under way), so an agent
//! that is done takes its next message while another agent of the batch is still busy.
//!
//! A process fences itself by its own clock: a partition whose lease it has not renewed for
//! half the lease time (the process stalled, was frozen, or cannot reach Redis) is neither read
//! nor delivered to directly until it is renewed again, and then drained like a partition just
//! taken. A read issued before that answers (`BLOCK` ≤ a quarter lease) before the lease can
//! expire in Redis, so whatever it returned is in this consumer's pending list when the next
//! owner claims; two processes never deliver from one partition at once. Deliveries already
//! handed over are fenced too: an agent refuses an inbox delivery once its process no longer
//! holds the partition's lease (the entry stays pending for the next owner), and a partition
//! is passivated and released only once what the reader handed over for it is acknowledged.
//!
//! Calls that must run beside a live agent ([`Transport::call`]) travel the same way: a
//! `command` envelope on the agent's partition, with `reply_to` = the caller's own reply stream
//! `<ns>:replies:{<process id>}`, read by a reply reader that completes the waiting call.

use crate::dead::DeadLetters;
use crate::streams::{
    Backoff, GROUP, be, blocking_connection, decode_stream_entry, ensure_group, now_ms,
};
use agentd_actors::fnv1a64;
use agentd_actors::{AgentSystem, Transport};
use agentd_proto::codec::encode_envelope;
use agentd_proto::{AgentdError, Control, Envelope, ErrorCode, Item, Reply};
use agentd_store::Keys;
use async_trait::async_trait;
use redis::aio::{ConnectionManager, MultiplexedConnection};
use redis::streams::{StreamAutoClaimReply, StreamId, StreamPendingReply, StreamReadReply};
use redis::{Script, cmd};
use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};
use tokio::sync::oneshot;
use uuid::Uuid;

/// Settings of the Redis bus.
#[derive(Debug, Clone)]
pub struct RedisBusConfig {
    /// `redis://` or `rediss://` URL.
    pub url: String,
    /// Key namespace.
    pub namespace: String,
    /// Number of partition streams.
    pub partitions: u32,
    /// Lease time of a partition, ms.
    pub lease_ms: u64,
    /// Entries read per `XREADGROUP`.
    pub batch: usize,
    /// Largest envelope accepted, bytes.
    pub max_envelope_bytes: usize,
    /// Approximate cap of `<ns>:dead`.
    pub dead_maxlen: usize,
    /// Deliveries of one entry that failed with a store error (Redis answering, the write
    /// failing) before the entry is dead-lettered instead of holding up its partition. An
    /// outage does not count: while Redis is unreachable, nothing is delivered.
    pub max_deliveries: u64,
    /// This process's id (consumer name and lease value).
    pub process_id: String,
}

const RENEW: &str = r"
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0";

const RELEASE: &str = r"
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0";

/// A forward: the envelope is appended to its receiver's partition only while the receiver's
/// record exists (`return 0`: it does not). One round trip where a look-up and then the append
/// took two, and no window between them for a deletion. KEYS: the partition stream, the
/// receiver's record; ARGV: the envelope.
const FORWARD: &str = r"
if redis.call('EXISTS', KEYS[2]) == 0 then return 0 end
redis.call('XADD', KEYS[1], '*', 'm', ARGV[1])
return 1";

/// The Redis bus of one process: a [`Transport`] for the ChannelRouter plus the lease and
/// consumer loops started by [`RedisBus::start`].
pub struct RedisBus {
    cfg: RedisBusConfig,
    keys: Keys,
    con: ConnectionManager,
    owned: RwLock<BTreeSet<u32>>,
    /// Partitions taken whose stream may still hold unread entries: until the reader finds
    /// them drained, messages for their agents still go through the stream (not straight to
    /// the local actor), so each agent's order holds across a takeover.
    draining: RwLock<BTreeSet<u32>>,
    to_claim: RwLock<BTreeSet<u32>>,
    /// When each owned partition's lease was last taken or renewed (the request's send time,
    /// so the lease in Redis runs at least as long from then).
    renewed: RwLock<HashMap<u32, Instant>>,
    /// Per partition: entries the reader has handed to the router and not yet acknowledged
    /// (or left pending). A partition is given up only once its count is back to zero.
    delivering: Vec<AtomicUsize>,
    /// Reads (`XREADGROUP`) the partition reader has finished.
    read_rounds: AtomicU64,
    /// A read is under way.
    reading: AtomicBool,
    stopping: AtomicBool,
    /// Calls this process handed to the owners of other partitions ([`Transport::call`]), by
    /// their envelope's id; the reply reader completes them.
    calls: Mutex<HashMap<Uuid, oneshot::Sender<Reply>>>,
    dead: DeadLetters,
    renew: Script,
    release: Script,
    forward: Script,
}

impl RedisBus {
    /// Connects (failing at once if Redis is unreachable).
    pub async fn connect(
        cfg: RedisBusConfig,
        con: ConnectionManager,
    ) -> Result<Arc<Self>, AgentdError> {
        let keys = Keys::new(&cfg.namespace);
        let dead = DeadLetters::new(con.clone(), keys.dead(), cfg.dead_maxlen);
        let delivering = (0..cfg.partitions.max(1))
            .map(|_| AtomicUsize::new(0))
            .collect();
        Ok(Arc::new(RedisBus {
            cfg,
            keys,
            con,
            owned: RwLock::new(BTreeSet::new()),
            draining: RwLock::new(BTreeSet::new()),
            to_claim: RwLock::new(BTreeSet::new()),
            renewed: RwLock::new(HashMap::new()),
            delivering,
            read_rounds: AtomicU64::new(0),
            reading: AtomicBool::new(false),
            stopping: AtomicBool::new(false),
            calls: Mutex::new(HashMap::new()),
            dead,
            renew: Script::new(RENEW),
            release: Script::new(RELEASE),
            forward: Script::new(FORWARD),
        }))
    }

    /// The partition of an agent.
    pub fn partition_of(&self, agent_id: &str) -> u32 {
        partition_index(agent_id, self.cfg.partitions)
    }

    /// The fence of this process's durable pushes: a push for an agent lands only while the
    /// lease of the agent's partition names this process (see
    /// [`agentd_store::RedisStore::fence_pushes_with`]). The clock-based check an agent makes
    /// before pushing ([`Transport::may_deliver`]) cannot see a push that was still in this
    /// process's socket buffer when it stalled past its lease; Redis can.
    pub fn push_fence(&self) -> agentd_store::PushFence {
        let keys = self.keys.clone();
        let partitions = self.cfg.partitions;
        let me = self.cfg.process_id.clone();
        Arc::new(move |agent_id: &str| {
            Some((
                keys.lease(partition_index(agent_id, partitions)),
                me.clone(),
            ))
        })
    }

    /// Whether partition `k`'s lease was taken or renewed within half the lease time: only
    /// then does this process read it or deliver to its agents directly (see the module doc).
    fn fresh(&self, k: u32) -> bool {
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
            if let Ok(mut c) = self.to_claim.write() {
                c.insert(k);
            }
            if let Ok(mut d) = self.draining.write() {
                d.insert(k);
            }
        }
        if let Ok(mut r) = self.renewed.write() {
            r.insert(k, sent);
        }
    }

    /// The partitions to read new entries (`>`) from: owned, with a fresh lease, and with
    /// nothing left to claim. A partition taken (or renewed after going stale) while the reader
    /// was busy waits for its claim: reading newer entries first would overtake what the
    /// previous holder left pending. (Each flag is set before the one checked ahead of it
    /// here, so a reader that sees a partition owned and fresh also sees its claim.)
    fn readable(&self) -> Vec<u32> {
        let owned: Vec<u32> = self
            .owned()
            .into_iter()
            .filter(|k| self.fresh(*k))
            .collect();
        let to_claim = self.to_claim.read().map(|c| c.clone()).unwrap_or_default();
        owned
            .into_iter()
            .filter(|k| !to_claim.contains(k))
            .collect()
    }

    /// The partitions this process owns now.
    pub fn owned(&self) -> Vec<u32> {
        self.owned
            .read()
            .map(|o| o.iter().copied().collect())
            .unwrap_or_default()
    }

    /// Per owned partition: (partition, pending entries, lag) from `XINFO GROUPS`, for metrics.
    pub async fn partition_stats(&self) -> Vec<(u32, u64, u64)> {
        let mut con = self.con.clone();
        let mut out = Vec::new();
        for k in self.owned() {
            let groups: redis::RedisResult<Vec<std::collections::HashMap<String, redis::Value>>> =
                cmd("XINFO")
                    .arg("GROUPS")
                    .arg(self.keys.partition(k))
                    .query_async(&mut con)
                    .await;
            let Ok(groups) = groups else { continue };
            for g in groups {
                let name: Option<String> = g
                    .get("name")
                    .and_then(|v| redis::from_redis_value_ref(v).ok());
                if name.as_deref() != Some(GROUP) {
                    continue;
                }
                let num = |key: &str| -> u64 {
                    g.get(key)
                        .and_then(|v| redis::from_redis_value_ref::<u64>(v).ok())
                        .unwrap_or(0)
                };
                out.push((k, num("pending"), num("lag")));
            }
        }
        out
    }

    /// Readiness of the bus: Redis answers, and every partition this process believes it owns
    /// is still leased to it (a process that lost a lease without noticing must not take
    /// traffic). Answers the owned partitions, or why the bus is not ready.
    pub async fn check_leases(&self) -> Result<Vec<u32>, String> {
        let mut con = self.con.clone();
        let owned = self.owned();
        for k in &owned {
            let holder: Option<String> = cmd("GET")
                .arg(self.keys.lease(*k))
                .query_async(&mut con)
                .await
                .map_err(|e| format!("redis: {e}"))?;
            if holder.as_deref() != Some(self.cfg.process_id.as_str()) {
                return Err(format!(
                    "partition {k} is no longer leased to this process (holder: {})",
                    holder.as_deref().unwrap_or("none")
                ));
            }
        }
        Ok(owned)
    }

    /// This process's id.
    pub fn process_id(&self) -> &str {
        &self.cfg.process_id
    }

    /// Takes the first leases, then runs the lease loop and the partition reader in the
    /// background until [`RedisBus::shutdown`].
    pub async fn start(self: &Arc<Self>, system: AgentSystem) -> Result<(), AgentdError> {
        let mut con = self.con.clone();
        for k in 0..self.cfg.partitions {
            ensure_group(&mut con, &self.keys.partition(k)).await?;
        }
        self.lease_round(&system).await?;
        let me = self.clone();
        let sys = system.clone();
        actix_rt::spawn(async move { me.lease_loop(sys).await });
        let me = self.clone();
        actix_rt::spawn(async move { me.read_loop(system).await });
        let me = self.clone();
        actix_rt::spawn(async move { me.reply_loop().await });
        Ok(())
    }

    /// Stops reading, releases every lease and leaves the member set.
    pub async fn shutdown(&self) {
        self.stopping.store(true, Ordering::SeqCst);
        // A read still blocked could take entries after the next owner took a lease: let it
        // come back (and what it got be delivered) before the leases go.
        self.wait_for_read_round().await;
        // And what earlier reads handed over is acknowledged (or left pending) first.
        self.wait_for_deliveries(&self.owned()).await;
        let mut con = self.con.clone();
        for k in self.owned() {
            let _: redis::RedisResult<i64> = self
                .release
                .key(self.keys.lease(k))
                .arg(&self.cfg.process_id)
                .invoke_async(&mut con)
                .await;
        }
        if let Ok(mut o) = self.owned.write() {
            o.clear();
        }
        let _: redis::RedisResult<()> = cmd("ZREM")
            .arg(self.keys.members())
            .arg(&self.cfg.process_id)
            .query_async(&mut con)
            .await;
        let _: redis::RedisResult<()> = cmd("DEL")
            .arg(self.keys.replies(&self.cfg.process_id))
            .query_async(&mut con)
            .await;
    }

    /// Reads the answers to this process's calls ([`Transport::call`]) from its own reply
    /// stream and hands each to its waiting caller; what it read is deleted. A reply nobody
    /// waits for any more (the caller timed out) is dropped.
    async fn reply_loop(self: Arc<Self>) {
        let key = self.keys.replies(&self.cfg.process_id);
        // The stream is this process's alone (its id is new at every start): from its start.
        let mut last = "0-0".to_string();
        let mut backoff = Backoff::new();
        let mut renewed = Instant::now();
        while !self.stopping.load(Ordering::SeqCst) {
            let mut reader = match self.reader().await {
                Ok(r) => r,
                Err(e) => {
                    tracing::warn!(error = %e, "reply reader cannot reach Redis; retrying");
                    backoff.wait().await;
                    continue;
                }
            };
            while !self.stopping.load(Ordering::SeqCst) {
                let read: redis::RedisResult<Option<StreamReadReply>> = cmd("XREAD")
                    .arg("COUNT")
                    .arg(100)
                    .arg("BLOCK")
                    .arg(500)
                    .arg("STREAMS")
                    .arg(&key)
                    .arg(&last)
                    .query_async(&mut reader)
                    .await;
                let ids: Vec<StreamId> = match read {
                    Ok(r) => r
                        .map(|r| r.keys)
                        .unwrap_or_default()
                        .into_iter()
                        .flat_map(|k| k.ids)
                        .collect(),
                    Err(e) => {
                        tracing::warn!(error = %e, "reply reader lost Redis; reconnecting");
                        tokio::time::sleep(backoff.current()).await;
                        break;
                    }
                };
                backoff.reset();
                if renewed.elapsed() >= REPLY_STREAM_RENEW {
                    renewed = Instant::now();
                    let mut con = self.con.clone();
                    let _: redis::RedisResult<i64> = cmd("PEXPIRE")
                        .arg(&key)
                        .arg(REPLY_STREAM_TTL_MS)
                        .query_async(&mut con)
                        .await;
                }
                if ids.is_empty() {
                    continue;
                }
                for sid in &ids {
                    last.clone_from(&sid.id);
                    self.complete_call(sid);
                }
                let mut con = self.con.clone();
                let done: Vec<&str> = ids.iter().map(|s| s.id.as_str()).collect();
                let _: redis::RedisResult<i64> =
                    cmd("XDEL").arg(&key).arg(&done).query_async(&mut con).await;
            }
        }
    }

    /// Hands the reply in entry `sid` of this process's reply stream to the call it answers.
    fn complete_call(&self, sid: &StreamId) {
        // Replies come from agentd processes only, and may be larger than what the partition
        // streams take from anyone (a tool's whole result): their own, wider bound.
        let reply = match decode_stream_entry(sid, REPLY_MAX_BYTES) {
            Ok(Envelope {
                causation_id: Some(call),
                item: Item::Reply(reply),
                ..
            }) => (call, reply),
            Ok(_) => {
                tracing::warn!(entry = %sid.id, "a reply-stream entry that answers no call; dropped");
                return;
            }
            Err(e) => {
                tracing::warn!(entry = %sid.id, error = %e, "an undecodable reply; dropped");
                return;
            }
        };
        let waiting = self.calls.lock().ok().and_then(|mut c| c.remove(&reply.0));
        match waiting {
            Some(tx) => {
                let _ = tx.send(reply.1);
            }
            None => tracing::debug!(call = %reply.0, "a reply after its caller stopped waiting"),
        }
    }

    async fn lease_loop(self: Arc<Self>, system: AgentSystem) {
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
    async fn lease_round(&self, system: &AgentSystem) -> Result<(), AgentdError> {
        let mut con = self.con.clone();
        let now = now_ms();
        let lease = self.cfg.lease_ms;
        let members = self.keys.members();
        let live: usize = redis::pipe()
            .cmd("ZADD")
            .arg(&members)
            .arg(now)
            .arg(&self.cfg.process_id)
            .ignore()
            .cmd("ZREMRANGEBYSCORE")
            .arg(&members)
            .arg("-inf")
            .arg(now.saturating_sub(2 * lease))
            .ignore()
            .cmd("ZCARD")
            .arg(&members)
            .query_async::<(usize,)>(&mut con)
            .await
            .map_err(be)?
            .0;
        let fair = (self.cfg.partitions as usize).div_ceil(live.max(1));
        let mut lost = Vec::new();
        for k in self.owned() {
            let sent = Instant::now();
            let kept: i64 = self
                .renew
                .key(self.keys.lease(k))
                .arg(&self.cfg.process_id)
                .arg(lease)
                .invoke_async(&mut con)
                .await
                .map_err(be)?;
            if kept == 0 {
                lost.push(k);
            } else {
                self.lease_held(k, sent);
            }
        }
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
        let gone: Vec<u32> = lost.iter().chain(surplus.iter()).copied().collect();
        if !gone.is_empty() {
            if let Ok(mut o) = self.owned.write() {
                for k in &gone {
                    o.remove(k);
                }
            }
            // A partition taken again later starts a fresh drain and claim; until then its
            // pending entries belong to whoever owns it.
            if let Ok(mut d) = self.draining.write() {
                for k in &gone {
                    d.remove(k);
                }
            }
            if let Ok(mut c) = self.to_claim.write() {
                for k in &gone {
                    c.remove(k);
                }
            }
            if let Ok(mut r) = self.renewed.write() {
                for k in &gone {
                    r.remove(k);
                }
            }
            // What the reader handed over for these partitions is durably queued (or left
            // pending) before their agents stop: a delivery refused by a stopping agent would
            // be routed again, to the partition's next owner, behind newer entries.
            self.wait_for_read_round().await;
            self.wait_for_deliveries(&gone).await;
            let partitions = self.cfg.partitions;
            let set: BTreeSet<u32> = gone.iter().copied().collect();
            let stopped = system
                .passivate(Box::new(move |id| {
                    set.contains(&((fnv1a64(id.as_bytes()) % u64::from(partitions.max(1))) as u32))
                }))
                .await;
            for k in &surplus {
                let _: i64 = self
                    .release
                    .key(self.keys.lease(*k))
                    .arg(&self.cfg.process_id)
                    .invoke_async(&mut con)
                    .await
                    .map_err(be)?;
            }
            let m = agentd_actors::metrics::global();
            m.inc(
                "agentd_lease_changes_total",
                "Partition lease changes.",
                &[("change", "lost")],
                lost.len() as f64,
            );
            m.inc(
                "agentd_lease_changes_total",
                "Partition lease changes.",
                &[("change", "released")],
                surplus.len() as f64,
            );
            tracing::info!(lost = ?lost, released = ?surplus, passivated = stopped, "partitions moved away");
        }
        let mut taken = BTreeSet::new();
        if owned_now < fair {
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
                    .arg(lease)
                    .query_async(&mut con)
                    .await
                    .map_err(be)?;
                if got.is_some() {
                    if let Ok(mut r) = self.renewed.write() {
                        r.insert(k, sent);
                    }
                    if let Ok(mut c) = self.to_claim.write() {
                        c.insert(k);
                    }
                    if let Ok(mut d) = self.draining.write() {
                        d.insert(k);
                    }
                    if let Ok(mut o) = self.owned.write() {
                        o.insert(k);
                    }
                    owned_now += 1;
                    taken.insert(k);
                    agentd_actors::metrics::global().inc(
                        "agentd_lease_changes_total",
                        "Partition lease changes.",
                        &[("change", "taken")],
                        1.0,
                    );
                    tracing::info!(partition = k, "partition lease taken");
                }
            }
        }
        if !taken.is_empty() {
            // Agents of these partitions that were stopped when a partition moved (here, after a
            // lost lease, or in a dead owner) hold acknowledged work only in their durable
            // inboxes: activate them, or they would wait for another message to arrive.
            let system = system.clone();
            let partitions = self.cfg.partitions.max(1);
            actix_rt::spawn(async move {
                let filter = move |id: &str| {
                    taken.contains(&((fnv1a64(id.as_bytes()) % u64::from(partitions)) as u32))
                };
                match system.recover_where(filter).await {
                    Ok(n) => tracing::info!(agents = n, "agents of taken partitions resumed"),
                    Err(e) => {
                        tracing::warn!(error = %e, "resuming the agents of taken partitions failed")
                    }
                }
            });
        }
        Ok(())
    }

    /// Waits until a read under way has come back (it blocks at most a quarter lease; this
    /// waits at most half). A partition given up is left out of every read started after it
    /// was dropped from `owned`; what a read already under way returns for it stays pending
    /// here, and is claimed by the next owner, who can only take the lease once this process
    /// releases it, after this wait.
    async fn wait_for_read_round(&self) {
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
    async fn wait_for_deliveries(&self, partitions: &[u32]) {
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

    /// A connection of this bus's own for one blocking reader.
    async fn reader(&self) -> Result<MultiplexedConnection, AgentdError> {
        blocking_connection(&self.cfg.url).await.map_err(be)
    }

    async fn read_loop(self: Arc<Self>, system: AgentSystem) {
        let mut backoff = Backoff::new();
        while !self.stopping.load(Ordering::SeqCst) {
            match self.clone().read_until_error(&system).await {
                Ok(()) => return,
                Err(e) => {
                    tracing::warn!(error = %e, backoff_ms = backoff.current().as_millis() as u64, "partition reader lost Redis; reconnecting");
                    backoff.wait().await;
                }
            }
        }
    }

    async fn read_until_error(self: Arc<Self>, system: &AgentSystem) -> Result<(), AgentdError> {
        let mut inflight = InFlight::default();
        let res = self.read_with(system, &mut inflight).await;
        // Nothing is claimed again (after an error) or given up (stopping) while deliveries of
        // earlier reads are still under way.
        let rest = inflight.finish().await;
        res.and(rest)
    }

    async fn read_with(
        self: &Arc<Self>,
        system: &AgentSystem,
        inflight: &mut InFlight,
    ) -> Result<(), AgentdError> {
        let mut reader = self.reader().await?;
        let mut con = self.con.clone();
        // Entries this consumer read before an error but did not acknowledge are in its pending
        // list, which `>` never returns again: claim them first, and drain the partitions
        // again meanwhile so that nothing newer overtakes them.
        for k in self.owned() {
            if let Ok(mut c) = self.to_claim.write() {
                c.insert(k);
            }
            if let Ok(mut d) = self.draining.write() {
                d.insert(k);
            }
        }
        while !self.stopping.load(Ordering::SeqCst) {
            // Partitions just taken: claim what their previous owner left pending (a stale one
            // waits until its lease is renewed).
            let owned = self.owned();
            let claims: Vec<u32> = self
                .to_claim
                .write()
                .map(|mut c| {
                    let all = std::mem::take(&mut *c);
                    let (now, later): (BTreeSet<u32>, BTreeSet<u32>) = all
                        .into_iter()
                        .filter(|k| owned.contains(k))
                        .partition(|k| self.fresh(*k));
                    *c = later;
                    now.into_iter().collect()
                })
                .unwrap_or_default();
            if !claims.is_empty() {
                // Claimed entries are older than anything read before: what is in flight
                // goes first.
                inflight.finish().await?;
            }
            for k in claims {
                if let Err(e) = self.claim(k, system, &mut con).await {
                    if let Ok(mut c) = self.to_claim.write() {
                        c.insert(k);
                    }
                    return Err(e);
                }
            }
            let owned = self.readable();
            if owned.is_empty() {
                inflight.finish().await?;
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
            inflight.make_room(self.cfg.batch * owned.len()).await?;
            let mut pipe = redis::pipe();
            let read = pipe.cmd("XREADGROUP");
            read.arg("GROUP")
                .arg(GROUP)
                .arg(&self.cfg.process_id)
                .arg("COUNT")
                .arg(self.cfg.batch)
                .arg("BLOCK")
                .arg((self.cfg.lease_ms / 4).clamp(1, 200))
                .arg("STREAMS");
            for k in &owned {
                read.arg(self.keys.partition(*k));
            }
            for _ in &owned {
                read.arg(">");
            }
            // Who else holds entries of these partitions, asked right after the read (the same
            // round trip: Redis runs it once the read has returned).
            for k in &owned {
                pipe.cmd("XPENDING").arg(self.keys.partition(*k)).arg(GROUP);
            }
            self.reading.store(true, Ordering::SeqCst);
            let reply: redis::RedisResult<Vec<redis::Value>> = pipe.query_async(&mut reader).await;
            self.reading.store(false, Ordering::SeqCst);
            self.read_rounds.fetch_add(1, Ordering::SeqCst);
            let mut replies = reply.map_err(be)?.into_iter();
            let streams = match replies.next() {
                Some(v) => redis::from_redis_value_ref::<Option<StreamReadReply>>(&v)
                    .map_err(|e| be(e.into()))?
                    .map(|r| r.keys)
                    .unwrap_or_default(),
                None => Vec::new(),
            };
            // Entries of a partition this process owns, pending with another consumer: a
            // process that lost the partition read them late (a read it had sent before it
            // stalled, answered after this process had claimed what it left). They are older
            // than what this read returned, so every pending entry of that partition — the
            // ones just read included — is claimed and delivered in order first; without this
            // nothing would ever claim them, and newer entries would overtake them.
            let mut taken_late = BTreeSet::new();
            for (k, pending) in owned.iter().zip(replies) {
                let pending = redis::from_redis_value_ref::<StreamPendingReply>(&pending)
                    .map_err(|e| be(e.into()))?;
                if let StreamPendingReply::Data(data) = pending
                    && data
                        .consumers
                        .iter()
                        .any(|c| c.pending > 0 && c.name != self.cfg.process_id)
                    && self.fresh(*k)
                {
                    taken_late.insert(*k);
                }
            }
            if !taken_late.is_empty() {
                inflight.finish().await?;
                for k in &taken_late {
                    tracing::warn!(
                        partition = *k,
                        "entries of an owned partition pending with another consumer; claiming them before anything newer"
                    );
                    self.claim(*k, system, &mut con).await?;
                }
            }
            let streams: Vec<_> = streams
                .into_iter()
                .filter(|s| !taken_late.iter().any(|k| self.keys.partition(*k) == s.key))
                .collect();
            // A draining partition that had nothing unread may be drained: the router checks
            // it between two routed messages (see `settle`).
            let quiet = self.draining.read().is_ok_and(|d| {
                d.iter().any(|k| {
                    let key = self.keys.partition(*k);
                    owned.contains(k) && !streams.iter().any(|s| s.key == key)
                })
            });
            for stream in streams {
                let partition = owned
                    .iter()
                    .copied()
                    .find(|k| self.keys.partition(*k) == stream.key)
                    .filter(|k| self.fresh(*k));
                let Some(partition) = partition else {
                    // The lease went stale, or the partition was given up, during the read:
                    // what it returned stays pending here, for this process once renewed or
                    // for the next owner's claim (both claim before reading anything newer).
                    tracing::warn!(stream = %stream.key, entries = stream.ids.len(), "partition no longer fresh after a read; leaving its entries pending");
                    continue;
                };
                let decoded: Vec<_> = stream.ids.iter().map(|s| self.decode_entry(s)).collect();
                if decoded
                    .iter()
                    .all(|d| d.as_ref().is_ok_and(routes_directly))
                {
                    let envs = decoded.into_iter().flatten().collect();
                    inflight
                        .push(self.route_batch(partition, stream.key, stream.ids, envs, system));
                } else {
                    // Closes, deletes, child outputs and bad entries wait for what came
                    // before them.
                    inflight.finish().await?;
                    let ids: Vec<&StreamId> = stream.ids.iter().collect();
                    self.handle_entries(&stream.key, &ids, decoded, system, &mut con)
                        .await?;
                }
            }
            if quiet {
                // The drain check needs what was read acknowledged.
                inflight.finish().await?;
                system.settle_transport().await?;
            }
        }
        Ok(())
    }

    /// Whether partition `k`'s stream holds nothing undelivered: every entry was read by the
    /// group (last-delivered-id is the stream's last id) and acknowledged (nothing pending).
    async fn drained(&self, k: u32, con: &mut ConnectionManager) -> Result<bool, AgentdError> {
        let key = self.keys.partition(k);
        let (stream, groups): (
            HashMap<String, redis::Value>,
            Vec<HashMap<String, redis::Value>>,
        ) = redis::pipe()
            .cmd("XINFO")
            .arg("STREAM")
            .arg(&key)
            .cmd("XINFO")
            .arg("GROUPS")
            .arg(&key)
            .query_async(con)
            .await
            .map_err(be)?;
        let text = |m: &HashMap<String, redis::Value>, field: &str| -> Option<String> {
            m.get(field)
                .and_then(|v| redis::from_redis_value_ref::<String>(v).ok())
        };
        let Some(last) = text(&stream, "last-generated-id") else {
            return Ok(false);
        };
        Ok(groups.iter().any(|g| {
            text(g, "name").as_deref() == Some(GROUP)
                && text(g, "last-delivered-id").as_deref() == Some(last.as_str())
                && g.get("pending")
                    .and_then(|v| redis::from_redis_value_ref::<u64>(v).ok())
                    == Some(0)
        }))
    }

    async fn claim(
        &self,
        k: u32,
        system: &AgentSystem,
        con: &mut ConnectionManager,
    ) -> Result<(), AgentdError> {
        let key = self.keys.partition(k);
        let mut start = "0-0".to_string();
        loop {
            let reply: StreamAutoClaimReply = cmd("XAUTOCLAIM")
                .arg(&key)
                .arg(GROUP)
                .arg(&self.cfg.process_id)
                .arg(0)
                .arg(&start)
                .arg("COUNT")
                .arg(self.cfg.batch)
                .query_async(con)
                .await
                .map_err(be)?;
            let ids: Vec<&StreamId> = reply.claimed.iter().collect();
            if !ids.is_empty() {
                tracing::info!(
                    partition = k,
                    entries = ids.len(),
                    "claimed pending entries"
                );
            }
            let decoded = ids.iter().map(|s| self.decode_entry(s)).collect();
            self.handle_entries(&key, &ids, decoded, system, con)
                .await?;
            if reply.next_stream_id == "0-0" {
                return Ok(());
            }
            start = reply.next_stream_id;
        }
    }

    /// Delivers entries in order; each is acknowledged once it is durably with its agent (or
    /// moved to the dead-letter stream).
    async fn handle_entries(
        &self,
        key: &str,
        ids: &[&StreamId],
        decoded: Vec<Result<Envelope, AgentdError>>,
        system: &AgentSystem,
        con: &mut ConnectionManager,
    ) -> Result<(), AgentdError> {
        // Envelopes the router takes (inbox items, pause/resume/cancel/terminate) are handed
        // over together: the router queues them in this order (per-agent order holds) and the
        // receivers' durable writes run concurrently. Anything else (close, delete, child
        // output) waits for what came before it and runs alone.
        let mut outcomes: Vec<Result<(), AgentdError>> = Vec::with_capacity(ids.len());
        let mut routed = Vec::new();
        for decoded in decoded {
            match decoded {
                Ok(env) if routes_directly(&env) => routed.push(deliver(system, env)),
                other => {
                    outcomes.extend(futures::future::join_all(routed.drain(..)).await);
                    outcomes.push(match other {
                        Ok(env) if matches!(env.item, Item::Command(_)) => {
                            self.run_call(system, env);
                            Ok(())
                        }
                        Ok(env) => deliver(system, env).await,
                        Err(e) => Err(e),
                    });
                }
            }
        }
        outcomes.extend(futures::future::join_all(routed).await);
        self.acknowledge(key, ids, outcomes, con).await
    }

    /// Appends `env` (encoded as `bytes`) to its receiver's partition stream.
    async fn append_to_partition(&self, env: &Envelope, bytes: Vec<u8>) -> Result<(), AgentdError> {
        let target = partition_target(env)?;
        let mut con = self.con.clone();
        cmd("XADD")
            .arg(self.keys.partition(self.partition_of(target)))
            .arg("*")
            .arg("m")
            .arg(bytes)
            .query_async::<String>(&mut con)
            .await
            .map_err(be)?;
        Ok(())
    }

    /// Runs a call another process handed over for an agent of this partition (see
    /// [`Transport::call`]) and sends its reply back, as a task: a call may wait for replies
    /// that reach this very reader (a Manage sync wait), so the reader must not wait for it.
    /// Its entry is acknowledged at once: a call lost with this process is answered by the
    /// caller's timeout, and a caller may retry it.
    fn run_call(&self, system: &AgentSystem, env: Envelope) {
        let system = system.clone();
        let mut con = self.con.clone();
        let replies = self.keys.replies_prefix();
        let span = tracing::info_span!(
            "call",
            agent_id = env.to.agent_id().unwrap_or_default(),
            message_id = %env.id,
        );
        let task = async move {
            let Item::Command(command) = env.item.clone() else {
                return;
            };
            let result = system.execute(command).await;
            if let Err(e) = crate::commands::send_reply(&mut con, &env, result, REPLY_MAXLEN).await
            {
                tracing::warn!(error = %e, "the reply to a call could not be sent");
            }
            // The caller's reply stream goes away by itself once no process reads it (a caller
            // that died); its live reader keeps renewing this.
            if let Some(key) = env.reply_to.as_deref().filter(|k| k.starts_with(&replies)) {
                let _: redis::RedisResult<i64> = cmd("PEXPIRE")
                    .arg(key)
                    .arg(REPLY_STREAM_TTL_MS)
                    .query_async(&mut con)
                    .await;
            }
        };
        actix_rt::spawn(tracing::Instrument::instrument(task, span));
    }

    /// The envelope of a partition entry (its `m` field), or why it has none.
    fn decode_entry(&self, sid: &StreamId) -> Result<Envelope, AgentdError> {
        decode_stream_entry(sid, self.cfg.max_envelope_bytes)
    }

    /// Hands a batch of routable entries to the router now, in order (the router queues each
    /// as it is sent), and answers the task that waits for their durable pushes and then
    /// acknowledges them, so the reader can read on meanwhile.
    fn route_batch(
        self: &Arc<Self>,
        partition: u32,
        key: String,
        ids: Vec<StreamId>,
        envs: Vec<Envelope>,
        system: &AgentSystem,
    ) -> (usize, tokio::task::JoinHandle<Result<(), AgentdError>>) {
        let n = ids.len();
        if let Some(c) = self.delivering.get(partition as usize) {
            c.fetch_add(n, Ordering::SeqCst);
        }
        let requests: Vec<_> = envs
            .into_iter()
            .map(|env| system.route_from_stream(env))
            .collect();
        let me = self.clone();
        let task = actix_rt::spawn(async move {
            let outcomes = futures::future::join_all(requests)
                .await
                .into_iter()
                .map(|r| r.map(|_| ()))
                .collect();
            let refs: Vec<&StreamId> = ids.iter().collect();
            let mut con = me.con.clone();
            let res = me.acknowledge(&key, &refs, outcomes, &mut con).await;
            if let Some(c) = me.delivering.get(partition as usize) {
                c.fetch_sub(n, Ordering::SeqCst);
            }
            res
        });
        (n, task)
    }

    /// Acknowledges the entries whose delivery succeeded or failed for good (those go to the
    /// dead letters first); one that failed transiently stays pending and its error is
    /// answered.
    async fn acknowledge(
        &self,
        key: &str,
        ids: &[&StreamId],
        outcomes: Vec<Result<(), AgentdError>>,
        con: &mut ConnectionManager,
    ) -> Result<(), AgentdError> {
        let mut acks = Vec::with_capacity(ids.len());
        let mut transient = None;
        for (sid, outcome) in ids.iter().zip(outcomes) {
            match outcome {
                Ok(()) => {}
                // Redis unreachable or a connection cut while the entry was being delivered
                // (a store error included: the inbox write failed): it stays pending, and is
                // claimed again after reconnecting. Dead-lettering it would lose a message
                // that was acknowledged to its sender.
                Err(e)
                    if agentd_actors::ports::is_transient(&e)
                        && !self.delivered_too_often(key, &sid.id, &e, con).await =>
                {
                    transient.get_or_insert(e);
                    continue;
                }
                Err(e) => {
                    self.dead
                        .send(key, &sid.id, &e, sid.get::<Vec<u8>>("m"))
                        .await
                }
            }
            acks.push(sid.id.clone());
        }
        if !acks.is_empty() {
            cmd("XACK")
                .arg(key)
                .arg(GROUP)
                .arg(&acks)
                .query_async::<i64>(con)
                .await
                .map_err(be)?;
        }
        transient.map_or(Ok(()), Err)
    }
}

impl RedisBus {
    /// Whether entry `id` of `key`, whose delivery just failed with `e`, has failed too often to
    /// be kept: only store errors count (Redis answered, the write did not go through), and
    /// only once the group has delivered the entry `max_deliveries` times. If Redis cannot
    /// tell, the entry is kept.
    async fn delivered_too_often(
        &self,
        key: &str,
        id: &str,
        e: &AgentdError,
        con: &mut ConnectionManager,
    ) -> bool {
        if e.code != ErrorCode::StoreError || self.cfg.max_deliveries == 0 {
            return false;
        }
        let pending: redis::RedisResult<Vec<(String, String, u64, u64)>> = cmd("XPENDING")
            .arg(key)
            .arg(GROUP)
            .arg(id)
            .arg(id)
            .arg(1)
            .query_async(con)
            .await;
        let deliveries = match pending {
            Ok(rows) => rows.first().map_or(0, |r| r.3),
            Err(_) => return false,
        };
        if deliveries >= self.cfg.max_deliveries {
            tracing::error!(stream = key, entry = id, deliveries, error = %e, "entry keeps failing; moving it to the dead letters");
            return true;
        }
        false
    }
}

/// Most entries whose deliveries may be under way (routed, not yet acknowledged) while the
/// reader reads on: well under the router's mailbox (16 Ki), so routing never waits for room
/// (which would not keep the order).
const MAX_IN_FLIGHT: usize = 2_048;

/// Batches the reader has routed whose acknowledgements are still under way, oldest first.
/// Reading on while they finish lets an agent take its next message while another agent of
/// the batch is still busy (the reader waited for the slowest before).
#[derive(Default)]
struct InFlight {
    tasks: std::collections::VecDeque<(usize, tokio::task::JoinHandle<Result<(), AgentdError>>)>,
    entries: usize,
}

impl InFlight {
    fn push(&mut self, batch: (usize, tokio::task::JoinHandle<Result<(), AgentdError>>)) {
        self.entries += batch.0;
        self.tasks.push_back(batch);
    }

    /// Waits for the oldest batch; its error, if any, is answered.
    async fn pop(&mut self) -> Result<(), AgentdError> {
        let Some((n, task)) = self.tasks.pop_front() else {
            return Ok(());
        };
        self.entries -= n;
        task.await.map_err(|e| {
            AgentdError::new(ErrorCode::Unavailable, format!("delivery task failed: {e}"))
        })?
    }

    /// Waits until a read of up to `next` entries more fits under [`MAX_IN_FLIGHT`].
    async fn make_room(&mut self, next: usize) -> Result<(), AgentdError> {
        while self.entries > 0 && self.entries + next > MAX_IN_FLIGHT {
            self.pop().await?;
        }
        // Finished batches are collected as they go, so an error surfaces soon.
        while self.tasks.front().is_some_and(|(_, t)| t.is_finished()) {
            self.pop().await?;
        }
        Ok(())
    }

    /// Waits for every batch; the first error is answered (after all have finished).
    async fn finish(&mut self) -> Result<(), AgentdError> {
        let mut first = Ok(());
        while !self.tasks.is_empty() {
            let r = self.pop().await;
            if first.is_ok() {
                first = r;
            }
        }
        first
    }
}

/// Approximate cap of a process's reply stream (its reader deletes what it reads; the cap only
/// matters for replies that arrive once nobody reads them).
const REPLY_MAXLEN: usize = 1_000;

/// The partition of `agent_id` among `partitions`.
fn partition_index(agent_id: &str, partitions: u32) -> u32 {
    (fnv1a64(agent_id.as_bytes()) % u64::from(partitions.max(1))) as u32
}

/// Largest reply a process takes from its reply stream.
const REPLY_MAX_BYTES: usize = 64 << 20;

/// A reply stream expires this long after its last renewal: its reader renews it every
/// [`REPLY_STREAM_RENEW`] while the process lives, so only a dead process's stream goes.
const REPLY_STREAM_TTL_MS: u64 = 10 * 60 * 1_000;

/// How often a process renews its reply stream's expiry.
const REPLY_STREAM_RENEW: Duration = Duration::from_secs(60);

/// The agent `env` goes to: only agent envelopes travel on partitions.
fn partition_target(env: &Envelope) -> Result<&str, AgentdError> {
    env.to.agent_id().ok_or_else(|| {
        AgentdError::new(
            ErrorCode::BadEnvelope,
            "only agent envelopes travel on partitions",
        )
    })
}

/// Whether the router takes `env` as it is (see [`deliver`]).
fn routes_directly(env: &Envelope) -> bool {
    matches!(
        env.item,
        Item::Inbox(_)
            | Item::Control(
                Control::Pause | Control::Resume | Control::Cancel | Control::Terminate
            )
    )
}

/// Hands one envelope from a partition to the local actors.
async fn deliver(system: &AgentSystem, env: Envelope) -> Result<(), AgentdError> {
    let target = env
        .to
        .agent_id()
        .ok_or_else(|| {
            AgentdError::new(
                ErrorCode::BadEnvelope,
                "partition entries are addressed to agents",
            )
        })?
        .to_string();
    match &env.item {
        _ if routes_directly(&env) => {
            // The router queues the envelope when this is first polled (its mailbox is far
            // larger than a read batch), so envelopes handed over together keep their order.
            system.route_from_stream(env).await.map(|_| ())
        }
        Item::Control(c) => system.control(&target, *c).await.map(|_| ()),
        Item::Output(_) => system.take_output(env).await,
        _ => Err(AgentdError::new(
            ErrorCode::BadEnvelope,
            "unexpected item on a partition stream",
        )),
    }
}

#[async_trait]
impl Transport for RedisBus {
    fn is_local(&self, agent_id: &str) -> bool {
        let k = self.partition_of(agent_id);
        self.owned.read().map(|o| o.contains(&k)).unwrap_or(false)
            && self.fresh(k)
            && !self
                .draining
                .read()
                .map(|d| d.contains(&k))
                .unwrap_or(false)
    }

    fn owns(&self, agent_id: &str) -> bool {
        let k = self.partition_of(agent_id);
        self.owned.read().map(|o| o.contains(&k)).unwrap_or(false)
    }

    fn may_deliver(&self, agent_id: &str) -> bool {
        self.owns(agent_id) && self.fresh(self.partition_of(agent_id))
    }

    fn stream_for(&self, agent_id: &str) -> Option<String> {
        Some(self.keys.partition(self.partition_of(agent_id)))
    }

    async fn settle(&self) -> Result<(), AgentdError> {
        let owned = self.owned();
        let draining: Vec<u32> = self
            .draining
            .read()
            .map(|d| d.iter().copied().filter(|k| owned.contains(k)).collect())
            .unwrap_or_default();
        let mut con = self.con.clone();
        for k in draining {
            if self.drained(k, &mut con).await? {
                if let Ok(mut d) = self.draining.write() {
                    d.remove(&k);
                }
                tracing::info!(
                    partition = k,
                    "partition drained; its agents get direct deliveries"
                );
            }
        }
        Ok(())
    }

    async fn call(&self, mut env: Envelope, timeout: Duration) -> Result<Reply, AgentdError> {
        let target = env.to.agent_id().unwrap_or_default().to_string();
        env.reply_to = Some(self.keys.replies(&self.cfg.process_id));
        let bytes = encode_envelope(&env)?;
        if bytes.len() > self.cfg.max_envelope_bytes {
            // The owner would move it to the dead letters, and the caller wait for nothing.
            return Err(AgentdError::new(
                ErrorCode::PayloadTooLarge,
                format!(
                    "the call is {} bytes; partitions take at most {}",
                    bytes.len(),
                    self.cfg.max_envelope_bytes
                ),
            ));
        }
        let (tx, rx) = oneshot::channel();
        if let Ok(mut calls) = self.calls.lock() {
            calls.insert(env.id, tx);
        }
        let forget = || {
            if let Ok(mut calls) = self.calls.lock() {
                calls.remove(&env.id);
            }
        };
        if let Err(e) = self.append_to_partition(&env, bytes).await {
            forget();
            return Err(e);
        }
        match tokio::time::timeout(timeout, rx).await {
            Ok(Ok(reply)) => Ok(reply),
            _ => {
                forget();
                Err(AgentdError::new(
                    ErrorCode::Unavailable,
                    format!(
                        "the process that owns agent `{target}` did not answer within {} ms",
                        timeout.as_millis()
                    ),
                ))
            }
        }
    }

    async fn forward(&self, env: &Envelope) -> Result<(), AgentdError> {
        let target = partition_target(env)?;
        let mut con = self.con.clone();
        let appended: i64 = self
            .forward
            .key(self.keys.partition(self.partition_of(target)))
            .key(self.keys.agent(target))
            .arg(encode_envelope(env)?)
            .invoke_async(&mut con)
            .await
            .map_err(be)?;
        if appended == 0 {
            return Err(AgentdError::agent_not_found(target));
        }
        Ok(())
    }
}
