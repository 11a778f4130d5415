//! Resuming the agents that had work when the last process stopped (or whose partition this
//! process just took), and handing over the child outputs the store's outbox still keeps.

use super::AgentSystem;
use crate::errors::mailbox;
use agentd_proto::AgentdError;
use std::sync::Arc;

impl AgentSystem {
    /// Re-activates, after a restart, every agent of this process that was running or queued
    /// when the previous process stopped: their durable inboxes (the interrupted item first)
    /// are resumed. So are those waiting for their dependencies: they check them again (the
    /// news of one that settled may have been lost with that process). Then hands the child outputs the store's outbox still keeps to their
    /// parents. Answers how many agents were activated.
    pub async fn recover(&self) -> Result<usize, AgentdError> {
        let n = self.recover_where(|_| true).await?;
        self.hand_over_outbox().await?;
        Ok(n)
    }

    /// Hands each child output kept in the store's outbox ([`crate::ports::StoreWrite::Outbox`])
    /// to its parent's router, oldest first: the previous process stopped between the batch
    /// that kept it and the parent's push (a repeat of a push that did land is a duplicate the
    /// parent's inbox drops). The parent's router lets it go once handled.
    async fn hand_over_outbox(&self) -> Result<(), AgentdError> {
        let store = &self.system.deps.store;
        if !store.keeps_outbox() {
            return Ok(());
        }
        let pending = store.outbox_pending().await?;
        let mut handed = 0usize;
        for env in pending {
            let child = match (&env.item, env.from.agent_id()) {
                (agentd_proto::Item::Output(_), Some(child_id)) => {
                    store.get_agent(child_id).await?
                }
                _ => None,
            };
            let (Some(child), agentd_proto::Item::Output(output), Some(cause)) =
                (child, env.item, env.causation_id)
            else {
                // Not an output as agents keep them, or its child is gone: nothing to hand over.
                store.outbox_done(env.id).await?;
                continue;
            };
            // The parent's router lets it go by the id derived from its cause, as it was kept.
            let out = crate::messages::ChildOutput {
                child: Arc::new(child),
                output,
                cause,
                kept: true,
            };
            self.system
                .output_to_router()
                .send(out)
                .await
                .map_err(mailbox)?;
            handed += 1;
        }
        if handed > 0 {
            tracing::info!(
                outputs = handed,
                "handed over child outputs the last process had not delivered"
            );
        }
        Ok(())
    }

    /// [`AgentSystem::recover`] for the agents `filter` selects: a transport calls it for the
    /// partitions it has just taken, because an agent stopped when its partition moved (or
    /// whose previous owner died) keeps its acknowledged work only in its durable inbox, and
    /// nothing else would activate it again until another message arrives.
    pub async fn recover_where(
        &self,
        filter: impl Fn(&str) -> bool + Send,
    ) -> Result<usize, AgentdError> {
        let mut stack: Vec<String> = self
            .system
            .deps
            .store
            .list_roots()
            .await?
            .into_iter()
            .map(|r| r.id)
            .collect();
        let mut n = 0;
        let mut seen = std::collections::HashSet::new();
        while let Some(id) = stack.pop() {
            if !seen.insert(id.clone()) {
                continue;
            }
            stack.extend(self.system.deps.store.children(&id).await?);
            if !filter(&id) || self.system.deps.is_owned_elsewhere(&id) {
                continue;
            }
            let Some(rec) = self.system.deps.store.get_agent(&id).await? else {
                continue;
            };
            let pending = !self.system.deps.store.inbox_pending(&id).await?.is_empty();
            // Rate-limited agents come back too: they resume by themselves at their reset time;
            // so do agents waiting for service calls (their deadlines run on, and a call not
            // published yet is published again).
            if matches!(
                rec.status,
                agentd_proto::AgentStatus::Running
                    | agentd_proto::AgentStatus::Queued
                    | agentd_proto::AgentStatus::WaitingRateLimit
                    | agentd_proto::AgentStatus::WaitingTool
                    | agentd_proto::AgentStatus::WaitingReview
            ) || (pending && rec.status.accepts_turns())
                || crate::depends_on::waits_for_dependencies(&rec)
            {
                self.system
                    .supervisor
                    .send(crate::supervisor::messages::Activate(id.clone()))
                    .await
                    .map_err(mailbox)??;
                n += 1;
            }
        }
        if n > 0 {
            tracing::info!(
                agents = n,
                "resumed agents that had work when the last process stopped"
            );
        }
        Ok(n)
    }
}
