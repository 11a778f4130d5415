//! Hashing: the hash maps of the per-message path, and the stable hash that places agents.
//!
//! Hash maps for the per-message path. Agent ids are 36-character strings and every message
//! looks some of them up (the directory, the memory store's agents, the status gauge of an
//! agent that has not run a turn), so their hashing is on the hot path: foldhash (seeded at
//! random per process) hashes them, not std's SipHash (why: BENCHMARKS.md, "Choices the figures
//! settled").

/// A `HashMap` with foldhash's per-process random seed.
pub type FastHashMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;

/// A `HashSet` with foldhash's per-process random seed.
pub type FastHashSet<T> = std::collections::HashSet<T, foldhash::fast::RandomState>;

/// FNV-1a 64: the stable hash that places trees on Arbiters and agents on Redis partitions.
/// Stable across processes and versions (every process of a deployment must agree on an
/// agent's partition), which the maps' seeded hash is not.
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

#[cfg(test)]
mod tests {
    #[test]
    fn fnv1a64_matches_the_published_test_vectors() {
        assert_eq!(super::fnv1a64(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(super::fnv1a64(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(super::fnv1a64(b"foobar"), 0x8594_4171_f739_67e8);
    }
}
