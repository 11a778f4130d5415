//! Acknowledged means replicated, when asked (`redis.min_replicas`), and idempotent spawns
//! (`Idempotency-Key`), on real redis-servers with real replicas: `WAIT` after the writes an
//! acknowledgement depends on, on the node that took them, `unavailable` when the replica does
//! not confirm in time, none of it with `min_replicas = 0`; a spawn retried under one key
//! answers one agent across processes and doors; and a Redis Cluster master killed with
//! `kill -9` under load, its replica promoted, loses no message answered `202` and doubles none.

use agentd_actors::system::idempotent_agent_id;
use agentd_actors::{AgentRecords, Batches, Threads};
use agentd_actors::{StoreErrorKind, StoreWrite};
use agentd_proto::codec::{decode_envelope, encode_envelope};
use agentd_proto::{
    Address, AgentdError, Command, Envelope, ErrorCode, Item, SpawnRequest, ThreadEntry,
};
use agentd_store::conformance::{entry, record};
use agentd_store::{Keys, RedisStore, RedisTarget};
use agentd_tests::process::wait_balanced;
use agentd_tests::{AgentdProcess, RedisCluster, RedisServer, eventually_blocking};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

const NS: &str = "rep";
const PARTITIONS: u32 = 8;

/// How many `WAIT`s the server on `port` ran so far (`INFO commandstats`).
fn waits(server: &mut redis::Connection) -> u64 {
    let stats: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(server)
        .unwrap();
    stats
        .lines()
        .find_map(|l| l.strip_prefix("cmdstat_wait:calls="))
        .and_then(|rest| rest.split(',').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

fn dbsize(con: &mut redis::Connection) -> u64 {
    redis::cmd("DBSIZE").query(con).unwrap()
}

fn flush_of(agent_id: &str, text: &str) -> Vec<StoreWrite> {
    vec![
        StoreWrite::Append {
            agent_id: agent_id.into(),
            entry: Arc::new(entry(text)),
        },
        StoreWrite::PutAgent(Arc::new(record(agent_id, None, 2))),
    ]
}

fn assert_unreplicated<T: std::fmt::Debug>(what: &str, r: Result<T, agentd_actors::StoreError>) {
    match r {
        Err(e) => {
            assert_eq!(e.kind(), StoreErrorKind::Unreplicated, "{what}: {e}");
            assert_eq!(AgentdError::from(e).code, ErrorCode::Unavailable, "{what}");
        }
        Ok(v) => panic!("{what}: acknowledged without its replica: {v:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_writes_wait_for_a_replica_and_without_it_are_unavailable() {
    let master = RedisServer::start();
    let mut replica = RedisServer::start_replica_of(&master);
    let mut on_master = master.client();
    let mut on_replica = replica.client();
    let none = RedisStore::connect(&master.url(), NS, PARTITIONS)
        .await
        .unwrap();
    let one = RedisStore::connect(&master.url(), NS, PARTITIONS)
        .await
        .unwrap()
        .with_min_replicas(1, 1_500);

    // None asked for: no WAIT at all, whatever is written.
    let before = waits(&mut on_master);
    none.put_agent(&record("r-none", None, 1)).await.unwrap();
    none.replicated("r-none").await.unwrap();
    none.write_own_batch("r-none", &flush_of("r-none", "hi"))
        .await
        .unwrap();
    assert_eq!(
        waits(&mut on_master),
        before,
        "min_replicas = 0 sends no WAIT"
    );

    // One asked for: once acknowledged, the replica holds everything (read at once, no
    // polling: that is what the WAIT bought).
    one.put_agent(&record("r-one", None, 1)).await.unwrap();
    one.replicated("r-one").await.unwrap();
    let agent_key = Keys::new(NS, PARTITIONS).agent("r-one");
    let on_the_replica: bool = redis::cmd("EXISTS")
        .arg(&agent_key)
        .query(&mut on_replica)
        .unwrap();
    assert!(
        on_the_replica,
        "the record is on the replica when acknowledged"
    );
    one.write_own_batch("r-one", &flush_of("r-one", "answer"))
        .await
        .unwrap();
    assert_eq!(
        dbsize(&mut on_replica),
        dbsize(&mut on_master),
        "a flush is replicated when it returns"
    );
    assert!(waits(&mut on_master) >= before + 2, "both waited");

    // Acknowledgements waiting at once share WAITs: one sent after a write covers it.
    for n in 0..32 {
        one.put_agent(&record(&format!("r-many-{n}"), None, 1))
            .await
            .unwrap();
    }
    let before = waits(&mut on_master);
    let acks: Vec<_> = (0..32)
        .map(|n| {
            let one = one.clone();
            tokio::spawn(async move { one.replicated(&format!("r-many-{n}")).await })
        })
        .collect();
    for ack in acks {
        ack.await.unwrap().unwrap();
    }
    let sent = waits(&mut on_master) - before;
    assert!(sent <= 8, "32 acknowledgements at once sent {sent} WAITs");

    // The replica gone: the writes land on the master, the acknowledgement is refused after
    // the wait time, as `unavailable`.
    replica.kill9();
    one.put_agent(&record("r-two", None, 1)).await.unwrap();
    let start = Instant::now();
    assert_unreplicated("a record", one.replicated("r-two").await);
    assert!(
        start.elapsed() >= Duration::from_millis(350),
        "{:?}",
        start.elapsed()
    );
    assert_unreplicated(
        "a flush",
        one.write_own_batch("r-two", &flush_of("r-two", "lost?"))
            .await,
    );
    assert_eq!(
        one.thread("r-two").await.unwrap().len(),
        1,
        "the flush itself was written (writing it again is harmless)"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_cluster_the_wait_goes_to_the_node_of_the_key_written() {
    let mut cluster = RedisCluster::start();
    let keys = Keys::new(NS, PARTITIONS);
    let store = RedisStore::connect_to(&RedisTarget::cluster(cluster.urls()), NS, PARTITIONS)
        .await
        .unwrap()
        .with_min_replicas(1, 1_500);
    // One agent per master, each of which has its replica in sync.
    let masters = cluster.masters();
    for m in &masters {
        cluster.wait_replica_online(m.port, Duration::from_secs(20));
    }
    let mut agent_on: HashMap<u16, String> = HashMap::new();
    for n in 0.. {
        let id = format!("c-agent-{n}");
        let port = cluster.master_of(&keys.agent(&id)).port;
        agent_on.entry(port).or_insert(id);
        if agent_on.len() == masters.len() {
            break;
        }
    }
    for id in agent_on.values() {
        store.put_agent(&record(id, None, 1)).await.unwrap();
        store.replicated(id).await.unwrap();
    }
    // The replica of one master gone: only that master's writes are unreplicated, so each
    // WAIT went to the master that took the write (a WAIT sent to every master would fail
    // them all, or none).
    let lonely = masters[0].port;
    let replica = cluster.replica_of(lonely).expect("a replica per master");
    cluster.kill9_node(replica);
    for (port, id) in &agent_on {
        store
            .write_own_batch(id, &[StoreWrite::PutAgent(Arc::new(record(id, None, 3)))])
            .await
            .map(|_| ())
            .or_else(|e| match e.kind() {
                StoreErrorKind::Unreplicated if *port == lonely => Ok(()),
                _ => Err(e),
            })
            .unwrap_or_else(|e| panic!("{id} on {port}: {e}"));
        let acked = store.replicated(id).await;
        if *port == lonely {
            assert_unreplicated(id, acked);
        } else {
            acked.unwrap_or_else(|e| panic!("{id} on {port}, whose replica runs: {e}"));
        }
    }
}

/// A scripted agentd on `env`'s Redis whose agents answer `echo: <input>`.
fn process(env: &[(&'static str, String)], dir: &tempfile::TempDir) -> AgentdProcess {
    let script = dir.path().join("script.toml");
    std::fs::write(&script, "[[rule]]\ntext = \"echo: {{input}}\"\n").unwrap();
    let mut env = env.to_vec();
    env.extend([
        ("AGENTD__REDIS__NAMESPACE", NS.to_string()),
        ("AGENTD__REDIS__PARTITIONS", PARTITIONS.to_string()),
        ("AGENTD__MODEL__SCRIPT", script.display().to_string()),
    ]);
    AgentdProcess::start(&env)
}

/// `POST /v1/agents` with `Idempotency-Key: key`: `Ok(body)` or `Err((status, body))`.
fn spawn_keyed(p: &AgentdProcess, key: &str, body: Value) -> Result<Value, (u16, Value)> {
    match ureq::post(&format!("{}/v1/agents", p.url))
        .set("Idempotency-Key", key)
        .send_json(body)
    {
        Ok(r) => {
            assert_eq!(r.status(), 201);
            Ok(r.into_json().unwrap())
        }
        Err(ureq::Error::Status(code, r)) => Err((code, r.into_json().unwrap_or(Value::Null))),
        Err(e) => Err((0, Value::String(e.to_string()))),
    }
}

/// The roots titled `title` (`GET /v1/agents`).
fn roots_titled(p: &AgentdProcess, title: &str) -> Vec<String> {
    p.get("/v1/agents")["agents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["title"] == title)
        .map(|a| a["agent_id"].as_str().unwrap().to_string())
        .collect()
}

fn assert_unavailable(what: &str, r: Result<Value, (u16, Value)>) {
    match r {
        Err((503, body)) => assert_eq!(body["code"], "unavailable", "{what}: {body}"),
        other => panic!("{what}: {other:?}"),
    }
}

#[test]
fn a_202_and_a_201_wait_for_the_replica_and_a_retried_spawn_answers_its_first_agent() {
    let master = RedisServer::start();
    let mut replica = RedisServer::start_replica_of(&master);
    let dir = tempfile::tempdir().unwrap();
    let p = process(
        &[
            ("AGENTD__REDIS__URL", master.url()),
            ("AGENTD__REDIS__MIN_REPLICAS", "1".to_string()),
            ("AGENTD__REDIS__REPLICA_WAIT_MS", "1500".to_string()),
            // The replica's wait is what is checked here, not the request's bound (the
            // failover tests hold that): on a loaded machine a write and its `WAIT` may take
            // longer than the default second, and the replica's own limit decides.
            ("AGENTD__REDIS__REQUEST_WAIT_MS", "10000".to_string()),
        ],
        &dir,
    );
    let mut on_master = master.client();
    let before = waits(&mut on_master);
    let root = p.spawn_with(json!({"agent_type": "subagent", "prompt": "hello"}));
    p.post(
        &format!("/v1/agents/{root}/messages"),
        json!({"text": "replicated"}),
    )
    .unwrap();
    p.wait_for("the answer", |p| {
        p.texts(&root).iter().any(|t| t == "echo: replicated")
    });
    assert!(waits(&mut on_master) > before, "acknowledgements waited");

    // Without its replica: a message and a spawn are answered `unavailable` (503).
    replica.kill9();
    assert_unavailable(
        "a message",
        p.post(
            &format!("/v1/agents/{root}/messages"),
            json!({"text": "not replicated"}),
        ),
    );
    let body = json!({"agent_type": "subagent", "title": "Keyed", "prompt": "once"});
    assert_unavailable("a spawn", spawn_keyed(&p, "order-7", body.clone()));
    // The spawn landed on the master all the same; the retry, once a replica is back,
    // answers that very agent and makes no second.
    let _replica = RedisServer::start_replica_of(&master);
    let first = spawn_keyed(&p, "order-7", body.clone()).unwrap();
    let id = first["agent_id"].as_str().unwrap().to_string();
    assert_eq!(id, idempotent_agent_id(None, "order-7"));
    let again = spawn_keyed(&p, "order-7", body).unwrap();
    assert_eq!(again["agent_id"], first["agent_id"]);
    assert_eq!(roots_titled(&p, "Keyed"), vec![id.clone()]);
    p.wait_for("the keyed agent's answer", |p| {
        p.texts(&id).iter().filter(|t| *t == "echo: once").count() == 1
    });
    assert_eq!(
        p.texts(&id).iter().filter(|t| *t == "once").count(),
        1,
        "its first message queued once"
    );
}

/// A message answered `503 unavailable` (its replica gone) may have landed all the same; retried
/// with its `Idempotency-Key` once a replica is back, it is answered `202` and is in the agent's
/// thread once, as is a message retried with its key after a 202.
#[test]
fn a_message_refused_as_unavailable_and_retried_with_its_key_is_queued_once() {
    let master = RedisServer::start();
    let mut replica = RedisServer::start_replica_of(&master);
    let dir = tempfile::tempdir().unwrap();
    let p = process(
        &[
            ("AGENTD__REDIS__URL", master.url()),
            ("AGENTD__REDIS__MIN_REPLICAS", "1".to_string()),
            ("AGENTD__REDIS__REPLICA_WAIT_MS", "1000".to_string()),
        ],
        &dir,
    );
    let root = p.spawn_with(json!({"agent_type": "subagent", "prompt": "hello"}));
    let messages = format!("/v1/agents/{root}/messages");
    replica.kill9();
    let body = json!({"text": "order 42 shipped"});
    assert_unavailable(
        "a keyed message",
        p.post_keyed(&messages, "order-42", body.clone()),
    );
    assert_unavailable(
        "its retry while no replica holds it",
        p.post_keyed(&messages, "order-42", body.clone()),
    );
    let _replica = RedisServer::start_replica_of(&master);
    eventually_blocking(
        Duration::from_secs(20),
        "a 202 once a replica is back",
        || p.post_keyed(&messages, "order-42", body.clone()).is_ok(),
    );
    p.post_keyed(&messages, "order-42", body.clone()).unwrap();
    p.wait_for("the answer", |p| {
        p.texts(&root)
            .contains(&"echo: order 42 shipped".to_string())
    });
    p.post(&messages, json!({"text": "last"})).unwrap();
    p.wait_for("the last answer", |p| {
        p.texts(&root).contains(&"echo: last".to_string())
    });
    let texts = p.texts(&root);
    assert_eq!(
        texts.iter().filter(|t| *t == "order 42 shipped").count(),
        1,
        "queued once over four attempts: {texts:?}"
    );
}

/// Writes spawn command `req` to `<ns>:commands`, replies to `svc:replies`: its envelope id.
fn spawn_command(con: &mut redis::Connection, req: SpawnRequest) -> uuid::Uuid {
    let mut env = Envelope::new(
        Address::External { name: "svc".into() },
        Address::System,
        Item::Command(Command::Spawn(Box::new(req))),
        1,
    );
    env.reply_to = Some("svc:replies".into());
    let _: String = redis::cmd("XADD")
        .arg(format!("{NS}:commands"))
        .arg("*")
        .arg("m")
        .arg(encode_envelope(&env).unwrap())
        .query(con)
        .unwrap();
    env.id
}

/// The reply to command `id` on `svc:replies`, once there (up to 15 s).
fn reply_to(con: &mut redis::Connection, id: uuid::Uuid) -> Result<Value, AgentdError> {
    eventually_blocking(Duration::from_secs(15), "the command's reply", || {
        let reply: redis::streams::StreamRangeReply = redis::cmd("XRANGE")
            .arg("svc:replies")
            .arg("-")
            .arg("+")
            .query(con)
            .unwrap();
        reply.ids.iter().find_map(|e| {
            let env = decode_envelope(&e.get::<Vec<u8>>("m")?, 1 << 20).ok()?;
            match env.item {
                Item::Reply(r) if env.causation_id == Some(id) => Some(r.into_result()),
                _ => None,
            }
        })
    })
}

#[test]
fn a_spawn_retried_under_one_key_makes_one_agent_across_processes_and_doors() {
    let server = RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    let env = [("AGENTD__REDIS__URL", server.url())];
    let (a, b) = (process(&env, &dir), process(&env, &dir));
    let body = json!({"agent_type": "subagent", "title": "Once", "prompt": "only once"});

    // Through HTTP: the first attempt on one process, the retries on both.
    let first = spawn_keyed(&a, "k-http", body.clone()).unwrap();
    for p in [&b, &a, &b] {
        let again = spawn_keyed(p, "k-http", body.clone()).unwrap();
        assert_eq!(again["agent_id"], first["agent_id"], "{}", p.url);
    }
    // The body's field is the header's equal.
    let mut in_body = body.clone();
    in_body["idempotency_key"] = json!("k-http");
    assert_eq!(
        b.post("/v1/agents", in_body).unwrap()["agent_id"],
        first["agent_id"]
    );
    // The same key with another request is refused, and makes nothing.
    match spawn_keyed(
        &b,
        "k-http",
        json!({"agent_type": "subagent", "title": "Once", "prompt": "other"}),
    ) {
        Err((422, e)) => assert_eq!(e["code"], "idempotency_key_reused", "{e}"),
        other => panic!("{other:?}"),
    }
    // A key is scoped by its parent: under a parent it names another agent.
    let parent = first["agent_id"].as_str().unwrap();
    let child = spawn_keyed(
        &a,
        "k-http",
        json!({"agent_type": "subagent", "parent_id": parent, "prompt": "child"}),
    )
    .unwrap();
    assert_ne!(child["agent_id"], first["agent_id"]);
    assert_eq!(
        child["agent_id"],
        spawn_keyed(
            &b,
            "k-http",
            json!({"agent_type": "subagent", "parent_id": parent, "prompt": "child"})
        )
        .unwrap()["agent_id"]
    );
    // A refused spawn frees its key.
    match spawn_keyed(&a, "k-bad", json!({"agent_type": "no-such-type"})) {
        Err((404, e)) => assert_eq!(e["code"], "unknown_agent_type", "{e}"),
        other => panic!("{other:?}"),
    }
    spawn_keyed(
        &b,
        "k-bad",
        json!({"agent_type": "subagent", "title": "Fixed"}),
    )
    .unwrap();

    // Through the command stream, racing: the same spawn written three times at once.
    let mut con = server.client();
    let req = SpawnRequest {
        agent_type: Some("subagent".into()),
        title: Some("Commanded".into()),
        prompt: Some("by command".into()),
        idempotency_key: Some("k-command".into()),
        ..SpawnRequest::default()
    };
    let ids: Vec<uuid::Uuid> = (0..3)
        .map(|_| spawn_command(&mut con, req.clone()))
        .collect();
    let agents: Vec<Value> = ids
        .iter()
        .map(|id| reply_to(&mut con, *id).unwrap()["agent_id"].clone())
        .collect();
    assert!(agents.iter().all(|a| *a == agents[0]), "{agents:?}");
    // And the HTTP door with that key answers the command's agent.
    let http = spawn_keyed(
        &a,
        "k-command",
        json!({"agent_type": "subagent", "title": "Commanded", "prompt": "by command"}),
    )
    .unwrap();
    assert_eq!(http["agent_id"], agents[0]);

    for (title, n) in [("Once", 1), ("Commanded", 1), ("Fixed", 1)] {
        assert_eq!(roots_titled(&a, title).len(), n, "{title}");
    }
    let id = agents[0].as_str().unwrap().to_string();
    a.wait_for("the commanded agent's answer", |p| {
        p.texts(&id).iter().any(|t| t == "echo: by command")
    });
    assert_eq!(
        a.texts(&id).iter().filter(|t| *t == "by command").count(),
        1,
        "one first message: {:?}",
        a.texts(&id)
    );
}

/// What the load of the failover test sent: `(agent, text)` answered `202`, and those refused
/// (which may have landed, or not).
type Sent = (Vec<(String, String)>, Vec<(String, String)>);

/// Posts messages to `agents` through `p` from four senders until `stop`, answering which
/// were acknowledged and which refused. A refused message is not sent again.
fn load(p: &AgentdProcess, agents: &[String], stop: &std::sync::atomic::AtomicBool) -> Sent {
    use std::sync::atomic::Ordering;
    let senders = 4;
    let all: Vec<Sent> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..senders)
            .map(|k| {
                scope.spawn(move || {
                    let (mut acked, mut refused) = (Vec::new(), Vec::new());
                    let mine: Vec<&String> = agents.iter().skip(k).step_by(senders).collect();
                    let mut n = 0;
                    while !stop.load(Ordering::SeqCst) {
                        let id = mine[n % mine.len()].clone();
                        let text = format!("msg {k}-{n}");
                        n += 1;
                        match p.post(&format!("/v1/agents/{id}/messages"), json!({"text": text})) {
                            Ok(_) => acked.push((id, text)),
                            Err(_) => {
                                refused.push((id, text));
                                std::thread::sleep(Duration::from_millis(50));
                            }
                        }
                    }
                    (acked, refused)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    all.into_iter()
        .fold((Vec::new(), Vec::new()), |(mut a, mut r), (x, y)| {
            a.extend(x);
            r.extend(y);
            (a, r)
        })
}

/// The texts of `id`'s thread, as the store has them (read from the test, not agentd).
async fn user_texts(store: &RedisStore, id: &str) -> Vec<String> {
    store
        .thread(id)
        .await
        .unwrap_or_default()
        .iter()
        .map(|e: &ThreadEntry| e.text.clone())
        .collect()
}

/// Two processes share the partitions and every message is posted to the first, so about half
/// of them go to the second through a partition stream (the forward, then its `WAIT`) and the
/// rest straight into the first's agents' inboxes; a master dies under that load.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_master_killed_under_load_loses_no_message_answered_202_with_one_replica() {
    let mut cluster = RedisCluster::start_failing_over();
    let urls = cluster.urls();
    let dir = tempfile::tempdir().unwrap();
    let env = [
        ("AGENTD__REDIS__URL", urls[0].clone()),
        ("AGENTD__REDIS__CLUSTER", "true".to_string()),
        ("AGENTD__REDIS__CLUSTER_NODES", urls[1..].join(",")),
        ("AGENTD__REDIS__MIN_REPLICAS", "1".to_string()),
        ("AGENTD__REDIS__REPLICA_WAIT_MS", "1000".to_string()),
    ];
    let p = process(&env, &dir);
    let other = process(&env, &dir);
    wait_balanced(&p, &other, PARTITIONS);
    for m in cluster.masters() {
        cluster.wait_replica_online(m.port, Duration::from_secs(20));
    }
    let keys = Keys::new(NS, PARTITIONS);
    let agents: Vec<String> = (0..12)
        .map(|_| p.spawn_with(json!({"agent_type": "subagent"})))
        .collect();
    let owned_there = other.partitions_owned();
    assert!(
        agents
            .iter()
            .any(|id| owned_there.contains(&keys.partition_of(id))),
        "some agents are the other process's"
    );
    // The master serving the most of them dies.
    let mut by_master: HashMap<u16, usize> = HashMap::new();
    for id in &agents {
        *by_master
            .entry(cluster.master_of(&keys.agent(id)).port)
            .or_default() += 1;
    }
    let (victim, on_victim) = by_master
        .iter()
        .max_by_key(|(_, n)| **n)
        .map(|(p, n)| (*p, *n))
        .unwrap();
    assert!(on_victim > 0);
    let victims: Vec<&String> = agents
        .iter()
        .filter(|id| cluster.master_of(&keys.agent(id)).port == victim)
        .collect();

    let stop = std::sync::atomic::AtomicBool::new(false);
    let started = Instant::now();
    let (acked, refused) = std::thread::scope(|scope| {
        let loader = scope.spawn(|| load(&p, &agents, &stop));
        std::thread::sleep(Duration::from_millis(1500));
        cluster.kill9_node(victim);
        cluster.wait_failed_over(victim, Duration::from_secs(30));
        // The promoted replica has no replica of its own (its acknowledgements are refused)
        // until the dead master comes back as its replica; load goes on meanwhile and after.
        let promoted = cluster.master_of(&keys.agent(victims[0])).port;
        cluster.restart_node(victim);
        cluster.wait_replica_online(promoted, Duration::from_secs(30));
        std::thread::sleep(Duration::from_millis(2000));
        stop.store(true, std::sync::atomic::Ordering::SeqCst);
        loader.join().unwrap()
    });
    eprintln!(
        "{} messages answered 202, {} refused, in {:?}",
        acked.len(),
        refused.len(),
        started.elapsed()
    );
    let on_victim_acked = acked.iter().filter(|(id, _)| victims.contains(&id)).count();
    assert!(
        on_victim_acked > 20,
        "the dead master's agents took messages: {on_victim_acked}"
    );

    // Every message answered 202 is in its agent's thread exactly once; a refused one at most
    // once (it may have landed).
    let store = RedisStore::connect_to(&RedisTarget::cluster(cluster.urls()), NS, PARTITIONS)
        .await
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(40);
    for id in &agents {
        let mine: Vec<&String> = acked
            .iter()
            .filter(|(a, _)| a == id)
            .map(|(_, t)| t)
            .collect();
        loop {
            let texts = user_texts(&store, id).await;
            let missing: Vec<&&String> = mine.iter().filter(|t| !texts.contains(t)).collect();
            if missing.is_empty() {
                for t in &mine {
                    assert_eq!(
                        texts.iter().filter(|x| x == t).count(),
                        1,
                        "{t} once on {id}"
                    );
                }
                for (_, t) in refused.iter().filter(|(a, _)| a == id) {
                    assert!(
                        texts.iter().filter(|x| *x == t).count() <= 1,
                        "{t} at most once"
                    );
                }
                break;
            }
            assert!(
                Instant::now() < deadline,
                "{id}: {} of {} acknowledged messages missing, e.g. {:?}",
                missing.len(),
                mine.len(),
                missing.first()
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}
