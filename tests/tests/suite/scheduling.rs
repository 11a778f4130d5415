//! Turn scheduling under a concurrency limit: priority order across agents, FIFO within a
//! level, `queued` while waiting, and each agent's own inbox order kept.

use agentd_proto::{
    AgentStatus, Control, Event, ManageOptions, Priority, QueueState, Role, SpawnRequest,
};
use agentd_tests::*;

const SCRIPT: &str = r#"
[[rule]]
contains = "busy"
delay_ms = 1000
text = "busy done"

[[rule]]
contains = "rate limit me"
once = true
rate_limit_ms = 30000

[[rule]]
text = "ok: {{input}}"
"#;

#[actix_rt::test]
async fn priority_then_fifo_under_a_limit_of_one() {
    let sys = TestSystem::builder()
        .script(SCRIPT)
        .manual_clock()
        .config(|c| c.limits.max_running_turns = 1)
        .start()
        .await;
    let clock = sys.manual_clock();
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

/// A pause while the agent waits for a turn slot withdraws its request: the slot freed next
/// goes to no paused agent, the item waits first in its queue, and resume asks again.
#[actix_rt::test]
async fn a_pause_while_waiting_for_a_turn_slot_withdraws_the_request() {
    let sys = TestSystem::builder()
        .script(SCRIPT)
        .manual_clock()
        .config(|c| c.limits.max_running_turns = 1)
        .start()
        .await;
    let clock = sys.manual_clock();
    let blocker = sys.root("plain", Some("busy")).await;
    wait_until("the slot is taken", || async { clock.sleepers() == 1 }).await;
    let b = sys.root("plain", Some("job b")).await;
    sys.wait_for_status(&b.id, AgentStatus::Queued).await;
    sys.system.control(&b.id, Control::Pause).await.unwrap();
    sys.wait_for_status(&b.id, AgentStatus::Paused).await;
    clock.advance(1000);
    sys.wait_for_status(&blocker.id, AgentStatus::Idle).await;
    let second = sys.root("plain", Some("job c")).await;
    sys.wait_for_entry(&second.id, Role::Assistant, "ok: job c")
        .await;
    assert_eq!(sys.record(&b.id).await.status, AgentStatus::Paused);
    assert!(sys.texts_of(&b.id, Role::Assistant).await.is_empty());
    sys.system.control(&b.id, Control::Resume).await.unwrap();
    sys.wait_for_entry(&b.id, Role::Assistant, "ok: job b")
        .await;
    sys.wait_for_status(&b.id, AgentStatus::Idle).await;
}

const DEPS: &str = r#"
[[rule]]
agent = "coding"
role = "user"
contains = "broken"
delay_ms = 1000
error = "it broke"

[[rule]]
agent = "coding"
role = "user"
contains = "slow"
delay_ms = 1000
[[rule.tool_calls]]
name = "yield_to_parent"
arguments = { result = "{{input}} done" }

[[rule]]
agent = "coding"
role = "user"
[[rule.tool_calls]]
name = "yield_to_parent"
arguments = { result = "{{input}} done" }

[[rule]]
text = "ok"
"#;

async fn spawn_dep(
    sys: &TestSystem,
    parent: &str,
    prompt: &str,
    deps: &[&str],
) -> Result<String, agentd_proto::AgentdError> {
    sys.system
        .invoke_tool(
            Some(parent),
            "spawn_agent",
            serde_json::json!({"agent_type": "coding", "prompt": prompt, "depends_on": deps}),
        )
        .await
        .map(|v| v["agent_id"].as_str().unwrap().to_string())
}

#[actix_rt::test]
async fn dependency_chain_and_diamond_run_in_order() {
    let sys = TestSystem::builder()
        .script(DEPS)
        .manual_clock()
        .start()
        .await;
    let clock = sys.manual_clock();
    let lead = sys.root("lead", None).await;
    let a = spawn_dep(&sys, &lead.id, "slow a", &[]).await.unwrap();
    let b = spawn_dep(&sys, &lead.id, "work b", &[&a]).await.unwrap();
    let c = spawn_dep(&sys, &lead.id, "work c", &[&a]).await.unwrap();
    let d = spawn_dep(&sys, &lead.id, "work d", &[&b, &c])
        .await
        .unwrap();
    for id in [&b, &c, &d] {
        let rec = sys
            .wait_for_status(id, AgentStatus::WaitingDependency)
            .await;
        assert!(rec.status_reason.unwrap().starts_with("depends on"));
    }
    assert_eq!(sys.record(&d).await.depends_on, vec![b.clone(), c.clone()]);
    let unknown = spawn_dep(&sys, &lead.id, "x", &["no-such-agent"]).await;
    assert_eq!(
        unknown.err().map(|e| e.code),
        Some(agentd_proto::ErrorCode::AgentNotFound)
    );
    let mut events = sys.events();
    wait_until("a running", || async { clock.sleepers() == 1 }).await;
    clock.advance(1000);
    let mut completed = Vec::new();
    while completed.len() < 4 {
        if let Event::StatusChanged {
            agent_id,
            to: AgentStatus::Completed,
            ..
        } = next_event(&mut events, "completed", |e| {
            matches!(
                e,
                Event::StatusChanged {
                    to: AgentStatus::Completed,
                    ..
                }
            )
        })
        .await
        {
            completed.push(agent_id);
        }
    }
    assert_eq!(completed[0], a);
    assert_eq!(completed[3], d, "the diamond's tip runs last");
    assert_eq!(
        sys.record(&d).await.result.as_deref().cloned(),
        Some(serde_json::json!("work d done"))
    );
}

/// A paused agent that still waits for its dependencies goes back to waiting for them on
/// resume (not `idle`), and runs once they are met.
#[actix_rt::test]
async fn a_resume_while_dependencies_are_unmet_waits_for_them_again() {
    let sys = TestSystem::builder()
        .script(DEPS)
        .manual_clock()
        .start()
        .await;
    let clock = sys.manual_clock();
    let lead = sys.root("lead", None).await;
    let a = spawn_dep(&sys, &lead.id, "slow a", &[]).await.unwrap();
    let b = spawn_dep(&sys, &lead.id, "work b", &[&a]).await.unwrap();
    sys.wait_for_status(&b, AgentStatus::WaitingDependency)
        .await;
    sys.system.control(&b, Control::Pause).await.unwrap();
    sys.wait_for_status(&b, AgentStatus::Paused).await;
    sys.system.control(&b, Control::Resume).await.unwrap();
    let rec = sys.record(&b).await;
    assert_eq!(rec.status, AgentStatus::WaitingDependency);
    assert_eq!(rec.status_reason, Some(format!("depends on {a}")));
    wait_until("a running", || async { clock.sleepers() == 1 }).await;
    clock.advance(1000);
    sys.wait_for_status(&b, AgentStatus::Completed).await;
}

#[actix_rt::test]
async fn a_failed_dependency_holds_or_fails_its_dependents_by_config() {
    for (policy, expected) in [
        ("hold", AgentStatus::WaitingDependency),
        ("fail", AgentStatus::Failed),
    ] {
        let sys = TestSystem::builder()
            .script(DEPS)
            .manual_clock()
            .config(|c| c.limits.on_dependency_failure = policy.into())
            .start()
            .await;
        let clock = sys.manual_clock();
        let lead = sys.root("lead", None).await;
        let f = spawn_dep(&sys, &lead.id, "broken f", &[]).await.unwrap();
        let e = spawn_dep(&sys, &lead.id, "work e", &[&f]).await.unwrap();
        sys.wait_for_status(&e, AgentStatus::WaitingDependency)
            .await;
        wait_until("f running", || async { clock.sleepers() == 1 }).await;
        clock.advance(1000);
        sys.wait_for_status(&f, AgentStatus::Failed).await;
        let rec = sys.wait_for_status(&e, expected).await;
        if policy == "fail" {
            assert!(rec.last_error.unwrap().contains("failed"));
        } else {
            // Held: nothing ran.
            assert!(
                !sys.thread(&e)
                    .await
                    .iter()
                    .any(|x| x.role == Role::Assistant)
            );
        }
    }
}

const FLAKY: &str = r#"
[[rule]]
contains = "flaky"
once = true
unavailable = "transient failure"

[[rule]]
contains = "always down"
unavailable = "the provider stays down"

[[rule]]
contains = "broken"
error = "permanent failure"

[[rule]]
text = "ok: {{input}}"
"#;

#[actix_rt::test]
async fn failed_turns_are_retried_with_backoff_and_attempts_show() {
    let sys = TestSystem::builder()
        .script(FLAKY)
        .manual_clock()
        .config(|c| {
            c.limits.max_attempts = 3;
            c.limits.retry_backoff_ms = 500;
            c.limits.retry_backoff_max_ms = 800;
        })
        .start()
        .await;
    let clock = sys.manual_clock();
    let a = sys.root("plain", Some("flaky job")).await;
    let rec = sys.wait_for_status(&a.id, AgentStatus::Queued).await;
    assert_eq!(rec.status_reason.as_deref(), Some("retry 2 of 3 in 500 ms"));
    assert_eq!(
        sys.system
            .inspect(&a.id)
            .await
            .unwrap()
            .view
            .summary
            .attempts,
        1
    );
    wait_until("backoff armed", || async { clock.sleepers() == 1 }).await;
    clock.advance(499);
    tokio::task::yield_now().await;
    assert_eq!(sys.record(&a.id).await.status, AgentStatus::Queued);
    clock.advance(1);
    sys.wait_for_entry(&a.id, Role::Assistant, "ok: flaky job")
        .await;
    let rec = sys.wait_for_status(&a.id, AgentStatus::Idle).await;
    assert_eq!(rec.attempts, 2);
    assert_eq!(
        sys.thread(&a.id)
            .await
            .iter()
            .filter(|e| e.text == "flaky job")
            .count(),
        1
    );
    // Retries exhausted: failed after three attempts, backoff doubling and capped.
    sys.system.send(&a.id, "always down", false).await.unwrap();
    wait_until("second retry scheduled", || async {
        sys.record(&a.id).await.status_reason.as_deref() == Some("retry 2 of 3 in 500 ms")
    })
    .await;
    wait_until("armed", || async { clock.sleepers() == 1 }).await;
    clock.advance(500);
    wait_until("third attempt scheduled", || async {
        sys.record(&a.id).await.status_reason.as_deref() == Some("retry 3 of 3 in 800 ms")
    })
    .await;
    wait_until("armed", || async { clock.sleepers() == 1 }).await;
    clock.advance(800);
    let rec = sys.wait_for_status(&a.id, AgentStatus::Failed).await;
    assert_eq!(rec.attempts, 3);
    assert!(rec.last_error.unwrap().contains("stays down"));
}

/// A failure no retry fixes (the provider refused the request) fails the agent at its first
/// attempt, with attempts left; the default retries a failure of the moment.
#[actix_rt::test]
async fn only_failures_a_retry_can_fix_are_retried_by_default() {
    let sys = TestSystem::builder()
        .script(FLAKY)
        .manual_clock()
        .start()
        .await;
    let clock = sys.manual_clock();
    let broken = sys.root("plain", Some("broken job")).await;
    let rec = sys.wait_for_status(&broken.id, AgentStatus::Failed).await;
    assert_eq!(rec.attempts, 1, "failed at once");
    assert!(rec.last_error.unwrap().contains("permanent failure"));
    let flaky = sys.root("plain", Some("flaky job")).await;
    let rec = sys.wait_for_status(&flaky.id, AgentStatus::Queued).await;
    assert_eq!(
        rec.status_reason.as_deref(),
        Some("retry 2 of 3 in 1000 ms")
    );
    wait_until("backoff armed", || async { clock.sleepers() == 1 }).await;
    clock.advance(1_000);
    sys.wait_for_entry(&flaky.id, Role::Assistant, "ok: flaky job")
        .await;
}

#[actix_rt::test]
async fn the_queue_lists_work_by_priority_with_its_queue_state() {
    let sys = TestSystem::builder()
        .script(SCRIPT)
        .manual_clock()
        .config(|c| c.limits.max_running_turns = 1)
        .start()
        .await;
    let clock = sys.manual_clock();
    let blocker = sys.root("plain", Some("busy")).await;
    wait_until("the slot is taken", || async { clock.sleepers() == 1 }).await;
    let spawn = |title: &str, p: Priority, deps: Vec<String>| {
        let sys = &sys;
        let title = title.to_string();
        async move {
            sys.system
                .spawn(SpawnRequest {
                    agent_type: Some("plain".into()),
                    title: Some(title.clone()),
                    prompt: Some(format!("job {title}")),
                    priority: Some(p),
                    depends_on: deps,
                    ..Default::default()
                })
                .await
                .unwrap()
        }
    };
    let low = spawn("low", Priority::Low, vec![]).await;
    let high = spawn("high", Priority::High, vec![]).await;
    let waiting = spawn("waiting", Priority::Critical, vec![blocker.id.clone()]).await;
    sys.wait_for_status(&low.id, AgentStatus::Queued).await;
    sys.wait_for_status(&high.id, AgentStatus::Queued).await;
    sys.wait_for_status(&waiting.id, AgentStatus::WaitingDependency)
        .await;
    let idle = sys.root("plain", None).await; // no work: not in the queue
    let tasks = sys.system.queue(None).await.unwrap();
    let rows: Vec<(&str, QueueState)> = tasks
        .iter()
        .map(|t| (t.title.as_str(), t.queue_state))
        .collect();
    assert_eq!(
        rows,
        vec![
            ("waiting", QueueState::WaitingDependency),
            ("high", QueueState::Queued),
            (&*blocker.title, QueueState::Executing),
            ("low", QueueState::Queued),
        ]
    );
    assert_eq!(tasks[0].depends_on[0], blocker.id);
    assert!(tasks.iter().all(|t| t.agent_id != idle.id));
    clock.advance(1000);
    // The blocker (a root) has handled what was queued for it when the dependent was spawned:
    // the dependent is met and runs, and the queue drains.
    sys.wait_for_entry(&waiting.id, Role::Assistant, "ok: job waiting")
        .await;
    wait_until("the queue drained", || async {
        sys.system.queue(None).await.unwrap().is_empty()
    })
    .await;
    assert_eq!(
        sys.record(&waiting.id).await.status_reason.as_deref(),
        None,
        "it ran and went idle"
    );
}

#[actix_rt::test]
async fn stored_work_not_started_is_ready_and_a_rate_limited_agent_waits_for_its_reset() {
    use agentd_proto::{Address, Envelope, InboxItem, Item};
    let store: std::sync::Arc<dyn agentd_actors::ThreadStore> =
        std::sync::Arc::new(agentd_store::MemoryStore::new());
    let types = || default_types(ManageOptions::default());
    let clock = agentd_actors::ManualClock::new(1_000_000);
    let first = TestSystem::builder()
        .script(SCRIPT)
        .types(types())
        .store(store.clone())
        .clock(std::sync::Arc::new(clock.clone()))
        .start()
        .await;
    let idle = first.root("plain", None).await;
    let limited = first.root("plain", Some("rate limit me")).await;
    first
        .wait_for_status(&limited.id, AgentStatus::WaitingRateLimit)
        .await;
    first.system.shutdown().await;
    // An item stored in `idle`'s durable inbox by a process that stopped before a turn
    // started on it.
    let stored = Envelope::new(
        Address::System,
        Address::agent(&idle.id),
        Item::Inbox(InboxItem::message("stored, not started")),
        1_000_000,
    );
    assert!(store.inbox_push(&idle.id, &stored).await.unwrap());

    // The next process, before it recovers anything.
    let clock2 = agentd_actors::ManualClock::new(1_000_000);
    let second = TestSystem::builder()
        .script(SCRIPT)
        .types(types())
        .store(store.clone())
        .clock(std::sync::Arc::new(clock2.clone()))
        .without_recovery()
        .start()
        .await;
    let tasks = second.system.queue(None).await.unwrap();
    let rows: Vec<(&str, QueueState, usize)> = tasks
        .iter()
        .map(|t| (t.agent_id.as_str(), t.queue_state, t.pending))
        .collect();
    assert_eq!(
        rows,
        vec![
            (idle.id.as_str(), QueueState::Ready, 1),
            (limited.id.as_str(), QueueState::WaitingRateLimit, 1),
        ]
    );
    assert_eq!(tasks[1].resume_at_ms, Some(1_000_000 + 30_000));
    assert_eq!(tasks[0].resume_at_ms, None);

    // Recovery starts the ready one; the rate-limited one waits for its reset time.
    second.system.recover().await.unwrap();
    second
        .wait_for_entry(&idle.id, Role::Assistant, "ok: stored, not started")
        .await;
    wait_until("only the rate-limited agent waits", || async {
        let q = second.system.queue(None).await.unwrap();
        q.len() == 1 && q[0].queue_state == QueueState::WaitingRateLimit
    })
    .await;
    assert_eq!(
        second.record(&limited.id).await.status,
        AgentStatus::WaitingRateLimit
    );
}
