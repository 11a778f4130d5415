//! [`Claims`]: the idempotency claims of the memory store, kept in the process's memory (the
//! store itself lives no longer).

use agentd_ports::{Claim, ClaimEnd};
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Claims by `(home, key)`: the first claim of each, and when it expires. Expired claims are
/// dropped as new ones are made, so the map holds at most the claims of one expiry time.
#[derive(Default)]
pub(crate) struct Claims {
    claims: Mutex<HashMap<(String, String), (Claim, Instant)>>,
}

impl Claims {
    /// Claims `key` of `home` for `fingerprint` for `ttl_ms`: `None` if the claim is new, else
    /// the live claim (see `IdempotencyClaims::idempotency_claim`).
    pub(crate) fn claim(
        &self,
        home: &str,
        key: &str,
        fingerprint: &str,
        ttl_ms: u64,
    ) -> Option<Claim> {
        let now = Instant::now();
        let mut claims = self.claims.lock().unwrap_or_else(|p| p.into_inner());
        claims.retain(|_, (_, until)| *until > now);
        let id = (home.to_string(), key.to_string());
        if let Some((first, _)) = claims.get(&id) {
            return Some(first.clone());
        }
        let claim = Claim {
            fingerprint: fingerprint.to_string(),
            settled: false,
        };
        claims.insert(id, (claim, now + Duration::from_millis(ttl_ms)));
        None
    }

    /// Ends the claim of `key` of `home` as `end` says.
    pub(crate) fn end(&self, home: &str, key: &str, end: ClaimEnd) {
        let mut claims = self.claims.lock().unwrap_or_else(|p| p.into_inner());
        let id = (home.to_string(), key.to_string());
        match end {
            ClaimEnd::Released => {
                claims.remove(&id);
            }
            ClaimEnd::Settled { keep_ms } => {
                if let Some((claim, until)) = claims.get_mut(&id) {
                    claim.settled = true;
                    *until = Instant::now() + Duration::from_millis(keep_ms);
                }
            }
        }
    }
}
