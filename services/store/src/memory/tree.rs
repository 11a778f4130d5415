//! `Tree` of the memory store: children, dependents, worker aliases.

use super::*;

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
