//! Process metrics in the Prometheus text format, kept in one process-wide registry so any
//! actor (or transport) records with a line and `/metrics` renders everything.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

/// Histogram buckets for latencies, in seconds.
const BUCKETS: [f64; 12] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0,
];

/// An `f64` updated without a lock (its bits in an atomic).
#[derive(Default)]
struct AtomicF64(AtomicU64);

impl AtomicF64 {
    fn get(&self) -> f64 {
        f64::from_bits(self.0.load(Ordering::Relaxed))
    }

    fn set(&self, v: f64) {
        self.0.store(v.to_bits(), Ordering::Relaxed);
    }

    fn add(&self, by: f64) {
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
struct Histogram {
    /// Observations per bucket (`BUCKETS`), then above the last bound.
    counts: [AtomicU64; BUCKETS.len() + 1],
    sum: AtomicF64,
}

impl Histogram {
    fn observe(&self, seconds: f64) {
        let at = BUCKETS
            .iter()
            .position(|b| seconds <= *b)
            .unwrap_or(BUCKETS.len());
        self.counts[at].fetch_add(1, Ordering::Relaxed);
        self.sum.add(seconds);
    }
}

type Labels = Vec<(&'static str, String)>;

/// A series, shared by the registry (which renders it) and the per-thread caches of the
/// threads that update it.
#[derive(Clone)]
enum Series {
    Value(Arc<AtomicF64>),
    Histogram(Arc<Histogram>),
}

/// What kind of metric a name is, as `# TYPE` says.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    Counter,
    Gauge,
    Histogram,
}

impl Kind {
    fn as_str(self) -> &'static str {
        match self {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
            Kind::Histogram => "histogram",
        }
    }
}

/// Series resolved by this thread: an update looks here first, with no lock and no hashing
/// (a name is compared by address, labels by value; a thread updates a few dozen series), so
/// that the registry's lock and hashing stay off the per-message path.
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

/// A [`Metrics::inc_named`] series' key: its registry, its name's and its value's addresses.
type NamedAddress = (u64, usize, usize);

/// Past this many series a thread's cache starts over (label values are open-ended).
const RESOLVED_MAX: usize = 512;

thread_local! {
    static RESOLVED: RefCell<Vec<Resolved>> = const { RefCell::new(Vec::new()) };
    /// [`Metrics::inc_named`]'s series.
    static NAMED: RefCell<Vec<(NamedAddress, Counter)>> = const { RefCell::new(Vec::new()) };
}

fn same_labels(have: &Labels, l: &[(&'static str, &str)]) -> bool {
    have.len() == l.len()
        && have
            .iter()
            .zip(l)
            .all(|((k1, v1), (k2, v2))| k1 == k2 && v1 == v2)
}

#[derive(Default)]
struct Inner {
    /// (kind, name, labels) → its series; the source of truth, rendered sorted.
    series: BTreeMap<(Kind, &'static str, Labels), Series>,
    help: BTreeMap<&'static str, (&'static str, Kind)>,
    /// Each known agent's status, by [`status_key`] of its id (no copy of the id per agent).
    statuses: crate::FastHashMap<(u64, u64), &'static str>,
}

/// The key an agent's status is kept under: a 128-bit hash of its id (ids colliding would
/// only merge two agents in a gauge), so an idle agent costs the gauge a fixed-size key
/// instead of a copy of its id.
fn status_key(agent_id: &str) -> (u64, u64) {
    let h = xxhash_rust::xxh3::xxh3_128(agent_id.as_bytes());
    ((h >> 64) as u64, h as u64)
}

/// A counter or gauge series kept by its user (see [`Metrics::counter`], [`Metrics::gauge`]):
/// updating it takes no look-up.
#[derive(Clone)]
pub struct Counter(Arc<AtomicF64>);

impl Counter {
    /// Adds `by` (a gauge's may be negative).
    pub fn add(&self, by: f64) {
        self.0.add(by);
    }
}

/// A histogram series kept by its user (see [`Metrics::histogram`]).
#[derive(Clone)]
pub struct Timer(Arc<Histogram>);

impl Timer {
    /// Records one observation, in seconds.
    pub fn observe(&self, seconds: f64) {
        self.0.observe(seconds);
    }
}

/// The registry.
pub struct Metrics {
    /// Tells this registry's entries in the per-thread caches from another's (tests make
    /// registries of their own).
    id: u64,
    inner: Mutex<Inner>,
}

impl Default for Metrics {
    fn default() -> Self {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        Metrics {
            id: NEXT.fetch_add(1, Ordering::Relaxed),
            inner: Mutex::default(),
        }
    }
}

/// The process-wide registry.
pub fn global() -> &'static Metrics {
    static M: OnceLock<Metrics> = OnceLock::new();
    M.get_or_init(Metrics::default)
}

fn labels(l: &[(&'static str, &str)]) -> Labels {
    l.iter().map(|(k, v)| (*k, v.to_string())).collect()
}

fn render_labels(l: &Labels, extra: Option<(&str, String)>) -> String {
    let mut parts: Vec<String> = l
        .iter()
        .map(|(k, v)| format!("{k}=\"{}\"", v.replace('\\', "\\\\").replace('"', "\\\"")))
        .collect();
    if let Some((k, v)) = extra {
        parts.push(format!("{k}=\"{v}\""));
    }
    if parts.is_empty() {
        String::new()
    } else {
        format!("{{{}}}", parts.join(","))
    }
}

impl Metrics {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The series of `name` with labels `l`: from this thread's cache, else from (or new in)
    /// the registry.
    fn series(
        &self,
        kind: Kind,
        name: &'static str,
        help: &'static str,
        l: &[(&'static str, &str)],
    ) -> Series {
        let address = name.as_ptr() as usize;
        let fingerprint = fingerprint(l);
        let cached = RESOLVED.with(|r| {
            r.borrow()
                .iter()
                .find(|e| {
                    e.name == address
                        && e.fingerprint == fingerprint
                        && e.registry == self.id
                        && e.kind == kind
                        && same_labels(&e.labels, l)
                })
                .map(|e| e.series.clone())
        });
        if let Some(series) = cached {
            return series;
        }
        let owned = labels(l);
        let series = {
            let mut m = self.lock();
            m.help.entry(name).or_insert((help, kind));
            m.series
                .entry((kind, name, owned.clone()))
                .or_insert_with(|| match kind {
                    Kind::Histogram => Series::Histogram(Arc::default()),
                    Kind::Counter | Kind::Gauge => Series::Value(Arc::default()),
                })
                .clone()
        };
        RESOLVED.with(|r| {
            let mut r = r.borrow_mut();
            if r.len() >= RESOLVED_MAX {
                r.clear();
            }
            r.push(Resolved {
                registry: self.id,
                kind,
                name: address,
                fingerprint,
                labels: owned,
                series: series.clone(),
            });
        });
        series
    }

    fn value(
        &self,
        kind: Kind,
        name: &'static str,
        help: &'static str,
        l: &[(&'static str, &str)],
        update: impl FnOnce(&AtomicF64),
    ) {
        if let Series::Value(v) = self.series(kind, name, help, l) {
            update(&v);
        }
    }

    /// Counter `name` with labels `l`, resolved once: for a caller that adds to the same series
    /// on every message and can keep the handle.
    pub fn counter(
        &self,
        name: &'static str,
        help: &'static str,
        l: &[(&'static str, &str)],
    ) -> Counter {
        self.value_handle(Kind::Counter, name, help, l)
    }

    /// Gauge `name` with labels `l`, resolved once (see [`Self::counter`]).
    pub fn gauge(
        &self,
        name: &'static str,
        help: &'static str,
        l: &[(&'static str, &str)],
    ) -> Counter {
        self.value_handle(Kind::Gauge, name, help, l)
    }

    fn value_handle(
        &self,
        kind: Kind,
        name: &'static str,
        help: &'static str,
        l: &[(&'static str, &str)],
    ) -> Counter {
        match self.series(kind, name, help, l) {
            Series::Value(v) => Counter(v),
            // A counter's or gauge's series is a value; this arm is never taken.
            Series::Histogram(_) => Counter(Arc::default()),
        }
    }

    /// Histogram `name` with labels `l`, resolved once (see [`Self::counter`]).
    pub fn histogram(
        &self,
        name: &'static str,
        help: &'static str,
        l: &[(&'static str, &str)],
    ) -> Timer {
        match self.series(Kind::Histogram, name, help, l) {
            Series::Histogram(h) => Timer(h),
            // A histogram's series is a histogram; this arm is never taken.
            Series::Value(_) => Timer(Arc::default()),
        }
    }

    /// Adds `by` to counter `name` with `labels`.
    pub fn inc(&self, name: &'static str, help: &'static str, l: &[(&'static str, &str)], by: f64) {
        self.value(Kind::Counter, name, help, l, |v| v.add(by));
    }

    /// Adds 1 to counter `name` whose one label `key` takes `value`, a static name (an enum's
    /// variant): the series is found by the addresses of `name` and `value` in this thread's
    /// own short list, not by hashing the labels, for a count taken on every message.
    pub fn inc_named(
        &self,
        name: &'static str,
        help: &'static str,
        key: &'static str,
        value: &'static str,
    ) {
        let address = (self.id, name.as_ptr() as usize, value.as_ptr() as usize);
        let known = NAMED.with(|n| {
            n.borrow()
                .iter()
                .find(|(a, _)| *a == address)
                .map(|(_, c)| c.clone())
        });
        let counter = known.unwrap_or_else(|| {
            let counter = self.counter(name, help, &[(key, value)]);
            NAMED.with(|n| {
                let mut n = n.borrow_mut();
                if n.len() >= RESOLVED_MAX {
                    n.clear();
                }
                n.push((address, counter.clone()));
            });
            counter
        });
        counter.add(1.0);
    }

    /// Adds to several series of counter `name` (e.g. the four token kinds of one model call).
    pub fn inc_each(
        &self,
        name: &'static str,
        help: &'static str,
        series: &[(&[(&'static str, &str)], f64)],
    ) {
        for (l, by) in series {
            self.inc(name, help, l, *by);
        }
    }

    /// Sets gauge `name` with `labels`.
    pub fn set(
        &self,
        name: &'static str,
        help: &'static str,
        l: &[(&'static str, &str)],
        value: f64,
    ) {
        self.value(Kind::Gauge, name, help, l, |v| v.set(value));
    }

    /// Adds `delta` (may be negative) to gauge `name`.
    pub fn add(
        &self,
        name: &'static str,
        help: &'static str,
        l: &[(&'static str, &str)],
        delta: f64,
    ) {
        self.value(Kind::Gauge, name, help, l, |v| v.add(delta));
    }

    /// Records one observation (seconds) in histogram `name`.
    pub fn observe(
        &self,
        name: &'static str,
        help: &'static str,
        l: &[(&'static str, &str)],
        seconds: f64,
    ) {
        if let Series::Histogram(h) = self.series(Kind::Histogram, name, help, l) {
            h.observe(seconds);
        }
    }

    /// Tracks an agent's current status (for the `agentd_agents` gauge); `None` forgets it.
    pub fn agent_status(&self, agent_id: &str, status: Option<&'static str>) {
        let key = status_key(agent_id);
        let mut m = self.lock();
        match status {
            Some(s) => {
                m.statuses.insert(key, s);
            }
            None => {
                m.statuses.remove(&key);
            }
        }
    }

    /// The registry as Prometheus text.
    pub fn render(&self) -> String {
        let m = self.lock();
        let mut out = String::new();
        let mut by_status: BTreeMap<&str, u64> = BTreeMap::new();
        for s in m.statuses.values() {
            *by_status.entry(s).or_default() += 1;
        }
        out.push_str("# HELP agentd_agents Agents known to this process, by status.\n# TYPE agentd_agents gauge\n");
        for (s, n) in by_status {
            let _ = writeln!(out, "agentd_agents{{status=\"{s}\"}} {n}");
        }
        let mut seen = std::collections::BTreeSet::new();
        for ((_, name, l), series) in &m.series {
            if seen.insert(*name)
                && let Some((help, kind)) = m.help.get(name)
            {
                let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {}", kind.as_str());
            }
            match series {
                Series::Value(v) => {
                    let _ = writeln!(out, "{name}{} {}", render_labels(l, None), v.get());
                }
                Series::Histogram(h) => {
                    let mut cumulative = 0;
                    for (i, b) in BUCKETS.iter().enumerate() {
                        cumulative += h.counts[i].load(Ordering::Relaxed);
                        let _ = writeln!(
                            out,
                            "{name}_bucket{} {cumulative}",
                            render_labels(l, Some(("le", b.to_string()))),
                        );
                    }
                    cumulative += h.counts[BUCKETS.len()].load(Ordering::Relaxed);
                    let _ = writeln!(
                        out,
                        "{name}_bucket{} {cumulative}",
                        render_labels(l, Some(("le", "+Inf".into()))),
                    );
                    let _ = writeln!(out, "{name}_sum{} {}", render_labels(l, None), h.sum.get());
                    let _ = writeln!(out, "{name}_count{} {cumulative}", render_labels(l, None));
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_counters_gauges_histograms() {
        let m = Metrics::default();
        m.inc("agentd_x_total", "X.", &[("kind", "a")], 2.0);
        m.set("agentd_g", "G.", &[], 3.0);
        m.observe("agentd_h_seconds", "H.", &[("p", "q")], 0.003);
        m.agent_status("a1", Some("idle"));
        let text = m.render();
        assert!(text.contains("agentd_x_total{kind=\"a\"} 2"));
        assert!(text.contains("# TYPE agentd_g gauge\nagentd_g 3"));
        assert!(text.contains("agentd_h_seconds_bucket{p=\"q\",le=\"0.005\"} 1"));
        assert!(text.contains("agentd_h_seconds_count{p=\"q\"} 1"));
        assert!(text.contains("agentd_agents{status=\"idle\"} 1"));
    }

    #[test]
    fn registries_do_not_share_series_through_a_threads_cache() {
        let (a, b) = (Metrics::default(), Metrics::default());
        a.inc("agentd_z_total", "Z.", &[], 1.0);
        b.inc("agentd_z_total", "Z.", &[], 5.0);
        a.inc("agentd_z_total", "Z.", &[], 1.0);
        assert!(a.render().contains("agentd_z_total 2\n"));
        assert!(b.render().contains("agentd_z_total 5\n"));
    }

    #[test]
    fn histograms_render_cumulative_buckets_and_updates_from_other_threads_count() {
        let m = std::sync::Arc::new(Metrics::default());
        m.observe("agentd_w_seconds", "W.", &[], 0.003);
        let other = m.clone();
        std::thread::spawn(move || other.observe("agentd_w_seconds", "W.", &[], 10.0))
            .join()
            .ok();
        let text = m.render();
        assert!(
            text.contains("agentd_w_seconds_bucket{le=\"0.001\"} 0"),
            "{text}"
        );
        assert!(text.contains("agentd_w_seconds_bucket{le=\"0.005\"} 1"));
        assert!(text.contains("agentd_w_seconds_bucket{le=\"5\"} 1"));
        assert!(text.contains("agentd_w_seconds_bucket{le=\"+Inf\"} 2"));
        assert!(text.contains("agentd_w_seconds_count 2"));
        assert!(text.contains("agentd_w_seconds_sum 10.003"));
    }

    #[test]
    fn named_counts_accumulate_by_value_whatever_the_value_s_address() {
        let m = Metrics::default();
        let other = Metrics::default();
        let leaked: &'static str = Box::leak(String::from("message").into_boxed_str());
        m.inc_named("agentd_n_total", "N.", "kind", "message");
        m.inc_named("agentd_n_total", "N.", "kind", "message");
        m.inc_named("agentd_n_total", "N.", "kind", leaked);
        m.inc_named("agentd_n_total", "N.", "kind", "reset");
        other.inc_named("agentd_n_total", "N.", "kind", "message");
        let text = m.render();
        assert!(
            text.contains("agentd_n_total{kind=\"message\"} 3"),
            "{text}"
        );
        assert!(text.contains("agentd_n_total{kind=\"reset\"} 1"), "{text}");
        assert!(
            other
                .render()
                .contains("agentd_n_total{kind=\"message\"} 1")
        );
    }

    #[test]
    fn series_accumulate_by_labels_and_render_in_label_order() {
        let m = Metrics::default();
        m.inc("agentd_y_total", "Y.", &[("kind", "b")], 1.0);
        m.inc("agentd_y_total", "Y.", &[("kind", "a")], 1.0);
        m.inc("agentd_y_total", "Y.", &[("kind", "b")], 2.0);
        m.inc("agentd_y_total", "Y.", &[], 5.0);
        let text = m.render();
        let at = |s: &str| text.find(s).unwrap_or(usize::MAX);
        assert_eq!(text.matches("# HELP agentd_y_total Y.").count(), 1);
        assert!(at("agentd_y_total 5") < at("agentd_y_total{kind=\"a\"} 1"));
        assert!(at("agentd_y_total{kind=\"a\"} 1") < at("agentd_y_total{kind=\"b\"} 3"));
        assert!(at("agentd_y_total{kind=\"b\"} 3") < usize::MAX, "{text}");
    }
}
