//! The context's task map (`A2aTasks::a2a_task_put`, under the context agent's keys): the
//! task records, their settled states, push configs and notifications, each a [`Stored`]
//! value.

use super::{Settled, TaskRecord};
use crate::a2a::error::A2aError;
use agentd_actors::AgentSystem;
use serde::{Deserialize, Serialize};

/// What one stored value is (the kinds share the context's task map).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub(in crate::a2a) enum Stored {
    Task(TaskRecord),
    Settled(Settled),
    /// A push notification config of a task (`notices.rs`).
    Push(super::PushConfig),
    /// A push notification in the outbox (`notices.rs`).
    Notice(super::Notice),
}

/// The key a task's settled state is stored under, beside the task.
pub(super) fn settled_key(task_id: &str) -> String {
    format!("{task_id}#settled")
}

pub(super) fn store_err(e: impl std::fmt::Display) -> A2aError {
    A2aError::Internal(format!("the store failed: {e}"))
}

/// Saves a task record.
pub async fn save(system: &AgentSystem, task: &TaskRecord) -> Result<(), A2aError> {
    let bytes = serde_json::to_vec(&Stored::Task(task.clone())).map_err(store_err)?;
    system
        .deps()
        .store
        .a2a_task_put(&task.context_id, &task.id, &bytes)
        .await
        .map_err(store_err)
}

/// Stores `value` under `key` in context `ctx`'s task map.
pub(in crate::a2a) async fn put(
    system: &AgentSystem,
    ctx: &str,
    key: &str,
    value: &Stored,
) -> Result<(), A2aError> {
    let bytes = serde_json::to_vec(value).map_err(store_err)?;
    system
        .deps()
        .store
        .a2a_task_put(ctx, key, &bytes)
        .await
        .map_err(store_err)
}

/// Stores `value` under `key` in context `ctx`'s task map unless something is stored there
/// already: answers whether it did.
pub(in crate::a2a) async fn put_new(
    system: &AgentSystem,
    ctx: &str,
    key: &str,
    value: &Stored,
) -> Result<bool, A2aError> {
    let bytes = serde_json::to_vec(value).map_err(store_err)?;
    system
        .deps()
        .store
        .a2a_task_put_new(ctx, key, &bytes)
        .await
        .map_err(store_err)
}

pub(super) async fn save_settled(
    system: &AgentSystem,
    ctx: &str,
    s: &Settled,
) -> Result<(), A2aError> {
    let bytes = serde_json::to_vec(&Stored::Settled(s.clone())).map_err(store_err)?;
    system
        .deps()
        .store
        .a2a_task_put(ctx, &settled_key(&s.task_id), &bytes)
        .await
        .map_err(store_err)
}

/// What a context's task map holds, read.
#[derive(Default)]
pub(in crate::a2a) struct Contents {
    pub tasks: Vec<TaskRecord>,
    pub settled: Vec<Settled>,
    pub push: Vec<super::PushConfig>,
    pub notices: Vec<super::Notice>,
}

/// The context's tasks, settled states, push configs and notifications, read.
pub(in crate::a2a) async fn stored(system: &AgentSystem, ctx: &str) -> Result<Contents, A2aError> {
    let values = system
        .deps()
        .store
        .a2a_tasks(ctx)
        .await
        .map_err(store_err)?;
    let mut c = Contents::default();
    for v in values {
        match serde_json::from_slice::<Stored>(&v) {
            Ok(Stored::Task(t)) => c.tasks.push(t),
            Ok(Stored::Settled(s)) => c.settled.push(s),
            Ok(Stored::Push(p)) => c.push.push(p),
            Ok(Stored::Notice(n)) => c.notices.push(n),
            Err(e) => tracing::warn!(context = ctx, error = %e, "an A2A task could not be read"),
        }
    }
    Ok(c)
}

/// Whether context `ctx` has tasks (is an A2A context).
pub async fn is_context(system: &AgentSystem, ctx: &str) -> Result<bool, A2aError> {
    Ok(!system
        .deps()
        .store
        .a2a_tasks(ctx)
        .await
        .map_err(store_err)?
        .is_empty())
}
