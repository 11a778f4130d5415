//! [`Agents`]: what a tool may ask of the system it runs in — the operations of an agent that
//! manages others. Tools see the system through this port only, so `crate::tools` names no
//! actor: the supervisor's side implements it (in `ops`), on the pointer every actor
//! already holds.

use crate::messages::{Dispatched, ManageSend, SpawnSpec};
use agentd_proto::{Address, AgentRecord, AgentdError, Control, InboxItem, Inspection};
use async_trait::async_trait;
use uuid::Uuid;

/// The agent operations a tool call may perform. Each checks what the API's door checks too
/// (sizes, budgets, titles); who may act on whom is the tool's to check first.
#[async_trait]
pub(crate) trait Agents: Send + Sync {
    /// Creates an agent (and delivers its first message).
    async fn spawn(&self, spec: SpawnSpec) -> Result<AgentRecord, AgentdError>;

    /// [`Self::spawn`] of agent `spec.id`, which an earlier run of the same call may have
    /// created: that agent is answered (its first message queued once), never a second one.
    async fn spawn_again(&self, spec: SpawnSpec) -> Result<AgentRecord, AgentdError>;

    /// Posts `item` to `target` as envelope `id`, sent by `from`, caused by `cause`; an id
    /// the target's durable inbox took before is not queued again (a call run again).
    async fn post(
        &self,
        from: Address,
        target: &str,
        id: Uuid,
        item: InboxItem,
        cause: Uuid,
    ) -> Result<(), AgentdError>;

    /// Applies a lifecycle control to `target` (cascading as the API's would).
    async fn lifecycle(&self, target: &str, control: Control) -> Result<(), AgentdError>;

    /// One agent's inspection.
    async fn inspect(&self, target: &str) -> Result<Inspection, AgentdError>;

    /// The children of `parent` (live and closed).
    async fn children(&self, parent: &str) -> Result<Vec<Inspection>, AgentdError>;

    /// Routes a Manage call to the caller's parent router (created with its first child).
    async fn manage(&self, send: ManageSend) -> Result<Dispatched, AgentdError>;
}
