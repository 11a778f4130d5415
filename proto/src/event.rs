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
    /// News for an agent that waits for `agent_id` (spawn `depends_on`): that dependency is
    /// met or failed. Routed to each dependent, through its partition, like a message; not
    /// published to observers (the dependent's own status change is).
    DependencySettled {
        /// The dependency.
        agent_id: String,
        /// How it settled.
        outcome: DependencyOutcome,
    },
    /// A checkpoint of an agent was saved.
    Checkpointed {
        /// The agent.
        agent_id: String,
        /// The checkpoint.
        checkpoint_id: uuid::Uuid,
        /// Why it was taken.
        reason: crate::checkpoint_reason::CheckpointReason,
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
    /// An agent's thread was compacted: its older entries became a summary (seed 003's
    /// compaction log). Published once the compacted thread is stored.
    ContextCompacted {
        /// The agent.
        agent_id: String,
        /// The estimated input of a call made from the thread before, in tokens.
        estimated_tokens: u64,
        /// The provider's context window, in tokens (0: it states none).
        context_tokens: u64,
        /// Who asked for it.
        #[serde(default)]
        trigger: CompactionTrigger,
        /// The thread's entries before.
        #[serde(default)]
        entries_before: u64,
        /// The thread's entries after (the summary and the recent entries kept).
        #[serde(default)]
        entries_after: u64,
        /// The estimated input of a call made from the thread after, in tokens.
        #[serde(default)]
        estimated_tokens_after: u64,
        /// The checkpoint (reason `compact`) holding the whole thread before, taken when the
        /// compaction was asked for: the dropped history can be read and restored from it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        checkpoint_id: Option<uuid::Uuid>,
    },
    /// Text of an answer the model is still streaming, as it arrives (coalesced to about ten
    /// events a second per agent). Observational: the step's thread entry, written when the
    /// answer is complete, is the record; a client joins the pieces of one step in `seq` order.
    TextDelta {
        /// The agent.
        agent_id: String,
        /// The id the step's assistant entry will have.
        step_id: uuid::Uuid,
        /// Position of this piece within the step, from 0.
        seq: u64,
        /// The text that arrived since the previous piece.
        text: String,
    },
    /// An agent's turn called a tool that runs outside agentd (a service or a webhook). The
    /// arguments are not in the event (they stay out of logs and event streams).
    ToolCallRequested {
        /// The agent.
        agent_id: String,
        /// agentd's id of the call.
        call_id: uuid::Uuid,
        /// The tool.
        tool: String,
        /// `service` or `http`.
        kind: crate::tool_call::ToolKind,
    },
    /// A person approved or rejected a call that waited for approval (a gated tool's, or a
    /// reviewed yield): whoever shows the waiting calls learns that this one no longer waits,
    /// also when its agent still waits for another.
    ToolCallDecided {
        /// The agent.
        agent_id: String,
        /// agentd's id of the call.
        call_id: uuid::Uuid,
        /// The tool.
        tool: String,
        /// The decision.
        decision: crate::tool_call::ApprovalDecision,
    },
    /// Such a call has its result.
    ToolCallFinished {
        /// The agent.
        agent_id: String,
        /// agentd's id of the call.
        call_id: uuid::Uuid,
        /// The tool.
        tool: String,
        /// `service` or `http`.
        kind: crate::tool_call::ToolKind,
        /// From request to result, ms.
        duration_ms: u64,
        /// Whether the result is a value (not an error).
        ok: bool,
        /// `ok`, `error`, `timed_out`, `cancelled` or `rejected`.
        outcome: String,
    },
}

/// Who asked for a compaction.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CompactionTrigger {
    /// The runtime, before a model call whose input would not have left the provider room
    /// for the answer.
    #[default]
    ContextWindow,
    /// A compact item in the agent's inbox: `agent_compact`, `POST …/compact`, the `compact`
    /// command.
    Requested,
}

/// How a dependency (spawn `depends_on`) settled for the agents that wait for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DependencyOutcome {
    /// Met: a sub-agent yielded (`completed`); a root or a Manage worker handled everything
    /// that was queued for it when the dependent was spawned, or was closed.
    Met,
    /// It failed.
    Failed,
    /// It was cancelled.
    Cancelled,
    /// It was terminated.
    Terminated,
    /// It was deleted: its dependents fail, whatever `on_dependency_failure` says.
    Deleted,
}

impl DependencyOutcome {
    /// The wire name (`met`, `failed`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            DependencyOutcome::Met => "met",
            DependencyOutcome::Failed => "failed",
            DependencyOutcome::Cancelled => "cancelled",
            DependencyOutcome::Terminated => "terminated",
            DependencyOutcome::Deleted => "deleted",
        }
    }

    /// The failure a dependency in `status` stands for (`failed`, `cancelled`, `terminated`).
    pub fn failure_of(status: AgentStatus) -> Option<Self> {
        match status {
            AgentStatus::Failed => Some(DependencyOutcome::Failed),
            AgentStatus::Cancelled => Some(DependencyOutcome::Cancelled),
            AgentStatus::Terminated => Some(DependencyOutcome::Terminated),
            _ => None,
        }
    }
}

impl std::fmt::Display for DependencyOutcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What an agent does when one of its dependencies (spawn `depends_on`) fails, is cancelled or
/// terminated: chosen per spawn, or `limits.on_dependency_failure` when the spawn does not say.
/// A deleted dependency fails its dependents whatever this says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum OnDependencyFailure {
    /// The dependent fails too (`dependency_failed: <id> <how>`), its queued work dropped.
    Fail,
    /// The dependent waits until that dependency is met after all.
    Hold,
}

impl Event {
    /// The event's type as it is tagged on the wire (`"status_changed"`, …), without
    /// serialising it (the Redis event stream carries it as a field for filtering).
    pub fn kind(&self) -> &'static str {
        match self {
            Event::Spawned { .. } => "spawned",
            Event::StatusChanged { .. } => "status_changed",
            Event::Yielded { .. } => "yielded",
            Event::Forwarded { .. } => "forwarded",
            Event::TokenUsage { .. } => "token_usage",
            Event::DeliveryFailed { .. } => "delivery_failed",
            Event::TurnFailed { .. } => "turn_failed",
            Event::Marker { .. } => "marker",
            Event::MarkerMalformed { .. } => "marker_malformed",
            Event::RateLimited { .. } => "rate_limited",
            Event::BudgetExceeded { .. } => "budget_exceeded",
            Event::Deleted { .. } => "deleted",
            Event::DependencySettled { .. } => "dependency_settled",
            Event::Checkpointed { .. } => "checkpointed",
            Event::Restored { .. } => "restored",
            Event::ContextCompacted { .. } => "context_compacted",
            Event::TextDelta { .. } => "text_delta",
            Event::ToolCallRequested { .. } => "tool_call_requested",
            Event::ToolCallFinished { .. } => "tool_call_finished",
            Event::ToolCallDecided { .. } => "tool_call_decided",
        }
    }

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
            | Event::ContextCompacted { agent_id, .. }
            | Event::TextDelta { agent_id, .. }
            | Event::ToolCallRequested { agent_id, .. }
            | Event::ToolCallFinished { agent_id, .. }
            | Event::ToolCallDecided { agent_id, .. }
            | Event::DependencySettled { agent_id, .. }
            | Event::Deleted { agent_id } => agent_id,
            Event::Forwarded { parent_id, .. } => parent_id,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kind_is_the_serde_tag_of_every_variant() {
        let a = || "a".to_string();
        let id = uuid::Uuid::nil();
        let events = [
            Event::Spawned {
                agent_id: a(),
                parent_id: None,
                agent_type: a(),
                title: a(),
            },
            Event::StatusChanged {
                agent_id: a(),
                from: AgentStatus::Idle,
                to: AgentStatus::Running,
                reason: None,
            },
            Event::Yielded {
                agent_id: a(),
                parent_id: a(),
                result: serde_json::Value::Null,
            },
            Event::Forwarded {
                parent_id: a(),
                child_id: a(),
                text: a(),
            },
            Event::TokenUsage {
                agent_id: a(),
                usage: Usage::default(),
                cost_usd: 0.0,
            },
            Event::DeliveryFailed {
                agent_id: a(),
                code: ErrorCode::Internal,
                message: a(),
            },
            Event::TurnFailed {
                agent_id: a(),
                message: a(),
            },
            Event::Marker {
                agent_id: a(),
                marker: crate::markers::Marker::PhaseComplete { phase: 1 },
            },
            Event::MarkerMalformed {
                agent_id: a(),
                problem: a(),
            },
            Event::RateLimited {
                agent_id: a(),
                resume_at_ms: 1,
            },
            Event::BudgetExceeded {
                agent_id: a(),
                limit: a(),
            },
            Event::Deleted { agent_id: a() },
            Event::DependencySettled {
                agent_id: a(),
                outcome: DependencyOutcome::Cancelled,
            },
            Event::Checkpointed {
                agent_id: a(),
                checkpoint_id: id,
                reason: crate::checkpoint_reason::CheckpointReason::Manual,
                trigger: a(),
            },
            Event::Restored {
                agent_id: a(),
                checkpoint_id: id,
            },
            Event::ContextCompacted {
                agent_id: a(),
                estimated_tokens: 1,
                context_tokens: 1,
                trigger: CompactionTrigger::Requested,
                entries_before: 2,
                entries_after: 1,
                estimated_tokens_after: 1,
                checkpoint_id: Some(id),
            },
            Event::TextDelta {
                agent_id: a(),
                step_id: id,
                seq: 0,
                text: a(),
            },
            Event::ToolCallRequested {
                agent_id: a(),
                call_id: id,
                tool: a(),
                kind: crate::tool_call::ToolKind::Service,
            },
            Event::ToolCallDecided {
                agent_id: a(),
                call_id: id,
                tool: a(),
                decision: crate::tool_call::ApprovalDecision::Approved,
            },
            Event::ToolCallFinished {
                agent_id: a(),
                call_id: id,
                tool: a(),
                kind: crate::tool_call::ToolKind::Http,
                duration_ms: 1,
                ok: true,
                outcome: a(),
            },
        ];
        for e in &events {
            let tag = serde_json::to_value(e)
                .ok()
                .and_then(|v| v["type"].as_str().map(str::to_string));
            assert_eq!(tag.as_deref(), Some(e.kind()), "{e:?}");
        }
    }
}
