//! Acknowledged means replicated, when asked: `WAIT <min_replicas> <timeout>` after a write an
//! acknowledgement depends on (`redis.min_replicas`, docs/redis.md#failover).
//!
//! `WAIT` counts the replicas that hold every write made *on its own connection* before it,
//! so it goes on the shared command connection, to the node that took the write: on a cluster,
//! to the master of the written key's slot ([`RedisConnection::query_on_slot_of`]), never
//! through redis-rs's routing, which would send a bare `WAIT` to every master (and wait for
//! writes that are not this acknowledgement's). With `min_replicas = 0` nothing is sent.
//!
//! [`RedisConnection::query_on_slot_of`]: crate::RedisConnection::query_on_slot_of

use super::{RedisStore, be};
use agentd_actors::{StoreError, StoreResult};

/// How many replicas to wait for, and how long.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Replicas {
    /// Replicas that must hold a write before it is acknowledged; 0 = no `WAIT`.
    pub(super) min: u32,
    /// How long a `WAIT` may take, ms (> 0 when `min` > 0: `WAIT n 0` blocks for ever).
    pub(super) wait_ms: u64,
}

impl RedisStore {
    /// Waits for `min_replicas` replicas (at most `wait_ms`, at least 1 ms) after the writes an
    /// acknowledgement depends on (see the module doc); 0 waits for none and sends nothing.
    pub fn with_min_replicas(mut self, min_replicas: u32, wait_ms: u64) -> Self {
        self.replicas = Replicas {
            min: min_replicas,
            wait_ms: wait_ms.max(1),
        };
        self
    }

    /// Waits until the replicas asked for hold every write made so far on the node of `key`'s
    /// slot; [`StoreError::unreplicated`] if fewer confirmed within the wait time (the writes
    /// may stand all the same). Answers at once, with no round trip, when none are asked for.
    pub(super) async fn wait_replicas(&self, key: &str) -> StoreResult<()> {
        let Replicas { min, wait_ms } = self.replicas;
        if min == 0 {
            return Ok(());
        }
        let mut wait = redis::cmd("WAIT");
        wait.arg(min).arg(wait_ms);
        let acked: u32 = self
            .con
            .clone()
            .query_on_slot_of(key, &wait)
            .await
            .map_err(be)?;
        if acked < min {
            return Err(StoreError::unreplicated(format!(
                "{acked} of {min} replicas confirmed the writes on the node of `{key}` within \
                 {wait_ms} ms (redis.min_replicas); they may stand, retry to be sure"
            )));
        }
        Ok(())
    }

    /// [`Self::wait_replicas`] on the node of `agent_id`'s partition (its keys, its stream).
    pub(super) async fn wait_replicas_of(&self, agent_id: &str) -> StoreResult<()> {
        if self.replicas.min == 0 {
            return Ok(());
        }
        self.wait_replicas(&self.keys.agent(agent_id)).await
    }
}
