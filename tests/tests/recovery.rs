//! The durable inbox: work queued when a process stops is resumed by the next one, in order,
//! each item once.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use agentd_actors::{ManualClock, ThreadStore};
use agentd_proto::{AgentStatus, ManageOptions, Role};
use agentd_store::MemoryStore;
use agentd_tests::*;
use std::sync::Arc;

const SCRIPT: &str = r#"
[[rule]]
agent = "plain"
contains = "slow"
delay_ms = 1000
text = "done: {{input}}"

[[rule]]
agent = "plain"
text = "done: {{input}}"
"#;

#[actix_rt::test]
async fn queued_work_survives_a_stop_and_resumes_in_order_once() {
    let store: Arc<dyn ThreadStore> = Arc::new(MemoryStore::new());
    let clock = ManualClock::new(1);
    let first = start(
        SCRIPT,
        default_types(ManageOptions::default()),
        store.clone(),
        Arc::new(clock.clone()),
    );
    let a = first.root("plain", Some("slow m0")).await;
    wait_until("m0 running", || async { clock.sleepers() == 1 }).await;
    first.system.send(&a.id, "m1", false).await.unwrap();
    first.system.send(&a.id, "m2", false).await.unwrap();
    wait_until("queued", || async {
        first.system.inspect(&a.id).await.unwrap()["inbox"] == 2
    })
    .await;
    first.system.shutdown().await;
    assert_eq!(
        store.inbox_pending(&a.id).await.unwrap().len(),
        3,
        "in-flight and queued items stay pending"
    );

    let clock2 = ManualClock::new(1);
    let second = start(
        SCRIPT,
        default_types(ManageOptions::default()),
        store.clone(),
        Arc::new(clock2.clone()),
    );
    second.system.send(&a.id, "m3", false).await.unwrap();
    wait_until("m0 re-run armed", || async { clock2.sleepers() == 1 }).await;
    clock2.advance(1000);
    second
        .wait_for_entry(&a.id, Role::Assistant, "done: m3")
        .await;
    second.wait_for_status(&a.id, AgentStatus::Idle).await;
    let texts: Vec<String> = second
        .thread(&a.id)
        .await
        .into_iter()
        .map(|e| e.text)
        .collect();
    assert_eq!(
        texts,
        vec![
            "slow m0",
            "done: slow m0",
            "m1",
            "done: m1",
            "m2",
            "done: m2",
            "m3",
            "done: m3"
        ]
    );
    wait_until("inbox drained", || async {
        store.inbox_pending(&a.id).await.unwrap().is_empty()
    })
    .await;
}
