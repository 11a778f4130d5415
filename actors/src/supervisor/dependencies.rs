//! Who waits for whom: an agent spawned with `depends_on` waits until each of those agents is
//! met ([`DependencyOutcome::Met`]):
//!
//! - a **sub-agent** (spawned by `spawn_agent`) is met when it yields (`completed`);
//! - a **root or a Manage worker** is met once it has handled everything that was queued for it
//!   when the dependent was spawned: at once if it was idle (or completed) with an empty inbox,
//!   or closed; otherwise the spawn puts a watch ([`InboxItem::Watch`]) into its durable inbox,
//!   and when it reaches the watch, in order and without a turn, it forgets the dependent
//!   ([`Tree::remove_dependent`](crate::ports::Tree::remove_dependent)) and
//!   tells it. Closing it meets every dependent.
//!
//! A dependency that fails, is cancelled or terminated tells its dependents, which fail under
//! the policy `fail` (their spawn's `on_dependency_failure`, else the limit's) and wait for a
//! later success otherwise; a deleted one fails them whatever the policy says.
//!
//! The store keeps each dependency's dependents (for a root or a worker: those whose watch it
//! has not reached yet), so whichever process sees a dependency settle reads them and routes
//! each one the news (an [`Event::DependencySettled`] envelope) through its partition: a
//! dependent owned by another process hears it like a local one. A dependent that is
//! activated (a restart, a failover, a message) works out again from the store where it
//! stands, and places its watches again, so nothing depends on that envelope arriving.

use super::Supervisor;
use super::SystemHandle;
use super::messages::TellDependents;
use crate::depends_on::{met_by_yield, news};
use crate::deps::Deps;
use actix::prelude::*;
use agentd_proto::ids::derived_id;
use agentd_proto::{
    Address, AgentRecord, AgentStatus, AgentdError, DependencyOutcome, Envelope, InboxItem, Item,
};
use std::collections::HashSet;

/// The watch `dependent` puts into `dependency`'s inbox. Its id is always the same, so placing
/// it again (after a restart) is a duplicate the inbox drops.
fn watch(dependent: &str, dependency: &str, now_ms: u64) -> Envelope {
    let mut env = Envelope::new(
        Address::agent(dependent),
        Address::agent(dependency),
        Item::Inbox(InboxItem::Watch {
            dependent: dependent.to_string(),
        }),
        now_ms,
    );
    env.id = derived_id(
        uuid::Uuid::nil(),
        &format!("watch {dependent} {dependency}"),
    );
    env
}

/// Where a dependent stands with its `depends_on`.
#[derive(Debug, Default)]
pub(super) struct Dependencies {
    /// Those not met yet (failed ones it holds for included).
    pub(super) unmet: HashSet<String>,
    /// Those that failed, were cancelled, terminated or deleted: the dependent is told at its
    /// start, and applies `on_dependency_failure`.
    pub(super) failed: Vec<(String, DependencyOutcome)>,
    /// The watches to place (roots and workers that have not reached theirs).
    watches: Vec<Envelope>,
}

impl Dependencies {
    /// Places the watches and tells `dependent` what failed, through the router: into the
    /// inbox of an agent of this process, or through the partition stream of another's.
    pub(super) fn announce(self, system: &SystemHandle, dependent: &str) {
        let now = system.deps.clock.now_ms();
        for (dependency, outcome) in self.failed {
            let env = news(&dependency, dependent, outcome, now);
            system.route(env);
        }
        for env in self.watches {
            system.route(env);
        }
    }

    /// Settles dependency `dep` by what its record alone says: deleted (unmet, failed by the
    /// deletion) or a sub-agent (met once `completed`, unmet otherwise). Answers the record of a
    /// root or a worker, whose standing depends on its inbox, for the caller to settle.
    async fn by_record(
        &mut self,
        deps: &Deps,
        dep: &str,
    ) -> Result<Option<AgentRecord>, AgentdError> {
        let Some(rec) = deps.store.get_agent(dep).await? else {
            self.unmet(dep, Some(DependencyOutcome::Deleted));
            return Ok(None);
        };
        if !met_by_yield(&rec) {
            return Ok(Some(rec));
        }
        if rec.status != AgentStatus::Completed {
            self.unmet(dep, DependencyOutcome::failure_of(rec.status));
        }
        Ok(None)
    }

    /// One dependency not met (`failed` with how, if it failed).
    fn unmet(&mut self, dependency: &str, failed: Option<DependencyOutcome>) {
        self.unmet.insert(dependency.to_string());
        if let Some(outcome) = failed {
            self.failed.push((dependency.to_string(), outcome));
        }
    }
}

/// Where the new agent `dependent` stands with `depends_on` (existing agents, checked before):
/// each is recorded as its dependency first, so one that settles meanwhile finds it; a root or
/// a worker with work gets a watch to place.
pub(super) async fn at_spawn(
    deps: &Deps,
    dependent: &str,
    depends_on: &[String],
) -> Result<Dependencies, AgentdError> {
    let mut out = Dependencies::default();
    for dep in depends_on {
        deps.store.add_dependent(dep, dependent).await?;
        let Some(rec) = out.by_record(deps, dep).await? else {
            continue;
        };
        let met_now = match rec.status {
            AgentStatus::Closed => true,
            // Across processes an agent that looks idle may be busy with messages it holds in
            // their partition stream entries (not in its inbox, its turn's start not written
            // yet): only its actor knows, so a watch asks it.
            AgentStatus::Idle | AgentStatus::Completed if deps.transport.is_some() => false,
            AgentStatus::Idle | AgentStatus::Completed => {
                deps.store.inbox_pending(dep).await?.is_empty()
            }
            _ => false,
        };
        if met_now {
            deps.store.remove_dependent(dep, dependent).await?;
            continue;
        }
        out.watches.push(watch(dependent, dep, deps.clock.now_ms()));
        out.unmet(dep, DependencyOutcome::failure_of(rec.status));
    }
    Ok(out)
}

/// Where `rec`, which waits for its dependencies ([`waits_for_dependencies`]), stands now, as
/// the store says: a sub-agent by its status; a root or a worker by whether `rec` is still among
/// its dependents (then its watch is placed again unless its inbox has it).
pub(super) async fn at_activation(
    deps: &Deps,
    rec: &AgentRecord,
) -> Result<Dependencies, AgentdError> {
    let mut out = Dependencies::default();
    for dep in &rec.depends_on {
        let Some(dependency) = out.by_record(deps, dep).await? else {
            continue;
        };
        if dependency.status == AgentStatus::Closed
            || !deps.store.dependents(dep).await?.contains(&rec.id)
        {
            continue;
        }
        let watch = watch(&rec.id, dep, deps.clock.now_ms());
        let placed = deps
            .store
            .inbox_pending(dep)
            .await?
            .iter()
            .any(|e| e.id == watch.id);
        if !placed {
            out.watches.push(watch);
        }
        out.unmet(dep, DependencyOutcome::failure_of(dependency.status));
    }
    Ok(out)
}

/// Tells each agent recorded as waiting for `dependency` that it settled with `outcome`; a
/// met dependency forgets them (they wait for nothing more from it). `skip`: dependents not
/// to tell (being deleted with it).
pub(crate) async fn tell_dependents(
    system: &SystemHandle,
    dependency: &str,
    outcome: DependencyOutcome,
    dependents: Vec<String>,
    skip: &[String],
) {
    let deps = &system.deps;
    for dependent in dependents {
        if skip.contains(&dependent) {
            continue;
        }
        if outcome == DependencyOutcome::Met
            && let Err(e) = deps.store.remove_dependent(dependency, &dependent).await
        {
            tracing::warn!(agent_id = %dependency, dependent, error = %e, "forgetting a met dependent failed; it learns it when activated");
        }
        let env = news(dependency, &dependent, outcome, deps.clock.now_ms());
        system.route(env);
    }
}

/// Reads the dependents of `dependency` and tells them it settled with `outcome`.
pub(crate) async fn settled(system: &SystemHandle, dependency: &str, outcome: DependencyOutcome) {
    match system.deps.store.dependents(dependency).await {
        Ok(dependents) => tell_dependents(system, dependency, outcome, dependents, &[]).await,
        Err(e) => {
            tracing::warn!(agent_id = %dependency, %outcome, error = %e, "reading the dependents of a settled agent failed; they learn it when activated");
        }
    }
}

impl Handler<TellDependents> for Supervisor {
    type Result = ();

    fn handle(&mut self, msg: TellDependents, ctx: &mut Self::Context) {
        let system = self.system.clone();
        let told = async move { settled(&system, &msg.agent_id, msg.outcome).await };
        ctx.spawn(told.into_actor(self));
    }
}
