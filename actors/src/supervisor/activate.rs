//! Bringing a persisted agent to life: its record is read (a closed agent re-opens; a turn that
//! was running when the last process stopped is over, its persisted output kept), its actor
//! starts, and the items its durable inbox still holds are handed to it. An agent that waits for
//! its dependencies works out from the store where it stands with them.

use super::Supervisor;
use super::dependencies::{Dependencies, at_activation};
use super::directory::SharedAgentAddr;
use super::messages::Activate;
use crate::agent::messages::Restore;
use crate::depends_on::waits_for_dependencies;
use actix::prelude::*;
use agentd_proto::{AgentStatus, AgentdError, Event};

impl Handler<Activate> for Supervisor {
    type Result = AtomicResponse<Self, Result<SharedAgentAddr, AgentdError>>;

    fn handle(&mut self, Activate(id): Activate, _: &mut Self::Context) -> Self::Result {
        if let Some(addr) = self.system.directory.agent(&id) {
            return AtomicResponse::new(Box::pin(actix::fut::ready(Ok(addr))));
        }
        if let Err(e) = self.check_live_limit() {
            return AtomicResponse::new(Box::pin(actix::fut::ready(Err(e))));
        }
        let deps = self.system.deps.clone();
        let fut = async move {
            let mut rec = deps
                .store
                .get_agent(&id)
                .await?
                .ok_or_else(|| AgentdError::agent_not_found(&id))?;
            let from = rec.status;
            let to = match from {
                AgentStatus::Closed | AgentStatus::Running | AgentStatus::Queued => {
                    Some(AgentStatus::Idle)
                }
                _ => None,
            };
            if let Some(to) = to {
                rec.status = to;
                rec.status_reason = Some(format!("re-opened from {from}"));
                rec.updated_at_ms = deps.clock.now_ms();
                deps.store.put_agent(&rec).await?;
                deps.events.publish(&Event::StatusChanged {
                    agent_id: rec.id.clone(),
                    from,
                    to,
                    reason: rec.status_reason.clone(),
                });
            }
            let pending = deps.store.inbox_pending(&rec.id).await?;
            let dependencies = if waits_for_dependencies(&rec) {
                at_activation(&deps, &rec).await?
            } else {
                Dependencies::default()
            };
            Ok::<_, AgentdError>((rec, pending, dependencies))
        };
        AtomicResponse::new(Box::pin(fut.into_actor(self).map(|res, act, _| {
            let (rec, pending, mut dependencies) = res?;
            if let Some(addr) = act.system.directory.agent(&rec.id) {
                return Ok(addr);
            }
            let id = rec.id.clone();
            let addr = act.start_agent(rec, std::mem::take(&mut dependencies.unmet));
            if !pending.is_empty() {
                // Work that was queued when the agent last stopped (restart, failover).
                addr.do_send(Restore(pending));
            }
            // After its work: a failed dependency may drop it.
            dependencies.announce(&act.system, &id);
            Ok(addr)
        })))
    }
}
