//! The times a partition lease's length (`redis.lease_ms`) sets: how often leases are renewed,
//! when a process fences itself, and how much older than that a lease must be for another
//! process to take it from a holder gone from Redis. They move together with the lease, so
//! that whatever the lease, a holder cut off from Redis has stopped reading and delivering
//! before its partitions can move.

use std::time::Duration;

/// The times of one lease length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LeaseTimes {
    /// Between two lease rounds (renewals, heartbeat, takeovers), and the longest a round
    /// waits for any of its requests: a sixteenth of the lease.
    pub(crate) round: Duration,
    /// A partition whose lease this process has not renewed for this long is neither read nor
    /// delivered to (self-fencing): a quarter of the lease, four rounds.
    pub(crate) fence: Duration,
    /// How much longer than the fence a gone holder's lease must have gone unrenewed before it
    /// is taken (by the Redis clock): a twentieth of the lease. It covers a read the holder
    /// sent just before it fenced itself (a read blocks no longer than the margin).
    pub(crate) margin: Duration,
}

impl LeaseTimes {
    /// The times of a lease of `lease_ms`.
    pub(crate) fn of(lease_ms: u64) -> LeaseTimes {
        LeaseTimes {
            round: Duration::from_millis((lease_ms / 16).max(5)),
            fence: Duration::from_millis(lease_ms / 4),
            margin: Duration::from_millis(lease_ms / 20),
        }
    }

    /// The longest a lease round waits for one answer of Redis: a round, and 100 ms at least
    /// (a short lease must not make a busy process give up on answers on their way).
    pub(crate) fn wait(&self) -> Duration {
        self.round.max(Duration::from_millis(100))
    }

    /// How long a gone holder must not have renewed a lease before it is taken from it.
    pub(crate) fn takeover_age(&self) -> Duration {
        self.fence + self.margin
    }

    /// The longest a partition read blocks: within the margin, and 200 ms at most (an idle
    /// reader reads again that often).
    pub(crate) fn read_block_ms(&self) -> u64 {
        (self.margin.as_millis() as u64).clamp(1, 200)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_lease_moves_a_gone_holders_partitions_within_two_seconds() {
        let t = LeaseTimes::of(5_000);
        assert_eq!(t.round, Duration::from_millis(312));
        assert_eq!(t.fence, Duration::from_millis(1_250));
        assert_eq!(t.takeover_age(), Duration::from_millis(1_500));
        // The holder's last renewal was at most a round before it died, so a taker's round
        // after the takeover age finds the lease old enough: within 2 s of the death.
        assert!(t.takeover_age() + t.round / 2 < Duration::from_secs(2));
    }

    #[test]
    fn a_holder_fences_itself_after_missed_renewals_and_its_reads_end_before_a_takeover() {
        for lease_ms in [100, 1_000, 5_000, 60_000] {
            let t = LeaseTimes::of(lease_ms);
            assert!(t.fence >= t.round * 2, "{lease_ms}: {t:?}");
            assert!(
                Duration::from_millis(t.read_block_ms()) <= t.margin,
                "{lease_ms}: {t:?}"
            );
            assert!(
                t.takeover_age() < Duration::from_millis(lease_ms),
                "{lease_ms}"
            );
        }
    }
}
