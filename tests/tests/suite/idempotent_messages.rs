//! Idempotent messages (`Idempotency-Key` on `POST /v1/agents/{id}/messages`, `idempotency_key`
//! in a `send` command): a retry with the same key answers what the first attempt did and the
//! message is queued once — however many messages came between (retention is by time, not a
//! count of recent ids), across processes and across a restart; the same key with another text
//! is `idempotency_key_reused`.

use agentd_proto::codec::encode_envelope;
use agentd_proto::{Address, Command, Envelope, Item};
use agentd_tests::scripted_files::embedded_store;
use agentd_tests::{AgentdProcess, TestRedis, eventually_blocking};
use serde_json::json;
use std::time::Duration;

/// The environment of a process whose model echoes (`echo: …`), its script in `dir`.
fn echoing(dir: &std::path::Path) -> Vec<(&'static str, String)> {
    let script = dir.join("script.toml");
    std::fs::write(&script, "[[rule]]\ntext = \"echo: {{input}}\"\n").unwrap();
    vec![("AGENTD__MODEL__SCRIPT", script.display().to_string())]
}

/// How many entries of `id`'s thread have text `text`.
fn count(p: &AgentdProcess, id: &str, text: &str) -> usize {
    p.texts(id).iter().filter(|t| *t == text).count()
}

/// Sends `text` to `id` unkeyed and waits for its echo: everything sent before is handled.
fn settle(p: &AgentdProcess, id: &str, text: &str) {
    p.post(&format!("/v1/agents/{id}/messages"), json!({"text": text}))
        .unwrap();
    p.wait_for(&format!("the echo of {text}"), |p| {
        p.texts(id).contains(&format!("echo: {text}"))
    });
}

/// On Redis, with a de-duplication window of two ids: a keyed message retried after five others
/// is still queued once, on whichever process the retry reaches; the same key with another
/// text is refused, and a key is the agent's own.
#[test]
fn a_keyed_message_is_queued_once_however_many_messages_came_between() {
    let dir = tempfile::tempdir().unwrap();
    let redis = TestRedis::from_env();
    let env = || {
        let mut env = echoing(dir.path());
        env.extend(redis.env());
        env.extend([
            ("AGENTD__REDIS__PARTITIONS", "4".to_string()),
            ("AGENTD__REDIS__DEDUP_WINDOW", "2".to_string()),
        ]);
        env
    };
    let a = AgentdProcess::start(&env());
    let b = AgentdProcess::start(&env());
    let root = a.spawn("subagent", "hello");
    let other = a.spawn("subagent", "hello");
    let messages = format!("/v1/agents/{root}/messages");
    let body = json!({"text": "order 42 shipped"});
    let first = a.post_keyed(&messages, "order-42", body.clone()).unwrap();
    assert_eq!(first["status"], "sent");
    for n in 0..5 {
        settle(&a, &root, &format!("between {n}"));
    }
    for p in [&a, &b] {
        let again = p.post_keyed(&messages, "order-42", body.clone()).unwrap();
        assert_eq!(again["status"], first["status"]);
    }
    let reused = a.post_keyed(&messages, "order-42", json!({"text": "order 43 shipped"}));
    assert_eq!(
        reused
            .as_ref()
            .map_err(|(status, body)| (*status, body["code"].clone())),
        Err((422, json!("idempotency_key_reused"))),
        "{reused:?}"
    );
    // Another agent's key of the same name is its own.
    a.post_keyed(
        &format!("/v1/agents/{other}/messages"),
        "order-42",
        json!({"text": "order 43 shipped"}),
    )
    .unwrap();
    settle(&a, &root, "last");
    assert_eq!(
        count(&a, &root, "order 42 shipped"),
        1,
        "{:?}",
        a.texts(&root)
    );
    assert_eq!(count(&a, &root, "echo: order 42 shipped"), 1);
    assert_eq!(count(&a, &root, "order 43 shipped"), 0);
    settle(&a, &other, "last");
    assert_eq!(count(&a, &other, "order 43 shipped"), 1);
}

/// On the embedded store, a key outlives a restart.
#[test]
fn a_keyed_message_retried_after_a_restart_is_queued_once() {
    let dir = tempfile::tempdir().unwrap();
    let mut env = echoing(dir.path());
    env.push(embedded_store(dir.path()));
    let a = AgentdProcess::start(&env);
    let root = a.spawn("subagent", "hello");
    let messages = format!("/v1/agents/{root}/messages");
    let body = json!({"text": "order 42 shipped"});
    a.post_keyed(&messages, "order-42", body.clone()).unwrap();
    settle(&a, &root, "before");
    a.stop();
    let b = AgentdProcess::start(&env);
    b.post_keyed(&messages, "order-42", body).unwrap();
    settle(&b, &root, "after");
    assert_eq!(
        count(&b, &root, "order 42 shipped"),
        1,
        "{:?}",
        b.texts(&root)
    );
}

/// A `send` command with an `idempotency_key`, written twice (two envelopes, as a service that
/// retries writes them), is queued once.
#[test]
fn a_send_command_with_a_key_written_twice_is_queued_once() {
    let dir = tempfile::tempdir().unwrap();
    let redis = TestRedis::from_env();
    let mut env = echoing(dir.path());
    env.extend(redis.env());
    let p = AgentdProcess::start(&env);
    let root = p.spawn("subagent", "hello");
    let mut con = redis.client();
    for _ in 0..2 {
        let send = Envelope::new(
            Address::External {
                name: "billing".into(),
            },
            Address::System,
            Item::Command(Command::Send {
                agent_id: root.clone(),
                text: "invoice 7 paid".into(),
                interrupt: false,
                idempotency_key: Some("invoice-7".into()),
            }),
            1,
        );
        let _: String = redis::cmd("XADD")
            .arg("agentd:commands")
            .arg("*")
            .arg("m")
            .arg(encode_envelope(&send).unwrap())
            .query(&mut con)
            .unwrap();
    }
    eventually_blocking(Duration::from_secs(20), "both commands run", || {
        let pending: redis::streams::StreamPendingReply = redis::cmd("XPENDING")
            .arg("agentd:commands")
            .arg("agentd")
            .query(&mut con)
            .unwrap();
        let length: usize = redis::cmd("XLEN")
            .arg("agentd:commands")
            .query(&mut con)
            .unwrap();
        length == 2 && pending.count() == 0
    });
    settle(&p, &root, "last");
    assert_eq!(
        count(&p, &root, "invoice 7 paid"),
        1,
        "{:?}",
        p.texts(&root)
    );
}
