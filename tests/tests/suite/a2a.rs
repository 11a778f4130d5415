//! agentd as an A2A 1.0 server, driven by the official SDK (`a2a-sdk`, pinned and installed by
//! `scripts/test.sh` into `target/.venv-a2a`) as the client: `tests/a2a/client.py` runs the
//! scenarios against a real agentd on both bindings (JSON-RPC and HTTP+JSON), with the embedded
//! store and with Redis across two agentd processes (a stream dropped on one is resubscribed on
//! the other). The test skips, saying so, only when the venv is missing: CI runs
//! `scripts/test.sh`, which always installs it.

use agentd_tests::AgentdProcess;
use agentd_tests::redis_server::RedisServer;
use std::path::PathBuf;
use std::process::Command;

const BINDINGS: [&str; 2] = ["JSONRPC", "HTTP+JSON"];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn python() -> Option<PathBuf> {
    let py = root().join("target/.venv-a2a/bin/python");
    py.exists().then_some(py)
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

/// Runs `scenarios` of the SDK client against `url` (and `url2` for a resubscription).
fn client(
    py: &PathBuf,
    scenarios: &[&str],
    url: &str,
    url2: Option<&str>,
    binding: &str,
    token: Option<&str>,
) {
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
    let redis = RedisServer::start();
    let redis_env = || {
        env(&[
            ("AGENTD__REDIS__URL", redis.url()),
            ("AGENTD__REDIS__PARTITIONS", "4".to_string()),
            ("AGENTD__REDIS__LEASE_MS", "1000".to_string()),
        ])
    };
    let a = AgentdProcess::start(&redis_env());
    let b = AgentdProcess::start(&redis_env());
    agentd_tests::process::wait_balanced(&a, &b, 4);
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
