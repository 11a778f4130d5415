//! What the service reports about the bus: readiness (what this process can serve now) and
//! per-partition metrics.

use super::RedisBus;
use crate::streams::GROUP;
use redis::cmd;
use std::collections::HashMap;

impl RedisBus {
    /// Per owned partition: (partition, pending entries, lag) from `XINFO GROUPS`, for metrics.
    pub async fn partition_stats(&self) -> Vec<(u32, u64, u64)> {
        let mut con = self.con.clone();
        let mut out = Vec::new();
        for k in self.owned() {
            let groups: redis::RedisResult<Vec<HashMap<String, redis::Value>>> = cmd("XINFO")
                .arg("GROUPS")
                .arg(self.keys.partition(k))
                .query_async(&mut con)
                .await;
            let Ok(groups) = groups else { continue };
            for g in groups {
                let name: Option<String> = g
                    .get("name")
                    .and_then(|v| redis::from_redis_value_ref(v).ok());
                if name.as_deref() != Some(GROUP) {
                    continue;
                }
                let num = |key: &str| -> u64 {
                    g.get(key)
                        .and_then(|v| redis::from_redis_value_ref::<u64>(v).ok())
                        .unwrap_or(0)
                };
                out.push((k, num("pending"), num("lag")));
            }
        }
        out
    }

    /// What this process can serve now, from what its lease rounds last learnt (no request to
    /// Redis: a probe costs nothing however many partitions there are). See [`Readiness`].
    pub fn readiness(&self) -> Readiness {
        let owned = self.owned();
        let degraded: Vec<u32> = owned.iter().copied().filter(|k| !self.fresh(*k)).collect();
        // In contact: a heartbeat within the fence time, or a partition renewed within it (a
        // cluster whose member-set node fails over still renews the others).
        let serving = self.in_contact_within(self.times().fence) || degraded.len() < owned.len();
        Readiness {
            serving,
            owned,
            degraded,
        }
    }
}

/// What a process can serve now ([`RedisBus::readiness`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Readiness {
    /// Whether it reaches Redis at all: a heartbeat or a renewal within the fence time. A
    /// process that does not is not ready (it reconnects by itself).
    pub serving: bool,
    /// The partitions it owns.
    pub owned: Vec<u32>,
    /// Those among them it cannot serve now: their lease was not renewed within the fence
    /// time (their Redis node failing over, or unreachable), so it neither reads them nor
    /// delivers to their agents until it is renewed again. A message for one of their agents
    /// is refused with `unavailable` (or waits in its stream if it got there).
    pub degraded: Vec<u32>,
}

/// Counts `n` lease changes of kind `change` (`taken`, `lost`, `released`).
pub(super) fn lease_changed(change: &str, n: usize) {
    agentd_observe::metrics::global().inc(
        "agentd_lease_changes_total",
        "Partition lease changes.",
        &[("change", change)],
        n as f64,
    );
}
