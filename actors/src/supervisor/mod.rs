//! `Supervisor`: one per process. It is the one owner of the [`Directory`] of live agents and
//! parent routers: it creates agents (enforcing the depth and fan-out limits), activates
//! persisted ones, places trees on Arbiters, applies lifecycle controls (cascading cancel,
//! close and delete to descendants, deepest first), and tells dependents, wherever they live,
//! when an agent they wait for settles.
//!
//! | module | what it holds |
//! |---|---|
//! | [`messages`] | the messages the supervisor handles |
//! | [`directory`] | [`Directory`]: the live agents and parent routers of the process |
//! | [`spawn`] | creating an agent: limits, its record, its first message |
//! | [`activate`] | bringing a persisted agent to life, with its pending inbox |
//! | [`dependencies`] | who waits for whom (`depends_on`) |
//! | [`lifecycle`] | controls and their cascades; passivation and shutdown |
//! | [`handle`] | [`SystemHandle`]: what every actor of a process shares (ports, the supervisor's and the router's addresses, the scheduler, the directory), behind one pointer |
//! | [`in_router`] | what the process router holds that a shortcut could overtake |
//! | [`shortcuts`] | envelopes and child outputs sent straight to a live actor, past the process router, when nothing can be overtaken |

mod activate;
mod dependencies;
mod directory;
mod handle;
mod in_router;
mod lifecycle;
pub(crate) mod messages;
mod shortcuts;
mod spawn;

pub(crate) use directory::{Directory, SharedAgentAddr};
pub(crate) use handle::{Shared, SystemHandle};
pub(crate) use lifecycle::forward_control;
pub(crate) use spawn::first_message;

use crate::agent::AgentActor;
use crate::hashing::fnv1a64;
use crate::parent_router::ParentRouter;
use actix::prelude::*;
use agentd_proto::{AgentRecord, AgentdError, ErrorCode};
use messages::{AgentStopped, ParentRouterFor, PauseTree};
use std::collections::HashSet;
use std::sync::Arc;

/// The process supervisor.
pub struct Supervisor {
    system: SystemHandle,
    arbiters: Vec<Arbiter>,
}

impl Supervisor {
    /// A supervisor with `runtime.arbiters` Arbiters (0 = one per core; 1 = the current one).
    pub(crate) fn new(system: SystemHandle) -> Self {
        let n = match system.deps.config.arbiters {
            0 => std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1),
            n => n,
        };
        let arbiters = if n <= 1 {
            Vec::new()
        } else {
            (0..n).map(|_| Arbiter::new()).collect()
        };
        Supervisor { system, arbiters }
    }

    /// The Arbiter of a tree: every agent of one root lives on the same one, so messages within
    /// a tree never cross threads.
    fn arbiter_for(&self, root_id: &str) -> Option<ArbiterHandle> {
        if self.arbiters.is_empty() {
            return None;
        }
        let i = (fnv1a64(root_id.as_bytes()) % self.arbiters.len() as u64) as usize;
        Some(self.arbiters[i].handle())
    }

    /// Starts the actor of `rec`, waiting for `unmet` dependencies, and enters it in the
    /// directory.
    fn start_agent(
        &mut self,
        rec: impl Into<Arc<AgentRecord>>,
        unmet: HashSet<String>,
    ) -> SharedAgentAddr {
        let rec: Arc<AgentRecord> = rec.into();
        let id: Arc<str> = rec.id.as_str().into();
        let root_id = rec.root_id.clone();
        let system = self.system.clone();
        let addr = Arc::new(match self.arbiter_for(&rec.root_id) {
            Some(arb) => {
                AgentActor::start_in_arbiter(&arb, move |_| AgentActor::new(rec, system, unmet))
            }
            None => AgentActor::new(rec, system, unmet).start(),
        });
        self.system
            .directory
            .insert_agent(id, &root_id, addr.clone());
        addr
    }

    /// `unavailable` when one more live agent would exceed `limits.max_live_agents`.
    fn check_live_limit(&self) -> Result<(), AgentdError> {
        let max = self.system.deps.config.limits.max_live_agents;
        if self.system.directory.live_count() >= max && self.system.directory.sweep_stopped() >= max
        {
            return Err(AgentdError::new(
                ErrorCode::Unavailable,
                format!(
                    "this process already hosts {max} live agents (limits.max_live_agents); close some first"
                ),
            ));
        }
        Ok(())
    }
}

impl Actor for Supervisor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        ctx.set_mailbox_capacity(16 * 1024);
    }

    fn stopped(&mut self, _: &mut Self::Context) {
        for a in &self.arbiters {
            a.stop();
        }
    }
}

impl Handler<AgentStopped> for Supervisor {
    type Result = ();

    fn handle(&mut self, AgentStopped(id): AgentStopped, _: &mut Self::Context) {
        self.system.directory.remove_stopped(&id);
    }
}

impl Handler<ParentRouterFor> for Supervisor {
    type Result = MessageResult<ParentRouterFor>;

    fn handle(
        &mut self,
        ParentRouterFor(id): ParentRouterFor,
        _: &mut Self::Context,
    ) -> Self::Result {
        if let Some(pr) = self.system.directory.parent_router(&id) {
            return MessageResult(pr);
        }
        let pr = Arc::new(ParentRouter::new(id.clone(), self.system.clone()).start());
        self.system
            .directory
            .insert_parent_router(id, Arc::clone(&pr));
        MessageResult(pr)
    }
}

impl Handler<PauseTree> for Supervisor {
    type Result = ();

    fn handle(&mut self, msg: PauseTree, _: &mut Self::Context) {
        for addr in self.system.directory.tree(&msg.root_id) {
            addr.do_send(crate::agent::messages::BudgetPause(msg.limit.clone()));
        }
    }
}
