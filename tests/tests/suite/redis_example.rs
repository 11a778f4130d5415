//! The Python example of `docs/redis.md`, run as it is written against a real agentd on a
//! private redis-server, three times, as a user runs it again: each run reads only its own
//! replies and its own agent's events. It finds that Redis and agentd's namespace in the
//! variables agentd reads (`AGENTD__REDIS__URL`, `AGENTD__REDIS__NAMESPACE`), and without the
//! URL stops at once, saying so, instead of trying `localhost:6379`.

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
    // Not agentd's default namespace: the example must read it as agentd does.
    let env = [
        ("AGENTD__REDIS__URL", redis.url()),
        ("AGENTD__REDIS__NAMESPACE", "billing-ns".to_string()),
    ];
    let mut agentd_env = env.to_vec();
    agentd_env.push(("AGENTD__REDIS__PARTITIONS", "4".to_string()));
    let p = AgentdProcess::start(&agentd_env);
    let example = example();
    // `redis.Redis()` is localhost:6379, which may be anyone's: never run an example that could.
    assert!(
        !example.contains("redis.Redis()") && example.contains("AGENTD__REDIS__URL"),
        "the example reads agentd's Redis URL from AGENTD__REDIS__URL:\n{example}"
    );
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("example.py");
    std::fs::write(&file, &example).unwrap();
    let run_example = |env: &[(&str, String)]| {
        Command::new(python())
            .arg(&file)
            .env_remove("AGENTD__REDIS__URL")
            .env_remove("AGENTD__REDIS__NAMESPACE")
            .envs(env.iter().map(|(k, v)| (k, v)))
            .output()
            .unwrap()
    };
    let unset = run_example(&[]);
    let said = String::from_utf8_lossy(&unset.stderr);
    assert!(
        !unset.status.success() && said.contains("set AGENTD__REDIS__URL"),
        "without the URL: {said}"
    );
    let mut agents = Vec::new();
    for run in 1..=3 {
        let out = run_example(&env);
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
