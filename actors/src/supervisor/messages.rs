//! The messages the [`Supervisor`](super::Supervisor) handles.

use super::directory::{SharedAgentAddr, SharedRouterAddr};
use actix::prelude::*;
use agentd_proto::{AgentRecord, AgentdError, Control};

/// Get the live actor of an agent, loading it from the store if needed (re-opening a closed
/// agent).
#[derive(Message, Debug)]
#[rtype(result = "Result<SharedAgentAddr, AgentdError>")]
pub struct Activate(pub String);

/// The ParentRouter of a parent (created with its first child).
#[derive(Message, Debug)]
#[rtype(result = "SharedRouterAddr")]
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
