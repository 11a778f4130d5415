//! A service tool answered through Redis by the Python worker of the README, run as written
//! with Debian's `python3-redis` and `python3-msgpack` against a real redis-server, which it
//! finds as agentd does (`AGENTD__REDIS__URL`, `AGENTD__REDIS__NAMESPACE`; without the URL it
//! stops at once, saying so, and connects to no Redis nobody named): the call reaches the worker on `<ns>:tools:lookup_order`, its answer on
//! `<ns>:tool_replies` reaches the agent, a worker's error with its own code reaches the model
//! as a tool error, and a second answer to the same call is ignored without a dead letter.
//! The worker is at least once: killed after it read a call and before it answered, it answers
//! that call once when it starts again (and once only, when the call reaches it twice), another
//! worker takes over a dead one's call, and it may start on a Redis where agentd never ran.
//! Gated calls of the same tool are decided by the command `approve_tool` written to
//! `<ns>:commands` as a plain MessagePack map: the approved call is published to the workers'
//! stream, the rejected one never is and its reason reaches the model.

use agentd_tests::scripted_files::{lookup_order, scripted_deployment};
use agentd_tests::{AgentdProcess, RedisServer, eventually_blocking};
use serde_json::{Value, json};
use std::path::Path;
use std::process::{Child, Command};
use std::time::Duration;

/// A Python with the `redis` and `msgpack` modules (`scripts/test.sh` installs them).
fn python() -> &'static str {
    ["/usr/bin/python3", "python3"]
        .into_iter()
        .find(|py| {
            Command::new(py)
                .args(["-c", "import redis, msgpack"])
                .status()
                .is_ok_and(|s| s.success())
        })
        .expect("python3 with the redis and msgpack modules (run scripts/test.sh)")
}

/// The README's Python block. It never connects to a Redis nobody named (`redis.Redis()` is
/// `localhost:6379`, which may be anyone's): the test refuses to run one that could.
fn worker_source() -> String {
    let doc = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../README.md"))
        .unwrap();
    let start = doc.find("```python\n").expect("a python block") + "```python\n".len();
    let end = start + doc[start..].find("```").unwrap();
    let source = doc[start..end].to_string();
    assert!(
        !source.contains("redis.Redis()") && source.contains("AGENTD__REDIS__URL"),
        "the worker reads agentd's Redis URL from AGENTD__REDIS__URL:\n{source}"
    );
    source
}

/// The variables that tell the worker where agentd's Redis and streams are: `redis` (as
/// `user`, password `pw`, if given) and `namespace`.
fn redis_env(redis: &RedisServer, user: Option<&str>, namespace: &str) -> Vec<(String, String)> {
    let url = match user {
        None => redis.url(),
        Some(user) => format!("redis://{user}:pw@127.0.0.1:{}/", redis.port),
    };
    vec![
        ("AGENTD__REDIS__URL".to_string(), url),
        (
            "AGENTD__REDIS__NAMESPACE".to_string(),
            namespace.to_string(),
        ),
    ]
}

struct Worker(Child);

impl Worker {
    /// Runs the README's worker with `edits` (`(as written, as run)`, each of which must
    /// apply) from a file in `dir` with the variables `env` (and no other `AGENTD_…`), its
    /// standard error to `stderr` if given.
    fn start(
        dir: &Path,
        name: &str,
        edits: &[(&str, &str)],
        env: &[(String, String)],
        stderr: Option<&Path>,
    ) -> Worker {
        let mut script = worker_source();
        for (from, to) in edits {
            assert!(script.contains(from), "the worker has `{from}`");
            script = script.replace(from, to);
        }
        let file = dir.join(format!("{name}.py"));
        std::fs::write(&file, script).unwrap();
        let mut cmd = Command::new(python());
        cmd.arg(&file)
            .env_remove("AGENTD__REDIS__URL")
            .env_remove("AGENTD__REDIS__NAMESPACE")
            .envs(env.iter().map(|(k, v)| (k, v)));
        if let Some(path) = stderr {
            cmd.stderr(std::fs::File::create(path).unwrap());
        }
        Worker(cmd.spawn().unwrap())
    }

    /// Waits up to 20 s for the worker to exit by itself.
    fn wait_for_exit(&mut self) {
        eventually_blocking(Duration::from_secs(20), "the worker to die", || {
            self.0.try_wait().unwrap().is_some()
        });
    }

    fn running(&mut self) -> bool {
        self.0.try_wait().unwrap().is_none()
    }
}

/// A Redis user that may do anything but `XADD`: a worker connected as it reads a call and dies
/// (`NOPERM`) when it answers, after it read the call and before it answered.
fn user_that_cannot_answer(con: &mut redis::Connection) {
    let _: () = redis::cmd("ACL")
        .arg("SETUSER")
        .arg("mute")
        .arg("on")
        .arg(">pw")
        .arg("~*")
        .arg("&*")
        .arg("+@all")
        .arg("-xadd")
        .query(con)
        .unwrap();
}

/// How many calls of the workers' group are taken and not acknowledged.
fn workers_pending(con: &mut redis::Connection) -> i64 {
    let summary: Vec<redis::Value> = redis::cmd("XPENDING")
        .arg("agentd:tools:lookup_order")
        .arg("workers")
        .query(con)
        .unwrap();
    match summary.first() {
        Some(redis::Value::Int(n)) => *n,
        other => panic!("XPENDING answered {other:?}"),
    }
}

/// The answers on `agentd:tool_replies` to call `call_id`.
fn replies_to(con: &mut redis::Connection, call_id: &str) -> usize {
    stream(con, "agentd:tool_replies")
        .iter()
        .filter(|r| r["correlation_id"] == call_id)
        .count()
}

/// Spawns a clerk for order A-1 and waits until a worker killed by its answer took its call:
/// `(agent id, call id)`, the call pending in the workers' group.
fn a_call_taken_by_a_worker_that_died(
    p: &AgentdProcess,
    redis: &RedisServer,
    dir: &Path,
) -> (String, String) {
    let mut con = redis.client();
    user_that_cannot_answer(&mut con);
    let log = dir.join("mute.err");
    let mut mute = Worker::start(
        dir,
        "mute",
        &[],
        &redis_env(redis, Some("mute"), "agentd"),
        Some(&log),
    );
    let clerk = p.spawn("clerk", "order A-1");
    mute.wait_for_exit();
    let died = std::fs::read_to_string(&log).unwrap();
    assert!(
        died.contains("NoPermissionError"),
        "it died answering: {died}"
    );
    let pending = p.get("/v1/tool_calls?status=pending")["tool_calls"].clone();
    assert_eq!(pending.as_array().unwrap().len(), 1, "{pending:#}");
    assert_eq!(pending[0]["agent_id"], clerk.as_str());
    let call_id = pending[0]["call_id"].as_str().unwrap().to_string();
    assert_eq!(workers_pending(&mut con), 1, "the call it took is pending");
    assert_eq!(replies_to(&mut con, &call_id), 0);
    assert_eq!(p.status(&clerk), "waiting_tool");
    (clerk, call_id)
}

fn answered(p: &AgentdProcess, clerk: &str) -> bool {
    p.texts(clerk).iter().any(|t| t.starts_with("Result: "))
}

#[test]
fn the_readme_s_worker_answers_the_call_it_took_before_it_was_killed_once() {
    let redis = RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    let p = AgentdProcess::start(&config(dir.path(), &redis, "never"));
    let (clerk, call_id) = a_call_taken_by_a_worker_that_died(&p, &redis, dir.path());

    // The same worker starts again: it reads its own pending call first and answers it.
    let mut worker = Worker::start(
        dir.path(),
        "worker",
        &[],
        &redis_env(&redis, None, "agentd"),
        None,
    );
    p.wait_for("the answer to the call taken before", |p| {
        answered(p, &clerk)
    });
    let mut con = redis.client();
    p.wait_for("the call acknowledged", |_| {
        workers_pending(&mut redis.client()) == 0
    });
    assert_eq!(replies_to(&mut con, &call_id), 1);
    let texts = p.texts(&clerk);
    assert_eq!(
        texts.iter().filter(|t| t.starts_with("Result: ")).count(),
        1,
        "{texts:#?}"
    );

    // The same call reaches the worker again (agentd appends a call again when the turn that
    // stored it runs again after a crash): it is not answered twice.
    let calls: redis::streams::StreamRangeReply = redis::cmd("XRANGE")
        .arg("agentd:tools:lookup_order")
        .arg("-")
        .arg("+")
        .query(&mut con)
        .unwrap();
    assert_eq!(calls.ids.len(), 1);
    let again: String = redis::cmd("XADD")
        .arg("agentd:tools:lookup_order")
        .arg("*")
        .arg("m")
        .arg(calls.ids[0].get::<Vec<u8>>("m").unwrap())
        .query(&mut con)
        .unwrap();
    p.wait_for("the call read again and acknowledged", |_| {
        let mut con = redis.client();
        let groups: redis::streams::StreamInfoGroupsReply = redis::cmd("XINFO")
            .arg("GROUPS")
            .arg("agentd:tools:lookup_order")
            .query(&mut con)
            .unwrap();
        groups.groups[0].last_delivered_id == again && workers_pending(&mut con) == 0
    });
    assert!(worker.running(), "the worker took the call again");
    assert_eq!(replies_to(&mut con, &call_id), 1, "answered once");
    p.stop();
}

#[test]
fn another_worker_takes_over_the_call_of_a_worker_that_died() {
    let redis = RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    let p = AgentdProcess::start(&config(dir.path(), &redis, "never"));
    let (clerk, call_id) = a_call_taken_by_a_worker_that_died(&p, &redis, dir.path());

    // worker-2 (not the worker that died, which never comes back) claims the call once it has
    // been pending for its claim time.
    let _other = Worker::start(
        dir.path(),
        "worker-2",
        &[
            ("\"worker-1\"", "\"worker-2\""),
            ("CLAIM_AFTER_MS = 60_000", "CLAIM_AFTER_MS = 500"),
        ],
        &redis_env(&redis, None, "agentd"),
        None,
    );
    p.wait_for("the dead worker's call answered", |p| answered(p, &clerk));
    p.wait_for("the call acknowledged", |_| {
        workers_pending(&mut redis.client()) == 0
    });
    assert_eq!(replies_to(&mut redis.client(), &call_id), 1);
    p.stop();
}

#[test]
fn the_readme_s_worker_may_start_on_a_redis_where_agentd_never_ran() {
    let redis = RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    let mut worker = Worker::start(
        dir.path(),
        "worker",
        &[],
        &redis_env(&redis, None, "agentd"),
        None,
    );
    // It made the stream and the group, and waits for calls (a blocking read lasts 1 s).
    let group_made = |con: &mut redis::Connection| {
        redis::cmd("XINFO")
            .arg("GROUPS")
            .arg("agentd:tools:lookup_order")
            .query::<redis::streams::StreamInfoGroupsReply>(con)
            .is_ok_and(|g| g.groups.iter().any(|g| g.name == "workers"))
    };
    eventually_blocking(Duration::from_secs(20), "the worker's group", || {
        let made = group_made(&mut redis.client());
        assert!(
            made || worker.running(),
            "the worker died on a Redis without the group"
        );
        made
    });
    std::thread::sleep(std::time::Duration::from_millis(1_500));
    assert!(worker.running(), "the worker waits for calls");

    let p = AgentdProcess::start(&config(dir.path(), &redis, "never"));
    let clerk = p.spawn("clerk", "order A-1");
    p.wait_for("the worker's answer", |p| answered(p, &clerk));
    p.stop();
}

impl Drop for Worker {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn config(dir: &Path, redis: &RedisServer, approval: &str) -> Vec<(&'static str, String)> {
    config_in(dir, redis, approval, "agentd")
}

/// [`config`] with the namespace `namespace`.
fn config_in(
    dir: &Path,
    redis: &RedisServer,
    approval: &str,
    namespace: &str,
) -> Vec<(&'static str, String)> {
    let clerk = "name = \"clerk\"\ntitle = \"Clerk\"\ntools = [\"lookup_order\"]\n";
    let settings = lookup_order(60_000, approval);
    let mut env = scripted_deployment(dir, &[("clerk", clerk)], SCRIPT, &settings);
    env.extend([
        ("AGENTD__REDIS__URL", redis.url()),
        ("AGENTD__REDIS__NAMESPACE", namespace.to_string()),
        ("AGENTD__REDIS__PARTITIONS", "4".to_string()),
    ]);
    env
}

/// The clerk looks up the order its message names.
const SCRIPT: &str = r#"
[[rule]]
agent = "clerk"
role = "user"
contains = "order"
text = "looking it up"
[[rule.tool_calls]]
name = "lookup_order"
arguments = { order_id = "{{input}}" }

[[rule]]
agent = "clerk"
role = "tool"
text = "Result: {{input}}"
"#;

#[test]
fn the_readme_s_python_worker_answers_a_service_tool_through_redis() {
    let redis = RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    // Not the default namespace: the worker finds the streams from AGENTD__REDIS__NAMESPACE.
    let p = AgentdProcess::start(&config_in(dir.path(), &redis, "never", "shop"));
    // Without the URL the worker says what to set and stops, connecting to nothing.
    let log = dir.path().join("unset.err");
    let mut unset = Worker::start(dir.path(), "unset", &[], &[], Some(&log));
    unset.wait_for_exit();
    let said = std::fs::read_to_string(&log).unwrap();
    assert!(
        said.contains("set AGENTD__REDIS__URL") && !unset.0.wait().unwrap().success(),
        "{said}"
    );
    // The worker starts before any call: agentd created the stream and its group.
    let _worker = Worker::start(
        dir.path(),
        "worker",
        &[],
        &redis_env(&redis, None, "shop"),
        None,
    );

    let spawn = |order: &str| p.spawn("clerk", &format!("order {order}"));
    // The scripted rule passes the whole message as the order id.
    let found = spawn("A-1");
    let missing = spawn("Z-9");
    let ok = |p: &AgentdProcess, id: &str| p.texts(id).iter().any(|t| t.starts_with("Result: "));
    p.wait_for("both answers", |p| ok(p, &found) && ok(p, &missing));
    let found_texts = p.texts(&found);
    assert!(
        found_texts.iter().any(|t| t == r#"{"status":"shipped"}"#)
            || found_texts.iter().any(|t| t.contains("no such order")),
        "{found_texts:#?}"
    );
    let missing_texts = p.texts(&missing);
    let error = missing_texts
        .iter()
        .find(|t| t.contains("no such order"))
        .unwrap_or_else(|| panic!("{missing_texts:#?}"));
    let error: Value = serde_json::from_str(error).unwrap();
    assert_eq!(error["error"]["code"], "tool_failed");
    assert_eq!(error["error"]["tool_code"], "E404");

    // A second answer to an answered call (delivery is at least once) changes nothing and is
    // no dead letter.
    let client = redis::Client::open(redis.url()).unwrap();
    let mut con = client.get_connection().unwrap();
    let thread = p.get(&format!("/v1/agents/{found}/thread"));
    let call_id = thread["entries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["role"] == "tool")
        .map(|e| e["id"].as_str().unwrap().to_string())
        .unwrap();
    let reply = json!({
        "v": 1, "id": uuid::Uuid::now_v7().to_string(), "correlation_id": call_id,
        "from": {"type": "external", "name": "orders"}, "to": {"type": "system"},
        "sent_at": 1, "item": {"kind": "reply", "result": {"status": "lost"}},
    });
    let bytes = rmp_serde::to_vec_named(&reply).unwrap();
    let _: String = redis::cmd("XADD")
        .arg("shop:tool_replies")
        .arg("*")
        .arg("m")
        .arg(bytes)
        .query(&mut con)
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(800));
    let dead: u64 = redis::cmd("XLEN").arg("shop:dead").query(&mut con).unwrap();
    assert_eq!(dead, 0, "no dead letters");
    let pending: Value = p.get("/v1/tool_calls");
    assert_eq!(pending["tool_calls"], json!([]));
    assert_eq!(
        p.texts(&found),
        found_texts,
        "the second answer changed nothing"
    );
    p.stop();
}

/// Every entry of stream `key`, oldest first, decoded from its MessagePack field `m`.
fn stream(con: &mut redis::Connection, key: &str) -> Vec<Value> {
    let reply: redis::streams::StreamRangeReply = redis::cmd("XRANGE")
        .arg(key)
        .arg("-")
        .arg("+")
        .query(con)
        .unwrap();
    reply
        .ids
        .iter()
        .filter_map(|id| id.get::<Vec<u8>>("m"))
        .map(|m| rmp_serde::from_slice(&m).unwrap())
        .collect()
}

/// Writes the command `approve_tool` as a plain MessagePack map (as a service in any language
/// would) and answers its reply's item, read from `ops:replies`.
fn approve_tool(
    con: &mut redis::Connection,
    agent_id: &str,
    call_id: &str,
    approve: bool,
    reason: &str,
) -> Value {
    let id = uuid::Uuid::now_v7().to_string();
    let command = json!({
        "v": 1, "id": id, "from": {"type": "external", "name": "ops"}, "to": {"type": "system"},
        "reply_to": "ops:replies", "sent_at": 1,
        "item": {"kind": "command", "type": "approve_tool", "agent_id": agent_id,
                 "call_id": call_id, "approve": approve, "reason": reason},
    });
    let _: String = redis::cmd("XADD")
        .arg("agentd:commands")
        .arg("*")
        .arg("m")
        .arg(rmp_serde::to_vec_named(&command).unwrap())
        .query(con)
        .unwrap();
    eventually_blocking(Duration::from_secs(15), "a reply to approve_tool", || {
        stream(con, "ops:replies")
            .into_iter()
            .find(|r| r["causation_id"] == id.as_str())
            .map(|reply| reply["item"].clone())
    })
}

#[test]
fn the_command_approve_tool_decides_gated_calls_through_redis() {
    let redis = RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    let p = AgentdProcess::start(&config(dir.path(), &redis, "always"));
    let spawn = |order: &str| p.spawn("clerk", &format!("order {order}"));
    let approved = spawn("A-1");
    let rejected = spawn("B-2");
    let gated = |p: &AgentdProcess| -> Vec<Value> {
        p.get("/v1/tool_calls?status=awaiting_approval")["tool_calls"]
            .as_array()
            .unwrap()
            .clone()
    };
    p.wait_for("both calls at the gate", |p| gated(p).len() == 2);
    let call_of = |agent: &str| -> String {
        gated(&p)
            .iter()
            .find(|c| c["agent_id"] == agent)
            .map(|c| c["call_id"].as_str().unwrap().to_string())
            .unwrap()
    };
    let (yes, no) = (call_of(&approved), call_of(&rejected));
    let mut con = redis.client();
    assert!(
        stream(&mut con, "agentd:tools:lookup_order").is_empty(),
        "nothing reaches the workers before a decision"
    );

    let reply = approve_tool(&mut con, &approved, &yes, true, "looks fine");
    assert_eq!(
        reply["result"],
        json!({"call_id": yes, "decision": "approved"}),
        "{reply}"
    );
    let reply = approve_tool(&mut con, &rejected, &no, false, "not this customer");
    assert_eq!(
        reply["result"],
        json!({"call_id": no, "decision": "rejected"}),
        "{reply}"
    );
    // A second decision is refused.
    let reply = approve_tool(&mut con, &approved, &yes, false, "too late");
    assert_eq!(reply["error"]["code"], "tool_call_closed", "{reply}");

    // Approved: published to the workers, the agent waits for the answer.
    p.wait_for("the approved call waits for its answer", |p| {
        p.status(&approved) == "waiting_tool"
    });
    p.wait_for("the approved call published", |_| {
        !stream(&mut redis.client(), "agentd:tools:lookup_order").is_empty()
    });
    // Rejected: the reason reaches the model, the call never reaches a worker.
    p.wait_for("the rejection's tool error", |p| {
        p.texts(&rejected)
            .iter()
            .any(|t| t.starts_with("Result: ") && t.contains("not this customer"))
    });
    let published = stream(&mut con, "agentd:tools:lookup_order");
    assert_eq!(published.len(), 1, "{published:#?}");
    assert_eq!(published[0]["item"]["call_id"], yes.as_str());
    assert_eq!(
        published[0]["item"]["arguments"],
        json!({"order_id": "order A-1"})
    );
    let pending = p.get("/v1/tool_calls?status=pending")["tool_calls"].clone();
    assert_eq!(pending.as_array().unwrap().len(), 1, "{pending:#}");
    assert_eq!(pending[0]["call_id"], yes.as_str());
    // Each decision is an event on `<ns>:events`.
    let decided = decided_events(&mut con);
    assert_eq!(
        decided,
        vec![
            json!({"type": "tool_call_decided", "agent_id": approved, "call_id": yes, "tool": "lookup_order", "decision": "approved"}),
            json!({"type": "tool_call_decided", "agent_id": rejected, "call_id": no, "tool": "lookup_order", "decision": "rejected"}),
        ]
    );
    p.stop();
}

/// The `tool_call_decided` events on `agentd:events`, oldest first.
fn decided_events(con: &mut redis::Connection) -> Vec<Value> {
    let reply: redis::streams::StreamRangeReply = redis::cmd("XRANGE")
        .arg("agentd:events")
        .arg("-")
        .arg("+")
        .query(con)
        .unwrap();
    reply
        .ids
        .iter()
        .filter(|id| id.get::<String>("type").as_deref() == Some("tool_call_decided"))
        .filter_map(|id| id.get::<Vec<u8>>("e"))
        .map(|e| rmp_serde::from_slice(&e).unwrap())
        .collect()
}
