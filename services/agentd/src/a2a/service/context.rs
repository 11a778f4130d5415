//! The context a message or a `ListTasks` names by its `contextId`: one agentd opened (the
//! id of the root agent that is the context), or one the client chose — any string, as the
//! specification allows — which the first message naming it opens: a new root of the agent
//! type, mapped to that id in the store's outside ids (door `a2a/<type>`, no tenant or owner
//! yet), so every process finds it, across restarts, until the root is deleted.

use crate::a2a::A2a;
use crate::a2a::error::A2aError;
use agentd_actors::{ExternalClaim, ExternalKey, Retention};
use agentd_proto::{AgentRecord, Control, SpawnRequest};
use uuid::Uuid;

/// A context: its root agent, and the id its client chose for it.
pub(super) struct Context {
    /// The root agent.
    pub(super) agent: String,
    /// The `contextId` the client chose (`None`: the context is named by its agent's id).
    pub(super) client_id: Option<String>,
}

/// The key of client-chosen context `id` of the A2A agent `agent_type`: the contexts of each
/// exposed type are apart.
fn key(agent_type: &str, id: &str) -> ExternalKey {
    ExternalKey::new(format!("a2a/{agent_type}"), id)
}

fn store_err(e: impl std::fmt::Display) -> A2aError {
    A2aError::Internal(format!("the store failed: {e}"))
}

/// Whether `rec` is a context of `agent_type` (a root of that type).
fn is_context_of(rec: &AgentRecord, agent_type: &str) -> bool {
    *rec.agent_type == *agent_type && rec.parent_id.is_none()
}

/// The context `id` names for `agent_type`, if there is one.
pub(super) async fn find(
    a2a: &A2a,
    agent_type: &str,
    id: &str,
) -> Result<Option<Context>, A2aError> {
    let store = &a2a.system.deps().store;
    if id.len() == 36 && Uuid::try_parse(id).is_ok() {
        let rec = store.get_agent(id).await.map_err(store_err)?;
        if rec.is_some_and(|r| is_context_of(&r, agent_type)) {
            return Ok(Some(Context {
                agent: id.to_string(),
                client_id: None,
            }));
        }
    }
    let Some(agent) = store
        .external_id_get(&key(agent_type, id))
        .await
        .map_err(store_err)?
        .map(|mapped| mapped.agent_id)
    else {
        return Ok(None);
    };
    let rec = store.get_agent(&agent).await.map_err(store_err)?;
    Ok(rec
        .filter(|r| is_context_of(r, agent_type))
        .map(|_| Context {
            agent,
            client_id: Some(id.to_string()),
        }))
}

/// The context `id` names for `agent_type`, opened if there is none.
pub(super) async fn find_or_open(
    a2a: &A2a,
    agent_type: &str,
    id: &str,
) -> Result<Context, A2aError> {
    if let Some(c) = find(a2a, agent_type, id).await? {
        return Ok(c);
    }
    let system = &a2a.system;
    let store = &system.deps().store;
    let key = key(agent_type, id);
    if let Some(mapped) = store.external_id_get(&key).await.map_err(store_err)? {
        match store.get_agent(&mapped.agent_id).await.map_err(store_err)? {
            // Opened since the look above (by another request).
            Some(rec) if is_context_of(&rec, agent_type) => {
                return Ok(Context {
                    agent: mapped.agent_id,
                    client_id: Some(id.to_string()),
                });
            }
            Some(_) => {
                return Err(A2aError::InvalidParams(format!(
                    "contextId `{id}` names no context of agent `{agent_type}`"
                )));
            }
            // Mapped to an agent that is no more (its deletion was cut off): mapped afresh.
            None => store
                .external_id_release(&key, &mapped)
                .await
                .map_err(store_err)?,
        }
    }
    let rec = system
        .spawn(SpawnRequest {
            agent_type: Some(agent_type.to_string()),
            ..SpawnRequest::default()
        })
        .await
        .map_err(A2aError::from)?;
    let first = store
        .external_id_claim(&key, &ExternalClaim::settled(&rec.id), Retention::WithAgent)
        .await
        .map_err(store_err)?;
    let won = first.map_or_else(|| rec.id.clone(), |first| first.agent_id);
    if won != rec.id {
        // Another request opened the context first: that root is the context, this one goes.
        if let Err(e) = system.control(&rec.id, Control::Delete).await {
            tracing::warn!(agent_id = %rec.id, error = %e, "deleting the root of a context opened twice");
        }
    }
    Ok(Context {
        agent: won,
        client_id: Some(id.to_string()),
    })
}
