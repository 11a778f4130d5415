//! The messages the [`Supervisor`](super::Supervisor) handles.

use super::directory::SharedAgentAddr;
use crate::parent_router::ParentRouter;
use actix::prelude::*;
use agentd_proto::{AgentRecord, AgentdError, Channel, Control};

/// What to create.
#[derive(Debug, Clone, Default)]
pub struct SpawnSpec {
    /// Id to use (Manage children get theirs from the alias table); `None` makes a new one.
    pub id: Option<String>,
    /// Parent record; `None` creates a root (foreground unless `background`).
    pub parent: Option<AgentRecord>,
    /// Agent type name.
    pub agent_type: String,
    /// Title; defaults to the type's.
    pub title: Option<String>,
    /// First message.
    pub prompt: Option<String>,
    /// Tool allow-list.
    pub allowed_tools: Option<Vec<String>>,
    /// Where output goes.
    pub channel: Channel,
    /// Spending limits (capped by the parent's; `None` inherits the parent's).
    pub budget: Option<agentd_proto::Budget>,
    /// Scheduling priority (`None` inherits the parent's).
    pub priority: Option<agentd_proto::Priority>,
    /// Agents it depends on (`docs/lifecycle.md#dependencies`).
    pub depends_on: Vec<String>,
    /// What it does when a dependency fails (`None`: `limits.on_dependency_failure`).
    pub on_dependency_failure: Option<agentd_proto::OnDependencyFailure>,
    /// Model provider override (`None`: the type's, else the default).
    pub provider: Option<String>,
    /// Model name override (`None`: the type's, else the provider's default).
    pub model: Option<String>,
    /// Environment variables, over the parent's.
    pub env: std::collections::BTreeMap<String, String>,
    /// A root that is not foreground (a job no person or service talks to): it gets no
    /// management tools. For a sub-agent the channel says it (`Channel::Spawn::background`).
    pub background: bool,
}

/// Create an agent (and deliver its first message).
#[derive(Message, Debug)]
#[rtype(result = "Result<AgentRecord, AgentdError>")]
pub struct Spawn(pub SpawnSpec);

/// Get the live actor of an agent, loading it from the store if needed (re-opening a closed
/// agent).
#[derive(Message, Debug)]
#[rtype(result = "Result<SharedAgentAddr, AgentdError>")]
pub struct Activate(pub String);

/// The ParentRouter of a parent (created with its first child).
#[derive(Message, Debug)]
#[rtype(result = "Addr<ParentRouter>")]
pub struct ParentRouterFor(pub String);

/// A lifecycle control through the supervisor (cascades where the design says so).
#[derive(Message, Debug)]
#[rtype(result = "Result<Option<AgentRecord>, AgentdError>")]
pub struct Lifecycle {
    /// Target agent.
    pub agent_id: String,
    /// The control.
    pub control: Control,
}

/// An agent actor stopped.
#[derive(Message, Debug)]
#[rtype(result = "()")]
pub struct AgentStopped(pub String);

/// Stop every agent (persisting their state) and the arbiters.
#[derive(Message, Debug)]
#[rtype(result = "()")]
pub struct Shutdown;

/// Stops the live agents this process no longer owns (a partition lease was lost or given
/// up); their durable inboxes stay for the new owner. Answers how many were stopped.
#[derive(Message)]
#[rtype(result = "usize")]
pub struct Passivate(pub Box<dyn Fn(&str) -> bool + Send>);

/// Pause every live agent of a tree: its root's budget is spent (`limit` names which part).
#[derive(Message, Debug)]
#[rtype(result = "()")]
pub struct PauseTree {
    /// The tree's root.
    pub root_id: String,
    /// Which limit (`tree tokens`, `tree cost`, `tree deadline`).
    pub limit: String,
}

/// Agent `agent_id` settled what its dependents (`depends_on`) wait for: each is told
/// `outcome`, wherever it lives.
#[derive(Message, Debug)]
#[rtype(result = "()")]
pub struct TellDependents {
    /// The dependency.
    pub agent_id: String,
    /// How it settled.
    pub outcome: agentd_proto::DependencyOutcome,
}
