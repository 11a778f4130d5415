//! Protocol markers and rate limits through real actors on the scripted model.

use agentd_proto::{AgentStatus, ErrorCode, Event, Marker, Role};
use agentd_tests::*;
use serde_json::json;

const SCRIPT: &str = r#"
[[rule]]
agent = "plain"
contains = "plan"
text = "Phase one is done.\n=== PHASE 1 COMPLETE ===\n[DEPENDENCY_REQUEST]the API key[/DEPENDENCY_REQUEST]"

[[rule]]
agent = "plain"
contains = "Dependency provided"
text = "[USER_QUESTION]Which region?[/USER_QUESTION]"

[[rule]]
agent = "plain"
contains = "Answer:"
text = "=== PHASE 2 COMPLETE ===\nAll set."

[[rule]]
agent = "plain"
contains = "broken"
text = "[ERROR] never closed"

[[rule]]
agent = "plain"
contains = "report error"
text = "[ERROR]disk full[/ERROR]"

[[rule]]
agent = "plain"
contains = "busy"
once = true
rate_limit_ms = 30000

[[rule]]
agent = "lead"
role = "user"
contains = "spawn then limit"
[[rule.tool_calls]]
name = "spawn_agent"
arguments = { agent_type = "coding", prompt = "side effect" }

[[rule]]
agent = "lead"
role = "tool"
once = true
rate_limit_ms = 1000

[[rule]]
agent = "lead"
role = "tool"
text = "spawned ok"

[[rule]]
agent = "plain"
contains = "spend"
text = "spent on {{input}}"
usage = { input = 10, output = 5 }

[[rule]]
agent = "plain"
equals = "a million input"
text = "priced"
usage = { input = 1000000 }

[[rule]]
agent = "plain"
equals = "a million output"
text = "priced"
usage = { output = 1000000 }

[[rule]]
agent = "plain"
equals = "a million cache_write"
text = "priced"
usage = { cache_write = 1000000 }

[[rule]]
agent = "plain"
equals = "a million cache_read"
text = "priced"
usage = { cache_read = 1000000 }

[[rule]]
text = "ok: {{input}}"
"#;

#[actix_rt::test]
async fn markers_drive_phase_dependency_and_question_states() {
    let sys = TestSystem::builder().script(SCRIPT).start().await;
    let mut events = sys.events();
    let a = sys.root("plain", Some("plan the work")).await;
    let rec = sys
        .wait_for_status(&a.id, AgentStatus::WaitingDependency)
        .await;
    assert_eq!(rec.phase, Some(1));
    assert_eq!(rec.status_reason.as_deref(), Some("the API key"));
    let e = next_event(&mut events, "phase marker", |e| {
        matches!(e, Event::Marker { .. })
    })
    .await;
    assert!(
        matches!(
            e,
            Event::Marker {
                marker: Marker::PhaseComplete { phase: 1 },
                ..
            }
        ),
        "{e:?}"
    );
    next_event(&mut events, "dependency marker", |e| {
        matches!(
            e,
            Event::Marker {
                marker: Marker::DependencyRequest { .. },
                ..
            }
        )
    })
    .await;
    // Work sent meanwhile waits; answering a question it did not ask is refused.
    sys.system
        .send(&a.id, "queued meanwhile", false)
        .await
        .unwrap();
    let e = sys
        .system
        .provide(&a.id, AgentStatus::WaitingQuestion, "x")
        .await
        .err()
        .unwrap();
    assert_eq!(e.code, ErrorCode::InvalidTransition);
    sys.system
        .provide(&a.id, AgentStatus::WaitingDependency, "KEY-123")
        .await
        .unwrap();
    let rec = sys
        .wait_for_status(&a.id, AgentStatus::WaitingQuestion)
        .await;
    assert_eq!(rec.status_reason.as_deref(), Some("Which region?"));
    sys.system
        .execute(agentd_proto::Command::AnswerQuestion {
            agent_id: a.id.clone(),
            answer: "eu-west".into(),
            item_id: None,
        })
        .await
        .unwrap();
    sys.wait_for_entry(&a.id, Role::Assistant, "ok: queued meanwhile")
        .await;
    let rec = sys.wait_for_status(&a.id, AgentStatus::Idle).await;
    assert_eq!(rec.phase, Some(2));
    let users: Vec<String> = sys.texts_of(&a.id, Role::User).await;
    assert_eq!(
        users,
        vec![
            "plan the work",
            "Dependency provided: KEY-123",
            "Answer: eu-west",
            "queued meanwhile"
        ]
    );
}

#[actix_rt::test]
async fn error_markers_are_recorded_and_malformed_ones_reported() {
    let sys = TestSystem::builder().script(SCRIPT).start().await;
    let mut events = sys.events();
    let a = sys.root("plain", Some("report error")).await;
    sys.wait_for_entry(&a.id, Role::Assistant, "disk full")
        .await;
    let rec = sys.wait_for_status(&a.id, AgentStatus::Idle).await;
    assert_eq!(rec.last_error.as_deref(), Some("disk full"));
    sys.system
        .send(&a.id, "broken marker", false)
        .await
        .unwrap();
    let e = next_event(&mut events, "malformed", |e| {
        matches!(e, Event::MarkerMalformed { .. })
    })
    .await;
    assert!(
        matches!(e, Event::MarkerMalformed { ref problem, .. } if problem.contains("not closed")),
        "{e:?}"
    );
    assert_eq!(
        sys.wait_for_status(&a.id, AgentStatus::Idle).await.status,
        AgentStatus::Idle,
        "not guessed into a state"
    );
}

#[actix_rt::test]
async fn an_error_marker_fails_the_agent_when_configured() {
    let sys = TestSystem::builder()
        .script(SCRIPT)
        .config(|c| c.limits.fail_on_error_marker = true)
        .start()
        .await;
    let a = sys.root("plain", Some("report error")).await;
    let rec = sys.wait_for_status(&a.id, AgentStatus::Failed).await;
    assert_eq!(
        rec.last_error.as_deref(),
        Some("model_error: agent reported: disk full")
    );
    // The failure took an error checkpoint.
    let cps = sys.system.checkpoints(&a.id).await.unwrap();
    assert_eq!(cps[0].reason, agentd_proto::CheckpointReason::Error);
}

#[actix_rt::test]
async fn a_rate_limit_waits_then_resumes_by_itself_on_the_clock() {
    let sys = TestSystem::builder()
        .script(SCRIPT)
        .manual_clock()
        .start()
        .await;
    let clock = sys.manual_clock();
    let mut events = sys.events();
    let a = sys.root("plain", Some("busy work")).await;
    let rec = sys
        .wait_for_status(&a.id, AgentStatus::WaitingRateLimit)
        .await;
    assert!(rec.status_reason.unwrap().contains("rate limit"));
    let e = next_event(&mut events, "rate limited", |e| {
        matches!(e, Event::RateLimited { .. })
    })
    .await;
    assert!(
        matches!(e, Event::RateLimited { resume_at_ms, .. } if resume_at_ms == 1_000_000 + 30_000)
    );
    wait_until("resume timer", || async { clock.sleepers() == 1 }).await;
    clock.advance(29_999);
    tokio::task::yield_now().await;
    assert_eq!(
        sys.record(&a.id).await.status,
        AgentStatus::WaitingRateLimit
    );
    clock.advance(1);
    sys.wait_for_entry(&a.id, Role::Assistant, "ok: busy work")
        .await;
    sys.wait_for_status(&a.id, AgentStatus::Idle).await;
    let t = sys.thread(&a.id).await;
    assert_eq!(
        t.iter().filter(|e| e.text == "busy work").count(),
        1,
        "the retried turn did not repeat its input"
    );
}

#[actix_rt::test]
async fn a_retried_turn_does_not_repeat_tool_side_effects() {
    let sys = TestSystem::builder()
        .script(SCRIPT)
        .manual_clock()
        .start()
        .await;
    let clock = sys.manual_clock();
    let lead = sys.root("lead", Some("spawn then limit")).await;
    sys.wait_for_status(&lead.id, AgentStatus::WaitingRateLimit)
        .await;
    assert_eq!(sys.store.children(&lead.id).await.unwrap().len(), 1);
    wait_until("resume timer", || async { clock.sleepers() == 1 }).await;
    clock.advance(1000);
    sys.wait_for_entry(&lead.id, Role::Assistant, "spawned ok")
        .await;
    assert_eq!(
        sys.store.children(&lead.id).await.unwrap().len(),
        1,
        "spawn_agent ran once"
    );
    let tools = sys
        .thread(&lead.id)
        .await
        .into_iter()
        .filter(|e| e.role == Role::Tool)
        .count();
    assert_eq!(tools, 1);
    let _ = json!({});
}

#[actix_rt::test]
async fn a_budget_pauses_the_agent_and_raising_it_continues() {
    let sys = TestSystem::builder().script(SCRIPT).start().await;
    let mut events = sys.events();
    let budget = agentd_proto::Budget {
        max_tokens: Some(20),
        ..Default::default()
    };
    let a = sys
        .system
        .spawn(agentd_proto::SpawnRequest {
            agent_type: Some("plain".into()),
            prompt: Some("spend one".into()),
            budget: Some(budget),
            ..Default::default()
        })
        .await
        .unwrap();
    sys.wait_for_entry(&a.id, Role::Assistant, "spent on spend one")
        .await;
    assert_eq!(
        sys.wait_for_status(&a.id, AgentStatus::Idle)
            .await
            .usage
            .total(),
        15
    );
    sys.system.send(&a.id, "spend two", false).await.unwrap();
    let rec = sys.wait_for_status(&a.id, AgentStatus::Paused).await;
    assert_eq!(
        rec.status_reason.as_deref(),
        Some("budget_exceeded: tokens")
    );
    let e = next_event(&mut events, "budget", |e| {
        matches!(e, Event::BudgetExceeded { .. })
    })
    .await;
    assert!(matches!(e, Event::BudgetExceeded { ref limit, .. } if limit == "tokens"));
    sys.system.send(&a.id, "spend three", false).await.unwrap();
    // Resuming without more budget pauses again; raising it continues the held work.
    sys.system
        .control(&a.id, agentd_proto::Control::Resume)
        .await
        .unwrap();
    sys.wait_for_status(&a.id, AgentStatus::Paused).await;
    assert!(
        !sys.thread(&a.id)
            .await
            .iter()
            .any(|e| e.text == "spend three")
    );
    sys.system
        .set_budget(
            &a.id,
            agentd_proto::Budget {
                max_tokens: Some(100),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    sys.system
        .control(&a.id, agentd_proto::Control::Resume)
        .await
        .unwrap();
    sys.wait_for_entry(&a.id, Role::Assistant, "spent on spend three")
        .await;
    // A child's budget is capped by its parent's.
    let lead = sys
        .system
        .spawn(agentd_proto::SpawnRequest {
            agent_type: Some("lead".into()),
            budget: Some(budget),
            ..Default::default()
        })
        .await
        .unwrap();
    let r = sys
        .system
        .invoke_tool(
            Some(&lead.id),
            "spawn_agent",
            json!({"prompt": "x", "budget": {"max_tokens": 500, "max_cost_usd": 1.0}}),
        )
        .await
        .unwrap();
    let child = sys.record(r["agent_id"].as_str().unwrap()).await;
    assert_eq!(
        child.budget.as_deref().copied(),
        Some(agentd_proto::Budget {
            max_tokens: Some(20),
            max_cost_usd: Some(1.0),
            deadline_ms: None
        })
    );
}

/// A script whose `coding` agents spend 15 tokens on each message containing "spend".
const SPENDING: &str = r#"
[[rule]]
agent = "coding"
contains = "spend"
text = "spent on {{input}}"
usage = { input = 10, output = 5 }

[[rule]]
text = "ok"
usage = { input = 0, output = 0 }
"#;

/// A `plain` root with a budget of `max_tokens`, and `kids` `coding` children spawned under it
/// with the prompts `spend 0`, `spend 1`, …
async fn budgeted_tree(
    sys: &TestSystem,
    max_tokens: u64,
    kids: usize,
) -> (agentd_proto::AgentRecord, Vec<agentd_proto::AgentRecord>) {
    let root = sys
        .system
        .spawn(agentd_proto::SpawnRequest {
            agent_type: Some("plain".into()),
            budget: Some(agentd_proto::Budget {
                max_tokens: Some(max_tokens),
                ..Default::default()
            }),
            ..Default::default()
        })
        .await
        .unwrap();
    let mut children = Vec::new();
    for n in 0..kids {
        let kid = sys
            .system
            .spawn(agentd_proto::SpawnRequest {
                agent_type: Some("coding".into()),
                parent_id: Some(root.id.clone()),
                prompt: Some(format!("spend {n}")),
                ..Default::default()
            })
            .await
            .unwrap();
        children.push(kid);
    }
    (root, children)
}

#[actix_rt::test]
async fn a_root_budget_covers_its_whole_tree_and_raising_it_resumes_the_tree() {
    let sys = TestSystem::builder().script(SPENDING).start().await;
    let (root, children) = budgeted_tree(&sys, 40, 3).await;
    let mut kids = Vec::new();
    for (n, kid) in children.into_iter().enumerate() {
        assert_eq!(kid.budget, None, "the tree budget is not copied");
        sys.wait_for_entry(&kid.id, Role::Assistant, &format!("spent on spend {n}"))
            .await;
        kids.push(kid.id);
    }
    // 3 × 15 tokens > 40: every agent of the tree is paused, root included.
    for id in kids.iter().chain([&root.id]) {
        let rec = sys.wait_for_status(id, AgentStatus::Paused).await;
        assert_eq!(
            rec.status_reason.as_deref(),
            Some("budget_exceeded: tree tokens"),
            "{id}"
        );
    }
    sys.system
        .send(&kids[0], "spend more", false)
        .await
        .unwrap();
    // Raising the root's budget and resuming the root continues the tree.
    sys.system
        .set_budget(
            &root.id,
            agentd_proto::Budget {
                max_tokens: Some(1000),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    sys.system
        .control(&root.id, agentd_proto::Control::Resume)
        .await
        .unwrap();
    sys.wait_for_entry(&kids[0], Role::Assistant, "spent on spend more")
        .await;
    for id in &kids[1..] {
        assert_ne!(sys.record(id).await.status, AgentStatus::Paused);
    }
}

/// A tree budget is checked after every model call of every agent in the tree, against the
/// tree's spending; the tree is summed (a read per agent and per child list) at most once a
/// second per process, not at every check: a check costs the root's record read, not O(tree)
/// reads. The budget still holds: the tree pauses once what it spent goes over it.
#[actix_rt::test]
async fn a_tree_budget_check_does_not_read_the_whole_tree_every_time() {
    let store = std::sync::Arc::new(failing_store::FailingWrites::default());
    let sys = TestSystem::builder()
        .script(SPENDING)
        .store(store.clone())
        .start()
        .await;
    let (root, children) = budgeted_tree(&sys, 1_000, 10).await;
    let kids: Vec<String> = children.into_iter().map(|k| k.id).collect();
    for (n, kid) in kids.iter().enumerate() {
        sys.wait_for_entry(kid, Role::Assistant, &format!("spent on spend {n}"))
            .await;
    }
    // 40 more model calls across the tree (10 × 15 + 40 × 15 = 750 tokens, under 1,000).
    let before = store.tree_reads();
    for round in 0..4 {
        for kid in &kids {
            sys.system
                .send(kid, &format!("spend again {round}"), false)
                .await
                .unwrap();
        }
    }
    for kid in &kids {
        sys.wait_for_entry(kid, Role::Assistant, "spent on spend again 3")
            .await;
    }
    let reads = store.tree_reads() - before;
    // Summing the tree at every check read ~1,800 records and child lists here; now ~120.
    assert!(reads < 300, "{reads} reads for 40 checks");
    // And the budget holds: 17 more calls (255 tokens) take the tree over 1,000 tokens.
    for n in 0..17 {
        let kid = &kids[n % kids.len()];
        sys.system
            .send(kid, &format!("spend last {n}"), false)
            .await
            .unwrap();
    }
    let rec = sys.wait_for_status(&root.id, AgentStatus::Paused).await;
    assert_eq!(
        rec.status_reason.as_deref(),
        Some("budget_exceeded: tree tokens")
    );
}

const STEPS: &str = r#"
[[rule]]
agent = "lead"
role = "user"
contains = "think"
delay_ms = 1000
text = "thought"

[[rule]]
agent = "lead"
role = "user"
contains = "ask ops"
[[rule.tool_calls]]
name = "Manage"
arguments = { command = "send_message", worker = "Ops", message = "slow job", threadAlias = "s" }

[[rule]]
agent = "lead"
role = "tool"
delay_ms = 1000
text = "ops answered"

[[rule]]
agent = "lead"
role = "user"
contains = "From"
text = "noted"

[[rule]]
agent = "lead"
role = "user"
contains = "delegate"
[[rule.tool_calls]]
name = "spawn_agent"
arguments = { agent_type = "coding", prompt = "finish it" }

[[rule]]
agent = "ops"
delay_ms = 1000
text = "done slowly"

[[rule]]
agent = "coding"
[[rule.tool_calls]]
name = "yield_to_parent"
arguments = { result = "finished" }
"#;

#[actix_rt::test]
async fn the_status_view_says_what_the_agent_does_now() {
    let sys = TestSystem::builder()
        .script(STEPS)
        .manual_clock()
        .start()
        .await;
    let clock = sys.manual_clock();
    let view = |id: String| {
        let sys = &sys;
        async move { serde_json::to_value(sys.system.inspect(&id).await.unwrap()).unwrap() }
    };
    let step_is = |id: String, step: &'static str| {
        let view = &view;
        async move { view(id).await["current_step"] == step }
    };
    // While the model is asked.
    let lead = sys.root("lead", Some("think")).await;
    wait_until("calling model", || {
        step_is(lead.id.clone(), "calling model")
    })
    .await;
    let v = view(lead.id.clone()).await;
    assert_eq!(v["status"], "running");
    assert_eq!(v["progress"], json!(0.0), "a number, not null");
    let updated = v["updated_at_ms"].as_u64().unwrap();
    assert_eq!(v["last_update"], agentd_proto::time::rfc3339_utc(updated));
    assert!(v["last_update"].as_str().unwrap().ends_with('Z'));
    // A step is shown, not persisted: the stored record never held it.
    let stored = sys.store.get_agent(&lead.id).await.unwrap().unwrap();
    assert_eq!(stored.current_step, None);
    clock.advance(1000);
    sys.wait_for_entry(&lead.id, Role::Assistant, "thought")
        .await;
    sys.wait_for_status(&lead.id, AgentStatus::Idle).await;
    assert!(view(lead.id.clone()).await["current_step"].is_null());

    // While a tool runs (a sync Manage call waits for its worker), then the next model call.
    sys.system.send(&lead.id, "ask ops", false).await.unwrap();
    wait_until("running the tool", || {
        step_is(lead.id.clone(), "running tool Manage")
    })
    .await;
    wait_until("the worker's model armed", || async {
        clock.sleepers() == 2
    })
    .await;
    clock.advance(1000);
    wait_until("calling the model again", || {
        step_is(lead.id.clone(), "calling model")
    })
    .await;
    let stored = sys.store.get_agent(&lead.id).await.unwrap().unwrap();
    assert_eq!(stored.current_step, None);
    clock.advance(1000);
    sys.wait_for_entry(&lead.id, Role::Assistant, "ops answered")
        .await;
    sys.wait_for_status(&lead.id, AgentStatus::Idle).await;
    assert!(view(lead.id.clone()).await["current_step"].is_null());

    // Completed: progress 1.0.
    sys.system.send(&lead.id, "delegate", false).await.unwrap();
    let coder = || async {
        for id in sys.store.children(&lead.id).await.unwrap() {
            if &*sys.record(&id).await.agent_type == "coding" {
                return Some(id);
            }
        }
        None
    };
    wait_until("the sub-agent", || async { coder().await.is_some() }).await;
    let child = coder().await.unwrap();
    sys.wait_for_status(&child, AgentStatus::Completed).await;
    let v = view(child).await;
    assert_eq!(v["progress"], json!(1.0));
}

#[actix_rt::test]
async fn each_kind_of_token_costs_its_default_price() {
    // Seed 001's Claude-class prices, USD per million tokens, each kind on its own.
    let sys = TestSystem::builder().script(SCRIPT).start().await;
    for (kind, usd) in [
        ("input", 3.0),
        ("output", 15.0),
        ("cache_write", 3.75),
        ("cache_read", 0.30),
    ] {
        let a = sys.root("plain", Some(&format!("a million {kind}"))).await;
        sys.wait_for_entry(&a.id, Role::Assistant, "priced").await;
        let rec = sys.wait_for_status(&a.id, AgentStatus::Idle).await;
        assert_eq!(rec.usage.total(), 1_000_000, "{kind}");
        assert!(
            (rec.cost_usd - usd).abs() < 1e-9,
            "{kind}: {} instead of {usd}",
            rec.cost_usd
        );
    }
}
