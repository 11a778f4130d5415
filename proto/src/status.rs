//! The agent status and its single transition table. Every status change in agentd goes through
//! [`AgentStatus::can_become`], so an impossible change is refused (`invalid_transition`) and
//! changes nothing.

use serde::{Deserialize, Serialize};
use std::fmt;

/// Where an agent is in its life (design: "Agent status").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum AgentStatus {
    /// Created, or a turn ended with nothing queued.
    Idle,
    /// Work arrived but the concurrency limit is full.
    Queued,
    /// A turn is in progress.
    Running,
    /// A person must approve before the agent goes on: a tool call behind an approval gate,
    /// or a yield whose type asks for review.
    WaitingReview,
    /// A tool call answered by another service is pending; holds no running-turn slot.
    WaitingTool,
    /// Waiting on a dependency (marker or `depends_on`).
    WaitingDependency,
    /// Waiting on an answer to a user question.
    WaitingQuestion,
    /// Waiting until a provider rate limit resets.
    WaitingRateLimit,
    /// Paused by a control or a budget.
    Paused,
    /// Yielded (and accepted, if reviewed).
    Completed,
    /// An error, a panic, or retries exhausted.
    Failed,
    /// Stopped gracefully by a cancel control.
    Cancelled,
    /// Stopped at once by a terminate control.
    Terminated,
    /// Actor freed, history kept; a follow-up re-opens it.
    Closed,
}

use AgentStatus::*;

impl AgentStatus {
    /// All statuses, in table order (for metrics and docs).
    pub const ALL: [AgentStatus; 14] = [
        Idle,
        Queued,
        Running,
        WaitingReview,
        WaitingTool,
        WaitingDependency,
        WaitingQuestion,
        WaitingRateLimit,
        Paused,
        Completed,
        Failed,
        Cancelled,
        Terminated,
        Closed,
    ];

    /// The stable wire name, e.g. `"waiting_rate_limit"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Idle => "idle",
            Queued => "queued",
            Running => "running",
            WaitingReview => "waiting_review",
            WaitingTool => "waiting_tool",
            WaitingDependency => "waiting_dependency",
            WaitingQuestion => "waiting_question",
            WaitingRateLimit => "waiting_rate_limit",
            Paused => "paused",
            Completed => "completed",
            Failed => "failed",
            Cancelled => "cancelled",
            Terminated => "terminated",
            Closed => "closed",
        }
    }

    /// Whether the table allows `self → next`. A status never "changes" to itself.
    pub fn can_become(self, next: AgentStatus) -> bool {
        let allowed: &[AgentStatus] = match self {
            Idle => &[
                Running,
                Queued,
                WaitingDependency,
                Paused,
                Closed,
                Cancelled,
                Terminated,
            ],
            Queued => &[Running, Idle, Paused, Closed, Cancelled, Terminated],
            Running => &[
                Idle,
                Queued,
                WaitingReview,
                WaitingTool,
                WaitingDependency,
                WaitingQuestion,
                WaitingRateLimit,
                Paused,
                Completed,
                Failed,
                Cancelled,
                Terminated,
            ],
            // A review decided while other service calls of the step still wait hands the
            // wait over to them.
            WaitingReview => &[
                Completed,
                Running,
                Queued,
                WaitingTool,
                Paused,
                Closed,
                Cancelled,
                Terminated,
            ],
            WaitingTool => &[Running, Queued, Paused, Closed, Cancelled, Terminated],
            WaitingDependency | WaitingQuestion | WaitingRateLimit => &[
                Running, Idle, Queued, Paused, Failed, Closed, Cancelled, Terminated,
            ],
            Paused => &[
                Running,
                Idle,
                Queued,
                WaitingReview,
                WaitingTool,
                WaitingDependency,
                WaitingQuestion,
                WaitingRateLimit,
                Completed,
                Failed,
                Closed,
                Cancelled,
                Terminated,
            ],
            Completed | Failed => &[Running, Queued, Closed, Cancelled, Terminated],
            Cancelled | Terminated => &[Running, Queued, Closed],
            Closed => &[Idle],
        };
        allowed.contains(&next)
    }

    /// Whether the agent's task is over (nothing runs until a follow-up re-opens it).
    pub fn is_terminal(self) -> bool {
        matches!(self, Completed | Failed | Cancelled | Terminated | Closed)
    }

    /// Whether the agent counts as an active task for `check_status` (seed 000): its thread
    /// is open and its task not over.
    pub fn is_active(self) -> bool {
        !self.is_terminal()
    }

    /// Whether new inbox items may start a turn right away (paused and waiting agents hold
    /// them; neither `waiting_review` nor `waiting_tool` starts one: it queues until the wait
    /// ends).
    pub fn accepts_turns(self) -> bool {
        matches!(
            self,
            Idle | Queued | Completed | Failed | Cancelled | Terminated
        )
    }
}

impl fmt::Display for AgentStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_status_becomes_itself() {
        for s in AgentStatus::ALL {
            assert!(!s.can_become(s), "{s} -> {s}");
        }
    }

    #[test]
    fn closed_only_reopens_to_idle() {
        for s in AgentStatus::ALL {
            assert_eq!(Closed.can_become(s), s == Idle, "closed -> {s}");
        }
    }

    #[test]
    fn lifecycle_of_the_seed_is_allowed() {
        assert!(Idle.can_become(Running));
        assert!(Running.can_become(WaitingDependency));
        assert!(WaitingDependency.can_become(Running));
        assert!(Running.can_become(Completed));
        assert!(Running.can_become(Paused));
        assert!(Paused.can_become(Running));
        assert!(Running.can_become(Failed));
        assert!(!Completed.can_become(Idle));
    }
}
