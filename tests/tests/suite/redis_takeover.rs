//! Partitions moving off a process gone from Redis, at the default lease (5 s): a process
//! killed with `kill -9` loses its partitions within 2 s, a message sent to one of its agents
//! meanwhile answered by the survivor once; and a live process cut off from Redis (its
//! connections closed, as a killed one's are) has fenced itself — no longer serving its
//! partitions, its turns stopped — before the other takes any of them, then takes its share
//! back once it reconnects, nothing lost or doubled.

use agentd_store::Keys;
use agentd_tests::process::wait_balanced;
use agentd_tests::{AgentdProcess, RedisServer, TcpCut, TestRedis, eventually_blocking};
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

const NS: &str = "to";
const PARTITIONS: u32 = 8;

/// A scripted agentd (agents answer `echo: <input>`) on the Redis `redis_env` names, with the
/// default lease.
fn process(redis_env: &[(&'static str, String)], dir: &tempfile::TempDir) -> AgentdProcess {
    let script = dir.path().join("script.toml");
    std::fs::write(&script, "[[rule]]\ntext = \"echo: {{input}}\"\n").unwrap();
    let mut env = redis_env.to_vec();
    env.extend([
        ("AGENTD__REDIS__NAMESPACE", NS.to_string()),
        ("AGENTD__REDIS__PARTITIONS", PARTITIONS.to_string()),
        ("AGENTD__MODEL__SCRIPT", script.display().to_string()),
        ("RUST_LOG", "warn,agentd_bus=info".to_string()),
    ]);
    AgentdProcess::start(&env)
}

/// A model for the process backend that logs the wall-clock time of every call it gets to
/// `log` and takes 200 ms to answer: a message saying `keep going` gets a call of a tool that
/// does not exist (its error result sends the turn on to its next step, up to the step limit),
/// any other `echo: <input>`.
const MODEL: &str = r#"
import json, sys, time, uuid
log = sys.argv[1]
for line in sys.stdin:
    try:
        req = json.loads(line)
    except ValueError:
        continue
    with open(log, "a") as f:
        f.write("%f\n" % time.time())
    time.sleep(0.2)
    users = [e for e in req.get("thread", []) if e.get("role") == "user"]
    first = users[0].get("text", "") if users else ""
    last = users[-1].get("text", "") if users else ""
    answer = {"id": req.get("id"), "usage": {"input": 1, "output": 1}}
    if "keep going" in first:
        answer["text"] = ""
        answer["tool_calls"] = [{"id": "c-" + uuid.uuid4().hex, "name": "no_such_tool", "arguments": {}}]
    else:
        answer["text"] = "echo: " + last
    print(json.dumps(answer), flush=True)
"#;

/// An agentd on `redis_url` whose agents run on [`MODEL`], logging its calls to `log`.
fn process_with_model(redis_url: &str, dir: &tempfile::TempDir, log: &str) -> AgentdProcess {
    let model = dir.path().join("model.py");
    std::fs::write(&model, MODEL).unwrap();
    let config = dir.path().join(format!("{log}.toml"));
    std::fs::write(
        &config,
        format!(
            "[model]\nbackend = \"process\"\ncommand = [\"python3\", \"{}\", \"{}\"]\n\
             [limits]\nmax_steps_per_turn = 60\n",
            model.display(),
            dir.path().join(log).display()
        ),
    )
    .unwrap();
    AgentdProcess::start(&[
        ("AGENTD_CONFIG", config.display().to_string()),
        ("AGENTD__REDIS__URL", redis_url.to_string()),
        ("AGENTD__REDIS__NAMESPACE", NS.to_string()),
        ("AGENTD__REDIS__PARTITIONS", PARTITIONS.to_string()),
        ("RUST_LOG", "warn,agentd_bus=info".to_string()),
    ])
}

/// The wall-clock times of the model calls logged to `log`.
fn calls(dir: &tempfile::TempDir, log: &str) -> Vec<SystemTime> {
    std::fs::read_to_string(dir.path().join(log))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse::<f64>().ok())
        .map(|s| UNIX_EPOCH + Duration::from_secs_f64(s))
        .collect()
}

fn keys() -> Keys {
    Keys::new(NS, PARTITIONS)
}

/// Spawns agents through `through` until one is in a partition `owner` owns: its id.
fn agent_of(through: &AgentdProcess, owner: &AgentdProcess) -> String {
    let owned = owner.partitions_owned();
    (0..200)
        .map(|_| through.spawn_with(json!({"agent_type": "subagent"})))
        .find(|id| owned.contains(&keys().partition_of(id)))
        .expect("an agent in a partition of the owner")
}

fn answered(p: &AgentdProcess, id: &str, text: &str) -> bool {
    p.texts(id).iter().any(|t| *t == format!("echo: {text}"))
}

/// Each of `texts` once in `id`'s thread, and its answer once.
fn once_each(p: &AgentdProcess, id: &str, texts: &[String]) {
    let thread = p.texts(id);
    for t in texts {
        assert_eq!(
            thread.iter().filter(|x| *x == t).count(),
            1,
            "{t}: {thread:?}"
        );
        let answer = format!("echo: {t}");
        assert_eq!(
            thread.iter().filter(|x| **x == answer).count(),
            1,
            "{answer}"
        );
    }
}

#[test]
fn a_killed_process_s_partitions_move_within_two_seconds_at_the_default_lease() {
    let redis = TestRedis::from_env();
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (process(&redis.env(), &dir), process(&redis.env(), &dir));
    wait_balanced(&a, &b, PARTITIONS);
    let target = agent_of(&a, &b);
    a.post(
        &format!("/v1/agents/{target}/messages"),
        json!({"text": "before"}),
    )
    .unwrap();
    a.wait_for("the answer before the kill", |a| {
        answered(a, &target, "before")
    });

    b.kill9();
    let killed = Instant::now();
    a.post(
        &format!("/v1/agents/{target}/messages"),
        json!({"text": "after"}),
    )
    .unwrap();
    let moved = eventually_blocking(Duration::from_secs(20), "every partition on a", || {
        (a.partitions_owned().len() == PARTITIONS as usize).then(|| killed.elapsed())
    });
    let answered_in = eventually_blocking(Duration::from_secs(20), "the answer", || {
        answered(&a, &target, "after").then(|| killed.elapsed())
    });
    eprintln!("partitions moved in {moved:?}, the message answered in {answered_in:?}");
    assert!(
        moved <= Duration::from_secs(2),
        "the dead process's partitions moved in {moved:?}"
    );
    assert!(
        answered_in <= Duration::from_millis(2_500),
        "a message to its agent answered in {answered_in:?}"
    );
    once_each(&a, &target, &["before".into(), "after".into()]);
}

/// When each of `partitions` was first seen: degraded or not served by `p` (its `/readyz`),
/// and leased to someone else than `holder` (in Redis). Polls every 10 ms until `stop`.
type Seen = (BTreeMap<u32, Instant>, BTreeMap<u32, Instant>);

fn watch(
    p: &AgentdProcess,
    server: &RedisServer,
    holder: &str,
    partitions: &BTreeSet<u32>,
    stop: &AtomicBool,
) -> Seen {
    let fenced = Mutex::new(BTreeMap::new());
    let taken = Mutex::new(BTreeMap::new());
    std::thread::scope(|scope| {
        scope.spawn(|| {
            let http = ureq::AgentBuilder::new()
                .timeout(Duration::from_secs(5))
                .build();
            while !stop.load(Ordering::SeqCst) {
                let at = Instant::now();
                let v: Option<Value> = http
                    .get(&format!("{}/readyz", p.url))
                    .call()
                    .ok()
                    .and_then(|r| r.into_json().ok());
                let mut fenced = fenced.lock().unwrap();
                for k in partitions {
                    let serves = v.as_ref().is_some_and(|v| {
                        v["partitions_owned"]
                            .as_array()
                            .is_some_and(|o| o.contains(&json!(k)))
                            && !v["partitions_degraded"]
                                .as_array()
                                .is_some_and(|d| d.contains(&json!(k)))
                    });
                    if !serves {
                        fenced.entry(*k).or_insert(at);
                    }
                }
                drop(fenced);
                std::thread::sleep(Duration::from_millis(10));
            }
        });
        scope.spawn(|| {
            let mut con = server.client();
            while !stop.load(Ordering::SeqCst) {
                let at = Instant::now();
                let mut taken = taken.lock().unwrap();
                for k in partitions {
                    let now: Option<String> = redis::cmd("GET")
                        .arg(keys().lease(*k))
                        .query(&mut con)
                        .unwrap();
                    if now.is_some_and(|h| h != holder) {
                        taken.entry(*k).or_insert(at);
                    }
                }
                drop(taken);
                std::thread::sleep(Duration::from_millis(10));
            }
        });
    });
    (fenced.into_inner().unwrap(), taken.into_inner().unwrap())
}

#[test]
fn a_process_cut_off_from_redis_stops_before_its_partitions_are_taken_over() {
    let server = RedisServer::start();
    let relay = TcpCut::to(server.port);
    let dir = tempfile::tempdir().unwrap();
    let a = process_with_model(&relay.redis_url(), &dir, "calls-a");
    let b = process_with_model(&server.url(), &dir, "calls-b");
    wait_balanced(&a, &b, PARTITIONS);
    let on_a = agent_of(&b, &a);
    // A long turn on a: a model call every 200 ms, from before the cut to past the takeover.
    let long = agent_of(&b, &a);
    b.post(
        &format!("/v1/agents/{long}/messages"),
        json!({"text": "keep going"}),
    )
    .unwrap();
    eventually_blocking(
        Duration::from_secs(20),
        "the long turn running on a",
        || calls(&dir, "calls-a").len() >= 3,
    );
    let mut texts = vec!["before".to_string()];
    b.post(
        &format!("/v1/agents/{on_a}/messages"),
        json!({"text": "before"}),
    )
    .unwrap();
    b.wait_for("the answer before the cut", |b| {
        answered(b, &on_a, "before")
    });
    let partitions = a.partitions_owned().into_iter().collect::<BTreeSet<u32>>();
    let mut con = server.client();
    let holder: String = redis::cmd("GET")
        .arg(keys().lease(*partitions.first().unwrap()))
        .query(&mut con)
        .unwrap();

    let stop = AtomicBool::new(false);
    let (wall, start) = (SystemTime::now(), Instant::now());
    let (cut, (fenced, taken)) = std::thread::scope(|scope| {
        let watcher = scope.spawn(|| watch(&a, &server, &holder, &partitions, &stop));
        std::thread::sleep(Duration::from_millis(300));
        let cut = Instant::now();
        relay.cut();
        eventually_blocking(Duration::from_secs(20), "b to own everything", || {
            b.partitions_owned().len() == PARTITIONS as usize
        });
        std::thread::sleep(Duration::from_millis(100));
        stop.store(true, Ordering::SeqCst);
        (cut, watcher.join().unwrap())
    });
    for k in &partitions {
        let (Some(f), Some(t)) = (fenced.get(k), taken.get(k)) else {
            panic!(
                "partition {k}: fenced at {:?}, taken at {:?}",
                fenced.get(k),
                taken.get(k)
            );
        };
        eprintln!(
            "partition {k}: a stopped serving it {:?} after the cut, b took it {:?} after",
            *f - cut,
            *t - cut
        );
        assert!(f < t, "partition {k}: taken before a stopped serving it");
        assert!(
            *t - cut <= Duration::from_secs(2),
            "partition {k} taken {:?} after the cut",
            *t - cut
        );
    }
    // a's turn stopped at its fence: a made no model call once b could take the partition over,
    // and b ran the turn on from there.
    let k = keys().partition_of(&long);
    let taken_at = wall + (taken[&k] - start);
    let late: Vec<SystemTime> = calls(&dir, "calls-a")
        .into_iter()
        .filter(|t| *t >= taken_at)
        .collect();
    assert!(
        late.is_empty(),
        "a called the model {} times after b took the partition over",
        late.len()
    );
    eventually_blocking(
        Duration::from_secs(20),
        "b running the long turn on",
        || calls(&dir, "calls-b").iter().any(|t| *t > taken_at),
    );
    // b serves a's agents meanwhile.
    b.post(
        &format!("/v1/agents/{on_a}/messages"),
        json!({"text": "during"}),
    )
    .unwrap();
    texts.push("during".into());
    b.wait_for("the answer during the cut", |b| {
        answered(b, &on_a, "during")
    });

    // a comes back: it finds its leases gone, gives its partitions up, and takes its share
    // again; nothing is lost or doubled.
    relay.restore();
    wait_balanced(&a, &b, PARTITIONS);
    b.post(
        &format!("/v1/agents/{on_a}/messages"),
        json!({"text": "after"}),
    )
    .unwrap();
    texts.push("after".into());
    b.wait_for("the answer after the cut", |b| answered(b, &on_a, "after"));
    once_each(&b, &on_a, &texts);
}
