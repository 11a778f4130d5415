//! The concern of a flush: the writes an agent makes as one unit, and the wait for replicas
//! before an acknowledgement that depends on them.

use super::{AgentRecords, Inboxes, StoreError, StoreErrorKind, StoreResult, Threads};
use agentd_proto::{AgentRecord, Envelope, ThreadEntry};
use async_trait::async_trait;
use std::sync::Arc;
use uuid::Uuid;

/// One write of a [`Batches::write_batch`].
#[derive(Debug, Clone, PartialEq)]
pub enum StoreWrite {
    /// As [`AgentRecords::put_agent`]. Shared with the agent that wrote it (a store that keeps
    /// records in memory keeps this one instead of a copy).
    PutAgent(Arc<AgentRecord>),
    /// As [`Threads::append`] (a duplicate entry id changes nothing).
    Append {
        /// Whose thread (the agent's shared copy of its id: no allocation per write).
        agent_id: Arc<str>,
        /// The entry (shared with the agent's own copy of its thread).
        entry: Arc<ThreadEntry>,
    },
    /// As [`Threads::append_new`]: an entry its writer knows is not in the thread (a first
    /// run's: nothing before made an entry with its id), which the store may append without
    /// looking for its id. A batch written again after a failure (it may have landed) turns it
    /// into an [`StoreWrite::Append`].
    AppendNew {
        /// Whose thread.
        agent_id: Arc<str>,
        /// The entry.
        entry: Arc<ThreadEntry>,
    },
    /// As [`Inboxes::inbox_done`].
    InboxDone {
        /// Whose inbox.
        agent_id: Arc<str>,
        /// The envelope handled.
        env_id: Uuid,
    },
    /// Appends `env` to `stream`, the partition stream its receiver is read from
    /// ([`Transport::stream_for`](crate::Transport::stream_for)), after the writes before
    /// it: a child's output to its parent leaves exactly when the writes it was made from are
    /// stored, in the same round trip, and is written again with them if they fail. Only a store
    /// that is also the bus takes it ([`Batches::takes_forwards`]).
    Forward {
        /// The partition stream.
        stream: String,
        /// The envelope.
        env: Arc<Envelope>,
    },
    /// Acknowledges `entry`, a partition stream entry `agent_id` held instead of pushing it to its
    /// durable inbox ([`StreamEntry`](crate::StreamEntry)), in the batch that records the
    /// end of the item it carried (or that adopted the item into the inbox): only while the
    /// partition's lease holds, like the agent's record. Only a store that is also the bus takes it
    /// ([`Batches::takes_forwards`]).
    Acknowledge {
        /// Whose partition.
        agent_id: Arc<str>,
        /// The entry; kept alive until written, so the transport knows an agent still holds it.
        entry: Arc<crate::StreamEntry>,
    },
    /// Keeps `env`, a child's output to its parent in this process (with no bus to carry it),
    /// until [`Inboxes::outbox_done`]: written in the batch it was made from, it outlives a
    /// crash between that batch and the parent's push (the child's item is done by then, so
    /// nothing would make it again), and the system's recovery at start hands it to the
    /// parent. Only a store that keeps an outbox takes it ([`Inboxes::keeps_outbox`]).
    Outbox {
        /// The output envelope (its id derived from the entry that carries the output).
        env: Arc<Envelope>,
    },
}

/// Batches: the writes of an agent's flush as one unit where the backend can, each write
/// idempotent so a batch cut off by a crash is simply written again; and the wait for
/// replicas before an acknowledgement that depends on writes. By default a batch is the
/// concerns' own writes one by one.
#[async_trait]
pub trait Batches: AgentRecords + Threads + Inboxes {
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

    /// [`Self::write_batch`] of what live agent `agent_id` writes of its own state (its flush). A
    /// store that fences writes by partition lease writes the agent's record only while this
    /// process holds the lease, else answers
    /// [`StoreErrorKind::Fenced`] (the other writes of a flush are
    /// idempotent and may land): a process that stalled past its lease must not overwrite, with a
    /// late flush, the record the partition's next owner keeps.
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

    /// Whether [`StoreWrite::Forward`] can be part of this store's batches (the store is also
    /// the bus the transport appends to).
    fn takes_forwards(&self) -> bool {
        false
    }
}

/// The error of a store asked for a [`StoreWrite::Forward`] it cannot take (agents only ask
/// stores whose [`Batches::takes_forwards`] says they can).
pub fn forwards_not_taken(kind: &str) -> StoreError {
    StoreError::new(
        StoreErrorKind::Unsupported,
        format!("the {kind} store cannot write to another process's stream"),
    )
}

/// The error of a store asked for a [`StoreWrite::Outbox`] it does not keep (agents only ask
/// stores whose [`Inboxes::keeps_outbox`] says they do).
pub fn outbox_not_kept(kind: &str) -> StoreError {
    StoreError::new(
        StoreErrorKind::Unsupported,
        format!("the {kind} store keeps no outbox"),
    )
}
