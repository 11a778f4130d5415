//! Who waits for whom: an agent spawned with `depends_on` waits until each of those agents has
//! completed. The supervisor keeps the waiting side (dependency → dependents) and tells each live
//! dependent when one of its dependencies finishes.

use super::Supervisor;
use super::messages::Finished;
use crate::agent::messages::DependencyDone;
use crate::deps::Deps;
use actix::prelude::*;
use agentd_proto::{AgentStatus, AgentdError};
use std::collections::HashSet;

impl Supervisor {
    /// Remembers that `agent_id` waits for `unmet` to finish.
    pub(super) fn watch(&mut self, agent_id: &str, unmet: &HashSet<String>) {
        for dep in unmet {
            let list = self.dependents.entry(dep.clone()).or_default();
            if !list.iter().any(|d| d == agent_id) {
                list.push(agent_id.to_string());
            }
        }
    }
}

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

    fn handle(&mut self, msg: Finished, _: &mut Self::Context) {
        // A failed dependency is held (its dependents wait until it completes after all), or
        // fails its dependents, as `limits.on_dependency_failure` says.
        let hold = self.system.deps.config.limits.on_dependency_failure != "fail";
        let waiting = if msg.ok || !hold {
            self.dependents.remove(&msg.agent_id).unwrap_or_default()
        } else {
            self.dependents
                .get(&msg.agent_id)
                .cloned()
                .unwrap_or_default()
        };
        for dependent in waiting {
            if let Some(addr) = self.system.directory.agent(&dependent) {
                addr.do_send(DependencyDone {
                    agent_id: msg.agent_id.clone(),
                    ok: msg.ok,
                });
            }
        }
    }
}
