//! The store port: durable memory of agents, one trait per concern, and the typed failure a
//! store reports. The actors hold one object, a [`ThreadStore`]: every concern at once (a
//! supertrait of all, implemented for any type that implements each). A backend implements
//! each concern in an `impl` of its own, and may implement one by composing others through
//! the defaults (a [`Batches::write_batch`] by default is the concerns' writes one by one).
//!
//! | concern | keeps | module |
//! |---|---|---|
//! | [`AgentRecords`] | agent records (and deleting an agent, with all the store keeps of it) | `records` |
//! | [`Threads`] | each agent's thread of entries | `records` |
//! | [`Checkpoints`] | each agent's checkpoints, newest first, pruned | `records` |
//! | [`Tree`] | children, dependents, worker aliases | `tree` |
//! | [`Inboxes`] | each agent's durable inbox; the outbox of outputs in this process | `inbox` |
//! | [`Batches`] | a flush's writes as one unit; waiting for replicas | `batch` |
//! | [`IdempotencyClaims`] | the claims of messages' `Idempotency-Key`s (per agent) | `claims` |
//! | [`ExternalIds`] | outside ids mapped to agents (A2A `contextId`s, spawns' `Idempotency-Key`s), with their fingerprint, settledness and retention | `claims` |
//! | [`ToolCalls`] | service tool calls answered outside their turn | `tool_calls` |
//! | [`AgentValues`] | opaque values keyed by id under an agent, gone with it (A2A's push configs and notices) | `values` |
//! | [`Runs`] | each agent's runs (an A2A task, …) and what became of them, composed of [`AgentValues`] | `runs` |
//!
//! Every backend passes the conformance suite of every concern (`agentd_store::conformance`,
//! a module per concern).

use agentd_proto::{AgentdError, ErrorCode};

mod batch;
mod claims;
mod inbox;
mod records;
mod runs;
mod tool_calls;
mod tree;
mod values;

pub use batch::{Batches, StoreWrite, forwards_not_taken, outbox_not_kept};
pub use claims::{
    Claim, ClaimEnd, ExternalClaim, ExternalIds, ExternalKey, IdempotencyClaims, Retention,
};
pub use inbox::{DEDUP_WINDOW, Inboxes, Pushed};
pub use records::{AgentRecords, Checkpoints, Threads};
pub use runs::{
    OUTCOME_PREFIX, RUN_PREFIX, Run, RunOrigin, RunOutcome, RunState, Runs, StoredRun, is_run_key,
};
pub use tool_calls::{ToolCallClosing, ToolCalls};
pub use tree::{Tree, WorkerAlias};
pub use values::AgentValues;

/// Results of store calls.
pub type StoreResult<T> = Result<T, StoreError>;

/// What kind of failure a store met. Callers decide by it, never by a message's text,
/// whether the work that hit it is kept and tried again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreErrorKind {
    /// The backend could not be reached or did not answer (I/O, a connection cut, Redis
    /// down or failing over, a stopped writer thread): the same call can succeed later, so the
    /// work is kept, and a caller outside is answered `unavailable` (503), to retry.
    Transient,
    /// The backend answered, refusing the call with an error of its own (Redis: an error reply
    /// such as `WRONGTYPE`, a key of the wrong type that only a foreign writer makes): the work
    /// is kept and tried again like a transient failure (a stream entry a bounded number of
    /// times, `redis.max_deliveries`), but a caller outside is answered `store_error` (500):
    /// retrying soon is unlikely to help.
    Rejected,
    /// A stored value cannot be decoded, or a value cannot be encoded: the same call fails
    /// the same way again, so the work is reported and given up.
    Corrupt,
    /// A write for an agent this process no longer owns was refused by the store (its
    /// partition's lease names another process): the new owner takes the work, so the caller
    /// treats it like an unreachable store (the stream entry stays pending, a sender retries).
    Fenced,
    /// The store was asked for something it does not do (a forward to a stream, an outbox):
    /// a caller's mistake, never worth a retry.
    Unsupported,
    /// A write was applied, but fewer replicas than asked (`redis.min_replicas`) confirmed it
    /// in time: a failover now could lose it, so nothing that depends on it is acknowledged.
    /// The write may stand, so the caller keeps the work (writes are idempotent) and a caller
    /// outside answers `unavailable`.
    Unreplicated,
}

impl StoreErrorKind {
    /// How a message of this kind starts (stable: operators grep logs for it).
    fn prefix(self) -> &'static str {
        match self {
            StoreErrorKind::Transient | StoreErrorKind::Rejected | StoreErrorKind::Unsupported => {
                "store backend"
            }
            StoreErrorKind::Corrupt => "store decode",
            StoreErrorKind::Fenced => "fenced",
            StoreErrorKind::Unreplicated => "unreplicated",
        }
    }
}

/// A failure of the store: its [`StoreErrorKind`], what was being done (with the cause's own
/// text, so a log line says it all), and the cause itself where there is one. Stores map
/// their own errors into this one.
#[derive(Debug, thiserror::Error)]
#[error("{}: {}", .kind.prefix(), .context)]
pub struct StoreError {
    kind: StoreErrorKind,
    context: String,
    #[source]
    source: Option<Box<dyn std::error::Error + Send + Sync + 'static>>,
}

impl StoreError {
    /// A failure of `kind`; `context` says what failed.
    pub fn new(kind: StoreErrorKind, context: impl Into<String>) -> Self {
        StoreError {
            kind,
            context: context.into(),
            source: None,
        }
    }

    /// A failure of `kind` caused by `source`; `context` says what failed (and may quote it).
    pub fn caused_by(
        kind: StoreErrorKind,
        context: impl Into<String>,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        StoreError {
            kind,
            context: context.into(),
            source: Some(Box::new(source)),
        }
    }

    /// A [`StoreErrorKind::Transient`] failure.
    pub fn transient(context: impl Into<String>) -> Self {
        Self::new(StoreErrorKind::Transient, context)
    }

    /// A [`StoreErrorKind::Corrupt`] value.
    pub fn corrupt(context: impl Into<String>) -> Self {
        Self::new(StoreErrorKind::Corrupt, context)
    }

    /// A [`StoreErrorKind::Fenced`] write.
    pub fn fenced(context: impl Into<String>) -> Self {
        Self::new(StoreErrorKind::Fenced, context)
    }

    /// A [`StoreErrorKind::Unreplicated`] write.
    pub fn unreplicated(context: impl Into<String>) -> Self {
        Self::new(StoreErrorKind::Unreplicated, context)
    }

    /// What kind of failure this is.
    pub fn kind(&self) -> StoreErrorKind {
        self.kind
    }

    /// Whether the same work can succeed later ([`StoreErrorKind::Transient`],
    /// [`StoreErrorKind::Rejected`], [`StoreErrorKind::Fenced`] or
    /// [`StoreErrorKind::Unreplicated`]): the caller keeps it instead of giving it up.
    pub fn is_transient(&self) -> bool {
        matches!(
            self.kind,
            StoreErrorKind::Transient
                | StoreErrorKind::Rejected
                | StoreErrorKind::Fenced
                | StoreErrorKind::Unreplicated
        )
    }
}

/// A store failure as callers see it: a passing one (the store unreachable, a fenced or
/// unreplicated write) is `unavailable` — retry —, any other `store_error`.
impl From<StoreError> for AgentdError {
    fn from(e: StoreError) -> Self {
        let code = match e.kind {
            StoreErrorKind::Transient | StoreErrorKind::Fenced | StoreErrorKind::Unreplicated => {
                ErrorCode::Unavailable
            }
            StoreErrorKind::Rejected | StoreErrorKind::Corrupt | StoreErrorKind::Unsupported => {
                ErrorCode::StoreError
            }
        };
        AgentdError::with_source(code, e.to_string(), e)
    }
}

/// Whether `e` is a passing failure (Redis unreachable, a connection cut, a fenced write)
/// after which the same work can succeed: the caller keeps the work (a stream entry stays
/// unacknowledged, a turn is retried) instead of giving it up. A `store_error` is judged by
/// the [`StoreError`] behind it; one that crossed the wire without it counts as transient
/// (keeping work is the safe side).
pub fn is_transient(e: &AgentdError) -> bool {
    match e.code {
        ErrorCode::Unavailable => true,
        ErrorCode::StoreError => e
            .source_as::<StoreError>()
            .is_none_or(StoreError::is_transient),
        _ => false,
    }
}

/// What every concern of a store backend shares: its name.
pub trait StoreKind: Send + Sync + 'static {
    /// A short name for logs and `/v1/info` (`memory`, `embedded`, `redis`).
    fn kind(&self) -> &'static str;
}

/// Durable memory of agentd: every concern of the store in one object, the one the actors hold
/// (`Arc<dyn ThreadStore>`), so a call site names the method, not its concern. Nothing to
/// implement: any type that implements every concern is one.
///
/// Every implementation passes the same conformance suite (`agentd_store::conformance`).
pub trait ThreadStore:
    StoreKind
    + AgentRecords
    + Threads
    + Checkpoints
    + Tree
    + Inboxes
    + Batches
    + IdempotencyClaims
    + ExternalIds
    + ToolCalls
    + AgentValues
    + Runs
{
}

impl<T> ThreadStore for T where
    T: ?Sized
        + StoreKind
        + AgentRecords
        + Threads
        + Checkpoints
        + Tree
        + Inboxes
        + Batches
        + IdempotencyClaims
        + ExternalIds
        + ToolCalls
        + AgentValues
        + Runs
{
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_passing_store_failure_is_unavailable_and_a_lasting_one_a_store_error() {
        let code = |kind| AgentdError::from(StoreError::new(kind, "writing")).code;
        for kind in [
            StoreErrorKind::Transient,
            StoreErrorKind::Fenced,
            StoreErrorKind::Unreplicated,
        ] {
            assert_eq!(code(kind), ErrorCode::Unavailable, "{kind:?}");
        }
        for kind in [
            StoreErrorKind::Rejected,
            StoreErrorKind::Corrupt,
            StoreErrorKind::Unsupported,
        ] {
            assert_eq!(code(kind), ErrorCode::StoreError, "{kind:?}");
        }
    }
}
