//! Operations shared by the tools (an agent acting on its sub-agents, through the [`Agents`]
//! port implemented here) and the `AgentSystem` facade (a service acting through the API):
//! one implementation, two doors.

use crate::agent::messages::{ApplyControl, RuntimeState, Snapshot};
use crate::deps::Deps;
use crate::errors::mailbox;
use crate::messages::{Dispatched, ManageSend, Spawn, SpawnSpec};
use crate::ports::{Clock, SystemClock};
use crate::supervisor::Shared;
use crate::supervisor::messages::{Activate, Lifecycle, ParentRouterFor};
use crate::tools::Agents;
use agentd_proto::{
    Address, AgentRecord, AgentView, AgentdError, Control, Envelope, ErrorCode, InboxItem,
    Inspection, Item, LiveState,
};
use async_trait::async_trait;
use std::sync::Arc;
use uuid::Uuid;

/// Creates an agent through the supervisor. Its title (trimmed) and budget are checked here,
/// where the API, the command stream and the `spawn_agent` tool all pass.
pub(crate) async fn spawn(
    system: &Shared,
    mut spec: SpawnSpec,
) -> Result<AgentRecord, AgentdError> {
    if let Some(title) = &spec.title {
        spec.title = Some(system.deps.config.limits.input().title(title)?);
    }
    if let Some(budget) = &spec.budget {
        budget.check()?;
    }
    let spawned = system
        .supervisor
        .send(Spawn(spec))
        .await
        .map_err(mailbox)??;
    // Whoever is answered next may acknowledge the spawn (a `201`): its prompt is durable
    // by then.
    if let Some(first) = spawned.first_message {
        first.await?;
    }
    Ok(spawned.record)
}

/// [`spawn`] of `spec`, whose id (`spec.id`, derived from what asks for the agent) an earlier
/// attempt may have created already (a tool call run again after a crash, a retried spawn):
/// that agent is answered, with what the attempt may not have finished done again — its place
/// among its parent's children, its first message (whose id is derived from the agent's, so
/// it is queued once) — and no second agent is made.
pub(crate) async fn spawn_again(
    system: &Shared,
    spec: SpawnSpec,
) -> Result<AgentRecord, AgentdError> {
    let Some(id) = spec.id.as_deref() else {
        return spawn(system, spec).await;
    };
    let Some(rec) = system.deps.store.get_agent(id).await? else {
        return spawn(system, spec).await;
    };
    if let Some(parent) = &spec.parent {
        system.deps.store.add_child(&parent.id, &rec.id).await?;
    }
    if let Some(prompt) = spec.prompt {
        first_message_again(system, &rec, prompt, spec.trace).await?;
    }
    Ok(rec)
}

/// Routes agent `rec`'s first message, `prompt`, once more (an attempt that made the agent may
/// have stopped before it was queued): its id is derived from the agent's, so one queued
/// before is not queued again.
pub(crate) async fn first_message_again(
    system: &Shared,
    rec: &AgentRecord,
    prompt: String,
    trace: Option<agentd_proto::TraceContext>,
) -> Result<(), AgentdError> {
    let env = crate::supervisor::first_message(rec, prompt, trace, system.deps.clock.now_ms());
    system.route_acked(env).await.map(|_| ())
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
    system: &Shared,
    from: Address,
    target: &str,
    item: InboxItem,
    cause: Option<Uuid>,
) -> Result<Uuid, AgentdError> {
    check_item(&system.deps, &item)?;
    let mut env = Envelope::new(from, Address::agent(target), Item::Inbox(item), 0);
    env.sent_at = SystemClock.now_ms();
    env.trace = agentd_observe::telemetry::current();
    if let Some(cause) = cause {
        env.causation_id = Some(cause);
        env.correlation_id = Some(cause);
    }
    let id = env.id;
    system.route_acked(env).await?;
    Ok(id)
}

/// [`post`] as envelope `id`, caused by `cause`: answers `Ok(false)` if the agent's durable
/// inbox had that id already (a resend).
pub(crate) async fn post_as(
    system: &Shared,
    from: Address,
    target: &str,
    id: Uuid,
    item: InboxItem,
    cause: Option<Uuid>,
) -> Result<bool, AgentdError> {
    check_item(&system.deps, &item)?;
    let mut env = Envelope::new(from, Address::agent(target), Item::Inbox(item), 0);
    env.id = id;
    // The caller chose the id and may send it again: the receiver checks it against what it
    // took before (see `Envelope::is_first_send`).
    env.attempt = 2;
    env.sent_at = SystemClock.now_ms();
    env.trace = agentd_observe::telemetry::current();
    if let Some(cause) = cause {
        env.causation_id = Some(cause);
        env.correlation_id = Some(cause);
    }
    system.route_acked(env).await
}

/// Applies a lifecycle control: pause/resume on the (activated) agent itself; cancel,
/// terminate, close and delete through the supervisor, which cascades them.
pub(crate) async fn lifecycle(
    system: &Shared,
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
async fn resume_tree_budget_pauses(system: &Shared, root: &str) -> Result<(), AgentdError> {
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
pub(crate) async fn record(system: &Shared, id: &str) -> Result<AgentRecord, AgentdError> {
    shared_record(system, id).await.map(Arc::unwrap_or_clone)
}

/// [`record`], shared: a live agent's record without a copy when no turn runs.
pub(crate) async fn shared_record(
    system: &Shared,
    id: &str,
) -> Result<Arc<AgentRecord>, AgentdError> {
    if let Some(addr) = system.directory.agent(id)
        && let Ok(rec) = addr.send(Snapshot).await
    {
        return Ok(rec);
    }
    system
        .deps
        .store
        .get_agent_shared(id)
        .await?
        .ok_or_else(|| AgentdError::agent_not_found(id))
}

/// Inspects one agent (live or persisted): its record, child count, and whether it has an
/// actor in this process, with that actor's inbox depth and whether a turn runs. An agent
/// without an actor counts the items its durable inbox holds, as the work queue does.
pub(crate) async fn inspect(system: &Shared, id: &str) -> Result<Inspection, AgentdError> {
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
    system: &Shared,
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

/// The tools' door: the same operations, on the pointer every actor holds.
#[async_trait]
impl Agents for Shared {
    async fn spawn(&self, spec: SpawnSpec) -> Result<AgentRecord, AgentdError> {
        spawn(self, spec).await
    }

    async fn spawn_again(&self, spec: SpawnSpec) -> Result<AgentRecord, AgentdError> {
        spawn_again(self, spec).await
    }

    async fn post(
        &self,
        from: Address,
        target: &str,
        id: Uuid,
        item: InboxItem,
        cause: Uuid,
    ) -> Result<(), AgentdError> {
        post_as(self, from, target, id, item, Some(cause))
            .await
            .map(|_| ())
    }

    async fn lifecycle(&self, target: &str, control: Control) -> Result<(), AgentdError> {
        lifecycle(self, target, control).await.map(|_| ())
    }

    async fn inspect(&self, target: &str) -> Result<Inspection, AgentdError> {
        inspect(self, target).await
    }

    async fn children(&self, parent: &str) -> Result<Vec<Inspection>, AgentdError> {
        list(self, Some(parent)).await
    }

    async fn manage(&self, send: ManageSend) -> Result<Dispatched, AgentdError> {
        // A parent that has sent before has its router in the directory: no supervisor hop.
        if let Some(router) = self.directory.parent_router(&send.parent.id) {
            return router.send(send).await.map_err(mailbox)?;
        }
        let router = self
            .supervisor
            .send(ParentRouterFor(send.parent.id.clone()))
            .await
            .map_err(mailbox)?;
        router.send(send).await.map_err(mailbox)?
    }
}
