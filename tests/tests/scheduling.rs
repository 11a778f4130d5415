//! Turn scheduling under a concurrency limit: priority order across agents, FIFO within a
//! level, `queued` while waiting, and each agent's own inbox order kept.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use agentd_proto::{AgentStatus, Event, ManageOptions, Priority, Role, SpawnRequest};
use agentd_tests::*;

const SCRIPT: &str = r#"
[[rule]]
contains = "busy"
delay_ms = 1000
text = "busy done"

[[rule]]
text = "ok: {{input}}"
"#;

#[actix_rt::test]
async fn priority_then_fifo_under_a_limit_of_one() {
    let (sys, clock) = start_manual_with(SCRIPT, default_types(ManageOptions::default()), |c| {
        c.limits.max_running_turns = 1
    });
    let blocker = sys.root("plain", Some("busy")).await;
    wait_until("the slot is taken", || async { clock.sleepers() == 1 }).await;
    let mut events = sys.events();
    let mut ids = Vec::new();
    for (name, p) in [
        ("low", Priority::Low),
        ("normal-1", Priority::Normal),
        ("high", Priority::High),
        ("normal-2", Priority::Normal),
        ("critical", Priority::Critical),
    ] {
        let rec = sys
            .system
            .spawn(SpawnRequest {
                agent_type: Some("plain".into()),
                title: Some(name.into()),
                prompt: Some(format!("job {name}")),
                priority: Some(p),
                ..Default::default()
            })
            .await
            .unwrap();
        sys.wait_for_status(&rec.id, AgentStatus::Queued).await;
        ids.push((name, rec.id));
    }
    // One agent with two items keeps their order.
    let (_, normal1) = &ids[1];
    sys.system
        .send(normal1, "second item", false)
        .await
        .unwrap();
    clock.advance(1000);
    let mut order = Vec::new();
    while order.len() < 5 {
        if let Event::StatusChanged {
            agent_id,
            to: AgentStatus::Running,
            ..
        } = next_event(&mut events, "running", |e| {
            matches!(
                e,
                Event::StatusChanged {
                    to: AgentStatus::Running,
                    ..
                }
            )
        })
        .await
            && let Some((name, _)) = ids.iter().find(|(_, id)| *id == agent_id)
            && !order.contains(name)
        {
            order.push(*name);
        }
    }
    assert_eq!(
        order,
        vec!["critical", "high", "normal-1", "normal-2", "low"]
    );
    sys.wait_for_entry(normal1, Role::Assistant, "ok: second item")
        .await;
    let t: Vec<String> = sys
        .thread(normal1)
        .await
        .into_iter()
        .map(|e| e.text)
        .collect();
    assert_eq!(
        t,
        vec![
            "job normal-1",
            "ok: job normal-1",
            "second item",
            "ok: second item"
        ]
    );
    sys.wait_for_entry(&blocker.id, Role::Assistant, "busy done")
        .await;
}
