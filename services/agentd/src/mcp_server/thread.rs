//! Threads: the name a caller gives a persistent conversation (`thread`), mapped to a root
//! agent of the tool's type through the store's outside ids (door `mcp/<type>`, tenant and
//! owner empty until agentd has tenants; `crate::named_roots`), so every process finds it,
//! across restarts, until the root is deleted. The first call naming a thread opens it.

use super::error::McpServerError;
use crate::named_roots::{self, OpenError};
use agentd_actors::{AgentSystem, ExternalKey};
use agentd_proto::{AgentRecord, SpawnRequest};

/// The door of the threads of agent type `agent_type`.
pub fn door(agent_type: &str) -> String {
    format!("mcp/{agent_type}")
}

/// The key of thread `alias` of agent type `agent_type`: the threads of each exposed type are
/// apart.
fn key(agent_type: &str, alias: &str) -> ExternalKey {
    ExternalKey::new(door(agent_type), alias)
}

/// The root agent thread `alias` of `agent_type` names, if it was opened.
pub async fn find(
    system: &AgentSystem,
    agent_type: &str,
    alias: &str,
) -> Result<Option<String>, McpServerError> {
    named_roots::find(system, &key(agent_type, alias), agent_type)
        .await
        .map_err(McpServerError::store)
}

/// The root agent thread `alias` of `agent_type` names, opened (a new root, mapped) if there
/// is none. Of two calls opening one thread at once, one root wins and the other is deleted.
pub async fn find_or_open(
    system: &AgentSystem,
    agent_type: &str,
    alias: &str,
) -> Result<String, McpServerError> {
    named_roots::find_or_open(system, &key(agent_type, alias), agent_type)
        .await
        .map_err(|e| match e {
            OpenError::Store(e) => McpServerError::store(e),
            OpenError::Spawn(e) => McpServerError::Refused(e.to_string()),
            OpenError::NotARoot => McpServerError::Internal(format!(
                "thread `{alias}` maps to an agent that is not a root of `{agent_type}`"
            )),
        })
}

/// A new root of `agent_type` (a fresh conversation).
pub async fn spawn_root(
    system: &AgentSystem,
    agent_type: &str,
) -> Result<AgentRecord, McpServerError> {
    system
        .spawn(SpawnRequest {
            agent_type: Some(agent_type.to_string()),
            ..SpawnRequest::default()
        })
        .await
        .map_err(|e| McpServerError::Refused(e.to_string()))
}
