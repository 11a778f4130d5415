//! [`AgentSystem`]: the facade services and tests use. It starts the actors of one process and
//! turns every [`Command`](agentd_proto::Command) into the same operations the tools use.
//!
//! | module | what it holds |
//! |---|---|
//! | [`agents`] | acting on one agent: spawn, messages, controls, budgets, environment, checkpoints, tools |
//! | [`views`] | what the API shows: inspect (relayed to the owning process), list, tree, queue |
//! | [`commands`] | commands from other services, scoped to a tree, run where the agent lives; a request's bounded wait for them |
//! | [`idempotent`] | spawns under an idempotency key: a retry answers the first attempt's agent |
//! | [`fork`] | a new root whose thread is a copy of an agent's up to a point |
//! | [`inbound`] | the facade as the inbound port a transport holds (`agentd_ports::Inbound`) |
//! | [`recovery`] | resuming, after a restart or a takeover, the agents that had work |

mod agents;
mod commands;
mod fork;
mod idempotent;
mod inbound;
mod recovery;
mod views;

use crate::channel_router::ChannelRouter;
use crate::deps::Deps;
use crate::errors::mailbox;
use crate::scheduler::{Scheduler, SchedulerLimits};
use crate::supervisor::Supervisor;
use crate::supervisor::messages::Shutdown;
use crate::supervisor::{Shared, SystemHandle};
use actix::prelude::*;
use agentd_proto::{Address, AgentdError, Envelope};
use std::sync::Arc;

pub use commands::{Unfinished, deadline_passed, unfinished};
pub use idempotent::{idempotent_agent_id, spawn_agent_id, spawn_key};

/// The running actors of one process. Its operations act in this process;
/// [`Self::execute`] (what the HTTP API and the command stream call) runs a command that acts
/// on a live agent in the process that owns the agent, when that is another one.
#[derive(Clone)]
pub struct AgentSystem {
    system: SystemHandle,
}

impl AgentSystem {
    /// Starts the ChannelRouter and the Supervisor. Must run inside an actix `System`.
    pub fn start(deps: Deps) -> Self {
        let deps = Arc::new(deps);
        let limits = SchedulerLimits {
            total: deps.config.limits.max_running_turns,
            per_parent: deps.config.limits.max_running_turns_per_parent,
            per_provider: deps.config.provider_limits.clone(),
        };
        let scheduler = limits.any().then(|| Scheduler::new(limits).start());
        // Both actors' addresses exist before either starts, so each is made with the handle
        // that names both.
        let router_ctx = Context::<ChannelRouter>::new();
        let supervisor_ctx = Context::<Supervisor>::new();
        let system = SystemHandle::new(Shared {
            deps: deps.clone(),
            supervisor: Arc::new(supervisor_ctx.address()),
            router: Arc::new(router_ctx.address()),
            in_router: Default::default(),
            scheduler,
            directory: Default::default(),
            tree_spend: Default::default(),
            rate_gates: Default::default(),
        });
        router_ctx.run(ChannelRouter::new(system.clone()));
        supervisor_ctx.run(Supervisor::new(system.clone()));
        tracing::info!(
            model = deps.model.backend(),
            store = deps.store.kind(),
            "agent system started"
        );
        // Seed 000: the core tools, in one line, as they are registered.
        let core: Vec<&str> = crate::catalogue::BuiltinTool::ALL
            .iter()
            .map(|t| t.name())
            .collect();
        tracing::debug!(tools = %core.join(", "), "core tools registered");
        AgentSystem { system }
    }

    /// Hands `env`, read from a partition stream this process owns, to its receiver (it is
    /// delivered here even while that partition still drains after a takeover). The future
    /// answers once the item is in the receiver's durable inbox (`Ok(false)`: a duplicate), or
    /// held by its agent in its stream entry `entry`
    /// ([`StreamEntry::is_taken`](crate::ports::StreamEntry::is_taken) once answered), so a
    /// transport acknowledges its entry after it, unless an agent holds it. The envelope is
    /// queued at the router when this is called, not when the future is polled: envelopes
    /// handed over one after another keep their order.
    pub fn route_from_stream(
        &self,
        env: Envelope,
        entry: Option<std::sync::Arc<crate::ports::StreamEntry>>,
    ) -> impl std::future::Future<Output = Result<bool, AgentdError>> + use<> {
        self.system.route_from_stream(env, entry)
    }

    /// Routes `env` like any envelope of this process and answers once it is in the
    /// receiver's durable inbox (`Ok(false)`: a duplicate). Queued at the router when called.
    pub fn route_acked(
        &self,
        env: Envelope,
    ) -> impl std::future::Future<Output = Result<bool, AgentdError>> + use<> {
        self.system.route_acked(env)
    }

    /// Takes a child's output that arrived through a partition stream (an `Item::Output`
    /// envelope) to its parent's router here, or on to the process that owns the parent;
    /// answers once that router has handled it.
    pub async fn take_output(&self, env: Envelope) -> Result<(), AgentdError> {
        self.system
            .router
            .send(crate::channel_router::messages::RemoteOutput(env))
            .await
            .map_err(mailbox)?
    }

    /// Asks the transport, between two routed envelopes, to end the drain of the partitions it
    /// has emptied ([`crate::ports::Transport::settle`]).
    pub async fn settle_transport(&self) -> Result<(), AgentdError> {
        self.system
            .router
            .send(crate::channel_router::messages::SettleTransport)
            .await
            .map_err(mailbox)?
    }

    /// Stops the live agents for which `filter` holds (their partition moved to another
    /// process); answers how many were stopped. Their durable inboxes stay.
    pub async fn passivate(&self, filter: Box<dyn Fn(&str) -> bool + Send>) -> usize {
        self.system
            .supervisor
            .send(crate::supervisor::messages::Passivate(filter))
            .await
            .unwrap_or(0)
    }

    /// Ports and config.
    pub fn deps(&self) -> &Deps {
        &self.system.deps
    }

    /// How many agents are live (have an actor) in this process.
    pub async fn live_count(&self) -> Result<usize, AgentdError> {
        Ok(self.system.directory.live_count())
    }

    /// Stops every agent (records stay as persisted) and the supervisor.
    pub async fn shutdown(&self) {
        if let Err(e) = self.system.supervisor.send(Shutdown).await.map_err(mailbox) {
            tracing::warn!(error = %e, "shutdown");
        }
    }
}

/// The sender of what the API and the command stream ask.
fn external() -> Address {
    Address::External { name: "api".into() }
}
