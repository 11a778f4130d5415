//! In-memory `ThreadStore`: the same semantics as the durable stores, nothing on disk.

use agentd_actors::DEDUP_WINDOW;
use agentd_actors::{FastHashSet, Pushed, StoreResult, StoreWrite, ThreadStore, WorkerAlias};
use agentd_proto::{AgentRecord, Checkpoint, Envelope, ThreadEntry};
use async_trait::async_trait;
use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use uuid::Uuid;

#[derive(Default)]
struct Inner {
    /// Shared with the agents that wrote them (a batch's record is kept, not copied), and
    /// looked up by the record's own id (no second copy of it as a key).
    agents: FastHashSet<ById>,
    /// agent → its thread, each entry shared: a thread grows one entry at a time, and moving
    /// pointers when its vector grows costs less than moving whole entries; an entry written
    /// in a batch is the very one the agent keeps in its own copy of the thread.
    threads: ByAgent<(agentd_actors::ThreadEntries, FastHashSet<Uuid>)>,
    /// parent → children in insertion order, plus a set for O(1) idempotence.
    children: HashMap<String, (Vec<String>, HashSet<String>)>,
    /// dependency → the agents waiting for it.
    dependents: HashMap<String, HashSet<String>>,
    /// parent → (title, alias) → child
    aliases: HashMap<String, BTreeMap<(String, String), String>>,
    inboxes: ByAgent<Inbox>,
    /// agent → checkpoints, oldest first.
    checkpoints: HashMap<String, VecDeque<Checkpoint>>,
    /// call id → tool call answered outside its turn (open or closed).
    tool_calls: HashMap<Uuid, agentd_proto::ToolCallRecord>,
    /// A2A tasks per context agent: task id → the A2A layer's encoding.
    a2a_tasks: HashMap<String, BTreeMap<String, Vec<u8>>>,
}

/// A stored record, hashed and compared by its id, so a set of them is a map from id.
struct ById(Arc<AgentRecord>);

impl std::borrow::Borrow<str> for ById {
    fn borrow(&self) -> &str {
        &self.0.id
    }
}

impl std::hash::Hash for ById {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.0.id.as_str().hash(state)
    }
}

impl PartialEq for ById {
    fn eq(&self, other: &Self) -> bool {
        self.0.id == other.0.id
    }
}

impl Eq for ById {}

/// A map keyed by agent id whose entry for an id is found, or made, with one hash of the id
/// and a copy of it only when made (`entry_ref`). std's map has no entry API for a borrowed
/// key: with it, finding or making an entry takes a look-up then an insert, two hashes.
type ByAgent<V> = hashbrown::HashMap<String, V, foldhash::fast::RandomState>;

/// `map[key]`, made (empty) if missing.
fn slot<'m, V: Default>(map: &'m mut ByAgent<V>, key: &str) -> &'m mut V {
    map.entry_ref(key).or_default()
}

impl Inner {
    fn put_agent(&mut self, record: Arc<AgentRecord>) {
        self.agents.replace(ById(record));
    }

    /// Appends `entry` (kept as it is: an entry of a batch is the agent's own, shared).
    fn append(&mut self, agent_id: &str, entry: Arc<ThreadEntry>) -> bool {
        let (entries, seen) = slot(&mut self.threads, agent_id);
        if !seen.insert(entry.id) {
            return false;
        }
        entries.push(entry);
        true
    }

    fn inbox_done(&mut self, agent_id: &str, env_id: Uuid) {
        if let Some(inbox) = self.inboxes.get_mut(agent_id) {
            inbox.pending.retain(|e| e.id != env_id);
        }
    }

    /// Queues `env` unless its id is in the agent's de-duplication window; whether it was new.
    fn inbox_push(&mut self, agent_id: &str, env: &Envelope) -> bool {
        let inbox = slot(&mut self.inboxes, agent_id);
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

    /// Applies `writes`, checked by [`refuse_unkept`] first.
    fn apply(&mut self, writes: &[StoreWrite]) {
        for w in writes {
            match w {
                StoreWrite::PutAgent(rec) => self.put_agent(rec.clone()),
                StoreWrite::Append { agent_id, entry } => {
                    self.append(agent_id, Arc::clone(entry));
                }
                StoreWrite::InboxDone { agent_id, env_id } => self.inbox_done(agent_id, *env_id),
                StoreWrite::Forward { .. } | StoreWrite::Outbox { .. } => {}
            }
        }
    }
}

/// Refuses a batch holding writes this store does not keep, before anything of it is applied
/// (a batch stays all or nothing).
fn refuse_unkept(writes: &[StoreWrite]) -> StoreResult<()> {
    for w in writes {
        match w {
            StoreWrite::Forward { .. } => {
                return Err(agentd_actors::ports::forwards_not_taken("memory"));
            }
            StoreWrite::Outbox { .. } => {
                return Err(agentd_actors::ports::outbox_not_kept("memory"));
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
    spawn_claims: crate::spawn_claims::SpawnClaims,
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

#[async_trait]
impl ThreadStore for MemoryStore {
    fn kind(&self) -> &'static str {
        "memory"
    }

    async fn put_agent(&self, record: &AgentRecord) -> StoreResult<()> {
        self.lock().put_agent(Arc::new(record.clone()));
        Ok(())
    }

    async fn get_agent(&self, agent_id: &str) -> StoreResult<Option<AgentRecord>> {
        Ok(self.lock().agents.get(agent_id).map(|r| (*r.0).clone()))
    }

    async fn get_agent_shared(&self, agent_id: &str) -> StoreResult<Option<Arc<AgentRecord>>> {
        Ok(self.lock().agents.get(agent_id).map(|r| Arc::clone(&r.0)))
    }

    async fn agent_exists(&self, agent_id: &str) -> StoreResult<bool> {
        Ok(self.lock().agents.contains(agent_id))
    }

    async fn list_roots(&self) -> StoreResult<Vec<AgentRecord>> {
        let mut roots: Vec<AgentRecord> = self
            .lock()
            .agents
            .iter()
            .filter(|r| r.0.parent_id.is_none())
            .map(|r| (*r.0).clone())
            .collect();
        roots.sort_by(|a, b| (a.created_at_ms, &a.id).cmp(&(b.created_at_ms, &b.id)));
        Ok(roots)
    }

    async fn append(&self, agent_id: &str, entry: &ThreadEntry) -> StoreResult<bool> {
        Ok(self.lock().append(agent_id, Arc::new(entry.clone())))
    }

    async fn thread(&self, agent_id: &str) -> StoreResult<Vec<ThreadEntry>> {
        Ok(self
            .lock()
            .threads
            .get(agent_id)
            .map(|(e, _)| e.iter().map(|entry| ThreadEntry::clone(entry)).collect())
            .unwrap_or_default())
    }

    async fn replace_thread(&self, agent_id: &str, entries: &[ThreadEntry]) -> StoreResult<()> {
        let seen = entries.iter().map(|e| e.id).collect();
        self.lock().threads.insert(
            agent_id.to_string(),
            (entries.iter().cloned().map(Arc::new).collect(), seen),
        );
        Ok(())
    }

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

    async fn spawn_claim(
        &self,
        agent_id: &str,
        fingerprint: &str,
        ttl_ms: u64,
    ) -> StoreResult<Option<String>> {
        Ok(self.spawn_claims.claim(agent_id, fingerprint, ttl_ms))
    }

    async fn spawn_claim_expire(&self, agent_id: &str, ttl_ms: u64) -> StoreResult<()> {
        self.spawn_claims.expire(agent_id, ttl_ms);
        Ok(())
    }

    async fn delete_agent(&self, agent_id: &str) -> StoreResult<()> {
        let mut inner = self.lock();
        let parent = inner
            .agents
            .take(agent_id)
            .and_then(|r| r.0.parent_id.clone());
        inner.threads.remove(agent_id);
        inner.inboxes.remove(agent_id);
        inner.checkpoints.remove(agent_id);
        inner.children.remove(agent_id);
        inner.dependents.remove(agent_id);
        inner.aliases.remove(agent_id);
        inner.a2a_tasks.remove(agent_id);
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

    async fn inbox_push(&self, agent_id: &str, env: &Envelope) -> StoreResult<bool> {
        Ok(self.lock().inbox_push(agent_id, env))
    }

    async fn inbox_pending(&self, agent_id: &str) -> StoreResult<Vec<Envelope>> {
        Ok(self
            .lock()
            .inboxes
            .get(agent_id)
            .map(|i| i.pending.clone())
            .unwrap_or_default())
    }

    async fn inbox_done(&self, agent_id: &str, env_id: Uuid) -> StoreResult<()> {
        self.lock().inbox_done(agent_id, env_id);
        Ok(())
    }

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
        closing: &agentd_actors::ToolCallClosing,
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

    async fn a2a_task_put(&self, agent_id: &str, task_id: &str, value: &[u8]) -> StoreResult<()> {
        self.lock()
            .a2a_tasks
            .entry(agent_id.to_string())
            .or_default()
            .insert(task_id.to_string(), value.to_vec());
        Ok(())
    }

    async fn a2a_task_get(&self, agent_id: &str, task_id: &str) -> StoreResult<Option<Vec<u8>>> {
        Ok(self
            .lock()
            .a2a_tasks
            .get(agent_id)
            .and_then(|m| m.get(task_id))
            .cloned())
    }

    async fn a2a_tasks(&self, agent_id: &str) -> StoreResult<Vec<Vec<u8>>> {
        Ok(self
            .lock()
            .a2a_tasks
            .get(agent_id)
            .map(|m| m.values().cloned().collect())
            .unwrap_or_default())
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

    async fn checkpoints(&self, agent_id: &str) -> StoreResult<Vec<Checkpoint>> {
        Ok(self
            .lock()
            .checkpoints
            .get(agent_id)
            .map(|l| l.iter().rev().cloned().collect())
            .unwrap_or_default())
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
        let fresh = inner.inbox_push(agent_id, env);
        if fresh {
            inner.apply(then);
        }
        Ok(Pushed {
            fresh,
            then_applied: fresh,
        })
    }

    async fn write_batch(&self, writes: &[StoreWrite]) -> StoreResult<()> {
        self.write_now(writes)
    }

    async fn write_own_batch(&self, _agent_id: &str, writes: &[StoreWrite]) -> StoreResult<()> {
        // As `write_batch` (no fence to check), without a nested store call.
        self.write_now(writes)
    }
}
