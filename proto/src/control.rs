//! Lifecycle controls. They bypass the inbox queue: a pause must not wait behind the work it
//! pauses.

use serde::{Deserialize, Serialize};

/// A lifecycle control for one agent (and, for cancel/close/delete, its descendants).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Control {
    /// Hold new turns; the running turn is aborted and kept as interrupted.
    Pause,
    /// Continue after a pause.
    Resume,
    /// Stop gracefully: abort the turn, drop queued work, status `cancelled`.
    Cancel,
    /// Stop at once: status `terminated`.
    Terminate,
    /// Free the actor, keep the history.
    Close,
    /// Remove the actor and its history.
    Delete,
}

impl Control {
    /// The wire name, e.g. `"pause"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Control::Pause => "pause",
            Control::Resume => "resume",
            Control::Cancel => "cancel",
            Control::Terminate => "terminate",
            Control::Close => "close",
            Control::Delete => "delete",
        }
    }
}
