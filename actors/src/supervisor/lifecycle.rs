//! Lifecycle controls through the supervisor: cancel, close and delete reach the target's whole
//! subtree, deepest first; terminate the one agent. A target that is live here gets the control
//! as a message, one that another process owns gets it forwarded there, one that is not live
//! anywhere has its stored record moved. Also: passivating the agents of partitions this process
//! gave up, and the process's shutdown.

use super::Supervisor;
use super::dependencies;
use super::directory::SharedAgentAddr;
use super::messages::{Lifecycle, Passivate, Shutdown};
use crate::agent::messages::{ApplyControl, StopAgent};
use crate::depends_on::met_by_yield;
use crate::deps::Deps;
use crate::errors::mailbox;
use actix::prelude::*;
use agentd_proto::{
    Address, AgentRecord, AgentStatus, AgentdError, Control, DependencyOutcome, Envelope,
    ErrorCode, Event, Item,
};
use std::collections::{HashMap, HashSet};

/// A control's targets: the target's record, the agents it applies to (deepest first) and the
/// live actors among them.
type Targets = (
    Option<AgentRecord>,
    Vec<String>,
    HashMap<String, SharedAgentAddr>,
);

/// The ids of `root`'s subtree, deepest first, `root` last.
async fn subtree_postorder(deps: &Deps, root: &str) -> Result<Vec<String>, AgentdError> {
    let mut order = Vec::new();
    let mut done = HashSet::new();
    let mut stack = vec![(root.to_string(), false)];
    while let Some((id, expanded)) = stack.pop() {
        if expanded {
            done.insert(id.clone());
            order.push(id);
            continue;
        }
        stack.push((id.clone(), true));
        for child in deps.store.children(&id).await? {
            if !done.contains(&child) {
                stack.push((child, false));
            }
        }
        if order.len() + stack.len() > 100_000 {
            break;
        }
    }
    Ok(order)
}

impl Handler<Lifecycle> for Supervisor {
    type Result = AtomicResponse<Self, Result<Option<AgentRecord>, AgentdError>>;

    fn handle(&mut self, msg: Lifecycle, _: &mut Self::Context) -> Self::Result {
        let deps = self.system.deps.clone();
        let Lifecycle { agent_id, control } = msg;
        let read = {
            let (deps, agent_id) = (deps.clone(), agent_id.clone());
            async move {
                let rec = deps.store.get_agent(&agent_id).await?;
                let targets = match control {
                    Control::Cancel | Control::Close | Control::Delete => {
                        subtree_postorder(&deps, &agent_id).await?
                    }
                    _ => vec![agent_id.clone()],
                };
                Ok::<_, AgentdError>((rec, targets))
            }
        };
        // Their live actors, looked up once the targets are known: the handler is atomic, so
        // the directory cannot change meanwhile.
        let read = read.into_actor(self).map(|res, act, _| {
            res.map(|(rec, targets)| {
                let live: HashMap<String, SharedAgentAddr> = targets
                    .iter()
                    .filter_map(|id| act.system.directory.agent(id).map(|a| (id.clone(), a)))
                    .collect();
                (rec, targets, live)
            })
        });
        let fut = read.then(move |res, act, _| {
            let stopped: Vec<String> = match &res {
                Ok((_, targets, _)) if matches!(control, Control::Delete | Control::Close) => {
                    targets.clone()
                }
                _ => Vec::new(),
            };
            let system = act.system.clone();
            async move { apply(&system, agent_id, control, res?).await }
                .into_actor(act)
                .map(move |res, act: &mut Self, _| {
                    // The stopped agents leave the directory (not a sweep of every live agent).
                    for id in &stopped {
                        act.system.directory.remove_stopped(id);
                        act.system.directory.remove_parent_router(id, true);
                    }
                    res
                })
        });
        AtomicResponse::new(Box::pin(fut))
    }
}

/// Applies `control` to its targets; answers the target's record afterwards (`None` after a
/// delete).
async fn apply(
    system: &super::SystemHandle,
    agent_id: String,
    control: Control,
    (rec, targets, live): Targets,
) -> Result<Option<AgentRecord>, AgentdError> {
    let deps = &system.deps;
    // A delete forwarded from another process may find the record already gone; it still
    // stops the live actor here.
    let live_here = live.contains_key(&agent_id);
    if rec.is_none() && !(control == Control::Delete && live_here) {
        return Err(AgentdError::agent_not_found(&agent_id));
    }
    match control {
        // They need activation, which this (atomic) handler cannot await on itself:
        // `ops::lifecycle` does it.
        Control::Pause | Control::Resume => Err(AgentdError::new(
            ErrorCode::Internal,
            "pause/resume go through ops::lifecycle",
        )),
        Control::Cancel | Control::Terminate => {
            let (to, outcome) = if control == Control::Cancel {
                (AgentStatus::Cancelled, DependencyOutcome::Cancelled)
            } else {
                (AgentStatus::Terminated, DependencyOutcome::Terminated)
            };
            let mut last = None;
            for id in targets {
                // A live agent (here or in its owner) tells its dependents itself.
                let res = match live.get(&id) {
                    Some(addr) => addr.send(ApplyControl(control)).await.map_err(mailbox)?,
                    None if deps.is_owned_elsewhere(&id) => {
                        forward_control(deps, &id, control).await
                    }
                    None => {
                        let res = settle_stored(deps, &id, to).await;
                        if res.is_ok() {
                            dependencies::settled(system, &id, outcome).await;
                        }
                        res
                    }
                };
                match res {
                    Ok(r) if id == agent_id => last = Some(r),
                    Err(e) if id == agent_id => return Err(e),
                    _ => {}
                }
            }
            Ok(last)
        }
        Control::Close => {
            let mut last = None;
            for id in targets {
                let closed_here = |r: AgentRecord| {
                    // A closed root or worker has handled all it will: its dependents are met.
                    let meets = r.status == AgentStatus::Closed && !met_by_yield(&r);
                    (Some(r), meets)
                };
                let (r, meets) = match live.get(&id) {
                    Some(addr) => closed_here(
                        addr.send(StopAgent {
                            final_status: Some(AgentStatus::Closed),
                        })
                        .await
                        .map_err(mailbox)?,
                    ),
                    // Its owner closes it (and tells its dependents).
                    None if deps.is_owned_elsewhere(&id) => {
                        (forward_control(deps, &id, control).await.ok(), false)
                    }
                    None => match settle_stored(deps, &id, AgentStatus::Closed).await {
                        Ok(r) => closed_here(r),
                        Err(_) => (None, false),
                    },
                };
                if meets {
                    dependencies::settled(system, &id, DependencyOutcome::Met).await;
                }
                if id == agent_id {
                    last = r;
                }
            }
            Ok(last)
        }
        Control::Delete => {
            for id in &targets {
                // Read before the delete, which removes them: a deleted dependency fails its
                // dependents (but those deleted with it).
                let dependents = deps.store.dependents(id).await?;
                if let Some(addr) = live.get(id) {
                    addr.send(StopAgent { final_status: None })
                        .await
                        .map_err(mailbox)?;
                } else if deps.is_owned_elsewhere(id) {
                    let _ = forward_control(deps, id, Control::Delete).await;
                }
                deps.store.delete_agent(id).await?;
                if let Some(t) = &deps.transport {
                    t.deleted(id);
                }
                // What a process-per-agent backend keeps of the agent (e.g. a CLI's sessions).
                deps.model.control(id, Control::Delete);
                system.directory.remove_parent_router(id, false);
                agentd_observe::metrics::global().agent_status(id, None);
                deps.events.publish(&Event::Deleted {
                    agent_id: id.clone(),
                });
                dependencies::tell_dependents(
                    system,
                    id,
                    DependencyOutcome::Deleted,
                    dependents,
                    &targets,
                )
                .await;
            }
            Ok(None)
        }
    }
}

/// Sends a control to the process that owns `id`; answers the stored record.
pub(crate) async fn forward_control(
    deps: &Deps,
    id: &str,
    control: Control,
) -> Result<AgentRecord, AgentdError> {
    if let Some(t) = &deps.transport {
        let env = Envelope::new(
            Address::System,
            Address::agent(id),
            Item::Control(control),
            deps.clock.now_ms(),
        );
        t.forward(&env).await?;
    }
    deps.store
        .get_agent(id)
        .await?
        .ok_or_else(|| AgentdError::agent_not_found(id))
}

/// Moves a non-live agent's stored record to `to` if the table allows it.
async fn settle_stored(deps: &Deps, id: &str, to: AgentStatus) -> Result<AgentRecord, AgentdError> {
    let mut rec = deps
        .store
        .get_agent(id)
        .await?
        .ok_or_else(|| AgentdError::agent_not_found(id))?;
    if rec.status == to {
        return Ok(rec);
    }
    if !rec.status.can_become(to) {
        return Err(AgentdError::new(
            ErrorCode::InvalidTransition,
            format!("agent `{id}` cannot go from {} to {to}", rec.status),
        ));
    }
    let from = rec.status;
    rec.status = to;
    rec.updated_at_ms = deps.clock.now_ms();
    deps.store.put_agent(&rec).await?;
    deps.events.publish(&Event::StatusChanged {
        agent_id: id.to_string(),
        from,
        to,
        reason: None,
    });
    Ok(rec)
}

impl Handler<Shutdown> for Supervisor {
    type Result = AtomicResponse<Self, ()>;

    fn handle(&mut self, _: Shutdown, _: &mut Self::Context) -> Self::Result {
        let live = self.system.directory.agents_where(|_, _| true);
        let fut = async move {
            for addr in live {
                let _ = addr.send(StopAgent { final_status: None }).await;
            }
        };
        AtomicResponse::new(Box::pin(fut.into_actor(self).map(|_, act, ctx| {
            act.system.directory.clear();
            act.system
                .router
                .do_send(crate::channel_router::messages::StopRouter);
            ctx.stop();
        })))
    }
}

impl Handler<Passivate> for Supervisor {
    type Result = usize;

    fn handle(&mut self, Passivate(filter): Passivate, _: &mut Self::Context) -> usize {
        let stopping = self.system.directory.remove_where(|id| filter(id));
        for addr in &stopping {
            addr.do_send(StopAgent { final_status: None });
        }
        stopping.len()
    }
}
