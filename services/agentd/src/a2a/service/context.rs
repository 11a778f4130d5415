//! The context a message or a `ListTasks` names by its `contextId`: one agentd opened (the
//! id of the root agent that is the context), or one the client chose — any string, as the
//! specification allows — which the first message naming it opens: a new root of the agent
//! type, mapped to that id in the store's outside ids (door `a2a/<type>`, no tenant or owner
//! yet; `crate::named_roots`), so every process finds it, across restarts, until the root is
//! deleted.

use crate::a2a::A2a;
use crate::a2a::error::A2aError;
use crate::named_roots::{self, OpenError};
use agentd_actors::ExternalKey;
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

/// The context agentd opened that `id` names (the id of a root of `agent_type`), if it is one.
async fn opened_by_agentd(
    a2a: &A2a,
    agent_type: &str,
    id: &str,
) -> Result<Option<Context>, A2aError> {
    if id.len() != 36 || Uuid::try_parse(id).is_err() {
        return Ok(None);
    }
    let rec = a2a
        .system
        .deps()
        .store
        .get_agent(id)
        .await
        .map_err(A2aError::store)?;
    Ok(rec
        .filter(|r| named_roots::is_root_of(r, agent_type))
        .map(|_| Context {
            agent: id.to_string(),
            client_id: None,
        }))
}

/// The context `id` names for `agent_type`, if there is one.
pub(super) async fn find(
    a2a: &A2a,
    agent_type: &str,
    id: &str,
) -> Result<Option<Context>, A2aError> {
    if let Some(c) = opened_by_agentd(a2a, agent_type, id).await? {
        return Ok(Some(c));
    }
    let agent = named_roots::find(&a2a.system, &key(agent_type, id), agent_type)
        .await
        .map_err(A2aError::store)?;
    Ok(agent.map(|agent| Context {
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
    if let Some(c) = opened_by_agentd(a2a, agent_type, id).await? {
        return Ok(c);
    }
    let agent = named_roots::find_or_open(&a2a.system, &key(agent_type, id), agent_type)
        .await
        .map_err(|e| match e {
            OpenError::Store(e) => A2aError::store(e),
            OpenError::Spawn(e) => A2aError::from(e),
            OpenError::NotARoot => A2aError::InvalidParams(format!(
                "contextId `{id}` names no context of agent `{agent_type}`"
            )),
        })?;
    Ok(Context {
        agent,
        client_id: Some(id.to_string()),
    })
}
