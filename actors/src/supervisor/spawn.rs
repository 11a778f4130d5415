//! Creating an agent: its type and limits are checked, its record is written (with its place in
//! its parent's children), and its actor starts with its first message, unless another process
//! owns its partition (that process activates it when the message arrives).

use super::Supervisor;
use super::dependencies::{Dependencies, at_spawn};
use crate::config::{AgentType, SharedNames};
use crate::deps::Deps;
use crate::messages::{FirstMessage, Spawn, SpawnSpec, Spawned};
use crate::ports::StoreWrite;
use actix::prelude::*;
use agentd_proto::{
    Address, AgentRecord, AgentStatus, AgentdError, Envelope, ErrorCode, Event, InboxItem, Item,
};
use std::sync::Arc;

impl Handler<Spawn> for Supervisor {
    type Result = AtomicResponse<Self, Result<Spawned, AgentdError>>;

    fn handle(&mut self, Spawn(spec): Spawn, _: &mut Self::Context) -> Self::Result {
        if let Err(e) = self.check_live_limit() {
            return AtomicResponse::new(Box::pin(actix::fut::ready(Err(e))));
        }
        let deps = self.system.deps.clone();
        let created = async move {
            let (rec, dependencies) = create(&deps, &spec).await?;
            Ok::<_, AgentdError>((rec, spec.prompt, dependencies, spec.trace))
        };
        AtomicResponse::new(Box::pin(created.into_actor(self).map(|res, act, _| {
            let (rec, prompt, dependencies, trace) = res?;
            act.started_spawn(rec, prompt, dependencies, trace)
        })))
    }
}

impl Supervisor {
    /// The agent of `rec` was created: it is announced, and started here with its first
    /// message (`prompt`, in trace `trace`) unless it belongs to another process; its watches
    /// are placed.
    fn started_spawn(
        &mut self,
        rec: Arc<AgentRecord>,
        prompt: Option<String>,
        mut dependencies: Dependencies,
        trace: Option<agentd_proto::TraceContext>,
    ) -> Result<Spawned, AgentdError> {
        let deps = &self.system.deps;
        deps.events.publish(&Event::Spawned {
            agent_id: rec.id.clone(),
            parent_id: rec.parent_id.as_deref().map(String::from),
            agent_type: rec.agent_type.to_string(),
            title: rec.title.to_string(),
        });
        let first = prompt.map(|prompt| first_message(&rec, prompt, trace, deps.clock.now_ms()));
        if deps.is_remote(&rec.id) {
            // Its partition belongs to another process: that process activates it when the
            // first message (or the news of a dependency) arrives.
            let first_message =
                first.map(|env| -> FirstMessage { Box::pin(self.system.route_acked(env)) });
            dependencies.announce(&self.system, &rec.id);
            return Ok(Spawned {
                record: Arc::unwrap_or_clone(rec),
                first_message,
            });
        }
        agentd_observe::metrics::global().agent_status(&rec.id, Some(rec.status));
        let unmet = std::mem::take(&mut dependencies.unmet);
        let addr = self.start_agent(rec.clone(), unmet);
        let first_message = first
            .map(|env| -> FirstMessage { Box::pin(super::shortcuts::deliver_acked(&addr, env)) });
        dependencies.announce(&self.system, &rec.id);
        Ok(Spawned {
            record: Arc::unwrap_or_clone(rec),
            first_message,
        })
    }
}

/// The envelope of agent `rec`'s first message, `prompt`, from its parent (or the system), in
/// trace `trace`. Its id is derived from the agent's, as the agent's own may be (an idempotent
/// spawn's): a first message routed twice for one agent (a retried spawn) is queued once.
pub(crate) fn first_message(
    rec: &AgentRecord,
    prompt: String,
    trace: Option<agentd_proto::TraceContext>,
    now_ms: u64,
) -> Envelope {
    let from = rec
        .parent_id
        .as_deref()
        .map(Address::agent)
        .unwrap_or(Address::System);
    let mut env = Envelope::new(
        from,
        Address::agent(&rec.id),
        Item::Inbox(InboxItem::message(prompt)),
        now_ms,
    );
    env.trace = trace;
    if let Ok(agent) = uuid::Uuid::parse_str(&rec.id) {
        env.id = agentd_proto::ids::derived_id(agent, "first-message");
    }
    env
}

/// Checks `spec` against its type and the limits, writes the new agent's record and its place
/// among its parent's children; answers the record and where it stands with its dependencies.
async fn create(
    deps: &Deps,
    spec: &SpawnSpec,
) -> Result<(Arc<AgentRecord>, Dependencies), AgentdError> {
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
    let provider = spec.provider.clone().or_else(|| ty.provider.clone());
    if let Some(p) = &provider
        && !cfg.providers.contains(p)
    {
        return Err(AgentdError::new(
            ErrorCode::UnknownProvider,
            format!("no model provider `{p}` is configured"),
        ));
    }
    let dependencies = at_spawn(deps, &id, &spec.depends_on).await?;
    let names = cfg.types.shared_names(ty);
    let mut rec = new_record(spec, ty, names, id, depth, provider, deps.clock.now_ms());
    if !dependencies.unmet.is_empty() {
        // Born waiting: its turns (and a failed dependency's news) wait for its actor.
        rec.status = AgentStatus::WaitingDependency;
        rec.status_reason = Some(crate::depends_on::waiting_reason(&dependencies.unmet));
    } else if !rec.depends_on.is_empty() {
        rec.dependencies_settled = true;
    }
    let rec = Arc::new(rec);
    // Written as a batch so that a store keeping records in memory shares this one with the
    // agent's actor instead of holding a copy.
    deps.store
        .write_batch(&[StoreWrite::PutAgent(rec.clone())])
        .await?;
    if let Some(parent) = &spec.parent {
        deps.store.add_child(&parent.id, &rec.id).await?;
    }
    Ok((rec, dependencies))
}

/// The record of a new agent `id` of type `ty` (whose shared name and default title are
/// `names`), as `spec` asks for it.
fn new_record(
    spec: &SpawnSpec,
    ty: &AgentType,
    names: SharedNames,
    id: String,
    depth: u32,
    provider: Option<String>,
    now: u64,
) -> AgentRecord {
    let parent = spec.parent.as_ref();
    let mut env = parent.map(|p| p.env.clone()).unwrap_or_default();
    env.extend(spec.env.clone());
    let title = match spec.title.as_deref().map(str::trim) {
        Some(title) if !title.is_empty() => title.into(),
        _ => names.title,
    };
    AgentRecord {
        parent_id: parent.map(|p| p.id.as_str().into()),
        root_id: parent
            .map(|p| p.root_id.clone())
            .unwrap_or_else(|| id.as_str().into()),
        id,
        depth,
        title,
        agent_type: names.name,
        status: AgentStatus::Idle,
        status_reason: None,
        // Seed 003: foreground agents are the roots a person or a service talks to; a root
        // spawned as a background job is not one, and no agent an agent made is.
        foreground: parent.is_none() && !spec.background,
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
        dependencies_settled: false,
        on_dependency_failure: spec.on_dependency_failure,
        attempts: 0,
        current_task: None,
        task_steps_counted: 0,
        trace: None,
        priority: spec
            .priority
            .or(parent.map(|p| p.priority))
            .unwrap_or_default(),
        budget: match (spec.budget, parent.and_then(|p| p.budget.as_deref())) {
            (Some(b), Some(cap)) => Some(Box::new(b.capped_by(cap))),
            (Some(b), None) => Some(Box::new(b)),
            // The root's budget covers the whole tree (checked on the tree's totals), so a
            // child without its own budget takes no copy of it.
            (None, _) => None,
        },
        result: None,
        agent_cli: None,
        prompt_preview: spec
            .prompt
            .as_deref()
            .and_then(agentd_proto::prompt_preview),
        created_at_ms: now,
        updated_at_ms: now,
    }
}
