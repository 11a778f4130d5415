//! Hash maps for the per-message path. Agent ids are 36-character strings and every message
//! looks several of them up (the directory, the store's threads and inboxes, the status gauge);
//! foldhash (seeded at random per process) hashes them several times faster than std's
//! SipHash, which showed in profiles of the in-process message path.

/// A `HashMap` with foldhash's per-process random seed.
pub type FastHashMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;

/// A `HashSet` with foldhash's per-process random seed.
pub type FastHashSet<T> = std::collections::HashSet<T, foldhash::fast::RandomState>;
