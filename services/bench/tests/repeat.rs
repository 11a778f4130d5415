//! `--repeat N` runs a throughput scenario N times, prints each run and writes their median.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;

/// The printed value of the line starting with `key` (the figures table: name, value).
fn printed(out: &str, key: &str) -> Vec<f64> {
    out.lines()
        .filter(|l| l.starts_with(key))
        .filter_map(|l| l[key.len()..].split_whitespace().next()?.parse().ok())
        .collect()
}

#[test]
fn repeated_runs_are_printed_and_their_median_is_the_figure() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("figures.json");
    let out = Command::new(env!("CARGO_BIN_EXE_agentd-bench"))
        .args(["--quick", "--only", "spawn", "--repeat", "3", "--json"])
        .arg(&json)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut runs: Vec<f64> = (1..=3)
        .flat_map(|i| printed(&stdout, &format!("spawn_per_s run {i} ")))
        .collect();
    assert_eq!(runs.len(), 3, "{stdout}");
    runs.sort_by(f64::total_cmp);
    let figures: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let written = figures["spawn_per_s"].as_f64().unwrap();
    assert!(
        (written - runs[1]).abs() < 0.11,
        "{written} is not the median of {runs:?}"
    );
}

#[test]
fn a_repeat_count_of_zero_is_refused() {
    let out = Command::new(env!("CARGO_BIN_EXE_agentd-bench"))
        .args(["--quick", "--only", "spawn", "--repeat", "0"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--repeat wants a count of 1 or more"));
}
