//! Inbox items: what an agent handles, one at a time, in arrival order (seed 003's
//! `AgentInboxItem`).

use crate::thread::Role;
use serde::{Deserialize, Serialize};

fn user() -> Role {
    Role::User
}

/// One unit of work for an agent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum InboxItem {
    /// Text for the agent; starts a turn.
    Message {
        /// The text.
        text: String,
        /// Abort the running turn (its partial output is kept, marked interrupted) and handle
        /// this next.
        #[serde(default)]
        interrupt: bool,
        /// Handle before items already queued, without aborting the running turn (used for
        /// results coming back from sub-agents, seeds 002/004).
        #[serde(default)]
        urgent: bool,
        /// Role the text is stored with: `user` (default), or `assistant` for worker replies
        /// forwarded through Manage (seed 000).
        #[serde(default = "user")]
        role: Role,
        /// The sub-agent this text was forwarded from, if it was.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        from_agent: Option<String>,
        /// A worker's answer forwarded to a parent whose type relays forwards
        /// (`manage.async_forward = "relay"`): kept on the thread without a model turn.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        relay: bool,
    },
    /// Clear the session, optionally seeding it with `message` (seed 003).
    Reset {
        /// First message of the fresh session.
        #[serde(default)]
        message: Option<String>,
    },
    /// Replace old history with a model-written summary, keeping recent turns (seed 003).
    Compact,
    /// A sub-agent's final result for its parent (seed 002).
    Yield {
        /// Text or JSON.
        result: serde_json::Value,
    },
    /// Put in a root's or a Manage worker's inbox when an agent that depends on it
    /// (`depends_on`) is spawned while it still has work: once the agent reaches it, in order
    /// and without a turn, it has handled everything that was queued before, and `dependent`
    /// is told its dependency is met.
    Watch {
        /// The agent that waits.
        dependent: String,
    },
}

impl InboxItem {
    /// A plain message that neither interrupts nor jumps the queue.
    pub fn message(text: impl Into<String>) -> Self {
        Self::followup(text, false)
    }

    /// A user message that may interrupt the running turn (follow-ups, API sends).
    pub fn followup(text: impl Into<String>, interrupt: bool) -> Self {
        InboxItem::Message {
            text: text.into(),
            interrupt,
            urgent: false,
            role: Role::User,
            from_agent: None,
            relay: false,
        }
    }

    /// The item's wire name, for logs and metrics.
    pub fn kind(&self) -> &'static str {
        match self {
            InboxItem::Message { .. } => "message",
            InboxItem::Reset { .. } => "reset",
            InboxItem::Compact => "compact",
            InboxItem::Yield { .. } => "yield",
            InboxItem::Watch { .. } => "watch",
        }
    }
}
