//! [`SpawnClaims`]: the spawn idempotency claims of a store that one process alone uses (the
//! memory and the embedded store), kept in that process's memory. A restart forgets them,
//! which loses nothing: an idempotent spawn's agent id is derived from its key, so a retry
//! after a restart finds the agent itself.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Claims by derived agent id: the fingerprint of the request that made each, and when it
/// expires. Expired claims are dropped as new ones are made, so the map holds at most the
/// claims of one expiry time.
#[derive(Default)]
pub(crate) struct SpawnClaims {
    claims: Mutex<HashMap<String, (String, Instant)>>,
}

impl SpawnClaims {
    /// Claims `agent_id` for `fingerprint` for `ttl_ms`: `None` if the claim is new, else the
    /// fingerprint of the live claim (see `ThreadStore::spawn_claim`).
    pub(crate) fn claim(&self, agent_id: &str, fingerprint: &str, ttl_ms: u64) -> Option<String> {
        let now = Instant::now();
        let mut claims = self.claims.lock().unwrap_or_else(|p| p.into_inner());
        claims.retain(|_, (_, until)| *until > now);
        if let Some((first, _)) = claims.get(agent_id) {
            return Some(first.clone());
        }
        let until = now + Duration::from_millis(ttl_ms);
        claims.insert(agent_id.to_string(), (fingerprint.to_string(), until));
        None
    }

    /// Makes the claim of `agent_id` expire `ttl_ms` from now; drops it with 0.
    pub(crate) fn expire(&self, agent_id: &str, ttl_ms: u64) {
        let mut claims = self.claims.lock().unwrap_or_else(|p| p.into_inner());
        match ttl_ms {
            0 => {
                claims.remove(agent_id);
            }
            ms => {
                if let Some((_, until)) = claims.get_mut(agent_id) {
                    *until = Instant::now() + Duration::from_millis(ms);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::SpawnClaims;

    #[test]
    fn a_claim_answers_the_first_fingerprint_until_released_or_expired() {
        let claims = SpawnClaims::default();
        assert_eq!(claims.claim("a", "f1", 60_000), None);
        assert_eq!(claims.claim("a", "f2", 60_000).as_deref(), Some("f1"));
        claims.expire("a", 0);
        assert_eq!(claims.claim("a", "f2", 0), None);
        assert_eq!(
            claims.claim("a", "f3", 60_000),
            None,
            "an expired claim is gone"
        );
    }
}
