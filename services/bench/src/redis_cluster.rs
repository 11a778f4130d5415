//! The Redis Cluster scenario (`--only redis_cluster`): one-way messages through agentd on a
//! private cluster of three masters and three replicas (the tests' [`RedisCluster`]), with one
//! agentd process and with two. On this machine every process shares the same 2 cores, so the
//! messages per second say little about a real deployment; the CPU each Redis node spends per
//! message does not depend on that sharing, and is what docs/capacity.md sizes nodes from.

use crate::cluster::{self, PARTITIONS, RedisAt};
use agentd_store::Keys;
use agentd_tests::RedisCluster;
use anyhow::Context as _;
use std::time::Instant;

/// Agents the messages go to.
const SINKS: usize = 100;

/// One Redis node's share of a run.
pub struct Node {
    /// Whether it is a master (else a replica).
    pub master: bool,
    /// How many of the namespace's partitions it serves (masters).
    pub partitions: usize,
    /// CPU µs per message.
    pub cpu_us: f64,
    /// Commands it ran per message (masters; the bench's polling left out).
    pub commands: f64,
}

/// What one run measured.
pub struct Figures {
    /// Messages per second, from the first send until every thread holds its inputs and answers.
    pub msgs_per_s: f64,
    /// CPU µs per message of each agentd process (the bench's own first; it also sends and
    /// polls).
    pub cpu_us_processes: Vec<f64>,
    /// Every node of the cluster.
    pub nodes: Vec<Node>,
}

impl Figures {
    /// CPU µs per message of the masters together.
    pub fn masters_cpu_us(&self) -> f64 {
        self.nodes
            .iter()
            .filter(|n| n.master)
            .map(|n| n.cpu_us)
            .sum()
    }

    /// CPU µs per message of the replicas together.
    pub fn replicas_cpu_us(&self) -> f64 {
        self.nodes
            .iter()
            .filter(|n| !n.master)
            .map(|n| n.cpu_us)
            .sum()
    }

    /// Redis commands per message, summed over the masters.
    pub fn commands(&self) -> f64 {
        self.nodes.iter().map(|n| n.commands).sum()
    }
}

/// A node of the cluster as the run watches it.
struct Watched {
    master: bool,
    partitions: usize,
    slots: Vec<(u16, u16)>,
    pid: String,
    con: redis::aio::MultiplexedConnection,
}

/// Sends `messages` one-way messages to 100 agents on the cluster with `processes` agentd
/// processes (1: this one owns every partition; 2: the re-executed peer owns the agents).
/// Each run has a namespace of its own, so a run never sees the other's leases or agents.
pub async fn run(
    redis_cluster: &RedisCluster,
    messages: usize,
    processes: usize,
) -> anyhow::Result<Figures> {
    let urls = redis_cluster.urls();
    let redis_at = RedisAt::Cluster(urls.clone());
    let ns = format!("benchrc{processes}");
    let dir = tempfile::tempdir()?;
    cluster::prepare(dir.path())?;
    let here = agentd::Builder::new(cluster::settings_in(&redis_at, dir.path(), &ns)?)
        .serve()
        .await?;
    let me = here
        .redis
        .as_ref()
        .map(|b| b.process_id().to_string())
        .context("the bench's agentd runs without Redis")?;
    let peer = if processes >= 2 {
        Some(cluster::start_peer(&redis_at, dir.path(), &ns)?)
    } else {
        None
    };
    let mut con = redis::cluster::ClusterClient::new(urls)?
        .get_async_connection()
        .await
        .context("a cluster connection for the bench")?;
    let mut wanted = vec![me.as_str()];
    if let Some(p) = &peer {
        wanted.push(p.id.as_str());
    }
    let h = cluster::wait_split(&mut con, &ns, &wanted).await?;
    // The agents go to the peer's partitions when there is one, else to this process's.
    let owner = wanted.last().copied().unwrap_or(me.as_str());
    let bus = here.redis.clone().context("bus")?;
    let sys = here.system.clone();
    let sinks =
        cluster::spawn_sinks(&sys, SINKS, |id| h[bus.partition_of(id) as usize] == owner).await?;

    let keys = Keys::new(&ns, PARTITIONS);
    let mut watched = Vec::new();
    for node in redis_cluster.nodes() {
        let mut c = redis::Client::open(format!("redis://127.0.0.1:{}/", node.port))?
            .get_multiplexed_async_connection()
            .await?;
        let info: String = redis::cmd("INFO").arg("server").query_async(&mut c).await?;
        let pid = info
            .lines()
            .find_map(|l| l.strip_prefix("process_id:"))
            .context("INFO server without process_id")?
            .trim()
            .to_string();
        let partitions = (0..PARTITIONS)
            .filter(|k| {
                let slot = agentd_store::slot(keys.partition(*k).as_bytes());
                node.slots.iter().any(|(a, b)| (*a..=*b).contains(&slot))
            })
            .count();
        watched.push(Watched {
            master: node.master,
            partitions,
            slots: node.slots,
            pid,
            con: c,
        });
    }
    let mut pids = vec!["self".to_string()];
    if let Some(p) = &peer {
        pids.push(p.pid());
    }
    let agentd_before: Vec<f64> = pids.iter().map(|p| cluster::cpu_seconds(p)).collect();
    for w in &mut watched {
        redis::cmd("CONFIG")
            .arg("RESETSTAT")
            .query_async::<()>(&mut w.con)
            .await?;
    }
    let nodes_before: Vec<f64> = watched
        .iter()
        .map(|w| cluster::cpu_seconds(&w.pid))
        .collect();

    let t = Instant::now();
    cluster::send_oneway(&sys, &sinks, messages).await?;
    let polls = cluster::wait_handled(&mut con, &keys, &sinks, 2 * messages as u64, t).await?;
    let msgs_per_s = messages as f64 / t.elapsed().as_secs_f64();

    let n = messages as f64;
    let cpu_us_processes = pids
        .iter()
        .zip(&agentd_before)
        .map(|(p, before)| (cluster::cpu_seconds(p) - before) * 1e6 / n)
        .collect();
    // The polling's `LLEN`s went, round after round, to the masters serving the sinks' thread
    // keys: each master's share is taken off its own count.
    let rounds = polls / sinks.len() as u64;
    let mut nodes = Vec::new();
    for (w, before) in watched.iter_mut().zip(&nodes_before) {
        let cpu_us = (cluster::cpu_seconds(&w.pid) - before) * 1e6 / n;
        let commands = if w.master {
            let polled = sinks
                .iter()
                .filter(|id| {
                    let slot = agentd_store::slot(keys.agent_part(id, "thread").as_bytes());
                    w.slots.iter().any(|(a, b)| (*a..=*b).contains(&slot))
                })
                .count() as u64
                * rounds;
            (cluster::redis_commands(&mut w.con).await? - polled as f64).max(0.0) / n
        } else {
            0.0
        };
        nodes.push(Node {
            master: w.master,
            partitions: w.partitions,
            cpu_us,
            commands,
        });
    }
    drop(peer);
    here.stop().await;
    Ok(Figures {
        msgs_per_s,
        cpu_us_processes,
        nodes,
    })
}
