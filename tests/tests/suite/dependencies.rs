//! `depends_on` through real actors on a manual clock: a root or a Manage worker is met once it
//! has handled what was queued for it when the dependent was spawned (a watch in its inbox), a
//! sub-agent when it yields; every way a dependency fails (failed, cancelled, terminated,
//! deleted) under both `on_dependency_failure` policies, the limit's and a spawn's own;
//! `provide` refused to an agent waiting for `depends_on`; and a stop in between (the views
//! agree on what waits, the dependent runs after recovery), also of the real `agentd` on the
//! embedded store, killed with `kill -9`.
//! Two processes on Redis: `redis_cluster.rs`.

use agentd_proto::{
    AgentStatus, Control, ErrorCode, Event, OnDependencyFailure, QueueState, Role, SpawnRequest,
};
use agentd_tests::*;
use serde_json::json;
use std::sync::Arc;

const SCRIPT: &str = r#"
[[rule]]
contains = "broken"
delay_ms = 1000
error = "it broke"

[[rule]]
contains = "yield now"
[[rule.tool_calls]]
name = "yield_to_parent"
arguments = { result = "yielded" }

[[rule]]
contains = "slow"
delay_ms = 1000
text = "done"

[[rule]]
text = "ok: {{input}}"
"#;

/// Spawns a `plain` root that depends on `deps`, with `prompt` as its first message.
async fn dependent(sys: &TestSystem, deps: &[&str], prompt: &str) -> String {
    sys.spawn(SpawnRequest {
        agent_type: Some("plain".into()),
        prompt: Some(prompt.into()),
        depends_on: deps.iter().map(|d| d.to_string()).collect(),
        ..Default::default()
    })
    .await
    .id
}

/// Whether `id`'s thread has a model answer.
async fn answered(sys: &TestSystem, id: &str) -> bool {
    sys.thread(id)
        .await
        .iter()
        .any(|e| e.role == Role::Assistant)
}

/// A Manage worker of `lead` (type `ops`) busy with `message`, sent without waiting; answers
/// its id.
async fn busy_worker(sys: &TestSystem, lead: &str, message: &str) -> String {
    sys.send_async(lead, "Ops", message, "w").await
}

#[actix_rt::test]
async fn a_root_is_met_once_it_has_handled_what_was_queued_when_the_dependent_was_spawned() {
    let sys = TestSystem::builder()
        .script(SCRIPT)
        .manual_clock()
        .start()
        .await;
    let clock = sys.manual_clock();
    // An idle root with nothing queued is met at once.
    let idle = sys.root("plain", None).await;
    let d0 = dependent(&sys, &[&idle.id], "after the idle one").await;
    sys.wait_for_entry(&d0, Role::Assistant, "ok: after the idle one")
        .await;
    assert_ne!(sys.record(&d0).await.status, AgentStatus::WaitingDependency);

    // A busy root: its running item and one queued behind it come first.
    let root = sys.root("plain", Some("slow first")).await;
    wait_until("the first item running", || async { clock.sleepers() == 1 }).await;
    sys.system
        .send(&root.id, "slow second", false)
        .await
        .unwrap();
    let d = dependent(&sys, &[&root.id], "after both").await;
    let rec = sys
        .wait_for_status(&d, AgentStatus::WaitingDependency)
        .await;
    assert_eq!(
        rec.status_reason.as_deref(),
        Some(format!("depends on {}", root.id).as_str())
    );
    // The watch waits in the root's durable inbox, after what was queued.
    let pending = sys.store.inbox_pending(&root.id).await.unwrap();
    assert_eq!(pending.len(), 3, "{pending:#?}");
    assert_eq!(
        sys.store.dependents(&root.id).await.unwrap(),
        vec![d.clone()]
    );

    clock.advance(1000);
    wait_until("the second item running", || async {
        sys.texts_of(&root.id, Role::Assistant).await == ["done"] && clock.sleepers() == 1
    })
    .await;
    assert_eq!(sys.record(&d).await.status, AgentStatus::WaitingDependency);
    assert!(!answered(&sys, &d).await);

    clock.advance(1000);
    sys.wait_for_entry(&d, Role::Assistant, "ok: after both")
        .await;
    assert_eq!(
        sys.texts_of(&root.id, Role::Assistant).await,
        ["done", "done"],
        "the watch ran no turn"
    );
    wait_until("the root's inbox empty", || async {
        sys.store.inbox_pending(&root.id).await.unwrap().is_empty()
    })
    .await;
    assert!(
        sys.store.dependents(&root.id).await.unwrap().is_empty(),
        "a met dependent is forgotten"
    );
    let rec = sys.record(&d).await;
    assert!(rec.dependencies_settled);
    assert_eq!(
        rec.depends_on,
        vec![root.id.clone()],
        "the record keeps them"
    );

    // Closing a busy root meets its dependents: it will handle nothing more.
    let closing = sys.root("plain", Some("slow third")).await;
    wait_until("the third item running", || async { clock.sleepers() == 1 }).await;
    let d2 = dependent(&sys, &[&closing.id], "after the closed one").await;
    sys.wait_for_status(&d2, AgentStatus::WaitingDependency)
        .await;
    sys.system
        .control(&closing.id, Control::Close)
        .await
        .unwrap();
    sys.wait_for_entry(&d2, Role::Assistant, "ok: after the closed one")
        .await;
    // A closed root is met at once.
    let d3 = dependent(&sys, &[&closing.id], "after it again").await;
    sys.wait_for_entry(&d3, Role::Assistant, "ok: after it again")
        .await;
}

#[actix_rt::test]
async fn a_manage_worker_is_met_once_it_has_handled_its_queued_work() {
    let sys = TestSystem::builder()
        .script(SCRIPT)
        .manual_clock()
        .start()
        .await;
    let clock = sys.manual_clock();
    let lead = sys.root("lead", None).await;
    let worker = busy_worker(&sys, &lead.id, "slow job").await;
    wait_until("the worker running", || async { clock.sleepers() == 1 }).await;
    let d = dependent(&sys, &[&worker], "after the worker").await;
    sys.wait_for_status(&d, AgentStatus::WaitingDependency)
        .await;
    clock.advance(1000);
    sys.wait_for_entry(&d, Role::Assistant, "ok: after the worker")
        .await;
    assert_eq!(sys.texts_of(&worker, Role::Assistant).await, ["done"]);
    assert_ne!(sys.record(&worker).await.status, AgentStatus::Completed);
}

/// What a dependency is.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Kind {
    Root,
    Worker,
    SubAgent,
}

/// How a dependency fails.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Failure {
    Failed,
    Cancelled,
    Terminated,
    Deleted,
}

impl Failure {
    fn word(self) -> &'static str {
        match self {
            Failure::Failed => "failed",
            Failure::Cancelled => "cancelled",
            Failure::Terminated => "terminated",
            Failure::Deleted => "deleted",
        }
    }
}

/// Asserts that none of the events `events` received so far failed agent `d`.
fn assert_never_failed(events: &mut tokio::sync::broadcast::Receiver<Event>, d: &str, case: &str) {
    while let Ok(e) = events.try_recv() {
        assert!(
            !matches!(&e, Event::StatusChanged { agent_id, to: AgentStatus::Failed, .. } if agent_id == d),
            "{case}: the dependent failed"
        );
    }
}

/// A dependency of `kind` fails in every way under both policies: `fail` (and any deletion)
/// fails the dependent with `dependency_failed: <id> <how>` and drops its work; `hold` keeps
/// it waiting until the dependency succeeds after all (a root or a worker handles a later
/// message, a sub-agent yields).
async fn every_failure_of(kind: Kind) {
    for policy in ["fail", "hold"] {
        for failure in [
            Failure::Failed,
            Failure::Cancelled,
            Failure::Terminated,
            Failure::Deleted,
        ] {
            let case = format!("{kind:?} {failure:?} under {policy}");
            let sys = TestSystem::builder()
                .script(SCRIPT)
                .manual_clock()
                .config(|c| c.limits.on_dependency_failure = policy.into())
                .start()
                .await;
            let clock = sys.manual_clock();
            let mut events = sys.events();
            let lead = sys.root("lead", None).await;
            let work = if failure == Failure::Failed {
                "broken job"
            } else {
                "slow job"
            };
            let dep = match kind {
                Kind::Root => sys.root("plain", Some(work)).await.id,
                Kind::Worker => busy_worker(&sys, &lead.id, work).await,
                Kind::SubAgent => sys.spawn_child(&lead.id, "coding", work).await,
            };
            wait_until(&format!("{case}: the dependency busy"), || async {
                clock.sleepers() == 1
            })
            .await;
            let d = dependent(&sys, &[&dep], "after it").await;
            sys.wait_for_status(&d, AgentStatus::WaitingDependency)
                .await;
            match failure {
                Failure::Failed => clock.advance(1000),
                Failure::Cancelled => {
                    sys.system.control(&dep, Control::Cancel).await.unwrap();
                }
                Failure::Terminated => {
                    sys.system.control(&dep, Control::Terminate).await.unwrap();
                }
                Failure::Deleted => {
                    sys.system.control(&dep, Control::Delete).await.unwrap();
                }
            }
            if policy == "fail" || failure == Failure::Deleted {
                let rec = sys.wait_for_status(&d, AgentStatus::Failed).await;
                let reason = format!("dependency_failed: {dep} {}", failure.word());
                assert_eq!(
                    rec.status_reason.as_deref(),
                    Some(reason.as_str()),
                    "{case}"
                );
                assert_eq!(rec.last_error.as_deref(), Some(reason.as_str()), "{case}");
                assert!(!answered(&sys, &d).await, "{case}: it ran");
                wait_until(&format!("{case}: its work dropped"), || async {
                    sys.store.inbox_pending(&d).await.unwrap().is_empty()
                })
                .await;
                continue;
            }
            // Held: the dependency is down, the dependent still waits ...
            let down = match failure {
                Failure::Failed => AgentStatus::Failed,
                Failure::Cancelled => AgentStatus::Cancelled,
                _ => AgentStatus::Terminated,
            };
            sys.wait_for_status(&dep, down).await;
            assert_eq!(
                sys.record(&d).await.status,
                AgentStatus::WaitingDependency,
                "{case}"
            );
            // ... until it succeeds after all.
            let later = if kind == Kind::SubAgent {
                "yield now"
            } else {
                "hello"
            };
            sys.system.send(&dep, later, false).await.unwrap();
            sys.wait_for_entry(&d, Role::Assistant, "ok: after it")
                .await;
            assert_never_failed(&mut events, &d, &case);
        }
    }
}

#[actix_rt::test]
async fn a_failing_root_fails_or_holds_its_dependents() {
    every_failure_of(Kind::Root).await;
}

#[actix_rt::test]
async fn a_failing_worker_fails_or_holds_its_dependents() {
    every_failure_of(Kind::Worker).await;
}

#[actix_rt::test]
async fn a_failing_sub_agent_fails_or_holds_its_dependents() {
    every_failure_of(Kind::SubAgent).await;
}

#[actix_rt::test]
async fn an_agent_waiting_for_depends_on_takes_no_provided_value() {
    let sys = TestSystem::builder()
        .script(SCRIPT)
        .manual_clock()
        .start()
        .await;
    let clock = sys.manual_clock();
    let root = sys.root("plain", Some("slow job")).await;
    wait_until("the root busy", || async { clock.sleepers() == 1 }).await;
    let d = dependent(&sys, &[&root.id], "after it").await;
    sys.wait_for_status(&d, AgentStatus::WaitingDependency)
        .await;
    let refused = sys
        .system
        .provide(&d, AgentStatus::WaitingDependency, "KEY")
        .await
        .unwrap_err();
    assert_eq!(refused.code, ErrorCode::InvalidTransition, "{refused}");
    assert_eq!(
        sys.store.inbox_pending(&d).await.unwrap().len(),
        1,
        "nothing was queued"
    );
    assert_eq!(sys.record(&d).await.status, AgentStatus::WaitingDependency);
    clock.advance(1000);
    sys.wait_for_entry(&d, Role::Assistant, "ok: after it")
        .await;
    assert!(
        !sys.texts_of(&d, Role::User)
            .await
            .iter()
            .any(|t| t.contains("KEY"))
    );
}

/// A root dependency whose turn failed sets its dependent's watch aside in its inbox until it
/// runs again (a later message): the work queue lists it as `held`, with `failed` saying why,
/// never as `ready` to start a turn nothing will start; the message that makes it run again
/// takes it out of the queue.
#[actix_rt::test]
async fn a_failed_dependency_is_held_in_the_queue_not_ready() {
    let sys = TestSystem::builder()
        .script(SCRIPT)
        .manual_clock()
        .config(|c| c.limits.on_dependency_failure = "hold".into())
        .start()
        .await;
    let clock = sys.manual_clock();
    let dep = sys.root("plain", Some("broken job")).await.id;
    wait_until("the dependency busy", || async { clock.sleepers() == 1 }).await;
    let d = dependent(&sys, &[&dep], "after it").await;
    sys.wait_for_status(&d, AgentStatus::WaitingDependency)
        .await;
    clock.advance(1000);
    sys.wait_for_status(&dep, AgentStatus::Failed).await;
    let task_of = |tasks: Vec<agentd_proto::QueueTask>, id: &str| {
        tasks.into_iter().find(|t| t.agent_id == id)
    };
    wait_until("the watch set aside in the failed root's inbox", || async {
        task_of(sys.system.queue(None).await.unwrap(), &dep).is_some_and(|t| t.pending == 1)
    })
    .await;
    let task = task_of(sys.system.queue(None).await.unwrap(), &dep).unwrap();
    assert_eq!(task.queue_state, QueueState::Held, "{task:?}");
    assert_eq!(task.status, AgentStatus::Failed);
    let waiting = task_of(sys.system.queue(None).await.unwrap(), &d).unwrap();
    assert_eq!(waiting.queue_state, QueueState::WaitingDependency);

    // A message runs it again: it reaches the watch, and its dependent runs.
    sys.system.send(&dep, "hello", false).await.unwrap();
    sys.wait_for_entry(&d, Role::Assistant, "ok: after it")
        .await;
    wait_until("the queue empty", || async {
        sys.system.queue(None).await.unwrap().is_empty()
    })
    .await;
}

#[actix_rt::test]
async fn a_dependent_stopped_while_it_waits_shows_its_stored_work_and_runs_after_recovery() {
    let store: Arc<dyn agentd_actors::ThreadStore> = Arc::new(agentd_store::MemoryStore::new());
    let clock = agentd_actors::ManualClock::new(1_000_000);
    let first = TestSystem::builder()
        .script(SCRIPT)
        .store(store.clone())
        .clock(Arc::new(clock.clone()))
        .start()
        .await;
    let root = first.root("plain", Some("slow first")).await;
    wait_until("the root busy", || async { clock.sleepers() == 1 }).await;
    first
        .system
        .send(&root.id, "slow second", false)
        .await
        .unwrap();
    let d = dependent(&first, &[&root.id], "after it").await;
    first
        .wait_for_status(&d, AgentStatus::WaitingDependency)
        .await;
    first.system.shutdown().await;

    let clock = agentd_actors::ManualClock::new(1_000_000);
    let second = TestSystem::builder()
        .script(SCRIPT)
        .store(store.clone())
        .clock(Arc::new(clock.clone()))
        .without_recovery()
        .start()
        .await;
    // Not activated yet: what it shows is what its durable inbox holds, as the queue says.
    let view = second.system.inspect(&d).await.unwrap();
    assert_eq!(view.live.live, Some(false));
    let task = second
        .system
        .queue(None)
        .await
        .unwrap()
        .into_iter()
        .find(|t| t.agent_id == d)
        .unwrap();
    assert_eq!(task.queue_state, QueueState::WaitingDependency);
    assert_eq!(view.live.inbox, Some(task.pending));
    assert_eq!(task.pending, 1);

    second.system.recover().await.unwrap();
    for _ in 0..2 {
        wait_until("a root item running", || async { clock.sleepers() == 1 }).await;
        assert!(!answered(&second, &d).await);
        clock.advance(1000);
    }
    second
        .wait_for_entry(&d, Role::Assistant, "ok: after it")
        .await;
    assert_eq!(
        second.texts_of(&root.id, Role::User).await,
        ["slow first", "slow second"]
    );
}

/// The `inbox` the agent view shows for `id` and the `pending` the work queue lists for it.
fn inbox_and_pending(p: &AgentdProcess, id: &str) -> (serde_json::Value, serde_json::Value) {
    let view = p.get(&format!("/v1/agents/{id}"));
    let queue = p.get("/v1/queue");
    let task = queue["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["agent_id"] == id)
        .cloned()
        .unwrap_or_else(|| panic!("{id} not in the queue: {queue}"));
    (view["inbox"].clone(), task["pending"].clone())
}

/// The real binary on the embedded store, killed while a root its dependent waits for is busy:
/// after the restart the root finishes what was queued for it (the watch kept in its durable
/// inbox) and the dependent runs; a provided value is refused before and after, and the views
/// agree on what the dependent has waiting.
#[test]
fn a_root_dependency_outlives_a_kill_9_of_agentd_on_the_embedded_store() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("script.toml");
    std::fs::write(
        &script,
        "[[rule]]\ncontains = \"slow\"\ndelay_ms = 1500\ntext = \"done: {{input}}\"\n\n\
         [[rule]]\ntext = \"ok: {{input}}\"\n",
    )
    .unwrap();
    let env = [
        (
            "AGENTD__STORE__DATA_DIR",
            dir.path().join("data").display().to_string(),
        ),
        ("AGENTD__MODEL__SCRIPT", script.display().to_string()),
    ];
    let p = AgentdProcess::start(&env);
    let root = p.spawn("research", "slow first");
    p.post(
        &format!("/v1/agents/{root}/messages"),
        json!({"text": "slow second"}),
    )
    .unwrap();
    let spawned = p
        .post(
            "/v1/agents",
            json!({"agent_type": "research", "prompt": "after it", "depends_on": [root]}),
        )
        .unwrap();
    assert_eq!(spawned["status"], "waiting_dependency", "{spawned}");
    let d = spawned["agent_id"].as_str().unwrap().to_string();
    let refuse_a_value = |p: &AgentdProcess| {
        let (code, err) = p
            .post(
                &format!("/v1/agents/{d}/dependency"),
                json!({"value": "KEY"}),
            )
            .unwrap_err();
        assert_eq!(
            (code, err["code"].as_str()),
            (409, Some("invalid_transition"))
        );
    };
    refuse_a_value(&p);
    assert_eq!(inbox_and_pending(&p, &d), (json!(1), json!(1)));
    p.kill9();

    let p = AgentdProcess::start(&env);
    assert_eq!(p.status(&d), "waiting_dependency");
    assert_eq!(inbox_and_pending(&p, &d), (json!(1), json!(1)));
    refuse_a_value(&p);
    p.wait_for("the dependent's answer", |p| {
        p.texts(&d).contains(&"ok: after it".to_string())
    });
    let texts = p.texts(&root);
    assert!(
        texts.contains(&"done: slow first".to_string())
            && texts.contains(&"done: slow second".to_string()),
        "the root handled its queued work first: {texts:?}"
    );
    assert!(!p.texts(&d).iter().any(|t| t.contains("KEY")));
    p.stop();
}

/// A spawn's own `on_dependency_failure` goes before the limit's, through the facade (what
/// `POST /v1/agents` and the command stream's `spawn` call) and through `spawn_agent`: `hold`
/// under a `fail` limit waits until the dependency succeeds after all, `fail` under a `hold`
/// limit fails; the record keeps the choice.
#[actix_rt::test]
async fn a_spawn_s_on_dependency_failure_goes_before_the_limit() {
    for (limit, chosen) in [
        ("fail", OnDependencyFailure::Hold),
        ("hold", OnDependencyFailure::Fail),
    ] {
        for through_the_tool in [false, true] {
            let door = if through_the_tool {
                "spawn_agent"
            } else {
                "the facade"
            };
            let case = format!("{chosen:?} under {limit}, through {door}");
            let sys = TestSystem::builder()
                .script(SCRIPT)
                .manual_clock()
                .config(|c| c.limits.on_dependency_failure = limit.into())
                .start()
                .await;
            let clock = sys.manual_clock();
            let mut events = sys.events();
            let dep = sys.root("plain", Some("slow job")).await.id;
            wait_until(&format!("{case}: the dependency busy"), || async {
                clock.sleepers() == 1
            })
            .await;
            let d = if through_the_tool {
                let lead = sys.root("lead", None).await;
                let r = sys
                    .system
                    .invoke_tool(
                        Some(&lead.id),
                        "spawn_agent",
                        json!({"agent_type": "plain", "prompt": "after it", "depends_on": [dep],
                               "on_dependency_failure": chosen}),
                    )
                    .await
                    .unwrap();
                r["agent_id"].as_str().unwrap().to_string()
            } else {
                sys.system
                    .spawn(SpawnRequest {
                        agent_type: Some("plain".into()),
                        prompt: Some("after it".into()),
                        depends_on: vec![dep.clone()],
                        on_dependency_failure: Some(chosen),
                        ..Default::default()
                    })
                    .await
                    .unwrap()
                    .id
            };
            let rec = sys
                .wait_for_status(&d, AgentStatus::WaitingDependency)
                .await;
            assert_eq!(rec.on_dependency_failure, Some(chosen), "{case}");
            sys.system.control(&dep, Control::Cancel).await.unwrap();
            if chosen == OnDependencyFailure::Fail {
                let rec = sys.wait_for_status(&d, AgentStatus::Failed).await;
                let reason = format!("dependency_failed: {dep} cancelled");
                assert_eq!(
                    rec.status_reason.as_deref(),
                    Some(reason.as_str()),
                    "{case}"
                );
                assert!(!answered(&sys, &d).await, "{case}: it ran");
                continue;
            }
            // Held: once the dependency succeeds after all, the dependent runs its work.
            sys.wait_for_status(&dep, AgentStatus::Cancelled).await;
            sys.system.send(&dep, "hello", false).await.unwrap();
            sys.wait_for_entry(&d, Role::Assistant, "ok: after it")
                .await;
            assert_never_failed(&mut events, &d, &case);
        }
    }
}
