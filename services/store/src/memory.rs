//! In-memory `ThreadStore`: the same semantics as the durable stores, nothing on disk.

use agentd_ports::DEDUP_WINDOW;
use agentd_ports::{
    AgentRecords, AgentValues, Batches, Checkpoints, Claim, ClaimEnd, ExternalIds, ExternalKey,
    FastHashSet, IdempotencyClaims, Inboxes, Pushed, StoreKind, StoreResult, StoreWrite, Threads,
    ToolCalls, Tree, WorkerAlias,
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
    /// Outside ids (`ExternalKey::encoded`) → the agent each maps to.
    external_ids: HashMap<String, String>,
    /// agent → the outside ids that map to it (dropped with it).
    external_ids_of: HashMap<String, HashSet<String>>,
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

#[async_trait]
impl AgentRecords for MemoryStore {
    async fn put_agent(&self, record: &AgentRecord) -> StoreResult<()> {
        self.lock().put_agent(Arc::new(record.clone()));
        Ok(())
    }

    async fn get_agent(&self, agent_id: &str) -> StoreResult<Option<AgentRecord>> {
        Ok(self.lock().record(agent_id).map(|r| AgentRecord::clone(r)))
    }

    async fn get_agent_shared(&self, agent_id: &str) -> StoreResult<Option<Arc<AgentRecord>>> {
        Ok(self.lock().record(agent_id).cloned())
    }

    async fn agent_exists(&self, agent_id: &str) -> StoreResult<bool> {
        Ok(self.lock().record(agent_id).is_some())
    }

    async fn list_roots(&self) -> StoreResult<Vec<AgentRecord>> {
        let mut roots: Vec<AgentRecord> = self
            .lock()
            .agents
            .table
            .iter()
            .filter_map(|kept| kept.record.as_deref())
            .filter(|r| r.parent_id.is_none())
            .cloned()
            .collect();
        roots.sort_by(|a, b| (a.created_at_ms, &a.id).cmp(&(b.created_at_ms, &b.id)));
        Ok(roots)
    }

    async fn delete_agent(&self, agent_id: &str) -> StoreResult<()> {
        let mut inner = self.lock();
        let parent = inner
            .agents
            .remove(agent_id)
            .and_then(|kept| kept.record?.parent_id.clone());
        inner.checkpoints.remove(agent_id);
        inner.children.remove(agent_id);
        inner.dependents.remove(agent_id);
        inner.aliases.remove(agent_id);
        inner.a2a_tasks.remove(agent_id);
        for key in inner.external_ids_of.remove(agent_id).unwrap_or_default() {
            if inner.external_ids.get(&key).is_some_and(|a| a == agent_id) {
                inner.external_ids.remove(&key);
            }
        }
        if let Some(parent) = parent {
            if let Some((order, set)) = inner.children.get_mut(&*parent) {
                order.retain(|c| c != agent_id);
                set.remove(agent_id);
            }
            if let Some(map) = inner.aliases.get_mut(&*parent) {
                map.retain(|_, child| child != agent_id);
            }
        }
        Ok(())
    }
}

#[async_trait]
impl Threads for MemoryStore {
    async fn append(&self, agent_id: &str, entry: &ThreadEntry) -> StoreResult<bool> {
        let mut inner = self.lock();
        let kept = inner.agents.slot(agent_id, || Kept::named(agent_id));
        Ok(kept.rest().append(Arc::new(entry.clone())))
    }

    async fn thread(&self, agent_id: &str) -> StoreResult<Vec<ThreadEntry>> {
        Ok(self
            .lock()
            .agents
            .get(agent_id)
            .and_then(|kept| kept.rest.as_deref())
            .map(|rest| {
                rest.thread
                    .iter()
                    .map(|entry| ThreadEntry::clone(entry))
                    .collect()
            })
            .unwrap_or_default())
    }

    async fn replace_thread(&self, agent_id: &str, entries: &[ThreadEntry]) -> StoreResult<()> {
        let seen = entries.iter().map(|e| e.id).collect();
        let thread = entries.iter().cloned().map(Arc::new).collect();
        let mut inner = self.lock();
        let rest = inner.agents.slot(agent_id, || Kept::named(agent_id)).rest();
        (rest.thread, rest.seen) = (thread, seen);
        Ok(())
    }
}

#[async_trait]
impl Tree for MemoryStore {
    async fn add_child(&self, parent_id: &str, child_id: &str) -> StoreResult<()> {
        let mut inner = self.lock();
        let (order, set) = inner.children.entry(parent_id.to_string()).or_default();
        if set.insert(child_id.to_string()) {
            order.push(child_id.to_string());
        }
        Ok(())
    }

    async fn add_dependent(&self, dependency: &str, dependent: &str) -> StoreResult<()> {
        self.lock()
            .dependents
            .entry(dependency.to_string())
            .or_default()
            .insert(dependent.to_string());
        Ok(())
    }

    async fn remove_dependent(&self, dependency: &str, dependent: &str) -> StoreResult<()> {
        if let Some(set) = self.lock().dependents.get_mut(dependency) {
            set.remove(dependent);
        }
        Ok(())
    }

    async fn dependents(&self, dependency: &str) -> StoreResult<Vec<String>> {
        Ok(self
            .lock()
            .dependents
            .get(dependency)
            .map(|set| set.iter().cloned().collect())
            .unwrap_or_default())
    }

    async fn children(&self, parent_id: &str) -> StoreResult<Vec<String>> {
        Ok(self
            .lock()
            .children
            .get(parent_id)
            .map(|(order, _)| order.clone())
            .unwrap_or_default())
    }

    async fn child_count(&self, parent_id: &str) -> StoreResult<usize> {
        Ok(self
            .lock()
            .children
            .get(parent_id)
            .map(|(o, _)| o.len())
            .unwrap_or(0))
    }

    async fn alias_get_or_create(
        &self,
        parent_id: &str,
        worker_title: &str,
        alias: &str,
        candidate: &str,
    ) -> StoreResult<(String, bool)> {
        let mut inner = self.lock();
        let map = inner.aliases.entry(parent_id.to_string()).or_default();
        let key = (worker_title.to_string(), alias.to_string());
        if let Some(existing) = map.get(&key) {
            return Ok((existing.clone(), false));
        }
        map.insert(key, candidate.to_string());
        Ok((candidate.to_string(), true))
    }

    async fn aliases(&self, parent_id: &str) -> StoreResult<Vec<WorkerAlias>> {
        Ok(self
            .lock()
            .aliases
            .get(parent_id)
            .map(|m| {
                m.iter()
                    .map(|((title, alias), child)| WorkerAlias {
                        worker_title: title.clone(),
                        alias: alias.clone(),
                        child_id: child.clone(),
                    })
                    .collect()
            })
            .unwrap_or_default())
    }
}

#[async_trait]
impl Inboxes for MemoryStore {
    async fn inbox_push(&self, agent_id: &str, env: &Envelope) -> StoreResult<bool> {
        let mut inner = self.lock();
        Ok(inner
            .agents
            .slot(agent_id, || Kept::named(agent_id))
            .rest()
            .inbox_push(env))
    }

    async fn inbox_pending(&self, agent_id: &str) -> StoreResult<Vec<Envelope>> {
        Ok(self
            .lock()
            .agents
            .get(agent_id)
            .and_then(|kept| kept.rest.as_deref())
            .map(|rest| rest.inbox.pending.clone())
            .unwrap_or_default())
    }

    async fn inbox_done(&self, agent_id: &str, env_id: Uuid) -> StoreResult<()> {
        if let Some(rest) = self
            .lock()
            .agents
            .get_mut(agent_id)
            .and_then(|kept| kept.rest.as_deref_mut())
        {
            rest.inbox_done(env_id);
        }
        Ok(())
    }

    async fn inbox_push_then(
        &self,
        agent_id: &str,
        env: &Envelope,
        then: &[StoreWrite],
    ) -> StoreResult<Pushed> {
        // Under one lock, with no nested store calls (each would box a future of its own:
        // this runs for every message).
        refuse_unkept(then)?;
        let mut inner = self.lock();
        let kept = inner.agents.slot(agent_id, || Kept::named(agent_id));
        let fresh = kept.rest().inbox_push(env);
        if fresh {
            if then
                .iter()
                .all(|w| agent_of(w).is_none_or(|a| a == agent_id))
            {
                // The agent's own turn start: found once, with the push.
                for w in then {
                    kept.apply(w);
                }
            } else {
                inner.apply(then);
            }
        }
        Ok(Pushed {
            fresh,
            then_applied: fresh,
        })
    }
}

#[async_trait]
impl Checkpoints for MemoryStore {
    async fn checkpoint_put(&self, checkpoint: &Checkpoint, keep: usize) -> StoreResult<()> {
        let mut inner = self.lock();
        let list = inner
            .checkpoints
            .entry(checkpoint.agent_id.clone())
            .or_default();
        list.push_back(checkpoint.clone());
        while keep > 0 && list.len() > keep {
            list.pop_front();
        }
        Ok(())
    }

    async fn checkpoints(&self, agent_id: &str) -> StoreResult<Vec<Checkpoint>> {
        Ok(self
            .lock()
            .checkpoints
            .get(agent_id)
            .map(|l| l.iter().rev().cloned().collect())
            .unwrap_or_default())
    }
}

#[async_trait]
impl Batches for MemoryStore {
    async fn write_batch(&self, writes: &[StoreWrite]) -> StoreResult<()> {
        self.write_now(writes)
    }

    async fn write_own_batch(&self, _agent_id: &str, writes: &[StoreWrite]) -> StoreResult<()> {
        // As `write_batch` (no fence to check), without a nested store call.
        self.write_now(writes)
    }
}

#[async_trait]
impl IdempotencyClaims for MemoryStore {
    async fn idempotency_claim(
        &self,
        home: &str,
        key: &str,
        fingerprint: &str,
        ttl_ms: u64,
    ) -> StoreResult<Option<Claim>> {
        Ok(self.claims.claim(home, key, fingerprint, ttl_ms))
    }

    async fn idempotency_claim_end(&self, home: &str, key: &str, end: ClaimEnd) -> StoreResult<()> {
        self.claims.end(home, key, end);
        Ok(())
    }
}

#[async_trait]
impl ToolCalls for MemoryStore {
    async fn tool_call_put(&self, call: &agentd_proto::ToolCallRecord) -> StoreResult<()> {
        let mut inner = self.lock();
        if inner
            .tool_calls
            .get(&call.call_id)
            .is_some_and(|c| !c.status.is_open())
        {
            return Ok(());
        }
        inner.tool_calls.insert(call.call_id, call.clone());
        Ok(())
    }

    async fn tool_call_get(
        &self,
        call_id: Uuid,
    ) -> StoreResult<Option<agentd_proto::ToolCallRecord>> {
        Ok(self.lock().tool_calls.get(&call_id).cloned())
    }

    async fn tool_call_close(
        &self,
        call_id: Uuid,
        closing: &agentd_ports::ToolCallClosing,
    ) -> StoreResult<agentd_proto::ToolCallClose> {
        use agentd_proto::ToolCallClose;
        let mut inner = self.lock();
        let Some(call) = inner.tool_calls.get_mut(&call_id) else {
            return Ok(ToolCallClose::NotFound);
        };
        if !closing.applies_to(call.status) {
            return Ok(ToolCallClose::AlreadyClosed(call.clone()));
        }
        closing.apply(call);
        Ok(ToolCallClose::Closed(call.clone()))
    }

    async fn tool_calls_open(&self) -> StoreResult<Vec<agentd_proto::ToolCallRecord>> {
        let mut open: Vec<_> = self
            .lock()
            .tool_calls
            .values()
            .filter(|c| c.status.is_open())
            .cloned()
            .collect();
        open.sort_by_key(|c| (c.requested_at_ms, c.call_id));
        Ok(open)
    }
}

#[async_trait]
impl AgentValues for MemoryStore {
    async fn agent_value_put(
        &self,
        agent_id: &str,
        task_id: &str,
        value: &[u8],
    ) -> StoreResult<()> {
        self.lock()
            .a2a_tasks
            .entry(agent_id.to_string())
            .or_default()
            .insert(task_id.to_string(), value.to_vec());
        Ok(())
    }

    async fn agent_value_put_new(
        &self,
        agent_id: &str,
        task_id: &str,
        value: &[u8],
    ) -> StoreResult<bool> {
        let mut inner = self.lock();
        let tasks = inner.a2a_tasks.entry(agent_id.to_string()).or_default();
        if tasks.contains_key(task_id) {
            return Ok(false);
        }
        tasks.insert(task_id.to_string(), value.to_vec());
        Ok(true)
    }

    async fn agent_value_get(&self, agent_id: &str, task_id: &str) -> StoreResult<Option<Vec<u8>>> {
        Ok(self
            .lock()
            .a2a_tasks
            .get(agent_id)
            .and_then(|m| m.get(task_id))
            .cloned())
    }

    async fn agent_values(&self, agent_id: &str) -> StoreResult<Vec<Vec<u8>>> {
        Ok(self
            .lock()
            .a2a_tasks
            .get(agent_id)
            .map(|m| m.values().cloned().collect())
            .unwrap_or_default())
    }
}

#[async_trait]
impl ExternalIds for MemoryStore {
    async fn external_id_claim(&self, key: &ExternalKey, agent_id: &str) -> StoreResult<String> {
        let key = key.encoded();
        let mut inner = self.lock();
        let mapped = inner
            .external_ids
            .entry(key.clone())
            .or_insert_with(|| agent_id.to_string())
            .clone();
        if mapped == agent_id {
            inner
                .external_ids_of
                .entry(mapped.clone())
                .or_default()
                .insert(key);
        }
        Ok(mapped)
    }

    async fn external_id_get(&self, key: &ExternalKey) -> StoreResult<Option<String>> {
        Ok(self.lock().external_ids.get(&key.encoded()).cloned())
    }

    async fn external_id_release(&self, key: &ExternalKey, agent_id: &str) -> StoreResult<()> {
        let key = key.encoded();
        let mut inner = self.lock();
        if inner.external_ids.get(&key).is_some_and(|a| a == agent_id) {
            inner.external_ids.remove(&key);
        }
        if let Some(keys) = inner.external_ids_of.get_mut(agent_id) {
            keys.remove(&key);
        }
        Ok(())
    }
}
