//! Id generation. New things get time-ordered v7 ids; outputs derived from an input get v8 ids
//! computed from the input id and the step (XXH3-128 of both), so a re-run after a crash yields
//! the same ids and de-duplicates instead of doubling.
//!
//! Why XXH3 and not a name-based v5 id (SHA-1): a derived id is made twice per message on the
//! hot path, where a cryptographic hash is far costlier and buys nothing: ids are keys, not
//! secrets, and inputs are themselves random v7 ids. The algorithm is fixed by its specification (stable across
//! versions and machines), which is what replay de-duplication needs.

use uuid::Uuid;

/// A fresh time-ordered id (uuid v7): the Unix time in ms, a 12-bit sequence that keeps the
/// ids of one process strictly increasing (within a millisecond too: past 4,096 ids in one,
/// the time field runs ahead, as RFC 9562 allows) and 62 random bits.
///
/// Why not `Uuid::now_v7`: it takes a lock and a ChaCha block per id, and every envelope makes
/// one; this is an atomic step and a wyrand draw. The ids are keys, not secrets, as above.
pub fn new_id() -> Uuid {
    use std::sync::atomic::{AtomicU64, Ordering};
    /// The last id's time (ms) and sequence, as `ms << 12 | sequence`.
    static LAST: AtomicU64 = AtomicU64::new(0);
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    let mut last = LAST.load(Ordering::Relaxed);
    let stamp = loop {
        let next = (now_ms << 12).max(last + 1);
        match LAST.compare_exchange_weak(last, next, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => break next,
            Err(seen) => last = seen,
        }
    };
    let high = (stamp >> 12) << 16 | 0x7 << 12 | (stamp & 0xfff);
    let low = random_u64() >> 2 | 0x8000_0000_0000_0000;
    Uuid::from_u64_pair(high, low)
}

/// 64 random bits from this thread's wyrand generator, seeded from the standard library's
/// per-process random hash keys and the thread's id.
fn random_u64() -> u64 {
    use std::cell::Cell;
    use std::hash::BuildHasher;
    thread_local! {
        static STATE: Cell<u64> = Cell::new(
            std::collections::hash_map::RandomState::new().hash_one(std::thread::current().id()),
        );
    }
    STATE.with(|s| {
        let state = s.get().wrapping_add(0xa076_1d64_78bd_642f);
        s.set(state);
        let t = u128::from(state) * u128::from(state ^ 0xe703_7ed1_a0b4_28db);
        (t >> 64) as u64 ^ t as u64
    })
}

/// Steps up to this length are hashed from a stack buffer (all of agentd's own are).
const INLINE_STEP: usize = 64;

/// An id derived from `input` and `step`: equal inputs always give equal ids.
pub fn derived_id(input: Uuid, step: &str) -> Uuid {
    derived_from_bytes(input, step.as_bytes())
}

/// The id of step `n` of the turn caused by `input`: `derived_id(input, "step-{n}")` without
/// formatting a string.
pub fn derived_step_id(input: Uuid, n: u64) -> Uuid {
    let (digits, len) = decimal(n);
    let mut step = [0u8; 5 + 20];
    step[..5].copy_from_slice(b"step-");
    step[5..5 + len].copy_from_slice(&digits[20 - len..]);
    derived_from_bytes(input, &step[..5 + len])
}

fn derived_from_bytes(input: Uuid, step: &[u8]) -> Uuid {
    let hash = if step.len() <= INLINE_STEP {
        let mut buf = [0u8; 16 + INLINE_STEP];
        buf[..16].copy_from_slice(input.as_bytes());
        buf[16..16 + step.len()].copy_from_slice(step);
        xxhash_rust::xxh3::xxh3_128(&buf[..16 + step.len()])
    } else {
        let mut bytes = Vec::with_capacity(16 + step.len());
        bytes.extend_from_slice(input.as_bytes());
        bytes.extend_from_slice(step);
        xxhash_rust::xxh3::xxh3_128(&bytes)
    };
    Uuid::new_v8(hash.to_be_bytes())
}

/// An id derived from `input` and `step` as [`derived_id`] is, in the shape of a v7 id made at
/// `at_ms` (the time field `at_ms`, the rest from the hash): for an envelope whose id must be
/// the same each time its sender makes it again (a tool call run again after a crash), and
/// whose first send is still known as one ([`crate::Envelope::is_first_send`], which a
/// receiver may take without a look-up; a send that may repeat one carries `attempt` 2).
pub fn derived_v7(input: Uuid, step: &str, at_ms: u64) -> Uuid {
    let (hashed_high, hashed_low) = derived_id(input, step).as_u64_pair();
    let high = (at_ms & 0xffff_ffff_ffff) << 16 | 0x7 << 12 | (hashed_high & 0xfff);
    Uuid::from_u64_pair(high, hashed_low >> 2 | 0x8000_0000_0000_0000)
}

/// `n` in decimal, right-aligned in a 20-byte buffer, and its length.
fn decimal(mut n: u64) -> ([u8; 20], usize) {
    let mut buf = [0u8; 20];
    let mut len = 0;
    loop {
        len += 1;
        buf[20 - len] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            return (buf, len);
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn new_ids_are_v7_increasing_and_distinct_across_threads() {
        let mut last = new_id();
        assert_eq!(last.get_version_num(), 7);
        assert_eq!(last.get_variant(), uuid::Variant::RFC4122);
        let now_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as u64;
        let (secs, nanos) = last.get_timestamp().unwrap().to_unix();
        let id_ms = secs * 1000 + u64::from(nanos) / 1_000_000;
        assert!(id_ms.abs_diff(now_ms) < 5_000, "{id_ms} vs {now_ms}");
        for _ in 0..20_000 {
            let id = new_id();
            assert!(id > last, "{id} after {last}");
            last = id;
        }
        let threads: Vec<_> = (0..4)
            .map(|_| std::thread::spawn(|| (0..5_000).map(|_| new_id()).collect::<Vec<_>>()))
            .collect();
        let mut all: Vec<Uuid> = threads
            .into_iter()
            .flat_map(|t| t.join().unwrap())
            .collect();
        let n = all.len();
        all.sort();
        all.dedup();
        assert_eq!(all.len(), n, "no id twice");
        let random: std::collections::HashSet<u64> =
            all.iter().map(|id| id.as_u64_pair().1).collect();
        assert_eq!(random.len(), n, "random parts differ");
    }

    #[test]
    fn derived_ids_are_stable_and_distinct() {
        let input = new_id();
        assert_eq!(derived_id(input, "1"), derived_id(input, "1"));
        assert_ne!(derived_id(input, "1"), derived_id(input, "2"));
        assert_ne!(derived_id(input, "1"), derived_id(new_id(), "1"));
        assert_eq!(derived_id(input, "1").get_version_num(), 8);
    }

    #[test]
    fn derived_v7_ids_are_stable_v7_ids_of_their_time() {
        let input = new_id();
        let id = derived_v7(input, "manage", 1_700_000_000_123);
        assert_eq!(id, derived_v7(input, "manage", 1_700_000_000_123));
        assert_ne!(id, derived_v7(input, "post", 1_700_000_000_123));
        assert_ne!(id, derived_v7(new_id(), "manage", 1_700_000_000_123));
        assert_eq!(id.get_version_num(), 7);
        assert_eq!(id.get_variant(), uuid::Variant::RFC4122);
        let (secs, nanos) = id.get_timestamp().unwrap().to_unix();
        assert_eq!(
            secs * 1000 + u64::from(nanos) / 1_000_000,
            1_700_000_000_123
        );
    }

    #[test]
    fn derived_ids_do_not_change_between_versions() {
        // Replays across an upgrade de-duplicate only if the same input and step still give
        // the same id: this pins the algorithm.
        let input = Uuid::from_u128(0x0193_0000_0000_7000_8000_0000_0000_0001);
        assert_eq!(
            derived_id(input, "input").to_string(),
            "ad4a1af2-5074-859e-8942-43c33232cf96"
        );
    }

    #[test]
    fn step_ids_equal_their_formatted_form_and_long_steps_hash_whole() {
        let input = new_id();
        for n in [0, 1, 9, 10, 12_345, u64::MAX] {
            assert_eq!(
                derived_step_id(input, n),
                derived_id(input, &format!("step-{n}"))
            );
        }
        let long = "x".repeat(200);
        assert_ne!(derived_id(input, &long), derived_id(input, &long[..199]));
        assert_eq!(derived_id(input, &long), derived_id(input, &long.clone()));
    }
}
