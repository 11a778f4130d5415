//! Operations shared by the tools (an agent acting on its sub-agents) and the [`AgentSystem`]
//! facade (a service acting through the API): one implementation, two doors.
//!
//! [`AgentSystem`]: crate::system::AgentSystem

use crate::agent::messages::{ApplyControl, RuntimeState, Snapshot};
use crate::channel_router::messages::RouteAcked;
use crate::clock::{Clock, SystemClock};
use crate::deps::Deps;
use crate::errors::mailbox;
use crate::handle::SystemHandle;
use crate::supervisor::messages::{Activate, Lifecycle, Spawn, SpawnSpec};
use agentd_proto::{
    Address, AgentRecord, AgentView, AgentdError, Control, Envelope, ErrorCode, InboxItem,
    Inspection, Item, LiveState,
};
use std::path::Path;
use uuid::Uuid;

/// Creates an agent through the supervisor.
pub(crate) async fn spawn(
    system: &SystemHandle,
    spec: SpawnSpec,
) -> Result<AgentRecord, AgentdError> {
    system.supervisor.send(Spawn(spec)).await.map_err(mailbox)?
}

/// Posts an inbox item to `target` through the channel router (activating it if needed).
pub(crate) async fn post(
    system: &SystemHandle,
    from: Address,
    target: &str,
    item: InboxItem,
    cause: Option<Uuid>,
) -> Result<Uuid, AgentdError> {
    let mut env = Envelope::new(from, Address::agent(target), Item::Inbox(item), 0);
    env.sent_at = SystemClock.now_ms();
    if let Some(cause) = cause {
        env.causation_id = Some(cause);
        env.correlation_id = Some(cause);
    }
    let id = env.id;
    system
        .router
        .send(RouteAcked(env))
        .await
        .map_err(mailbox)??;
    Ok(id)
}

/// Applies a lifecycle control: pause/resume on the (activated) agent itself; cancel,
/// terminate, close and delete through the supervisor, which cascades them.
pub(crate) async fn lifecycle(
    system: &SystemHandle,
    target: &str,
    control: Control,
) -> Result<Option<AgentRecord>, AgentdError> {
    let (deps, supervisor) = (&system.deps, &system.supervisor);
    if deps.is_owned_elsewhere(target) && !matches!(control, Control::Delete) {
        // The owner applies it (and cascades from there).
        return crate::supervisor::forward_control(deps, target, control)
            .await
            .map(Some);
    }
    if matches!(control, Control::Pause | Control::Resume) {
        let rec = deps
            .store
            .get_agent(target)
            .await?
            .ok_or_else(|| AgentdError::agent_not_found(target))?;
        if rec.status == agentd_proto::AgentStatus::Closed {
            return Err(AgentdError::new(
                ErrorCode::InvalidTransition,
                format!("agent `{target}` is closed"),
            ));
        }
        let addr = supervisor
            .send(Activate(target.to_string()))
            .await
            .map_err(mailbox)??;
        let res = addr.send(ApplyControl(control)).await.map_err(mailbox)??;
        if control == Control::Resume && rec.parent_id.is_none() {
            resume_tree_budget_pauses(system, target).await?;
        }
        return Ok(Some(res));
    }
    supervisor
        .send(Lifecycle {
            agent_id: target.to_string(),
            control,
        })
        .await
        .map_err(mailbox)?
}

/// Resuming a root also resumes the agents of its tree that a spent tree budget paused (once
/// the budget is raised they go on; if it is still spent they pause again).
async fn resume_tree_budget_pauses(system: &SystemHandle, root: &str) -> Result<(), AgentdError> {
    let (deps, supervisor) = (&system.deps, &system.supervisor);
    let tree_pause = format!("{}: tree", ErrorCode::BudgetExceeded.as_str());
    let mut stack = deps.store.children(root).await?;
    while let Some(id) = stack.pop() {
        stack.extend(deps.store.children(&id).await?);
        let Some(rec) = deps.store.get_agent(&id).await? else {
            continue;
        };
        if rec.status == agentd_proto::AgentStatus::Paused
            && rec
                .status_reason
                .as_deref()
                .is_some_and(|r| r.starts_with(&tree_pause))
        {
            if deps.is_owned_elsewhere(&id) {
                // Its own process resumes it (a copy activated here would compete with it).
                crate::supervisor::forward_control(deps, &id, Control::Resume).await?;
                continue;
            }
            let addr = supervisor
                .send(Activate(id.clone()))
                .await
                .map_err(mailbox)??;
            addr.send(ApplyControl(Control::Resume))
                .await
                .map_err(mailbox)??;
        }
    }
    Ok(())
}

/// The freshest record of an agent: the live actor's, else the stored one.
pub(crate) async fn record(system: &SystemHandle, id: &str) -> Result<AgentRecord, AgentdError> {
    if let Some(addr) = system.directory.agent(id)
        && let Ok(rec) = addr.send(Snapshot).await
    {
        return Ok(rec);
    }
    system
        .deps
        .store
        .get_agent(id)
        .await?
        .ok_or_else(|| AgentdError::agent_not_found(id))
}

/// Checks that `target` is `caller` or one of its descendants (`not_ancestor` otherwise).
pub(crate) async fn require_descendant(
    deps: &Deps,
    caller: &str,
    target: &str,
) -> Result<(), AgentdError> {
    let mut current = deps
        .store
        .get_agent(target)
        .await?
        .ok_or_else(|| AgentdError::agent_not_found(target))?;
    for _ in 0..=64 {
        if current.id == caller {
            return Ok(());
        }
        let Some(parent) = current.parent_id.clone() else {
            break;
        };
        match deps.store.get_agent(&parent).await? {
            Some(p) => current = p,
            None => break,
        }
    }
    Err(AgentdError::new(
        ErrorCode::NotAncestor,
        format!("agent `{target}` is not a descendant of `{caller}`"),
    ))
}

/// Inspects one agent (live or persisted): its record, child count, and whether it has an
/// actor in this process, with that actor's inbox depth and whether a turn runs.
pub(crate) async fn inspect(system: &SystemHandle, id: &str) -> Result<Inspection, AgentdError> {
    let rec = record(system, id).await?;
    let children = system.deps.store.children(id).await?.len();
    let live = system.directory.agent(id);
    let runtime = match &live {
        Some(addr) => addr.send(RuntimeState).await.ok(),
        None => None,
    };
    Ok(Inspection {
        view: AgentView::of(&rec, children),
        live: LiveState::known(runtime.map(|r| (r.inbox, r.turn_running))),
    })
}

/// The ids of every root, oldest first.
pub(crate) async fn root_ids(deps: &Deps) -> Result<Vec<String>, AgentdError> {
    Ok(deps
        .store
        .list_roots()
        .await?
        .into_iter()
        .map(|r| r.id)
        .collect())
}

/// Children of `parent` (live and closed), or all roots when `parent` is `None`.
pub(crate) async fn list(
    system: &SystemHandle,
    parent: Option<&str>,
) -> Result<Vec<Inspection>, AgentdError> {
    let ids: Vec<String> = match parent {
        Some(p) => system.deps.store.children(p).await?,
        None => root_ids(&system.deps).await?,
    };
    let mut out = Vec::with_capacity(ids.len());
    for id in ids {
        if let Ok(agent) = inspect(system, &id).await {
            out.push(agent);
        }
    }
    Ok(out)
}

/// Appends the context files to a spawn prompt: each read from an allowed directory only (no
/// `..` or symlink escape), and capped in size.
pub(crate) fn attach_context_files(
    deps: &Deps,
    prompt: &str,
    files: &[String],
) -> Result<String, AgentdError> {
    let mut out = prompt.to_string();
    let cap = deps.config.limits.context_file_max_bytes;
    let roots: Vec<_> = deps
        .config
        .context_dirs
        .iter()
        .filter_map(|d| d.canonicalize().ok())
        .collect();
    for f in files {
        let bad = |why: &str| {
            AgentdError::new(
                ErrorCode::InvalidArgument,
                format!("context file `{f}`: {why}"),
            )
        };
        let path = Path::new(f)
            .canonicalize()
            .map_err(|e| bad(&e.to_string()))?;
        if !roots.iter().any(|r| path.starts_with(r)) {
            return Err(AgentdError::new(
                ErrorCode::ToolNotAllowed,
                format!("context file `{f}` is outside the allowed directories"),
            ));
        }
        let meta = std::fs::metadata(&path).map_err(|e| bad(&e.to_string()))?;
        if meta.len() > cap {
            return Err(AgentdError::new(
                ErrorCode::PayloadTooLarge,
                format!(
                    "context file `{f}` has {} bytes; the cap is {cap}",
                    meta.len()
                ),
            ));
        }
        let text = std::fs::read_to_string(&path).map_err(|e| bad(&e.to_string()))?;
        out.push_str(&format!(
            "\n\n<context_file path=\"{f}\">\n{text}\n</context_file>"
        ));
    }
    Ok(out)
}
