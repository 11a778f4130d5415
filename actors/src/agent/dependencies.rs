//! Dependencies (`depends_on`, see `supervisor/dependencies.rs`) from both sides: an agent that
//! waits for its dependencies (its [`Activity::WaitingDependencies`]) hears how each settles, and
//! an agent others depend on reaches the watches they put in its inbox.

use super::AgentActor;
use super::activity::Activity;
use crate::supervisor::messages::TellDependents;
use actix::prelude::*;
use agentd_proto::{
    AgentStatus, AgentdError, DependencyOutcome, Envelope, ErrorCode, InboxItem, Item,
    OnDependencyFailure,
};

/// How long a watch waits before it is tried again when the store could not forget its
/// dependent.
const WATCH_RETRY: std::time::Duration = std::time::Duration::from_secs(1);

impl AgentActor {
    /// At the actor's start, its status shows what its activity says: waiting for dependencies, or
    /// done waiting (they were met while it had no actor, or at its spawn).
    pub(super) fn show_dependency_wait(&mut self, ctx: &mut Context<Self>) {
        match &self.activity {
            Activity::WaitingDependencies(unmet) if self.rec.status == AgentStatus::Idle => {
                let reason = crate::depends_on::waiting_reason(unmet);
                let _ = self.set_status(AgentStatus::WaitingDependency, Some(reason), ctx);
            }
            Activity::Idle if crate::depends_on::waits_for_dependencies(&self.rec) => {
                self.dependencies_met(ctx);
            }
            _ => {}
        }
    }

    /// Dependency `agent_id` settled with `outcome`: the agent goes on once none is left, fails
    /// (a deletion, or a failure under the policy `fail`: its spawn's `on_dependency_failure`,
    /// else the limit's), or holds until that dependency is met after all.
    pub(super) fn dependency_settled(
        &mut self,
        agent_id: &str,
        outcome: DependencyOutcome,
        ctx: &mut Context<Self>,
    ) {
        let Activity::WaitingDependencies(unmet) = &mut self.activity else {
            return;
        };
        if !unmet.contains(agent_id) {
            return;
        }
        let fails = match outcome {
            DependencyOutcome::Met => {
                unmet.remove(agent_id);
                if unmet.is_empty() {
                    self.stop_waiting_for_dependencies();
                    self.dependencies_met(ctx);
                    self.pump(ctx);
                }
                return;
            }
            DependencyOutcome::Deleted => true,
            _ => {
                let policy = self
                    .rec
                    .on_dependency_failure
                    .unwrap_or_else(|| self.deps().config.limits.dependency_failure_policy());
                policy == OnDependencyFailure::Fail
            }
        };
        if fails {
            self.failed_by_dependency(agent_id, outcome, ctx);
        } else {
            tracing::info!(agent_id = %self.rec.id, dependency = agent_id, %outcome, "a dependency failed; holding until it is met after all");
        }
    }

    /// Every dependency is met: the agent no longer waits, and never checks them again.
    fn dependencies_met(&mut self, ctx: &mut Context<Self>) {
        self.rec.dependencies_settled = true;
        if self.rec.status == AgentStatus::WaitingDependency {
            let _ = self.set_status(AgentStatus::Idle, Some("dependencies met".into()), ctx);
        } else {
            self.persist(ctx);
        }
    }

    /// Dependency `agent_id` failed the agent: its queued work is dropped (as a cancel drops
    /// it) and it is `failed` with `dependency_failed: <id> <outcome>`; its parent and its own
    /// dependents hear it.
    fn failed_by_dependency(
        &mut self,
        agent_id: &str,
        outcome: DependencyOutcome,
        ctx: &mut Context<Self>,
    ) {
        self.stop_waiting_for_dependencies();
        self.drop_queue(ctx);
        let e = AgentdError::new(ErrorCode::DependencyFailed, format!("{agent_id} {outcome}"));
        let reason = e.to_string();
        tracing::warn!(agent_id = %self.rec.id, error = %e, "a dependency failed the agent");
        // The same cause each time: a parent told twice (the news again after a restart) keeps
        // one `[failed]`.
        let cause = agentd_proto::ids::derived_id(
            uuid::Uuid::nil(),
            &format!("dependency_failed {} {agent_id}", self.rec.id),
        );
        self.mark_failed(e, reason, cause, ctx);
    }

    /// Tells this agent's dependents that it settled with `outcome`.
    pub(super) fn tell_dependents(&self, outcome: DependencyOutcome) {
        self.system.supervisor.do_send(TellDependents {
            agent_id: self.rec.id.clone(),
            outcome,
        });
    }

    /// The agent reached a dependent's watch: everything queued before it is handled. Unless
    /// the agent is failed, cancelled or terminated (then the watch is parked until a later
    /// success), it forgets the dependent in the store and tells it, then the watch is done;
    /// no other message is handled meanwhile (a passivation would cut it short). If the store
    /// cannot be written, the watch is tried again later.
    pub(super) fn watch_reached(&mut self, env: Envelope, ctx: &mut Context<Self>) {
        let Item::Inbox(InboxItem::Watch { dependent }) = &env.item else {
            return;
        };
        if DependencyOutcome::failure_of(self.rec.status).is_some() {
            self.queue.park(env);
            return;
        }
        let dependent = dependent.clone();
        let store = self.deps().store.clone();
        let id = self.rec.id.clone();
        let forgotten = async move { store.remove_dependent(&id, &dependent).await };
        ctx.wait(forgotten.into_actor(self).map(move |res, act, ctx| {
            let Item::Inbox(InboxItem::Watch { dependent }) = &env.item else {
                return;
            };
            if let Err(e) = res {
                tracing::warn!(agent_id = %act.rec.id, dependent, error = %e, "forgetting a met dependent failed; trying again");
                ctx.run_later(WATCH_RETRY, move |act, ctx| {
                    act.queue.push(env);
                    act.pump(ctx);
                    act.check_activity();
                });
                return;
            }
            let now = act.deps().clock.now_ms();
            let news = crate::depends_on::news(
                &act.rec.id,
                dependent,
                DependencyOutcome::Met,
                now,
            );
            act.system.route(news);
            act.done(Some(env.id), ctx);
            act.check_activity();
        }));
    }
}
