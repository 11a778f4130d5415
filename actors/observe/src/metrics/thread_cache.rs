//! Series resolved by each thread: an update looks here first, with no lock and no hashing (a
//! name is compared by address, labels by value; a thread updates a few dozen series), so that
//! the registry's lock and hashing stay off the per-message path.

use super::series::{Counter, Kind, Labels, Series};
use std::cell::RefCell;

/// One series this thread resolved.
struct Resolved {
    registry: u64,
    kind: Kind,
    name: usize,
    /// [`fingerprint`] of the labels: only an entry that matches it compares them whole.
    fingerprint: u64,
    labels: Labels,
    series: Series,
}

/// A hash of label values (not keys: a name's label keys rarely differ); equal labels give
/// equal fingerprints.
fn fingerprint(l: &[(&'static str, &str)]) -> u64 {
    use std::hash::BuildHasher;
    let state = foldhash::fast::FixedState::with_seed(0x6c61_6265);
    l.iter().fold(l.len() as u64, |h, (_, v)| {
        h.rotate_left(17) ^ state.hash_one(v)
    })
}

/// A named counter's key (see [`super::Metrics::inc_named`]): its registry, its name's and its
/// value's addresses.
pub(super) type NamedAddress = (u64, usize, usize);

/// Past this many series a thread's cache starts over (label values are open-ended).
const RESOLVED_MAX: usize = 512;

thread_local! {
    static RESOLVED: RefCell<Vec<Resolved>> = const { RefCell::new(Vec::new()) };
    /// Named counters' series.
    static NAMED: RefCell<Vec<(NamedAddress, Counter)>> = const { RefCell::new(Vec::new()) };
}

fn same_labels(have: &Labels, l: &[(&'static str, &str)]) -> bool {
    have.len() == l.len()
        && have
            .iter()
            .zip(l)
            .all(|((k1, v1), (k2, v2))| k1 == k2 && v1 == v2)
}

/// The series of `name` with labels `l` in registry `registry`, if this thread resolved it.
pub(super) fn cached(
    registry: u64,
    kind: Kind,
    name: &'static str,
    l: &[(&'static str, &str)],
) -> Option<Series> {
    let address = name.as_ptr() as usize;
    let fingerprint = fingerprint(l);
    RESOLVED.with(|r| {
        r.borrow()
            .iter()
            .find(|e| {
                e.name == address
                    && e.fingerprint == fingerprint
                    && e.registry == registry
                    && e.kind == kind
                    && same_labels(&e.labels, l)
            })
            .map(|e| e.series.clone())
    })
}

/// Remembers that `name` with labels `labels` is `series` in registry `registry`.
pub(super) fn remember(
    registry: u64,
    kind: Kind,
    name: &'static str,
    labels: Labels,
    series: Series,
) {
    let l: Vec<(&'static str, &str)> = labels.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let fingerprint = fingerprint(&l);
    RESOLVED.with(|r| {
        let mut r = r.borrow_mut();
        if r.len() >= RESOLVED_MAX {
            r.clear();
        }
        r.push(Resolved {
            registry,
            kind,
            name: name.as_ptr() as usize,
            fingerprint,
            labels,
            series,
        });
    });
}

/// The named counter at `address`, if this thread resolved it.
pub(super) fn named(address: NamedAddress) -> Option<Counter> {
    NAMED.with(|n| {
        n.borrow()
            .iter()
            .find(|(a, _)| *a == address)
            .map(|(_, c)| c.clone())
    })
}

/// Remembers the named counter at `address`.
pub(super) fn remember_named(address: NamedAddress, counter: Counter) {
    NAMED.with(|n| {
        let mut n = n.borrow_mut();
        if n.len() >= RESOLVED_MAX {
            n.clear();
        }
        n.push((address, counter));
    });
}
