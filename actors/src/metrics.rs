//! Process metrics in the Prometheus text format, kept in one process-wide registry so any
//! actor (or transport) records with a line and `/metrics` renders everything.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::{Mutex, MutexGuard, OnceLock};

/// Histogram buckets for latencies, in seconds.
const BUCKETS: [f64; 12] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0,
];

#[derive(Default)]
struct Histogram {
    counts: [u64; BUCKETS.len()],
    sum: f64,
    count: u64,
}

type Labels = Vec<(&'static str, String)>;

/// The series of each metric name. Looking a series up allocates nothing once it exists (a
/// metric has a handful of label sets; this runs several times per message).
struct Family<V>(BTreeMap<&'static str, Vec<(Labels, V)>>);

impl<V> Default for Family<V> {
    fn default() -> Self {
        Family(BTreeMap::new())
    }
}

impl<V: Default> Family<V> {
    fn series(&mut self, name: &'static str, l: &[(&'static str, &str)]) -> &mut V {
        let list = self.0.entry(name).or_default();
        let same = |have: &Labels| {
            have.len() == l.len()
                && have
                    .iter()
                    .zip(l)
                    .all(|((k1, v1), (k2, v2))| k1 == k2 && v1 == v2)
        };
        if !list.iter().any(|(have, _)| same(have)) {
            // Kept sorted by labels, so `/metrics` renders in a stable order.
            list.push((labels(l), V::default()));
            list.sort_by(|a, b| a.0.cmp(&b.0));
        }
        let at = list.iter().position(|(have, _)| same(have)).unwrap_or(0);
        &mut list[at].1
    }

    fn iter(&self) -> impl Iterator<Item = (&'static str, &Labels, &V)> {
        self.0
            .iter()
            .flat_map(|(name, list)| list.iter().map(move |(l, v)| (*name, l, v)))
    }
}

#[derive(Default)]
struct Inner {
    counters: Family<f64>,
    gauges: Family<f64>,
    histograms: Family<Histogram>,
    help: BTreeMap<&'static str, (&'static str, &'static str)>,
    /// Each known agent's status, by [`status_key`] of its id (no copy of the id per agent).
    statuses: crate::FastHashMap<(u64, u64), &'static str>,
}

/// The key an agent's status is kept under: two independent 64-bit hashes of its id (128
/// bits; ids colliding in both would only merge two agents in a gauge): keeping the id itself
/// cost a string and a wider map entry, ~100 bytes per agent.
fn status_key(agent_id: &str) -> (u64, u64) {
    use std::hash::BuildHasher;
    let fold = foldhash::fast::FixedState::with_seed(0x5eed).hash_one(agent_id);
    (crate::supervisor::fnv1a64(agent_id.as_bytes()), fold)
}

/// The registry.
#[derive(Default)]
pub struct Metrics {
    inner: Mutex<Inner>,
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

    /// Adds `by` to counter `name` with `labels`.
    pub fn inc(&self, name: &'static str, help: &'static str, l: &[(&'static str, &str)], by: f64) {
        self.inc_each(name, help, &[(l, by)]);
    }

    /// Adds to several series of counter `name` under one lock (e.g. the four token kinds of
    /// one model call).
    pub fn inc_each(
        &self,
        name: &'static str,
        help: &'static str,
        series: &[(&[(&'static str, &str)], f64)],
    ) {
        let mut m = self.lock();
        m.help.entry(name).or_insert((help, "counter"));
        for (l, by) in series {
            *m.counters.series(name, l) += by;
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
        let mut m = self.lock();
        m.help.entry(name).or_insert((help, "gauge"));
        *m.gauges.series(name, l) = value;
    }

    /// Adds `delta` (may be negative) to gauge `name`.
    pub fn add(
        &self,
        name: &'static str,
        help: &'static str,
        l: &[(&'static str, &str)],
        delta: f64,
    ) {
        let mut m = self.lock();
        m.help.entry(name).or_insert((help, "gauge"));
        *m.gauges.series(name, l) += delta;
    }

    /// Records one observation (seconds) in histogram `name`.
    pub fn observe(
        &self,
        name: &'static str,
        help: &'static str,
        l: &[(&'static str, &str)],
        seconds: f64,
    ) {
        let mut m = self.lock();
        m.help.entry(name).or_insert((help, "histogram"));
        let h = m.histograms.series(name, l);
        for (i, b) in BUCKETS.iter().enumerate() {
            if seconds <= *b {
                h.counts[i] += 1;
            }
        }
        h.sum += seconds;
        h.count += 1;
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
        let mut header = |out: &mut String, name: &'static str| {
            if seen.insert(name)
                && let Some((help, kind)) = m.help.get(name)
            {
                let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
            }
        };
        for (name, l, v) in m.counters.iter() {
            header(&mut out, name);
            let _ = writeln!(out, "{name}{} {v}", render_labels(l, None));
        }
        for (name, l, v) in m.gauges.iter() {
            header(&mut out, name);
            let _ = writeln!(out, "{name}{} {v}", render_labels(l, None));
        }
        for (name, l, h) in m.histograms.iter() {
            header(&mut out, name);
            for (i, b) in BUCKETS.iter().enumerate() {
                let _ = writeln!(
                    out,
                    "{name}_bucket{} {}",
                    render_labels(l, Some(("le", b.to_string()))),
                    h.counts[i]
                );
            }
            let _ = writeln!(
                out,
                "{name}_bucket{} {}",
                render_labels(l, Some(("le", "+Inf".into()))),
                h.count
            );
            let _ = writeln!(out, "{name}_sum{} {}", render_labels(l, None), h.sum);
            let _ = writeln!(out, "{name}_count{} {}", render_labels(l, None), h.count);
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
}
