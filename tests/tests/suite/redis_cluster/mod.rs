//! agentd on Redis, as real processes on a private redis-server: cross-process Manage (sync and
//! async), the command stream used by a plain Redis client, de-duplication of redelivered
//! entries, dead letters, and failover after `kill -9` of a partition owner.
//!
//! | module | what it tests |
//! |---|---|
//! | `processes` | Agents of two processes working together: Manage sync and async, dependencies across processes, calls that act on a live agent run where it lives, inspections, a worker's output through its parent's stream, rate limits and the outbox. |
//! | `commands` | The command stream as a plain Redis client drives it: commands, their answers and their limits, redelivered entries applied once, dead letters, generated garbage. |
//! | `failover` | Failover: `kill -9` of a partition owner, a frozen process, load across a kill, events and readiness while leases move, an entry read late by a process that lost its partition. |
//! | `streams` | Partition streams that stay bounded: however many messages pass, while agents hold what they take, and under a flood. |
//! | `on_cluster` | On a Redis Cluster (three masters, three replicas): one slot per command and script, Manage, commands, events and a `kill -9` takeover, a reshard under load, ASK redirections. |

mod commands;
mod failover;
mod on_cluster;
mod processes;
mod streams;

use agentd_proto::codec::{decode_envelope, encode_envelope};
use agentd_proto::{Address, Command, Envelope, InboxItem, Item, SpawnRequest};
use agentd_tests::process::wait_balanced;
use agentd_tests::{
    AgentdProcess, RedisCluster, RedisServer, TestConnection, TestRedis, eventually_blocking,
};
use serde_json::json;
use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

const PARTITIONS: u32 = 8;

const NS: &str = "t";

const SCRIPT: &str = r#"
[[rule]]
contains = "please yield"
[[rule.tool_calls]]
name = "yield_to_parent"
arguments = { result = "dependency done" }

[[rule]]
contains = "take your time"
delay_ms = 30000
text = "slow done"

[[rule]]
contains = "take a while"
delay_ms = 12000
text = "slow done"

[[rule]]
agent = "research"
text = "Findings for: {{input}}"

[[rule]]
agent = "lead"
text = "ok"

[[rule]]
text = "echo: {{input}}"
"#;

struct Cluster {
    redis: TestRedis,
    _dir: tempfile::TempDir,
    env: Vec<(&'static str, String)>,
}

impl Cluster {
    /// A cluster whose processes hold leases of `ms` (renewed every sixteenth of it).
    fn with_lease_ms(ms: u64) -> Cluster {
        Cluster::new().with("AGENTD__REDIS__LEASE_MS", ms.to_string())
    }

    /// This cluster, its processes started with setting `key` (an `AGENTD__…` variable) at
    /// `value`.
    fn with(mut self, key: &'static str, value: String) -> Cluster {
        self.env.retain(|(k, _)| *k != key);
        self.env.push((key, value));
        self
    }

    /// Without the setting `key` (the scripted model's script, for another model backend).
    fn without(mut self, key: &'static str) -> Cluster {
        self.env.retain(|(k, _)| *k != key);
        self
    }

    fn new() -> Cluster {
        Cluster::on(TestRedis::from_env())
    }

    /// A cluster whose processes run on `redis`.
    fn on(redis: TestRedis) -> Cluster {
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("script.toml");
        std::fs::write(&script, SCRIPT).unwrap();
        let mut env = redis.env();
        env.extend([
            ("AGENTD__REDIS__NAMESPACE", NS.to_string()),
            ("AGENTD__REDIS__PARTITIONS", PARTITIONS.to_string()),
            ("AGENTD__REDIS__LEASE_MS", "1000".to_string()),
            // Lease moves, claims and drains in a failing test's output.
            ("RUST_LOG", "warn,agentd_bus=info".to_string()),
            ("AGENTD__REDIS__MAX_ENVELOPE_BYTES", "8192".to_string()),
            ("AGENTD__REDIS__MAX_DELIVERIES", "3".to_string()),
            ("AGENTD__MODEL__SCRIPT", script.display().to_string()),
            // These tests' clients send a refused message again, and count on a refusal being
            // a message that did not land; a message gets no idempotency key yet. So a request
            // waits as long as Redis takes (unbounded, as before `redis.request_wait_ms`): a
            // request answered `503` once its wait ran out may land all the same. The bound
            // is tested in redis_failover.rs and redis_takeover.rs.
            ("AGENTD__REDIS__REQUEST_WAIT_MS", "0".to_string()),
        ]);
        Cluster {
            redis,
            _dir: dir,
            env,
        }
    }

    fn process(&self) -> AgentdProcess {
        AgentdProcess::start(&self.env)
    }

    /// Two processes, once they have split the partitions between them.
    fn balanced_pair(&self) -> (AgentdProcess, AgentdProcess) {
        let (a, b) = (self.process(), self.process());
        wait_balanced(&a, &b, PARTITIONS);
        (a, b)
    }
}

fn partition(id: &str) -> u32 {
    keys().partition_of(id)
}

/// The key names of the test namespace.
fn keys() -> agentd_store::Keys {
    agentd_store::Keys::new(NS, PARTITIONS)
}

fn xadd(con: &mut TestConnection, key: &str, bytes: &[u8]) {
    let _: String = redis::cmd("XADD")
        .arg(key)
        .arg("*")
        .arg("m")
        .arg(bytes)
        .query(con)
        .unwrap();
}

/// Every entry of stream `key`, oldest first.
fn stream_entries(con: &mut TestConnection, key: &str) -> Vec<redis::streams::StreamId> {
    let reply: redis::streams::StreamRangeReply = redis::cmd("XRANGE")
        .arg(key)
        .arg("-")
        .arg("+")
        .query(con)
        .unwrap();
    reply.ids
}

/// The entries of `<ns>:dead` (through a connection that finds the node holding it).
fn dead_letters(cluster: &Cluster) -> Vec<redis::streams::StreamId> {
    stream_entries(&mut cluster.redis.client(), &format!("{NS}:dead"))
}

fn read_stream(con: &mut TestConnection, key: &str) -> Vec<Vec<u8>> {
    stream_entries(con, key)
        .iter()
        .filter_map(|id| id.get::<Vec<u8>>("m").or_else(|| id.get::<Vec<u8>>("e")))
        .collect()
}

/// Sends `root` the message "by command" through the command stream (with the test's client:
/// a cluster client on a cluster), and waits for its reply and for the message in `root`'s
/// thread on `owner`.
fn send_by_command(cluster: &Cluster, owner: &AgentdProcess, root: &str) {
    let mut con = cluster.redis.client();
    let id = command(
        &mut con,
        Command::Send {
            agent_id: root.to_string(),
            text: "by command".into(),
            interrupt: false,
            idempotency_key: None,
        },
    );
    wait_answered(&mut con, id, "the command");
    owner.wait_for("the command's message", |p| {
        p.texts(root).iter().any(|t| t == "by command")
    });
}

/// Writes `cmd` to the command stream with replies to `svc:replies`; answers its envelope id.
fn command(con: &mut TestConnection, cmd: Command) -> uuid::Uuid {
    let mut env = Envelope::new(
        Address::External { name: "svc".into() },
        Address::System,
        Item::Command(cmd),
        1,
    );
    env.reply_to = Some("svc:replies".into());
    xadd(
        con,
        &format!("{NS}:commands"),
        &encode_envelope(&env).unwrap(),
    );
    env.id
}

/// The commands answered on `svc:replies` so far (the ids of the envelopes they answer).
fn answered(con: &mut TestConnection) -> HashSet<uuid::Uuid> {
    read_stream(con, "svc:replies")
        .iter()
        .filter_map(|b| decode_envelope(b, 1 << 20).unwrap().causation_id)
        .collect()
}

/// Waits (up to 15 s, else fails with `why`) until command `id` is answered.
fn wait_answered(con: &mut TestConnection, id: uuid::Uuid, why: &str) {
    eventually_blocking(
        Duration::from_secs(15),
        &format!("command {id} answered"),
        || {
            if answered(con).contains(&id) {
                Ok(())
            } else {
                Err(why.to_string())
            }
        },
    )
}

/// Follows `/v1/events` of `p` on a thread; the parsed `data:` lines arrive on the channel.
/// Answers once the response has started (the subscription is in place by then).
fn follow_events(p: &AgentdProcess) -> std::sync::mpsc::Receiver<serde_json::Value> {
    use std::io::BufRead;
    let (tx, rx) = std::sync::mpsc::channel();
    let (started_tx, started) = std::sync::mpsc::channel();
    let url = format!("{}/v1/events", p.url);
    std::thread::spawn(move || {
        let resp = ureq::get(&url).call().unwrap();
        let _ = started_tx.send(());
        for line in std::io::BufReader::new(resp.into_reader()).lines() {
            let Ok(line) = line else { return };
            if let Some(data) = line.strip_prefix("data: ")
                && tx.send(serde_json::from_str(data).unwrap()).is_err()
            {
                return;
            }
        }
    });
    started
        .recv_timeout(Duration::from_secs(10))
        .expect("the event stream started");
    rx
}

/// Resident memory of a process, in KiB.
fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|n| n.parse().ok())
        })
        .unwrap_or(0)
}

fn pending(con: &mut TestConnection, stream: &str) -> i64 {
    let summary: Vec<redis::Value> = redis::cmd("XPENDING")
        .arg(stream)
        .arg("agentd")
        .query(con)
        .unwrap();
    match summary.first() {
        Some(redis::Value::Int(n)) => *n,
        other => panic!("XPENDING answered {other:?}"),
    }
}

/// `AGENTD_TEST_SCALE` (default 1): 2,000 messages across 20 agents; 50 is the full run of
/// 100,000 messages across 1,000 agents.
fn scale() -> usize {
    std::env::var("AGENTD_TEST_SCALE")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1)
        .max(1)
}

/// Posts `messages` messages through `a` from four senders, each with its own share of
/// `agents` (so each agent's order is one sender's order), and runs `midway` 300 ms in.
/// Answers `(agent, text)` in sending order; a post refused and sent again is marked.
fn drive_load(
    a: &AgentdProcess,
    agents: &[String],
    messages: usize,
    midway: impl FnOnce() + Send,
) -> Vec<(String, String)> {
    let senders = 4;
    let sent: Vec<Vec<(String, String)>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..senders)
            .map(|k| {
                scope.spawn(move || {
                    let mine: Vec<&String> = agents.iter().skip(k).step_by(senders).collect();
                    let mut sent = Vec::new();
                    for n in 0..messages / senders {
                        let id = mine[n % mine.len()].clone();
                        let text = format!("msg {k}-{n}");
                        let start = Instant::now();
                        let mut text_sent = text.clone();
                        while let Err(e) =
                            a.post(&format!("/v1/agents/{id}/messages"), json!({"text": text}))
                        {
                            // A refused post is sent again; if the first had got in after all,
                            // a doubled text names the retry as the cause (not the bus).
                            eprintln!("post of {text} to {id} refused ({e:?}); sending it again");
                            text_sent = format!("{text} (retried)");
                            assert!(start.elapsed() < Duration::from_secs(30), "never accepted");
                            std::thread::sleep(Duration::from_millis(20));
                        }
                        sent.push((id, text_sent));
                    }
                    sent
                })
            })
            .collect();
        std::thread::sleep(Duration::from_millis(300));
        midway();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    sent.into_iter().flatten().collect()
}

/// Waits until every agent answered each of its messages, then checks its thread holds
/// each message once, in sending order, and one answer per message.
fn every_message_once_in_order(
    reader: &AgentdProcess,
    agents: &[String],
    sent: &[(String, String)],
) {
    let start = Instant::now();
    for id in agents {
        let mine: Vec<&String> = sent
            .iter()
            .filter(|(i, _)| i == id)
            .map(|(_, t)| t)
            .collect();
        loop {
            let texts = reader.texts(id);
            let answered = texts.iter().filter(|t| t.starts_with("echo: ")).count();
            if answered >= mine.len() {
                let inputs: Vec<&String> = texts.iter().filter(|t| t.starts_with("msg ")).collect();
                let expected: Vec<String> = mine
                    .iter()
                    .map(|t| t.trim_end_matches(" (retried)").to_string())
                    .collect();
                let inputs: Vec<String> = inputs.into_iter().cloned().collect();
                assert_eq!(
                    inputs, expected,
                    "every message once, in order, on {id} (sent as {mine:?})"
                );
                assert_eq!(answered, mine.len(), "each answered once on {id}");
                break;
            }
            assert!(
                start.elapsed() < Duration::from_secs(120 * scale() as u64),
                "{id}: {answered} of {} answered; texts {texts:?}; sent {mine:?}",
                mine.len()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// How many entries were ever appended to `stream` (`XINFO STREAM`'s `entries-added`).
fn entries_added(con: &mut TestConnection, stream: &str) -> u64 {
    let info: std::collections::HashMap<String, redis::Value> = redis::cmd("XINFO")
        .arg("STREAM")
        .arg(stream)
        .query(con)
        .unwrap();
    redis::from_redis_value_ref(&info["entries-added"]).unwrap()
}

/// Waits until nothing of `stream` is pending (an entry is acknowledged right after its
/// handling, which a thread may show a moment earlier).
fn acknowledged_soon(con: &mut TestConnection, stream: &str) {
    eventually_blocking(
        Duration::from_secs(10),
        &format!("no entries of {stream} pending"),
        || pending(con, stream) == 0,
    );
}
