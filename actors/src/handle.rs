//! [`SystemHandle`]: what the actors of one process share — the ports and config, the process
//! actors' addresses, the live-agent directory and the trees' spending — behind one pointer.
//!
//! Every agent, parent router, turn and tool call holds one. Cloning it clones an `Arc`; cloning
//! an actix `Addr` would allocate sender state of its own, for every idle agent.

use crate::channel_router::ChannelRouter;
use crate::deps::Deps;
use crate::rate_gate::RateGates;
use crate::scheduler::Scheduler;
use crate::supervisor::{Directory, Supervisor};
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
    /// Turn slots under a concurrency limit, if one is set.
    pub(crate) scheduler: Option<Addr<Scheduler>>,
    /// The live agents and parent routers of this process (written by the supervisor only).
    pub(crate) directory: Directory,
    /// What each agent tree has spent, as last summed (tree budgets).
    pub(crate) tree_spend: TreeSpend,
    /// Providers that rate-limited this process, and until when.
    pub(crate) rate_gates: RateGates,
}

impl SystemHandle {
    pub(crate) fn new(shared: Shared) -> Self {
        SystemHandle(Arc::new(shared))
    }
}

impl std::ops::Deref for SystemHandle {
    type Target = Shared;
    fn deref(&self) -> &Shared {
        &self.0
    }
}
