//! One gate per model provider: once a provider answers `429` with a reset time, every agent of
//! the process that would call the same provider waits until then — it shows
//! `waiting_rate_limit` and holds no turn slot — instead of asking again and being refused.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};

/// The providers' gates of one process.
#[derive(Debug, Default)]
pub(crate) struct RateGates {
    /// Provider → when its gate opens, ms since the epoch.
    closed_until: Mutex<HashMap<String, u64>>,
    /// The latest time any gate opens (0: none was ever closed). Lets the common case — every
    /// gate open — answer without the lock or a map look-up.
    latest: AtomicU64,
}

impl RateGates {
    /// Whether any gate was ever closed (no lock taken, no clock read): until then every call
    /// skips the gates.
    pub(crate) fn ever_closed(&self) -> bool {
        self.latest.load(Ordering::Relaxed) > 0
    }

    /// Whether some gate may still be closed at `now_ms` (no lock taken).
    pub(crate) fn any_closed(&self, now_ms: u64) -> bool {
        self.latest.load(Ordering::Relaxed) > now_ms
    }

    /// When the gate of `provider` opens, if it is closed at `now_ms`.
    pub(crate) fn closed_until(&self, provider: &str, now_ms: u64) -> Option<u64> {
        if !self.any_closed(now_ms) {
            return None;
        }
        let gates = self
            .closed_until
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        gates.get(provider).copied().filter(|until| *until > now_ms)
    }

    /// Closes the gate of `provider` until `until_ms` (a later time than the one set wins).
    pub(crate) fn close(&self, provider: &str, until_ms: u64) {
        let mut gates = self
            .closed_until
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let until = gates.entry(provider.to_string()).or_insert(0);
        *until = (*until).max(until_ms);
        self.latest.fetch_max(until_ms, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gate_closes_for_its_provider_until_its_reset_time() {
        let gates = RateGates::default();
        assert_eq!(gates.closed_until("p", 0), None);
        gates.close("p", 5_000);
        gates.close("p", 3_000);
        assert_eq!(
            gates.closed_until("p", 1_000),
            Some(5_000),
            "the later reset wins"
        );
        assert_eq!(
            gates.closed_until("q", 1_000),
            None,
            "other providers are open"
        );
        assert_eq!(
            gates.closed_until("p", 5_000),
            None,
            "open at the reset time"
        );
        assert!(!gates.any_closed(5_000));
    }
}
