//! [`Spawn`]: create an agent. Sent to the supervisor by the API facade, a parent router (a
//! Manage worker) and the `spawn_agent` tool alike.

use actix::prelude::*;
use agentd_proto::{AgentRecord, AgentdError, Channel};

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
    /// The trace context of the request or tool call that spawns it: its first turn is a
    /// child of that span.
    pub trace: Option<agentd_proto::TraceContext>,
}

/// Create an agent (and deliver its first message).
#[derive(Message, Debug)]
#[rtype(result = "Result<Spawned, AgentdError>")]
pub struct Spawn(pub SpawnSpec);

/// An agent just created, and its first message on its way.
pub struct Spawned {
    /// The new agent's record.
    pub record: AgentRecord,
    /// Answers once the first message (the spec's prompt) is in the agent's durable inbox,
    /// here or in the process that owns it; `None` without a prompt. The message is on its
    /// way whether or not this is awaited: a caller that acknowledges the spawn to someone
    /// (a `201`) awaits it first, so that an acknowledged spawn cannot lose its prompt.
    pub first_message: Option<FirstMessage>,
}

/// See [`Spawned::first_message`].
pub type FirstMessage =
    std::pin::Pin<Box<dyn std::future::Future<Output = Result<bool, AgentdError>> + Send>>;
