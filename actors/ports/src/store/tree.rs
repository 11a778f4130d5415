//! The concern of the links between agents: children, dependents, worker aliases.

use super::{StoreKind, StoreResult};
use async_trait::async_trait;
use serde::{Deserialize, Serialize};

/// A `(worker title, thread alias) → child agent` entry of a parent (seed 000).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkerAlias {
    /// Trimmed worker title.
    pub worker_title: String,
    /// Thread alias.
    pub alias: String,
    /// The child agent (= child thread) id.
    pub child_id: String,
}

/// The links between agents: the parent→children list (oldest first, idempotent, closed
/// children stay), the set of dependents of each agent, and each parent's worker aliases
/// (`(worker title, thread alias) → child`, created once, atomically).
#[async_trait]
pub trait Tree: StoreKind {
    /// Records `child` under `parent` (idempotent). Closed children stay listed.
    async fn add_child(&self, parent_id: &str, child_id: &str) -> StoreResult<()>;

    /// Children of `parent`, oldest first.
    async fn children(&self, parent_id: &str) -> StoreResult<Vec<String>>;

    /// How many children `parent` has (the fan-out check runs it on every spawn).
    async fn child_count(&self, parent_id: &str) -> StoreResult<usize> {
        Ok(self.children(parent_id).await?.len())
    }

    /// Records that `dependent` waits for `dependency` (idempotent), so that whichever process
    /// sees `dependency` settle can tell `dependent`, wherever it lives.
    async fn add_dependent(&self, dependency: &str, dependent: &str) -> StoreResult<()>;

    /// Forgets that `dependent` waits for `dependency` (idempotent): a root or a worker reached
    /// the watch `dependent` put in its inbox, so that dependency is met for good.
    async fn remove_dependent(&self, dependency: &str, dependent: &str) -> StoreResult<()>;

    /// The agents recorded as waiting for `dependency`, in no particular order.
    async fn dependents(&self, dependency: &str) -> StoreResult<Vec<String>>;

    /// Returns the child for `(parent, worker, alias)`, creating the mapping to `candidate` if
    /// there is none. Atomic: two racing callers get the same child. Returns `(child, created)`.
    async fn alias_get_or_create(
        &self,
        parent_id: &str,
        worker_title: &str,
        alias: &str,
        candidate: &str,
    ) -> StoreResult<(String, bool)>;

    /// The worker aliases of a parent.
    async fn aliases(&self, parent_id: &str) -> StoreResult<Vec<WorkerAlias>>;
}
