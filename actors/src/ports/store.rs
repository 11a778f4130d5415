//! The store port: durable memory of agents (records, threads, inboxes, aliases,
//! checkpoints), the batch of writes an agent flushes, and the typed failure a store reports.

use agentd_proto::{
    AgentRecord, AgentdError, Checkpoint, Envelope, ErrorCode, ThreadEntry, ToolAnswer,
    ToolCallClose, ToolCallRecord, ToolCallStatus,
};
use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use uuid::Uuid;

/// What kind of failure a store met. Callers decide by it, never by a message's text,
/// whether the work that hit it is kept and tried again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreErrorKind {
    /// The backend could not be reached or did not answer (I/O, a connection cut, Redis
    /// down or failing over, a stopped writer thread): the same call can succeed later, so the
    /// work is kept, and a caller outside is answered `unavailable` (503), to retry.
    Transient,
    /// The backend answered, refusing the call with an error of its own (Redis: an error reply
    /// such as `WRONGTYPE`, a key of the wrong type that only a foreign writer makes): the work
    /// is kept and tried again like a transient failure (a stream entry a bounded number of
    /// times, `redis.max_deliveries`), but a caller outside is answered `store_error` (500):
    /// retrying soon is unlikely to help.
    Rejected,
    /// A stored value cannot be decoded, or a value cannot be encoded: the same call fails
    /// the same way again, so the work is reported and given up.
    Corrupt,
    /// A write for an agent this process no longer owns was refused by the store (its
    /// partition's lease names another process): the new owner takes the work, so the caller
    /// treats it like an unreachable store (the stream entry stays pending, a sender retries).
    Fenced,
    /// The store was asked for something it does not do (a forward to a stream, an outbox):
    /// a caller's mistake, never worth a retry.
    Unsupported,
    /// A write was applied, but fewer replicas than asked (`redis.min_replicas`) confirmed it
    /// in time: a failover now could lose it, so nothing that depends on it is acknowledged.
    /// The write may stand, so the caller keeps the work (writes are idempotent) and a caller
    /// outside answers `unavailable`.
    Unreplicated,
}

impl StoreErrorKind {
    /// How a message of this kind starts (stable: operators grep logs for it).
    fn prefix(self) -> &'static str {
        match self {
            StoreErrorKind::Transient | StoreErrorKind::Rejected | StoreErrorKind::Unsupported => {
                "store backend"
            }
            StoreErrorKind::Corrupt => "store decode",
            StoreErrorKind::Fenced => "fenced",
            StoreErrorKind::Unreplicated => "unreplicated",
        }
    }
}

/// A failure of the store: its [`StoreErrorKind`], what was being done (with the cause's own
/// text, so a log line says it all), and the cause itself where there is one. Stores map
/// their own errors into this one.
#[derive(Debug, thiserror::Error)]
#[error("{}: {}", .kind.prefix(), .context)]
pub struct StoreError {
    kind: StoreErrorKind,
    context: String,
    #[source]
    source: Option<Box<dyn std::error::Error + Send + Sync + 'static>>,
}

impl StoreError {
    /// A failure of `kind`; `context` says what failed.
    pub fn new(kind: StoreErrorKind, context: impl Into<String>) -> Self {
        StoreError {
            kind,
            context: context.into(),
            source: None,
        }
    }

    /// A failure of `kind` caused by `source`; `context` says what failed (and may quote it).
    pub fn caused_by(
        kind: StoreErrorKind,
        context: impl Into<String>,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        StoreError {
            kind,
            context: context.into(),
            source: Some(Box::new(source)),
        }
    }

    /// A [`StoreErrorKind::Transient`] failure.
    pub fn transient(context: impl Into<String>) -> Self {
        Self::new(StoreErrorKind::Transient, context)
    }

    /// A [`StoreErrorKind::Corrupt`] value.
    pub fn corrupt(context: impl Into<String>) -> Self {
        Self::new(StoreErrorKind::Corrupt, context)
    }

    /// A [`StoreErrorKind::Fenced`] write.
    pub fn fenced(context: impl Into<String>) -> Self {
        Self::new(StoreErrorKind::Fenced, context)
    }

    /// A [`StoreErrorKind::Unreplicated`] write.
    pub fn unreplicated(context: impl Into<String>) -> Self {
        Self::new(StoreErrorKind::Unreplicated, context)
    }

    /// What kind of failure this is.
    pub fn kind(&self) -> StoreErrorKind {
        self.kind
    }

    /// Whether the same work can succeed later ([`StoreErrorKind::Transient`],
    /// [`StoreErrorKind::Rejected`], [`StoreErrorKind::Fenced`] or
    /// [`StoreErrorKind::Unreplicated`]): the caller keeps it instead of giving it up.
    pub fn is_transient(&self) -> bool {
        matches!(
            self.kind,
            StoreErrorKind::Transient
                | StoreErrorKind::Rejected
                | StoreErrorKind::Fenced
                | StoreErrorKind::Unreplicated
        )
    }
}

/// A store failure as callers see it: a passing one (the store unreachable, a fenced or
/// unreplicated write) is `unavailable` — retry —, any other `store_error`.
impl From<StoreError> for AgentdError {
    fn from(e: StoreError) -> Self {
        let code = match e.kind {
            StoreErrorKind::Transient | StoreErrorKind::Fenced | StoreErrorKind::Unreplicated => {
                ErrorCode::Unavailable
            }
            StoreErrorKind::Rejected | StoreErrorKind::Corrupt | StoreErrorKind::Unsupported => {
                ErrorCode::StoreError
            }
        };
        AgentdError::with_source(code, e.to_string(), e)
    }
}

/// Whether `e` is a passing failure (Redis unreachable, a connection cut, a fenced write)
/// after which the same work can succeed: the caller keeps the work (a stream entry stays
/// unacknowledged, a turn is retried) instead of giving it up. A `store_error` is judged by
/// the [`StoreError`] behind it; one that crossed the wire without it counts as transient
/// (keeping work is the safe side).
pub fn is_transient(e: &AgentdError) -> bool {
    match e.code {
        ErrorCode::Unavailable => true,
        ErrorCode::StoreError => e
            .source_as::<StoreError>()
            .is_none_or(StoreError::is_transient),
        _ => false,
    }
}

/// What [`ThreadStore::inbox_push_then`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pushed {
    /// The envelope was new, and is queued now.
    pub fresh: bool,
    /// The writes given with it were applied with it.
    pub then_applied: bool,
}

/// Results of store calls.
pub type StoreResult<T> = Result<T, StoreError>;

/// A `(worker title, thread alias) → child agent` entry of a parent (seed 000).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkerAlias {
    /// Trimmed worker title.
    pub worker_title: String,
    /// Thread alias.
    pub alias: String,
    /// The child agent (= child thread) id.
    pub child_id: String,
}

/// One write of a [`ThreadStore::write_batch`].
#[derive(Debug, Clone, PartialEq)]
pub enum StoreWrite {
    /// As [`ThreadStore::put_agent`]. Shared with the agent that wrote it (a store that keeps
    /// records in memory keeps this one instead of a copy).
    PutAgent(Arc<AgentRecord>),
    /// As [`ThreadStore::append`] (a duplicate entry id changes nothing).
    Append {
        /// Whose thread (the agent's shared copy of its id: no allocation per write).
        agent_id: Arc<str>,
        /// The entry (shared with the agent's own copy of its thread).
        entry: Arc<ThreadEntry>,
    },
    /// As [`ThreadStore::append_new`]: an entry its writer knows is not in the thread (a first
    /// run's: nothing before made an entry with its id), which the store may append without
    /// looking for its id. A batch written again after a failure (it may have landed) turns it
    /// into an [`StoreWrite::Append`].
    AppendNew {
        /// Whose thread.
        agent_id: Arc<str>,
        /// The entry.
        entry: Arc<ThreadEntry>,
    },
    /// As [`ThreadStore::inbox_done`].
    InboxDone {
        /// Whose inbox.
        agent_id: Arc<str>,
        /// The envelope handled.
        env_id: Uuid,
    },
    /// Appends `env` to `stream`, the partition stream its receiver is read from
    /// ([`Transport::stream_for`]), after the writes before it: a child's output to its parent
    /// leaves exactly when the writes it was made from are stored, in the same round trip, and
    /// is written again with them if they fail. Only a store that is also the bus takes it
    /// ([`ThreadStore::takes_forwards`]).
    Forward {
        /// The partition stream.
        stream: String,
        /// The envelope.
        env: Arc<Envelope>,
    },
    /// Acknowledges `entry`, a partition stream entry `agent_id` held instead of pushing it to
    /// its durable inbox ([`StreamEntry`](super::StreamEntry)), in the batch that records the end of
    /// the item it carried (or that adopted the item into the inbox): only while the partition's
    /// lease holds, like the agent's record. Only a store that is also the bus takes it
    /// ([`ThreadStore::takes_forwards`]).
    Acknowledge {
        /// Whose partition.
        agent_id: Arc<str>,
        /// The entry; kept alive until written, so the transport knows an agent still holds it.
        entry: Arc<super::StreamEntry>,
    },
    /// Keeps `env`, a child's output to its parent in this process (with no bus to carry it),
    /// until [`ThreadStore::outbox_done`]: written in the batch it was made from, it outlives a
    /// crash between that batch and the parent's push (the child's item is done by then, so
    /// nothing would make it again), and the system's recovery at start hands it to the
    /// parent. Only a store that keeps an outbox takes it ([`ThreadStore::keeps_outbox`]).
    Outbox {
        /// The output envelope (its id derived from the entry that carries the output).
        env: Arc<Envelope>,
    },
}

/// Durable memory of agentd: agent records, threads, the parent→child map and worker aliases.
///
/// Every implementation passes the same conformance suite (`agentd_store::conformance`).
#[async_trait]
pub trait ThreadStore: Send + Sync + 'static {
    /// A short name for logs and `/v1/info` (`memory`, `embedded`, `redis`).
    fn kind(&self) -> &'static str;
    /// Creates or replaces an agent record.
    async fn put_agent(&self, record: &AgentRecord) -> StoreResult<()>;
    /// Reads an agent record.
    async fn get_agent(&self, agent_id: &str) -> StoreResult<Option<AgentRecord>>;
    /// [`Self::get_agent`], shared: a store that keeps its records in memory answers the one it
    /// holds instead of a copy (a read that only looks costs no copy of the record's strings).
    async fn get_agent_shared(&self, agent_id: &str) -> StoreResult<Option<Arc<AgentRecord>>> {
        Ok(self.get_agent(agent_id).await?.map(Arc::new))
    }
    /// Whether an agent record exists (every message posted checks it: stores answer without
    /// reading and decoding the record where they can).
    async fn agent_exists(&self, agent_id: &str) -> StoreResult<bool> {
        Ok(self.get_agent(agent_id).await?.is_some())
    }
    /// Every agent without a parent.
    async fn list_roots(&self) -> StoreResult<Vec<AgentRecord>>;
    /// Appends an entry to an agent's thread. Returns `false` (and changes nothing) if an entry
    /// with the same id is already there: replays de-duplicate.
    async fn append(&self, agent_id: &str, entry: &ThreadEntry) -> StoreResult<bool>;
    /// Appends an entry its caller knows is not in the thread (a first run's): a store may skip
    /// looking for its id, which on a long thread costs the most of an append. A caller that is
    /// wrong doubles the entry; one that is not sure calls [`Self::append`].
    async fn append_new(&self, agent_id: &str, entry: &ThreadEntry) -> StoreResult<()> {
        self.append(agent_id, entry).await.map(|_| ())
    }
    /// The whole thread, in order.
    async fn thread(&self, agent_id: &str) -> StoreResult<Vec<ThreadEntry>>;
    /// Replaces the whole thread (reset, compact).
    async fn replace_thread(&self, agent_id: &str, entries: &[ThreadEntry]) -> StoreResult<()>;
    /// Records `child` under `parent` (idempotent). Closed children stay listed.
    async fn add_child(&self, parent_id: &str, child_id: &str) -> StoreResult<()>;
    /// Children of `parent`, oldest first.
    async fn children(&self, parent_id: &str) -> StoreResult<Vec<String>>;
    /// How many children `parent` has (the fan-out check runs it on every spawn).
    async fn child_count(&self, parent_id: &str) -> StoreResult<usize> {
        Ok(self.children(parent_id).await?.len())
    }
    /// Records that `dependent` waits for `dependency` (idempotent), so that whichever process
    /// sees `dependency` settle can tell `dependent`, wherever it lives.
    async fn add_dependent(&self, dependency: &str, dependent: &str) -> StoreResult<()>;
    /// Forgets that `dependent` waits for `dependency` (idempotent): a root or a worker reached
    /// the watch `dependent` put in its inbox, so that dependency is met for good.
    async fn remove_dependent(&self, dependency: &str, dependent: &str) -> StoreResult<()>;
    /// The agents recorded as waiting for `dependency`, in no particular order.
    async fn dependents(&self, dependency: &str) -> StoreResult<Vec<String>>;
    /// Returns the child for `(parent, worker, alias)`, creating the mapping to `candidate` if
    /// there is none. Atomic: two racing callers get the same child. Returns `(child, created)`.
    async fn alias_get_or_create(
        &self,
        parent_id: &str,
        worker_title: &str,
        alias: &str,
        candidate: &str,
    ) -> StoreResult<(String, bool)>;
    /// The worker aliases of a parent.
    async fn aliases(&self, parent_id: &str) -> StoreResult<Vec<WorkerAlias>>;
    /// Removes an agent: record, thread, inbox, checkpoints, its own aliases, children list and
    /// dependents, and its entries in its parent's children list and aliases.
    async fn delete_agent(&self, agent_id: &str) -> StoreResult<()>;
    /// Durably queues an envelope for an agent, once: returns `false` (and changes nothing) if
    /// an envelope with the same id was queued before (within the de-duplication window of the
    /// last [`DEDUP_WINDOW`] ids). A transport acknowledges its entry only after this returns.
    async fn inbox_push(&self, agent_id: &str, env: &Envelope) -> StoreResult<bool>;
    /// [`inbox_push`](Self::inbox_push), and only if `env` was new, `then` in the same
    /// atomic write where the backend can: an item that starts a turn at once carries the
    /// turn's first writes (its input entry, the `running` record), one commit or round trip
    /// instead of two. A duplicate changes nothing. By default `then` is not applied (the
    /// caller writes it itself), so a store without atomic multi-writes loses nothing.
    async fn inbox_push_then(
        &self,
        agent_id: &str,
        env: &Envelope,
        _then: &[StoreWrite],
    ) -> StoreResult<Pushed> {
        Ok(Pushed {
            fresh: self.inbox_push(agent_id, env).await?,
            then_applied: false,
        })
    }
    /// The envelopes queued for an agent and not yet done, in arrival order (an activated agent
    /// resumes from them after a restart or a failover).
    async fn inbox_pending(&self, agent_id: &str) -> StoreResult<Vec<Envelope>>;
    /// Marks a queued envelope handled (its turn finished).
    async fn inbox_done(&self, agent_id: &str, env_id: Uuid) -> StoreResult<()>;
    /// Saves a checkpoint, then prunes the agent's oldest ones so that at most `keep` remain
    /// (`keep` 0 keeps all).
    async fn checkpoint_put(&self, checkpoint: &Checkpoint, keep: usize) -> StoreResult<()>;
    /// An agent's checkpoints, newest first.
    async fn checkpoints(&self, agent_id: &str) -> StoreResult<Vec<Checkpoint>>;

    /// Applies `writes` in order as one unit where the backend can (one transaction on redb,
    /// one pipelined round trip on Redis), so a turn's writes cost one commit, not several.
    /// Each write is idempotent, so a batch cut off by a crash can simply be written again.
    async fn write_batch(&self, writes: &[StoreWrite]) -> StoreResult<()> {
        for w in writes {
            match w {
                StoreWrite::PutAgent(rec) => self.put_agent(rec).await?,
                StoreWrite::Append { agent_id, entry } => {
                    self.append(agent_id, entry).await?;
                }
                StoreWrite::AppendNew { agent_id, entry } => {
                    self.append_new(agent_id, entry).await?;
                }
                StoreWrite::InboxDone { agent_id, env_id } => {
                    self.inbox_done(agent_id, *env_id).await?
                }
                StoreWrite::Forward { .. } | StoreWrite::Acknowledge { .. } => {
                    return Err(forwards_not_taken(self.kind()));
                }
                StoreWrite::Outbox { .. } => return Err(outbox_not_kept(self.kind())),
            }
        }
        Ok(())
    }

    /// [`Self::write_batch`] of what live agent `agent_id` writes of its own state (its
    /// flush). A store that fences writes by partition lease writes the agent's record only
    /// while this process holds the lease, else answers [`StoreError::Fenced`] (the other
    /// writes of a flush are idempotent and may land): a process that stalled past its lease
    /// must not overwrite, with a late flush, the record the partition's next owner keeps.
    async fn write_own_batch(&self, agent_id: &str, writes: &[StoreWrite]) -> StoreResult<()> {
        let _ = agent_id;
        self.write_batch(writes).await
    }

    /// Waits until the writes this process made so far on the node that holds `agent_id`'s
    /// keys (its partition's slot) are held by the replicas the store is configured to wait for
    /// (`redis.min_replicas`), before an acknowledgement that depends on them is given: a
    /// `202`, a command's reply. [`StoreError::unreplicated`] if fewer confirmed in time (the
    /// writes may stand). Stores without replicas, and a Redis store asking for none, answer at
    /// once without a round trip.
    async fn replicated(&self, agent_id: &str) -> StoreResult<()> {
        let _ = agent_id;
        Ok(())
    }

    /// Claims idempotency key `key` (derived from a caller's `Idempotency-Key`) for the request
    /// whose fingerprint is `fingerprint`, for `ttl_ms`: `None` if the claim is new (this
    /// caller does what the key guards), else the [`Claim`] made first (a retry, or another
    /// request reusing the key: its fingerprint, and whether what it guards is done). One
    /// atomic step, kept in agent `home`'s slot where the store has slots — the agent the
    /// guarded work writes to — so that a failover keeps both or neither of what the master
    /// had not replicated. An expired claim is no claim. Kept durably where the store is
    /// durable: a claim outlives a restart.
    async fn idempotency_claim(
        &self,
        home: &str,
        key: &str,
        fingerprint: &str,
        ttl_ms: u64,
    ) -> StoreResult<Option<Claim>>;

    /// Ends claim `key` of agent `home` ([`Self::idempotency_claim`]): settled (what it guards is
    /// done; kept `keep_ms` from now, for retries to find), or released (nothing was done, so
    /// the key may be used again). A missing claim stays missing.
    async fn idempotency_claim_end(&self, home: &str, key: &str, end: ClaimEnd) -> StoreResult<()>;
    /// Whether [`StoreWrite::Forward`] can be part of this store's batches (the store is also
    /// the bus the transport appends to).
    fn takes_forwards(&self) -> bool {
        false
    }

    /// Whether [`StoreWrite::Outbox`] can be part of this store's batches: a durable store
    /// that is not a bus (on a bus, outputs travel through partition streams; a store in
    /// memory loses its outbox with the process anyway).
    fn keeps_outbox(&self) -> bool {
        false
    }

    /// The outputs kept by [`StoreWrite::Outbox`] and not done yet, oldest first.
    async fn outbox_pending(&self) -> StoreResult<Vec<Envelope>> {
        Ok(Vec::new())
    }

    /// Forgets the kept output `env_id`: its parent's router has handled it (an unknown id
    /// changes nothing).
    async fn outbox_done(&self, env_id: Uuid) -> StoreResult<()> {
        let _ = env_id;
        Ok(())
    }

    /// Stores tool call `call.call_id` (a service tool's, answered outside its turn), replacing
    /// what was stored under its id — unless that is closed: a closed call stays closed (a
    /// late write of the open call, e.g. marking it published, changes nothing). Called before
    /// the call is published, so a crash right after finds it.
    async fn tool_call_put(&self, call: &ToolCallRecord) -> StoreResult<()> {
        let _ = call;
        Err(tool_calls_not_kept(self.kind()))
    }

    /// Tool call `call_id`, open or closed.
    async fn tool_call_get(&self, call_id: Uuid) -> StoreResult<Option<ToolCallRecord>> {
        let _ = call_id;
        Err(tool_calls_not_kept(self.kind()))
    }

    /// Closes tool call `call_id` as `closing` says **if it is open**, in one atomic write: of
    /// two closings (two answers, an answer and a timeout), the first wins and the second
    /// finds it closed. Opening it again is not a closing: an approval (`awaiting_approval` →
    /// `pending`) goes through here too, with `closing.status = Pending`.
    async fn tool_call_close(
        &self,
        call_id: Uuid,
        closing: &ToolCallClosing,
    ) -> StoreResult<ToolCallClose> {
        let _ = (call_id, closing);
        Err(tool_calls_not_kept(self.kind()))
    }

    /// The tool calls that are open (pending or awaiting approval), oldest first.
    async fn tool_calls_open(&self) -> StoreResult<Vec<ToolCallRecord>> {
        Err(tool_calls_not_kept(self.kind()))
    }

    /// Stores `value` as A2A task `task_id` of context agent `agent_id`, replacing what was
    /// stored under that id. The value is opaque here (the A2A layer's encoding); it lives
    /// under the agent's own keys, so [`Self::delete_agent`] removes it with the agent.
    async fn a2a_task_put(&self, agent_id: &str, task_id: &str, value: &[u8]) -> StoreResult<()> {
        let _ = (agent_id, task_id, value);
        Err(a2a_tasks_not_kept(self.kind()))
    }

    /// [`Self::a2a_task_put`] unless something is stored under `task_id` already (then nothing
    /// changes), in one atomic step: answers whether it stored `value`. A value whose id says
    /// what it is (a push notification of one state) is written once, and a second writer does
    /// not put back what the first one has since changed.
    async fn a2a_task_put_new(
        &self,
        agent_id: &str,
        task_id: &str,
        value: &[u8],
    ) -> StoreResult<bool> {
        let _ = (agent_id, task_id, value);
        Err(a2a_tasks_not_kept(self.kind()))
    }

    /// A2A task `task_id` of context agent `agent_id`, if stored.
    async fn a2a_task_get(&self, agent_id: &str, task_id: &str) -> StoreResult<Option<Vec<u8>>> {
        let _ = (agent_id, task_id);
        Err(a2a_tasks_not_kept(self.kind()))
    }

    /// Every A2A task of context agent `agent_id`, in no particular order.
    async fn a2a_tasks(&self, agent_id: &str) -> StoreResult<Vec<Vec<u8>>> {
        let _ = agent_id;
        Err(a2a_tasks_not_kept(self.kind()))
    }

    /// Maps outside id `key` to agent `agent_id` unless it maps to an agent already, in one
    /// atomic step, and answers the agent `key` maps to after the call: `agent_id`, or the
    /// agent of an earlier claim (so of two processes claiming one key at once, both learn the
    /// one agent that won). The mapping lasts as long as the agent: [`Self::delete_agent`]
    /// drops the mappings to it, whatever process made them.
    async fn external_id_claim(&self, key: &ExternalKey, agent_id: &str) -> StoreResult<String> {
        let _ = (key, agent_id);
        Err(external_ids_not_kept(self.kind()))
    }

    /// The agent outside id `key` maps to, if any.
    async fn external_id_get(&self, key: &ExternalKey) -> StoreResult<Option<String>> {
        let _ = key;
        Err(external_ids_not_kept(self.kind()))
    }

    /// Drops the mapping of `key` if it maps to `agent_id` (a door that found the agent gone
    /// maps the key afresh); a mapping to another agent stays.
    async fn external_id_release(&self, key: &ExternalKey, agent_id: &str) -> StoreResult<()> {
        let _ = (key, agent_id);
        Err(external_ids_not_kept(self.kind()))
    }
}

/// An id an outside client gives one of agentd's agents (an A2A `contextId` it chose, …), as
/// the store keys it: the door it came through, the tenant and the owner it belongs to, and the
/// id itself, which may be any string. Tenant and owner are empty until agentd has tenants;
/// they are in the key already, so a key written now stays the same key then.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ExternalKey {
    /// What the id came through and what it names there (`a2a/<agent type>`: a context of
    /// that A2A agent).
    pub door: String,
    /// The tenant (empty: none).
    pub tenant: String,
    /// The owner within the tenant (empty: none).
    pub owner: String,
    /// The id, as the client gave it.
    pub id: String,
}

impl ExternalKey {
    /// Id `id` of door `door`, without tenant or owner.
    pub fn new(door: impl Into<String>, id: impl Into<String>) -> Self {
        ExternalKey {
            door: door.into(),
            tenant: String::new(),
            owner: String::new(),
            id: id.into(),
        }
    }

    /// The key as one string, the same for the same parts and different for different ones
    /// whatever they hold: the JSON array of its parts.
    pub fn encoded(&self) -> String {
        serde_json::Value::from(vec![
            self.door.as_str(),
            self.tenant.as_str(),
            self.owner.as_str(),
            self.id.as_str(),
        ])
        .to_string()
    }
}

/// The first claim of an idempotency key ([`ThreadStore::idempotency_claim`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claim {
    /// The fingerprint of the request that claimed it: a retry has the same.
    pub fingerprint: String,
    /// What the key guards is done ([`ClaimEnd::Settled`]); until then, the first request may
    /// still be under way, or have died half-way.
    pub settled: bool,
}

/// How a claim ends ([`ThreadStore::idempotency_claim_end`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClaimEnd {
    /// What the key guards is done: the claim is kept this long from now, settled.
    Settled {
        /// How long retries find it, ms.
        keep_ms: u64,
    },
    /// Nothing was done: the key is free again.
    Released,
}

impl Claim {
    /// The claim as one string, `<0|1>:<fingerprint>`, for stores that keep it as text.
    pub fn encode(&self) -> String {
        format!("{}:{}", u8::from(self.settled), self.fingerprint)
    }

    /// A claim [`Self::encode`]d; a bare fingerprint (a spawn claim of an earlier version)
    /// counts as settled.
    pub fn decode(text: &str) -> Claim {
        match text.split_once(':') {
            Some(("0", fingerprint)) => Claim {
                fingerprint: fingerprint.to_string(),
                settled: false,
            },
            Some(("1", fingerprint)) => Claim {
                fingerprint: fingerprint.to_string(),
                settled: true,
            },
            _ => Claim {
                fingerprint: text.to_string(),
                settled: true,
            },
        }
    }
}

/// How [`ThreadStore::tool_call_close`] changes an open call.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCallClosing {
    /// Its new status.
    pub status: ToolCallStatus,
    /// Its answer, if answered.
    pub answer: Option<ToolAnswer>,
    /// Why (a rejection's or a cancel's reason).
    pub reason: Option<String>,
    /// When, ms since the epoch.
    pub at_ms: u64,
}

impl ToolCallClosing {
    /// What `call` becomes: the closing applied to it.
    pub fn apply(&self, call: &mut ToolCallRecord) {
        call.status = self.status;
        if self.answer.is_some() {
            call.answer = self.answer.clone();
        }
        if self.reason.is_some() {
            call.reason = self.reason.clone();
        }
        if !self.status.is_open() {
            call.closed_at_ms = Some(self.at_ms);
        }
    }

    /// Whether it may apply to a call in `status`: a closing applies to an open call; an
    /// approval (to `pending`) only to one awaiting approval.
    pub fn applies_to(&self, status: ToolCallStatus) -> bool {
        match self.status {
            ToolCallStatus::Pending => status == ToolCallStatus::AwaitingApproval,
            _ => status.is_open(),
        }
    }
}

/// The error of a store that keeps no tool calls.
pub fn tool_calls_not_kept(kind: &str) -> StoreError {
    StoreError::new(
        StoreErrorKind::Unsupported,
        format!("the {kind} store keeps no tool calls"),
    )
}

/// The error of a store that keeps no A2A tasks (one that is neither the memory, the embedded
/// nor the Redis store).
pub fn a2a_tasks_not_kept(kind: &str) -> StoreError {
    StoreError::new(
        StoreErrorKind::Unsupported,
        format!("the {kind} store keeps no A2A tasks"),
    )
}

/// The error of a store that keeps no outside ids (one that is neither the memory, the
/// embedded nor the Redis store).
pub fn external_ids_not_kept(kind: &str) -> StoreError {
    StoreError::new(
        StoreErrorKind::Unsupported,
        format!("the {kind} store keeps no outside ids"),
    )
}

/// The error of a store asked for a [`StoreWrite::Forward`] it cannot take (agents only ask
/// stores whose [`ThreadStore::takes_forwards`] says they can).
pub fn forwards_not_taken(kind: &str) -> StoreError {
    StoreError::new(
        StoreErrorKind::Unsupported,
        format!("the {kind} store cannot write to another process's stream"),
    )
}

/// The error of a store asked for a [`StoreWrite::Outbox`] it does not keep (agents only ask
/// stores whose [`ThreadStore::keeps_outbox`] says they do).
pub fn outbox_not_kept(kind: &str) -> StoreError {
    StoreError::new(
        StoreErrorKind::Unsupported,
        format!("the {kind} store keeps no outbox"),
    )
}

/// How many envelope ids per agent the stores remember for de-duplication.
pub const DEDUP_WINDOW: usize = 10_000;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_passing_store_failure_is_unavailable_and_a_lasting_one_a_store_error() {
        let code = |kind| AgentdError::from(StoreError::new(kind, "writing")).code;
        for kind in [
            StoreErrorKind::Transient,
            StoreErrorKind::Fenced,
            StoreErrorKind::Unreplicated,
        ] {
            assert_eq!(code(kind), ErrorCode::Unavailable, "{kind:?}");
        }
        for kind in [
            StoreErrorKind::Rejected,
            StoreErrorKind::Corrupt,
            StoreErrorKind::Unsupported,
        ] {
            assert_eq!(code(kind), ErrorCode::StoreError, "{kind:?}");
        }
    }
}
