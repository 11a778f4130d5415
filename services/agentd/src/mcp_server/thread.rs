//! Threads: the name a caller gives a persistent conversation (`thread`), mapped to a root
//! agent of the tool's type through the store's outside ids (door `mcp/<type>`, tenant and
//! owner empty until agentd has tenants), so every process finds it, across restarts, until
//! the root is deleted. The first call naming a thread opens it.

use super::error::McpServerError;
use agentd_actors::{AgentSystem, ExternalClaim, ExternalKey, Retention};
use agentd_proto::{AgentRecord, Control, SpawnRequest};

/// The door of the threads of agent type `agent_type`.
pub fn door(agent_type: &str) -> String {
    format!("mcp/{agent_type}")
}

/// The key of thread `alias` of agent type `agent_type`: the threads of each exposed type are
/// apart.
fn key(agent_type: &str, alias: &str) -> ExternalKey {
    ExternalKey::new(door(agent_type), alias)
}

/// Whether `rec` is a root of `agent_type`.
fn is_root_of(rec: &AgentRecord, agent_type: &str) -> bool {
    *rec.agent_type == *agent_type && rec.parent_id.is_none()
}

/// The root agent thread `alias` of `agent_type` names, if it was opened.
pub async fn find(
    system: &AgentSystem,
    agent_type: &str,
    alias: &str,
) -> Result<Option<String>, McpServerError> {
    let store = &system.deps().store;
    let Some(mapped) = store
        .external_id_get(&key(agent_type, alias))
        .await
        .map_err(McpServerError::store)?
    else {
        return Ok(None);
    };
    let rec = store
        .get_agent(&mapped.agent_id)
        .await
        .map_err(McpServerError::store)?;
    Ok(rec
        .filter(|r| is_root_of(r, agent_type))
        .map(|_| mapped.agent_id))
}

/// The root agent thread `alias` of `agent_type` names, opened (a new root, mapped) if there
/// is none. Of two calls opening one thread at once, one root wins and the other is deleted.
pub async fn find_or_open(
    system: &AgentSystem,
    agent_type: &str,
    alias: &str,
) -> Result<String, McpServerError> {
    if let Some(agent) = find(system, agent_type, alias).await? {
        return Ok(agent);
    }
    let store = &system.deps().store;
    let key = key(agent_type, alias);
    if let Some(mapped) = store
        .external_id_get(&key)
        .await
        .map_err(McpServerError::store)?
    {
        match store
            .get_agent(&mapped.agent_id)
            .await
            .map_err(McpServerError::store)?
        {
            // Opened since the look above (by another call).
            Some(rec) if is_root_of(&rec, agent_type) => return Ok(mapped.agent_id),
            Some(_) => {
                return Err(McpServerError::Internal(format!(
                    "thread `{alias}` maps to an agent that is not a root of `{agent_type}`"
                )));
            }
            // Mapped to an agent that is no more (its deletion was cut off): mapped afresh.
            None => store
                .external_id_release(&key, &mapped)
                .await
                .map_err(McpServerError::store)?,
        }
    }
    let rec = spawn_root(system, agent_type).await?;
    let first = store
        .external_id_claim(&key, &ExternalClaim::settled(&rec.id), Retention::WithAgent)
        .await
        .map_err(McpServerError::store)?;
    let won = first.map_or_else(|| rec.id.clone(), |first| first.agent_id);
    if won != rec.id {
        // Another call opened the thread first: that root is the thread, this one goes.
        if let Err(e) = system.control(&rec.id, Control::Delete).await {
            tracing::warn!(agent_id = %rec.id, error = %e, "deleting the root of an MCP thread opened twice");
        }
    }
    Ok(won)
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
