//! `AgentRecords` and `Threads` of the memory store.

use super::*;

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
        inner.external_ids.drop_agent(agent_id);
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
