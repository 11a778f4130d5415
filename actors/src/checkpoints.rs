//! Taking and restoring checkpoints (seed 001). Capture reads what the store holds for an agent
//! (thread and durable inbox) plus its record; restore computes what the agent goes back to.
//! The actor applies both, so they are ordered with everything else the agent does.

use crate::deps::Deps;
use agentd_proto::ids::derived_id;
use agentd_proto::{
    AgentRecord, AgentdError, Checkpoint, CheckpointReason, Envelope, ErrorCode, Event, InboxItem,
    Item,
};
use uuid::Uuid;

/// Saves a checkpoint of `rec` as the store holds it now, prunes old ones (config
/// `checkpoints_keep`) and publishes [`Event::Checkpointed`].
pub async fn capture(
    deps: &Deps,
    rec: &AgentRecord,
    reason: CheckpointReason,
    trigger: &str,
) -> Result<Checkpoint, AgentdError> {
    let conversation = deps.store.thread(&rec.id).await?;
    let pending = deps.store.inbox_pending(&rec.id).await?;
    save(deps, rec, reason, trigger, conversation, pending).await
}

/// Saves the checkpoint a compaction asked for (`cause`: its inbox item) takes before it
/// replaces `conversation`, the whole thread it compacts. Its pending work leaves out the
/// compact item itself: restoring the checkpoint brings the history back instead of
/// compacting it again.
pub async fn capture_before_compaction(
    deps: &Deps,
    rec: &AgentRecord,
    conversation: Vec<agentd_proto::ThreadEntry>,
    cause: Uuid,
) -> Result<Checkpoint, AgentdError> {
    let mut pending = deps.store.inbox_pending(&rec.id).await?;
    pending.retain(|env| env.id != cause);
    let reason = CheckpointReason::Compact;
    save(deps, rec, reason, reason.as_str(), conversation, pending).await
}

async fn save(
    deps: &Deps,
    rec: &AgentRecord,
    reason: CheckpointReason,
    trigger: &str,
    conversation: Vec<agentd_proto::ThreadEntry>,
    pending: Vec<Envelope>,
) -> Result<Checkpoint, AgentdError> {
    let cp = Checkpoint {
        id: agentd_proto::ids::new_id(),
        agent_id: rec.id.clone(),
        reason,
        trigger: trigger.to_string(),
        created_at_ms: deps.clock.now_ms(),
        status: rec.status,
        phase: rec.phase,
        current_step: rec.current_step.clone(),
        progress: rec.progress,
        conversation,
        pending,
        environment: rec.env.clone(),
        usage: rec.usage,
        cost_usd: rec.cost_usd,
        turns: rec.turns,
        cli_session_id: rec.agent_cli.as_ref().and_then(|c| c.session_id.clone()),
    };
    deps.store
        .checkpoint_put(&cp, deps.config.checkpoints_keep)
        .await?;
    agentd_observe::metrics::global().inc(
        "agentd_checkpoints_total",
        "Checkpoints saved, by reason.",
        &[("reason", reason.as_str())],
        1.0,
    );
    deps.events.publish(&Event::Checkpointed {
        agent_id: rec.id.clone(),
        checkpoint_id: cp.id,
        reason,
        trigger: cp.trigger.clone(),
    });
    Ok(cp)
}

/// The checkpoint `id` of an agent (`None` = its newest).
pub async fn find(
    deps: &Deps,
    agent_id: &str,
    id: Option<Uuid>,
) -> Result<Checkpoint, AgentdError> {
    let list = deps.store.checkpoints(agent_id).await?;
    let found = match id {
        Some(id) => list.into_iter().find(|c| c.id == id),
        None => list.into_iter().next(),
    };
    found.ok_or_else(|| {
        AgentdError::new(
            ErrorCode::CheckpointNotFound,
            match id {
                Some(id) => format!("agent `{agent_id}` has no checkpoint `{id}`"),
                None => format!("agent `{agent_id}` has no checkpoints"),
            },
        )
    })
}

/// What restoring `cp` writes: the conversation and the inbox items to queue again.
pub struct RestorePlan {
    /// The conversation to put back. A pending item whose turn had already begun is cut off
    /// with everything after it, so it runs again from its start instead of twice; a tool call
    /// left without a result (a checkpoint taken while it ran) is closed as interrupted.
    pub conversation: Vec<agentd_proto::ThreadEntry>,
    /// The pending items under new ids derived from the restore's id (the originals may be
    /// in the de-duplication window), in their order.
    pub pending: Vec<Envelope>,
}

/// Plans the restore of `cp`; `restore_id` names this restore (a retry of the same restore
/// reuses it and de-duplicates; restoring the same checkpoint again later uses a new one).
pub fn plan(cp: &Checkpoint, restore_id: Uuid) -> RestorePlan {
    let started: std::collections::HashSet<Uuid> = cp
        .pending
        .iter()
        .map(|env| derived_id(env.id, "input"))
        .collect();
    let cut = cp
        .conversation
        .iter()
        .position(|e| started.contains(&e.id))
        .unwrap_or(cp.conversation.len());
    // Dependents' watches are not the agent's work: they stay in its inbox through a restore
    // (parked, see `agent/queue.rs`), so an old copy is not queued again.
    let pending = cp
        .pending
        .iter()
        .filter(|env| !matches!(env.item, Item::Inbox(InboxItem::Watch { .. })))
        .map(|env| {
            let mut env = env.clone();
            env.id = derived_id(env.id, &format!("restore:{restore_id}"));
            env
        })
        .collect();
    RestorePlan {
        conversation: agentd_proto::conversation::into_paired(cp.conversation[..cut].to_vec()),
        pending,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentd_proto::{Address, AgentStatus, InboxItem, Item, Role, ThreadEntry};

    #[test]
    fn a_begun_pending_turn_is_cut_and_requeued_under_a_new_id() {
        let env = Envelope::new(
            Address::System,
            Address::agent("a"),
            Item::Inbox(InboxItem::message("second")),
            1,
        );
        let first = ThreadEntry::text(agentd_proto::ids::new_id(), Role::User, "first", 1);
        let answer = ThreadEntry::text(agentd_proto::ids::new_id(), Role::Assistant, "ok", 2);
        let begun = ThreadEntry::text(derived_id(env.id, "input"), Role::User, "second", 3);
        let cp = Checkpoint {
            id: agentd_proto::ids::new_id(),
            agent_id: "a".into(),
            reason: CheckpointReason::RateLimit,
            trigger: String::new(),
            created_at_ms: 3,
            status: AgentStatus::WaitingRateLimit,
            phase: None,
            current_step: None,
            progress: None,
            conversation: vec![first.clone(), answer.clone(), begun],
            pending: vec![env.clone()],
            environment: Default::default(),
            usage: Default::default(),
            cost_usd: 0.0,
            turns: 1,
            cli_session_id: None,
        };
        let restore = agentd_proto::ids::new_id();
        let p = plan(&cp, restore);
        assert_eq!(p.conversation, vec![first, answer]);
        assert_eq!(p.pending.len(), 1);
        assert_ne!(p.pending[0].id, env.id);
        assert_eq!(p.pending[0].item, env.item);
        // The same restore gives the same ids (a retry de-duplicates); another one does not.
        assert_eq!(plan(&cp, restore).pending[0].id, p.pending[0].id);
        let again = plan(&cp, agentd_proto::ids::new_id());
        assert_ne!(again.pending[0].id, p.pending[0].id);
    }
}
