//! Process metrics in the Prometheus text format, kept in one process-wide registry so any
//! actor (or transport) records with a line and `/metrics` renders everything.

//!
//! | module | what it holds |
//! |---|---|
//! | [`series`] | values, histograms, and the [`Counter`] / [`Timer`] handles users keep |
//! | [`thread_cache`] | each thread's resolved series, so updates take no lock |
//! | [`render`] | the Prometheus text |

mod render;
mod series;
mod thread_cache;

pub use series::{Counter, Timer};

use agentd_proto::AgentStatus;
use series::{AtomicF64, Kind, Labels, Series};
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

#[derive(Default)]
struct Inner {
    /// (kind, name, labels) → its series; the source of truth, rendered sorted.
    series: BTreeMap<(Kind, &'static str, Labels), Series>,
    help: BTreeMap<&'static str, (&'static str, Kind)>,
    /// Each known agent's status, by [`status_key`] of its id (no copy of the id per agent).
    statuses: HashMap<(u64, u64), StatusSlot, foldhash::fast::RandomState>,
}

/// Where the gauge keeps one agent's status.
enum StatusSlot {
    /// Set through the registry ([`Metrics::agent_status`]).
    Set(AgentStatus),
    /// Set by its live actor through a [`StatusCell`], without the registry's lock.
    Shared(Arc<AtomicU8>),
}

impl StatusSlot {
    fn status(&self) -> Option<AgentStatus> {
        match self {
            StatusSlot::Set(s) => Some(*s),
            StatusSlot::Shared(cell) => status_of(cell.load(Ordering::Relaxed)),
        }
    }
}

fn status_of(n: u8) -> Option<AgentStatus> {
    AgentStatus::ALL.iter().copied().find(|s| *s as u8 == n)
}

/// An agent's entry in the `agentd_agents` gauge, held by its live actor: a status change is
/// one store, where the registry took a hash of the id, a lock and a map insert (twice a
/// message: `running`, then `idle`).
#[derive(Debug)]
pub struct StatusCell(Arc<AtomicU8>);

impl StatusCell {
    /// The agent's status is now `status`.
    #[inline]
    pub fn set(&self, status: AgentStatus) {
        self.0.store(status as u8, Ordering::Relaxed);
    }
}

/// The key an agent's status is kept under: a 128-bit hash of its id (ids colliding would
/// only merge two agents in a gauge), so an idle agent costs the gauge a fixed-size key
/// instead of a copy of its id.
fn status_key(agent_id: &str) -> (u64, u64) {
    let h = xxhash_rust::xxh3::xxh3_128(agent_id.as_bytes());
    ((h >> 64) as u64, h as u64)
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
        if let Some(series) = thread_cache::cached(self.id, kind, name, l) {
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
        thread_cache::remember(self.id, kind, name, owned, series.clone());
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
        let counter = thread_cache::named(address).unwrap_or_else(|| {
            let counter = self.counter(name, help, &[(key, value)]);
            thread_cache::remember_named(address, counter.clone());
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
    pub fn agent_status(&self, agent_id: &str, status: Option<AgentStatus>) {
        let key = status_key(agent_id);
        let mut m = self.lock();
        match status {
            Some(s) => match m.statuses.get_mut(&key) {
                // Its actor holds the cell: the entry stays the one it sets.
                Some(StatusSlot::Shared(cell)) => cell.store(s as u8, Ordering::Relaxed),
                Some(slot) => *slot = StatusSlot::Set(s),
                None => {
                    m.statuses.insert(key, StatusSlot::Set(s));
                }
            },
            None => {
                m.statuses.remove(&key);
            }
        }
    }

    /// [`Self::agent_status`], answering the agent's entry for its live actor to set from now
    /// on ([`StatusCell`]). Forgetting the agent (`agent_status(id, None)`) leaves a cell that
    /// counts nowhere.
    pub fn agent_status_cell(&self, agent_id: &str, status: AgentStatus) -> StatusCell {
        let key = status_key(agent_id);
        let mut m = self.lock();
        let slot = m.statuses.entry(key).or_insert(StatusSlot::Set(status));
        let cell = match slot {
            StatusSlot::Shared(cell) => Arc::clone(cell),
            StatusSlot::Set(_) => {
                let cell = Arc::new(AtomicU8::new(status as u8));
                *slot = StatusSlot::Shared(Arc::clone(&cell));
                cell
            }
        };
        let cell = StatusCell(cell);
        cell.set(status);
        cell
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
        m.agent_status("a1", Some(AgentStatus::Idle));
        let text = m.render();
        assert!(text.contains("agentd_x_total{kind=\"a\"} 2"));
        assert!(text.contains("# TYPE agentd_g gauge\nagentd_g 3"));
        assert!(text.contains("agentd_h_seconds_bucket{p=\"q\",le=\"0.005\"} 1"));
        assert!(text.contains("agentd_h_seconds_count{p=\"q\"} 1"));
        assert!(text.contains("agentd_agents{status=\"idle\"} 1"));
    }

    #[test]
    fn a_live_agent_s_cell_sets_its_status_in_the_gauge() {
        let m = Metrics::default();
        m.agent_status("a1", Some(AgentStatus::Idle));
        m.agent_status("a2", Some(AgentStatus::Idle));
        let cell = m.agent_status_cell("a1", AgentStatus::Running);
        assert!(m.render().contains("agentd_agents{status=\"running\"} 1"));
        cell.set(AgentStatus::Idle);
        assert!(m.render().contains("agentd_agents{status=\"idle\"} 2"));
        // Set through the registry, the status goes to the cell the actor keeps setting.
        m.agent_status("a1", Some(AgentStatus::Paused));
        cell.set(AgentStatus::Running);
        let text = m.render();
        assert!(
            text.contains("agentd_agents{status=\"running\"} 1"),
            "{text}"
        );
        assert!(!text.contains("paused"), "{text}");
        m.agent_status("a1", None);
        cell.set(AgentStatus::Failed);
        let text = m.render();
        assert!(
            !text.contains("failed") && !text.contains("running"),
            "{text}"
        );
        assert!(text.contains("agentd_agents{status=\"idle\"} 1"), "{text}");
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
