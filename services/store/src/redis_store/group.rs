//! Calls made together, per partition: the first caller of a partition queues a task that
//! sends, when it runs (after everything else the runtime had ready, e.g. every agent of one
//! partition read), what all callers queued by then, as one script call; each caller waits for
//! its own answer. Nothing waits for an earlier call: calls go out one after another on the
//! connection.

use agentd_ports::{StoreError, StoreErrorKind, StoreResult};
use std::collections::HashMap;
use std::sync::Mutex;

/// What waits per partition, and whether a task that sends it is queued.
pub(super) struct Groups<W>(Mutex<HashMap<u32, (bool, Vec<W>)>>);

impl<W> Default for Groups<W> {
    fn default() -> Self {
        Groups(Mutex::new(HashMap::new()))
    }
}

impl<W> Groups<W> {
    /// Queues `w` for partition `k`; answers whether the caller leads: it queues the task that
    /// sends what waits (none is queued yet).
    pub(super) fn join(&self, k: u32, w: W) -> StoreResult<bool> {
        let mut parts = self
            .0
            .lock()
            .map_err(|_| StoreError::transient("a group queue's lock is poisoned"))?;
        let (queued, waiting) = parts.entry(k).or_default();
        waiting.push(w);
        Ok(!std::mem::replace(queued, true))
    }

    /// Takes what waits for partition `k`: the next caller leads again.
    pub(super) fn take(&self, k: u32) -> Vec<W> {
        match self.0.lock() {
            Ok(mut parts) => {
                let (queued, waiting) = parts.entry(k).or_default();
                *queued = false;
                std::mem::take(waiting)
            }
            Err(_) => Vec::new(),
        }
    }
}

/// The answer for one caller of a grouped script call: the call's `i`th result, `1`, `0` or
/// `-1` (what each means is the script's), or the error its own part met (an error Redis
/// answered for that part's keys: rejected), or the whole call's.
pub(super) fn result_of(
    results: &Result<Vec<redis::Value>, StoreError>,
    i: usize,
    what: &str,
) -> StoreResult<i64> {
    match results {
        Ok(r) => match r.get(i) {
            Some(redis::Value::Int(n)) => Ok(*n),
            Some(other) => Err(StoreError::new(
                StoreErrorKind::Rejected,
                format!(
                    "redis: {what} failed: {}",
                    redis::from_redis_value_ref::<String>(other)
                        .unwrap_or_else(|_| format!("{other:?}"))
                ),
            )),
            None => Err(StoreError::corrupt(format!(
                "the script of {what} answered too few results"
            ))),
        },
        Err(e) => Err(StoreError::new(e.kind(), e.to_string())),
    }
}
