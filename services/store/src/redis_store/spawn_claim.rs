//! Spawn idempotency claims (`Idempotency-Key`): a string `{<ns>:p<k>}:a:<id>:spawnkey` in the
//! slot of the agent the key derives, holding the first request's fingerprint, with an expiry.
//! The claim and the agent's record are in one slot, so a failover keeps both or neither of
//! what the master had not replicated.

use super::{RedisStore, be};
use agentd_actors::StoreResult;
use redis::Script;

/// `KEYS[1]` = the claim, `ARGV[1]` = the fingerprint, `ARGV[2]` = its time to live (ms):
/// the claim's first fingerprint if there is one, else `false` after setting it.
const CLAIM: &str = r"
local first = redis.call('GET', KEYS[1])
if first then return first end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return false
";

impl RedisStore {
    /// The claim key of idempotent spawn `agent_id`.
    fn spawn_claim_key(&self, agent_id: &str) -> String {
        self.keys.agent_part(agent_id, "spawnkey")
    }

    /// See `ThreadStore::spawn_claim`.
    pub(super) async fn claim_spawn(
        &self,
        agent_id: &str,
        fingerprint: &str,
        ttl_ms: u64,
    ) -> StoreResult<Option<String>> {
        Script::new(CLAIM)
            .key(self.spawn_claim_key(agent_id))
            .arg(fingerprint)
            .arg(ttl_ms.max(1))
            .invoke_async(&mut self.con.clone())
            .await
            .map_err(be)
    }

    /// See `ThreadStore::spawn_claim_expire`.
    pub(super) async fn expire_spawn_claim(&self, agent_id: &str, ttl_ms: u64) -> StoreResult<()> {
        let key = self.spawn_claim_key(agent_id);
        let command = match ttl_ms {
            0 => redis::cmd("DEL").arg(key).clone(),
            ms => redis::cmd("PEXPIRE").arg(key).arg(ms).clone(),
        };
        command
            .query_async::<()>(&mut self.con.clone())
            .await
            .map_err(be)
    }
}
