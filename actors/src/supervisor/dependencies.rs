//! Who waits for whom: an agent spawned with `depends_on` waits until each of those agents has
//! completed. The store records, at the spawn, each dependency's dependents; when a dependency
//! finishes, the supervisor of the process that saw it finish reads them and routes each one the
//! news (an [`Event::StatusChanged`] envelope) through its partition, so a dependent owned by
//! another process hears it like a local one. A dependent that is not live re-checks its
//! dependencies in the store when it is activated, so nothing depends on that envelope arriving.

use super::Supervisor;
use super::messages::Finished;
use crate::channel_router::messages::Route;
use crate::deps::Deps;
use actix::prelude::*;
use agentd_proto::{Address, AgentStatus, AgentdError, Envelope, Event, Item};
use std::collections::HashSet;

/// The dependencies of `depends_on` that have not completed yet.
pub(super) async fn unmet_dependencies(
    deps: &Deps,
    depends_on: &[String],
) -> Result<HashSet<String>, AgentdError> {
    let mut unmet = HashSet::new();
    for dep in depends_on {
        let done = deps
            .store
            .get_agent(dep)
            .await?
            .is_some_and(|r| r.status == AgentStatus::Completed);
        if !done {
            unmet.insert(dep.clone());
        }
    }
    Ok(unmet)
}

impl Handler<Finished> for Supervisor {
    type Result = ();

    fn handle(&mut self, msg: Finished, ctx: &mut Self::Context) {
        let system = self.system.clone();
        let told = async move {
            let dependents = match system.deps.store.dependents(&msg.agent_id).await {
                Ok(d) => d,
                Err(e) => {
                    tracing::warn!(agent_id = %msg.agent_id, error = %e, "reading the dependents of a finished agent failed; they learn it when activated");
                    return;
                }
            };
            let to = if msg.ok {
                AgentStatus::Completed
            } else {
                AgentStatus::Failed
            };
            for dependent in dependents {
                let news = Event::StatusChanged {
                    agent_id: msg.agent_id.clone(),
                    from: msg.from,
                    to,
                    reason: None,
                };
                let env = Envelope::new(
                    Address::agent(&msg.agent_id),
                    Address::agent(&dependent),
                    Item::Event(news),
                    system.deps.clock.now_ms(),
                );
                system.router.do_send(Route(env));
            }
        };
        ctx.spawn(told.into_actor(self));
    }
}
