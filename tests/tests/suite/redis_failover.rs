//! A Redis Cluster master killed with `kill -9` under load, with `redis.min_replicas = 1`, as
//! a client lives through it: every request is answered within about a second — `202` once
//! durable, `503 unavailable` with `Retry-After` when it cannot be made durable now, never
//! another 5xx and never a hang until the node has resynced; writes to the dead master's agents
//! resume once its replica is promoted (it has a second replica, so the dead master never has
//! to come back), and without a replica at all they are refused as quickly; both processes
//! stay ready, `/readyz` naming the partitions they cannot serve
//! meanwhile; and nothing acknowledged is lost or doubled.

use agentd_actors::Threads;
use agentd_store::{Keys, RedisStore, RedisTarget};
use agentd_tests::process::wait_balanced;
use agentd_tests::{AgentdProcess, RedisCluster};
use serde_json::{Value, json};
use std::collections::{BTreeSet, HashMap};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

const NS: &str = "fo";
const PARTITIONS: u32 = 8;

/// How a request was answered.
#[derive(Debug, Clone)]
struct Answer {
    agent: String,
    text: String,
    sent: Instant,
    took: Duration,
    status: u16,
    code: String,
    retry_after: Option<String>,
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

/// `POST /v1/agents/{agent}/messages` through `base`, timed, whatever it answers.
/// Posts `text` to `agent` with the text as its `Idempotency-Key` (a client that retries a
/// refused message safely).
fn post_message(http: &ureq::Agent, base: &str, agent: &str, text: &str) -> Answer {
    let sent = Instant::now();
    let answer = http
        .post(&format!("{base}/v1/agents/{agent}/messages"))
        .set("Idempotency-Key", text)
        .send_json(json!({"text": text}));
    let (status, code, retry_after) = match answer {
        Ok(r) => (r.status(), String::new(), None),
        Err(ureq::Error::Status(status, r)) => {
            let retry_after = r.header("Retry-After").map(str::to_string);
            let body: Value = r.into_json().unwrap_or(Value::Null);
            (
                status,
                body["code"].as_str().unwrap_or_default().to_string(),
                retry_after,
            )
        }
        Err(e) => (0, e.to_string(), None),
    };
    Answer {
        agent: agent.to_string(),
        text: text.to_string(),
        sent,
        took: sent.elapsed(),
        status,
        code,
        retry_after,
    }
}

/// Sends messages to `agents` from two senders per process until `stop`; every answer.
fn load(processes: [&AgentdProcess; 2], agents: &[String], stop: &AtomicBool) -> Vec<Answer> {
    let senders = 4;
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..senders)
            .map(|k| {
                let base = processes[k % 2].url.clone();
                scope.spawn(move || {
                    let http = ureq::AgentBuilder::new()
                        .timeout(Duration::from_secs(60))
                        .build();
                    let mine: Vec<&String> = agents.iter().skip(k).step_by(senders).collect();
                    let mut answers = Vec::new();
                    let mut n = 0;
                    while !stop.load(Ordering::SeqCst) {
                        let id = mine[n % mine.len()];
                        let a = post_message(&http, &base, id, &format!("msg {k}-{n}"));
                        n += 1;
                        if a.status != 202 {
                            std::thread::sleep(Duration::from_millis(50));
                        }
                        answers.push(a);
                    }
                    answers
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    })
}

/// One `/readyz` answer: when, from which process, its status and body.
type Probe = (Instant, usize, u16, Value);

/// Probes `/readyz` of both processes every 100 ms until `stop`.
fn probe_readiness(processes: [&AgentdProcess; 2], stop: &AtomicBool) -> Vec<Probe> {
    let http = ureq::AgentBuilder::new()
        .timeout(Duration::from_secs(60))
        .build();
    let mut probes = Vec::new();
    while !stop.load(Ordering::SeqCst) {
        for (n, p) in processes.iter().enumerate() {
            let at = Instant::now();
            let (status, body) = match http.get(&format!("{}/readyz", p.url)).call() {
                Ok(r) => (r.status(), r.into_json().unwrap_or(Value::Null)),
                Err(ureq::Error::Status(s, r)) => (s, r.into_json().unwrap_or(Value::Null)),
                Err(e) => (0, Value::String(e.to_string())),
            };
            probes.push((at, n, status, body));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    probes
}

/// The user texts of `id`'s thread, as the store has them (read from the test, not agentd).
async fn texts(store: &RedisStore, id: &str) -> Vec<String> {
    store
        .thread(id)
        .await
        .unwrap_or_default()
        .iter()
        .map(|e| e.text.clone())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_master_killed_under_load_answers_503_within_a_second_and_writes_resume_at_promotion() {
    let mut cluster = RedisCluster::start_failing_over();
    let urls = cluster.urls();
    let dir = tempfile::tempdir().unwrap();
    let env = [
        ("AGENTD__REDIS__URL", urls[0].clone()),
        ("AGENTD__REDIS__CLUSTER", "true".to_string()),
        ("AGENTD__REDIS__CLUSTER_NODES", urls[1..].join(",")),
        ("AGENTD__REDIS__MIN_REPLICAS", "1".to_string()),
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
    // The master serving the most of them dies; it has a second replica, which the promoted
    // one keeps.
    let mut by_master: HashMap<u16, usize> = HashMap::new();
    for id in &agents {
        *by_master
            .entry(cluster.master_of(&keys.agent(id)).port)
            .or_default() += 1;
    }
    let victim = by_master
        .iter()
        .max_by_key(|(_, n)| **n)
        .map(|(port, _)| *port)
        .unwrap();
    cluster.add_replica(victim, 2);
    let victims: Vec<String> = agents
        .iter()
        .filter(|id| cluster.master_of(&keys.agent(id)).port == victim)
        .cloned()
        .collect();
    let partitions_on_victim: BTreeSet<u32> = (0..PARTITIONS)
        .filter(|k| cluster.master_of(&keys.lease(*k)).port == victim)
        .collect();

    let stop = AtomicBool::new(false);
    let killed_at = Mutex::new(None);
    let promoted_at = Mutex::new(None);
    let unreplicated_at = Mutex::new(None);
    let (answers, probes) = std::thread::scope(|scope| {
        let loader = scope.spawn(|| load([&p, &other], &agents, &stop));
        let prober = scope.spawn(|| probe_readiness([&p, &other], &stop));
        std::thread::sleep(Duration::from_millis(1500));
        *killed_at.lock().unwrap() = Some(Instant::now());
        cluster.kill9_node(victim);
        cluster.wait_failed_over(victim, Duration::from_secs(30));
        *promoted_at.lock().unwrap() = Some(Instant::now());
        // Load goes on well after the failover: the dead master's agents take messages again.
        std::thread::sleep(Duration::from_secs(5));
        // Then the promoted master loses its replica: its writes can no longer be made
        // durable (`WAIT` is answered short), and are refused as quickly.
        let promoted = cluster.master_of(&keys.agent(&victims[0])).port;
        let replica = cluster
            .replica_of(promoted)
            .expect("the promoted master's replica");
        *unreplicated_at.lock().unwrap() = Some(Instant::now());
        cluster.kill9_node(replica);
        std::thread::sleep(Duration::from_secs(3));
        stop.store(true, Ordering::SeqCst);
        // Its replica back, what its agents took before is written (their flushes waited for a
        // replica) and they run on.
        cluster.restart_node(replica);
        cluster.wait_replica_online(promoted, Duration::from_secs(30));
        (loader.join().unwrap(), prober.join().unwrap())
    });
    let killed = killed_at.lock().unwrap().unwrap();
    let promoted = promoted_at.lock().unwrap().unwrap();
    let unreplicated = unreplicated_at.lock().unwrap().unwrap();
    let acked: Vec<&Answer> = answers.iter().filter(|a| a.status == 202).collect();
    let refused: Vec<&Answer> = answers.iter().filter(|a| a.status != 202).collect();
    eprintln!(
        "{} answered 202, {} refused; failover took {:?}; slowest answer {:?}",
        acked.len(),
        refused.len(),
        promoted - killed,
        answers.iter().map(|a| a.took).max()
    );
    for a in answers
        .iter()
        .filter(|a| victims.contains(&a.agent) && a.sent > killed)
    {
        if a.status != 202 || a.took > Duration::from_millis(300) {
            eprintln!(
                "  +{:?} {} in {:?}{}",
                a.sent - killed,
                a.status,
                a.took,
                if a.sent > unreplicated {
                    " (unreplicated)"
                } else {
                    ""
                }
            );
        }
    }

    // A refusal is `503 unavailable` with `Retry-After`, never another status.
    for a in &refused {
        assert!(
            a.status == 503 && a.code == "unavailable" && a.retry_after.is_some(),
            "a request refused otherwise than 503 unavailable with Retry-After: {a:?}"
        );
    }
    // Nothing waits much longer than a second.
    let slow: Vec<&Answer> = answers
        .iter()
        .filter(|a| a.took > Duration::from_millis(1_500))
        .collect();
    assert!(
        slow.is_empty(),
        "{} requests took longer than 1.5 s, e.g. {:?}",
        slow.len(),
        slow.first()
    );
    // The dead master's agents were refused meanwhile, and take messages again soon after the
    // promotion, the dead master still dead.
    assert!(
        refused
            .iter()
            .any(|a| a.sent > killed && victims.contains(&a.agent)),
        "the dead master's agents were refused while it was dead"
    );
    let resumed = acked
        .iter()
        .filter(|a| a.sent > promoted && a.sent < unreplicated && victims.contains(&a.agent))
        .map(|a| a.sent + a.took)
        .min()
        .expect("the dead master's agents take messages again after the promotion");
    eprintln!(
        "writes resumed {:?} after the promotion",
        resumed - promoted
    );
    assert!(
        resumed - promoted < Duration::from_secs(3),
        "writes resumed {:?} after the promotion",
        resumed - promoted
    );
    // Without a replica, the promoted master's agents are refused again (not answered late).
    assert!(
        refused
            .iter()
            .any(|a| a.sent > unreplicated + Duration::from_millis(1_500)
                && victims.contains(&a.agent)),
        "the unreplicated master's agents were refused"
    );

    // Both processes stay ready (where the failed master took 15 s of 503s before), and while
    // the master is dead `/readyz` names the partitions a process owns whose lease it cannot
    // renew there. The one exception is a moment of the cluster client's own: when it remaps
    // the slots after the promotion, every request of the process waits for it, the process
    // reaches no Redis, and says so for as long — under a loaded machine a probe or two.
    for n in 0..2 {
        let unready: Vec<&Probe> = probes
            .iter()
            .filter(|(_, m, status, _)| *m == n && *status != 200)
            .collect();
        if let (Some(first), Some(last)) = (unready.first(), unready.last()) {
            eprintln!(
                "process {n} not ready from {:?} to {:?} after the kill: {}",
                first.0 - killed,
                last.0 - killed,
                first.3
            );
            assert!(
                last.0 - first.0 < Duration::from_millis(1_500) && unready.len() <= 8,
                "process {n} not ready for {:?} ({} probes): {}",
                last.0 - first.0,
                unready.len(),
                first.3
            );
        }
    }
    let degraded: BTreeSet<u32> = probes
        .iter()
        .filter(|(at, ..)| *at > killed && *at < promoted)
        .flat_map(|(.., body)| {
            body["partitions_degraded"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .filter_map(|v| v.as_u64().map(|k| k as u32))
        .collect();
    assert!(
        !degraded.is_empty() && degraded.is_subset(&partitions_on_victim),
        "degraded partitions {degraded:?}, those on the dead master {partitions_on_victim:?}"
    );
    let last: Vec<&Probe> = probes.iter().rev().take(2).collect();
    for (_, n, _, body) in last {
        assert_eq!(
            body["partitions_degraded"],
            json!([]),
            "process {n} serves every partition again: {body}"
        );
    }

    // A client retries each refused message with its key until it is answered 202, through
    // either process.
    let http = ureq::AgentBuilder::new()
        .timeout(Duration::from_secs(60))
        .build();
    for (n, a) in refused.iter().enumerate() {
        let base = &[&p, &other][n % 2].url;
        let retried = Instant::now();
        while post_message(&http, base, &a.agent, &a.text).status != 202 {
            assert!(
                retried.elapsed() < Duration::from_secs(30),
                "{} never taken",
                a.text
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    // Every message answered 202 is in its agent's thread exactly once, and so is every
    // refused one retried with its key (whether or not its first attempt landed).
    let store = RedisStore::connect_to(&RedisTarget::cluster(cluster.urls()), NS, PARTITIONS)
        .await
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(40);
    for id in &agents {
        loop {
            let texts = texts(&store, id).await;
            let missing: Vec<&&Answer> = acked
                .iter()
                .chain(refused.iter())
                .filter(|a| a.agent == *id && !texts.contains(&a.text))
                .collect();
            if missing.is_empty() {
                for a in acked.iter().filter(|a| a.agent == *id) {
                    let n = texts.iter().filter(|t| **t == a.text).count();
                    assert_eq!(n, 1, "{} on {id}", a.text);
                }
                for a in refused.iter().filter(|a| a.agent == *id) {
                    let n = texts.iter().filter(|t| **t == a.text).count();
                    assert_eq!(n, 1, "{} refused, retried with its key: {n} times", a.text);
                }
                break;
            }
            assert!(
                Instant::now() < deadline,
                "{id}: {} acknowledged messages missing, e.g. {:?}",
                missing.len(),
                missing.first()
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}
