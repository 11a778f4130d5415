//! The ports the actors talk through. Actors know storage, models and event transport only
//! through these traits, so the same actors run on memory, redb or Redis, and on a scripted or
//! a real model.

use agentd_proto::{
    AgentRecord, AgentdError, Checkpoint, Envelope, ErrorCode, Event, Reply, ThreadEntry, ToolCall,
    Usage,
};
use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use uuid::Uuid;

/// A failure of the store. Stores map their own errors into this one.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The backend failed (I/O, corruption, connection).
    #[error("store backend: {0}")]
    Backend(String),
    /// A stored value could not be decoded.
    #[error("store decode: {0}")]
    Decode(String),
    /// A write for an agent this process no longer owns was refused by the store (its
    /// partition's lease names another process): the new owner takes the work, so the caller
    /// treats it like an unreachable store (the stream entry stays pending, a sender retries).
    #[error("fenced: {0}")]
    Fenced(String),
}

impl From<StoreError> for AgentdError {
    fn from(e: StoreError) -> Self {
        let code = match e {
            StoreError::Fenced(_) => ErrorCode::Unavailable,
            _ => ErrorCode::StoreError,
        };
        AgentdError::new(code, e.to_string())
    }
}

/// Whether `e` is a passing failure (Redis unreachable, a connection cut) after which the same
/// work can succeed: the caller keeps the work (a stream entry stays unacknowledged, a turn is
/// retried) instead of giving it up. Store backend failures count, store decode failures do
/// not (the stored value stays bad).
pub fn is_transient(e: &AgentdError) -> bool {
    match e.code {
        ErrorCode::Unavailable => true,
        ErrorCode::StoreError => !e.message.starts_with("store decode:"),
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
    /// Keeps `env`, a child's output to its parent in this process (with no bus to carry it),
    /// until [`ThreadStore::outbox_done`]: written in the batch it was made from, it outlives a
    /// crash between that batch and the parent's push (the child's item is done by then, so
    /// nothing would make it again), and [`crate::AgentSystem::recover`] hands it to the
    /// parent. Only a store that keeps an outbox takes it ([`ThreadStore::keeps_outbox`]).
    Outbox {
        /// The output envelope ([`crate::channel_router::output_envelope`]).
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
    /// Removes an agent: record, thread, inbox, checkpoints, its own aliases and children list, and its
    /// entries in its parent's children list and aliases.
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
                StoreWrite::InboxDone { agent_id, env_id } => {
                    self.inbox_done(agent_id, *env_id).await?
                }
                StoreWrite::Forward { .. } => return Err(forwards_not_taken(self.kind())),
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
}

/// How envelopes reach agents that live in another process (Redis partition streams). The
/// ChannelRouter asks it first; without a transport every agent is local.
#[async_trait]
pub trait Transport: Send + Sync + 'static {
    /// Whether this process delivers to `agent_id` itself (it owns the agent's partition and
    /// has drained what was queued for it before).
    fn is_local(&self, agent_id: &str) -> bool;
    /// Whether this process owns `agent_id`'s partition (even while still draining it).
    fn owns(&self, agent_id: &str) -> bool {
        self.is_local(agent_id)
    }
    /// Whether this process may queue deliveries for `agent_id` now: it owns the agent's
    /// partition and still holds its lease. An agent asks right before its durable push: a
    /// delivery that waited in its mailbox while the process stalled past its lease must not
    /// be queued here once the partition's next owner may be taking the same entries.
    fn may_deliver(&self, agent_id: &str) -> bool {
        self.owns(agent_id)
    }
    /// Hands `env` to the process that owns its receiver; returns once it is durably queued.
    /// `agent_not_found` (nothing queued) if the receiver does not exist: senders need not look
    /// it up first.
    async fn forward(&self, env: &Envelope) -> Result<(), AgentdError>;
    /// Runs a command in the process that owns the agent `env` is addressed to and answers its
    /// reply. Calls that act on a live agent (a tool run as it, its budget, environment,
    /// checkpoints, answers it waits for) must run where the agent lives: a second copy of the
    /// agent elsewhere would overwrite the first one's state, and replies to its tool calls go
    /// to its owner. `unavailable` if no answer came within `timeout` (the owner may have
    /// died: a caller may retry) or if this transport cannot reach other processes.
    async fn call(
        &self,
        env: Envelope,
        timeout: std::time::Duration,
    ) -> Result<Reply, AgentdError> {
        let _ = (env, timeout);
        Err(AgentdError::new(
            ErrorCode::Unavailable,
            "this transport cannot run calls in other processes",
        ))
    }
    /// The durable stream an envelope for `agent_id` is appended to, read by whichever process
    /// owns the agent, this one included (see [`StoreWrite::Forward`]); `None` if this
    /// transport has no such stream.
    fn stream_for(&self, agent_id: &str) -> Option<String> {
        let _ = agent_id;
        None
    }
    /// Ends the drain of owned partitions that hold nothing undelivered any more. The
    /// ChannelRouter calls it between two routed messages (see `SettleTransport`), so nothing
    /// it forwarded earlier can still wait in a stream when the partition's agents start to
    /// get direct deliveries: that would put a newer message before an older one.
    async fn settle(&self) -> Result<(), AgentdError> {
        Ok(())
    }
}

/// The error of a store asked for a [`StoreWrite::Forward`] it cannot take (agents only ask
/// stores whose [`ThreadStore::takes_forwards`] says they can).
pub fn forwards_not_taken(kind: &str) -> StoreError {
    StoreError::Backend(format!(
        "the {kind} store cannot append to another process's stream"
    ))
}

/// The error of a store asked for a [`StoreWrite::Outbox`] it does not keep (agents only ask
/// stores whose [`ThreadStore::keeps_outbox`] says they do).
pub fn outbox_not_kept(kind: &str) -> StoreError {
    StoreError::Backend(format!("the {kind} store keeps no outbox"))
}

/// How many envelope ids per agent the stores remember for de-duplication.
pub const DEDUP_WINDOW: usize = 10_000;

/// A tool as the model sees it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    /// Name the model calls.
    pub name: String,
    /// What it does, for the model.
    pub description: String,
    /// JSON schema of the arguments.
    pub parameters: serde_json::Value,
}

/// Why the model is called.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    /// A step of an ordinary turn.
    Turn,
    /// Writing the summary that replaces old history (seed 003's compaction).
    Compact,
}

/// A thread as an agent keeps it in memory and hands it to its model: each entry shared
/// (`Arc`), so a thread that grows one entry at a time moves pointers (not whole entries) when
/// its vector grows, and the agent's copy and the store's batch (and the memory store) hold one
/// entry between them instead of a copy each.
pub type ThreadEntries = Vec<Arc<ThreadEntry>>;

/// One model call's input.
#[derive(Debug, Clone)]
pub struct ModelRequest {
    /// The calling agent (shared by all its requests, like its type and title).
    pub agent_id: Arc<str>,
    /// Its type.
    pub agent_type: Arc<str>,
    /// Its title.
    pub title: Arc<str>,
    /// The model name to use, if the spawn or the agent type names one.
    pub model: Option<String>,
    /// The provider to call (`None` = the default one); a [`ModelClient`] routing between
    /// providers reads it.
    pub provider: Option<String>,
    /// The agent's environment variables (a process backend passes them to its process).
    pub env: std::collections::BTreeMap<String, String>,
    /// Layered system prompt (base + sub-agent role + type overlay).
    pub system_prompt: Arc<str>,
    /// The thread so far (shared with the agent's copy: a request costs no copy of it).
    pub thread: std::sync::Arc<ThreadEntries>,
    /// Tools the agent may call (built once per agent and shared by its requests).
    pub tools: std::sync::Arc<Vec<ToolSpec>>,
    /// Why the model is called.
    pub purpose: Purpose,
}

/// One model call's output.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ModelResponse {
    /// Text of the answer (may be empty when only tools are called).
    pub text: String,
    /// Tool calls requested.
    pub tool_calls: Vec<ToolCall>,
    /// Tokens used.
    pub usage: Usage,
}

/// Why a model call failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ModelError {
    /// The provider asks to wait.
    #[error("rate limited; retry after {retry_after_ms} ms")]
    RateLimited {
        /// How long to wait.
        retry_after_ms: u64,
    },
    /// Anything else.
    #[error("{0}")]
    Failed(String),
}

/// A language model (or an agent process) that produces the next assistant message.
#[async_trait]
pub trait ModelClient: Send + Sync + 'static {
    /// Backend name for logs and the API (`scripted`, `openai`, ...).
    fn backend(&self) -> &'static str;

    /// The backend that serves `provider` (a router of several providers overrides it).
    fn backend_of(&self, _provider: Option<&str>) -> &'static str {
        self.backend()
    }
    /// Produces the next message for `request`.
    async fn complete(&self, request: ModelRequest) -> Result<ModelResponse, ModelError>;

    /// A lifecycle control of an agent, for backends that run something per agent (the process
    /// backend signals its process). Stateless backends ignore it.
    fn control(&self, _agent_id: &str, _control: agentd_proto::Control) {}
}

/// Where events go (in-process broadcast, Redis stream, ...). Publishing never blocks a turn.
pub trait EventSink: Send + Sync + 'static {
    /// Publishes one event.
    fn publish(&self, event: &Event);

    /// Whether anything would see a published event now. An agent asks before it builds one
    /// of the events it emits for every message (status changes, token usage): with nobody
    /// listening, building and dropping them was ~2 % of an in-process message.
    fn is_listened(&self) -> bool {
        true
    }
}
