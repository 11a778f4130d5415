//! The Redis streams bus: agents are spread over `partitions` streams (`{<ns>:p<k>}:stream`, agent →
//! `fnv1a64(id) % partitions`). Each partition is owned by one live process at a time through a
//! lease (`SET PX`, renewed every lease/16); live processes heartbeat in `{<ns>:members}` and
//! each takes at most `ceil(partitions / live)` leases, so partitions spread evenly and move
//! when a process dies. The owner reads its partitions with one blocking `XREADGROUP` on a
//! dedicated connection (no response timeout; on a Redis Cluster, one read per partition on
//! connections of their own), claims what a dead owner left pending (`XAUTOCLAIM`), hands each
//! entry to the receiving agent's durable inbox, and acknowledges (`XACK`) only after that. Entries that cannot be decoded or delivered go to `<ns>:dead`.
//! The reader reads on while the deliveries of earlier reads finish (each batch's
//! acknowledgement is a task; at most `in_flight::MAX_IN_FLIGHT` entries are under way), so
//! an agent that is done takes its next message while another agent of the batch is busy.
//!
//! A process fences itself by its own clock: a partition whose lease it has not renewed for
//! a quarter of the lease time (the process stalled, was frozen, or cannot reach Redis) is
//! neither read nor delivered to directly until it is renewed again, and then drained like a
//! partition just taken. Another process takes the partition only once its lease has expired,
//! or — its holder gone from Redis (no heartbeat, no connection: [`leases`]) — once it has gone
//! unrenewed for the fence time and a margin. A read issued before the fence answers within
//! the margin (`BLOCK`), so whatever it returned is in this consumer's pending list when the
//! next owner claims; two processes never deliver from one partition at once. Deliveries already
//! handed over are fenced too: an agent refuses an inbox delivery once its process no longer
//! holds the partition's lease (the entry stays pending for the next owner), and a partition
//! is passivated and released only once what the reader handed over for it is acknowledged.
//!
//! Calls that must run beside a live agent ([`Transport::call`]) travel the same way: a
//! `command` envelope on the agent's partition, with `reply_to` = the caller's own reply stream
//! `{<ns>:replies:<process id>}`, read by a reply reader that completes the waiting call.
//!
//! | module | what it holds |
//! |---|---|
//! | [`config`] | [`RedisBusConfig`]: URL, namespace, partitions, lease time, batch and size limits |
//! | [`scripts`] | the Lua scripts: renewing and releasing a lease, forwarding to a live agent, acknowledging and trimming a partition |
//! | [`times`] | what the lease's length sets: the round, the self-fence, the takeover margin |
//! | [`leases`] | membership and the lease round: renew, heartbeat, processes gone, take; self-fencing by clock |
//! | [`handover`] | giving a partition up once its deliveries are done; resuming a taken one's agents |
//! | [`reader`] | the partition reader: claims first, then one blocking read of every readable partition |
//! | [`in_flight`] | the window of routed batches whose acknowledgements are still under way |
//! | [`delivery`] | handing entries to the agents, acknowledging them, dead-lettering what keeps failing |
//! | [`held`] | the entries this process's agents hold (acknowledged with the turn that handles them): which are out, one let go unacknowledged, and the stream trims their acknowledgements do not make |
//! | [`claim`] | a partition taken: sending on its outbox, claiming what its previous owner left pending, the drain check |
//! | [`calls`] | calls to an agent another process owns: the caller's reply reader, the owner's runner |
//! | [`transport`] | the [`Transport`] the ChannelRouter routes through |
//! | [`known`] | the agents seen to exist lately, whose messages skip the check of their record |
//! | [`status`] | readiness (what this process can serve now) and per-partition metrics |
//!
//! [`Transport`]: agentd_ports::Transport
//! [`Transport::call`]: agentd_ports::Transport::call

mod calls;
mod claim;
mod config;
mod delivery;
mod handover;
mod held;
mod in_flight;
mod known;
mod leases;
mod reader;
mod scripts;
mod status;
mod times;
mod transport;

pub use config::RedisBusConfig;
pub use status::Readiness;

use crate::blocking::BlockingConnection;
use crate::dead::DeadLetters;
use crate::streams::{be, ensure_group};
use agentd_ports::Inbound;
use agentd_proto::{AgentdError, Envelope, ErrorCode, Reply};
use agentd_store::RedisConnection;
use agentd_store::{Keys, partition_index};
use redis::cmd;
use scripts::Scripts;
use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Instant;
use tokio::sync::oneshot;
use uuid::Uuid;

/// The Redis bus of one process: a [`Transport`] for the ChannelRouter plus the lease and
/// consumer loops started by [`RedisBus::start`].
///
/// [`Transport`]: agentd_ports::Transport
pub struct RedisBus {
    cfg: RedisBusConfig,
    keys: Keys,
    con: RedisConnection,
    /// The leases' own connection (renewals, takes, releases): not behind the shared
    /// connection's commands (a `WAIT` holds up what follows it), and waiting a lease round at
    /// most for an answer.
    lease_con: RedisConnection,
    /// The connection this process heartbeats on ([`leases::Heartbeats`]), once connected.
    heartbeats: tokio::sync::Mutex<Option<leases::Heartbeats>>,
    /// When a heartbeat last reached Redis.
    last_heartbeat: Mutex<Option<Instant>>,
    /// The heartbeat connection is being connected in the background.
    heartbeats_connecting: AtomicBool,
    /// Lease rounds run so far.
    lease_rounds: AtomicU64,
    /// Partitions being handed over (their agents stopping), and why.
    handing_over: RwLock<HashMap<u32, handover::Handing>>,
    owned: RwLock<BTreeSet<u32>>,
    /// Partitions taken whose stream may still hold unread entries: until the reader finds
    /// them drained, messages for their agents still go through the stream (not straight to
    /// the local actor), so each agent's order holds across a takeover.
    draining: RwLock<BTreeSet<u32>>,
    /// Partitions whose pending entries (a previous holder's, or this process's own from
    /// before a lost connection) must be claimed before anything newer is read from them.
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
    /// The connections (node, client id) the read under way blocks on.
    blocked_reads: Mutex<Vec<(String, u16, i64)>>,
    stopping: AtomicBool,
    /// Calls this process handed to the owners of other partitions ([`Transport::call`]), by
    /// their envelope's id; the reply reader completes them.
    ///
    /// [`Transport::call`]: agentd_ports::Transport::call
    calls: Mutex<HashMap<Uuid, oneshot::Sender<Reply>>>,
    dead: DeadLetters,
    scripts: Scripts,
    /// The entries offered to agents to hold and not let go yet.
    held: held::HeldEntries,
    /// Agents seen to exist lately (see [`known`]).
    known: known::KnownAgents,
}

impl RedisBus {
    /// Connects (failing at once if Redis is unreachable).
    pub async fn connect(
        cfg: RedisBusConfig,
        con: RedisConnection,
    ) -> Result<Arc<Self>, AgentdError> {
        let keys = Keys::new(&cfg.namespace, cfg.partitions);
        let cfg_partitions = cfg.partitions;
        let lease_con = cfg
            .target
            .connect_with(agentd_store::Patience::within(
                times::LeaseTimes::of(cfg.lease_ms).wait(),
            ))
            .await
            .map_err(be)?;
        let dead = DeadLetters::new(con.clone(), keys.dead(), cfg.dead_maxlen);
        let delivering = (0..cfg.partitions.max(1))
            .map(|_| AtomicUsize::new(0))
            .collect();
        Ok(Arc::new(RedisBus {
            cfg,
            keys,
            con,
            lease_con,
            heartbeats: tokio::sync::Mutex::new(None),
            last_heartbeat: Mutex::new(None),
            heartbeats_connecting: AtomicBool::new(false),
            lease_rounds: AtomicU64::new(0),
            handing_over: RwLock::new(HashMap::new()),
            owned: RwLock::new(BTreeSet::new()),
            draining: RwLock::new(BTreeSet::new()),
            to_claim: RwLock::new(BTreeSet::new()),
            renewed: RwLock::new(HashMap::new()),
            delivering,
            read_rounds: AtomicU64::new(0),
            reading: AtomicBool::new(false),
            blocked_reads: Mutex::new(Vec::new()),
            stopping: AtomicBool::new(false),
            calls: Mutex::new(HashMap::new()),
            dead,
            scripts: Scripts::new(),
            held: held::HeldEntries::new(cfg_partitions),
            known: known::KnownAgents::default(),
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
    ///
    /// [`Transport::may_deliver`]: agentd_ports::Transport::may_deliver
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

    /// The partitions this process owns now.
    pub fn owned(&self) -> Vec<u32> {
        self.owned
            .read()
            .map(|o| o.iter().copied().collect())
            .unwrap_or_default()
    }

    /// This process's id.
    pub fn process_id(&self) -> &str {
        &self.cfg.process_id
    }

    /// Takes the first leases, then runs the lease loop and the partition reader in the
    /// background until [`RedisBus::shutdown`].
    pub async fn start(self: &Arc<Self>, system: Arc<dyn Inbound>) -> Result<(), AgentdError> {
        let mut con = self.con.clone();
        for k in 0..self.cfg.partitions {
            ensure_group(&mut con, &self.keys.partition(k)).await?;
        }
        self.scripts.load(&mut con).await.map_err(be)?;
        self.connect_heartbeats().await?;
        self.clone().lease_round(&system).await?;
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
            let _: redis::RedisResult<i64> = self.release_lease(k).await;
        }
        if let Ok(mut o) = self.owned.write() {
            o.clear();
        }
        let _: redis::RedisResult<()> = redis::pipe()
            .cmd("ZREM")
            .arg(self.keys.members())
            .arg(&self.cfg.process_id)
            .ignore()
            .cmd("HDEL")
            .arg(self.keys.members_clients())
            .arg(&self.cfg.process_id)
            .ignore()
            .query_async(&mut con)
            .await;
        let _: redis::RedisResult<()> = cmd("DEL")
            .arg(self.keys.replies(&self.cfg.process_id))
            .query_async(&mut con)
            .await;
    }

    /// A connection of this bus's own for one blocking reader.
    async fn blocking_reader(&self) -> Result<BlockingConnection, AgentdError> {
        BlockingConnection::connect(&self.cfg.target)
            .await
            .map_err(be)
    }

    /// Marks partition `k` to be claimed before it is read and drained before its agents get
    /// direct deliveries. A partition (re)gained is marked before it is marked owned or fresh
    /// (see [`RedisBus::readable`]).
    fn claim_and_drain(&self, k: u32) {
        self.held.next_epoch(k);
        if let Ok(mut c) = self.to_claim.write() {
            c.insert(k);
        }
        if let Ok(mut d) = self.draining.write() {
            d.insert(k);
        }
    }
}

/// The agent `env` goes to: only agent envelopes travel on partitions.
fn partition_target(env: &Envelope) -> Result<&str, AgentdError> {
    env.to.agent_id().ok_or_else(|| {
        AgentdError::new(
            ErrorCode::BadEnvelope,
            "only agent envelopes travel on partitions",
        )
    })
}
