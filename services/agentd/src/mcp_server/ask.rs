//! One `ask_<type>` call: the conversation it talks to (its thread's root, or a fresh root),
//! the run of door [`DOOR`] it is recorded as, its message in the root's durable inbox, and
//! the wait for what became of the run — read through [`crate::runs`], as A2A's tasks are.

use super::error::McpServerError;
use super::thread;
use super::tools::AskArgs;
use crate::runs::{PostError, Seen, derive, now_ms, pending_inputs};
use crate::sse::{EventFeed, Shutdown};
use agentd_actors::{AgentSystem, Run, RunOrigin, RunOutcome, RunState};
use agentd_proto::ids::derived_id;
use agentd_proto::{Control, InboxItem};
use serde_json::{Map, Value, json};
use std::time::Duration;
use uuid::Uuid;

/// The door MCP's runs carry, and the sender of the items they post.
pub const DOOR: &str = "mcp";

/// What a call ends with.
#[derive(Debug, Clone)]
pub struct Asked {
    /// The root agent that answered.
    pub agent_id: String,
    /// The run the call was recorded as.
    pub run_id: String,
    /// What became of it.
    pub outcome: RunOutcome,
}

/// Asks agent type `agent_type` `args.message`, in `args.thread`'s conversation or a fresh
/// one, and waits for the answer. A fresh conversation's root is closed once it answered.
pub async fn ask(
    system: &AgentSystem,
    events: &EventFeed,
    shutdown: &Shutdown,
    agent_type: &str,
    args: &AskArgs,
) -> Result<Asked, McpServerError> {
    let root = match &args.thread {
        Some(alias) => thread::find_or_open(system, agent_type, alias).await?,
        None => thread::spawn_root(system, agent_type).await?.id,
    };
    // Subscribed before the post: no event of the turn is missed.
    let (rx, _) = events.log.subscribe_with_ring();
    let run = post(system, &root, args).await?;
    let outcome = wait(system, rx, shutdown, &run).await?;
    if let Err(e) = system
        .deps()
        .store
        .run_settle(&root, &run.id, &outcome)
        .await
    {
        tracing::warn!(agent_id = %root, run = %run.id, error = %e, "keeping an MCP run's outcome");
    }
    if args.thread.is_none()
        && let Err(e) = system.control(&root, Control::Close).await
    {
        tracing::warn!(agent_id = %root, error = %e, "closing the root of an MCP call");
    }
    Ok(Asked {
        agent_id: root,
        run_id: run.id,
        outcome,
    })
}

/// The run of the call, stored before its item is posted (the `Runs` invariant), then the
/// item in `root`'s inbox.
async fn post(system: &AgentSystem, root: &str, args: &AskArgs) -> Result<Run, McpServerError> {
    let store = &system.deps().store;
    let item = Uuid::now_v7();
    let mut fields = Map::new();
    if let Some(t) = &args.thread {
        fields.insert("thread".into(), Value::String(t.clone()));
    }
    let mut run = Run {
        id: format!("mcp-{item}"),
        agent_id: root.to_string(),
        door: DOOR.to_string(),
        origin: RunOrigin::Door,
        items: vec![item],
        inputs: vec![derived_id(item, "input")],
        rejected: None,
        cancel_requested: false,
        unposted: true,
        created_ms: now_ms(),
        fields,
    };
    store.run_put(&run).await.map_err(McpServerError::store)?;
    let message = InboxItem::followup(&args.message, false);
    match crate::runs::post(system, &mut run, DOOR, item, message).await {
        Ok(()) => Ok(run),
        Err(PostError::Store(e)) => Err(McpServerError::store(e)),
        Err(PostError::Refused(e)) if crate::runs::refused_before_running(&e) => {
            Err(McpServerError::Refused(e.to_string()))
        }
        Err(PostError::Refused(e)) => Err(McpServerError::Internal(e.to_string())),
    }
}

/// Waits until `run` is terminal or asks for input (`crate::runs::until`), or agentd stops.
async fn wait(
    system: &AgentSystem,
    mut rx: tokio::sync::broadcast::Receiver<std::sync::Arc<agentd_bus::Logged>>,
    shutdown: &Shutdown,
    run: &Run,
) -> Result<RunOutcome, McpServerError> {
    let mut shutdown = shutdown.clone();
    let outcome = crate::runs::until(&mut rx, &run.agent_id, || async {
        let seen = Seen::load(system, &run.agent_id)
            .await
            .map_err(McpServerError::store)?
            .ok_or_else(|| McpServerError::Internal(format!("agent `{}` is gone", run.agent_id)))?;
        let outcome = derive(run, &seen, &pending_inputs(&seen)).outcome;
        let ends = outcome.state.is_terminal() || outcome.state == RunState::InputRequired;
        Ok(ends.then_some(outcome))
    });
    tokio::select! {
        outcome = outcome => outcome,
        _ = shutdown.changed() => Err(McpServerError::Internal("agentd is stopping".into())),
    }
}

/// The structured content of a call's result: the agent, the run's state, its usage.
pub fn structured(asked: &Asked) -> Value {
    json!({
        "agent_id": asked.agent_id,
        "status": asked.outcome.state,
        "usage": asked.outcome.usage,
    })
}

/// `send_message`: `message` posted to thread `alias` of `agent_type` (opened if new), not
/// waited for: the root and the run it started.
pub async fn send(
    system: &AgentSystem,
    agent_type: &str,
    alias: &str,
    message: &str,
) -> Result<Value, McpServerError> {
    let root = thread::find_or_open(system, agent_type, alias).await?;
    let args = AskArgs {
        message: message.to_string(),
        thread: Some(alias.to_string()),
    };
    let run = post(system, &root, &args).await?;
    Ok(json!({
        "agent_id": root,
        "run_id": run.id,
        "status": RunState::Pending,
    }))
}

/// `get_thread`: thread `alias` of `agent_type` as text (the user's and the agent's messages,
/// in order), and what became of its last MCP run.
pub async fn show(
    system: &AgentSystem,
    agent_type: &str,
    alias: &str,
) -> Result<(String, Value), McpServerError> {
    let unknown = || McpServerError::UnknownThread {
        agent_type: agent_type.to_string(),
        thread: alias.to_string(),
    };
    let root = thread::find(system, agent_type, alias)
        .await?
        .ok_or_else(unknown)?;
    let seen = Seen::load(system, &root)
        .await
        .map_err(McpServerError::store)?
        .ok_or_else(unknown)?;
    let text = seen
        .thread
        .iter()
        .filter_map(|e| match e.role {
            agentd_proto::Role::User => Some(format!("user: {}", e.text)),
            agentd_proto::Role::Assistant if !e.text.is_empty() => {
                Some(format!("assistant: {}", e.text))
            }
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n\n");
    let runs = system
        .deps()
        .store
        .runs(&root)
        .await
        .map_err(McpServerError::store)?;
    let last = runs.iter().rev().find(|r| r.run.door == DOOR).map(|r| {
        let v = derive(&r.run, &seen, &pending_inputs(&seen));
        json!({
            "run_id": r.run.id,
            "status": v.outcome.state,
            "answer": v.outcome.answer,
            "usage": v.outcome.usage,
        })
    });
    Ok((
        text,
        json!({
            "agent_id": root,
            "status": seen.rec.status.to_string(),
            "last_run": last,
        }),
    ))
}

/// A run's state as the wire names it (`completed`, `input_required`, …).
fn state_name(state: RunState) -> String {
    serde_json::to_value(state)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

/// `cancel`: the last MCP run of thread `alias` of `agent_type` cancelled — taken out of the
/// inbox if queued, its turn interrupted and the sub-agents it started cancelled if running
/// (the cancel every door shares, [`crate::runs::cancel_item`]); the thread goes on.
pub async fn cancel(
    system: &AgentSystem,
    agent_type: &str,
    alias: &str,
) -> Result<Value, McpServerError> {
    let unknown = || McpServerError::UnknownThread {
        agent_type: agent_type.to_string(),
        thread: alias.to_string(),
    };
    let store = &system.deps().store;
    let root = thread::find(system, agent_type, alias)
        .await?
        .ok_or_else(unknown)?;
    let load = || async {
        Seen::load(system, &root)
            .await
            .map_err(McpServerError::store)?
            .ok_or_else(unknown)
    };
    let seen = load().await?;
    let runs = store.runs(&root).await.map_err(McpServerError::store)?;
    let Some(mut run) = runs
        .into_iter()
        .rev()
        .find(|r| r.run.door == DOOR)
        .map(|r| r.run)
    else {
        return Err(McpServerError::NotCancelable(format!(
            "thread `{alias}` has no run to cancel"
        )));
    };
    let state = derive(&run, &seen, &pending_inputs(&seen)).outcome.state;
    if state.is_terminal() {
        return Err(McpServerError::NotCancelable(format!(
            "the last run of thread `{alias}` is {}: there is nothing to cancel",
            state_name(state)
        )));
    }
    run.cancel_requested = true;
    store.run_put(&run).await.map_err(McpServerError::store)?;
    if state != RunState::InputRequired {
        crate::runs::cancel_item(system, &run, &seen.thread)
            .await
            .map_err(|e| McpServerError::Internal(e.to_string()))?;
    }
    // The agent marks the item done with its next write: the run is read until it shows.
    let mut state = state;
    for _ in 0..100 {
        let seen = load().await?;
        state = derive(&run, &seen, &pending_inputs(&seen)).outcome.state;
        if state.is_terminal() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(json!({
        "agent_id": root,
        "run_id": run.id,
        "status": state,
    }))
}

/// `list_threads`: the threads of the exposed types `types` (of `only`, if given), each with
/// its root's state, oldest root first. Read from the roots' MCP runs (a thread's alias is in
/// its runs' fields), each checked against the store's outside ids: one pass over the roots.
pub async fn list_threads(
    system: &AgentSystem,
    types: &[String],
    only: Option<&str>,
) -> Result<Vec<Value>, McpServerError> {
    let store = &system.deps().store;
    let roots = store.list_roots().await.map_err(McpServerError::store)?;
    let mut out = Vec::new();
    for rec in roots {
        let ty = rec.agent_type.to_string();
        if !types.contains(&ty) || only.is_some_and(|o| o != ty) {
            continue;
        }
        let runs = store.runs(&rec.id).await.map_err(McpServerError::store)?;
        let Some(alias) = runs
            .iter()
            .filter(|r| r.run.door == DOOR)
            .find_map(|r| r.run.fields.get("thread").and_then(Value::as_str))
        else {
            continue;
        };
        if thread::find(system, &ty, alias).await?.as_deref() != Some(rec.id.as_str()) {
            continue;
        }
        out.push(json!({
            "type": ty,
            "thread": alias,
            "agent_id": rec.id,
            "status": rec.status.to_string(),
            "updated_at_ms": rec.updated_at_ms,
        }));
    }
    Ok(out)
}
