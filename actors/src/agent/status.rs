//! Status transitions: checked against the one transition table, published, persisted, and
//! followed by the automatic checkpoints seed 001 asks for (on a pause, a rate limit and an
//! error).

use super::AgentActor;
use actix::prelude::*;
use agentd_observe::metrics;
use agentd_proto::{AgentStatus, AgentdError, CheckpointReason, ErrorCode, Event};

impl AgentActor {
    /// Moves to `to` if the transition table allows it and publishes the event; the caller
    /// persists. Answers whether the status changed.
    pub(super) fn transition(
        &mut self,
        to: AgentStatus,
        reason: Option<String>,
    ) -> Result<bool, AgentdError> {
        let from = self.rec.status;
        if from == to {
            return Ok(false);
        }
        if !from.can_become(to) {
            return Err(AgentdError::new(
                ErrorCode::InvalidTransition,
                format!("agent `{}` cannot go from {from} to {to}", self.rec.id),
            ));
        }
        self.rec.status = to;
        self.rec.status_reason = reason.clone();
        self.announce_status(from, reason);
        Ok(true)
    }

    /// Tells the status gauge and the event stream that the record's status went from `from`
    /// to what it is now (`reason`: why).
    pub(super) fn announce_status(&mut self, from: AgentStatus, reason: Option<String>) {
        let to = self.rec.status;
        // An agent that runs turns sets its own entry of the gauge; one that never did goes
        // through the registry (and holds no cell: 100,000 idle agents stay small).
        match self.setup.as_deref_mut() {
            Some(setup) => match &setup.status {
                Some(cell) => cell.set(to),
                None => setup.status = Some(metrics::global().agent_status_cell(&self.rec.id, to)),
            },
            None => metrics::global().agent_status(&self.rec.id, Some(to)),
        }
        if self.deps().events.is_listened() {
            self.deps().events.publish(&Event::StatusChanged {
                agent_id: self.rec.id.clone(),
                from,
                to,
                reason,
            });
        }
    }

    /// [`Self::transition`], then persists the record before any further message is handled,
    /// and takes the checkpoint the new status calls for.
    pub(super) fn set_status(
        &mut self,
        to: AgentStatus,
        reason: Option<String>,
        ctx: &mut Context<Self>,
    ) -> Result<(), AgentdError> {
        if !self.transition(to, reason.clone())? {
            return Ok(());
        }
        self.persist(ctx);
        let why = match to {
            AgentStatus::Paused => CheckpointReason::Auto,
            AgentStatus::WaitingRateLimit => CheckpointReason::RateLimit,
            AgentStatus::Failed => CheckpointReason::Error,
            _ => return Ok(()),
        };
        let trigger = reason.unwrap_or_else(|| to.as_str().to_string());
        self.checkpoint(why, &trigger, ctx);
        Ok(())
    }
}
