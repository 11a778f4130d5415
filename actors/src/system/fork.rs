//! Forks: a new root of an agent's type whose thread is a copy of the agent's up to a point —
//! one of its checkpoints, an entry of its thread, or now —, the source untouched. Time
//! travel is then a fork at an earlier point, and a message to the fork.
//!
//! The fork is spawned as any root (its type, title, tools, provider, model and environment
//! the source's; no prompt), then restored to a checkpoint of its own, reason `fork`, that
//! holds the copied conversation and names in its trigger the agent and the point it was
//! forked from — what the fork records of its origin. A copy cut between a tool call and its
//! result closes the call as an interrupt does (`conversation::into_paired`), so the fork's
//! thread is valid for providers that pair every call with its result. Sub-agents are not
//! copied: the fork starts without children.
//!
//! Under an idempotency key a retry answers the first attempt's fork (the spawn's key, the
//! checkpoint's id derived from the fork's): a fork whose copy is already in its thread is not
//! restored again, so a retry after the fork went on never rolls it back.

use super::AgentSystem;
use agentd_proto::ids::derived_id;
use agentd_proto::{
    AgentRecord, AgentdError, Checkpoint, CheckpointReason, Command, ErrorCode, SpawnRequest,
    ThreadEntry,
};
use uuid::Uuid;

impl AgentSystem {
    /// Forks agent `source_id` at `at` (see the module doc): answers the fork's record.
    pub async fn fork(
        &self,
        source_id: &str,
        at: Option<Uuid>,
        idempotency_key: Option<String>,
    ) -> Result<AgentRecord, AgentdError> {
        let source = self.require_exists(source_id).await?;
        let (conversation, point) = self.copy_of(source_id, at).await?;
        let key = idempotency_key.clone();
        let reused = |key: Option<String>| {
            AgentdError::new(
                ErrorCode::IdempotencyKeyReused,
                format!(
                    "idempotency key `{}` was used with another fork request",
                    key.unwrap_or_default()
                ),
            )
        };
        let fork = self
            .spawn(SpawnRequest {
                agent_type: Some(source.agent_type.to_string()),
                title: Some(source.title.to_string()),
                allowed_tools: source.allowed_tools.clone(),
                provider: source.provider.clone(),
                model: source.model.clone(),
                env: source.env.clone(),
                idempotency_key,
                ..SpawnRequest::default()
            })
            .await
            .map_err(|e| match e.code {
                ErrorCode::IdempotencyKeyReused => reused(key.clone()),
                _ => e,
            })?;
        let deps = &self.system.deps;
        let cp_id = derived_id(Uuid::nil(), &format!("fork\u{1f}{}", fork.id));
        let trigger = format!("forked from {source_id} at {point}");
        let made = deps.store.checkpoints(&fork.id).await?;
        if made.iter().any(|c| c.id == cp_id && c.trigger != trigger) {
            // The key made a fork of another agent or at another point.
            return Err(reused(key));
        }
        if !deps.store.thread(&fork.id).await?.is_empty() {
            // A retry of a fork that was restored (and may have gone on since).
            return self.record(&fork.id).await;
        }
        let cp = Checkpoint {
            id: cp_id,
            agent_id: fork.id.clone(),
            reason: CheckpointReason::Fork,
            trigger,
            created_at_ms: deps.clock.now_ms(),
            status: fork.status,
            phase: source.phase,
            current_step: None,
            progress: source.progress,
            conversation: agentd_proto::conversation::into_paired(conversation),
            pending: Vec::new(),
            environment: source.env.clone(),
            usage: Default::default(),
            cost_usd: 0.0,
            turns: 0,
            cli_session_id: None,
        };
        deps.store
            .checkpoint_put(&cp, deps.config.checkpoints_keep)
            .await?;
        // Where the fork lives: its partition may be another process's.
        Box::pin(self.execute(Command::Restore {
            agent_id: fork.id.clone(),
            checkpoint_id: Some(cp.id),
        }))
        .await?;
        self.record(&fork.id).await
    }

    /// What a fork of `source_id` at `at` copies, and the point in words (for the fork's
    /// checkpoint): a checkpoint's conversation, the thread up to an entry (included), or the
    /// thread now.
    async fn copy_of(
        &self,
        source_id: &str,
        at: Option<Uuid>,
    ) -> Result<(Vec<ThreadEntry>, String), AgentdError> {
        let store = &self.system.deps.store;
        let Some(at) = at else {
            return Ok((store.thread(source_id).await?, "now".to_string()));
        };
        if let Some(cp) = store
            .checkpoints(source_id)
            .await?
            .into_iter()
            .find(|c| c.id == at)
        {
            return Ok((cp.conversation, format!("checkpoint {at}")));
        }
        let mut thread = store.thread(source_id).await?;
        match thread.iter().position(|e| e.id == at) {
            Some(i) => {
                thread.truncate(i + 1);
                Ok((thread, format!("entry {at}")))
            }
            None => Err(AgentdError::new(
                ErrorCode::InvalidArgument,
                format!("agent `{source_id}` has no checkpoint and no thread entry `{at}`"),
            )),
        }
    }
}
