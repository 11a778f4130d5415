//! Events: what agentd tells observers (the event stream, SSE, tests). Every status transition
//! is one event.

use crate::error::ErrorCode;
use crate::status::AgentStatus;
use crate::usage::Usage;
use serde::{Deserialize, Serialize};

/// Something that happened to an agent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Event {
    /// An agent was created.
    Spawned {
        /// The new agent.
        agent_id: String,
        /// Its parent, if any.
        parent_id: Option<String>,
        /// Its type.
        agent_type: String,
        /// Its title.
        title: String,
    },
    /// An agent's status changed.
    StatusChanged {
        /// The agent.
        agent_id: String,
        /// Old status.
        from: AgentStatus,
        /// New status.
        to: AgentStatus,
        /// Why, if said.
        reason: Option<String>,
    },
    /// A sub-agent yielded its result.
    Yielded {
        /// The sub-agent.
        agent_id: String,
        /// Its parent.
        parent_id: String,
        /// The result.
        result: serde_json::Value,
    },
    /// A child's output was forwarded onto its parent's thread.
    Forwarded {
        /// The parent.
        parent_id: String,
        /// The child.
        child_id: String,
        /// The forwarded text, prefix included.
        text: String,
    },
    /// A model call used tokens.
    TokenUsage {
        /// The agent.
        agent_id: String,
        /// Tokens of this call.
        usage: Usage,
        /// Cost of this call in USD.
        cost_usd: f64,
    },
    /// A child's output could not be delivered (e.g. `manage_missing_parent`).
    DeliveryFailed {
        /// The child whose output was not delivered.
        agent_id: String,
        /// Why.
        code: ErrorCode,
        /// Details.
        message: String,
    },
    /// A turn ended with an error or panic.
    TurnFailed {
        /// The agent.
        agent_id: String,
        /// The error.
        message: String,
    },
    /// A protocol marker was found in an agent's output.
    Marker {
        /// The agent.
        agent_id: String,
        /// The marker.
        marker: crate::markers::Marker,
    },
    /// An agent's output had a malformed or unclosed marker.
    MarkerMalformed {
        /// The agent.
        agent_id: String,
        /// What is wrong.
        problem: String,
    },
    /// A provider rate limit stopped the agent; it resumes by itself at `resume_at_ms`.
    RateLimited {
        /// The agent.
        agent_id: String,
        /// When it resumes, ms since the epoch.
        resume_at_ms: u64,
    },
    /// An agent went over its budget and was paused.
    BudgetExceeded {
        /// The agent.
        agent_id: String,
        /// Which limit (`tokens`, `cost`, `deadline`).
        limit: String,
    },
    /// An agent was deleted with its history.
    Deleted {
        /// The agent.
        agent_id: String,
    },
    /// A checkpoint of an agent was saved.
    Checkpointed {
        /// The agent.
        agent_id: String,
        /// The checkpoint.
        checkpoint_id: uuid::Uuid,
        /// Why it was taken.
        reason: crate::checkpoint::CheckpointReason,
        /// What triggered it.
        trigger: String,
    },
    /// An agent was brought back to one of its checkpoints.
    Restored {
        /// The agent.
        agent_id: String,
        /// The checkpoint.
        checkpoint_id: uuid::Uuid,
    },
}

impl Event {
    /// The agent an event is about (the parent for forwards).
    pub fn agent_id(&self) -> &str {
        match self {
            Event::Spawned { agent_id, .. }
            | Event::StatusChanged { agent_id, .. }
            | Event::Yielded { agent_id, .. }
            | Event::TokenUsage { agent_id, .. }
            | Event::DeliveryFailed { agent_id, .. }
            | Event::TurnFailed { agent_id, .. }
            | Event::Marker { agent_id, .. }
            | Event::MarkerMalformed { agent_id, .. }
            | Event::RateLimited { agent_id, .. }
            | Event::BudgetExceeded { agent_id, .. }
            | Event::Checkpointed { agent_id, .. }
            | Event::Restored { agent_id, .. }
            | Event::Deleted { agent_id } => agent_id,
            Event::Forwarded { parent_id, .. } => parent_id,
        }
    }
}
