//! The concerns of one agent's own data: its record, its thread, its checkpoints.

use super::{StoreKind, StoreResult};
use agentd_proto::{AgentRecord, Checkpoint, ThreadEntry};
use async_trait::async_trait;
use std::sync::Arc;

/// Agent records: one per agent, replaced whole by a put. Deleting an agent
/// ([`Self::delete_agent`]) is this concern's too, and removes everything every concern keeps
/// of the agent, so a backend implements it knowing all of them.
#[async_trait]
pub trait AgentRecords: StoreKind {
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

    /// Removes an agent: record, thread, inbox, checkpoints, its own aliases, children list and
    /// dependents, its A2A tasks, the outside ids that map to it ([`super::ExternalIds`]), and
    /// its entries in its parent's children list and aliases.
    async fn delete_agent(&self, agent_id: &str) -> StoreResult<()>;
}

/// Threads: each agent's entries, in order. An entry id is in a thread at most once (an
/// append of an id already there changes nothing), so a replayed turn de-duplicates.
#[async_trait]
pub trait Threads: StoreKind {
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
}

/// Checkpoints: snapshots of an agent, newest first, pruned to the newest `keep`.
#[async_trait]
pub trait Checkpoints: StoreKind {
    /// Saves a checkpoint, then prunes the agent's oldest ones so that at most `keep` remain
    /// (`keep` 0 keeps all).
    async fn checkpoint_put(&self, checkpoint: &Checkpoint, keep: usize) -> StoreResult<()>;

    /// An agent's checkpoints, newest first.
    async fn checkpoints(&self, agent_id: &str) -> StoreResult<Vec<Checkpoint>>;
}
