//! What the service reports about the bus: readiness (every partition this process believes
//! it owns is still leased to it) and per-partition metrics.

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

    /// Readiness of the bus: Redis answers, and every partition this process believes it owns
    /// is still leased to it (a process that lost a lease without noticing must not take
    /// traffic). Answers the owned partitions, or why the bus is not ready.
    pub async fn check_leases(&self) -> Result<Vec<u32>, String> {
        let mut con = self.con.clone();
        let owned = self.owned();
        for k in &owned {
            let holder: Option<String> = cmd("GET")
                .arg(self.keys.lease(*k))
                .query_async(&mut con)
                .await
                .map_err(|e| format!("redis: {e}"))?;
            if holder.as_deref() != Some(self.cfg.process_id.as_str()) {
                return Err(format!(
                    "partition {k} is no longer leased to this process (holder: {})",
                    holder.as_deref().unwrap_or("none")
                ));
            }
        }
        Ok(owned)
    }
}
