//! `Supervisor`: one per process. It owns the directory of live agents, creates agents
//! (enforcing the depth and fan-out limits), activates persisted ones, places trees on
//! Arbiters, and applies lifecycle controls, cascading cancel/terminate/close/delete to
//! descendants deepest first.

use crate::FastHashMap;
use crate::agent::{AgentActor, AgentEnv};
use crate::channel_router::{ChannelRouter, ForgetParent};
use crate::deps::Deps;
use crate::hashing::fnv1a64;
use crate::messages::{
    Activate, AgentStopped, ApplyControl, Deliver, Lifecycle, Lookup, ParentRouterFor, Register,
    Restore, SharedAgentAddr, Shutdown, Spawn, StopAgent,
};
use crate::ops::mailbox;
use crate::parent_router::ParentRouter;
use actix::prelude::*;
use agentd_proto::{
    Address, AgentRecord, AgentStatus, AgentdError, Control, Envelope, ErrorCode, Event, InboxItem,
    Item,
};
use std::collections::HashMap;
use std::sync::Arc;

/// A live agent of this process, as the supervisor knows it.
struct LiveAgent {
    /// Shared with the router (which keeps the same key).
    addr: SharedAgentAddr,
    /// The root of its tree (a spent tree budget pauses the whole tree); `None` for a root,
    /// whose id is its root's (most live agents of a large process: no second copy of the id).
    root_id: Option<Box<str>>,
}

impl LiveAgent {
    fn is_in_tree(&self, id: &str, root_id: &str) -> bool {
        self.root_id.as_deref().unwrap_or(id) == root_id
    }
}

/// The process supervisor.
pub struct Supervisor {
    /// Shared with every agent it starts.
    deps: Arc<Deps>,
    router: Arc<Addr<ChannelRouter>>,
    /// This supervisor's own address, shared by all its agents (made with the first one).
    me: Option<Arc<Addr<Supervisor>>>,
    /// What every agent shares (made with the first one: it holds [`Self::me`]).
    agent_env: Option<Arc<AgentEnv>>,
    agents: FastHashMap<Arc<str>, LiveAgent>,
    parents: HashMap<String, Addr<ParentRouter>>,
    arbiters: Vec<Arbiter>,
    /// Turn slots, when `limits.max_running_turns` is set.
    /// Shared by every agent (one pointer each, no `Addr` clone per agent).
    scheduler: Option<Arc<Addr<crate::scheduler::Scheduler>>>,
    /// dependency → agents waiting for it to finish.
    dependents: HashMap<String, Vec<String>>,
}

impl Supervisor {
    /// A supervisor with `deps.config.arbiters` Arbiters (0 = one per core; 1 = the current
    /// one).
    pub fn new(deps: Arc<Deps>, router: Addr<ChannelRouter>) -> Self {
        let n = match deps.config.arbiters {
            0 => std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1),
            n => n,
        };
        let arbiters = if n <= 1 {
            Vec::new()
        } else {
            (0..n).map(|_| Arbiter::new()).collect()
        };
        let limits = crate::scheduler::SchedulerLimits {
            total: deps.config.limits.max_running_turns,
            per_parent: deps.config.limits.max_running_turns_per_parent,
            per_provider: deps.config.provider_limits.clone(),
        };
        let scheduler = limits
            .any()
            .then(|| Arc::new(crate::scheduler::Scheduler::new(limits).start()));
        Supervisor {
            deps,
            router: Arc::new(router),
            me: None,
            agent_env: None,
            agents: FastHashMap::default(),
            parents: HashMap::new(),
            arbiters,
            scheduler,
            dependents: HashMap::new(),
        }
    }

    /// The Arbiter of a tree: every agent of one root lives on the same one (a hop across
    /// Arbiters costs ~60 µs, within one under 1 µs).
    fn arbiter_for(&self, root_id: &str) -> Option<ArbiterHandle> {
        if self.arbiters.is_empty() {
            return None;
        }
        let i = (fnv1a64(root_id.as_bytes()) % self.arbiters.len() as u64) as usize;
        Some(self.arbiters[i].handle())
    }

    /// Remembers that `agent_id` waits for `unmet` to finish.
    fn watch(&mut self, agent_id: &str, unmet: &std::collections::HashSet<String>) {
        for dep in unmet {
            let list = self.dependents.entry(dep.clone()).or_default();
            if !list.iter().any(|d| d == agent_id) {
                list.push(agent_id.to_string());
            }
        }
    }

    /// This supervisor's address, one shared copy for every agent and parent router.
    fn shared_address(&mut self, ctx: &mut Context<Self>) -> Arc<Addr<Supervisor>> {
        self.me
            .get_or_insert_with(|| Arc::new(ctx.address()))
            .clone()
    }

    /// What every agent of this process shares, made with the first one.
    fn agent_env(&mut self, ctx: &mut Context<Self>) -> Arc<AgentEnv> {
        if let Some(env) = &self.agent_env {
            return env.clone();
        }
        let env = Arc::new(AgentEnv {
            deps: self.deps.clone(),
            supervisor: self.shared_address(ctx),
            router: self.router.clone(),
            scheduler: self.scheduler.clone(),
            tree_spend: Default::default(),
        });
        self.agent_env = Some(env.clone());
        env
    }

    fn start_agent(
        &mut self,
        rec: impl Into<Arc<AgentRecord>>,
        unmet: std::collections::HashSet<String>,
        ctx: &mut Context<Self>,
    ) -> SharedAgentAddr {
        let rec: Arc<AgentRecord> = rec.into();
        let id: Arc<str> = rec.id.as_str().into();
        let root_id = (rec.root_id != rec.id).then(|| rec.root_id.as_str().into());
        let env = self.agent_env(ctx);
        let addr = Arc::new(match self.arbiter_for(&rec.root_id) {
            Some(arb) => {
                AgentActor::start_in_arbiter(&arb, move |_| AgentActor::new(rec, env, unmet))
            }
            None => AgentActor::new(rec, env, unmet).start(),
        });
        self.agents.insert(
            id.clone(),
            LiveAgent {
                addr: addr.clone(),
                root_id,
            },
        );
        self.router.do_send(Register {
            agent_id: id,
            addr: addr.clone(),
        });
        addr
    }

    /// `unavailable` when one more live agent would exceed `limits.max_live_agents`.
    fn check_live_limit(&mut self) -> Result<(), AgentdError> {
        let max = self.deps.config.limits.max_live_agents;
        if self.agents.len() >= max {
            self.agents.retain(|_, a| a.addr.connected());
            if self.agents.len() >= max {
                return Err(AgentdError::new(
                    ErrorCode::Unavailable,
                    format!(
                        "this process already hosts {max} live agents (limits.max_live_agents); close some first"
                    ),
                ));
            }
        }
        Ok(())
    }

    fn live(&self, id: &str) -> Option<SharedAgentAddr> {
        self.agents
            .get(id)
            .map(|a| &a.addr)
            .filter(|a| a.connected())
            .cloned()
    }
}

impl Actor for Supervisor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        ctx.set_mailbox_capacity(16 * 1024);
    }

    fn stopped(&mut self, _: &mut Self::Context) {
        for a in &self.arbiters {
            a.stop();
        }
    }
}

impl Handler<Lookup> for Supervisor {
    type Result = Option<Addr<AgentActor>>;

    fn handle(&mut self, Lookup(id): Lookup, _: &mut Self::Context) -> Self::Result {
        self.live(&id).map(|a| (*a).clone())
    }
}

impl Handler<crate::messages::LiveCount> for Supervisor {
    type Result = usize;

    fn handle(&mut self, _: crate::messages::LiveCount, _: &mut Self::Context) -> usize {
        self.agents.len()
    }
}

impl Handler<AgentStopped> for Supervisor {
    type Result = ();

    fn handle(&mut self, AgentStopped(id): AgentStopped, _: &mut Self::Context) {
        if self
            .agents
            .get(id.as_str())
            .is_some_and(|a| !a.addr.connected())
        {
            self.agents.remove(id.as_str());
        }
    }
}

impl Handler<ParentRouterFor> for Supervisor {
    type Result = MessageResult<ParentRouterFor>;

    fn handle(
        &mut self,
        ParentRouterFor(id): ParentRouterFor,
        ctx: &mut Self::Context,
    ) -> Self::Result {
        if let Some(pr) = self.parents.get(&id).filter(|a| a.connected()) {
            return MessageResult(pr.clone());
        }
        let pr = ParentRouter::new(
            id.clone(),
            self.deps.clone(),
            self.shared_address(ctx),
            self.router.clone(),
        )
        .start();
        self.parents.insert(id, pr.clone());
        MessageResult(pr)
    }
}

impl Handler<Spawn> for Supervisor {
    type Result = AtomicResponse<Self, Result<AgentRecord, AgentdError>>;

    fn handle(&mut self, Spawn(spec): Spawn, _: &mut Self::Context) -> Self::Result {
        if let Err(e) = self.check_live_limit() {
            return AtomicResponse::new(Box::pin(actix::fut::ready(Err(e))));
        }
        let deps = self.deps.clone();
        let fut = async move {
            let cfg = &deps.config;
            let ty = cfg.types.get(&spec.agent_type).ok_or_else(|| {
                AgentdError::new(
                    ErrorCode::UnknownAgentType,
                    format!("no agent type `{}`", spec.agent_type),
                )
            })?;
            let depth = spec.parent.as_ref().map(|p| p.depth + 1).unwrap_or(0);
            if let Some(parent) = &spec.parent {
                if depth > cfg.limits.max_depth {
                    return Err(AgentdError::new(
                        ErrorCode::DepthLimit,
                        format!(
                            "a child of `{}` would be at depth {depth}; the limit is {}",
                            parent.id, cfg.limits.max_depth
                        ),
                    ));
                }
                let n = deps.store.child_count(&parent.id).await?;
                if n as u32 >= cfg.limits.max_children {
                    return Err(AgentdError::new(
                        ErrorCode::FanoutLimit,
                        format!(
                            "`{}` already has {n} children; the limit is {}",
                            parent.id, cfg.limits.max_children
                        ),
                    ));
                }
            }
            let now = deps.clock.now_ms();
            let id = spec
                .id
                .clone()
                .unwrap_or_else(|| agentd_proto::ids::new_id().to_string());
            // Dependencies name existing agents only, so they cannot form a cycle.
            for dep in &spec.depends_on {
                if *dep == id {
                    return Err(AgentdError::new(
                        ErrorCode::InvalidArgument,
                        "an agent cannot depend on itself",
                    ));
                }
                if deps.store.get_agent(dep).await?.is_none() {
                    return Err(AgentdError::agent_not_found(dep));
                }
            }
            let unmet = unmet_dependencies(&deps, &spec.depends_on).await?;
            let provider = spec.provider.clone().or_else(|| ty.provider.clone());
            if let Some(p) = &provider
                && !cfg.providers.contains(p)
            {
                return Err(AgentdError::new(
                    ErrorCode::UnknownProvider,
                    format!("no model provider `{p}` is configured"),
                ));
            }
            let mut env = spec
                .parent
                .as_ref()
                .map(|p| p.env.clone())
                .unwrap_or_default();
            env.extend(spec.env.clone());
            let title = spec
                .title
                .clone()
                .filter(|t| !t.trim().is_empty())
                .unwrap_or_else(|| crate::config::AgentTypes::default_title(ty));
            let rec = AgentRecord {
                id: id.clone(),
                parent_id: spec.parent.as_ref().map(|p| p.id.clone()),
                root_id: spec
                    .parent
                    .as_ref()
                    .map(|p| p.root_id.clone())
                    .unwrap_or_else(|| id.clone()),
                depth,
                title: title.trim().to_string(),
                agent_type: ty.name.clone(),
                status: AgentStatus::Idle,
                status_reason: None,
                foreground: spec.parent.is_none(),
                allowed_tools: spec.allowed_tools.clone(),
                channel: spec.channel.clone(),
                last_error: None,
                usage: Default::default(),
                cost_usd: 0.0,
                phase: None,
                current_step: None,
                progress: None,
                resume_at_ms: None,
                provider,
                model: spec.model.clone().or_else(|| ty.model.clone()),
                env,
                turns: 0,
                depends_on: spec.depends_on.clone(),
                attempts: 0,
                current_task: None,
                priority: spec
                    .priority
                    .or(spec.parent.as_ref().map(|p| p.priority))
                    .unwrap_or_default(),
                budget: match (
                    spec.budget,
                    spec.parent.as_ref().and_then(|p| p.budget.as_deref()),
                ) {
                    (Some(b), Some(cap)) => Some(Box::new(b.capped_by(cap))),
                    (Some(b), None) => Some(Box::new(b)),
                    // The root's budget covers the whole tree (checked on the tree's totals),
                    // so a child without its own budget takes no copy of it.
                    (None, _) => None,
                },
                result: None,
                created_at_ms: now,
                updated_at_ms: now,
            };
            // Written as a batch so that a store keeping records in memory shares this one with
            // the agent's actor instead of holding a copy.
            let rec = Arc::new(rec);
            deps.store
                .write_batch(&[crate::ports::StoreWrite::PutAgent(rec.clone())])
                .await?;
            if let Some(parent) = &spec.parent {
                deps.store.add_child(&parent.id, &id).await?;
            }
            Ok((rec, spec.prompt, unmet))
        };
        AtomicResponse::new(Box::pin(fut.into_actor(self).map(|res, act, ctx| {
            let (rec, prompt, unmet) = res?;
            act.watch(&rec.id, &unmet);
            act.deps.events.publish(&Event::Spawned {
                agent_id: rec.id.clone(),
                parent_id: rec.parent_id.clone(),
                agent_type: rec.agent_type.clone(),
                title: rec.title.clone(),
            });
            // The first message, if the spawn has a prompt.
            let first = prompt.map(|prompt| {
                let from = rec
                    .parent_id
                    .as_deref()
                    .map(Address::agent)
                    .unwrap_or(Address::System);
                Envelope::new(
                    from,
                    Address::agent(&rec.id),
                    Item::Inbox(InboxItem::message(prompt)),
                    act.deps.clock.now_ms(),
                )
            });
            if act.deps.is_remote(&rec.id) {
                // Its partition belongs to another process: that process activates it when
                // the first message arrives.
                if let Some(env) = first {
                    act.router.do_send(crate::messages::Route(env));
                }
                return Ok(Arc::unwrap_or_clone(rec));
            }
            crate::metrics::global().agent_status(&rec.id, Some(rec.status.as_str()));
            let addr = act.start_agent(rec.clone(), unmet, ctx);
            if let Some(env) = first {
                addr.do_send(Deliver(env));
            }
            Ok(Arc::unwrap_or_clone(rec))
        })))
    }
}

impl Handler<Activate> for Supervisor {
    type Result = AtomicResponse<Self, Result<SharedAgentAddr, AgentdError>>;

    fn handle(&mut self, Activate(id): Activate, _: &mut Self::Context) -> Self::Result {
        if let Some(addr) = self.live(&id) {
            return AtomicResponse::new(Box::pin(actix::fut::ready(Ok(addr))));
        }
        if let Err(e) = self.check_live_limit() {
            return AtomicResponse::new(Box::pin(actix::fut::ready(Err(e))));
        }
        let deps = self.deps.clone();
        let fut = async move {
            let mut rec = deps
                .store
                .get_agent(&id)
                .await?
                .ok_or_else(|| AgentdError::agent_not_found(&id))?;
            let from = rec.status;
            // Closed agents re-open lazily; a turn that was running when the process stopped
            // is over (its persisted output stays).
            let to = match from {
                AgentStatus::Closed | AgentStatus::Running | AgentStatus::Queued => {
                    Some(AgentStatus::Idle)
                }
                _ => None,
            };
            if let Some(to) = to {
                rec.status = to;
                rec.status_reason = Some(format!("re-opened from {from}"));
                rec.updated_at_ms = deps.clock.now_ms();
                deps.store.put_agent(&rec).await?;
                deps.events.publish(&Event::StatusChanged {
                    agent_id: rec.id.clone(),
                    from,
                    to,
                    reason: rec.status_reason.clone(),
                });
            }
            let pending = deps.store.inbox_pending(&rec.id).await?;
            let unmet = unmet_dependencies(&deps, &rec.depends_on).await?;
            Ok::<_, AgentdError>((rec, pending, unmet))
        };
        AtomicResponse::new(Box::pin(fut.into_actor(self).map(|res, act, ctx| {
            let (rec, pending, unmet) = res?;
            if let Some(addr) = act.live(&rec.id) {
                return Ok(addr);
            }
            act.watch(&rec.id, &unmet);
            let addr = act.start_agent(rec, unmet, ctx);
            if !pending.is_empty() {
                // Work that was queued when the agent last stopped (restart, failover).
                addr.do_send(Restore(pending));
            }
            Ok(addr)
        })))
    }
}

/// The dependencies of `depends_on` that have not completed yet.
async fn unmet_dependencies(
    deps: &Deps,
    depends_on: &[String],
) -> Result<std::collections::HashSet<String>, AgentdError> {
    let mut unmet = std::collections::HashSet::new();
    for dep in depends_on {
        let done = deps
            .store
            .get_agent(dep)
            .await?
            .is_some_and(|r| r.status == AgentStatus::Completed);
        if !done {
            unmet.insert(dep.clone());
        }
    }
    Ok(unmet)
}

impl Handler<crate::messages::Finished> for Supervisor {
    type Result = ();

    fn handle(&mut self, msg: crate::messages::Finished, _: &mut Self::Context) {
        let hold = self.deps.config.limits.on_dependency_failure != "fail";
        let waiting = if msg.ok || !hold {
            self.dependents.remove(&msg.agent_id).unwrap_or_default()
        } else {
            self.dependents
                .get(&msg.agent_id)
                .cloned()
                .unwrap_or_default()
        };
        for dependent in waiting {
            if let Some(addr) = self.live(&dependent) {
                addr.do_send(crate::messages::DependencyDone {
                    agent_id: msg.agent_id.clone(),
                    ok: msg.ok,
                });
            }
        }
    }
}

/// The ids of `root`'s subtree, deepest first, `root` last.
async fn subtree_postorder(deps: &Deps, root: &str) -> Result<Vec<String>, AgentdError> {
    let mut order = Vec::new();
    // Agents already ordered (a set: `order.contains` made large trees quadratic).
    let mut done = std::collections::HashSet::new();
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
        let deps = self.deps.clone();
        let router = self.router.clone();
        let Lifecycle { agent_id, control } = msg;
        // The agents it applies to: cancel, close and delete reach the whole subtree, deepest
        // first; terminate (and the refused pause/resume) the one agent.
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
        // the directory cannot change meanwhile (no copy of the whole directory per call).
        let read = read.into_actor(self).map(|res, act, _| {
            res.map(|(rec, targets)| {
                let live: HashMap<String, SharedAgentAddr> = targets
                    .iter()
                    .filter_map(|id| act.live(id).map(|addr| (id.clone(), addr)))
                    .collect();
                (rec, targets, live)
            })
        });
        let apply = move |(rec, targets, live): (
            Option<AgentRecord>,
            Vec<String>,
            HashMap<String, SharedAgentAddr>,
        )| async move {
            // A delete forwarded from another process may find the record already gone; it
            // still stops the live actor here.
            let live_here = live.contains_key(&agent_id);
            if rec.is_none() && !(control == Control::Delete && live_here) {
                return Err(AgentdError::agent_not_found(&agent_id));
            }
            match control {
                Control::Pause | Control::Resume => {
                    // Needs activation, which this (atomic) handler cannot await on itself:
                    // `ops::lifecycle` does it.
                    let _ = rec;
                    Err(AgentdError::new(
                        ErrorCode::Internal,
                        "pause/resume go through ops::lifecycle",
                    ))
                }
                Control::Cancel | Control::Terminate => {
                    let mut last = None;
                    for id in targets {
                        let target = id == agent_id;
                        let res = match live.get(&id) {
                            Some(addr) => {
                                addr.send(ApplyControl(control)).await.map_err(mailbox)?
                            }
                            None if deps.is_owned_elsewhere(&id) => {
                                forward_control(&deps, &id, control).await
                            }
                            None => {
                                settle_stored(
                                    &deps,
                                    &id,
                                    if control == Control::Cancel {
                                        AgentStatus::Cancelled
                                    } else {
                                        AgentStatus::Terminated
                                    },
                                )
                                .await
                            }
                        };
                        match res {
                            Ok(r) if target => last = Some(r),
                            Err(e) if target => return Err(e),
                            _ => {}
                        }
                    }
                    Ok(last)
                }
                Control::Close => {
                    let mut last = None;
                    for id in targets {
                        let r = match live.get(&id) {
                            Some(addr) => Some(
                                addr.send(StopAgent {
                                    final_status: Some(AgentStatus::Closed),
                                })
                                .await
                                .map_err(mailbox)?,
                            ),
                            None if deps.is_owned_elsewhere(&id) => {
                                forward_control(&deps, &id, control).await.ok()
                            }
                            None => settle_stored(&deps, &id, AgentStatus::Closed).await.ok(),
                        };
                        if id == agent_id {
                            last = r;
                        }
                    }
                    Ok(last)
                }
                Control::Delete => {
                    for id in targets {
                        if let Some(addr) = live.get(&id) {
                            addr.send(StopAgent { final_status: None })
                                .await
                                .map_err(mailbox)?;
                        } else if deps.is_owned_elsewhere(&id) {
                            let _ = forward_control(&deps, &id, Control::Delete).await;
                        }
                        deps.store.delete_agent(&id).await?;
                        router.do_send(ForgetParent(id.clone()));
                        crate::metrics::global().agent_status(&id, None);
                        deps.events.publish(&Event::Deleted { agent_id: id });
                    }
                    Ok(None)
                }
            }
        };
        let fut = read.then(move |res, act, _| {
            let stopped: Vec<String> = match &res {
                Ok((_, targets, _)) if matches!(control, Control::Delete | Control::Close) => {
                    targets.clone()
                }
                _ => Vec::new(),
            };
            async move {
                match res {
                    Ok(read) => apply(read).await,
                    Err(e) => Err(e),
                }
            }
            .into_actor(act)
            .map(move |res, act: &mut Self, _| {
                // The stopped agents leave the directory (not a sweep of every live agent).
                for id in &stopped {
                    if act
                        .agents
                        .get(id.as_str())
                        .is_some_and(|a| !a.addr.connected())
                    {
                        act.agents.remove(id.as_str());
                    }
                    if act.parents.get(id).is_some_and(|a| !a.connected()) {
                        act.parents.remove(id);
                    }
                }
                res
            })
        });
        AtomicResponse::new(Box::pin(fut))
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
        let live: Vec<SharedAgentAddr> = self
            .agents
            .values()
            .map(|a| &a.addr)
            .filter(|a| a.connected())
            .cloned()
            .collect();
        let fut = async move {
            for addr in live {
                let _ = addr.send(StopAgent { final_status: None }).await;
            }
        };
        AtomicResponse::new(Box::pin(fut.into_actor(self).map(|_, act, ctx| {
            act.agents.clear();
            act.parents.clear();
            ctx.stop();
        })))
    }
}

impl Handler<crate::channel_router::Passivate> for Supervisor {
    type Result = usize;

    fn handle(&mut self, msg: crate::channel_router::Passivate, _: &mut Self::Context) -> usize {
        let filter = msg.0;
        let mut n = 0;
        for (id, live) in self.agents.iter() {
            if filter(id) && live.addr.connected() {
                live.addr.do_send(StopAgent { final_status: None });
                n += 1;
            }
        }
        self.agents.retain(|id, _| !filter(id));
        self.parents.retain(|id, _| !filter(id));
        n
    }
}

impl Handler<crate::messages::PauseTree> for Supervisor {
    type Result = ();

    fn handle(&mut self, msg: crate::messages::PauseTree, _: &mut Self::Context) {
        for (id, live) in &self.agents {
            if live.is_in_tree(id, &msg.root_id) {
                live.addr
                    .do_send(crate::messages::BudgetPause(msg.limit.clone()));
            }
        }
    }
}
