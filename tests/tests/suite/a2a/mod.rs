//! agentd as an A2A 1.0 server, driven by the official SDK (`a2a-sdk`, pinned and installed by
//! `scripts/test.sh` into `target/.venv-a2a`) as the client: `tests/a2a/client.py` runs the
//! scenarios against a real agentd on both bindings (JSON-RPC and HTTP+JSON), with the embedded
//! store and with Redis across two agentd processes (a stream dropped on one is resubscribed on
//! the other). The test skips, saying so, only when the venv is missing: CI runs
//! `scripts/test.sh`, which always installs it.
//!
//! | module | what it tests |
//! |---|---|
//! | `sdk` | The official SDK's client scenarios on both bindings (embedded store, a token, two processes on Redis, every method through a process that does not own the context), cards, and requests wrong in several ways answered as the SDK's own server answers them. |
//! | `push` | Push notifications: once across a `kill -9` and a restart, within 2 s of each state change (also when another process reads first), across the death of one of two processes. |
//! | `contexts` | Contexts and their tasks in the store: a `contextId` the client chose (on two processes, across a restart, gone with its agent), a task kept as a run with its outcome, tasks deleted with their context. |

mod contexts;
mod push;
mod sdk;

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
