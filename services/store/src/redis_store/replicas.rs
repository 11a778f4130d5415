//! Acknowledged means replicated, when asked: `WAIT <min_replicas> <timeout>` after a write an
//! acknowledgement depends on (`redis.min_replicas`, docs/redis.md#failover).
//!
//! `WAIT` counts the replicas that hold every write made *on its own connection* before it,
//! so it goes on the shared command connection, to the node that took the write: on a cluster,
//! to the master of the written key's slot ([`RedisConnection::query_on_slot_of`]), never
//! through redis-rs's routing, which would send a bare `WAIT` to every master (and wait for
//! writes that are not this acknowledgement's). With `min_replicas = 0` nothing is sent.
//!
//! A `WAIT` holds up the commands behind it on its connection, so acknowledgements waiting at
//! once share `WAIT`s ([`Waits`]): one at a time per slot, and one sent after a write covers
//! it (every write on the connection before it counts), so the waiters that came while one
//! was out are all answered by the next. Under load that is one `WAIT` per slot and round
//! trip, not one per acknowledgement, and a replica gone stalls the connection for one wait
//! time at a time, not one per waiting request.
//!
//! [`RedisConnection::query_on_slot_of`]: crate::RedisConnection::query_on_slot_of

use super::{RedisStore, be};
use agentd_ports::{StoreError, StoreResult};
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// How many replicas to wait for, and how long.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Replicas {
    /// Replicas that must hold a write before it is acknowledged; 0 = no `WAIT`.
    pub(super) min: u32,
    /// How long a `WAIT` may take, ms (> 0 when `min` > 0: `WAIT n 0` blocks for ever).
    pub(super) wait_ms: u64,
}

/// The `WAIT`s of one slot (every slot is one on one Redis), shared by the acknowledgements
/// waiting at once. Tickets count the waiters in arrival order: a waiter's writes are done
/// when it takes its ticket, so a `WAIT` sent after ticket `t` was taken covers waiters up to
/// `t`.
struct SlotWaits {
    /// The last ticket taken.
    taken: AtomicU64,
    /// One `WAIT` at a time; the tickets the last one covered, and what it answered (the
    /// replicas that confirmed, or the error's text).
    done: tokio::sync::Mutex<(u64, Result<u32, String>)>,
}

impl Default for SlotWaits {
    fn default() -> Self {
        SlotWaits {
            taken: AtomicU64::new(0),
            done: tokio::sync::Mutex::new((0, Ok(0))),
        }
    }
}

/// The [`SlotWaits`] of every slot waited on (shared by a store's clones).
#[derive(Default)]
pub(super) struct Waits {
    slots: std::sync::Mutex<HashMap<u16, Arc<SlotWaits>>>,
}

impl Waits {
    fn of(&self, slot: u16) -> Arc<SlotWaits> {
        let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        slots.entry(slot).or_default().clone()
    }
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
        let slot = if self.con.is_cluster() {
            crate::slot(key.as_bytes())
        } else {
            0
        };
        let waits = self.waits.of(slot);
        let ticket = waits.taken.fetch_add(1, Ordering::SeqCst) + 1;
        let mut done = waits.done.lock().await;
        if done.0 < ticket {
            // No WAIT sent since this waiter's writes: send one for every waiter so far.
            let covers = waits.taken.load(Ordering::SeqCst);
            let mut wait = redis::cmd("WAIT");
            wait.arg(min).arg(wait_ms);
            let answer = self.con.clone().query_on_slot_of::<u32>(key, &wait).await;
            *done = (
                covers,
                answer.as_ref().map(|n| *n).map_err(|e| e.to_string()),
            );
            answer.map_err(be)?;
        }
        let acked = match &done.1 {
            Ok(n) => *n,
            Err(e) => {
                return Err(StoreError::transient(format!(
                    "redis: WAIT on the node of `{key}`: {e}"
                )));
            }
        };
        drop(done);
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
