//! Addresses name the two ends of an envelope, so routing needs no side tables.

use serde::{Deserialize, Serialize};

/// Who sends or receives an [`crate::Envelope`].
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Address {
    /// One agent (one session, one thread).
    Agent {
        /// The agent id.
        agent_id: String,
    },
    /// A service outside agentd, e.g. a client of the command stream or the HTTP API.
    External {
        /// Free-form name of the caller, for logs and replies.
        name: String,
    },
    /// agentd itself (the supervisor of a process).
    System,
}

impl Address {
    /// Shorthand for [`Address::Agent`].
    pub fn agent(agent_id: impl Into<String>) -> Self {
        Address::Agent {
            agent_id: agent_id.into(),
        }
    }

    /// The agent id if this address names an agent.
    pub fn agent_id(&self) -> Option<&str> {
        match self {
            Address::Agent { agent_id } => Some(agent_id),
            _ => None,
        }
    }
}
