//! The registry as Prometheus text (`/metrics`).

use super::Metrics;
use super::series::{BUCKETS, Labels, Series};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::Ordering;

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
    /// The registry as Prometheus text.
    pub fn render(&self) -> String {
        let m = self.lock();
        let mut out = String::new();
        let mut by_status: BTreeMap<&str, u64> = BTreeMap::new();
        for s in m.statuses.values().filter_map(|slot| slot.status()) {
            *by_status.entry(s.as_str()).or_default() += 1;
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
