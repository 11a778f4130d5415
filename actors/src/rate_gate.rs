//! One gate per model provider: once a provider reached over HTTP (`openai`, `anthropic`)
//! answers `429` with a reset time, every agent of the process that would call the same
//! provider waits until then — it shows
//! `waiting_rate_limit` and holds no turn slot — instead of asking again and being refused.
//! Providers with `requests_per_minute` or `tokens_per_minute` are also paced here (GCRA, by
//! `governor`): a call the pace does not allow yet waits the same way.

use crate::config::ProviderRates;
use governor::clock::{Clock as _, DefaultClock};
use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};
use std::collections::HashMap;
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

/// The providers' gates of one process.
#[derive(Debug, Default)]
pub(crate) struct RateGates {
    /// Provider → when its gate opens, ms since the epoch.
    closed_until: Mutex<HashMap<String, u64>>,
    /// The latest time any gate opens (0: none was ever closed). Lets the common case — every
    /// gate open — answer without the lock or a map look-up.
    latest: AtomicU64,
    /// Provider → its pace, made on its first call.
    paces: Mutex<HashMap<String, Arc<Pace>>>,
}

/// The request and token limiters of one provider.
#[derive(Debug)]
struct Pace {
    requests: Option<DefaultDirectRateLimiter>,
    tokens: Option<DefaultDirectRateLimiter>,
}

impl Pace {
    fn of(rates: &ProviderRates) -> Self {
        let per_minute =
            |n: u32| NonZeroU32::new(n).map(|n| RateLimiter::direct(Quota::per_minute(n)));
        Pace {
            requests: per_minute(rates.requests_per_minute),
            tokens: per_minute(rates.tokens_per_minute),
        }
    }
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

    /// How long a call of `tokens` estimated input tokens to `provider` must wait under its
    /// `rates` (`None`: it may go now, and is counted). A call larger than the whole token rate
    /// goes as soon as the request rate lets it (it could never fit otherwise).
    pub(crate) fn pace(
        &self,
        provider: &str,
        rates: &ProviderRates,
        tokens: u64,
    ) -> Option<Duration> {
        let pace = {
            let mut paces = self.paces.lock().unwrap_or_else(PoisonError::into_inner);
            Arc::clone(
                paces
                    .entry(provider.to_string())
                    .or_insert_with(|| Arc::new(Pace::of(rates))),
            )
        };
        let clock = DefaultClock::default();
        if let Some(limiter) = &pace.tokens
            && let Some(n) = NonZeroU32::new(u32::try_from(tokens).unwrap_or(u32::MAX))
            && let Ok(Err(not_until)) = limiter.check_n(n)
        {
            return Some(not_until.wait_time_from(clock.now()));
        }
        if let Some(limiter) = &pace.requests
            && let Err(not_until) = limiter.check()
        {
            return Some(not_until.wait_time_from(clock.now()));
        }
        None
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

    #[test]
    fn a_paced_provider_lets_its_rate_through_then_says_how_long_to_wait() {
        let gates = RateGates::default();
        let rates = ProviderRates {
            requests_per_minute: 2,
            tokens_per_minute: 0,
        };
        assert_eq!(gates.pace("p", &rates, 10), None);
        assert_eq!(gates.pace("p", &rates, 10), None);
        let wait = gates.pace("p", &rates, 10).unwrap_or_default();
        assert!(
            wait > Duration::from_secs(25) && wait <= Duration::from_secs(30),
            "{wait:?}"
        );
        assert_eq!(
            gates.pace("q", &rates, 10),
            None,
            "each provider has its own pace"
        );
        let tokens = ProviderRates {
            requests_per_minute: 0,
            tokens_per_minute: 1_000,
        };
        assert_eq!(gates.pace("t", &tokens, 800), None);
        assert!(
            gates.pace("t", &tokens, 800).is_some(),
            "1,600 tokens do not fit a minute's 1,000"
        );
        assert_eq!(
            gates.pace("u", &tokens, 5_000),
            None,
            "larger than the rate: it goes"
        );
    }
}
