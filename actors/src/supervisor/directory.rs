//! The directory of what lives in this process: the actor of each live agent and the router of
//! each parent that has children. The [`Supervisor`](super::Supervisor) is its one owner: only
//! it starts and stops agents and parent routers, so only it writes here (the write methods are
//! private to its module); the channel router and the facade read it to reach a live agent
//! without a message hop.

use crate::agent::AgentActor;
use crate::hashing::FastHashMap;
use crate::parent_router::ParentRouter;
use actix::Addr;
use std::sync::{Arc, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// A live agent's address: one shared copy (an `Addr` clone allocates its own sender state).
pub(crate) type SharedAgentAddr = Arc<Addr<AgentActor>>;

/// A parent router's address, shared the same way.
pub(crate) type SharedRouterAddr = Arc<Addr<ParentRouter>>;

/// A live agent of this process.
struct LiveAgent {
    addr: SharedAgentAddr,
    /// The root of its tree (a spent tree budget pauses the whole tree); `None` for a root,
    /// whose id is its root's (most live agents of a large process: no second copy of the id).
    root_id: Option<Box<str>>,
}

/// The live agents and parent routers of this process.
#[derive(Default)]
pub(crate) struct Directory {
    agents: RwLock<FastHashMap<Arc<str>, LiveAgent>>,
    parents: RwLock<FastHashMap<String, SharedRouterAddr>>,
}

/// Reads `lock`; a writer that panicked left a map that is still consistent (every write is one
/// map operation), so a poisoned lock is read all the same.
fn read<T>(lock: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    lock.read().unwrap_or_else(PoisonError::into_inner)
}

fn write<T>(lock: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    lock.write().unwrap_or_else(PoisonError::into_inner)
}

impl Directory {
    /// The live actor of `id`, if it runs.
    pub(crate) fn agent(&self, id: &str) -> Option<SharedAgentAddr> {
        read(&self.agents)
            .get(id)
            .map(|a| &a.addr)
            .filter(|a| a.connected())
            .cloned()
    }

    /// How many agents are live.
    pub(crate) fn live_count(&self) -> usize {
        read(&self.agents).len()
    }

    /// The router of parent `id`, if it runs.
    pub(crate) fn parent_router(&self, id: &str) -> Option<SharedRouterAddr> {
        read(&self.parents)
            .get(id)
            .filter(|a| a.connected())
            .cloned()
    }

    /// Adds a live agent (`root_id` is its tree's root).
    pub(super) fn insert_agent(&self, id: Arc<str>, root_id: &str, addr: SharedAgentAddr) {
        let root_id = (*root_id != *id).then(|| root_id.into());
        write(&self.agents).insert(id, LiveAgent { addr, root_id });
    }

    /// Forgets agent `id` once its actor has stopped.
    pub(super) fn remove_stopped(&self, id: &str) {
        let mut agents = write(&self.agents);
        if agents.get(id).is_some_and(|a| !a.addr.connected()) {
            agents.remove(id);
        }
    }

    /// Forgets the agents whose actors have stopped; answers how many stay.
    pub(super) fn sweep_stopped(&self) -> usize {
        let mut agents = write(&self.agents);
        agents.retain(|_, a| a.addr.connected());
        agents.len()
    }

    /// The live actors for which `select` holds.
    pub(super) fn agents_where(
        &self,
        select: impl Fn(&str, Option<&str>) -> bool,
    ) -> Vec<SharedAgentAddr> {
        read(&self.agents)
            .iter()
            .filter(|(id, a)| a.addr.connected() && select(id, a.root_id.as_deref()))
            .map(|(_, a)| a.addr.clone())
            .collect()
    }

    /// The live actors of `root_id`'s tree.
    pub(super) fn tree(&self, root_id: &str) -> Vec<SharedAgentAddr> {
        self.agents_where(|id, root| root.unwrap_or(id) == root_id)
    }

    /// Forgets the agents and parent routers for which `forget` holds; answers the agents'
    /// actors that were live.
    pub(super) fn remove_where(&self, forget: impl Fn(&str) -> bool) -> Vec<SharedAgentAddr> {
        let mut gone = Vec::new();
        write(&self.agents).retain(|id, a| {
            if !forget(id) {
                return true;
            }
            if a.addr.connected() {
                gone.push(a.addr.clone());
            }
            false
        });
        write(&self.parents).retain(|id, _| !forget(id));
        gone
    }

    /// Forgets everything; answers the agents' actors that were live.
    pub(super) fn clear(&self) -> Vec<SharedAgentAddr> {
        self.remove_where(|_| true)
    }

    /// Adds the router of parent `id`.
    pub(super) fn insert_parent_router(&self, id: String, router: SharedRouterAddr) {
        write(&self.parents).insert(id, router);
    }

    /// Forgets the router of parent `id` (deleted), or only if it stopped (`only_stopped`).
    pub(super) fn remove_parent_router(&self, id: &str, only_stopped: bool) {
        let mut parents = write(&self.parents);
        if !only_stopped || parents.get(id).is_some_and(|a| !a.connected()) {
            parents.remove(id);
        }
    }
}
