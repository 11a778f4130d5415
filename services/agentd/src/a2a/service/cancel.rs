//! `CancelTask` — one task only, not agentd's cancel of the whole context (the run's cancel
//! every door shares, [`crate::runs::cancel_item`]) — and the check `SubscribeToTask` makes.

use super::params::task_id;
use crate::a2a::A2a;
use crate::a2a::error::A2aError;
use crate::a2a::task::{self, State, task_json};
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
    if view.state() != State::InputRequired {
        crate::runs::cancel_item(system, &t.to_run(), &seen.thread)
            .await
            .map_err(A2aError::from)?;
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
