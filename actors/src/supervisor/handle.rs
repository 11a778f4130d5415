//! [`SystemHandle`]: what the actors of one process share — the ports and config, the process
//! actors' addresses, the live-agent directory and the trees' spending — behind one pointer.
//!
//! Every agent and parent router holds one. Cloning it clones an `Arc`; cloning an actix `Addr`
//! would allocate sender state of its own, for every idle agent. A turn and a tool call see less:
//! the ports ([`Deps`]), the recipients they send to, and the [`Agents`] port, which the same
//! pointer implements ([`SystemHandle::agents`]).

use super::in_router::InRouter;
use super::{Directory, Supervisor};
use crate::channel_router::ChannelRouter;
use crate::deps::Deps;
use crate::messages::OutputPort;
use crate::rate_gate::RateGates;
use crate::scheduler::Scheduler;
use crate::tools::Agents;
use crate::tree_spend::TreeSpend;
use actix::Addr;
use std::sync::Arc;

/// A shared handle on the actors and ports of one process.
#[derive(Clone)]
pub(crate) struct SystemHandle(Arc<Shared>);

/// What a [`SystemHandle`] points at.
pub(crate) struct Shared {
    /// Ports and config.
    pub(crate) deps: Arc<Deps>,
    /// The process supervisor.
    pub(crate) supervisor: Arc<Addr<Supervisor>>,
    /// The process router.
    pub(crate) router: Arc<Addr<ChannelRouter>>,
    /// What the process router holds that a send straight to an actor could overtake
    /// (`shortcuts.rs`).
    pub(crate) in_router: InRouter,
    /// Turn slots under a concurrency limit, if one is set.
    pub(crate) scheduler: Option<Addr<Scheduler>>,
    /// The live agents and parent routers of this process (written by the supervisor only).
    pub(crate) directory: Directory,
    /// What each agent tree has spent, as last summed (tree budgets).
    pub(crate) tree_spend: TreeSpend,
    /// Providers that rate-limited this process, and until when (shared with every turn).
    pub(crate) rate_gates: Arc<RateGates>,
}

impl SystemHandle {
    pub(crate) fn new(shared: Shared) -> Self {
        SystemHandle(Arc::new(shared))
    }

    /// Where turns send child outputs: the same pointer, behind [`OutputPort`].
    pub(crate) fn output_port(&self) -> Arc<dyn OutputPort> {
        self.0.clone()
    }

    /// The system as a tool sees it: the same pointer, behind the narrow [`Agents`] port.
    pub(crate) fn agents(&self) -> Arc<dyn Agents> {
        self.0.clone()
    }
}

impl std::ops::Deref for SystemHandle {
    type Target = Shared;
    fn deref(&self) -> &Shared {
        &self.0
    }
}
