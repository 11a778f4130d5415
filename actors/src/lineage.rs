//! Who an agent may act on: itself and its descendants (seed 003's "control only from
//! ancestors"). Read from the store, so it holds for agents of any process.

use crate::deps::Deps;
use agentd_proto::{AgentdError, ErrorCode};

/// Checks that `target` is `caller` or one of its descendants (`not_ancestor` otherwise).
pub(crate) async fn require_descendant(
    deps: &Deps,
    caller: &str,
    target: &str,
) -> Result<(), AgentdError> {
    let mut current = deps
        .store
        .get_agent(target)
        .await?
        .ok_or_else(|| AgentdError::agent_not_found(target))?;
    for _ in 0..=64 {
        if current.id == caller {
            return Ok(());
        }
        let Some(parent) = current.parent_id.clone() else {
            break;
        };
        match deps.store.get_agent(&parent).await? {
            Some(p) => current = p,
            None => break,
        }
    }
    Err(AgentdError::new(
        ErrorCode::NotAncestor,
        format!("agent `{target}` is not a descendant of `{caller}`"),
    ))
}
