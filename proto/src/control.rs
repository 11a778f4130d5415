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

/// What cancelling one inbox item of an agent did (`cancel_item`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum ItemCancel {
    /// It was queued: taken out without a turn.
    Dropped,
    /// Its turn ran (or waited for tools, or was paused mid-way): interrupted, its item done.
    Interrupted,
    /// The agent holds no such item (done already, or never queued).
    NotHeld,
}

impl ItemCancel {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            ItemCancel::Dropped => "dropped",
            ItemCancel::Interrupted => "interrupted",
            ItemCancel::NotHeld => "not_held",
        }
    }
}
