//! What a child produces for its parent (the thread "outbox"). It travels inside the process as
//! an actor message and between processes as `Item::Output` from the child to the parent.

use serde::{Deserialize, Serialize};

/// One piece of child output.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Output {
    /// An assistant message (Manage workers: each one; spawned sub-agents: a turn's last).
    Reply {
        /// The text.
        text: String,
    },
    /// The result of `yield_to_parent`.
    Yield {
        /// Text or JSON.
        result: serde_json::Value,
    },
    /// The child's turn failed.
    Failed {
        /// The error.
        error: String,
    },
}
