//! Outside ids mapped to agents (`ExternalIds::external_id_claim`): a hash per partition slot,
//! `{<ns>:p<k>}:extids` (`ExternalKey::encoded` → agent id, `k` the encoded key's partition),
//! and beside each agent the set of keys that map to it (`…:a:<id>:extids`, deleted with its
//! other keys). The two are in different slots: the agent's set is written first, so a key
//! never maps to an agent whose deletion would not find it; a mapping is dropped only while
//! it still names the agent dropping it.

use super::{RedisStore, be};
use agentd_ports::{ExternalKey, StoreResult};
use redis::{Script, cmd};

/// `KEYS[1]` = the hash, `ARGV[1]` = the encoded key, `ARGV[2]` = the agent: drops the key's
/// mapping if it maps to that agent.
const RELEASE: &str = r"
if redis.call('HGET', KEYS[1], ARGV[1]) == ARGV[2] then
  return redis.call('HDEL', KEYS[1], ARGV[1])
end
return 0
";

impl RedisStore {
    fn agent_external_ids(&self, agent_id: &str) -> String {
        self.keys.agent_part(agent_id, "extids")
    }

    /// See `ExternalIds::external_id_claim`.
    pub(super) async fn claim_external_id(
        &self,
        key: &ExternalKey,
        agent_id: &str,
    ) -> StoreResult<String> {
        let encoded = key.encoded();
        let mut con = self.con.clone();
        cmd("SADD")
            .arg(self.agent_external_ids(agent_id))
            .arg(&encoded)
            .query_async::<()>(&mut con)
            .await
            .map_err(be)?;
        let map = self.keys.external_ids(&encoded);
        let new: bool = cmd("HSETNX")
            .arg(&map)
            .arg(&encoded)
            .arg(agent_id)
            .query_async(&mut con)
            .await
            .map_err(be)?;
        if new {
            return Ok(agent_id.to_string());
        }
        let mapped: Option<String> = cmd("HGET")
            .arg(&map)
            .arg(&encoded)
            .query_async(&mut con)
            .await
            .map_err(be)?;
        if mapped.as_deref() != Some(agent_id) {
            cmd("SREM")
                .arg(self.agent_external_ids(agent_id))
                .arg(&encoded)
                .query_async::<()>(&mut con)
                .await
                .map_err(be)?;
        }
        match mapped {
            Some(a) => Ok(a),
            // Released between the two calls: claim it again.
            None => Box::pin(self.claim_external_id(key, agent_id)).await,
        }
    }

    /// See `ExternalIds::external_id_get`.
    pub(super) async fn get_external_id(&self, key: &ExternalKey) -> StoreResult<Option<String>> {
        let encoded = key.encoded();
        cmd("HGET")
            .arg(self.keys.external_ids(&encoded))
            .arg(&encoded)
            .query_async(&mut self.con.clone())
            .await
            .map_err(be)
    }

    /// See `ExternalIds::external_id_release`.
    pub(super) async fn release_external_id(
        &self,
        key: &ExternalKey,
        agent_id: &str,
    ) -> StoreResult<()> {
        self.release_encoded(&key.encoded(), agent_id).await
    }

    async fn release_encoded(&self, encoded: &str, agent_id: &str) -> StoreResult<()> {
        let mut con = self.con.clone();
        Script::new(RELEASE)
            .key(self.keys.external_ids(encoded))
            .arg(encoded)
            .arg(agent_id)
            .invoke_async::<()>(&mut con)
            .await
            .map_err(be)?;
        cmd("SREM")
            .arg(self.agent_external_ids(agent_id))
            .arg(encoded)
            .query_async::<()>(&mut con)
            .await
            .map_err(be)
    }

    /// Drops the mappings to agent `agent_id` (its deletion, before its own keys go).
    pub(super) async fn release_external_ids_of(&self, agent_id: &str) -> StoreResult<()> {
        let keys: Vec<String> = cmd("SMEMBERS")
            .arg(self.agent_external_ids(agent_id))
            .query_async(&mut self.con.clone())
            .await
            .map_err(be)?;
        for encoded in keys {
            self.release_encoded(&encoded, agent_id).await?;
        }
        Ok(())
    }
}
