//! `agentd-bench`: measures agentd on this machine and prints a table of figures; with
//! `--json FILE` also writes them as a flat JSON object. Every scenario runs real actors; the
//! Redis ones start a private `redis-server` on a free loopback port (`redis_cluster`: a private
//! Redis Cluster of three masters and three replicas).
//!
//! `cargo run --release -p agentd-bench -- --json bench.json`
//!
//! The in-process and embedded scenarios are in this file; the others in their modules:
//!
//! | module | what it holds |
//! |---|---|
//! | `cluster` | the two-process Redis scenarios: this process's agentd and this binary re-executed with `--serve` |
//! | `model_io` | the model path under load: agents on the OpenAI-compatible backend against a local endpoint |
//! | `redis_bytes` | `redis_bytes_per_agent`: what a small agent costs in Redis |
//! | `redis_cluster` | the Redis Cluster scenario: one-way messages and each node's CPU per message |

use agentd_actors::{AgentSystem, AgentType, AgentTypes, RuntimeConfig, SystemClock, ThreadStore};
use agentd_models::ScriptedModel;
use agentd_proto::{ManageOptions, SpawnRequest};
use agentd_store::{MemoryStore, RedbStore};
use anyhow::{Context as _, bail};
use serde_json::{Map, Value, json};
use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

mod cluster;
mod model_io;
mod redis_bytes;
mod redis_cluster;

/// The same allocator as the service binary, so the figures are the service's.
#[global_allocator]
static GLOBAL: agentd_alloc::Mimalloc = agentd_alloc::Mimalloc;

const SCRIPT: &str = "[[rule]]\nagent = \"worker\"\ntext = \"done\"\nusage = { input = 1, output = 1 }\n\n[[rule]]\nagent = \"sink\"\ntext = \"\"\nusage = { input = 1, output = 1 }\n\n[[rule]]\ntext = \"\"\n";

fn types() -> anyhow::Result<AgentTypes> {
    let mut root = AgentType {
        name: "root".into(),
        title: "Root".into(),
        workers: vec!["worker".into()],
        ..Default::default()
    };
    root.manage = ManageOptions::default();
    let worker = AgentType {
        name: "worker".into(),
        title: "Worker".into(),
        ..Default::default()
    };
    let sink = AgentType {
        name: "sink".into(),
        title: "Sink".into(),
        ..Default::default()
    };
    let sub = AgentType {
        name: "subagent".into(),
        title: "Sub".into(),
        ..Default::default()
    };
    AgentTypes::new([root, worker, sink, sub]).map_err(|e| anyhow::anyhow!("{e}"))
}

/// The agent system as the service builds it (`agentd::Builder`: the default settings, the
/// event log's fan-out), on `store`, with the bench's script and types, one Arbiter.
async fn system(
    store: Arc<dyn ThreadStore>,
    tweak: impl FnOnce(&mut RuntimeConfig),
) -> anyhow::Result<AgentSystem> {
    let clock = Arc::new(SystemClock);
    let model = ScriptedModel::from_toml_str(SCRIPT, clock.clone())?;
    let service = agentd::Builder::new(agentd::Settings::from_overrides("")?)
        .clock(clock)
        .store(store)
        .model(Arc::new(model))
        .types(types()?)
        .config(|config| {
            config.arbiters = 1;
            config.limits.max_live_agents = 1_000_000;
            tweak(config);
        })
        .build()
        .await?;
    Ok(service.system)
}

fn percentile(samples: &mut [f64], p: f64) -> f64 {
    samples.sort_by(|a, b| a.total_cmp(b));
    let i = ((samples.len() as f64 - 1.0) * p).round() as usize;
    samples.get(i).copied().unwrap_or(0.0)
}

fn e(err: agentd_proto::AgentdError) -> anyhow::Error {
    anyhow::anyhow!("{err}")
}

/// Root → Manage send_message (sync) → worker → reply, memory store, one Arbiter.
async fn inproc_roundtrip(store: Arc<dyn ThreadStore>, n: usize) -> anyhow::Result<(f64, f64)> {
    let sys = system(store, |_| {}).await?;
    let root = sys
        .spawn(SpawnRequest {
            agent_type: Some("root".into()),
            ..Default::default()
        })
        .await
        .map_err(e)?;
    let args_for = |alias: &str| json!({"command": "send_message", "worker": "Worker", "message": "ping", "threadAlias": alias});
    let mut args = args_for("bench");
    for _ in 0..50 {
        sys.invoke_tool(Some(&root.id), "Manage", &args)
            .await
            .map_err(e)?;
    }
    let mut samples = Vec::with_capacity(n);
    for i in 0..n {
        // A new worker thread every 100 round trips keeps threads short (each turn reads its
        // whole thread; long conversations are what compaction is for). The arguments are
        // made once per thread and lent to each call: the harness's own JSON is not counted.
        if i % 100 == 0 {
            args = args_for(&format!("bench-{}", i / 100));
            sys.invoke_tool(Some(&root.id), "Manage", &args)
                .await
                .map_err(e)?;
        }
        let t = Instant::now();
        let r = sys
            .invoke_tool(Some(&root.id), "Manage", &args)
            .await
            .map_err(e)?;
        samples.push(t.elapsed().as_secs_f64() * 1e6);
        if r["status"] != "ok" {
            bail!("round trip answered {r}");
        }
    }
    sys.shutdown().await;
    Ok((
        percentile(&mut samples, 0.5),
        percentile(&mut samples, 0.99),
    ))
}

/// One-way messages into the threads of `agents` agents whose script answers nothing.
async fn msgs_per_s(
    store: Arc<dyn ThreadStore>,
    agents: usize,
    messages: usize,
) -> anyhow::Result<f64> {
    let sys = system(store.clone(), |_| {}).await?;
    let mut ids = Vec::with_capacity(agents);
    for _ in 0..agents {
        ids.push(
            sys.spawn(SpawnRequest {
                agent_type: Some("sink".into()),
                ..Default::default()
            })
            .await
            .map_err(e)?
            .id,
        );
    }
    let t = Instant::now();
    let mut sends = futures::stream::FuturesUnordered::new();
    for i in 0..messages {
        let s = sys.clone();
        let id = ids[i % agents].clone();
        sends.push(async move { s.send(&id, &format!("m{i}"), false).await });
        if sends.len() >= 256 {
            use futures::StreamExt;
            if let Some(r) = sends.next().await {
                r.map_err(e)?;
            }
        }
    }
    use futures::StreamExt;
    while let Some(r) = sends.next().await {
        r.map_err(e)?;
    }
    // Delivered into the threads: the last agents have all their inputs.
    let per = messages / agents;
    loop {
        let mut done = true;
        for id in ids.iter().rev().take(8) {
            if store.thread(id).await?.len() < per * 2 {
                done = false;
                break;
            }
        }
        if done {
            break;
        }
        if t.elapsed() > Duration::from_secs(300) {
            bail!("messages not delivered in 300 s");
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let rate = messages as f64 / t.elapsed().as_secs_f64();
    sys.shutdown().await;
    Ok(rate)
}

async fn spawn_per_s(n: usize) -> anyhow::Result<f64> {
    let sys = system(Arc::new(MemoryStore::new()), |c| {
        c.limits.max_children = u32::MAX
    })
    .await?;
    let root = sys
        .spawn(SpawnRequest {
            agent_type: Some("root".into()),
            ..Default::default()
        })
        .await
        .map_err(e)?;
    let t = Instant::now();
    for _ in 0..n {
        sys.spawn(SpawnRequest {
            agent_type: Some("subagent".into()),
            parent_id: Some(root.id.clone()),
            ..Default::default()
        })
        .await
        .map_err(e)?;
    }
    let rate = n as f64 / t.elapsed().as_secs_f64();
    sys.shutdown().await;
    Ok(rate)
}

fn rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| {
            s.split_whitespace()
                .nth(1)
                .and_then(|p| p.parse::<u64>().ok())
        })
        .map(|pages| pages * 4096)
        .unwrap_or(0)
}

async fn rss_per_idle_agent(n: usize) -> anyhow::Result<f64> {
    let sys = system(Arc::new(MemoryStore::new()), |_| {}).await?;
    let before = rss_bytes();
    for _ in 0..n {
        sys.spawn(SpawnRequest {
            agent_type: Some("subagent".into()),
            ..Default::default()
        })
        .await
        .map_err(e)?;
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let after = rss_bytes();
    sys.shutdown().await;
    Ok((after.saturating_sub(before)) as f64 / n as f64)
}

/// [`rss_per_idle_agent`] in a new process (this binary, `--rss N`): memory that earlier
/// scenarios freed would otherwise be reused by the idle agents and flatter the figure, and
/// 100,000 agents' leftovers would slow the scenarios after it.
fn rss_in_fresh_process(n: usize) -> anyhow::Result<f64> {
    let out = std::process::Command::new(std::env::current_exe()?)
        .args(["--rss", &n.to_string()])
        .output()?;
    if !out.status.success() {
        bail!(
            "the rss scenario failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().parse()?)
}

/// A private redis-server (killed on drop; its directory removed with it).
struct Redis(Child, u16, #[allow(dead_code)] tempfile::TempDir);

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start_redis() -> anyhow::Result<Redis> {
    let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
    let dir = tempfile::tempdir()?;
    let child = Command::new("redis-server")
        .args([
            "--port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
        ])
        .arg("--dir")
        .arg(dir.path())
        .stdout(Stdio::null())
        .spawn()
        .context("redis-server must be installed")?;
    let url = format!("redis://127.0.0.1:{port}/");
    let t = Instant::now();
    while redis::Client::open(url.as_str())?.get_connection().is_err() {
        if t.elapsed() > Duration::from_secs(10) {
            bail!("redis-server did not start");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(Redis(child, port, dir))
}

/// Raw XADD → XREADGROUP → XACK of `payload`-byte entries, 100 per pipeline / COUNT 100.
fn redis_raw_msgs_per_s(url: &str, n: usize, payload: usize) -> anyhow::Result<f64> {
    let mut con = redis::Client::open(url)?.get_connection()?;
    let _: redis::RedisResult<()> = redis::cmd("XGROUP")
        .arg("CREATE")
        .arg("raw")
        .arg("g")
        .arg("0")
        .arg("MKSTREAM")
        .query(&mut con);
    let body = vec![b'x'; payload];
    let t = Instant::now();
    let mut sent = 0;
    let mut got = 0;
    while got < n {
        if sent < n {
            let mut p = redis::pipe();
            for _ in 0..100 {
                p.cmd("XADD")
                    .arg("raw")
                    .arg("*")
                    .arg("m")
                    .arg(&body)
                    .ignore();
            }
            p.query::<()>(&mut con)?;
            sent += 100;
        }
        let reply: Option<redis::streams::StreamReadReply> = redis::cmd("XREADGROUP")
            .arg("GROUP")
            .arg("g")
            .arg("c")
            .arg("COUNT")
            .arg(100)
            .arg("STREAMS")
            .arg("raw")
            .arg(">")
            .query(&mut con)?;
        let ids: Vec<String> = reply
            .map(|r| r.keys)
            .unwrap_or_default()
            .into_iter()
            .flat_map(|k| k.ids)
            .map(|i| i.id)
            .collect();
        if !ids.is_empty() {
            redis::cmd("XACK")
                .arg("raw")
                .arg("g")
                .arg(&ids)
                .query::<i64>(&mut con)?;
            got += ids.len();
        }
    }
    Ok(n as f64 / t.elapsed().as_secs_f64())
}

/// Raw ping-pong through two streams (XADD, blocking XREAD on the other side).
fn redis_raw_roundtrip_p50_us(url: &str, n: usize, payload: usize) -> anyhow::Result<f64> {
    let client = redis::Client::open(url)?;
    let mut echo = client.get_connection()?;
    let mut con = client.get_connection()?;
    let body = vec![b'x'; payload];
    let echoer = std::thread::spawn(move || -> anyhow::Result<()> {
        let mut last = "0".to_string();
        for _ in 0..n {
            let reply: redis::streams::StreamReadReply = redis::cmd("XREAD")
                .arg("BLOCK")
                .arg(0)
                .arg("STREAMS")
                .arg("ping")
                .arg(&last)
                .query(&mut echo)?;
            for k in reply.keys {
                for id in k.ids {
                    last = id.id.clone();
                    let m: Vec<u8> = id.get("m").unwrap_or_default();
                    redis::cmd("XADD")
                        .arg("pong")
                        .arg("*")
                        .arg("m")
                        .arg(m)
                        .query::<String>(&mut echo)?;
                }
            }
        }
        Ok(())
    });
    let mut last = "0".to_string();
    let mut samples = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        redis::cmd("XADD")
            .arg("ping")
            .arg("*")
            .arg("m")
            .arg(&body)
            .query::<String>(&mut con)?;
        let reply: redis::streams::StreamReadReply = redis::cmd("XREAD")
            .arg("BLOCK")
            .arg(0)
            .arg("STREAMS")
            .arg("pong")
            .arg(&last)
            .query(&mut con)?;
        if let Some(id) = reply.keys.first().and_then(|k| k.ids.last()) {
            last = id.id.clone();
        }
        samples.push(t.elapsed().as_secs_f64() * 1e6);
    }
    echoer
        .join()
        .map_err(|_| anyhow::anyhow!("echo thread"))??;
    Ok(percentile(&mut samples, 0.5))
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
