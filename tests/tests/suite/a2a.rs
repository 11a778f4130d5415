//! agentd as an A2A 1.0 server, driven by the official SDK (`a2a-sdk`, pinned and installed by
//! `scripts/test.sh` into `target/.venv-a2a`) as the client: `tests/a2a/client.py` runs the
//! scenarios against a real agentd on both bindings (JSON-RPC and HTTP+JSON), with the embedded
//! store and with Redis across two agentd processes (a stream dropped on one is resubscribed on
//! the other). The test skips, saying so, only when the venv is missing: CI runs
//! `scripts/test.sh`, which always installs it.

use agentd_tests::AgentdProcess;
use agentd_tests::TestRedis;
use agentd_tests::a2a_remote::python;
use std::path::PathBuf;
use std::process::Command;

const BINDINGS: [&str; 2] = ["JSONRPC", "HTTP+JSON"];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn env(extra: &[(&'static str, String)]) -> Vec<(&'static str, String)> {
    let mut env = vec![
        ("AGENTD__A2A__EXPOSE", "research,lead".to_string()),
        (
            "AGENTD__MODEL__SCRIPT",
            root().join("tests/a2a/script.toml").display().to_string(),
        ),
    ];
    env.extend(extra.iter().cloned());
    env
}

/// Two agentd processes sharing `redis` (one server, or a cluster with `AGENTD_TEST_REDIS=cluster`;
/// 4 partitions, 1 s leases), once each owns two.
fn two_processes_on(redis: &TestRedis) -> (AgentdProcess, AgentdProcess) {
    let redis_env = || {
        let mut settings = redis.env();
        settings.extend([
            ("AGENTD__REDIS__PARTITIONS", "4".to_string()),
            ("AGENTD__REDIS__LEASE_MS", "1000".to_string()),
        ]);
        env(&settings)
    };
    let a = AgentdProcess::start(&redis_env());
    let b = AgentdProcess::start(&redis_env());
    agentd_tests::process::wait_balanced(&a, &b, 4);
    (a, b)
}

/// Runs `scenarios` of the SDK client against `url` (and `url2` for a resubscription).
fn client(
    py: &PathBuf,
    scenarios: &[&str],
    url: &str,
    url2: Option<&str>,
    binding: &str,
    token: Option<&str>,
) {
    client_with(py, scenarios, url, url2, binding, token, None);
}

/// [`client`] with a push notification receiver; answers the client's output.
fn client_with(
    py: &PathBuf,
    scenarios: &[&str],
    url: &str,
    url2: Option<&str>,
    binding: &str,
    token: Option<&str>,
    receiver: Option<&str>,
) -> String {
    let mut cmd = Command::new(py);
    cmd.arg(root().join("tests/a2a/client.py"))
        .args(scenarios)
        .args(["--url", url, "--binding", binding]);
    if let Some(u) = url2 {
        cmd.args(["--url2", u]);
    }
    if let Some(t) = token {
        cmd.args(["--token", t]);
    }
    if let Some(r) = receiver {
        cmd.args(["--receiver", r]);
    }
    let out = cmd.output().expect("run the A2A client");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "the A2A client failed ({binding}):\n{stdout}\n{stderr}"
    );
    for s in scenarios {
        assert!(
            stdout.contains(&format!("ok {s} ({binding})")),
            "{s} did not run: {stdout}"
        );
    }
    stdout.into_owned()
}

const ALL: [&str; 9] = [
    "discovery",
    "basics",
    "raw_errors",
    "cancel",
    "streaming",
    "resubscribe",
    "input_required",
    "agent_output",
    "discovery",
];

#[test]
fn the_sdk_client_works_against_agentd_with_the_embedded_store() {
    let Some(py) = python() else {
        eprintln!(
            "SKIPPED: the A2A SDK is not installed (target/.venv-a2a); `bash scripts/test.sh` installs it"
        );
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let p = AgentdProcess::start(&env(&[
        ("AGENTD__STORE__KIND", "embedded".to_string()),
        ("AGENTD__STORE__DATA_DIR", dir.path().display().to_string()),
    ]));
    for binding in BINDINGS {
        client(&py, &ALL, &p.url, None, binding, None);
    }
}

#[test]
fn the_sdk_client_needs_the_token_when_the_api_has_one() {
    let Some(py) = python() else {
        eprintln!("SKIPPED: the A2A SDK is not installed (target/.venv-a2a)");
        return;
    };
    let p = AgentdProcess::start(&env(&[
        ("AGENTD__STORE__KIND", "memory".to_string()),
        ("AGENTD__AUTH__TOKEN", "s3cret".to_string()),
    ]));
    for binding in BINDINGS {
        client(
            &py,
            &["discovery", "auth", "basics"],
            &p.url,
            None,
            binding,
            Some("s3cret"),
        );
    }
}

#[test]
fn the_sdk_client_works_across_two_agentd_processes_on_redis() {
    let Some(py) = python() else {
        eprintln!("SKIPPED: the A2A SDK is not installed (target/.venv-a2a)");
        return;
    };
    let redis = TestRedis::from_env();
    let (a, b) = two_processes_on(&redis);
    for binding in BINDINGS {
        // Each scenario's calls go to one process, its contexts live wherever their partition
        // is owned; a resubscription goes to the other process.
        client(&py, &ALL, &a.url, Some(&b.url), binding, None);
        client(
            &py,
            &["basics", "cancel", "resubscribe"],
            &b.url,
            Some(&a.url),
            binding,
            None,
        );
    }
}

/// A `research` root (an A2A context) that `p` owns.
fn context_owned_by(p: &AgentdProcess) -> String {
    let keys = agentd_store::Keys::new("agentd", 4);
    loop {
        let id = p.spawn_with(serde_json::json!({"agent_type": "research"}));
        if p.partitions_owned().contains(&keys.partition_of(&id)) {
            return id;
        }
    }
}

/// Every method works on whichever process receives it: for a context owned by each
/// process, messages go through one process and gets, lists, cancels (queued and running),
/// a subscription and the answer to a question through the other, on both bindings.
#[test]
fn every_method_works_on_a_process_that_does_not_own_the_context() {
    let Some(py) = python() else {
        eprintln!("SKIPPED: the A2A SDK is not installed (target/.venv-a2a)");
        return;
    };
    let redis = TestRedis::from_env();
    let (a, b) = two_processes_on(&redis);
    for binding in BINDINGS {
        let contexts = format!("{},{}", context_owned_by(&a), context_owned_by(&b));
        let mut cmd = Command::new(&py);
        cmd.arg(root().join("tests/a2a/client.py"))
            .arg("any_process")
            .args(["--url", &a.url, "--url2", &b.url, "--binding", binding])
            .args(["--contexts", &contexts]);
        let out = cmd.output().expect("run the A2A client");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && stdout.contains(&format!("ok any_process ({binding})")),
            "the A2A client failed ({binding}):\n{stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn idle_contexts_close_and_type_files_give_the_cards_skills() {
    let Some(py) = python() else {
        eprintln!("SKIPPED: the A2A SDK is not installed (target/.venv-a2a)");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let p = AgentdProcess::start(&env(&[
        ("AGENTD__STORE__KIND", "embedded".to_string()),
        ("AGENTD__STORE__DATA_DIR", dir.path().display().to_string()),
        ("AGENTD__A2A__EXPOSE", "research,scout".to_string()),
        ("AGENTD__A2A__CONTEXT_IDLE_CLOSE_MS", "1000".to_string()),
        (
            "AGENTD__AGENTS__DIR",
            root().join("tests/a2a/types").display().to_string(),
        ),
    ]));
    for binding in BINDINGS {
        client(&py, &["skills", "idle_close"], &p.url, None, binding, None);
    }
}

/// A notification as the receiver got it.
#[derive(Debug, Clone)]
struct Received {
    path: String,
    headers: Vec<(String, String)>,
    body: serde_json::Value,
    accepted: bool,
    /// When it arrived, ms since the epoch.
    at_ms: u64,
}

impl Received {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// A small webhook receiver: records every POST; answers 503 until `accept` is set, then 200.
struct Receiver {
    url: String,
    got: std::sync::Arc<std::sync::Mutex<Vec<Received>>>,
    accept: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl Receiver {
    fn start() -> Receiver {
        use std::io::{BufRead, BufReader, Read, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/hook", listener.local_addr().unwrap());
        let got = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let accept = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (g, a) = (got.clone(), accept.clone());
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(mut conn) = conn else { continue };
                let mut r = BufReader::new(conn.try_clone().unwrap());
                let mut line = String::new();
                if r.read_line(&mut line).is_err() {
                    continue;
                }
                let path = line.split_whitespace().nth(1).unwrap_or("").to_string();
                let mut headers = Vec::new();
                loop {
                    let mut h = String::new();
                    if r.read_line(&mut h).is_err() || h.trim().is_empty() {
                        break;
                    }
                    if let Some((k, v)) = h.trim().split_once(':') {
                        headers.push((k.trim().to_string(), v.trim().to_string()));
                    }
                }
                let len: usize = headers
                    .iter()
                    .find(|(k, _)| k.eq_ignore_ascii_case("content-length"))
                    .and_then(|(_, v)| v.parse().ok())
                    .unwrap_or(0);
                let mut body = vec![0; len];
                let _ = r.read_exact(&mut body);
                let accepted = a.load(std::sync::atomic::Ordering::SeqCst);
                g.lock().unwrap().push(Received {
                    path,
                    headers,
                    body: serde_json::from_slice(&body).unwrap_or_default(),
                    accepted,
                    at_ms: now_ms(),
                });
                let status = if accepted {
                    "200 OK"
                } else {
                    "503 Service Unavailable"
                };
                let _ = write!(
                    conn,
                    "HTTP/1.1 {status}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
                );
            }
        });
        Receiver { url, got, accept }
    }

    fn got(&self) -> Vec<Received> {
        self.got.lock().unwrap().clone()
    }

    /// The accepted notifications of task `id` in state `state`.
    fn accepted(&self, id: &str, state: &str) -> Vec<Received> {
        self.got()
            .into_iter()
            .filter(|r| {
                r.accepted
                    && r.body["task"]["id"] == id
                    && r.body["task"]["status"]["state"] == state
            })
            .collect()
    }
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

fn wait_until(what: &str, limit: std::time::Duration, cond: impl Fn() -> bool) {
    let start = std::time::Instant::now();
    while !cond() {
        assert!(start.elapsed() < limit, "timed out waiting for {what}");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

/// The task ids the push scenario printed.
fn pushed_tasks(out: &str) -> Vec<String> {
    out.lines()
        .filter_map(|l| l.strip_prefix("TASK "))
        .map(str::to_string)
        .collect()
}

/// Each task's completion reached the receiver once, with the config's token and
/// authentication and a stable id; nothing reached the deleted config once accepting.
/// Waits until `rx` has refused an attempt for each of `tasks`.
fn wait_refused(rx: &Receiver, tasks: &[String]) {
    wait_until(
        "refused attempts",
        std::time::Duration::from_secs(20),
        || {
            tasks.iter().all(|id| {
                rx.got()
                    .iter()
                    .any(|r| !r.accepted && r.body["task"]["id"] == id.as_str())
            })
        },
    );
}

/// Waits up to `secs` until `rx` has accepted the completion of each of `tasks`.
fn wait_completions(rx: &Receiver, tasks: &[String], secs: u64) {
    wait_until(
        "the notifications",
        std::time::Duration::from_secs(secs),
        || {
            tasks
                .iter()
                .all(|id| !rx.accepted(id, "TASK_STATE_COMPLETED").is_empty())
        },
    );
}

fn check_received(rx: &Receiver, tasks: &[String]) {
    for id in tasks {
        let done = rx.accepted(id, "TASK_STATE_COMPLETED");
        assert_eq!(done.len(), 1, "task {id}: {done:?}");
        let n = &done[0];
        assert_eq!(n.path, "/hook");
        assert_eq!(n.header("X-A2A-Notification-Token"), Some("tok-1"));
        assert_eq!(n.header("Authorization"), Some("Bearer cred-1"));
        assert!(n.header("Idempotency-Key").is_some(), "{n:?}");
        assert_eq!(
            n.body["task"]["artifacts"][0]["parts"][0]["text"],
            "slow done"
        );
    }
    let got = rx.got();
    assert!(
        !got.iter().any(|r| r.accepted && r.path.ends_with("/extra")),
        "a deleted config got a notification"
    );
    let mut keys: Vec<&str> = got
        .iter()
        .filter(|r| r.accepted)
        .filter_map(|r| r.header("Idempotency-Key"))
        .collect();
    let n = keys.len();
    keys.sort();
    keys.dedup();
    assert_eq!(keys.len(), n, "a notification was delivered twice");
}

#[test]
fn push_notifications_reach_their_receiver_once_across_a_kill_and_a_restart() {
    let Some(py) = python() else {
        eprintln!("SKIPPED: the A2A SDK is not installed (target/.venv-a2a)");
        return;
    };
    let rx = Receiver::start();
    let dir = tempfile::tempdir().unwrap();
    let embedded = || {
        env(&[
            ("AGENTD__STORE__KIND", "embedded".to_string()),
            ("AGENTD__STORE__DATA_DIR", dir.path().display().to_string()),
        ])
    };
    let p = AgentdProcess::start(&embedded());
    let mut tasks = Vec::new();
    for binding in BINDINGS {
        let out = client_with(&py, &["push"], &p.url, None, binding, None, Some(&rx.url));
        tasks.extend(pushed_tasks(&out));
    }
    assert_eq!(tasks.len(), 2);
    // The receiver refuses: the notifications wait in the outbox, retried (in order: the
    // completion waits behind the refused earlier states).
    wait_refused(&rx, &tasks);
    p.kill9();
    rx.accept.store(true, std::sync::atomic::Ordering::SeqCst);
    let p = AgentdProcess::start(&embedded());
    wait_completions(&rx, &tasks, 60);
    // Delivered ones are not sent again by a restarted agentd.
    p.stop();
    let p = AgentdProcess::start(&embedded());
    std::thread::sleep(std::time::Duration::from_secs(3));
    check_received(&rx, &tasks);
    drop(p);
}

/// Checks that each state the `push_prompt` scenario (its output `out`) leads to reached `rx`
/// within 2 s of happening: the end of each of its two lengthy turns (no status change between
/// them), and the second one's `WORKING`, which a `GetTask` read first. The thread's entries
/// (read through `p`) say when each turn started and answered.
fn check_prompt_notifications(rx: &Receiver, p: &AgentdProcess, out: &str) {
    let ctx = printed(out, "CONTEXT");
    let tasks = pushed_tasks(out);
    assert_eq!(tasks.len(), 2, "{out}");
    wait_completions(rx, &tasks, 40);
    let thread = p.get(&format!("/v1/agents/{ctx}/thread"));
    let at = |role: &str, text: &str| -> Vec<u64> {
        thread["entries"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["role"] == role && e["text"].as_str().unwrap_or("").contains(text))
            .map(|e| e["at_ms"].as_u64().unwrap())
            .collect()
    };
    let answered = at("assistant", "lengthy done");
    let second_started = at("user", "lengthy two");
    assert_eq!((answered.len(), second_started.len()), (2, 1), "{thread}");
    let arrived = |task: &str, state: &str| {
        let got = rx.accepted(task, state);
        assert_eq!(got.len(), 1, "{task} {state}: {:?}", rx.got());
        got[0].at_ms
    };
    let late = |what: &str, arrived: u64, happened: u64| {
        let late = arrived.saturating_sub(happened);
        eprintln!("{what}: at the receiver {late} ms after it happened");
        assert!(
            late < 2_000,
            "{what} reached the receiver {late} ms after it happened"
        );
    };
    late(
        "the first task's completion",
        arrived(&tasks[0], "TASK_STATE_COMPLETED"),
        answered[0],
    );
    late(
        "the second task's completion",
        arrived(&tasks[1], "TASK_STATE_COMPLETED"),
        answered[1],
    );
    late(
        "the second task's WORKING",
        arrived(&tasks[1], "TASK_STATE_WORKING"),
        second_started[0],
    );
}

/// Each state of a task reaches the receiver as it is reached, not at a later look (the turns
/// take 5 s, the deliverer's periodic look is every 15 s).
#[test]
fn push_notifications_leave_as_the_state_changes() {
    let Some(py) = python() else {
        eprintln!("SKIPPED: the A2A SDK is not installed (target/.venv-a2a)");
        return;
    };
    let rx = Receiver::start();
    rx.accept.store(true, std::sync::atomic::Ordering::SeqCst);
    let p = AgentdProcess::start(&env(&[("AGENTD__STORE__KIND", "memory".to_string())]));
    let out = client_with(
        &py,
        &["push_prompt"],
        &p.url,
        None,
        "JSONRPC",
        None,
        Some(&rx.url),
    );
    check_prompt_notifications(&rx, &p, &out);
}

/// [`push_notifications_leave_as_the_state_changes`] with two processes on Redis, the client
/// talking to the one that does not own the context: its `GetTask` reads the `WORKING` first,
/// and the owner, which delivers, must not wait for the turn's end to send it.
#[test]
fn push_notifications_leave_as_the_state_changes_when_another_process_reads_first() {
    let Some(py) = python() else {
        eprintln!("SKIPPED: the A2A SDK is not installed (target/.venv-a2a)");
        return;
    };
    let rx = Receiver::start();
    rx.accept.store(true, std::sync::atomic::Ordering::SeqCst);
    let redis = TestRedis::from_env();
    let (a, b) = two_processes_on(&redis);
    let ctx = context_owned_by(&a);
    let out = run_client(
        &py,
        &[
            "push_prompt",
            "--url",
            &b.url,
            "--binding",
            "HTTP+JSON",
            "--receiver",
            &rx.url,
            "--context",
            &ctx,
        ],
    );
    check_prompt_notifications(&rx, &b, &out);
}

#[test]
fn push_notifications_survive_the_death_of_one_of_two_processes_on_redis() {
    let Some(py) = python() else {
        eprintln!("SKIPPED: the A2A SDK is not installed (target/.venv-a2a)");
        return;
    };
    let rx = Receiver::start();
    let redis = TestRedis::from_env();
    let (a, b) = two_processes_on(&redis);
    let mut tasks = Vec::new();
    for (p, binding) in [
        (&a, "JSONRPC"),
        (&b, "HTTP+JSON"),
        (&a, "HTTP+JSON"),
        (&b, "JSONRPC"),
    ] {
        let out = client_with(&py, &["push"], &p.url, None, binding, None, Some(&rx.url));
        tasks.extend(pushed_tasks(&out));
    }
    wait_refused(&rx, &tasks);
    a.kill9();
    rx.accept.store(true, std::sync::atomic::Ordering::SeqCst);
    wait_completions(&rx, &tasks, 90);
    std::thread::sleep(std::time::Duration::from_secs(3));
    check_received(&rx, &tasks);
    drop(b);
}

/// A raw request to an A2A server: its status and its JSON body (`Null` when not JSON), with
/// `A2A-Version: 1.0` when `versioned`.
fn raw(method: &str, url: &str, versioned: bool, body: Option<&str>) -> (u16, serde_json::Value) {
    let mut req = ureq::request(method, url).set("Content-Type", "application/json");
    if versioned {
        req = req.set("A2A-Version", "1.0");
    }
    let res = match body {
        Some(b) => req.send_string(b),
        None => req.call(),
    };
    let r = match res {
        Ok(r) => r,
        Err(ureq::Error::Status(_, r)) => r,
        Err(e) => panic!("{method} {url}: {e}"),
    };
    let status = r.status();
    (status, r.into_json().unwrap_or(serde_json::Value::Null))
}

/// A request wrong in more than one way gets the error the SDK's own server gives it: the
/// JSON-RPC method and the params' types before the `A2A-Version` (which the TCK does not
/// send), the HTTP+JSON route before the version, the version before the body. Each request
/// goes to the SDK's server (`tests/a2a/remote.py`) and to agentd, which must answer alike.
#[test]
fn requests_wrong_in_several_ways_get_the_error_the_sdk_server_gives() {
    let Some(py) = python() else {
        eprintln!("SKIPPED: the A2A SDK is not installed (target/.venv-a2a)");
        return;
    };
    let p = AgentdProcess::start(&env(&[("AGENTD__STORE__KIND", "memory".to_string())]));
    let sdk = agentd_tests::a2a_remote::RemoteAgent::start(&py, false);
    let sdk_url = sdk.card_url().replace("/.well-known/agent-card.json", "");
    let agentd = format!("{}/a2a/research", p.url);
    // (body, with the version header, the code both must answer)
    let rpc: [(&str, bool, i64); 12] = [
        (
            r#"{"jsonrpc":"2.0","id":"3","method":"SendMessageXXX","params":{}}"#,
            false,
            -32601,
        ),
        (
            r#"{"jsonrpc":"2.0","id":1,"method":"nonexistent/method","params":{}}"#,
            false,
            -32601,
        ),
        (
            r#"{"jsonrpc":"2.0","id":2,"method":"Nope","params":[1]}"#,
            false,
            -32601,
        ),
        (
            r#"{"jsonrpc":"2.0","id":4,"method":"SendMessage","params":{"message":{"parts":"invalid"}}}"#,
            false,
            -32602,
        ),
        (
            r#"{"jsonrpc":"2.0","id":5,"method":"GetTask","params":{"id":12345}}"#,
            false,
            -32602,
        ),
        (
            r#"{"jsonrpc":"2.0","id":6,"method":"ListTasks","params":{"pageSize":"abc"}}"#,
            false,
            -32602,
        ),
        (
            r#"{"jsonrpc":"2.0","id":7,"method":"SendMessage","params":{"configuration":{"returnImmediately":"yes"}}}"#,
            false,
            -32602,
        ),
        (
            r#"{"jsonrpc":"2.0","id":8,"method":"GetTask","params":{"id":"x"}}"#,
            false,
            -32009,
        ),
        (
            r#"{"jsonrpc":"2.0","id":9,"method":"SendMessage","params":{"message":{"kind":"message"}}}"#,
            false,
            -32009,
        ),
        (
            r#"{"jsonrpc":"1.0","id":10,"method":"Nope"}"#,
            false,
            -32600,
        ),
        (r#"{nope"#, false, -32700),
        (
            r#"{"jsonrpc":"2.0","id":11,"method":"Nope","params":{}}"#,
            true,
            -32601,
        ),
    ];
    for (body, versioned, code) in rpc {
        let (_, theirs) = raw("POST", &format!("{sdk_url}/"), versioned, Some(body));
        let (status, ours) = raw("POST", &agentd, versioned, Some(body));
        assert_eq!(
            theirs["error"]["code"], code,
            "the SDK's server, {body}: {theirs}"
        );
        assert_eq!(status, 200, "{body}: {ours}");
        assert_eq!(ours["error"]["code"], code, "agentd, {body}: {ours}");
        assert_eq!(ours["id"], theirs["id"], "{body}");
    }
    let sdk_rest = agentd_tests::a2a_remote::RemoteAgent::start_with(
        &py,
        agentd_tests::a2a_remote::Options {
            rest: true,
            ..Default::default()
        },
    );
    let rest_url = sdk_rest
        .card_url()
        .replace("/.well-known/agent-card.json", "");
    // (HTTP method, path, with the version header, body, the status both must answer)
    let routes: [(&str, &str, bool, Option<&str>, u16); 5] = [
        ("GET", "/nope", false, None, 404),
        ("POST", "/tasks/x:nope", false, Some("{}"), 404),
        ("GET", "/tasks/x", false, None, 400),
        ("POST", "/message:send", false, Some("{nope"), 400),
        ("GET", "/tasks/x", true, None, 404),
    ];
    for (method, path, versioned, body, status) in routes {
        let (theirs, their_body) = raw(method, &format!("{rest_url}{path}"), versioned, body);
        let (ours, our_body) = raw(method, &format!("{agentd}{path}"), versioned, body);
        assert_eq!(
            theirs, status,
            "the SDK's server, {method} {path}: {their_body}"
        );
        assert_eq!(ours, status, "agentd, {method} {path}: {our_body}");
    }
    // An A2A error's HTTP status and reason, as the specification's table (5.4) of 1.0.1 and
    // the SDK give them: a completed task cannot be cancelled.
    let cancel_completed = |base: &str| {
        let send =
            r#"{"message":{"messageId":"m-1","role":"ROLE_USER","parts":[{"text":"hello"}]}}"#;
        let (status, sent) = raw("POST", &format!("{base}/message:send"), true, Some(send));
        assert_eq!(status, 200, "{base}: {sent}");
        assert_eq!(
            sent["task"]["status"]["state"], "TASK_STATE_COMPLETED",
            "{sent}"
        );
        let id = sent["task"]["id"].as_str().unwrap().to_string();
        raw(
            "POST",
            &format!("{base}/tasks/{id}:cancel"),
            true,
            Some("{}"),
        )
    };
    let (theirs, their_body) = cancel_completed(&rest_url);
    let (ours, our_body) = cancel_completed(&agentd);
    assert_eq!((theirs, ours), (400, 400), "{their_body} {our_body}");
    let reason = |b: &serde_json::Value| b["error"]["details"][0]["reason"].clone();
    assert_eq!(reason(&our_body), reason(&their_body), "{our_body}");
    assert_eq!(reason(&our_body), "TASK_NOT_CANCELABLE");
}

/// Runs the SDK client (`tests/a2a/client.py`) with `args`, which must succeed: its output.
fn run_client(py: &PathBuf, args: &[&str]) -> String {
    let out = Command::new(py)
        .arg(root().join("tests/a2a/client.py"))
        .args(args)
        .output()
        .expect("run the A2A client");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "the A2A client failed ({args:?}):\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// What the client printed after `<key> ` on a line of its own.
fn printed(out: &str, key: &str) -> String {
    out.lines()
        .find_map(|l| l.strip_prefix(&format!("{key} ")))
        .unwrap_or_else(|| panic!("no {key} in {out}"))
        .to_string()
}

/// A `contextId` the client chooses opens one context, even when its first messages reach two
/// processes at once, and every method on either process finds it under that id.
#[test]
fn a_context_the_client_chose_is_one_context_on_two_processes_on_redis() {
    let Some(py) = python() else {
        eprintln!("SKIPPED: the A2A SDK is not installed (target/.venv-a2a)");
        return;
    };
    let redis = TestRedis::from_env();
    let (a, b) = two_processes_on(&redis);
    for binding in BINDINGS {
        client(
            &py,
            &["client_context"],
            &a.url,
            Some(&b.url),
            binding,
            None,
        );
    }
}

/// A client-chosen `contextId` names the same context after a restart (embedded store), and
/// is free again once that context is deleted: the next message opens a new one.
#[test]
fn a_context_the_client_chose_outlives_a_restart_and_goes_with_its_agent() {
    let Some(py) = python() else {
        eprintln!("SKIPPED: the A2A SDK is not installed (target/.venv-a2a)");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let embedded = || {
        env(&[
            ("AGENTD__STORE__KIND", "embedded".to_string()),
            ("AGENTD__STORE__DATA_DIR", dir.path().display().to_string()),
        ])
    };
    let mut p = AgentdProcess::start(&embedded());
    for binding in BINDINGS {
        let out = client_with(&py, &["client_context"], &p.url, None, binding, None, None);
        let (cid, agent) = (printed(&out, "CONTEXT"), printed(&out, "AGENT"));
        p.stop();
        p = AgentdProcess::start(&embedded());
        let again = |p: &AgentdProcess| {
            run_client(
                &py,
                &[
                    "client_context_again",
                    "--url",
                    &p.url,
                    "--binding",
                    binding,
                    "--context",
                    &cid,
                ],
            )
        };
        let out = again(&p);
        assert_eq!(printed(&out, "AGENT"), agent, "{out}");
        // Three first messages, a question answered, a stream, and this one.
        assert_eq!(printed(&out, "TASKS"), "6", "{out}");
        ureq::delete(&format!("{}/v1/agents/{agent}", p.url))
            .call()
            .expect("delete the context");
        let out = again(&p);
        assert_ne!(printed(&out, "AGENT"), agent, "{out}");
        assert_eq!(printed(&out, "TASKS"), "1", "{out}");
    }
}

/// Deleting a context agent deletes its tasks with it (they live under its keys, docs/a2a.md):
/// a task found before the delete is not found after it, and its context lists none.
/// An A2A task is a run of door `a2a` under its context agent (the store's `Runs` concern),
/// and its completed state the run's outcome: the answer, the thread entries it is made of, the
/// tokens used — what the LangGraph and MCP doors read runs by.
#[test]
fn an_a2a_task_is_kept_as_a_run_of_its_context_with_its_outcome() {
    use agentd_actors::{RunOrigin, RunState, Runs, Threads};
    let dir = tempfile::tempdir().unwrap();
    let p = AgentdProcess::start(&env(&[
        ("AGENTD__STORE__KIND", "embedded".to_string()),
        ("AGENTD__STORE__DATA_DIR", dir.path().display().to_string()),
    ]));
    let base = format!("{}/a2a/research", p.url);
    let send = r#"{"message":{"messageId":"m-run","role":"ROLE_USER","parts":[{"text":"hello"}]}}"#;
    let (status, sent) = raw("POST", &format!("{base}/message:send"), true, Some(send));
    assert_eq!(status, 200, "{sent}");
    assert_eq!(
        sent["task"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{sent}"
    );
    let id = sent["task"]["id"].as_str().unwrap().to_string();
    let agent = id.split('.').next().unwrap().to_string();
    p.stop();

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let store = agentd_store::RedbStore::open(dir.path()).unwrap();
        let runs = store.runs(&agent).await.unwrap();
        assert_eq!(runs.len(), 1, "{runs:?}");
        let (run, outcome) = (&runs[0].run, runs[0].outcome.as_ref().expect("an outcome"));
        assert_eq!((run.id.as_str(), run.door.as_str()), (id.as_str(), "a2a"));
        assert_eq!(run.origin, RunOrigin::Door);
        assert_eq!(run.items.len(), 1);
        assert_eq!(run.fields["history"][0]["messageId"], "m-run");
        assert_eq!(outcome.state, RunState::Completed);
        assert_eq!(outcome.answer.as_deref(), Some("echo: hello"));
        let thread = store.thread(&agent).await.unwrap();
        let answered: Vec<_> = thread
            .iter()
            .filter(|e| outcome.answer_entries.contains(&e.id))
            .map(|e| e.text.as_str())
            .collect();
        assert_eq!(
            answered,
            ["echo: hello"],
            "the answer's entries in the thread"
        );
        assert!(outcome.usage.total() > 0, "{:?}", outcome.usage);
    });
}

#[test]
fn deleting_a_context_deletes_its_tasks() {
    let dir = tempfile::tempdir().unwrap();
    let p = AgentdProcess::start(&env(&[
        ("AGENTD__STORE__KIND", "embedded".to_string()),
        ("AGENTD__STORE__DATA_DIR", dir.path().display().to_string()),
    ]));
    let base = format!("{}/a2a/research", p.url);
    let send = r#"{"message":{"messageId":"m-del","role":"ROLE_USER","parts":[{"text":"hello"}]}}"#;
    let (status, sent) = raw("POST", &format!("{base}/message:send"), true, Some(send));
    assert_eq!(status, 200, "{sent}");
    let id = sent["task"]["id"].as_str().unwrap().to_string();
    let ctx = sent["task"]["contextId"].as_str().unwrap().to_string();
    let agent = id.split('.').next().unwrap().to_string();
    let listed = |p: &AgentdProcess| {
        let url = format!("{}/a2a/research/tasks?contextId={ctx}", p.url);
        let (status, body) = raw("GET", &url, true, None);
        assert_eq!(status, 200, "{body}");
        body["tasks"].as_array().map_or(0, Vec::len)
    };
    assert_eq!(raw("GET", &format!("{base}/tasks/{id}"), true, None).0, 200);
    assert_eq!(listed(&p), 1);
    ureq::delete(&format!("{}/v1/agents/{agent}", p.url))
        .call()
        .expect("delete the context");
    let (status, body) = raw("GET", &format!("{base}/tasks/{id}"), true, None);
    assert_eq!(status, 404, "the task went with its context: {body}");
    assert_eq!(listed(&p), 0, "the context lists no task");
}
