//! The Redis `ThreadStore`: records as one MessagePack string each, threads as lists of
//! `<id> <entry>` pairs (an entry appended once, [`scripts`]), the parent→child map in
//! sorted sets, worker aliases in hashes (a get-or-create script: race-free across processes),
//! the durable inbox in a sorted set + hash, checkpoints in a list (newest first). Every key of
//! an agent is in its partition's hash-tag slot ([`crate::Keys`]), so multi-key changes of one
//! agent (and its partition's lease, stream and outbox) run as one Lua script there, or, for a
//! flush on one Redis, as one transaction fenced by the lease ([`fenced`]).
//!
//! | module | what it holds |
//! |---|---|
//! | [`connection`] | connecting, the store's scripts and settings, loading the flush scripts |
//! | [`scripts`] | the Lua scripts, with the keys and arguments each takes |
//! | [`operations`] | the `ThreadStore` calls on records, threads, children, aliases, inboxes, checkpoints |
//! | [`group`] | calls made together per partition: one script call for what was queued at once |
//! | [`push`] | durable pushes into inboxes, grouped per partition, and the fence that keeps a stale owner's out |
//! | [`flush`] | live agents' flushes of their own state, grouped per partition: entries, done marks, outputs, the record and the acknowledgement of the entries they held |
//! | [`fenced`] | on one Redis, those flushes as transactions fenced by a `WATCH` on the partition's lease, on connections of the partition's own |
//! | [`batch`] | batches by slot, an agent's own writes fenced by its partition's lease, child outputs through the outbox |
//! | [`layout`] | the namespace's key layout and partition count, checked at every start |
//! | [`migrate`] | `agentd migrate`: the earlier layout moved to this one, once |
//! | [`replicas`] | `WAIT` for `redis.min_replicas` after a write an acknowledgement depends on |
//! | [`claim`] | idempotency claims (`Idempotency-Key`) of messages, in their agent's slot |
//! | [`external_id`] | outside ids (an A2A client's `contextId`, a spawn's `Idempotency-Key`, …) mapped to agents, kept with them or for a time |

mod batch;
mod claim;
mod connection;
mod external_id;
mod fenced;
mod flush;
mod group;
mod layout;
mod migrate;
mod operations;
mod push;
mod replicas;
mod scripts;

pub use migrate::Migrated;
pub use push::PushFence;

use crate::RedisConnection;
use crate::redis_keys::Keys;
use agentd_ports::{StoreError, StoreErrorKind, StoreResult};
use redis::Script;
use std::sync::Arc;

/// A `ThreadStore` in Redis.
#[derive(Clone)]
pub struct RedisStore {
    con: RedisConnection,
    keys: Keys,
    append: Script,
    append_new: Script,
    replace: Script,
    add_child: Script,
    alias_get_or_create: Script,
    push_many: Script,
    /// Pushes waiting for their partition's next [`Self::push_many`] call (shared by clones).
    pushes: Arc<push::PushQueue>,
    tool_call_close: Script,
    tool_call_put: Script,
    /// Scripts of the flush pipeline (with [`Self::append`]), sent by their SHA-1 so that Redis
    /// does not hash the script's text on every call (as it does for an `EVAL`); loaded again
    /// if Redis answers `NOSCRIPT` (a restart).
    flush_many: Script,
    /// Flushes waiting for their partition's next [`Self::flush_many`] call (shared by
    /// clones).
    flushes: Arc<flush::FlushQueue>,
    /// On one Redis, the connections that write flushes as transactions fenced by `WATCH`
    /// (shared by clones; `None` on a cluster and for a store made over a given connection).
    transactions: Option<Arc<fenced::Transactions>>,
    /// Whether the flush scripts were loaded (once before the first flush, and again after a
    /// `NOSCRIPT`): a pipeline cut by `NOSCRIPT` has run its other commands, so a retry would
    /// send its outputs twice (harmless, de-duplicated, but avoidable).
    flush_scripts_loaded: Arc<std::sync::atomic::AtomicBool>,
    dedup_window: usize,
    /// Set once the bus is up (shared by the clones of this store).
    fence: Arc<std::sync::OnceLock<PushFence>>,
    /// The replicas an acknowledgement waits for (none by default).
    replicas: replicas::Replicas,
    /// The `WAIT`s under way, shared by acknowledgements waiting at once.
    waits: Arc<replicas::Waits>,
}

/// A Redis failure as a store error: an error Redis answered for the call itself (`WRONGTYPE`,
/// a script's error: what redis-rs would not retry) is [`StoreErrorKind::Rejected`]; anything
/// else — no connection, no answer in time, a failover or a reshard under way (`CLUSTERDOWN`,
/// `TRYAGAIN`, `MASTERDOWN`, `READONLY`, `LOADING`) — is [`StoreErrorKind::Transient`].
pub(crate) fn be(e: redis::RedisError) -> StoreError {
    let kind = match e.retry_method() {
        redis::RetryMethod::NoRetry => StoreErrorKind::Rejected,
        _ => StoreErrorKind::Transient,
    };
    StoreError::caused_by(kind, format!("redis: {e}"), e)
}

/// A stored value that does not decode (or encode), as a corrupt store error.
fn de(e: agentd_proto::AgentdError) -> StoreError {
    StoreError::caused_by(StoreErrorKind::Corrupt, e.message.clone(), e)
}

/// A script's answer `-1`: the fence refused it.
fn fenced(n: i64, agent_id: &str) -> StoreResult<()> {
    if n == -1 {
        return Err(StoreError::fenced(format!(
            "the lease of agent `{agent_id}`'s partition is no longer this process's"
        )));
    }
    Ok(())
}

/// An agent's record as stored: one MessagePack value, a string key of its own. Fields at
/// their defaults are left out (see `AgentRecord`'s serde attributes), which is most of a
/// small agent's record.
fn record_bytes(record: &agentd_proto::AgentRecord) -> StoreResult<Vec<u8>> {
    agentd_proto::codec::encode(record).map_err(de)
}
