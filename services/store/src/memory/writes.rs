//! `Checkpoints` and `Batches` of the memory store.

use super::*;

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
