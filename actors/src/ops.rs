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
use std::path::{Component, Path, PathBuf};
use uuid::Uuid;

/// Creates an agent through the supervisor. Its title (trimmed) and budget are checked here,
/// where the API, the command stream and the `spawn_agent` tool all pass.
pub(crate) async fn spawn(
    system: &SystemHandle,
    mut spec: SpawnSpec,
) -> Result<AgentRecord, AgentdError> {
    if let Some(title) = &spec.title {
        spec.title = Some(system.deps.config.limits.input().title(title)?);
    }
    if let Some(budget) = &spec.budget {
        budget.check()?;
    }
    system.supervisor.send(Spawn(spec)).await.map_err(mailbox)?
}

/// Refuses an inbox item whose message is larger than `limits.max_message_bytes`: a
/// follow-up's text or a reset's seed, from the API, the command stream or a tool alike.
fn check_item(deps: &Deps, item: &InboxItem) -> Result<(), AgentdError> {
    let limits = deps.config.limits.input();
    match item {
        InboxItem::Message { text, .. } => limits.message("text", text),
        InboxItem::Reset {
            message: Some(message),
        } => limits.message("message", message),
        _ => Ok(()),
    }
}

/// Posts an inbox item to `target` through the channel router (activating it if needed),
/// once [`check_item`] accepts it.
pub(crate) async fn post(
    system: &SystemHandle,
    from: Address,
    target: &str,
    item: InboxItem,
    cause: Option<Uuid>,
) -> Result<Uuid, AgentdError> {
    check_item(&system.deps, &item)?;
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
/// actor in this process, with that actor's inbox depth and whether a turn runs. An agent
/// without an actor counts the items its durable inbox holds, as the work queue does.
pub(crate) async fn inspect(system: &SystemHandle, id: &str) -> Result<Inspection, AgentdError> {
    let rec = record(system, id).await?;
    let children = system.deps.store.children(id).await?.len();
    let live = system.directory.agent(id);
    let runtime = match &live {
        Some(addr) => addr.send(RuntimeState).await.ok(),
        None => None,
    };
    let live = match runtime {
        Some(r) => LiveState::known(Some((r.inbox, r.turn_running))),
        None => {
            let stored = system.deps.store.inbox_pending(id).await?.len();
            LiveState::stopped(stored)
        }
    };
    Ok(Inspection {
        view: AgentView::of(&rec, children),
        live,
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

/// A spawn's first message: the prompt (at most `limits.max_prompt_bytes`) with its context
/// files appended. `None` when there is neither.
pub(crate) fn first_message(
    deps: &Deps,
    prompt: Option<&str>,
    files: &[String],
) -> Result<Option<String>, AgentdError> {
    if let Some(p) = prompt {
        deps.config.limits.input().prompt(p)?;
    }
    if prompt.is_none() && files.is_empty() {
        return Ok(None);
    }
    let mut out = prompt.unwrap_or_default().to_string();
    for f in files {
        let text = read_context_file(deps, f)?;
        out.push_str(&format!(
            "\n\n<context_file path=\"{f}\">\n{text}\n</context_file>"
        ));
    }
    Ok(Some(out))
}

/// Reads one context file. The path is placed before the file system is touched: a relative
/// one against each context dir in turn, an absolute one as it is, `.` and `..` folded
/// lexically; a path that does not stay inside a context dir is never opened. One that does
/// must still be inside it with its links followed, be a file and be UTF-8 text. Whatever of
/// that fails, the answer is the same `invalid_argument`, so it tells nothing about the host's
/// files outside the context dirs. A file over `limits.context_file_max_bytes` (only ever one
/// inside them) is `payload_too_large`.
fn read_context_file(deps: &Deps, f: &str) -> Result<String, AgentdError> {
    let cap = deps.config.limits.context_file_max_bytes;
    let cwd = std::env::current_dir().ok();
    for dir in &deps.config.context_dirs {
        let Some(root) = absolute(dir, cwd.as_deref()) else {
            continue;
        };
        let candidate = if Path::new(f).is_absolute() {
            normalize(Path::new(f))
        } else {
            normalize(&root.join(f))
        };
        if !candidate.starts_with(&root) {
            continue;
        }
        let (Ok(real_root), Ok(real)) = (root.canonicalize(), candidate.canonicalize()) else {
            continue;
        };
        if !real.starts_with(&real_root) {
            continue;
        }
        let Ok(meta) = std::fs::metadata(&real) else {
            continue;
        };
        if !meta.is_file() {
            continue;
        }
        if meta.len() > cap {
            return Err(AgentdError::new(
                ErrorCode::PayloadTooLarge,
                format!(
                    "context file `{f}` has {} bytes; limits.context_file_max_bytes is {cap}",
                    meta.len()
                ),
            ));
        }
        if let Ok(text) = std::fs::read_to_string(&real) {
            return Ok(text);
        }
    }
    Err(AgentdError::new(
        ErrorCode::InvalidArgument,
        format!(
            "context file `{f}` is not a readable text file inside the context directories \
             (agents.context_dirs)"
        ),
    ))
}

/// `dir` made absolute against `cwd` and normalized, without touching the file system.
fn absolute(dir: &Path, cwd: Option<&Path>) -> Option<PathBuf> {
    if dir.is_absolute() {
        Some(normalize(dir))
    } else {
        cwd.map(|c| normalize(&c.join(dir)))
    }
}

/// `path` with `.` dropped and each `..` removing the component before it (none above the
/// root), lexically: links are not followed.
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::normalize;
    use std::path::Path;

    #[test]
    fn normalize_folds_dots_lexically() {
        let n = |p: &str| normalize(Path::new(p));
        assert_eq!(n("/a/./b/../c"), Path::new("/a/c"));
        assert_eq!(n("/a/../../../etc/passwd"), Path::new("/etc/passwd"));
        assert_eq!(n("/ctx/../ctx2/x"), Path::new("/ctx2/x"));
        assert!(!n("/ctx/sub/../../etc").starts_with("/ctx"));
        assert!(n("/ctx/sub/../f").starts_with("/ctx"));
    }
}
