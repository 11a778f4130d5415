//! The two-process Redis scenarios. This process runs one agentd (the real service, on Redis);
//! the second is this same binary re-executed with `--serve`, so one command builds all it
//! needs. Both share a private redis-server (or, for `redis_cluster`, a private Redis
//! Cluster), 8 partitions and the service's default lease (`redis.lease_ms`), so that
//! `failover_ms` is what a deployment with the default settings sees.

use agentd::settings::Settings;
use agentd_proto::SpawnRequest;
use agentd_store::Keys;
use anyhow::{Context as _, bail};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const NS: &str = "benchc";
pub(crate) const PARTITIONS: u32 = 8;

/// Where the agentd processes of a scenario find Redis. One type for both kinds, so the
/// settings, the peer's command line and the scenarios are written once for either.
#[derive(Debug, Clone)]
pub(crate) enum RedisAt {
    /// One redis-server at this URL.
    Single(String),
    /// A Redis Cluster: its nodes' URLs (the first is `redis.url`, the others seeds).
    Cluster(Vec<String>),
}

impl RedisAt {
    /// The one command-line argument that names it for `--serve`: the URL, or `cluster:` and
    /// the URLs separated by commas.
    fn arg(&self) -> String {
        match self {
            RedisAt::Single(url) => url.clone(),
            RedisAt::Cluster(urls) => format!("cluster:{}", urls.join(",")),
        }
    }

    /// Reads [`Self::arg`] back.
    pub(crate) fn parse(arg: &str) -> RedisAt {
        match arg.strip_prefix("cluster:") {
            Some(urls) => RedisAt::Cluster(urls.split(',').map(str::to_string).collect()),
            None => RedisAt::Single(arg.to_string()),
        }
    }

    /// The `[redis]` lines that say where it is.
    fn toml(&self) -> anyhow::Result<String> {
        Ok(match self {
            RedisAt::Single(url) => format!("url = \"{url}\"\n"),
            RedisAt::Cluster(urls) => {
                let (first, seeds) = urls.split_first().context("a cluster without nodes")?;
                let seeds: Vec<String> = seeds.iter().map(|u| format!("\"{u}\"")).collect();
                format!(
                    "url = \"{first}\"\ncluster = true\ncluster_nodes = [{}]\n",
                    seeds.join(", ")
                )
            }
        })
    }
}

/// The settings of an agentd on namespace `ns` (the types and script of [`prepare`] in `dir`).
pub(crate) fn settings_in(redis: &RedisAt, dir: &Path, ns: &str) -> anyhow::Result<Settings> {
    let overrides = format!(
        "[server]\nbind = \"127.0.0.1:0\"\n\
         [redis]\n{}namespace = \"{ns}\"\npartitions = {PARTITIONS}\n\
         [model]\nscript = \"{}\"\n\
         [agents]\ndir = \"{}\"\n\
         [limits]\nmax_live_agents = 1000000\n\
         [log]\nfilter = \"error\"\n",
        redis.toml()?,
        dir.join("script.toml").display(),
        dir.join("types").display()
    );
    Settings::from_overrides(&overrides).map_err(|e| anyhow::anyhow!("{e}"))
}

/// Writes the scripted model and the agent types both processes load.
pub(crate) fn prepare(dir: &Path) -> anyhow::Result<()> {
    // `worker` names a built-in alias (of `coding`), so the worker type is `bworker` here.
    std::fs::write(
        dir.join("script.toml"),
        crate::SCRIPT.replace("agent = \"worker\"", "agent = \"bworker\""),
    )?;
    let types = dir.join("types");
    std::fs::create_dir_all(&types)?;
    std::fs::write(
        types.join("root.toml"),
        "name = \"root\"\ntitle = \"Root\"\nworkers = [\"bworker\"]\n",
    )?;
    std::fs::write(
        types.join("worker.toml"),
        "name = \"bworker\"\ntitle = \"Worker\"\n",
    )?;
    std::fs::write(
        types.join("sink.toml"),
        "name = \"sink\"\ntitle = \"Sink\"\n",
    )?;
    Ok(())
}

/// `agentd-bench --serve REDIS DIR [NS]`: the second agentd process (runs until killed), on
/// the Redis [`RedisAt::arg`] names and namespace `NS` (default that of [`run`]).
pub fn serve(redis: &str, dir: &Path, ns: Option<&str>) -> anyhow::Result<()> {
    let settings = settings_in(&RedisAt::parse(redis), dir, ns.unwrap_or(NS))?;
    actix_rt::System::new().block_on(async move {
        let running = agentd::Builder::new(settings.clone()).serve().await?;
        let id = running
            .redis
            .as_ref()
            .map(|b| b.process_id().to_string())
            .unwrap_or_default();
        println!("SERVING {id}");
        futures::future::pending::<()>().await;
        Ok(())
    })
}

/// The second process, killed on drop.
pub(crate) struct Peer {
    child: Child,
    /// Its agentd process id (the holder's name in the leases).
    pub(crate) id: String,
}

impl Peer {
    /// Its operating-system pid (for its CPU time).
    pub(crate) fn pid(&self) -> String {
        self.child.id().to_string()
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `BENCH_PEER_CALLGRIND=FILE` runs the second process under callgrind, its counts kept for
/// the one-way messages alone (zeroed before the first is sent, dumped into `FILE.<pid>.1`
/// once the last is handled), which are then sent one at a time ([`send_paced`]): the
/// receiving process's instructions per message.
fn peer_callgrind() -> Option<std::ffi::OsString> {
    std::env::var_os("BENCH_PEER_CALLGRIND")
}

/// Starts the second agentd process on `redis` and namespace `ns` and waits until it serves.
pub(crate) fn start_peer(redis: &RedisAt, dir: &Path, ns: &str) -> anyhow::Result<Peer> {
    let exe = std::env::current_exe()?;
    let mut command = match peer_callgrind() {
        Some(file) => {
            let mut out = std::ffi::OsString::from("--callgrind-out-file=");
            out.push(file);
            out.push(".%p");
            let mut c = Command::new("valgrind");
            c.args(["--tool=callgrind", "--quiet"]).arg(out).arg(exe);
            c
        }
        None => Command::new(exe),
    };
    let mut child = command
        .arg("--serve")
        .arg(redis.arg())
        .arg(dir)
        .arg(ns)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .context("re-executing agentd-bench --serve")?;
    let stdout = child.stdout.take().context("peer stdout")?;
    let mut lines = BufReader::new(stdout).lines();
    let id = loop {
        match lines.next() {
            Some(line) => {
                if let Some(id) = line?.strip_prefix("SERVING ") {
                    break id.to_string();
                }
            }
            None => bail!("the second agentd exited before serving"),
        }
    };
    std::thread::spawn(move || for _ in lines.map_while(Result::ok) {});
    Ok(Peer { child, id })
}

/// Who holds each partition's lease of namespace `ns` now.
pub(crate) async fn holders(
    con: &mut impl redis::aio::ConnectionLike,
    ns: &str,
) -> anyhow::Result<Vec<String>> {
    let keys = Keys::new(ns, PARTITIONS);
    let mut out = Vec::new();
    for k in 0..PARTITIONS {
        let h: Option<String> = redis::cmd("GET")
            .arg(keys.lease(k))
            .query_async(con)
            .await?;
        out.push(h.unwrap_or_default());
    }
    Ok(out)
}

/// Waits until every one of `holders` (agentd process ids) holds some partition of `ns` and
/// no one else holds any: the partitions are split between them (or all held by the one).
pub(crate) async fn wait_split(
    con: &mut impl redis::aio::ConnectionLike,
    ns: &str,
    holders_wanted: &[&str],
) -> anyhow::Result<Vec<String>> {
    let t = Instant::now();
    loop {
        let h = holders(con, ns).await?;
        if h.iter().all(|x| holders_wanted.contains(&x.as_str()))
            && holders_wanted.iter().all(|w| h.iter().any(|x| x == w))
        {
            return Ok(h);
        }
        if t.elapsed() > Duration::from_secs(30) {
            bail!("partitions never split between {holders_wanted:?}: {h:?}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// CPU seconds (user + system) a process has used so far, from `/proc/<pid>/stat`; 0 where
/// that cannot be read (the figure is a diagnostic).
pub(crate) fn cpu_seconds(pid: &str) -> f64 {
    let (user, system) = cpu_seconds_split(pid);
    user + system
}

/// CPU seconds a process has used so far in user and in kernel mode (`/proc/<pid>/stat`).
pub fn cpu_seconds_split(pid: &str) -> (f64, f64) {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name (which may hold spaces) start with the state (field 3);
    // utime and stime are fields 14 and 15.
    let after = stat.rsplit(')').next().unwrap_or("");
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|x| x.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    (ticks(11) / 100.0, ticks(12) / 100.0)
}

/// Commands redis-server has run since its statistics were last reset (`INFO commandstats`;
/// a script's inner commands count too).
pub(crate) async fn redis_commands(
    con: &mut impl redis::aio::ConnectionLike,
) -> anyhow::Result<f64> {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(con)
        .await?;
    Ok(info
        .lines()
        .filter_map(|l| {
            l.split_once("calls=")?
                .1
                .split(',')
                .next()?
                .parse::<f64>()
                .ok()
        })
        .sum())
}

/// What the two-process scenarios measured.
pub struct Figures {
    /// `redis_msgs_per_s`.
    pub msgs_per_s: f64,
    /// `redis_roundtrip_p50_us`.
    pub roundtrip_p50_us: f64,
    /// `failover_ms`.
    pub failover_ms: f64,
    /// Diagnostics of the one-way run, per message: CPU µs of the sending process, of the
    /// receiving one and of redis-server, and Redis commands.
    pub per_msg: [f64; 4],
}

/// Runs the two-process scenarios.
pub async fn run(url: &str, messages: usize, roundtrips: usize) -> anyhow::Result<Figures> {
    let dir = tempfile::tempdir()?;
    prepare(dir.path())?;
    let redis_at = RedisAt::Single(url.to_string());
    let here = agentd::Builder::new(settings_in(&redis_at, dir.path(), NS)?)
        .serve()
        .await?;
    let me = here
        .redis
        .as_ref()
        .map(|b| b.process_id().to_string())
        .context("the bench's agentd runs without Redis")?;
    let peer = start_peer(&redis_at, dir.path(), NS)?;
    let mut con = redis::Client::open(url)?
        .get_multiplexed_async_connection()
        .await?;
    // Wait until the partitions are split between the two.
    let h = wait_split(&mut con, NS, &[&me, &peer.id]).await?;
    let bus = here.redis.clone().context("bus")?;
    let sys = here.system.clone();
    let on_peer = |id: &str| h[bus.partition_of(id) as usize] == peer.id;

    // One-way messages from this process to 100 agents the peer owns.
    let sinks = spawn_sinks(&sys, 100, on_peer).await?;
    let keys = Keys::new(NS, PARTITIONS);
    let redis_pid = redis::cmd("INFO")
        .arg("server")
        .query_async::<String>(&mut con)
        .await?
        .lines()
        .find_map(|l| l.strip_prefix("process_id:"))
        .unwrap_or("0")
        .trim()
        .to_string();
    let peer_pid = peer.pid();
    let cpu_before = [
        cpu_seconds("self"),
        cpu_seconds(&peer_pid),
        cpu_seconds(&redis_pid),
    ];
    redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .query_async::<()>(&mut con)
        .await?;
    // `BENCH_MONITOR_ONEWAY=FILE`: the same trace of the one-way messages (which commands a
    // message costs, in order).
    let oneway_monitor = start_monitor(url, "BENCH_MONITOR_ONEWAY")?;
    callgrind_control(&peer_pid, "--zero")?;
    let t = Instant::now();
    let polls = if peer_callgrind().is_some() {
        send_paced(&sys, &mut con, &keys, &sinks, messages).await?
    } else {
        send_oneway(&sys, &sinks, messages).await?;
        wait_handled(&mut con, &keys, &sinks, 2 * messages as u64, t).await?
    };
    let msgs_per_s = messages as f64 / t.elapsed().as_secs_f64();
    stop_monitor(oneway_monitor);
    callgrind_control(&peer_pid, "--dump")?;
    let n = messages as f64;
    let per_msg = [
        (cpu_seconds("self") - cpu_before[0]) * 1e6 / n,
        (cpu_seconds(&peer_pid) - cpu_before[1]) * 1e6 / n,
        (cpu_seconds(&redis_pid) - cpu_before[2]) * 1e6 / n,
        (redis_commands(&mut con).await? - polls as f64) / n,
    ];
    if std::env::var_os("BENCH_CMDSTATS").is_some() {
        let info: String = redis::cmd("INFO")
            .arg("commandstats")
            .query_async(&mut con)
            .await?;
        eprintln!("{info}");
    }

    // Manage sync round trips from a root this process owns (its sync waits live here) to
    // worker threads the peer owns.
    let root = loop {
        let rec = sys
            .spawn(SpawnRequest {
                agent_type: Some("root".into()),
                ..Default::default()
            })
            .await
            .map_err(crate::e)?;
        if !on_peer(&rec.id) {
            break rec;
        }
    };
    let mut aliases = Vec::new();
    for i in 0..64 {
        let alias = format!("w{i}");
        let args = serde_json::json!({"command": "send_message", "worker": "Worker",
            "message": "ping", "threadAlias": alias});
        let r = sys
            .invoke_tool(Some(&root.id), "Manage", &args)
            .await
            .map_err(crate::e)?;
        let child = r["childThreadId"].as_str().unwrap_or_default().to_string();
        if on_peer(&child) {
            aliases.push(args);
        }
    }
    if aliases.is_empty() {
        bail!("no worker thread landed on the peer");
    }
    // `BENCH_MONITOR=FILE` records Redis's `MONITOR` trace of the round trips in FILE (each
    // command with its arrival time): where a round trip's time goes between commands.
    let monitor = start_monitor(url, "BENCH_MONITOR")?;
    let mut samples = Vec::with_capacity(roundtrips);
    for i in 0..roundtrips {
        let args = &aliases[i % aliases.len()];
        let t = Instant::now();
        let r = sys
            .invoke_tool(Some(&root.id), "Manage", args)
            .await
            .map_err(crate::e)?;
        samples.push(t.elapsed().as_secs_f64() * 1e6);
        if r["status"] != "ok" {
            bail!("round trip answered {r}");
        }
    }
    stop_monitor(monitor);
    let p50 = crate::percentile(&mut samples, 0.5);

    // Failover: kill -9 the peer, then time until a message for one of its agents is handled
    // here.
    let target = sinks[0].clone();
    let before = thread_len(&mut con, &keys, &target).await?;
    drop(peer);
    let t = Instant::now();
    sys.send(&target, "after the owner died", false)
        .await
        .map_err(crate::e)?;
    loop {
        let n = thread_len(&mut con, &keys, &target).await?;
        if n >= before + 2 {
            break;
        }
        if t.elapsed() > Duration::from_secs(60) {
            bail!("the dead owner's partition was never taken over");
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let failover_ms = t.elapsed().as_secs_f64() * 1e3;
    here.stop().await;
    Ok(Figures {
        msgs_per_s,
        roundtrip_p50_us: p50,
        failover_ms,
        per_msg,
    })
}

/// Spawns `sink` agents through `sys` until `n` of them are `wanted` (in the partitions of the
/// process that is to receive the messages); answers those.
pub(crate) async fn spawn_sinks(
    sys: &agentd_actors::AgentSystem,
    n: usize,
    wanted: impl Fn(&str) -> bool,
) -> anyhow::Result<Vec<String>> {
    let mut sinks = Vec::with_capacity(n);
    while sinks.len() < n {
        let rec = sys
            .spawn(SpawnRequest {
                agent_type: Some("sink".into()),
                ..Default::default()
            })
            .await
            .map_err(crate::e)?;
        if wanted(&rec.id) {
            sinks.push(rec.id);
        }
    }
    Ok(sinks)
}

/// Sends `messages` one-way messages from `sys` to `sinks` in turn, 256 in flight.
pub(crate) async fn send_oneway(
    sys: &agentd_actors::AgentSystem,
    sinks: &[String],
    messages: usize,
) -> anyhow::Result<()> {
    use futures::StreamExt;
    let mut sends = futures::stream::FuturesUnordered::new();
    for i in 0..messages {
        let s = sys.clone();
        let id = sinks[i % sinks.len()].clone();
        sends.push(async move { s.send(&id, &format!("m{i}"), false).await });
        if sends.len() >= 256
            && let Some(r) = sends.next().await
        {
            r.map_err(crate::e)?;
        }
    }
    while let Some(r) = sends.next().await {
        r.map_err(crate::e)?;
    }
    Ok(())
}

/// Sends `messages` one-way messages to `sinks` in turn, one at a time: each once the one
/// before it is in its thread with its answer. Under callgrind ([`peer_callgrind`]) this makes
/// the receiver's count per message the same from run to run — one partition read, one push,
/// one turn, one flush per message — where 256 in flight let the count depend on how many
/// entries each read happens to find. Answers the commands its polling sent.
async fn send_paced(
    sys: &agentd_actors::AgentSystem,
    con: &mut impl redis::aio::ConnectionLike,
    keys: &Keys,
    sinks: &[String],
    messages: usize,
) -> anyhow::Result<u64> {
    let mut polls = 0u64;
    let mut lengths = Vec::with_capacity(sinks.len());
    for id in sinks {
        lengths.push(thread_len(con, keys, id).await?);
        polls += 1;
    }
    for i in 0..messages {
        let k = i % sinks.len();
        sys.send(&sinks[k], &format!("m{i}"), false)
            .await
            .map_err(crate::e)?;
        let since = Instant::now();
        loop {
            polls += 1;
            if thread_len(con, keys, &sinks[k]).await? >= lengths[k] + 2 {
                break;
            }
            if since.elapsed() > Duration::from_secs(60) {
                bail!("message {i} not handled in 60 s");
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        lengths[k] += 2;
    }
    Ok(polls)
}

/// Polls the threads of `sinks` every 20 ms until they hold `entries` entries in all (every
/// input and its answer), failing after 300 s from `since`. Answers how many commands the
/// polling sent (one `LLEN` per sink per poll): the caller subtracts them from the Redis
/// commands it reports per message, which are agentd's, not the bench's. A poll is one pipeline
/// per partition (one slot, for a Redis Cluster), so that its cost in Redis CPU, which the
/// caller cannot subtract, stays small (what a round trip per sink cost: BENCHMARKS.md, "A
/// flood waits in its stream, events after the flush, plain acknowledgements").
pub(crate) async fn wait_handled(
    con: &mut impl redis::aio::ConnectionLike,
    keys: &Keys,
    sinks: &[String],
    entries: u64,
    since: Instant,
) -> anyhow::Result<u64> {
    let mut by_partition: std::collections::BTreeMap<u32, redis::Pipeline> = Default::default();
    for id in sinks {
        by_partition
            .entry(keys.partition_of(id))
            .or_insert_with(redis::pipe)
            .cmd("LLEN")
            .arg(keys.agent_part(id, "thread"));
    }
    let mut sent = 0u64;
    loop {
        let mut have = 0u64;
        for pipe in by_partition.values() {
            let lens: Vec<u64> = pipe.query_async(con).await?;
            have += lens.into_iter().map(entries_in).sum::<u64>();
        }
        sent += sinks.len() as u64;
        if have >= entries {
            return Ok(sent);
        }
        if since.elapsed() > Duration::from_secs(300) {
            bail!("messages not handled in 300 s ({have} of {entries} entries)");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// `callgrind_control ARG PID` when the peer runs under callgrind ([`peer_callgrind`]).
fn callgrind_control(pid: &str, arg: &str) -> anyhow::Result<()> {
    if peer_callgrind().is_none() {
        return Ok(());
    }
    let status = Command::new("callgrind_control")
        .args([arg, pid])
        .stdout(Stdio::null())
        .status()
        .context("callgrind_control")?;
    if !status.success() {
        bail!("callgrind_control {arg} {pid}: {status}");
    }
    Ok(())
}

/// How many entries agent `id`'s thread holds (a list of `<id> <entry>` pairs).
async fn thread_len(
    con: &mut impl redis::aio::ConnectionLike,
    keys: &Keys,
    id: &str,
) -> anyhow::Result<u64> {
    let n: u64 = redis::cmd("LLEN")
        .arg(keys.agent_part(id, "thread"))
        .query_async(con)
        .await?;
    Ok(entries_in(n))
}

/// The entries a thread list of `len` elements holds: each is an `<id>` then its `<entry>`.
fn entries_in(len: u64) -> u64 {
    len / 2
}

/// Starts `redis-cli monitor` into the file the environment variable `var` names, if set.
fn start_monitor(url: &str, var: &str) -> anyhow::Result<Option<Child>> {
    let Some(file) = std::env::var_os(var) else {
        return Ok(None);
    };
    let child = Command::new("redis-cli")
        .args(["-u", url, "monitor"])
        .stdout(std::fs::File::create(file)?)
        .spawn()
        .with_context(|| format!("redis-cli for {var}"))?;
    Ok(Some(child))
}

/// Stops a monitor started by [`start_monitor`].
fn stop_monitor(monitor: Option<Child>) {
    if let Some(mut monitor) = monitor {
        let _ = monitor.kill();
        let _ = monitor.wait();
    }
}
