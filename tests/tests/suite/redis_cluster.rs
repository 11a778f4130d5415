//! agentd on Redis, as real processes on a private redis-server: cross-process Manage (sync and
//! async), the command stream used by a plain Redis client, de-duplication of redelivered
//! entries, dead letters, and failover after `kill -9` of a partition owner.

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

#[test]
fn manage_sync_and_async_across_two_processes() {
    let cluster = Cluster::new();
    let (a, b) = cluster.balanced_pair();
    // A root owned by A.
    let root = loop {
        let id = a.spawn_with(json!({"agent_type": "lead"}));
        if a.partitions_owned().contains(&partition(&id)) {
            break id;
        }
    };
    // A worker thread whose partition B owns: aliases map to new child ids until one lands there.
    let mut worker = None;
    for i in 0..64 {
        let r = a
            .post(&format!("/v1/agents/{root}/tools/Manage"), json!({"command": "send_message", "worker": "Researcher", "message": format!("q{i}"), "threadAlias": format!("w{i}")}))
            .unwrap();
        assert_eq!(r["status"], "ok", "{r}");
        assert_eq!(
            r["messages"],
            json!([format!("Findings for: q{i}")]),
            "sync answer, whichever process the worker is on"
        );
        let child = r["childThreadId"].as_str().unwrap().to_string();
        if b.partitions_owned().contains(&partition(&child)) {
            worker = Some((format!("w{i}"), child));
            break;
        }
    }
    let (alias, child) = worker.expect("a worker on B");
    assert!(
        b.get(&format!("/v1/agents/{child}"))["live"]
            .as_bool()
            .unwrap(),
        "the worker runs in B"
    );
    // Sync again on the same alias: same child thread, answered across processes.
    let r = a.post(&format!("/v1/agents/{root}/tools/Manage"), json!({"command": "send_message", "worker": "Researcher", "message": "sync again", "threadAlias": alias})).unwrap();
    assert_eq!(
        (r["childThreadId"].as_str(), r["created"].as_bool()),
        (Some(child.as_str()), Some(false))
    );
    assert_eq!(r["messages"], json!(["Findings for: sync again"]));
    // Async: three messages; the forwards come back to A's root in order.
    for n in 1..=3 {
        let r = a.post(&format!("/v1/agents/{root}/tools/Manage"), json!({"command": "send_message", "worker": "Researcher", "message": format!("async {n}"), "threadAlias": alias, "mode": "async"})).unwrap();
        assert_eq!(r["status"], "sent");
    }
    a.wait_for("three forwards", |p| {
        p.texts(&root)
            .iter()
            .filter(|t| t.starts_with("From Researcher: "))
            .count()
            == 3
    });
    let forwards: Vec<String> = a
        .texts(&root)
        .into_iter()
        .filter(|t| t.starts_with("From Researcher: "))
        .collect();
    assert_eq!(
        forwards,
        vec![
            "From Researcher: Findings for: async 1",
            "From Researcher: Findings for: async 2",
            "From Researcher: Findings for: async 3"
        ]
    );
    // The worker deleted (its owner is B): A's root still remembers the alias's child, and its
    // next send finds the child gone on the way to B's partition, so the alias is resolved
    // again and a new worker answers.
    a.post(
        &format!("/v1/agents/{child}/control"),
        json!({"control": "delete"}),
    )
    .unwrap();
    let r = a.post(&format!("/v1/agents/{root}/tools/Manage"), json!({"command": "send_message", "worker": "Researcher", "message": "after the delete", "threadAlias": alias})).unwrap();
    assert_eq!(r["created"], true, "{r}");
    assert_ne!(r["childThreadId"].as_str(), Some(child.as_str()));
    assert_eq!(r["messages"], json!(["Findings for: after the delete"]));
}

/// A message for an agent that does not exist (never did, or was deleted) is refused with
/// `agent_not_found` by the process it is sent to, whichever process owns the agent's
/// partition, and nothing is appended to that partition's stream (the forward checks the
/// receiver's record in the same script as its append).
#[test]
fn a_message_for_an_agent_that_does_not_exist_is_refused_and_never_queued() {
    let cluster = Cluster::new();
    let (a, b) = cluster.balanced_pair();
    let mut con = cluster.redis.client();
    // Entries ever appended (the stream itself is trimmed as entries are acknowledged).
    let stream_len = |con: &mut TestConnection, id: &str| -> u64 {
        entries_added(con, &keys().partition(partition(id)))
    };
    let refused = |id: &str| {
        let (status, body) = a
            .post(
                &format!("/v1/agents/{id}/messages"),
                json!({"text": "hello"}),
            )
            .expect_err("a message for a missing agent");
        assert_eq!(
            (status, body["code"].as_str()),
            (404, Some("agent_not_found")),
            "{body}"
        );
    };
    // Never existed: one id on B's partitions, one on A's (well-formed: a malformed id is
    // refused before any process is asked).
    let on = |p: &AgentdProcess| {
        (0u64..)
            .map(|i| format!("0190a5f2-7b6e-7cc0-8a4b-{i:012x}"))
            .find(|id| p.partitions_owned().contains(&partition(id)))
            .unwrap()
    };
    for id in [on(&b), on(&a)] {
        let before = stream_len(&mut con, &id);
        refused(&id);
        assert_eq!(stream_len(&mut con, &id), before, "nothing queued for {id}");
    }
    // Deleted: an agent B owns, deleted through A.
    let gone = loop {
        let id = a.spawn_with(json!({"agent_type": "lead"}));
        if b.partitions_owned().contains(&partition(&id)) {
            break id;
        }
    };
    a.post(
        &format!("/v1/agents/{gone}/control"),
        json!({"control": "delete"}),
    )
    .unwrap();
    let before = stream_len(&mut con, &gone);
    refused(&gone);
    assert_eq!(
        stream_len(&mut con, &gone),
        before,
        "nothing queued for the deleted agent"
    );
}

/// A root that process `p` owns.
fn root_on(p: &AgentdProcess, agent_type: &str) -> String {
    loop {
        let id = p.spawn_with(json!({"agent_type": agent_type}));
        if p.partitions_owned().contains(&partition(&id)) {
            return id;
        }
    }
}

/// An agent waiting for another (`depends_on`) hears that it completed even when the two are
/// owned by different processes: the news goes through the dependent's partition.
#[test]
fn a_dependency_completing_in_one_process_wakes_its_dependent_in_the_other() {
    let cluster = Cluster::new();
    let (a, b) = cluster.balanced_pair();
    let lead = root_on(&a, "lead");
    let dependency = a
        .post(
            &format!("/v1/agents/{lead}/tools/spawn_agent"),
            json!({"agent_type": "coding", "prompt": "start"}),
        )
        .unwrap()["agent_id"]
        .as_str()
        .unwrap()
        .to_string();
    let (owner, other) = if a.partitions_owned().contains(&partition(&dependency)) {
        (&a, &b)
    } else {
        (&b, &a)
    };
    // A dependent the other process owns.
    let dependent = loop {
        let v = other
            .post(
                "/v1/agents",
                json!({"agent_type": "research", "depends_on": [dependency], "prompt": "after it"}),
            )
            .unwrap();
        let id = v["agent_id"].as_str().unwrap().to_string();
        if other.partitions_owned().contains(&partition(&id)) {
            break id;
        }
    };
    other.wait_for("the dependent waiting", |p| {
        p.status(&dependent) == "waiting_dependency"
    });
    owner
        .post(
            &format!("/v1/agents/{dependency}/messages"),
            json!({"text": "please yield"}),
        )
        .unwrap();
    other.wait_for(
        "the dependent's answer once its dependency completed",
        |p| {
            p.get(&format!("/v1/agents/{dependent}/thread"))
                .to_string()
                .contains("Findings for: after it")
        },
    );
    assert_eq!(owner.status(&dependency), "completed");
}

/// Dependents in one process of roots busy in the other: one is met once its root has
/// handled what was queued for it (the watch reached in the root's process, the news through
/// the dependent's partition), the other fails when its root is cancelled (announced by the
/// root's process, under `on_dependency_failure = "fail"`). The roots stay busy until the test
/// lets them go (a slow turn, cancelled or interrupted), however long the dependents take to
/// start on a loaded machine.
#[test]
fn busy_roots_in_one_process_meet_or_fail_their_dependents_in_the_other() {
    let cluster = Cluster::new().with("AGENTD__LIMITS__ON_DEPENDENCY_FAILURE", "fail".into());
    let (a, b) = cluster.balanced_pair();
    let met = root_on(&a, "research");
    let cancelled = root_on(&a, "research");
    for root in [&met, &cancelled] {
        a.post(
            &format!("/v1/agents/{root}/messages"),
            json!({"text": "take your time"}),
        )
        .unwrap();
    }
    let dependent_of = |dependency: &str| loop {
        let v = b
            .post(
                "/v1/agents",
                json!({"agent_type": "research", "depends_on": [dependency], "prompt": "after it"}),
            )
            .unwrap();
        let id = v["agent_id"].as_str().unwrap().to_string();
        if b.partitions_owned().contains(&partition(&id)) {
            break id;
        }
    };
    let (d1, d2) = (dependent_of(&met), dependent_of(&cancelled));
    b.wait_for("both dependents waiting", |p| {
        p.status(&d1) == "waiting_dependency" && p.status(&d2) == "waiting_dependency"
    });
    a.post(
        &format!("/v1/agents/{cancelled}/control"),
        json!({"control": "cancel"}),
    )
    .unwrap();
    b.wait_for("the dependent of the cancelled root failed", |p| {
        p.status(&d2) == "failed"
    });
    let view = b.get(&format!("/v1/agents/{d2}"));
    assert_eq!(
        view["status_reason"],
        format!("dependency_failed: {cancelled} cancelled"),
        "{view}"
    );
    assert_eq!(b.status(&d1), "waiting_dependency");
    a.post(
        &format!("/v1/agents/{met}/messages"),
        json!({"text": "now, please", "interrupt": true}),
    )
    .unwrap();
    b.wait_for("the other dependent's answer", |p| {
        p.texts(&d1).iter().any(|t| t == "Findings for: after it")
    });
    assert!(
        a.texts(&met)
            .iter()
            .any(|t| t == "Findings for: now, please")
    );
    assert!(!b.texts(&d2).iter().any(|t| t.starts_with("Findings")));
}

/// A root busy with a message it holds (read from its partition stream: not in its durable
/// inbox, its turn's start not yet written) is not taken for idle by a dependent spawned
/// meanwhile: the dependent waits until the root has handled what was queued for it.
#[test]
fn a_dependent_waits_for_a_root_busy_with_a_held_message() {
    let cluster = Cluster::new().with("AGENTD__REDIS__HOLD_MS", "20000".into());
    let (a, b) = cluster.balanced_pair();
    let root = root_on(&a, "research");
    // Sent through the process that does not own the root: the message travels the root's
    // partition stream, and the root holds it.
    b.post(
        &format!("/v1/agents/{root}/messages"),
        json!({"text": "take your time"}),
    )
    .unwrap();
    a.wait_for("the root busy", |p| p.status(&root) == "running");
    let stored = agentd_store::Keys::new(NS, PARTITIONS).agent(&root);
    let mut con = cluster.redis.client();
    let record: Option<Vec<u8>> = redis::cmd("GET").arg(&stored).query(&mut con).unwrap();
    let record: agentd_proto::AgentRecord = agentd_proto::codec::decode(&record.unwrap()).unwrap();
    assert_eq!(
        record.status,
        agentd_proto::AgentStatus::Idle,
        "the held turn's start is not written yet"
    );
    let dependent =
        b.spawn_with(json!({"agent_type": "research", "depends_on": [root], "prompt": "after it"}));
    b.wait_for("the dependent waiting", |p| {
        p.status(&dependent) == "waiting_dependency"
    });
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(b.status(&dependent), "waiting_dependency");
    assert!(
        b.texts(&dependent)
            .iter()
            .all(|t| !t.starts_with("Findings"))
    );
}

#[test]
fn calls_that_act_on_a_live_agent_run_in_the_process_that_owns_it() {
    let cluster = Cluster::new();
    let (a, b) = cluster.balanced_pair();
    let root = root_on(&a, "lead");
    // Manage through B for A's root: B hands the call to A, where the root's router lives and
    // the worker's reply arrives; the answer comes back to B's caller.
    let r = b
        .post(&format!("/v1/agents/{root}/tools/Manage"), json!({"command": "send_message", "worker": "Researcher", "message": "via b", "threadAlias": "x"}))
        .unwrap();
    assert_eq!(r["status"], "ok", "{r}");
    assert_eq!(r["messages"], json!(["Findings for: via b"]));
    // (The worker that answered may live on B; from here on, nothing new should.)
    let live_on_b = b.get("/v1/info")["live_agents"].as_u64().unwrap();
    // B's reply stream expires unless B lives on to renew it (a dead caller leaves nothing).
    let replies = keys().replies(b.get("/v1/info")["process_id"].as_str().unwrap());
    let ttl: i64 = redis::cmd("PTTL")
        .arg(&replies)
        .query(&mut cluster.redis.client())
        .unwrap();
    assert!(ttl > 0, "{replies} has no expiry: {ttl}");
    // An error answered by the owner keeps its code on the way back.
    let (status, err) = b
        .post(&format!("/v1/agents/{root}/tools/Manage"), json!({"command": "send_message", "worker": "Nobody", "message": "x", "threadAlias": "y"}))
        .unwrap_err();
    assert_eq!(
        (status, err["code"].as_str()),
        (400, Some("unknown_worker")),
        "{err}"
    );
    // Budget and environment set through B, then a turn of the root on A: A's live root holds
    // them (a second copy of the root on B would have written them, and A's next write lost them).
    b.post(
        &format!("/v1/agents/{root}/budget"),
        json!({"max_tokens": 123_456}),
    )
    .unwrap();
    b.post(
        &format!("/v1/agents/{root}/env"),
        json!({"env": {"REGION": "eu"}}),
    )
    .unwrap();
    a.post(
        &format!("/v1/agents/{root}/messages"),
        json!({"text": "hello"}),
    )
    .unwrap();
    a.wait_for("the root's answer", |p| {
        p.texts(&root).iter().any(|t| t == "ok")
    });
    let view = a.get(&format!("/v1/agents/{root}"));
    assert_eq!(view["budget"]["max_tokens"], 123_456, "{view}");
    assert_eq!(view["env"], json!(["REGION"]), "{view}");
    // A call larger than a partition takes is refused at once (the owner would dead-letter it).
    let big = "x".repeat(10_000);
    let (status, err) = b
        .post(
            &format!("/v1/agents/{root}/env"),
            json!({"env": {"BIG": big}}),
        )
        .unwrap_err();
    assert_eq!(
        (status, err["code"].as_str()),
        (413, Some("payload_too_large")),
        "{err}"
    );
    // A checkpoint through B is the live agent's (taken on A between two of its messages).
    let cp = b
        .post(&format!("/v1/agents/{root}/checkpoints"), json!({}))
        .unwrap();
    assert_eq!(cp["reason"], "manual", "{cp}");
    // Nothing of the root ever ran on B ...
    assert_eq!(b.get("/v1/info")["live_agents"].as_u64(), Some(live_on_b));
    // ... and B, asked about it, answers what A knows: it is live there.
    assert_eq!(a.get(&format!("/v1/agents/{root}"))["live"], true);
    assert_eq!(b.get(&format!("/v1/agents/{root}"))["live"], true);
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

/// The error codes of the entries in `<ns>:dead`, oldest first.
fn dead_codes(con: &mut TestConnection) -> Vec<String> {
    stream_entries(con, &format!("{NS}:dead"))
        .iter()
        .filter_map(|e| e.get::<String>("code"))
        .collect()
}

fn read_stream(con: &mut TestConnection, key: &str) -> Vec<Vec<u8>> {
    stream_entries(con, key)
        .iter()
        .filter_map(|id| id.get::<Vec<u8>>("m").or_else(|| id.get::<Vec<u8>>("e")))
        .collect()
}

#[test]
fn an_outside_service_drives_agents_through_the_command_stream() {
    let cluster = Cluster::new();
    let p = cluster.process();
    let mut con = cluster.redis.client();
    // A plain Redis client and a MessagePack map, as a service in any language would write it.
    let spawn = json!({
        "v": 1, "id": "0190a5f2-7b6e-7cc0-8a4b-1d2e3f405162",
        "from": {"type": "external", "name": "billing"}, "to": {"type": "system"},
        "reply_to": "billing:replies", "sent_at": 1,
        "item": {"kind": "command", "type": "spawn", "agent_type": "subagent", "prompt": "hello from billing"}
    });
    xadd(
        &mut con,
        &format!("{NS}:commands"),
        &rmp_serde::to_vec_named(&spawn).unwrap(),
    );
    let reply = eventually_blocking(Duration::from_secs(15), "a reply", || {
        let r = read_stream(&mut con, "billing:replies");
        r.first()
            .map(|first| decode_envelope(first, 1 << 20).unwrap())
    });
    assert_eq!(
        reply.correlation_id.map(|u| u.to_string()).as_deref(),
        Some("0190a5f2-7b6e-7cc0-8a4b-1d2e3f405162")
    );
    let Item::Reply(r) = reply.item else {
        panic!("not a reply")
    };
    let agent_id = r.result.unwrap()["agent_id"].as_str().unwrap().to_string();
    // A follow-up message through the same stream, with the typed envelope this time.
    let mut send = Envelope::new(
        Address::External {
            name: "billing".into(),
        },
        Address::System,
        Item::Command(Command::Send {
            agent_id: agent_id.clone(),
            text: "second".into(),
            interrupt: false,
            idempotency_key: None,
        }),
        2,
    );
    send.reply_to = Some("billing:replies".into());
    xadd(
        &mut con,
        &format!("{NS}:commands"),
        &encode_envelope(&send).unwrap(),
    );
    p.wait_for("both answers", |p| {
        p.texts(&agent_id).iter().any(|t| t == "echo: second")
    });
    assert_eq!(
        p.texts(&agent_id),
        vec![
            "hello from billing",
            "echo: hello from billing",
            "second",
            "echo: second"
        ]
    );
    // Events: status changes and token usage of that agent are on <ns>:events.
    eventually_blocking(Duration::from_secs(10), "the agent's events", || {
        let reply: redis::streams::StreamRangeReply = redis::cmd("XRANGE")
            .arg(format!("{NS}:events"))
            .arg("-")
            .arg("+")
            .query(&mut con)
            .unwrap();
        let kinds: HashSet<String> = reply
            .ids
            .iter()
            .filter(|e| e.get::<String>("agent_id").as_deref() == Some(agent_id.as_str()))
            .filter_map(|e| e.get::<String>("type"))
            .collect();
        if kinds.contains("spawned")
            && kinds.contains("status_changed")
            && kinds.contains("token_usage")
        {
            Ok(())
        } else {
            Err(format!("events missing: {kinds:?}"))
        }
    });
    // A command for an unknown agent answers an error reply, not silence.
    let bad = Envelope {
        reply_to: Some("billing:replies".into()),
        ..Envelope::new(
            Address::External {
                name: "billing".into(),
            },
            Address::System,
            Item::Command(Command::Inspect {
                agent_id: "01930000-0000-7000-8000-00000000dead".into(),
            }),
            3,
        )
    };
    xadd(
        &mut con,
        &format!("{NS}:commands"),
        &encode_envelope(&bad).unwrap(),
    );
    let last = eventually_blocking(Duration::from_secs(10), "an error reply", || {
        read_stream(&mut con, "billing:replies").get(2).cloned()
    });
    let env = decode_envelope(&last, 1 << 20).unwrap();
    let Item::Reply(r) = env.item else { panic!() };
    assert_eq!(r.error.unwrap().code.as_str(), "agent_not_found");
    let _ = SpawnRequest::default();
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

/// Writes a Manage sync call from `root` to its `Researcher`, whose script takes 30 s to
/// answer: the command waits for it (or for `timeout_ms`).
fn slow_manage_call(con: &mut TestConnection, root: &str, timeout_ms: u64) -> uuid::Uuid {
    command(
        con,
        Command::InvokeTool {
            agent_id: Some(root.to_string()),
            tool: "Manage".into(),
            args: json!({"command": "send_message", "worker": "Researcher", "message": "take your time", "threadAlias": "slow", "syncTimeoutMs": timeout_ms}),
        },
    )
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

/// `redis.commands_running` of the processes of the command tests.
const COMMANDS_RUNNING: usize = 4;

#[test]
fn a_waiting_command_holds_up_neither_other_agents_commands_nor_order_per_agent() {
    let cluster = Cluster::new().with(
        "AGENTD__REDIS__COMMANDS_RUNNING",
        COMMANDS_RUNNING.to_string(),
    );
    let p = cluster.process();
    let mut con = cluster.redis.client();
    let (busy, other) = (
        p.spawn_with(json!({"agent_type": "lead"})),
        p.spawn_with(json!({"agent_type": "lead"})),
    );
    // A Manage sync call whose worker takes 30 s, then more reads of the same root than the
    // process runs commands at once (they wait for it without taking running places), then a
    // read of another root.
    let slow = slow_manage_call(&mut con, &busy, 60_000);
    let same_agent = command(
        &mut con,
        Command::Inspect {
            agent_id: busy.clone(),
        },
    );
    for _ in 0..COMMANDS_RUNNING {
        command(
            &mut con,
            Command::Inspect {
                agent_id: busy.clone(),
            },
        );
    }
    let other_agent = command(&mut con, Command::Inspect { agent_id: other });
    wait_answered(
        &mut con,
        other_agent,
        "the other agent's command waited for the slow one",
    );
    let done = answered(&mut con);
    assert!(!done.contains(&slow), "the worker cannot have answered yet");
    assert!(
        !done.contains(&same_agent),
        "a command for the busy root ran before the one written before it"
    );
}

/// `redis.commands_running` bounds the commands a process runs at once: with one place, a
/// Manage sync call waiting for its worker holds up another root's read until it times out.
#[test]
fn commands_beyond_the_running_limit_wait_for_a_place() {
    let cluster = Cluster::new().with("AGENTD__REDIS__COMMANDS_RUNNING", "1".to_string());
    let p = cluster.process();
    let mut con = cluster.redis.client();
    let (busy, other) = (
        p.spawn_with(json!({"agent_type": "lead"})),
        p.spawn_with(json!({"agent_type": "lead"})),
    );
    let slow = slow_manage_call(&mut con, &busy, 3_000);
    let other_agent = command(&mut con, Command::Inspect { agent_id: other });
    std::thread::sleep(Duration::from_millis(1_500));
    assert!(
        answered(&mut con).is_empty(),
        "the other root's read ran beside the waiting call"
    );
    wait_answered(&mut con, other_agent, "the read never got the place back");
    assert!(
        answered(&mut con).contains(&slow),
        "the read ran once the call had timed out and answered"
    );
}

#[test]
fn an_entry_that_keeps_failing_with_a_store_error_is_dead_lettered_after_max_deliveries() {
    let cluster = Cluster::new();
    let p = cluster.process();
    let poisoned = p.spawn_with(json!({"agent_type": "subagent"}));
    // Another agent of the same partition: its messages must get through meanwhile.
    let neighbour = (0..200)
        .map(|_| p.spawn_with(json!({"agent_type": "subagent"})))
        .find(|id| partition(id) == partition(&poisoned))
        .expect("an agent on the same partition");
    let mut con = cluster.redis.client();
    // The poisoned agent's de-duplication set is made a string: its inbox write fails with
    // WRONGTYPE every time (Redis answers; this is no outage).
    let _: () = redis::cmd("SET")
        .arg(keys().agent_part(&poisoned, "seen"))
        .arg("not a sorted set")
        .query(&mut con)
        .unwrap();
    let stream = keys().partition(partition(&poisoned));
    let message = |to: &str, text: &str| {
        encode_envelope(&Envelope::new(
            Address::External { name: "t".into() },
            Address::agent(to),
            Item::Inbox(InboxItem::message(text)),
            1,
        ))
        .unwrap()
    };
    // A possible resend (a second attempt) is pushed to the agent's durable inbox, never held
    // in its entry: the push is what fails.
    let mut resend = Envelope::new(
        Address::External { name: "t".into() },
        Address::agent(&poisoned),
        Item::Inbox(InboxItem::message("poison")),
        1,
    );
    resend.attempt = 2;
    xadd(&mut con, &stream, &encode_envelope(&resend).unwrap());
    xadd(&mut con, &stream, &message(&neighbour, "first"));
    p.wait_for("the neighbour's first message answered", |p| {
        p.texts(&neighbour).iter().any(|t| t == "echo: first")
    });
    eventually_blocking(
        Duration::from_secs(60),
        "the failing entry to be moved aside",
        || !dead_codes(&mut con).is_empty(),
    );
    assert_eq!(dead_codes(&mut con), vec!["store_error"]);
    // The partition goes on, and nothing is left pending.
    xadd(&mut con, &stream, &message(&neighbour, "second"));
    p.wait_for("the neighbour's second message answered", |p| {
        p.texts(&neighbour).iter().any(|t| t == "echo: second")
    });
    assert_eq!(pending(&mut con, &stream), 0, "nothing left pending");
    assert!(p.texts(&poisoned).is_empty());
}

#[test]
fn redelivered_entries_apply_once_and_bad_entries_go_to_dead_letters() {
    let cluster = Cluster::new();
    let p = cluster.process();
    let agent = p.spawn_with(json!({"agent_type": "subagent"}));
    let mut con = cluster.redis.client();
    let stream = keys().partition(partition(&agent));
    let env = Envelope::new(
        Address::External { name: "t".into() },
        Address::agent(&agent),
        Item::Inbox(InboxItem::message("only once")),
        1,
    );
    let bytes = encode_envelope(&env).unwrap();
    xadd(&mut con, &stream, &bytes);
    xadd(&mut con, &stream, &bytes);
    // Bad entries on the same partition: garbage, oversize, unknown agent; then a good one.
    xadd(&mut con, &stream, b"\xc1 not msgpack");
    let big = Envelope::new(
        Address::System,
        Address::agent(&agent),
        Item::Inbox(InboxItem::message("x".repeat(10_000))),
        1,
    );
    xadd(&mut con, &stream, &encode_envelope(&big).unwrap());
    let ghost = Envelope::new(
        Address::System,
        Address::agent("no-such-agent"),
        Item::Inbox(InboxItem::message("boo")),
        1,
    );
    xadd(
        &mut con,
        &keys().partition(partition("no-such-agent")),
        &encode_envelope(&ghost).unwrap(),
    );
    let _: () = redis::cmd("XADD")
        .arg(&stream)
        .arg("*")
        .arg("other")
        .arg("field")
        .query::<String>(&mut con)
        .map(|_| ())
        .unwrap();
    let last = Envelope::new(
        Address::External { name: "t".into() },
        Address::agent(&agent),
        Item::Inbox(InboxItem::message("marker")),
        1,
    );
    xadd(&mut con, &stream, &encode_envelope(&last).unwrap());
    p.wait_for("marker answered", |p| {
        p.texts(&agent).iter().any(|t| t == "echo: marker")
    });
    let texts = p.texts(&agent);
    assert_eq!(
        texts.iter().filter(|t| *t == "only once").count(),
        1,
        "{texts:?}"
    );
    assert_eq!(
        texts,
        vec!["only once", "echo: only once", "marker", "echo: marker"]
    );
    let mut codes = dead_codes(&mut con);
    codes.sort();
    assert_eq!(
        codes,
        vec![
            "agent_not_found",
            "bad_envelope",
            "bad_envelope",
            "payload_too_large"
        ]
    );
    // Everything was acknowledged: nothing pending in the group.
    assert_eq!(pending(&mut con, &stream), 0, "nothing left pending");
}

#[test]
fn kill_9_of_a_partition_owner_moves_its_agents_without_losing_or_doubling_messages() {
    let cluster = Cluster::new();
    let (a, b) = cluster.balanced_pair();
    // Agents on both processes.
    let mut agents = Vec::new();
    while agents.len() < 6
        || !agents
            .iter()
            .any(|id: &String| b.partitions_owned().contains(&partition(id)))
    {
        agents.push(a.spawn_with(json!({"agent_type": "subagent"})));
    }
    let on_b: Vec<&String> = agents
        .iter()
        .filter(|id| b.partitions_owned().contains(&partition(id)))
        .collect();
    assert!(!on_b.is_empty());
    let mut sent: Vec<(String, String)> = Vec::new();
    let send = |n: usize, sent: &mut Vec<(String, String)>| {
        let id = agents[n % agents.len()].clone();
        let text = format!("msg {n}");
        let r = a.post(&format!("/v1/agents/{id}/messages"), json!({"text": text}));
        assert!(r.is_ok(), "{r:?}");
        sent.push((id, text));
    };
    for n in 0..30 {
        send(n, &mut sent);
    }
    b.kill9();
    for n in 30..60 {
        send(n, &mut sent);
    }
    // A takes over every partition and finishes everything, each message exactly once.
    a.wait_for("all partitions on A", |a| {
        a.partitions_owned().len() == PARTITIONS as usize
    });
    for (id, text) in &sent {
        a.wait_for(&format!("{text} answered"), |a| {
            a.texts(id).iter().any(|t| *t == format!("echo: {text}"))
        });
    }
    for id in &agents {
        let texts = a.texts(id);
        let mine: Vec<&String> = sent
            .iter()
            .filter(|(i, _)| i == id)
            .map(|(_, t)| t)
            .collect();
        for t in &mine {
            assert_eq!(
                texts.iter().filter(|x| x == t).count(),
                1,
                "{t} on {id}: {texts:?}"
            );
            assert_eq!(
                texts.iter().filter(|x| **x == format!("echo: {t}")).count(),
                1,
                "{t} answer on {id}"
            );
        }
        // Per-agent order is kept.
        let order: Vec<&String> = texts.iter().filter(|t| t.starts_with("msg ")).collect();
        assert_eq!(order, mine, "order on {id}");
    }
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

#[test]
fn events_of_every_process_reach_each_event_stream() {
    let cluster = Cluster::new();
    let (a, b) = cluster.balanced_pair();
    let pb = b.partitions_owned();
    // An agent whose partition b owns: its events come from b, and show on a's stream.
    let on_b = (0..500)
        .map(|_| b.spawn_with(json!({"agent_type": "subagent"})))
        .find(|id| pb.contains(&partition(id)))
        .expect("an agent on one of b's partitions");
    // No pause after subscribing: a's tail rests while nobody listens, and must still pass on
    // everything published once the subscription is in place.
    let events = follow_events(&a);
    b.post(
        &format!("/v1/agents/{on_b}/messages"),
        json!({"text": "hello from b"}),
    )
    .unwrap();
    loop {
        let e = events
            .recv_timeout(Duration::from_secs(10))
            .expect("b's events on a's stream");
        if e["type"] == "status_changed" && e["agent_id"] == on_b.as_str() && e["to"] == "idle" {
            break;
        }
    }
}

/// Commands a redis-server has run so far (`INFO commandstats`, a script's own included).
fn commands_run(con: &mut redis::Connection) -> u64 {
    let stats: String = redis::cmd("INFO").arg("commandstats").query(con).unwrap();
    stats
        .lines()
        .filter_map(|l| {
            l.split_once("calls=")?
                .1
                .split(',')
                .next()?
                .parse::<u64>()
                .ok()
        })
        .sum()
}

#[test]
fn readyz_asks_redis_nothing_and_stops_naming_a_partition_whose_lease_was_taken() {
    // A long lease: a lease round runs every few seconds only.
    let cluster = Cluster::with_lease_ms(60_000);
    let a = cluster.process();
    let (code, v) = a.get_status("/readyz", None);
    assert_eq!(code, 200, "{v}");
    let owned_by_a = v["partitions_owned"].as_array().unwrap().clone();
    assert_eq!(owned_by_a.len(), PARTITIONS as usize, "alone, it owns all");
    assert_eq!(v["partitions_degraded"], json!([]), "{v}");
    // A probe is answered from what the lease rounds learnt: 200 probes cost Redis next to
    // nothing (a lease round may run meanwhile), where a listing or a lease check per probe
    // would cost thousands of commands.
    if let TestRedis::Single(server) = &cluster.redis {
        let mut con = server.client();
        let before = commands_run(&mut con);
        for _ in 0..200 {
            assert_eq!(a.get_status("/readyz", None).0, 200);
        }
        let run = commands_run(&mut con) - before;
        assert!(run < 100, "200 probes made Redis run {run} commands");
    }
    // A lease taken away is noticed by the next renewal: no longer owned, still ready.
    let stolen = owned_by_a[0].as_u64().unwrap() as u32;
    let mut con = cluster.redis.client();
    let _: () = redis::cmd("SET")
        .arg(keys().lease(stolen))
        .arg("someone-else")
        .query(&mut con)
        .unwrap();
    eventually_blocking(
        Duration::from_secs(20),
        "the stolen partition no longer owned",
        || {
            let (code, v) = a.get_status("/readyz", None);
            code == 200
                && !v["partitions_owned"]
                    .as_array()
                    .unwrap()
                    .contains(&json!(stolen))
        },
    );
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

#[test]
fn generated_garbage_on_the_command_and_partition_streams_is_dead_lettered_or_handled() {
    use proptest::strategy::{Strategy, ValueTree};
    let cluster = Cluster::new();
    let p = cluster.process();
    let agent = p.spawn_with(json!({"agent_type": "subagent"}));
    let mut con = cluster.redis.client();
    let partition_stream = keys().partition(partition(&agent));
    let commands = format!("{NS}:commands");
    let valid = encode_envelope(&Envelope::new(
        Address::External { name: "t".into() },
        Address::agent(&agent),
        Item::Inbox(InboxItem::message("valid")),
        1,
    ))
    .unwrap();
    // Random bytes, and valid envelopes with random bytes overwritten (mostly undecodable,
    // sometimes decodable with odd values).
    let garbage = proptest::prop_oneof![
        proptest::collection::vec(proptest::num::u8::ANY, 0..300),
        proptest::collection::vec((0..valid.len(), proptest::num::u8::ANY), 1..6).prop_map(
            move |flips| {
                let mut b = valid.clone();
                for (i, v) in flips {
                    b[i] = v;
                }
                b
            }
        ),
    ];
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let rss_before = rss_kib(p.pid());
    for round in 0..400 {
        let bytes = garbage.new_tree(&mut runner).unwrap().current();
        let stream = if round % 2 == 0 {
            &commands
        } else {
            &partition_stream
        };
        xadd(&mut con, stream, &bytes);
    }
    let marker = Envelope::new(
        Address::External { name: "t".into() },
        Address::agent(&agent),
        Item::Inbox(InboxItem::message("marker")),
        1,
    );
    xadd(
        &mut con,
        &partition_stream,
        &encode_envelope(&marker).unwrap(),
    );
    p.wait_for("the marker after the garbage", |p| {
        p.texts(&agent).iter().any(|t| t == "echo: marker")
    });
    // Every entry was handled or dead-lettered, and acknowledged; the process is fine.
    eventually_blocking(Duration::from_secs(20), "no entries left pending", || {
        pending(&mut con, &commands) + pending(&mut con, &partition_stream) == 0
    });
    let dead: u64 = redis::cmd("XLEN")
        .arg(format!("{NS}:dead"))
        .query(&mut con)
        .unwrap();
    assert!(dead > 0, "undecodable entries are dead-lettered");
    assert!(dead <= 400);
    assert_eq!(p.get_status("/healthz", None).0, 200);
    let grown = rss_kib(p.pid()).saturating_sub(rss_before);
    assert!(grown < 64 * 1024, "memory grew by {grown} KiB");
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

/// Two balanced processes and the load tests' agents (spawned through the first, spread over
/// both), with the number of messages to send: 2,000 across 20 agents per unit of
/// [`scale`].
fn load_cluster() -> (Cluster, AgentdProcess, AgentdProcess, Vec<String>, usize) {
    let s = scale();
    let (messages, n_agents) = (2_000 * s, (20 * s).min(1_000));
    let cluster = Cluster::new();
    let (a, b) = cluster.balanced_pair();
    let agents: Vec<String> = (0..n_agents)
        .map(|_| a.spawn_with(json!({"agent_type": "subagent"})))
        .collect();
    assert!(
        agents
            .iter()
            .any(|id| b.partitions_owned().contains(&partition(id)))
    );
    (cluster, a, b, agents, messages)
}

#[test]
fn load_across_two_processes_with_a_kill_9_midway_keeps_every_message_once_in_order() {
    let (_cluster, a, b, agents, messages) = load_cluster();
    // All through `a`; `b` is killed 300 ms in.
    let sent = drive_load(&a, &agents, messages, move || b.kill9());
    a.wait_for("all partitions on a", |a| {
        a.partitions_owned().len() == PARTITIONS as usize
    });
    every_message_once_in_order(&a, &agents, &sent);
}

/// A process frozen (SIGSTOP) for longer than its leases wakes up to find its partitions
/// taken: it fences itself by its own clock (reads nothing and delivers nothing directly on a
/// stale lease), so the two never deliver to one agent at once; it then takes its share back.
#[test]
fn a_process_frozen_past_its_leases_neither_loses_nor_reorders_messages_when_it_wakes() {
    let (_cluster, a, b, agents, messages) = load_cluster();
    // Half through each process, so `b` also takes posts just before it freezes and right
    // after it wakes.
    let for_a: Vec<String> = agents.iter().step_by(2).cloned().collect();
    let for_b: Vec<String> = agents.iter().skip(1).step_by(2).cloned().collect();
    let frozen = std::sync::atomic::AtomicBool::new(false);
    let sent: Vec<(String, String)> = std::thread::scope(|scope| {
        let via_b = scope.spawn(|| {
            // `b`'s own sender pauses while `b` is frozen (its posts would just hang).
            let mut sent = Vec::new();
            for n in 0..messages / 4 {
                while frozen.load(std::sync::atomic::Ordering::SeqCst) {
                    std::thread::sleep(Duration::from_millis(10));
                }
                let id = for_b[n % for_b.len()].clone();
                let text = format!("msg b-{n}");
                let mut text_sent = text.clone();
                while let Err(e) =
                    b.post(&format!("/v1/agents/{id}/messages"), json!({"text": text}))
                {
                    eprintln!("post of {text} to {id} refused ({e:?}); sending it again");
                    text_sent = format!("{text} (retried)");
                    std::thread::sleep(Duration::from_millis(20));
                }
                sent.push((id, text_sent));
            }
            sent
        });
        let via_a = drive_load(&a, &for_a, messages * 3 / 4, || {
            frozen.store(true, std::sync::atomic::Ordering::SeqCst);
            b.signal("STOP");
            // Past b's leases and its membership: a takes every partition meanwhile.
            std::thread::sleep(Duration::from_millis(3_500));
            b.signal("CONT");
            frozen.store(false, std::sync::atomic::Ordering::SeqCst);
        });
        let mut all = via_a;
        all.extend(via_b.join().unwrap());
        all
    });
    wait_balanced(&a, &b, PARTITIONS);
    every_message_once_in_order(&a, &agents, &sent);
    assert_eq!(b.get_status("/readyz", None).0, 200, "b serves again");
}

/// Asked about an agent that lives in a process that does not answer (frozen here), a process
/// answers the stored view with what only the owner knows left unknown (`live: null`), not a
/// wrong `false`. Leases of 12 s (renewed every 4 s) keep the frozen process the owner for
/// longer than the 5 s the inspection waits for it.
#[test]
fn an_inspection_whose_owner_does_not_answer_shows_the_stored_view_with_liveness_unknown() {
    let cluster = Cluster::with_lease_ms(12_000);
    let (a, b) = cluster.balanced_pair();
    let root = root_on(&a, "lead");
    assert_eq!(b.get(&format!("/v1/agents/{root}"))["live"], true);
    a.signal("STOP");
    let started = Instant::now();
    let view = b.get(&format!("/v1/agents/{root}"));
    a.signal("CONT");
    assert!(view["live"].is_null(), "{view}");
    assert_eq!(view["agent_id"], root.as_str(), "{view}");
    assert!(started.elapsed() < Duration::from_secs(15));
}

/// A worker's output reaches its parent through the parent's partition stream also when one
/// process runs both (it leaves in the worker's store batch): an output that a process left
/// there when it died — the worker's item done, the parent not told yet — reaches the parent
/// from whichever process reads the partition next, instead of being lost with the process.
#[test]
fn a_workers_output_goes_through_the_parents_stream_and_survives_its_process() {
    let cluster = Cluster::new();
    let p = cluster.process();
    let mut con = cluster.redis.client();
    let root = root_on(&p, "lead");
    let stream = keys().partition(partition(&root));
    let outputs_to_root = |con: &mut TestConnection| -> Vec<Envelope> {
        read_stream(con, &stream)
            .iter()
            .filter_map(|b| decode_envelope(b, 1 << 20).ok())
            .filter(|e| matches!(e.item, Item::Output(_)) && e.to.agent_id() == Some(root.as_str()))
            .collect()
    };
    let r = p.post(&format!("/v1/agents/{root}/tools/Manage"), json!({"command": "send_message", "worker": "Researcher", "message": "local", "threadAlias": "w", "mode": "async"})).unwrap();
    assert_eq!(r["status"], "sent", "{r}");
    let worker = r["childThreadId"].as_str().unwrap().to_string();
    p.wait_for("the forward", |p| {
        p.texts(&root)
            .iter()
            .any(|t| t == "From Researcher: Findings for: local")
    });
    let outputs = outputs_to_root(&mut con);
    assert_eq!(outputs.len(), 1, "the output went through the stream");
    assert_eq!(outputs[0].from.agent_id(), Some(worker.as_str()));
    acknowledged_soon(&mut con, &stream);
    // The process dies with an output of the worker still in the stream, unread.
    p.kill9();
    let mut left = outputs[0].clone();
    left.id = uuid::Uuid::new_v4();
    left.causation_id = Some(uuid::Uuid::new_v4());
    left.item = Item::Output(agentd_proto::Output::Reply {
        text: "Findings for: left behind".into(),
    });
    xadd(&mut con, &stream, &encode_envelope(&left).unwrap());
    let q = cluster.process();
    q.wait_for("the output left behind", |q| {
        q.texts(&root)
            .iter()
            .any(|t| t == "From Researcher: Findings for: left behind")
    });
    acknowledged_soon(&mut con, &stream);
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

/// An entry that a process which lost its partition read late (a read it had sent before it
/// stalled, answered after the new owner had claimed what it left) is pending with that
/// process, and the owner's own reads never return it: the owner claims it before it delivers
/// anything newer from that partition, so it is neither lost nor overtaken. Here a consumer of
/// a process that is gone reads an entry while the owner is paused for a moment (well within
/// its lease, so it keeps the partition and does not claim again by itself).
#[test]
fn an_entry_read_late_by_a_process_that_lost_the_partition_is_claimed_before_newer_ones() {
    let cluster = Cluster::with_lease_ms(6_000);
    let p = cluster.process();
    let agent = p.spawn_with(json!({"agent_type": "subagent"}));
    let mut con = cluster.redis.client();
    let stream = keys().partition(partition(&agent));
    let message = |text: &str| {
        encode_envelope(&Envelope::new(
            Address::External { name: "t".into() },
            Address::agent(&agent),
            Item::Inbox(InboxItem::message(text)),
            1,
        ))
        .unwrap()
    };
    xadd(&mut con, &stream, &message("warm up"));
    p.wait_for("the warm-up answered", |p| {
        p.texts(&agent).iter().any(|t| t == "echo: warm up")
    });
    p.signal("STOP");
    // The owner's blocked read (at most 200 ms) has run out; another consumer reads the next
    // entry, then a newer one arrives.
    std::thread::sleep(Duration::from_millis(300));
    xadd(&mut con, &stream, &message("first"));
    let _: redis::Value = redis::cmd("XREADGROUP")
        .arg("GROUP")
        .arg("agentd")
        .arg("a-process-that-is-gone")
        .arg("COUNT")
        .arg(1)
        .arg("STREAMS")
        .arg(&stream)
        .arg(">")
        .query(&mut con)
        .unwrap();
    xadd(&mut con, &stream, &message("second"));
    p.signal("CONT");
    p.wait_for("both answered", |p| {
        p.texts(&agent)
            .iter()
            .filter(|t| t.starts_with("echo: "))
            .count()
            == 3
    });
    assert_eq!(
        p.texts(&agent),
        vec![
            "warm up",
            "echo: warm up",
            "first",
            "echo: first",
            "second",
            "echo: second"
        ]
    );
    acknowledged_soon(&mut con, &stream);
}

/// A 429 in one process closes its provider's gate for every process of the deployment: an
/// agent owned by the other process waits for the same reset without calling the provider.
#[test]
fn a_rate_limit_met_in_one_process_holds_the_provider_in_the_other() {
    let mut limited = agentd_tests::Canned::raw(429, "{\"error\": \"slow down\"}");
    limited.headers.push(("retry-after".into(), "30".into()));
    let provider = agentd_tests::MockHttp::start(vec![limited]);
    let cluster = Cluster::new()
        .without("AGENTD__MODEL__SCRIPT")
        .with("AGENTD__MODEL__BACKEND", "openai".into())
        .with("AGENTD__MODEL__BASE_URL", provider.url.clone())
        .with("AGENTD__MODEL__API_KEY_ENV", "AGENTD_TEST_KEY".into())
        .with("AGENTD_TEST_KEY", "test".into());
    let (a, b) = cluster.balanced_pair();
    let first = root_on(&a, "research");
    a.post(
        &format!("/v1/agents/{first}/messages"),
        json!({"text": "hello"}),
    )
    .unwrap();
    a.wait_for("the first agent rate-limited", |p| {
        p.status(&first) == "waiting_rate_limit"
    });
    let resume_at = a.get(&format!("/v1/agents/{first}"))["resume_at_ms"].clone();
    let second = root_on(&b, "research");
    b.post(
        &format!("/v1/agents/{second}/messages"),
        json!({"text": "hello"}),
    )
    .unwrap();
    b.wait_for("the second agent held by the shared gate", |p| {
        p.status(&second) == "waiting_rate_limit"
    });
    assert_eq!(
        provider.requests().len(),
        1,
        "the second agent never called"
    );
    let held_until = b.get(&format!("/v1/agents/{second}"))["resume_at_ms"].clone();
    let (x, y) = (resume_at.as_u64().unwrap(), held_until.as_u64().unwrap());
    assert!(x.abs_diff(y) < 1_000, "the same reset: {x} and {y}");
}

/// A child's output for a parent in another partition is written by the child's flush into the
/// child's partition's outbox (with the done mark of the item it answers, in one script), then
/// appended to the parent's partition as a command of its own. One left in the outbox — its
/// process died between the two — is appended by the next owner of the child's partition when
/// it takes the partition, and taken out of the outbox.
#[test]
fn a_child_output_left_in_the_outbox_is_sent_on_by_the_next_owner() {
    let cluster = Cluster::new();
    let a = cluster.process();
    let parent = root_on(&a, "lead");
    a.stop();
    let child = (0..)
        .map(|i| format!("gone-child-{i}"))
        .find(|c| partition(c) != partition(&parent))
        .unwrap();
    let env = Envelope::new(
        Address::agent(&child),
        Address::agent(&parent),
        Item::Output(agentd_proto::Output::Reply {
            text: "left behind".into(),
        }),
        1,
    );
    let mut con = cluster.redis.client();
    let outbox = keys().outbox(partition(&child));
    let _: () = redis::cmd("HSET")
        .arg(&outbox)
        .arg(env.id.to_string())
        .arg(encode_envelope(&env).unwrap())
        .query(&mut con)
        .unwrap();
    let stream = keys().partition(partition(&parent));
    let before = entries_added(&mut con, &stream);
    let b = cluster.process();
    let line = b.wait_for_log("a child output left in the outbox sent on");
    assert!(line.contains(&env.id.to_string()), "{line}");
    eventually_blocking(Duration::from_secs(10), "the outbox to be empty", || {
        redis::cmd("HLEN")
            .arg(&outbox)
            .query::<u64>(&mut con)
            .is_ok_and(|n| n == 0)
    });
    assert_eq!(entries_added(&mut con, &stream), before + 1);
}

/// Partition streams stay bounded: each acknowledgement trims its stream below the oldest
/// entry still pending (or, with none, the last one read), so 100,000 messages per unit of
/// [`scale`] (a million at `AGENTD_TEST_SCALE=10`) through one partition leave it holding about
/// one node of its listpacks, not every message ever sent. The messages are for an agent that
/// does not exist (each is dead-lettered and acknowledged: the cheapest full delivery).
#[test]
fn a_partition_stream_stays_bounded_however_many_messages_go_through_it() {
    let cluster = Cluster::new();
    let p = cluster.process();
    let stream = keys().partition(partition("nobody"));
    let bytes = encode_envelope(&Envelope::new(
        Address::External { name: "t".into() },
        Address::agent("nobody"),
        Item::Inbox(InboxItem::message("to no one")),
        1,
    ))
    .unwrap();
    let total = 100_000 * scale();
    let chunk = 5_000;
    let mut con = cluster.redis.client_for(&stream);
    let group = |con: &mut TestConnection| pending_and_lag(con, &stream);
    let mut longest = 0;
    for _ in 0..total / chunk {
        let mut pipe = redis::pipe();
        for _ in 0..chunk {
            pipe.cmd("XADD")
                .arg(&stream)
                .arg("*")
                .arg("m")
                .arg(&bytes)
                .ignore();
        }
        pipe.query::<()>(&mut con).unwrap();
        // The process keeps up before the next chunk: what it has not read stays.
        eventually_blocking(Duration::from_secs(120), "the process to keep up", || {
            let (pending, lag) = group(&mut con);
            pending + lag < chunk as u64
        });
        let len: u64 = redis::cmd("XLEN").arg(&stream).query(&mut con).unwrap();
        longest = longest.max(len);
    }
    eventually_blocking(Duration::from_secs(120), "every message delivered", || {
        group(&mut con) == (0, 0)
    });
    assert_eq!(entries_added(&mut con, &stream), total as u64);
    // Once a last acknowledgement has trimmed it: about one node (100 entries) is left.
    eventually_blocking(Duration::from_secs(10), "the stream trimmed", || {
        redis::cmd("XLEN")
            .arg(&stream)
            .query::<u64>(&mut con)
            .is_ok_and(|n| n <= 200)
    });
    assert!(longest < 3 * chunk as u64, "the stream grew to {longest}");
    assert_eq!(p.get_status("/healthz", None).0, 200);
}

/// Partition streams stay bounded when agents hold what they take (their flushes acknowledge the
/// entries without trimming; the reader trims a stream every `batch` entries it read there):
/// 10,000 messages per unit of [`scale`] to four agents of one partition leave about one node
/// of the stream, and it never holds much more than what is pending or unread, however many
/// are read between two lease rounds (a long lease here: its rounds, which trim too, are rare).
#[test]
fn a_partition_stream_stays_bounded_when_its_agents_hold_what_they_take() {
    let cluster = Cluster::new().with("AGENTD__REDIS__LEASE_MS", "20000".into());
    let p = cluster.process();
    let agents = subagents_in_one_partition(&p, 4);
    let first = agents[0].clone();
    let stream = keys().partition(partition(&first));
    let mut con = cluster.redis.client_for(&stream);
    let group = |con: &mut TestConnection| pending_and_lag(con, &stream);
    // Chunks of 50 messages per agent: below what an agent holds at once (256; more are pushed),
    // so the agents hold all of them.
    let total = 10_000 * scale();
    let chunk = 200;
    let mut longest = 0;
    for c in 0..total / chunk {
        let mut pipe = redis::pipe();
        for i in 0..chunk {
            let to = &agents[i % agents.len()];
            queue_message(&mut pipe, &stream, to, format!("m{c}-{i}"));
        }
        pipe.query::<()>(&mut con).unwrap();
        // Each chunk handled before the next: no agent ever holds more than it may, so none
        // is pushed (whose acknowledgement by the reader would trim the stream too).
        eventually_blocking(Duration::from_secs(120), "the chunk handled", || {
            group(&mut con) == (0, 0)
        });
        let len: u64 = redis::cmd("XLEN").arg(&stream).query(&mut con).unwrap();
        longest = longest.max(len);
    }
    // Each agent answered its last message.
    let last_chunk = total / chunk - 1;
    for (n, id) in agents.iter().enumerate() {
        let last = (0..chunk)
            .rev()
            .find(|i| i % agents.len() == n)
            .unwrap_or(0);
        let answer = format!("echo: m{last_chunk}-{last}");
        p.wait_for("the last message answered", |p| {
            p.texts(id).last() == Some(&answer)
        });
    }
    assert!(dead_letters(&cluster).is_empty(), "nothing dead-lettered");
    eventually_blocking(Duration::from_secs(10), "the stream trimmed", || {
        redis::cmd("XLEN")
            .arg(&stream)
            .query::<u64>(&mut con)
            .is_ok_and(|n| n <= 200)
    });
    assert!(longest < 3 * chunk as u64, "the stream grew to {longest}");
}

/// `n` sub-agents spawned through `p` that share one partition.
fn subagents_in_one_partition(p: &AgentdProcess, n: usize) -> Vec<String> {
    let first = p.spawn_with(json!({"agent_type": "subagent"}));
    let mut agents = vec![first.clone()];
    while agents.len() < n {
        let id = p.spawn_with(json!({"agent_type": "subagent"}));
        if partition(&id) == partition(&first) {
            agents.push(id);
        }
    }
    agents
}

/// Adds to `pipe` the `XADD` of a message `text` for agent `to` onto partition stream `stream`,
/// as an outside sender sends it once.
fn queue_message(pipe: &mut redis::Pipeline, stream: &str, to: &str, text: String) {
    let env = Envelope::new(
        Address::External { name: "t".into() },
        Address::agent(to),
        Item::Inbox(InboxItem::message(text)),
        1,
    );
    pipe.cmd("XADD")
        .arg(stream)
        .arg("*")
        .arg("m")
        .arg(encode_envelope(&env).unwrap())
        .ignore();
}

/// The entries of `stream` its consumer group has read and not acknowledged, and those it has
/// not read.
fn pending_and_lag(con: &mut TestConnection, stream: &str) -> (u64, u64) {
    let groups: Vec<HashMap<String, redis::Value>> = redis::cmd("XINFO")
        .arg("GROUPS")
        .arg(stream)
        .query(con)
        .unwrap();
    let num = |f: &str| redis::from_redis_value_ref::<u64>(&groups[0][f]).unwrap_or(0);
    (num("pending"), num("lag"))
}

/// A flood waits unread in its partition stream: once the agents of a partition hold 1,024 of
/// its entries (here 20 agents busy with a slow turn each, holding what arrives meanwhile), the
/// reader stops reading it — the entries stay pending or unread, at most a batch (100) past the
/// limit — instead of reading everything into agents (which would hold all of it, up to 256
/// each, and push the rest into their durable inboxes). Once the turns end, everything is
/// handled, each agent's messages in order.
#[test]
fn a_flood_waits_unread_in_its_stream_while_its_agents_hold_enough() {
    const MOST_OUT: u64 = 1_024;
    const BATCH: u64 = 100;
    let cluster = Cluster::new().with("AGENTD__REDIS__HOLD_MS", "60000".into());
    let p = cluster.process();
    let agents = subagents_in_one_partition(&p, 20);
    let first = agents[0].clone();
    for id in &agents {
        p.post(
            &format!("/v1/agents/{id}/messages"),
            json!({"text": "take a while"}),
        )
        .unwrap();
    }
    for id in &agents {
        p.wait_for("the slow turns", |p| p.status(id) == "running");
    }
    // 100 messages per agent: 2,000 in all.
    let per_agent = 100;
    let stream = keys().partition(partition(&first));
    let mut con = cluster.redis.client_for(&stream);
    // The slow turns' messages came through the stream (held) or straight to their agents
    // (pushed into their durable inboxes).
    let (pending, lag) = pending_and_lag(&mut con, &stream);
    let before = pending + lag;
    let inbox = |con: &mut TestConnection, id: &str| -> u64 {
        redis::cmd("ZCARD")
            .arg(keys().agent_part(id, "inbox"))
            .query(con)
            .unwrap()
    };
    let inboxes: Vec<u64> = agents.iter().map(|id| inbox(&mut con, id)).collect();
    let mut pipe = redis::pipe();
    for i in 0..per_agent {
        for id in &agents {
            queue_message(&mut pipe, &stream, id, format!("m{i}"));
        }
    }
    pipe.query::<()>(&mut con).unwrap();
    let sent = (per_agent * agents.len()) as u64;
    eventually_blocking(Duration::from_secs(5), "the limit reached", || {
        pending_and_lag(&mut con, &stream).0 >= MOST_OUT
    });
    // The slow turns run on for seconds (12 from their start, so that on a loaded machine these
    // checks end before they do): the reader stays held back meanwhile.
    for _ in 0..10 {
        let (pending, lag) = pending_and_lag(&mut con, &stream);
        assert!(pending <= MOST_OUT + BATCH, "{pending} entries read");
        assert_eq!(pending + lag, before + sent, "the rest unread");
        for (id, before) in agents.iter().zip(&inboxes) {
            assert_eq!(
                inbox(&mut con, id),
                *before,
                "an item pushed into `{id}`'s durable inbox"
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let want: Vec<String> = std::iter::once("slow done".to_string())
        .chain((0..per_agent).map(|i| format!("echo: m{i}")))
        .collect();
    for id in &agents {
        p.wait_for("every message answered", |p| {
            let answers: Vec<String> = p
                .texts(id)
                .into_iter()
                .filter(|t| t == "slow done" || t.starts_with("echo: "))
                .collect();
            answers == want
        });
    }
    eventually_blocking(Duration::from_secs(30), "every entry acknowledged", || {
        pending_and_lag(&mut con, &stream) == (0, 0)
    });
    assert!(dead_letters(&cluster).is_empty(), "nothing dead-lettered");
}

/// Every command, transaction and script the service sends touches one slot: two processes on a
/// redis-server in cluster mode (which refuses anything else with `CROSSSLOT`), with one
/// partition (the partition reader's one `XREADGROUP` spans every owned partition, which only
/// one partition keeps in one slot), do what crosses processes — messages and Manage calls
/// through the process that does not own the agents, async forwards, a command from the command
/// stream, a `kill -9` of the owner and the takeover with its claims.
#[test]
fn the_service_touches_one_slot_per_command_and_script_on_a_cluster_mode_redis() {
    let cluster = Cluster::on(TestRedis::Single(RedisServer::start_cluster_node()))
        .with("AGENTD__REDIS__PARTITIONS", "1".to_string());
    let a = cluster.process();
    a.wait_for("a to own the partition", |a| {
        a.partitions_owned().len() == 1
    });
    let b = cluster.process();
    // Through B, which owns nothing: a spawn, messages, Manage sync and async.
    let root = b.spawn_with(json!({"agent_type": "lead"}));
    b.post(
        &format!("/v1/agents/{root}/messages"),
        json!({"text": "hello"}),
    )
    .unwrap();
    let r = b.post(&format!("/v1/agents/{root}/tools/Manage"), json!({"command": "send_message", "worker": "Researcher", "message": "q", "threadAlias": "w"})).unwrap();
    assert_eq!(r["messages"], json!(["Findings for: q"]), "{r}");
    let r = b.post(&format!("/v1/agents/{root}/tools/Manage"), json!({"command": "send_message", "worker": "Researcher", "message": "later", "threadAlias": "w", "mode": "async"})).unwrap();
    assert_eq!(r["status"], "sent", "{r}");
    a.wait_for("the forward", |a| {
        a.texts(&root)
            .iter()
            .any(|t| t == "From Researcher: Findings for: later")
    });
    // A command from the command stream.
    send_by_command(&cluster, &a, &root);
    // The owner dies: B takes the partition, claims and drains it, and answers.
    a.kill9();
    b.wait_for("b to own the partition", |b| {
        b.partitions_owned().len() == 1
    });
    let answers = |b: &AgentdProcess| b.texts(&root).iter().filter(|t| *t == "ok").count();
    let before = answers(&b);
    b.post(
        &format!("/v1/agents/{root}/messages"),
        json!({"text": "after the takeover"}),
    )
    .unwrap();
    b.wait_for("the answer after the takeover", |b| answers(b) > before);
    assert!(dead_letters(&cluster).is_empty(), "nothing dead-lettered");
}

/// A cluster of agentd processes on a Redis Cluster of three masters and three replicas,
/// whatever `AGENTD_TEST_REDIS` says (so every run covers the cluster).
fn on_a_redis_cluster() -> Cluster {
    Cluster::on(TestRedis::Cluster(RedisCluster::start()))
}

/// The masters serving the test namespace's partitions, by port.
fn partition_masters(cluster: &Cluster) -> HashSet<u16> {
    let nodes = cluster.redis.cluster().expect("a Redis Cluster");
    (0..PARTITIONS)
        .map(|k| nodes.master_of(&keys().partition(k)).port)
        .collect()
}

/// On a real Redis Cluster (the partitions spread over its masters): a spawn, messages, Manage
/// sync and async across two processes, a command from the command stream, another process's
/// events on the event stream, and after a `kill -9` of one process the other takes its
/// partitions, claims and drains them, and answers; nothing is dead-lettered.
#[test]
fn manage_commands_events_and_a_kill_9_takeover_work_on_a_redis_cluster() {
    let cluster = on_a_redis_cluster();
    assert!(
        partition_masters(&cluster).len() > 1,
        "the partitions live on more than one master"
    );
    let (a, b) = cluster.balanced_pair();
    // A root on A, and Manage calls through B: a worker lands wherever its id hashes.
    let root = loop {
        let id = b.spawn_with(json!({"agent_type": "lead"}));
        if a.partitions_owned().contains(&partition(&id)) {
            break id;
        }
    };
    let events = follow_events(&b);
    b.post(
        &format!("/v1/agents/{root}/messages"),
        json!({"text": "hello"}),
    )
    .unwrap();
    let mut on_b = false;
    for i in 0..16 {
        let r = b.post(&format!("/v1/agents/{root}/tools/Manage"), json!({"command": "send_message", "worker": "Researcher", "message": format!("q{i}"), "threadAlias": format!("w{i}")})).unwrap();
        assert_eq!(r["messages"], json!([format!("Findings for: q{i}")]), "{r}");
        let child = r["childThreadId"].as_str().unwrap().to_string();
        if b.partitions_owned().contains(&partition(&child)) {
            on_b = true;
            let r = a.post(&format!("/v1/agents/{root}/tools/Manage"), json!({"command": "send_message", "worker": "Researcher", "message": "later", "threadAlias": format!("w{i}"), "mode": "async"})).unwrap();
            assert_eq!(r["status"], "sent", "{r}");
            break;
        }
    }
    assert!(on_b, "a worker on B");
    a.wait_for("the forward from B's worker", |a| {
        a.texts(&root)
            .iter()
            .any(|t| t == "From Researcher: Findings for: later")
    });
    // A's events on B's event stream.
    loop {
        let e = events
            .recv_timeout(Duration::from_secs(10))
            .expect("A's events on B's stream");
        if e["type"] == "status_changed" && e["agent_id"] == root.as_str() && e["to"] == "idle" {
            break;
        }
    }
    // A command from the command stream, written by a cluster client.
    send_by_command(&cluster, &a, &root);
    // A dies: B takes every partition, claims and drains them, and answers.
    a.kill9();
    b.wait_for("all partitions on B", |b| {
        b.partitions_owned().len() == PARTITIONS as usize
    });
    let answers = |b: &AgentdProcess| b.texts(&root).iter().filter(|t| *t == "ok").count();
    let before = answers(&b);
    b.post(
        &format!("/v1/agents/{root}/messages"),
        json!({"text": "after the takeover"}),
    )
    .unwrap();
    b.wait_for("the answer after the takeover", |b| answers(b) > before);
    assert!(dead_letters(&cluster).is_empty(), "nothing dead-lettered");
}

/// Slots of live partitions move between masters (`redis-cli --cluster reshard`, keys and
/// consumer groups with them) while two processes take a stream of messages: the blocking
/// reads follow their slots (`MOVED`, `ASK`), scripts and pipelines are redirected, and every
/// message is taken once, in order, and answered once — before, during and after the move.
#[test]
fn a_reshard_under_load_moves_live_partitions_without_losing_or_doubling_a_message() {
    let cluster = on_a_redis_cluster();
    let nodes = cluster.redis.cluster().expect("a Redis Cluster");
    let (a, b) = cluster.balanced_pair();
    let agents: Vec<String> = (0..20)
        .map(|_| a.spawn_with(json!({"agent_type": "subagent"})))
        .collect();
    // A live partition and its master: `reshard` takes a master's slots from its lowest, so
    // moving every slot of that master up to the partition's moves it; of the agents'
    // partitions, the one that needs the fewest slots moved (a shorter reshard, well within
    // the load).
    let slots_up_to = |node: &agentd_tests::redis_cluster::ClusterNode, slot: u16| -> usize {
        node.slots
            .iter()
            .filter(|(lo, _)| *lo <= slot)
            .map(|(lo, hi)| usize::from((*hi).min(slot) - lo + 1))
            .sum()
    };
    let (moving, from, count) = agents
        .iter()
        .map(|id| {
            let moving = keys().partition(partition(id));
            let from = nodes.master_of(&moving);
            let count = slots_up_to(&from, agentd_store::slot(moving.as_bytes()));
            (moving, from, count)
        })
        .min_by_key(|(_, _, count)| *count)
        .expect("agents");
    let to = nodes
        .masters()
        .into_iter()
        .find(|n| n.id != from.id)
        .expect("another master");
    // The moving partition's agents get messages from a sender of their own for as long as the
    // reshard runs, each agent through one process (its order is one path's), half through
    // each; the other agents take the load meanwhile.
    let (movers, others): (Vec<String>, Vec<String>) = agents
        .iter()
        .cloned()
        .partition(|id| keys().partition(partition(id)) == moving);
    let resharding = std::sync::atomic::AtomicBool::new(true);
    let started = Instant::now();
    let (load, during) = std::thread::scope(|scope| {
        let poster = scope.spawn(|| {
            let mut sent = Vec::new();
            let mut n = 0;
            while resharding.load(std::sync::atomic::Ordering::SeqCst) {
                let i = n % movers.len();
                let id = &movers[i];
                let via = if i % 2 == 0 { &a } else { &b };
                let text = format!("msg during-{n}");
                let r = via.post(&format!("/v1/agents/{id}/messages"), json!({"text": text}));
                assert!(r.is_ok(), "{text} to {id} during the reshard: {r:?}");
                sent.push((id.clone(), text));
                n += 1;
            }
            sent
        });
        let load = drive_load(&a, &others, 2_000, || {
            nodes.reshard(&from, &to, count);
            resharding.store(false, std::sync::atomic::Ordering::SeqCst);
            eprintln!("resharded {count} slots in {:?}", started.elapsed());
        });
        (load, poster.join().unwrap())
    });
    eprintln!(
        "{} messages to the moving partition during the reshard; the load done in {:?}",
        during.len(),
        started.elapsed()
    );
    assert!(during.len() > 10, "messages while the partition moved");
    let mut sent = load;
    sent.extend(during);
    assert_eq!(
        nodes.master_of(&moving).id,
        to.id,
        "the partition's slot moved"
    );
    // And after the move: messages through both processes.
    for (n, id) in agents.iter().enumerate() {
        // Through the process each agent's earlier messages went through (one path, one order).
        let via = match movers.iter().position(|m| m == id) {
            Some(i) if i % 2 == 1 => &b,
            _ => &a,
        };
        let text = format!("msg after-{n}");
        via.post(&format!("/v1/agents/{id}/messages"), json!({"text": text}))
            .unwrap();
        sent.push((id.clone(), text));
    }
    every_message_once_in_order(&a, &agents, &sent);
    assert!(dead_letters(&cluster).is_empty(), "nothing dead-lettered");
}

/// A slot held halfway through its move, the state `redis-cli --cluster reshard` passes each
/// slot through: `MIGRATING` on its master, `IMPORTING` on the next, and one key — the
/// partition's stream — already moved. Its master answers `ASK` for the stream: the partition
/// reader reads it from the importing master (`ASKING`). The deliveries, scripts on the agent's
/// keys that are split between the two masters meanwhile, are answered `TRYAGAIN` and retried
/// until the move is finished; then they land, the acknowledgements follow the slot (`MOVED`),
/// and the partition goes on. Every message is taken once, in order.
#[test]
fn a_partition_whose_stream_is_caught_mid_move_is_read_through_ask_redirections() {
    let cluster = on_a_redis_cluster();
    let nodes = cluster.redis.cluster().expect("a Redis Cluster");
    let p = cluster.process();
    p.wait_for("p to own every partition", |p| {
        p.partitions_owned().len() == PARTITIONS as usize
    });
    let agent = p.spawn_with(json!({"agent_type": "subagent"}));
    let stream = keys().partition(partition(&agent));
    let slot = agentd_store::slot(stream.as_bytes());
    let from = nodes.master_of(&stream);
    let to = nodes
        .masters()
        .into_iter()
        .find(|n| n.id != from.id)
        .expect("another master");
    let mut sent = Vec::new();
    let send = |text: String, sent: &mut Vec<String>| {
        p.post(
            &format!("/v1/agents/{agent}/messages"),
            json!({"text": text}),
        )
        .unwrap();
        sent.push(text);
    };
    send("msg before".into(), &mut sent);
    let answered = |p: &AgentdProcess, sent: &[String]| {
        let texts = p.texts(&agent);
        sent.iter()
            .all(|t| texts.iter().any(|x| *x == format!("echo: {t}")))
    };
    p.wait_for("the answer before the move", |p| answered(p, &sent));
    // Halfway: the slot migrating, its stream on the importing master.
    let (mut source, mut target) = (nodes.node_client(from.port), nodes.node_client(to.port));
    let setslot = |con: &mut redis::Connection, state: &str, id: &str| {
        let _: () = redis::cmd("CLUSTER")
            .arg("SETSLOT")
            .arg(slot)
            .arg(state)
            .arg(id)
            .query(con)
            .unwrap();
    };
    setslot(&mut target, "IMPORTING", &from.id);
    setslot(&mut source, "MIGRATING", &to.id);
    let migrate = |con: &mut redis::Connection, keys: &[String]| {
        let _: String = redis::cmd("MIGRATE")
            .arg("127.0.0.1")
            .arg(to.port)
            .arg("")
            .arg(0)
            .arg(5_000)
            .arg("KEYS")
            .arg(keys)
            .query(con)
            .unwrap();
    };
    migrate(&mut source, std::slice::from_ref(&stream));
    // Messages on the stream (a cluster client follows the `ASK` itself), read from where it
    // is now.
    let mut con = cluster.redis.client();
    for n in 0..5 {
        let text = format!("msg asked {n}");
        let env = Envelope::new(
            Address::External { name: "t".into() },
            Address::agent(&agent),
            Item::Inbox(InboxItem::message(text.clone())),
            1,
        );
        xadd(&mut con, &stream, &encode_envelope(&env).unwrap());
        sent.push(text);
    }
    // The reader took them from the importing master: they are pending with it there. (Their
    // deliveries wait: a script on the agent's keys, some of which do not exist, is answered
    // `TRYAGAIN` until the slot has moved, and is retried meanwhile.)
    eventually_blocking(
        Duration::from_secs(10),
        "the entries read through ASK",
        || {
            let (_, pending): ((), redis::streams::StreamPendingReply) = redis::pipe()
                .cmd("ASKING")
                .cmd("XPENDING")
                .arg(&stream)
                .arg("agentd")
                .query(&mut target)
                .unwrap();
            pending.count() == 5
        },
    );
    // The move finished: the rest of the slot's keys, then the slot, to the new master.
    loop {
        let left: Vec<String> = redis::cmd("CLUSTER")
            .arg("GETKEYSINSLOT")
            .arg(slot)
            .arg(100)
            .query(&mut source)
            .unwrap();
        if left.is_empty() {
            break;
        }
        migrate(&mut source, &left);
    }
    for node in nodes.masters() {
        setslot(&mut nodes.node_client(node.port), "NODE", &to.id);
    }
    nodes.wait_ok();
    assert_eq!(nodes.master_of(&stream).id, to.id);
    send("msg after".into(), &mut sent);
    let env = Envelope::new(
        Address::External { name: "t".into() },
        Address::agent(&agent),
        Item::Inbox(InboxItem::message("msg moved")),
        1,
    );
    xadd(&mut con, &stream, &encode_envelope(&env).unwrap());
    sent.push("msg moved".into());
    p.wait_for("the answers after the move", |p| answered(p, &sent));
    let texts = p.texts(&agent);
    let inputs: Vec<&String> = texts.iter().filter(|t| t.starts_with("msg ")).collect();
    assert_eq!(
        inputs,
        sent.iter().collect::<Vec<_>>(),
        "each once, in order"
    );
    assert!(dead_letters(&cluster).is_empty(), "nothing dead-lettered");
    assert_eq!(pending(&mut con, &stream), 0, "nothing left pending");
}
