//! `agentd-bench`: measures agentd on this machine and prints a table of figures; with
//! `--json FILE` also writes them as a flat JSON object. Every scenario runs real actors; the
//! Redis ones start a private `redis-server` on a free loopback port (`redis_cluster`: a private
//! Redis Cluster of three masters and three replicas).
//!
//! `cargo run --release -p agentd-bench -- --json bench.json`
//!
//! This file reads the command line and runs the scenarios it names; the scenarios are in
//! their modules:
//!
//! | module | what it holds |
//! |---|---|
//! | `inproc` | the in-process and embedded scenarios: Manage round trips, messages, spawns, an idle agent's memory |
//! | `redis_raw` | raw Redis, the baseline: a private redis-server and a plain client's figures on it |
//! | `cluster` | the two-process Redis scenarios: this process's agentd and this binary re-executed with `--serve` |
//! | `model_io` | the model path under load: agents on the OpenAI-compatible backend against a local endpoint |
//! | `redis_bytes` | `redis_bytes_per_agent`: what a small agent costs in Redis |
//! | `redis_cluster` | the Redis Cluster scenario: one-way messages and each node's CPU per message |

use agentd_actors::ThreadStore;
use agentd_store::{MemoryStore, RedbStore};
use serde_json::{Map, Value, json};
use std::sync::Arc;
use std::time::Duration;

mod cluster;
mod inproc;
mod model_io;
mod redis_bytes;
mod redis_cluster;
mod redis_raw;

use inproc::{inproc_roundtrip, msgs_per_s, rss_in_fresh_process, rss_per_idle_agent, spawn_per_s};
use redis_raw::{redis_raw_msgs_per_s, redis_raw_roundtrip_p50_us, start_redis};

/// The same allocator as the service binary, so the figures are the service's.
#[global_allocator]
static GLOBAL: agentd_alloc::Mimalloc = agentd_alloc::Mimalloc;

const SCRIPT: &str = "[[rule]]\nagent = \"worker\"\ntext = \"done\"\nusage = { input = 1, output = 1 }\n\n[[rule]]\nagent = \"sink\"\ntext = \"\"\nusage = { input = 1, output = 1 }\n\n[[rule]]\ntext = \"\"\n";

fn percentile(samples: &mut [f64], p: f64) -> f64 {
    samples.sort_by(|a, b| a.total_cmp(b));
    let i = ((samples.len() as f64 - 1.0) * p).round() as usize;
    samples.get(i).copied().unwrap_or(0.0)
}

fn e(err: agentd_proto::AgentdError) -> anyhow::Error {
    anyhow::anyhow!("{err}")
}

fn main() -> anyhow::Result<()> {
    // `BENCH_LOG_FILTER=info` runs the scenarios under the service's own log subscriber (its
    // default filter), writing nowhere: what the spans and events that filter lets through
    // cost. By default none is installed.
    // `BENCH_OTLP_ENDPOINT=URL` runs them with OpenTelemetry export on (sample ratio 1.0) to
    // the collector at URL, under the service's subscriber (`BENCH_LOG_FILTER`, else `warn`):
    // what the GenAI spans and their export cost per turn.
    let telemetry = match std::env::var("BENCH_OTLP_ENDPOINT") {
        Ok(endpoint) => {
            agentd::telemetry::Telemetry::start(&agentd::telemetry::TelemetrySettings {
                otlp_endpoint: endpoint,
                ..Default::default()
            })?
        }
        Err(_) => None,
    };
    let filter = std::env::var("BENCH_LOG_FILTER").ok();
    if filter.is_some() || telemetry.is_some() {
        let filter = filter.as_deref().unwrap_or("warn");
        agentd::logs::install_with(filter, false, std::io::sink, false, telemetry.as_ref())?;
    }
    let args: Vec<String> = std::env::args().collect();
    if let (Some("--serve"), Some(url), Some(dir)) =
        (args.get(1).map(String::as_str), args.get(2), args.get(3))
    {
        let ns = args.get(4).map(String::as_str);
        return cluster::serve(url, std::path::Path::new(dir), ns);
    }
    if let (Some("--rss"), Some(n)) = (args.get(1).map(String::as_str), args.get(2)) {
        let n: usize = n.parse()?;
        let per_agent = actix_rt::System::new().block_on(rss_per_idle_agent(n))?;
        println!("{per_agent}");
        return Ok(());
    }
    let json_path = args
        .iter()
        .position(|a| a == "--json")
        .and_then(|i| args.get(i + 1))
        .cloned();
    let quick = args.iter().any(|a| a == "--quick");
    // `--only a,b` runs just the named scenarios (for profiling one of them).
    let only: Option<Vec<String>> = args
        .iter()
        .position(|a| a == "--only")
        .and_then(|i| args.get(i + 1))
        .map(|s| s.split(',').map(str::to_string).collect());
    let wants = |name: &str| only.as_ref().is_none_or(|o| o.iter().any(|n| n == name));
    let scale = if quick { 10 } else { 1 };
    // `--repeat N`: the in-process throughput scenarios run N times and report their median
    // (each run printed), for steadier figures on a machine whose speed swings between runs.
    let repeat = match args.iter().position(|a| a == "--repeat") {
        Some(i) => args
            .get(i + 1)
            .and_then(|n| n.parse::<usize>().ok())
            .filter(|n| *n >= 1)
            .ok_or_else(|| anyhow::anyhow!("--repeat wants a count of 1 or more"))?,
        None => 1,
    };
    let mut figures = Map::new();
    let mut put = |k: &str, v: f64| {
        println!("{k:<32} {v:>14.1}");
        figures.insert(k.to_string(), json!((v * 10.0).round() / 10.0));
    };
    // Figures that explain others (not among the keys): printed, not written.
    let note = |k: &str, v: f64| println!("{k:<32} {v:>14.1}   (diagnostic)");
    let sys = actix_rt::System::new();
    if wants("rss") {
        put(
            "rss_bytes_per_idle_agent",
            rss_in_fresh_process(100_000 / scale)?,
        );
    }
    if wants("inproc_roundtrip") {
        let (p50, p99) = sys.block_on(inproc_roundtrip(
            Arc::new(MemoryStore::new()),
            5_000 / scale,
        ))?;
        put("inproc_roundtrip_p50_us", p50);
        put("inproc_roundtrip_p99_us", p99);
    }
    // Runs `run` `repeat` times; prints each run when there are several; answers the median.
    let median_of = |name: &str, run: &mut dyn FnMut() -> anyhow::Result<f64>| {
        let mut runs = Vec::with_capacity(repeat);
        for i in 0..repeat {
            let v = run()?;
            if repeat > 1 {
                note(&format!("{name} run {}", i + 1), v);
            }
            runs.push(v);
        }
        Ok::<f64, anyhow::Error>(percentile(&mut runs, 0.5))
    };
    if wants("inproc_msgs") {
        let before = cluster::cpu_seconds_split("self");
        let rate = median_of("inproc_msgs_per_s", &mut || {
            sys.block_on(msgs_per_s(
                Arc::new(MemoryStore::new()),
                1_000,
                100_000 / scale,
            ))
        })?;
        put("inproc_msgs_per_s", rate);
        // The kernel's share of the scenario's CPU: on a fresh VM, first touches of guest
        // memory (page faults the host also serves) make it swing between runs of the same
        // binary, and the figure above with it (BENCHMARKS.md, "Method").
        let after = cluster::cpu_seconds_split("self");
        let (user, system) = (after.0 - before.0, after.1 - before.1);
        note(
            "inproc_msgs_kernel_cpu_pct",
            100.0 * system / (user + system).max(0.01),
        );
    }
    if wants("embedded_msgs") {
        let rate = median_of("embedded_msgs_per_s", &mut || {
            let dir = tempfile::tempdir()?;
            let redb: Arc<dyn ThreadStore> = Arc::new(RedbStore::open(dir.path())?);
            sys.block_on(msgs_per_s(redb, 1_000, 20_000 / scale))
        })?;
        put("embedded_msgs_per_s", rate);
    }
    if wants("spawn") {
        let rate = median_of("spawn_per_s", &mut || {
            sys.block_on(spawn_per_s(20_000 / scale))
        })?;
        put("spawn_per_s", rate);
    }
    if wants("model_io") {
        use model_io::{Answers, model_io};
        let (n, delay) = (2_000 / scale, Duration::from_secs(1));
        let whole = Answers {
            stream: false,
            keep_alive: true,
        };
        let m = sys.block_on(model_io(n, delay, whole))?;
        put("model_calls_in_flight_peak", m.peak);
        put("model_overhead_p50_us", m.overhead_p50_us);
        note("model_endpoint_excess_p50_us", m.endpoint_excess_p50_us);
        // Streamed answers (the providers' default).
        let streamed = Answers {
            stream: true,
            ..whole
        };
        let m = sys.block_on(model_io(n, delay, streamed))?;
        note("model_stream_calls_in_flight_peak", m.peak);
        note("model_stream_overhead_p50_us", m.overhead_p50_us);
        // A new connection for every call (the endpoint closes each): the earlier measure.
        let closing = Answers {
            keep_alive: false,
            ..whole
        };
        let m = sys.block_on(model_io(n, delay, closing))?;
        note("model_new_connection_overhead_p50_us", m.overhead_p50_us);
    }
    let redis_wanted = ["redis_raw", "redis_store", "cluster", "redis_bytes"]
        .iter()
        .any(|n| wants(n));
    if redis_wanted {
        let redis = start_redis()?;
        let url = format!("redis://127.0.0.1:{}/", redis.1);
        if wants("redis_raw") {
            put(
                "redis_raw_msgs_per_s",
                redis_raw_msgs_per_s(&url, 200_000 / scale, 200)?,
            );
            put(
                "redis_raw_roundtrip_p50_us",
                redis_raw_roundtrip_p50_us(&url, 2_000 / scale, 200)?,
            );
        }
        if wants("redis_store") {
            let store: Arc<dyn ThreadStore> =
                Arc::new(sys.block_on(agentd_store::RedisStore::connect(&url, "bench", 64))?);
            note(
                "redis_store_msgs_per_s",
                sys.block_on(msgs_per_s(store.clone(), 100, 5_000 / scale))?,
            );
            // The Manage round trip in one process on the Redis store: what the store's
            // round trips cost without the cross-process hops.
            let (p50, _) = sys.block_on(inproc_roundtrip(store, 1_000 / scale))?;
            note("redis_store_roundtrip_p50_us", p50);
        }
        if wants("cluster") {
            let f = sys.block_on(cluster::run(&url, 20_000 / scale, 2_000 / scale))?;
            put("redis_msgs_per_s", f.msgs_per_s);
            // Where a one-way message's cost goes: the sender's CPU includes its polling of the
            // threads; the Redis commands leave that polling's out.
            note("redis_msg_cpu_us_sender", f.per_msg[0]);
            note("redis_msg_cpu_us_receiver", f.per_msg[1]);
            note("redis_msg_cpu_us_redis_server", f.per_msg[2]);
            note("redis_msg_redis_commands", f.per_msg[3]);
            put("redis_roundtrip_p50_us", f.roundtrip_p50_us);
            put("failover_ms", f.failover_ms);
        }
        if wants("redis_bytes") {
            let n = 1_000 / scale;
            let b = sys.block_on(redis_bytes::run(&url, n))?;
            put("redis_bytes_per_agent", b.per_agent);
            // Where the bytes go: per agent, by kind of key (how many such keys in brackets).
            for (kind, (bytes, keys)) in &b.by_kind {
                note(
                    &format!("redis_bytes_per_agent_{kind} ({keys})"),
                    *bytes as f64 / n as f64,
                );
            }
        }
        drop(redis);
    }
    if wants("redis_cluster") {
        // A private cluster of three masters and three replicas (the tests' own starter),
        // stopped when dropped.
        let redis_cluster = agentd_tests::RedisCluster::start();
        // Replicas of a new cluster get their first copy a few seconds later (a full sync,
        // delayed by `repl-diskless-sync-delay`): until then they replicate nothing, and the
        // first run's replica CPU would be missing.
        for master in redis_cluster.masters() {
            redis_cluster.wait_replica_online(master.port, Duration::from_secs(30));
        }
        let n = 20_000 / scale;
        for (processes, key) in [
            (2, "redis_cluster_msgs_per_s"),
            (1, "redis_cluster_1p_msgs_per_s"),
        ] {
            let f = sys.block_on(redis_cluster::run(&redis_cluster, n, processes))?;
            put(key, f.msgs_per_s);
            let run = format!("redis_cluster_{processes}p");
            for (i, cpu) in f.cpu_us_processes.iter().enumerate() {
                note(&format!("{run}_msg_cpu_us_agentd_{i}"), *cpu);
            }
            // Each master by its place in `CLUSTER NODES`, with how many of the 8 partitions
            // it serves (their hash tags' slots fall unevenly on three masters).
            for (i, node) in f.nodes.iter().filter(|x| x.master).enumerate() {
                let parts = node.partitions;
                note(
                    &format!("{run}_msg_cpu_us_master{i} ({parts} p)"),
                    node.cpu_us,
                );
                note(
                    &format!("{run}_msg_commands_master{i} ({parts} p)"),
                    node.commands,
                );
            }
            note(&format!("{run}_msg_cpu_us_masters"), f.masters_cpu_us());
            note(&format!("{run}_msg_cpu_us_replicas"), f.replicas_cpu_us());
            note(&format!("{run}_msg_redis_commands"), f.commands());
        }
        drop(redis_cluster);
    }
    if let Some(path) = json_path {
        std::fs::write(
            &path,
            serde_json::to_string_pretty(&Value::Object(figures))?,
        )?;
        println!("wrote {path}");
    }
    Ok(())
}
