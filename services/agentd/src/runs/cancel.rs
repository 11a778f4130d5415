//! A run's cancel as every door does it: the run's item taken out of the inbox if it is still
//! queued, or its turn interrupted and the sub-agents that turn started cancelled (the cancel
//! control cascades to their own descendants); the agent goes on with its other work.

use agentd_actors::{AgentSystem, Run};
use agentd_proto::{AgentdError, Command, ItemCancel, ThreadEntry};

/// Cancels `run`'s last item (its turn began at the input entry `thread` shows, if any); the
/// caller has stored the run with `cancel_requested` set first.
pub async fn cancel_item(
    system: &AgentSystem,
    run: &Run,
    thread: &[ThreadEntry],
) -> Result<(), AgentdError> {
    let Some(item) = run.items.last().copied() else {
        return Ok(());
    };
    let turn_started = thread
        .iter()
        .find(|e| Some(&e.id) == run.inputs.last())
        .map(|e| e.at_ms);
    let done = system
        .execute(Command::CancelItem {
            agent_id: run.agent_id.clone(),
            item_id: item,
        })
        .await?;
    let done: Option<ItemCancel> = done
        .get("cancel")
        .and_then(|c| serde_json::from_value(c.clone()).ok());
    if done == Some(ItemCancel::Interrupted)
        && let Some(since) = turn_started
    {
        cancel_children_since(system, &run.agent_id, since).await;
    }
    Ok(())
}

/// Cancels `agent`'s children created since `since_ms` (those the cancelled turn started)
/// that still run: the cancel control cascades to their own descendants.
pub async fn cancel_children_since(system: &AgentSystem, agent: &str, since_ms: u64) {
    let store = &system.deps().store;
    let Ok(children) = store.children(agent).await else {
        return;
    };
    for child in children {
        let Ok(Some(rec)) = store.get_agent(&child).await else {
            continue;
        };
        if rec.created_at_ms >= since_ms
            && !rec.status.is_terminal()
            && let Err(e) = system.control(&child, agentd_proto::Control::Cancel).await
        {
            tracing::warn!(agent_id = %child, error = %e, "cancelling a sub-agent of a cancelled run");
        }
    }
}
