//! The context's task map as the A2A layer uses it, through the agent system's store
//! ([`TaskMap`]): saving task records (as runs) and settled states (as their outcomes),
//! storing values, reading them.

use super::map::{Contents, Stored, TaskMap};
use super::{Settled, TaskRecord};
use crate::a2a::error::A2aError;
use agentd_actors::AgentSystem;

/// Saves a task record.
pub async fn save(system: &AgentSystem, task: &TaskRecord) -> Result<(), A2aError> {
    system.deps().store.task_save(task).await
}

/// Stores `value` under `key` in context `ctx`'s task map.
pub(in crate::a2a) async fn put(
    system: &AgentSystem,
    ctx: &str,
    key: &str,
    value: &Stored,
) -> Result<(), A2aError> {
    system.deps().store.task_put(ctx, key, value).await
}

/// Stores `value` under `key` in context `ctx`'s task map unless something is stored there
/// already: answers whether it did.
pub(in crate::a2a) async fn put_new(
    system: &AgentSystem,
    ctx: &str,
    key: &str,
    value: &Stored,
) -> Result<bool, A2aError> {
    system.deps().store.task_put_new(ctx, key, value).await
}

pub(super) async fn save_settled(
    system: &AgentSystem,
    ctx: &str,
    s: &Settled,
) -> Result<(), A2aError> {
    system.deps().store.task_settle(ctx, s).await
}

/// The context's tasks, settled states, push configs and notifications, read.
pub(in crate::a2a) async fn stored(system: &AgentSystem, ctx: &str) -> Result<Contents, A2aError> {
    system.deps().store.task_map(ctx).await
}

/// Whether context `ctx` has tasks (is an A2A context).
pub async fn is_context(system: &AgentSystem, ctx: &str) -> Result<bool, A2aError> {
    system.deps().store.has_task_map(ctx).await
}
