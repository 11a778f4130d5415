//! `CancelTask` — one task only, not agentd's cancel of the whole context — and the check
//! `SubscribeToTask` makes.

use super::params::task_id;
use crate::a2a::A2a;
use crate::a2a::error::A2aError;
use crate::a2a::task::{self, State, task_json};
use agentd_proto::{Command, ItemCancel};
use serde_json::Value;
use std::time::Duration;

/// `CancelTask`: a queued task is taken out of the inbox alone; a running one has its turn
/// interrupted, and the sub-agents that turn started are cancelled; the context goes on with
/// its other tasks.
pub async fn cancel_task(a2a: &A2a, p: &Value) -> Result<Value, A2aError> {
    let id = task_id(p)?;
    let system = &a2a.system;
    let (seen, view) = task::get(system, &id).await?;
    if view.state().is_terminal() {
        return Err(A2aError::TaskNotCancelable(format!(
            "task `{id}` is {}: there is nothing to cancel",
            view.state().wire()
        )));
    }
    let mut t = view.task.clone();
    t.cancel_requested = true;
    task::save(system, &t).await?;
    let ctx = t.context_id.clone();
    if let Some(item) = t.items.last().copied()
        && view.state() != State::InputRequired
    {
        let turn_started = seen
            .thread
            .iter()
            .find(|e| Some(&e.id) == t.inputs.last())
            .map(|e| e.at_ms);
        let done = system
            .execute(Command::CancelItem {
                agent_id: ctx.clone(),
                item_id: item,
            })
            .await
            .map_err(A2aError::from)?;
        let done: Option<ItemCancel> = done
            .get("cancel")
            .and_then(|c| serde_json::from_value(c.clone()).ok());
        if done == Some(ItemCancel::Interrupted)
            && let Some(since) = turn_started
        {
            cancel_children_since(a2a, &ctx, since).await;
        }
    }
    // The agent marks the item done with its next write: the task is read until it shows.
    let mut v = task::get(system, &id).await?.1;
    for _ in 0..100 {
        if v.state().is_terminal() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        v = task::get(system, &id).await?.1;
    }
    if v.state() != State::Canceled {
        return Err(A2aError::TaskNotCancelable(format!(
            "task `{id}` became {} before the cancel reached it",
            v.state().wire()
        )));
    }
    Ok(task_json(&v, None, true))
}

/// Cancels the context's children created since `since_ms` (those the cancelled turn
/// started) that still run: the cancel control cascades to their own descendants.
async fn cancel_children_since(a2a: &A2a, ctx: &str, since_ms: u64) {
    let store = &a2a.system.deps().store;
    let Ok(children) = store.children(ctx).await else {
        return;
    };
    for child in children {
        let Ok(Some(rec)) = store.get_agent(&child).await else {
            continue;
        };
        if rec.created_at_ms >= since_ms
            && !rec.status.is_terminal()
            && let Err(e) = a2a
                .system
                .control(&child, agentd_proto::Control::Cancel)
                .await
        {
            tracing::warn!(agent_id = %child, error = %e, "cancelling a sub-agent of a cancelled task");
        }
    }
}

/// The task `id` names, for `SubscribeToTask` (`UnsupportedOperation` once it is terminal).
pub async fn subscribable(a2a: &A2a, p: &Value) -> Result<String, A2aError> {
    let id = task_id(p)?;
    let (_, v) = task::get(&a2a.system, &id).await?;
    if v.state().is_terminal() {
        return Err(A2aError::Unsupported(format!(
            "task `{id}` is {}: there is nothing to subscribe to",
            v.state().wire()
        )));
    }
    Ok(id)
}
