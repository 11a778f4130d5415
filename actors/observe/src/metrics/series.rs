//! The series themselves: values updated without a lock, histograms with fixed buckets, and
//! the handles their users keep.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// Histogram buckets for latencies, in seconds: from store writes (sub-millisecond) to turns
/// and tool calls answered by other services (minutes).
pub(super) const BUCKETS: [f64; 16] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0, 15.0, 60.0, 300.0,
    900.0,
];

/// An `f64` updated without a lock (its bits in an atomic).
#[derive(Default)]
pub(super) struct AtomicF64(AtomicU64);

impl AtomicF64 {
    #[inline]
    pub(super) fn get(&self) -> f64 {
        f64::from_bits(self.0.load(Ordering::Relaxed))
    }

    #[inline]
    pub(super) fn set(&self, v: f64) {
        self.0.store(v.to_bits(), Ordering::Relaxed);
    }

    #[inline]
    pub(super) fn add(&self, by: f64) {
        let _ = self
            .0
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |bits| {
                Some((f64::from_bits(bits) + by).to_bits())
            });
    }
}

/// One histogram series. Each observation lands in its first bucket only; rendering makes the
/// counts cumulative, as Prometheus wants them.
#[derive(Default)]
pub(super) struct Histogram {
    /// Observations per bucket (`BUCKETS`), then above the last bound.
    pub(super) counts: [AtomicU64; BUCKETS.len() + 1],
    pub(super) sum: AtomicF64,
}

impl Histogram {
    #[inline]
    pub(super) fn observe(&self, seconds: f64) {
        let at = BUCKETS
            .iter()
            .position(|b| seconds <= *b)
            .unwrap_or(BUCKETS.len());
        self.counts[at].fetch_add(1, Ordering::Relaxed);
        self.sum.add(seconds);
    }
}

pub(super) type Labels = Vec<(&'static str, String)>;

/// A series, shared by the registry (which renders it) and the per-thread caches of the
/// threads that update it.
#[derive(Clone)]
pub(super) enum Series {
    Value(Arc<AtomicF64>),
    Histogram(Arc<Histogram>),
}

/// What kind of metric a name is, as `# TYPE` says.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Kind {
    Counter,
    Gauge,
    Histogram,
}

impl Kind {
    pub(super) fn as_str(self) -> &'static str {
        match self {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
            Kind::Histogram => "histogram",
        }
    }
}

/// A counter's or gauge's series kept by its user (see
/// [`Metrics::counter`](super::Metrics::counter)): updating it takes no look-up.
#[derive(Clone)]
pub struct Counter(pub(super) Arc<AtomicF64>);

impl Counter {
    /// Adds `by` (a gauge's may be negative).
    #[inline]
    pub fn add(&self, by: f64) {
        self.0.add(by);
    }
}

/// A histogram series kept by its user (see [`Metrics::histogram`](super::Metrics::histogram)).
#[derive(Clone)]
pub struct Timer(pub(super) Arc<Histogram>);

impl Timer {
    /// Records one observation, in seconds.
    #[inline]
    pub fn observe(&self, seconds: f64) {
        self.0.observe(seconds);
    }
}
