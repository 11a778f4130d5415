//! Idempotency claims (`Idempotency-Key`, `IdempotencyClaims::idempotency_claim`): a string
//! `{<ns>:p<k>}:a:<home>:claim:<key>` in the slot of the agent the guarded work writes to,
//! holding the first request's claim (`Claim::encode`: settled or not, its fingerprint) with an
//! expiry. The claim and what it guards are in one slot, so a failover keeps both or neither
//! of what the master had not replicated; on one node, writes replicate in order, so a claim
//! found settled after a failover was settled after its work was written.

use super::{RedisStore, be};
use agentd_ports::{Claim, ClaimEnd, StoreResult};
use redis::Script;

/// `KEYS[1]` = the claim, `ARGV[1]` = the new claim's text, `ARGV[2]` = its time to live
/// (ms): the claim's first text if there is one, else `false` after setting it.
const CLAIM: &str = r"
local first = redis.call('GET', KEYS[1])
if first then return first end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return false
";

/// `KEYS[1]` = the claim, `ARGV[1]` = how long to keep it (ms): marks it settled and keeps it
/// that long; a missing claim stays missing.
const SETTLE: &str = r"
local first = redis.call('GET', KEYS[1])
if not first then return 0 end
local fingerprint = string.match(first, '^[01]:(.*)$') or first
redis.call('SET', KEYS[1], '1:' .. fingerprint, 'PX', ARGV[1])
return 1
";

impl RedisStore {
    /// The key of claim `key` of agent `home`.
    fn claim_key(&self, home: &str, key: &str) -> String {
        self.keys.agent_part(home, &format!("claim:{key}"))
    }

    /// See `IdempotencyClaims::idempotency_claim`.
    pub(super) async fn claim(
        &self,
        home: &str,
        key: &str,
        fingerprint: &str,
        ttl_ms: u64,
    ) -> StoreResult<Option<Claim>> {
        let claim = Claim {
            fingerprint: fingerprint.to_string(),
            settled: false,
        };
        let first: Option<String> = Script::new(CLAIM)
            .key(self.claim_key(home, key))
            .arg(claim.encode())
            .arg(ttl_ms.max(1))
            .invoke_async(&mut self.con.clone())
            .await
            .map_err(be)?;
        Ok(first.as_deref().map(Claim::decode))
    }

    /// See `IdempotencyClaims::idempotency_claim_end`.
    pub(super) async fn end_claim(&self, home: &str, key: &str, end: ClaimEnd) -> StoreResult<()> {
        let key = self.claim_key(home, key);
        match end {
            ClaimEnd::Released => redis::cmd("DEL")
                .arg(key)
                .query_async::<()>(&mut self.con.clone())
                .await
                .map_err(be),
            ClaimEnd::Settled { keep_ms } => Script::new(SETTLE)
                .key(key)
                .arg(keep_ms.max(1))
                .invoke_async::<i64>(&mut self.con.clone())
                .await
                .map(|_| ())
                .map_err(be),
        }
    }
}
