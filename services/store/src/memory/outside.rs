//! What outside callers name, in the memory store: idempotency claims, tool calls answered
//! outside a turn, values kept under an agent (outside ids are in `external_ids`).

use super::*;

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

    async fn agent_values(&self, agent_id: &str) -> StoreResult<Vec<(String, Vec<u8>)>> {
        Ok(self
            .lock()
            .a2a_tasks
            .get(agent_id)
            .map(|m| m.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
            .unwrap_or_default())
    }
}

impl Runs for MemoryStore {}
