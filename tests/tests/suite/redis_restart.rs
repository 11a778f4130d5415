//! Redis restarts under agentd: a graceful restart (AOF, `appendfsync everysec`) and a `kill -9`
//! with `appendfsync always`, an outage longer than the partition leases, and connections cut
//! with `CLIENT KILL`. agentd reconnects by itself and every acknowledged message is in its
//! thread exactly once.

use agentd_tests::{AgentdProcess, RedisServer, eventually_blocking};
use serde_json::json;
use std::time::Duration;

const SCRIPT: &str = r#"
[[rule]]
text = "echo: {{input}}"
"#;

fn run(redis_args: &[&str], restart: impl Fn(&mut RedisServer)) {
    let mut redis = RedisServer::start_with(redis_args);
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("script.toml");
    std::fs::write(&script, SCRIPT).unwrap();
    let p = AgentdProcess::start(&[
        ("AGENTD__REDIS__URL", redis.url()),
        ("AGENTD__REDIS__PARTITIONS", "4".to_string()),
        ("AGENTD__REDIS__LEASE_MS", "1000".to_string()),
        ("AGENTD__MODEL__SCRIPT", script.display().to_string()),
        // The client sends a refused message again, counting on a refusal being a message
        // that did not land (a message gets no idempotency key yet): a request waits as long
        // as Redis takes, not `redis.request_wait_ms` (redis_failover.rs tests that bound).
        ("AGENTD__REDIS__REQUEST_WAIT_MS", "0".to_string()),
        (
            "RUST_LOG",
            std::env::var("AGENTD_TEST_LOG").unwrap_or_else(|_| "warn".into()),
        ),
    ]);
    let agents: Vec<String> = (0..3)
        .map(|_| {
            p.post("/v1/agents", json!({"agent_type": "subagent"}))
                .unwrap()["agent_id"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    let mut acknowledged: Vec<(String, String)> = Vec::new();
    let send = |n: usize, acknowledged: &mut Vec<(String, String)>| {
        let id = agents[n % agents.len()].clone();
        let text = format!("msg {n}");
        // A client retries until agentd acknowledges (202); refusals during the outage are fine.
        eventually_blocking(Duration::from_secs(30), "agentd to recover", || {
            p.post(&format!("/v1/agents/{id}/messages"), json!({"text": text}))
                .is_ok()
        });
        acknowledged.push((id, text));
    };
    for n in 0..15 {
        send(n, &mut acknowledged);
    }
    restart(&mut redis);
    for n in 15..30 {
        send(n, &mut acknowledged);
    }
    if std::env::var("AGENTD_TEST_LOG").is_ok() {
        std::thread::sleep(Duration::from_secs(5));
        for id in &agents {
            eprintln!(
                "DEBUG {id}: {} {:?}",
                p.get(&format!("/v1/agents/{id}")),
                p.texts(id)
            );
        }
    }
    for (id, text) in &acknowledged {
        p.wait_for(&format!("{text} answered"), |p| {
            p.texts(id).iter().any(|t| *t == format!("echo: {text}"))
        });
    }
    for id in &agents {
        let texts = p.texts(id);
        for (_, t) in acknowledged.iter().filter(|(i, _)| i == id) {
            assert_eq!(
                texts.iter().filter(|x| *x == t).count(),
                1,
                "{t}: {texts:?}"
            );
        }
    }
    p.wait_for("ready again", |p| {
        ureq::get(&format!("{}/readyz", p.url)).call().is_ok()
    });
}

#[test]
fn a_graceful_redis_restart_with_aof_everysec_loses_nothing() {
    run(
        &[
            "--save",
            "",
            "--appendonly",
            "yes",
            "--appendfsync",
            "everysec",
        ],
        |r| {
            r.stop();
            r.restart();
        },
    );
}

/// Redis with an append-only file fsynced on every write: a `kill -9` loses nothing.
const APPEND_FSYNC_ALWAYS: &[&str] = &[
    "--save",
    "",
    "--appendonly",
    "yes",
    "--appendfsync",
    "always",
];

#[test]
fn a_kill_9_of_redis_with_appendfsync_always_loses_nothing() {
    run(APPEND_FSYNC_ALWAYS, |r| {
        r.kill9();
        std::thread::sleep(Duration::from_millis(300));
        r.restart();
    });
}

#[test]
fn dropped_redis_connections_client_kill_lose_nothing() {
    run(&["--save", ""], |r| {
        // Every connection agentd holds is cut at once (the stream readers' blocking ones too).
        let mut con = r.client();
        let killed: i64 = redis::cmd("CLIENT")
            .arg("KILL")
            .arg("TYPE")
            .arg("normal")
            .arg("SKIPME")
            .arg("yes")
            .query(&mut con)
            .unwrap();
        assert!(killed > 0, "agentd's connections were cut");
    });
}

#[test]
fn a_redis_outage_longer_than_the_lease_loses_nothing() {
    run(APPEND_FSYNC_ALWAYS, |r| {
        // Longer than the lease (1 s): the leases expire, so agentd passivates its agents
        // (turns in flight included) and takes their partitions again; the acknowledged
        // work left in their durable inboxes must still run.
        r.kill9();
        std::thread::sleep(Duration::from_millis(2500));
        r.restart();
    });
}
