//! The Python example of `docs/redis.md`, run as it is written (its Redis port aside) against
//! a real agentd on a private redis-server, twice, as a user runs it again: each run reads
//! only its own replies and its own agent's events.

use agentd_tests::{AgentdProcess, RedisServer};
use std::path::Path;
use std::process::Command;

/// A Python with the `redis` and `msgpack` modules (Debian's `python3-redis` and
/// `python3-msgpack`, which `scripts/test.sh` installs).
fn python() -> &'static str {
    ["/usr/bin/python3", "python3"]
        .into_iter()
        .find(|py| {
            Command::new(py)
                .args(["-c", "import redis, msgpack"])
                .status()
                .is_ok_and(|s| s.success())
        })
        .expect("python3 with the redis and msgpack modules (apt-get install python3-redis python3-msgpack)")
}

/// The first Python block of `docs/redis.md`.
fn example() -> String {
    let doc =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/redis.md"))
            .unwrap();
    let start = doc.find("```python\n").expect("a python block") + "```python\n".len();
    let end = start + doc[start..].find("```").unwrap();
    doc[start..end].to_string()
}

#[test]
fn the_python_example_of_the_command_stream_runs_again_and_again() {
    let redis = RedisServer::start();
    let p = AgentdProcess::start(&[
        ("AGENTD__REDIS__URL", redis.url()),
        ("AGENTD__REDIS__NAMESPACE", "agentd".to_string()),
        ("AGENTD__REDIS__PARTITIONS", "4".to_string()),
    ]);
    let example = example();
    let script = example.replace(
        "redis.Redis()",
        &format!("redis.Redis(port={})", redis.port),
    );
    assert_ne!(script, example, "the example connects with redis.Redis()");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("example.py");
    std::fs::write(&file, script).unwrap();
    let mut agents = Vec::new();
    for run in 1..=3 {
        let out = Command::new(python()).arg(&file).output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "run {run}:\n{stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let mut lines = stdout.lines();
        let (agent_id, _status) = lines.next().unwrap().split_once(' ').unwrap();
        assert_eq!(
            p.get(&format!("/v1/agents/{agent_id}"))["agent_type"],
            "lead",
            "run {run}: {stdout}"
        );
        let events: Vec<&str> = lines.collect();
        assert!(!events.is_empty(), "run {run}: {stdout}");
        assert!(
            events.iter().all(|e| e.contains(agent_id)),
            "run {run} shows only its agent's events: {stdout}"
        );
        agents.push(agent_id.to_string());
    }
    agents.dedup();
    assert_eq!(agents.len(), 3, "each run read the reply to its own spawn");
    p.stop();
}
