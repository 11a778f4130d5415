//! Why a checkpoint was taken: its own file, since events name it and a checkpoint holds
//! envelopes, which carry events.

use serde::{Deserialize, Serialize};
use std::fmt;

/// Why a checkpoint was taken (the seed's four reasons, a compaction and a fork).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum CheckpointReason {
    /// Taken by agentd on a pause, a phase completion or before a terminate.
    Auto,
    /// Taken when a provider rate limit stopped a turn.
    RateLimit,
    /// Asked for through the API, a Redis command or agentctl.
    Manual,
    /// Taken when a turn failed.
    Error,
    /// Taken before a compaction that was asked for replaced the older history with a
    /// summary: it holds the whole thread as it was.
    Compact,
    /// The first checkpoint of a fork: the conversation it was forked with, and (its trigger)
    /// the agent and the point it was forked from.
    Fork,
}

impl CheckpointReason {
    /// The stable wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            CheckpointReason::Auto => "auto",
            CheckpointReason::RateLimit => "rate_limit",
            CheckpointReason::Manual => "manual",
            CheckpointReason::Error => "error",
            CheckpointReason::Compact => "compact",
            CheckpointReason::Fork => "fork",
        }
    }
}

impl fmt::Display for CheckpointReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
