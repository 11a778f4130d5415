//! The concern of values a service keeps under an agent: opaque to the store, gone with the
//! agent.

use super::{StoreKind, StoreResult};
use async_trait::async_trait;

/// Values a service keeps under an agent: opaque bytes (the service's own encoding) keyed by an
/// id the service chooses, living under the agent's own keys, so that deleting the agent
/// ([`AgentRecords::delete_agent`](super::AgentRecords::delete_agent)) removes them, in every
/// process, with no event to hear. The store knows no more of them. Their users share an
/// agent's values by keys of their own: the [`Runs`](super::Runs) concern is composed of them
/// (keys [`RUN_PREFIX`](super::RUN_PREFIX)…, [`OUTCOME_PREFIX`](super::OUTCOME_PREFIX)…), and
/// the A2A layer keeps a task's push notification configs and notices among them
/// (`services/agentd/src/a2a/task/map.rs`). The backends keep them where they kept the A2A task
/// map before this concern had its name (Redis: the hash `…:a:<agent>:a2atasks`; embedded: the
/// agent's `A2A_TASK` rows), so values stored before stay readable.
#[async_trait]
pub trait AgentValues: StoreKind {
    /// Stores `value` as value `key` of agent `agent_id`, replacing what was stored under that
    /// key.
    async fn agent_value_put(&self, agent_id: &str, key: &str, value: &[u8]) -> StoreResult<()>;

    /// [`Self::agent_value_put`] unless something is stored under `key` already (then nothing
    /// changes), in one atomic step: answers whether it stored `value`. A value whose key says
    /// what it is (an A2A push notification of one state) is written once, and a second writer
    /// does not put back what the first one has since changed.
    async fn agent_value_put_new(
        &self,
        agent_id: &str,
        key: &str,
        value: &[u8],
    ) -> StoreResult<bool>;

    /// Value `key` of agent `agent_id`, if stored.
    async fn agent_value_get(&self, agent_id: &str, key: &str) -> StoreResult<Option<Vec<u8>>>;

    /// Every value of agent `agent_id` with its key, in no particular order.
    async fn agent_values(&self, agent_id: &str) -> StoreResult<Vec<(String, Vec<u8>)>>;
}
