//! Inbox items: what an agent handles, one at a time, in arrival order (seed 003's
//! `AgentInboxItem`).

use serde::{Deserialize, Serialize};

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
        /// The text is already on the thread (forwarded by a ParentRouter); only run a turn.
        #[serde(default)]
        on_thread: bool,
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
}

impl InboxItem {
    /// A plain message that neither interrupts nor jumps the queue.
    pub fn message(text: impl Into<String>) -> Self {
        InboxItem::Message {
            text: text.into(),
            interrupt: false,
            urgent: false,
            on_thread: false,
        }
    }

    /// The item's wire name, for logs and metrics.
    pub fn kind(&self) -> &'static str {
        match self {
            InboxItem::Message { .. } => "message",
            InboxItem::Reset { .. } => "reset",
            InboxItem::Compact => "compact",
            InboxItem::Yield { .. } => "yield",
        }
    }
}
