//! In-memory `ThreadStore`: the same semantics as the durable stores, nothing on disk. This
//! file holds the state (one entry per agent, found once per write) and the concerns share it:
//!
//! | module | concerns it implements |
//! |---|---|
//! | `records` | `AgentRecords`, `Threads` |
//! | `tree` | `Tree`: children, dependents, worker aliases |
//! | `inbox` | `Inboxes` (and the outbox) |
//! | `writes` | `Checkpoints`, `Batches` |
//! | `outside` | what outside callers name: `IdempotencyClaims`, `ToolCalls`, `AgentValues` |
//! | `external_ids` | `ExternalIds`: outside ids, with their retention |

mod external_ids;
mod inbox;
mod outside;
mod records;
mod tree;
mod writes;

use agentd_ports::DEDUP_WINDOW;
use agentd_ports::{
    AgentRecords, AgentValues, Batches, Checkpoints, Claim, ClaimEnd, ExternalIds, ExternalKey,
    FastHashSet, IdempotencyClaims, Inboxes, Pushed, Runs, StoreKind, StoreResult, StoreWrite,
    Threads, ToolCalls, Tree, WorkerAlias,
};
use agentd_proto::{AgentRecord, Checkpoint, Envelope, ThreadEntry};
use async_trait::async_trait;
use hashbrown::hash_table::Entry;
use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::hash::BuildHasher;
use std::sync::{Arc, Mutex, MutexGuard};
use uuid::Uuid;

#[derive(Default)]
struct Inner {
    /// What the store keeps of each agent (record, thread, inbox), in one entry found by its
    /// id: one hash of the id finds all three, so a push with its turn's start, or a turn's
    /// end, looks the agent up once instead of once per write.
    agents: Agents,
    /// parent → children in insertion order, plus a set for O(1) idempotence.
    children: HashMap<String, (Vec<String>, HashSet<String>)>,
    /// dependency → the agents waiting for it.
    dependents: HashMap<String, HashSet<String>>,
    /// parent → (title, alias) → child
    aliases: HashMap<String, BTreeMap<(String, String), String>>,
    /// agent → checkpoints, oldest first.
    checkpoints: HashMap<String, VecDeque<Checkpoint>>,
    /// call id → tool call answered outside its turn (open or closed).
    tool_calls: HashMap<Uuid, agentd_proto::ToolCallRecord>,
    /// A2A tasks per context agent: task id → the A2A layer's encoding.
    a2a_tasks: HashMap<String, BTreeMap<String, Vec<u8>>>,
    /// Outside ids: their mappings, with their expiry, and the ids that map to each agent.
    external_ids: external_ids::ExternalMap,
}

/// What the store keeps of one agent: two pointers for an agent that never got a message, so
/// 100,000 idle agents cost the store little more than their records.
struct Kept {
    /// Shared with the agent that wrote it (a batch's record is kept, not copied); `None`
    /// while only its thread or inbox was written.
    record: Option<Arc<AgentRecord>>,
    /// Its thread and inbox, once one of them is written.
    rest: Option<Box<Rest>>,
}

/// An agent's thread and inbox.
#[derive(Default)]
struct Rest {
    /// The agent's id while no record holds it (its thread or inbox was written first).
    id: Option<Box<str>>,
    /// Its thread, each entry shared: a thread grows one entry at a time, and moving pointers
    /// when its vector grows costs less than moving whole entries; an entry written in a batch
    /// is the very one the agent keeps in its own copy of the thread.
    thread: agentd_ports::ThreadEntries,
    /// The ids of its thread's entries.
    seen: FastHashSet<Uuid>,
    inbox: Inbox,
}

/// The agent a write kept here is about (`None`: a write this store does not keep).
fn agent_of(w: &StoreWrite) -> Option<&str> {
    match w {
        StoreWrite::PutAgent(rec) => Some(&rec.id),
        StoreWrite::Append { agent_id, .. }
        | StoreWrite::AppendNew { agent_id, .. }
        | StoreWrite::InboxDone { agent_id, .. } => Some(agent_id),
        StoreWrite::Forward { .. } | StoreWrite::Outbox { .. } | StoreWrite::Acknowledge { .. } => {
            None
        }
    }
}

impl Kept {
    /// The agent's id: its record's, else the one its thread or inbox was written under.
    fn id(&self) -> &str {
        match (&self.record, &self.rest) {
            (Some(record), _) => &record.id,
            (None, Some(rest)) => rest.id.as_deref().unwrap_or_default(),
            (None, None) => "",
        }
    }

    /// An entry for `record`.
    fn of_record(record: &Arc<AgentRecord>) -> Self {
        Kept {
            record: Some(Arc::clone(record)),
            rest: None,
        }
    }

    /// An entry for agent `id`, whose thread or inbox is written before any record.
    fn named(id: &str) -> Self {
        Kept {
            record: None,
            rest: Some(Box::new(Rest {
                id: Some(id.into()),
                ..Rest::default()
            })),
        }
    }

    /// Its thread and inbox, made empty if none was written yet.
    #[inline]
    fn rest(&mut self) -> &mut Rest {
        self.rest.get_or_insert_with(Box::default)
    }

    /// Applies `w`, a write about this agent.
    fn apply(&mut self, w: &StoreWrite) {
        match w {
            StoreWrite::PutAgent(rec) => self.record = Some(Arc::clone(rec)),
            StoreWrite::Append { entry, .. } | StoreWrite::AppendNew { entry, .. } => {
                self.rest().append(Arc::clone(entry));
            }
            StoreWrite::InboxDone { env_id, .. } => {
                if let Some(rest) = &mut self.rest {
                    rest.inbox_done(*env_id);
                }
            }
            StoreWrite::Forward { .. }
            | StoreWrite::Outbox { .. }
            | StoreWrite::Acknowledge { .. } => {}
        }
    }
}

impl Rest {
    /// Appends `entry` (kept as it is: an entry of a batch is the agent's own, shared).
    fn append(&mut self, entry: Arc<ThreadEntry>) -> bool {
        if !self.seen.insert(entry.id) {
            return false;
        }
        self.thread.push(entry);
        true
    }

    fn inbox_done(&mut self, env_id: Uuid) {
        self.inbox.pending.retain(|e| e.id != env_id);
    }

    /// Queues `env` unless its id is in the agent's de-duplication window; whether it was new.
    fn inbox_push(&mut self, env: &Envelope) -> bool {
        let inbox = &mut self.inbox;
        if !inbox.seen.insert(env.id) {
            return false;
        }
        inbox.seen_order.push_back(env.id);
        if inbox.seen_order.len() > DEDUP_WINDOW
            && let Some(old) = inbox.seen_order.pop_front()
        {
            inbox.seen.remove(&old);
        }
        inbox.pending.push(env.clone());
        true
    }
}

/// The agents' entries, found by id without a copy of it as a key (an entry's id is its
/// record's, or its thread's and inbox's while it has no record).
#[derive(Default)]
struct Agents {
    table: hashbrown::HashTable<Kept>,
    hasher: foldhash::fast::RandomState,
}

impl Agents {
    fn hash(&self, id: &str) -> u64 {
        self.hasher.hash_one(id)
    }

    fn get(&self, id: &str) -> Option<&Kept> {
        self.table.find(self.hash(id), |k| k.id() == id)
    }

    fn get_mut(&mut self, id: &str) -> Option<&mut Kept> {
        self.table.find_mut(self.hash(id), |k| k.id() == id)
    }

    /// The entry of agent `id`, made by `make` if missing.
    fn slot(&mut self, id: &str, make: impl FnOnce() -> Kept) -> &mut Kept {
        let hasher = &self.hasher;
        let entry = self.table.entry(
            hasher.hash_one(id),
            |k| k.id() == id,
            |k| hasher.hash_one(k.id()),
        );
        match entry {
            Entry::Occupied(found) => found.into_mut(),
            Entry::Vacant(free) => free.insert(make()).into_mut(),
        }
    }

    fn remove(&mut self, id: &str) -> Option<Kept> {
        let hash = self.hash(id);
        let found = self.table.find_entry(hash, |k| k.id() == id).ok()?;
        Some(found.remove().0)
    }
}

impl Inner {
    /// The record of `agent_id`, if one was written.
    fn record(&self, agent_id: &str) -> Option<&Arc<AgentRecord>> {
        self.agents.get(agent_id)?.record.as_ref()
    }

    fn put_agent(&mut self, record: Arc<AgentRecord>) {
        let kept = self.agents.slot(&record.id, || Kept::of_record(&record));
        kept.record = Some(record);
    }

    /// Applies `writes`, checked by [`refuse_unkept`] first; each run of writes about one agent
    /// (a batch is usually one agent's) looks it up once.
    fn apply(&mut self, writes: &[StoreWrite]) {
        let mut rest = writes;
        while let Some(first) = rest.first() {
            let Some(agent_id) = agent_of(first) else {
                rest = &rest[1..];
                continue;
            };
            let run = rest
                .iter()
                .position(|w| agent_of(w).is_some_and(|a| a != agent_id))
                .unwrap_or(rest.len());
            let (this, after) = rest.split_at(run);
            let kept = self.agents.slot(agent_id, || match record_in(this) {
                Some(record) => Kept::of_record(record),
                None => Kept::named(agent_id),
            });
            for w in this {
                kept.apply(w);
            }
            rest = after;
        }
    }
}

/// The record `writes` put, if any.
fn record_in(writes: &[StoreWrite]) -> Option<&Arc<AgentRecord>> {
    writes.iter().find_map(|w| match w {
        StoreWrite::PutAgent(rec) => Some(rec),
        _ => None,
    })
}

/// Refuses a batch holding writes this store does not keep, before anything of it is applied
/// (a batch stays all or nothing).
fn refuse_unkept(writes: &[StoreWrite]) -> StoreResult<()> {
    for w in writes {
        match w {
            StoreWrite::Forward { .. } | StoreWrite::Acknowledge { .. } => {
                return Err(agentd_ports::forwards_not_taken("memory"));
            }
            StoreWrite::Outbox { .. } => {
                return Err(agentd_ports::outbox_not_kept("memory"));
            }
            _ => {}
        }
    }
    Ok(())
}

#[derive(Default)]
struct Inbox {
    pending: Vec<Envelope>,
    seen: FastHashSet<Uuid>,
    seen_order: VecDeque<Uuid>,
}

/// A `ThreadStore` in process memory.
#[derive(Default)]
pub struct MemoryStore {
    inner: Mutex<Inner>,
    claims: crate::claims::Claims,
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// Applies `writes` as one unit (refused whole if one is not kept here).
    fn write_now(&self, writes: &[StoreWrite]) -> StoreResult<()> {
        refuse_unkept(writes)?;
        self.lock().apply(writes);
        Ok(())
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding the lock cannot leave a half-applied change (every method
        // mutates after all checks), so a poisoned lock is safe to keep using.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl StoreKind for MemoryStore {
    fn kind(&self) -> &'static str {
        "memory"
    }
}
