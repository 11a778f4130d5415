//! The typed actix messages the actors exchange. Inbox items and lifecycle controls travel
//! inside [`Deliver`] envelopes or as [`ApplyControl`]; everything else is internal wiring.

use crate::agent::AgentActor;
use crate::parent_router::ParentRouter;
use actix::prelude::*;
use agentd_proto::{AgentRecord, AgentdError, Channel, Control, Envelope, ManageOptions};
use tokio::sync::oneshot;
use uuid::Uuid;

pub use crate::agent::messages::{
    Ack, AddUsage, ApplyControl, BudgetPause, Deliver, Delivery, DependencyDone, Provide, Restore,
    RestoreCheckpoint, Runtime, RuntimeState, SetBudget, SetEnv, Snapshot, StopAgent,
    TakeCheckpoint, answer,
};

/// A [`Delivery`] a stopping agent did not take, back to the router (with the refusing
/// actor), which routes it again.
#[derive(Message, Debug)]
#[rtype(result = "()")]
pub struct Refused(pub Delivery, pub actix::Addr<crate::agent::AgentActor>);

/// What a child produced for its parent (the wire type, re-exported).
pub use agentd_proto::Output;

/// A child's output on its way to the parent's [`ParentRouter`] (the thread "outbox").
#[derive(Message, Debug, Clone)]
#[rtype(result = "()")]
pub struct ChildOutput {
    /// The child's record (its channel says where the output goes), shared with the child.
    pub child: std::sync::Arc<AgentRecord>,
    /// What it produced.
    pub output: Output,
    /// Id of the thread entry (or envelope) that carries it; forwards derive their ids from it.
    pub cause: Uuid,
    /// Kept in the store's outbox ([`crate::ports::StoreWrite::Outbox`]) until the parent's
    /// router has handled it, which then lets it go.
    pub kept: bool,
}

/// Route an envelope to its receiver, activating a persisted agent if needed (fire and
/// forget: a failure is logged; [`crate::channel_router::RouteAcked`] answers).
#[derive(Message, Debug)]
#[rtype(result = "()")]
pub struct Route(pub Envelope);

/// A live agent's address as the supervisor and the router keep it: one shared copy (an
/// `Addr` clone allocates its own sender state; every idle agent would pay for two).
pub type SharedAgentAddr = std::sync::Arc<Addr<AgentActor>>;

/// Tell the router about a live agent (saves an activation hop).
#[derive(Message, Debug)]
#[rtype(result = "()")]
pub struct Register {
    /// Agent id (the supervisor's key, shared).
    pub agent_id: std::sync::Arc<str>,
    /// Its actor.
    pub addr: SharedAgentAddr,
}

/// Tell the router an agent's actor is gone.
#[derive(Message, Debug)]
#[rtype(result = "()")]
pub struct Forget(pub String);

/// What to create.
#[derive(Debug, Clone, Default)]
pub struct SpawnSpec {
    /// Id to use (Manage children get theirs from the alias table); `None` makes a new one.
    pub id: Option<String>,
    /// Parent record; `None` creates a foreground root.
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
    /// Agents that must complete first.
    pub depends_on: Vec<String>,
    /// Model provider override (`None`: the type's, else the default).
    pub provider: Option<String>,
    /// Model name override (`None`: the type's, else the provider's default).
    pub model: Option<String>,
    /// Environment variables, over the parent's.
    pub env: std::collections::BTreeMap<String, String>,
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

/// The live actor of an agent, if it is live.
#[derive(Message, Debug)]
#[rtype(result = "Option<Addr<AgentActor>>")]
pub struct Lookup(pub String);

/// How many agents are live in this process (operators see it in `/v1/info`).
#[derive(Message, Debug)]
#[rtype(result = "usize")]
pub struct LiveCount;

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

/// The outcome of a sync Manage wait.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WaitResult {
    /// `ok`, `failed` or `timeout`.
    pub status: &'static str,
    /// Assistant messages collected.
    pub messages: Vec<String>,
    /// The child's error, for `failed`.
    pub error: Option<String>,
}

/// What a Manage `send_message` did.
#[derive(Debug)]
pub struct Dispatched {
    /// The child agent (= child thread).
    pub child_id: String,
    /// Whether the child was created by this call.
    pub created: bool,
    /// In sync mode: the wait id and where the result arrives.
    pub wait: Option<(u64, oneshot::Receiver<WaitResult>)>,
}

/// Route a Manage message to a worker's child thread (get-or-create by alias).
#[derive(Message, Debug)]
#[rtype(result = "Result<Dispatched, AgentdError>")]
pub struct ManageSend {
    /// The parent (caller) record.
    pub parent: AgentRecord,
    /// Worker agent type name.
    pub worker_type: String,
    /// Trimmed worker title.
    pub worker_title: String,
    /// Thread alias.
    pub alias: String,
    /// The message.
    pub message: String,
    /// Options in force for this call.
    pub options: ManageOptions,
    /// The envelope/turn that caused this call.
    pub cause: Uuid,
}

/// Give up a sync wait; answers the messages collected so far, or `None` if it already ended.
#[derive(Message, Debug)]
#[rtype(result = "Option<Vec<String>>")]
pub struct CancelWait(pub u64);

/// Pause every live agent of a tree: its root's budget is spent (`limit` names which part).
#[derive(Message, Debug)]
#[rtype(result = "()")]
pub struct PauseTree {
    /// The tree's root.
    pub root_id: String,
    /// Which limit (`tree tokens`, `tree cost`, `tree deadline`).
    pub limit: String,
}

/// An agent reached `completed` (`ok`) or `failed`: its dependents may go on.
#[derive(Message, Debug)]
#[rtype(result = "()")]
pub struct Finished {
    /// The agent.
    pub agent_id: String,
    /// Completed (true) or failed (false).
    pub ok: bool,
}
