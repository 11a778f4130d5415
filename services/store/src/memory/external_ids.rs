//! Outside ids in the memory store (`ExternalIds`): each key's mapping with its expiry, the
//! keys in the order they expire (so expired ones are dropped by a look at the first few), and
//! the keys that map to each agent (dropped with it).

use super::*;
use agentd_ports::{ExternalClaim, Retention};
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

/// One mapping: its claim, and when it expires (`None`: kept with its agent).
struct Mapping {
    claim: ExternalClaim,
    until: Option<Instant>,
}

/// The outside ids of the store.
#[derive(Default)]
pub(super) struct ExternalMap {
    /// `ExternalKey::encoded` → its mapping.
    mappings: HashMap<String, Mapping>,
    /// (expiry, key) of every timed mapping.
    expiry: BTreeSet<(Instant, String)>,
    /// agent → the keys that map to it (dropped with it).
    of_agent: HashMap<String, HashSet<String>>,
}

impl ExternalMap {
    /// Forgets the mappings expired by `now`.
    fn drop_expired(&mut self, now: Instant) {
        while let Some((until, _)) = self.expiry.first() {
            if *until > now {
                break;
            }
            let Some((_, key)) = self.expiry.pop_first() else {
                break;
            };
            if let Some(m) = self.mappings.remove(&key) {
                self.unlist(&key, &m.claim.agent_id);
            }
        }
    }

    fn unlist(&mut self, key: &str, agent_id: &str) {
        if let Some(keys) = self.of_agent.get_mut(agent_id) {
            keys.remove(key);
            if keys.is_empty() {
                self.of_agent.remove(agent_id);
            }
        }
    }

    /// The live mapping of `key`.
    fn get(&mut self, key: &str) -> Option<&mut Mapping> {
        self.drop_expired(Instant::now());
        self.mappings.get_mut(key)
    }

    /// Sets `key`'s mapping, kept as `keep` says from `now`.
    fn put(&mut self, key: String, claim: ExternalClaim, keep: Retention, now: Instant) {
        self.remove(&key);
        let until = match keep {
            Retention::WithAgent => None,
            Retention::For { ms } => Some(now + Duration::from_millis(ms)),
        };
        if let Some(until) = until {
            self.expiry.insert((until, key.clone()));
        }
        self.of_agent
            .entry(claim.agent_id.clone())
            .or_default()
            .insert(key.clone());
        self.mappings.insert(key, Mapping { claim, until });
    }

    fn remove(&mut self, key: &str) {
        if let Some(m) = self.mappings.remove(key) {
            if let Some(until) = m.until {
                self.expiry.remove(&(until, key.to_string()));
            }
            self.unlist(key, &m.claim.agent_id);
        }
    }

    /// Drops every mapping to `agent_id` (its deletion).
    pub(super) fn drop_agent(&mut self, agent_id: &str) {
        for key in self.of_agent.remove(agent_id).unwrap_or_default() {
            if self
                .mappings
                .get(&key)
                .is_some_and(|m| m.claim.agent_id == agent_id)
            {
                self.remove(&key);
            }
        }
    }
}

#[async_trait]
impl ExternalIds for MemoryStore {
    async fn external_id_claim(
        &self,
        key: &ExternalKey,
        claim: &ExternalClaim,
        keep: Retention,
    ) -> StoreResult<Option<ExternalClaim>> {
        let key = key.encoded();
        let mut inner = self.lock();
        let map = &mut inner.external_ids;
        if let Some(first) = map.get(&key) {
            return Ok(Some(first.claim.clone()));
        }
        map.put(key, claim.clone(), keep, Instant::now());
        Ok(None)
    }

    async fn external_id_settle(
        &self,
        key: &ExternalKey,
        agent_id: &str,
        keep: Retention,
    ) -> StoreResult<()> {
        let key = key.encoded();
        let mut inner = self.lock();
        let map = &mut inner.external_ids;
        let Some(mapped) = map.get(&key).filter(|m| m.claim.agent_id == agent_id) else {
            return Ok(());
        };
        let mut claim = mapped.claim.clone();
        claim.settled = true;
        map.put(key, claim, keep, Instant::now());
        Ok(())
    }

    async fn external_id_get(&self, key: &ExternalKey) -> StoreResult<Option<ExternalClaim>> {
        let mut inner = self.lock();
        Ok(inner
            .external_ids
            .get(&key.encoded())
            .map(|m| m.claim.clone()))
    }

    async fn external_id_release(
        &self,
        key: &ExternalKey,
        claim: &ExternalClaim,
    ) -> StoreResult<()> {
        let key = key.encoded();
        let mut inner = self.lock();
        let map = &mut inner.external_ids;
        if map.get(&key).is_some_and(|m| m.claim == *claim) {
            map.remove(&key);
        }
        Ok(())
    }
}
