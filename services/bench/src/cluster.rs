//! The two-process Redis scenarios. This process runs one agentd (the real service, on Redis);
//! the second is this same binary re-executed with `--serve`, so one command builds all it
//! needs. Both share a private redis-server, 8 partitions and a 1,000 ms lease.

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
const LEASE_MS: u64 = 1_000;

/// The settings both processes run with.
fn settings(url: &str, dir: &Path) -> anyhow::Result<Settings> {
    settings_in(url, dir, NS)
}

/// The settings of an agentd on namespace `ns` (the types and script of [`prepare`] in `dir`).
pub(crate) fn settings_in(url: &str, dir: &Path, ns: &str) -> anyhow::Result<Settings> {
    let overrides = format!(
        "[server]\nbind = \"127.0.0.1:0\"\n\
         [redis]\nurl = \"{url}\"\nnamespace = \"{ns}\"\npartitions = {PARTITIONS}\nlease_ms = {LEASE_MS}\n\
         [model]\nscript = \"{}\"\n\
         [agents]\ndir = \"{}\"\n\
         [limits]\nmax_live_agents = 1000000\n\
         [log]\nfilter = \"error\"\n",
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

/// `agentd-bench --serve URL DIR`: the second agentd process (runs until killed).
pub fn serve(url: &str, dir: &Path) -> anyhow::Result<()> {
    let settings = settings(url, dir)?;
    actix_rt::System::new().block_on(async move {
        let running = agentd::app::start(&settings).await?;
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
struct Peer {
    child: Child,
    id: String,
}

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `BENCH_PEER_CALLGRIND=FILE` runs the second process under callgrind, its counts kept for
/// the one-way messages alone (zeroed before the first is sent, dumped into `FILE.<pid>.1`
/// once the last is handled): the receiving process's instructions per message.
fn peer_callgrind() -> Option<std::ffi::OsString> {
    std::env::var_os("BENCH_PEER_CALLGRIND")
}

fn start_peer(url: &str, dir: &Path) -> anyhow::Result<Peer> {
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
        .arg(url)
        .arg(dir)
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

/// Who holds each partition's lease now.
async fn holders(con: &mut redis::aio::MultiplexedConnection) -> anyhow::Result<Vec<String>> {
    let keys = Keys::new(NS, PARTITIONS);
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

/// CPU seconds (user + system) a process has used so far, from `/proc/<pid>/stat`; 0 where
/// that cannot be read (the figure is a diagnostic).
fn cpu_seconds(pid: &str) -> f64 {
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
async fn redis_commands(con: &mut redis::aio::MultiplexedConnection) -> anyhow::Result<f64> {
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
    let here = agentd::app::start(&settings(url, dir.path())?).await?;
    let me = here
        .redis
        .as_ref()
        .map(|b| b.process_id().to_string())
        .context("the bench's agentd runs without Redis")?;
    let peer = start_peer(url, dir.path())?;
    let mut con = redis::Client::open(url)?
        .get_multiplexed_async_connection()
        .await?;
    // Wait until the partitions are split between the two.
    let t = Instant::now();
    loop {
        let h = holders(&mut con).await?;
        if h.iter().all(|x| *x == me || *x == peer.id) && h.contains(&me) && h.contains(&peer.id) {
            break;
        }
        if t.elapsed() > Duration::from_secs(30) {
            bail!("partitions never split between the two processes: {h:?}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let bus = here.redis.clone().context("bus")?;
    let sys = here.system.clone();
    let h = holders(&mut con).await?;
    let on_peer = |id: &str| h[bus.partition_of(id) as usize] == peer.id;

    // One-way messages from this process to 100 agents the peer owns.
    let mut sinks = Vec::new();
    while sinks.len() < 100 {
        let rec = sys
            .spawn(SpawnRequest {
                agent_type: Some("sink".into()),
                ..Default::default()
            })
            .await
            .map_err(crate::e)?;
        if on_peer(&rec.id) {
            sinks.push(rec.id);
        }
    }
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
    let peer_pid = peer.child.id().to_string();
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
    {
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
    }
    loop {
        let mut entries = 0u64;
        for id in &sinks {
            entries += thread_len(&mut con, &keys, id).await?;
        }
        if entries >= 2 * messages as u64 {
            break;
        }
        if t.elapsed() > Duration::from_secs(300) {
            bail!("messages not handled in 300 s ({entries} entries)");
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let msgs_per_s = messages as f64 / t.elapsed().as_secs_f64();
    stop_monitor(oneway_monitor);
    callgrind_control(&peer_pid, "--dump")?;
    let n = messages as f64;
    let per_msg = [
        (cpu_seconds("self") - cpu_before[0]) * 1e6 / n,
        (cpu_seconds(&peer_pid) - cpu_before[1]) * 1e6 / n,
        (cpu_seconds(&redis_pid) - cpu_before[2]) * 1e6 / n,
        redis_commands(&mut con).await? / n,
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
    con: &mut redis::aio::MultiplexedConnection,
    keys: &Keys,
    id: &str,
) -> anyhow::Result<u64> {
    let n: u64 = redis::cmd("LLEN")
        .arg(keys.agent_part(id, "thread"))
        .query_async(con)
        .await?;
    Ok(n / 2)
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
