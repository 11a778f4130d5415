//! `Inboxes` of the memory store, the outbox with them.

use super::*;

#[async_trait]
impl Inboxes for MemoryStore {
    async fn inbox_push(&self, agent_id: &str, env: &Envelope) -> StoreResult<bool> {
        let mut inner = self.lock();
        Ok(inner
            .agents
            .slot(agent_id, || Kept::named(agent_id))
            .rest()
            .inbox_push(env))
    }

    async fn inbox_pending(&self, agent_id: &str) -> StoreResult<Vec<Envelope>> {
        Ok(self
            .lock()
            .agents
            .get(agent_id)
            .and_then(|kept| kept.rest.as_deref())
            .map(|rest| rest.inbox.pending.clone())
            .unwrap_or_default())
    }

    async fn inbox_done(&self, agent_id: &str, env_id: Uuid) -> StoreResult<()> {
        if let Some(rest) = self
            .lock()
            .agents
            .get_mut(agent_id)
            .and_then(|kept| kept.rest.as_deref_mut())
        {
            rest.inbox_done(env_id);
        }
        Ok(())
    }

    async fn inbox_push_then(
        &self,
        agent_id: &str,
        env: &Envelope,
        then: &[StoreWrite],
    ) -> StoreResult<Pushed> {
        // Under one lock, with no nested store calls (each would box a future of its own:
        // this runs for every message).
        refuse_unkept(then)?;
        let mut inner = self.lock();
        let kept = inner.agents.slot(agent_id, || Kept::named(agent_id));
        let fresh = kept.rest().inbox_push(env);
        if fresh {
            if then
                .iter()
                .all(|w| agent_of(w).is_none_or(|a| a == agent_id))
            {
                // The agent's own turn start: found once, with the push.
                for w in then {
                    kept.apply(w);
                }
            } else {
                inner.apply(then);
            }
        }
        Ok(Pushed {
            fresh,
            then_applied: fresh,
        })
    }
}
