//! Push notifications: once across a `kill -9` and a restart, within 2 s of each state change (also when another process reads first), across the death of one of two processes.

use super::*;

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
