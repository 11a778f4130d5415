//! The concern of the A2A task map: opaque values under a context agent.

use super::{StoreKind, StoreResult};
use async_trait::async_trait;

/// The A2A task map: opaque values (the A2A layer's encoding) keyed by task id under a
/// context agent, living under the agent's own keys so that deleting the agent removes them.
#[async_trait]
pub trait A2aTasks: StoreKind {
    /// Stores `value` as A2A task `task_id` of context agent `agent_id`, replacing what was
    /// stored under that id. The value is opaque here (the A2A layer's encoding); it lives
    /// under the agent's own keys, so
    /// [`AgentRecords::delete_agent`](super::AgentRecords::delete_agent) removes it with the
    /// agent.
    async fn a2a_task_put(&self, agent_id: &str, task_id: &str, value: &[u8]) -> StoreResult<()>;

    /// [`Self::a2a_task_put`] unless something is stored under `task_id` already (then nothing
    /// changes), in one atomic step: answers whether it stored `value`. A value whose id says
    /// what it is (a push notification of one state) is written once, and a second writer does
    /// not put back what the first one has since changed.
    async fn a2a_task_put_new(
        &self,
        agent_id: &str,
        task_id: &str,
        value: &[u8],
    ) -> StoreResult<bool>;

    /// A2A task `task_id` of context agent `agent_id`, if stored.
    async fn a2a_task_get(&self, agent_id: &str, task_id: &str) -> StoreResult<Option<Vec<u8>>>;

    /// Every A2A task of context agent `agent_id`, in no particular order.
    async fn a2a_tasks(&self, agent_id: &str) -> StoreResult<Vec<Vec<u8>>>;
}
