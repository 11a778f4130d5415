//! Roots named from outside: an outside id (the store's `ExternalIds`: an A2A client's own
//! `contextId`, an MCP thread alias) that names a root of one agent type — found, or opened on
//! first use: a new root of the type, mapped to the id, so every process finds it, across
//! restarts, until the root is deleted. Every door that lets its caller name a conversation
//! goes through here; the door chooses the key (its door name, tenant, owner, the id) and says
//! its own errors.

use agentd_actors::{AgentSystem, ExternalClaim, ExternalKey, Retention, StoreError};
use agentd_proto::{AgentRecord, AgentdError, Control, SpawnRequest};

/// Why a named root could not be found or opened.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// The store failed.
    #[error("the store failed: {0}")]
    Store(#[from] StoreError),
    /// Spawning the root was refused.
    #[error("{0}")]
    Spawn(#[source] AgentdError),
    /// The id maps to an agent that is not a root of the type.
    #[error("the id names no root of this agent type")]
    NotARoot,
}

/// Whether `rec` is a root of `agent_type`.
pub fn is_root_of(rec: &AgentRecord, agent_type: &str) -> bool {
    *rec.agent_type == *agent_type && rec.parent_id.is_none()
}

/// The root of `agent_type` outside id `key` names, if it was opened and the root exists.
pub async fn find(
    system: &AgentSystem,
    key: &ExternalKey,
    agent_type: &str,
) -> Result<Option<String>, StoreError> {
    let store = &system.deps().store;
    let Some(mapped) = store.external_id_get(key).await? else {
        return Ok(None);
    };
    let rec = store.get_agent(&mapped.agent_id).await?;
    Ok(rec
        .filter(|r| is_root_of(r, agent_type))
        .map(|_| mapped.agent_id))
}

/// The root of `agent_type` outside id `key` names, opened (a new root, mapped) if there is
/// none. Of two calls opening one id at once, one root wins and the other is deleted.
pub async fn find_or_open(
    system: &AgentSystem,
    key: &ExternalKey,
    agent_type: &str,
) -> Result<String, OpenError> {
    let store = &system.deps().store;
    if let Some(mapped) = store.external_id_get(key).await? {
        match store.get_agent(&mapped.agent_id).await? {
            Some(rec) if is_root_of(&rec, agent_type) => return Ok(mapped.agent_id),
            Some(_) => return Err(OpenError::NotARoot),
            // Mapped to an agent that is no more (its deletion was cut off): mapped afresh.
            None => store.external_id_release(key, &mapped).await?,
        }
    }
    let rec = system
        .spawn(SpawnRequest {
            agent_type: Some(agent_type.to_string()),
            ..SpawnRequest::default()
        })
        .await
        .map_err(OpenError::Spawn)?;
    let first = store
        .external_id_claim(key, &ExternalClaim::settled(&rec.id), Retention::WithAgent)
        .await?;
    let won = first.map_or_else(|| rec.id.clone(), |first| first.agent_id);
    if won != rec.id {
        // Another call opened it first: that root is the one, this one goes.
        if let Err(e) = system.control(&rec.id, Control::Delete).await {
            tracing::warn!(agent_id = %rec.id, error = %e, "deleting a named root opened twice");
        }
    }
    Ok(won)
}
