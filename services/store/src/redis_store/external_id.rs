//! Outside ids mapped to agents (`ExternalIds`), in the slot of the encoded key's partition
//! (`k` below; not the agent's): a mapping kept with its agent is a field of the hash
//! `{<ns>:p<k>}:extids` (`ExternalKey::encoded` → `ExternalClaim::encode`: the bare agent id for
//! A2A's contexts, as every mapping was before claims had more), a timed one a string
//! `{<ns>:p<k>}:extid:<encoded key>` with its expiry (`SET … PX`: Redis forgets it, nothing
//! timed stays). Both are in one slot, so one script reads or writes a key's mapping wherever
//! it is. Beside each agent, the set of keys that map to it (`…:a:<id>:extids`, deleted with
//! its other keys) lists every mapping kept with it or settled; it is written before the
//! mapping, so such a key never maps to an agent whose deletion would not find it. An
//! unsettled timed mapping (a spawn's key while the spawn runs) is not listed there: the agent
//! may never be written, and its set would then stay for good; that mapping lasts its time at
//! most. A mapping is dropped by a deletion only while it still names the agent dropped.

use super::{RedisStore, be};
use agentd_ports::{ExternalClaim, ExternalKey, Retention, StoreResult};
use redis::{Script, cmd};
use std::sync::LazyLock;

/// `KEYS[1]` = the hash, `KEYS[2]` = the timed string, `ARGV[1]` = the encoded key, `ARGV[2]`
/// = the claim, `ARGV[3]` = how long to keep it (ms; `0`: with its agent): the first claim's
/// text if the key maps already, else `false` after mapping it.
static CLAIM: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
local kept = redis.call('HGET', KEYS[1], ARGV[1])
if kept then return kept end
local timed = redis.call('GET', KEYS[2])
if timed then return timed end
if ARGV[3] == '0' then
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
else
  redis.call('SET', KEYS[2], ARGV[2], 'PX', ARGV[3])
end
return false
",
    )
});

/// `KEYS` as [`CLAIM`]'s, `ARGV[1]` = the encoded key, `ARGV[2]` = the agent, `ARGV[3]` = how
/// long to keep it (ms; `0`: with its agent): marks the mapping settled if it maps to that
/// agent (`ExternalClaim::encode` of a settled claim: the bare agent id without a
/// fingerprint), kept as `ARGV[3]` says; 1 if it did.
static SETTLE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
local v = redis.call('HGET', KEYS[1], ARGV[1]) or redis.call('GET', KEYS[2])
if not v then return 0 end
local agent, fingerprint = string.match(v, '^([^\31]*)\31[01]\31(.*)$')
if not agent then agent = v; fingerprint = '' end
if agent ~= ARGV[2] then return 0 end
local settled = agent
if fingerprint ~= '' then settled = agent .. '\31' .. '1' .. '\31' .. fingerprint end
if ARGV[3] == '0' then
  redis.call('DEL', KEYS[2])
  redis.call('HSET', KEYS[1], ARGV[1], settled)
else
  redis.call('HDEL', KEYS[1], ARGV[1])
  redis.call('SET', KEYS[2], settled, 'PX', ARGV[3])
end
return 1
",
    )
});

/// `KEYS` as [`CLAIM`]'s, `ARGV[1]` = the encoded key: the key's mapping, if any.
static GET: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
return redis.call('HGET', KEYS[1], ARGV[1]) or redis.call('GET', KEYS[2])
",
    )
});

/// `KEYS` as [`CLAIM`]'s, `ARGV[1]` = the encoded key, `ARGV[2]` = an encoded claim: drops the
/// key's mapping if it is that claim; 1 if it did.
static RELEASE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
if redis.call('HGET', KEYS[1], ARGV[1]) == ARGV[2] then
  return redis.call('HDEL', KEYS[1], ARGV[1])
end
if redis.call('GET', KEYS[2]) == ARGV[2] then
  return redis.call('DEL', KEYS[2])
end
return 0
",
    )
});

/// `KEYS` as [`CLAIM`]'s, `ARGV[1]` = the encoded key, `ARGV[2]` = an agent: drops the key's
/// mapping if it maps to that agent (the agent's deletion).
static DROP_OF_AGENT: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
local v = redis.call('HGET', KEYS[1], ARGV[1])
if v and string.match(v, '^[^\31]*') == ARGV[2] then
  redis.call('HDEL', KEYS[1], ARGV[1])
end
v = redis.call('GET', KEYS[2])
if v and string.match(v, '^[^\31]*') == ARGV[2] then
  redis.call('DEL', KEYS[2])
end
return 0
",
    )
});

/// `ARGV[3]` of [`CLAIM`] and [`SETTLE`]: `0` for a mapping kept with its agent, else its
/// time to live (at least 1 ms).
fn ttl_arg(keep: Retention) -> u64 {
    match keep {
        Retention::WithAgent => 0,
        Retention::For { ms } => ms.max(1),
    }
}

impl RedisStore {
    fn agent_external_ids(&self, agent_id: &str) -> String {
        self.keys.agent_part(agent_id, "extids")
    }

    /// A script on the two keys that may hold the mapping of `encoded`, and it as `ARGV[1]`.
    fn on_mapping(
        &self,
        script: &'static Script,
        encoded: &str,
    ) -> redis::ScriptInvocation<'static> {
        let mut run = script.prepare_invoke();
        run.key(self.keys.external_ids(encoded))
            .key(self.keys.external_id_timed(encoded))
            .arg(encoded);
        run
    }

    async fn list_for_agent(&self, agent_id: &str, encoded: &str, add: bool) -> StoreResult<()> {
        cmd(if add { "SADD" } else { "SREM" })
            .arg(self.agent_external_ids(agent_id))
            .arg(encoded)
            .query_async::<()>(&mut self.con.clone())
            .await
            .map_err(be)
    }

    /// See `ExternalIds::external_id_claim`.
    pub(super) async fn claim_external_id(
        &self,
        key: &ExternalKey,
        claim: &ExternalClaim,
        keep: Retention,
    ) -> StoreResult<Option<ExternalClaim>> {
        let encoded = key.encoded();
        let listed = claim.settled || keep == Retention::WithAgent;
        if listed {
            self.list_for_agent(&claim.agent_id, &encoded, true).await?;
        }
        let first: Option<String> = self
            .on_mapping(&CLAIM, &encoded)
            .arg(claim.encode())
            .arg(ttl_arg(keep))
            .invoke_async(&mut self.con.clone())
            .await
            .map_err(be)?;
        let first = first.as_deref().map(ExternalClaim::decode);
        if listed && first.as_ref().is_some_and(|f| f.agent_id != claim.agent_id) {
            self.list_for_agent(&claim.agent_id, &encoded, false)
                .await?;
        }
        Ok(first)
    }

    /// See `ExternalIds::external_id_settle`.
    pub(super) async fn settle_external_id(
        &self,
        key: &ExternalKey,
        agent_id: &str,
        keep: Retention,
    ) -> StoreResult<()> {
        let encoded = key.encoded();
        self.list_for_agent(agent_id, &encoded, true).await?;
        self.on_mapping(&SETTLE, &encoded)
            .arg(agent_id)
            .arg(ttl_arg(keep))
            .invoke_async::<i64>(&mut self.con.clone())
            .await
            .map(|_| ())
            .map_err(be)
    }

    /// See `ExternalIds::external_id_get`.
    pub(super) async fn get_external_id(
        &self,
        key: &ExternalKey,
    ) -> StoreResult<Option<ExternalClaim>> {
        let got: Option<String> = self
            .on_mapping(&GET, &key.encoded())
            .invoke_async(&mut self.con.clone())
            .await
            .map_err(be)?;
        Ok(got.as_deref().map(ExternalClaim::decode))
    }

    /// See `ExternalIds::external_id_release`.
    pub(super) async fn release_external_id(
        &self,
        key: &ExternalKey,
        claim: &ExternalClaim,
    ) -> StoreResult<()> {
        let encoded = key.encoded();
        let released: i64 = self
            .on_mapping(&RELEASE, &encoded)
            .arg(claim.encode())
            .invoke_async(&mut self.con.clone())
            .await
            .map_err(be)?;
        if released > 0 {
            self.list_for_agent(&claim.agent_id, &encoded, false)
                .await?;
        }
        Ok(())
    }

    /// Drops the mappings to agent `agent_id` (its deletion, before its own keys go).
    pub(super) async fn release_external_ids_of(&self, agent_id: &str) -> StoreResult<()> {
        let keys: Vec<String> = cmd("SMEMBERS")
            .arg(self.agent_external_ids(agent_id))
            .query_async(&mut self.con.clone())
            .await
            .map_err(be)?;
        for encoded in keys {
            self.on_mapping(&DROP_OF_AGENT, &encoded)
                .arg(agent_id)
                .invoke_async::<()>(&mut self.con.clone())
                .await
                .map_err(be)?;
        }
        Ok(())
    }
}
