//! The management surface through real actors: every tool's success path, every rule's error
//! code, interrupts, close/re-open, delete, cascades, limits, lifecycle controls and scoping.

use agentd_actors::AgentType;
use agentd_proto::{
    AgentStatus, AgentdError, Command, Control, ErrorCode, Event, Role, SpawnRequest,
};
use agentd_store::RedbStore;
use agentd_tests::*;
use serde_json::{Value, json};
use std::sync::Arc;

const SCRIPT: &str = r#"
[[rule]]
agent = "coding"
role = "user"
contains = "long task"
delay_ms = 1000
text = "long task done"

[[rule]]
agent = "coding"
role = "user"
contains = "urgent"
text = "handled urgent"

[[rule]]
agent = "coding"
role = "user"
contains = "use the clock"
[[rule.tool_calls]]
name = "current_time"

[[rule]]
agent = "coding"
role = "user"
contains = "add tests"
text = """coder: add tests
=== PHASE 2 COMPLETE ===
[ERROR]lint failed[/ERROR]"""

[[rule]]
agent = "coding"
role = "user"
text = "coder: {{input}}"

[[rule]]
agent = "coding"
role = "tool"
text = "clock answer: {{input}}"

[[rule]]
agent = "mgr"
role = "user"
contains = "spawn grandchild"
[[rule.tool_calls]]
name = "spawn_agent"
arguments = { agent_type = "coding", prompt = "leaf work: long task" }

[[rule]]
agent = "mgr"
role = "tool"
text = "grandchild spawned"

[[rule]]
purpose = "compact"
text = "SUMMARY of earlier work"

[[rule]]
agent = "lead"
text = "lead: {{input}}"
"#;

/// [`cast`] with `coding` allowed `current_time`, and a root type `mgr` ("Manager") that
/// grants management.
fn managing_cast() -> Vec<AgentType> {
    let mut mgr = agent_type("mgr", "Manager", &[]);
    mgr.grants_management = true;
    cast().with_tools("coding", &["current_time"]).and(mgr)
}

async fn tool(
    sys: &TestSystem,
    caller: &str,
    name: &str,
    args: Value,
) -> Result<Value, AgentdError> {
    sys.system.invoke_tool(Some(caller), name, args).await
}

async fn spawn_coder(sys: &TestSystem, parent: &str, prompt: &str) -> String {
    let r = tool(
        sys,
        parent,
        "spawn_agent",
        json!({"agent_type": "coding", "prompt": prompt}),
    )
    .await
    .unwrap();
    r["agent_id"].as_str().unwrap().to_string()
}

fn code(r: Result<Value, AgentdError>) -> Option<ErrorCode> {
    r.err().map(|e| e.code)
}

#[actix_rt::test]
async fn every_management_tool_succeeds_on_its_path() {
    let sys = TestSystem::builder()
        .script(SCRIPT)
        .types(managing_cast())
        .start()
        .await;
    let mut events = sys.events();
    let lead = sys.root("lead", None).await;
    let child = spawn_coder(&sys, &lead.id, "write a parser").await;
    sys.wait_for_entry(&child, Role::Assistant, "coder: write a parser")
        .await;
    sys.wait_for_status(&child, AgentStatus::Idle).await;

    // follow-up
    let r = tool(
        &sys,
        &lead.id,
        "send_agent_followup",
        json!({"agent_id": child, "message": "add tests"}),
    )
    .await
    .unwrap();
    assert_eq!(r["status"], "sent");
    wait_until("the follow-up answered", || async {
        sys.thread(&child)
            .await
            .iter()
            .any(|e| e.role == Role::Assistant && e.text.starts_with("coder: add tests"))
    })
    .await;
    sys.wait_for_status(&child, AgentStatus::Idle).await;

    // inspect: status, tokens and cost, child count
    let v = tool(&sys, &lead.id, "inspect_agent", json!({"agentId": child}))
        .await
        .unwrap();
    assert_eq!(v["status"], "idle");
    assert_eq!(v["title"], "Coder");
    assert_eq!(v["children"], 0);
    assert_eq!(v["turns"], 2);
    assert!(v["tokens_used"].as_u64().unwrap() > 0);
    assert!(v["cost_usd"].as_f64().unwrap() > 0.0);
    // What the answer's markers said: its phase, the step that is its milestone, its error.
    assert_eq!(v["phase"], 2, "{v}");
    assert_eq!(v["current_step"], "phase 2 complete", "{v}");
    assert_eq!(v["last_error"], "lint failed", "{v}");

    // list
    let v = tool(&sys, &lead.id, "list_agents", json!({}))
        .await
        .unwrap();
    let agents = v["agents"].as_array().unwrap();
    assert_eq!(agents.len(), 1);
    assert_eq!(agents[0]["agent_id"], child.as_str());
    assert_eq!(agents[0]["status"], "idle");

    // compact: old history becomes a summary, recent entries stay
    for m in ["one", "two"] {
        tool(
            &sys,
            &lead.id,
            "send_agent_followup",
            json!({"agent_id": child, "message": m}),
        )
        .await
        .unwrap();
        sys.wait_for_entry(&child, Role::Assistant, &format!("coder: {m}"))
            .await;
    }
    sys.wait_for_status(&child, AgentStatus::Idle).await;
    assert_eq!(sys.thread(&child).await.len(), 8);
    let v = tool(&sys, &lead.id, "agent_compact", json!({"agent_id": child}))
        .await
        .unwrap();
    assert_eq!(v["target_agent_id"], child.as_str());
    assert!(v["summary"].as_str().unwrap().contains("compaction"));
    wait_until("compacted", || async {
        sys.thread(&child).await.len() == 5
    })
    .await;
    let t = sys.thread(&child).await;
    assert_eq!(t[0].role, Role::System);
    assert_eq!(
        t[0].text,
        "Summary of the earlier conversation: SUMMARY of earlier work"
    );
    let rest: Vec<&str> = t[1..].iter().map(|e| e.text.as_str()).collect();
    assert_eq!(rest, vec!["one", "coder: one", "two", "coder: two"]);

    // reset with a seed message: a fresh session that starts from it
    let v = tool(
        &sys,
        &lead.id,
        "agent_reset",
        json!({"agent_id": child, "message": "start over"}),
    )
    .await
    .unwrap();
    assert_eq!(v["target_agent_id"], child.as_str());
    wait_until("reset", || async {
        let t = sys.thread(&child).await;
        t.len() == 2 && t[0].text == "start over" && t[1].text == "coder: start over"
    })
    .await;
    // reset without a message: an empty session
    tool(&sys, &lead.id, "agent_reset", json!({"agent_id": child}))
        .await
        .unwrap();
    wait_until("empty", || async { sys.thread(&child).await.is_empty() }).await;

    // close keeps history; a follow-up re-opens it
    tool(
        &sys,
        &lead.id,
        "send_agent_followup",
        json!({"agent_id": child, "message": "before close"}),
    )
    .await
    .unwrap();
    sys.wait_for_entry(&child, Role::Assistant, "coder: before close")
        .await;
    sys.wait_for_status(&child, AgentStatus::Idle).await;
    let v = tool(&sys, &lead.id, "close_agent", json!({"agent_id": child}))
        .await
        .unwrap();
    assert_eq!(v["status"], "closed");
    assert_eq!(sys.record(&child).await.status, AgentStatus::Closed);
    let v = tool(&sys, &lead.id, "list_agents", json!({}))
        .await
        .unwrap();
    assert_eq!(
        v["agents"][0]["status"], "closed",
        "closed children are still listed"
    );
    tool(
        &sys,
        &lead.id,
        "send_agent_followup",
        json!({"agent_id": child, "message": "after close"}),
    )
    .await
    .unwrap();
    let t = sys
        .wait_for_entry(&child, Role::Assistant, "coder: after close")
        .await;
    let texts: Vec<&str> = t.iter().map(|e| e.text.as_str()).collect();
    assert_eq!(
        texts,
        vec![
            "before close",
            "coder: before close",
            "after close",
            "coder: after close"
        ]
    );

    // delete removes it for good
    sys.wait_for_status(&child, AgentStatus::Idle).await;
    let v = tool(&sys, &lead.id, "delete_agent", json!({"agent_id": child}))
        .await
        .unwrap();
    assert_eq!(v["status"], "deleted");
    assert!(sys.store.get_agent(&child).await.unwrap().is_none());
    assert!(sys.thread(&child).await.is_empty());
    assert!(
        tool(&sys, &lead.id, "list_agents", json!({}))
            .await
            .unwrap()["agents"]
            .as_array()
            .unwrap()
            .is_empty()
    );
    next_event(
        &mut events,
        "deleted",
        |e| matches!(e, Event::Deleted { agent_id } if *agent_id == child),
    )
    .await;
}

#[actix_rt::test]
async fn every_rule_is_enforced_with_its_code() {
    let sys = TestSystem::builder()
        .script(SCRIPT)
        .types(managing_cast())
        .start()
        .await;
    let lead = sys.root("lead", None).await;
    let other = sys.root("lead", None).await;
    let child = spawn_coder(&sys, &lead.id, "hello").await;
    let strangers_child = spawn_coder(&sys, &other.id, "hello").await;

    // self_target: no agent resets or compacts itself ("0" names its root, i.e. itself here)
    assert_eq!(
        code(tool(&sys, &lead.id, "agent_reset", json!({"agent_id": "0"})).await),
        Some(ErrorCode::SelfTarget)
    );
    assert_eq!(
        code(
            tool(
                &sys,
                &lead.id,
                "agent_compact",
                json!({"agent_id": lead.id})
            )
            .await
        ),
        Some(ErrorCode::SelfTarget)
    );
    // not_ancestor: only descendants
    for t in [
        "inspect_agent",
        "close_agent",
        "delete_agent",
        "agent_reset",
        "agent_compact",
    ] {
        assert_eq!(
            code(tool(&sys, &lead.id, t, json!({"agent_id": strangers_child})).await),
            Some(ErrorCode::NotAncestor),
            "{t}"
        );
    }
    assert_eq!(
        code(
            tool(
                &sys,
                &lead.id,
                "send_agent_followup",
                json!({"agent_id": other.id, "message": "x"})
            )
            .await
        ),
        Some(ErrorCode::NotAncestor)
    );
    // agent_not_found
    assert_eq!(
        code(tool(&sys, &lead.id, "inspect_agent", json!({"agent_id": "nope"})).await),
        Some(ErrorCode::AgentNotFound)
    );
    // not_root: a sub-agent has no management tools, and calling one is refused
    let child_tools: Vec<String> = sys
        .system
        .tools_of(&child)
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.name)
        .collect();
    assert_eq!(child_tools, vec!["current_time", "yield_to_parent"]);
    for t in ["spawn_agent", "agent_reset", "list_agents", "Manage"] {
        assert_eq!(
            code(tool(&sys, &child, t, json!({"agent_id": child, "prompt": "x"})).await),
            Some(ErrorCode::NotRoot),
            "{t}"
        );
    }
    // tool_not_allowed: a sub-agent spawned without current_time cannot use it
    let r = tool(
        &sys,
        &lead.id,
        "spawn_agent",
        json!({"agent_type": "coding", "prompt": "x", "allowed_tools": []}),
    )
    .await
    .unwrap();
    let restricted = r["agent_id"].as_str().unwrap();
    assert_eq!(
        code(tool(&sys, restricted, "current_time", json!({})).await),
        Some(ErrorCode::ToolNotAllowed)
    );
    assert_eq!(
        code(tool(&sys, &child, "current_time", json!({})).await),
        None
    );
    // unknown_tool, unknown_agent_type, missing_field, invalid_argument
    assert_eq!(
        code(tool(&sys, &lead.id, "rm_rf", json!({})).await),
        Some(ErrorCode::UnknownTool)
    );
    assert_eq!(
        code(
            tool(
                &sys,
                &lead.id,
                "spawn_agent",
                json!({"agent_type": "wizard", "prompt": "x"})
            )
            .await
        ),
        Some(ErrorCode::UnknownAgentType)
    );
    assert_eq!(
        code(
            tool(
                &sys,
                &lead.id,
                "spawn_agent",
                json!({"agent_type": "coding"})
            )
            .await
        ),
        Some(ErrorCode::MissingField)
    );
    assert_eq!(
        code(
            tool(
                &sys,
                &lead.id,
                "spawn_agent",
                json!({"prompt": "x", "allowed_tools": "all"})
            )
            .await
        ),
        Some(ErrorCode::InvalidArgument)
    );
    // depth_limit: with max_depth 1, a child of a child is refused
    let deeper = sys
        .system
        .spawn(SpawnRequest {
            agent_type: Some("coding".into()),
            parent_id: Some(child.clone()),
            prompt: Some("x".into()),
            ..Default::default()
        })
        .await;
    assert_eq!(deeper.err().map(|e| e.code), Some(ErrorCode::DepthLimit));
    // invalid_transition: resume an agent that is not paused; pause a closed one
    sys.wait_for_status(&other.id, AgentStatus::Idle).await;
    assert_eq!(
        sys.system
            .control(&other.id, Control::Resume)
            .await
            .err()
            .map(|e| e.code),
        Some(ErrorCode::InvalidTransition)
    );
    sys.wait_for_status(&strangers_child, AgentStatus::Idle)
        .await;
    sys.system
        .control(&strangers_child, Control::Close)
        .await
        .unwrap();
    assert_eq!(
        sys.system
            .control(&strangers_child, Control::Pause)
            .await
            .err()
            .map(|e| e.code),
        Some(ErrorCode::InvalidTransition)
    );
    assert_eq!(
        sys.record(&strangers_child).await.status,
        AgentStatus::Closed,
        "a refused transition changes nothing"
    );
}

#[actix_rt::test]
async fn an_interrupting_follow_up_aborts_the_turn_and_goes_first() {
    let sys = TestSystem::builder()
        .script(SCRIPT)
        .types(managing_cast())
        .manual_clock()
        .start()
        .await;
    let clock = sys.manual_clock();
    let lead = sys.root("lead", None).await;
    let child = spawn_coder(&sys, &lead.id, "long task").await;
    wait_until("long turn running", || async { clock.sleepers() == 1 }).await;
    tool(
        &sys,
        &lead.id,
        "send_agent_followup",
        json!({"agent_id": child, "message": "queued m1"}),
    )
    .await
    .unwrap();
    tool(
        &sys,
        &lead.id,
        "send_agent_followup",
        json!({"agent_id": child, "message": "urgent stop", "interrupt": true}),
    )
    .await
    .unwrap();
    sys.wait_for_entry(&child, Role::Assistant, "coder: queued m1")
        .await;
    clock.advance(5_000);
    sys.wait_for_status(&child, AgentStatus::Idle).await;
    let t = sys.thread(&child).await;
    let got: Vec<(Role, &str, bool)> = t
        .iter()
        .map(|e| (e.role, e.text.as_str(), e.interrupted))
        .collect();
    assert_eq!(
        got,
        vec![
            (Role::User, "long task", false),
            (Role::System, "(the previous turn was interrupted)", true),
            (Role::User, "urgent stop", false),
            (Role::Assistant, "handled urgent", false),
            (Role::User, "queued m1", false),
            (Role::Assistant, "coder: queued m1", false),
        ]
    );
    assert!(
        !t.iter().any(|e| e.text == "long task done"),
        "the aborted turn never answers"
    );
}

#[actix_rt::test]
async fn cancel_cascades_through_a_three_level_tree_deepest_first() {
    let sys = TestSystem::builder()
        .script(SCRIPT)
        .types(managing_cast())
        .manual_clock()
        .config(|c| c.limits.max_depth = 2)
        .start()
        .await;
    let clock = sys.manual_clock();
    let lead = sys.root("lead", None).await;
    let r = tool(
        &sys,
        &lead.id,
        "spawn_agent",
        json!({"agent_type": "mgr", "prompt": "spawn grandchild"}),
    )
    .await
    .unwrap();
    let mgr = r["agent_id"].as_str().unwrap().to_string();
    sys.wait_for_entry(&mgr, Role::Assistant, "grandchild spawned")
        .await;
    let kids = sys.store.children(&mgr).await.unwrap();
    assert_eq!(kids.len(), 1);
    let leaf = kids[0].clone();
    assert_eq!(sys.record(&leaf).await.depth, 2);
    // The manager (depth 1 < max_depth 2) manages; reset/compact stay foreground-only.
    let mgr_tools: Vec<String> = sys
        .system
        .tools_of(&mgr)
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.name)
        .collect();
    assert!(
        mgr_tools.contains(&"spawn_agent".to_string())
            && !mgr_tools.contains(&"agent_reset".to_string()),
        "{mgr_tools:?}"
    );
    assert_eq!(
        code(tool(&sys, &mgr, "agent_reset", json!({"agent_id": leaf})).await),
        Some(ErrorCode::NotRoot)
    );
    // The leaf (depth 2) does not.
    assert_eq!(
        code(tool(&sys, &leaf, "spawn_agent", json!({"prompt": "x"})).await),
        Some(ErrorCode::NotRoot)
    );
    wait_until("leaf running", || async { clock.sleepers() == 1 }).await;

    let mut events = sys.events();
    sys.system.control(&lead.id, Control::Cancel).await.unwrap();
    let mut order = Vec::new();
    while order.len() < 3 {
        if let Event::StatusChanged {
            agent_id,
            to: AgentStatus::Cancelled,
            ..
        } = next_event(&mut events, "cancelled", |e| {
            matches!(
                e,
                Event::StatusChanged {
                    to: AgentStatus::Cancelled,
                    ..
                }
            )
        })
        .await
        {
            order.push(agent_id);
        }
    }
    assert_eq!(order, vec![leaf.clone(), mgr.clone(), lead.id.clone()]);
    for id in [&leaf, &mgr, &lead.id] {
        assert_eq!(sys.record(id).await.status, AgentStatus::Cancelled);
    }
    // A follow-up re-opens a cancelled agent as a new task.
    sys.system.send(&lead.id, "again", false).await.unwrap();
    sys.wait_for_entry(&lead.id, Role::Assistant, "lead: again")
        .await;
}

#[actix_rt::test]
async fn fifty_concurrent_spawns_against_a_fanout_of_ten_make_exactly_ten() {
    let sys = TestSystem::builder()
        .script(SCRIPT)
        .types(managing_cast())
        .config(|c| c.limits.max_children = 10)
        .start()
        .await;
    let lead = sys.root("lead", None).await;
    let calls = (0..50).map(|i| {
        let s = sys.system.clone();
        let id = lead.id.clone();
        actix_rt::spawn(async move {
            s.invoke_tool(
                Some(&id),
                "spawn_agent",
                json!({"agent_type": "coding", "prompt": format!("job {i}")}),
            )
            .await
        })
    });
    let results = futures::future::join_all(calls).await;
    let ok = results.iter().filter(|r| matches!(r, Ok(Ok(_)))).count();
    let limited = results
        .iter()
        .filter(|r| matches!(r, Ok(Err(e)) if e.code == ErrorCode::FanoutLimit))
        .count();
    assert_eq!((ok, limited), (10, 40));
    assert_eq!(sys.store.children(&lead.id).await.unwrap().len(), 10);
}

#[actix_rt::test]
async fn pause_holds_work_resume_releases_it_terminate_stops() {
    let sys = TestSystem::builder()
        .script(SCRIPT)
        .types(managing_cast())
        .start()
        .await;
    let lead = sys.root("lead", None).await;
    let rec = sys
        .system
        .control(&lead.id, Control::Pause)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(rec.status, AgentStatus::Paused);
    sys.system.send(&lead.id, "held", false).await.unwrap();
    // Held while paused: the item is in the agent's inbox, and nothing ran.
    wait_until("item queued", || async {
        sys.system.inspect(&lead.id).await.unwrap().live.inbox == Some(1)
    })
    .await;
    let snapshot = sys.system.inspect(&lead.id).await.unwrap();
    assert_eq!(snapshot.view.summary.status, AgentStatus::Paused);
    assert_eq!(snapshot.live.turn_running, Some(false));
    assert!(sys.thread(&lead.id).await.is_empty());
    sys.system.control(&lead.id, Control::Resume).await.unwrap();
    sys.wait_for_entry(&lead.id, Role::Assistant, "lead: held")
        .await;
    let rec = sys.wait_for_status(&lead.id, AgentStatus::Idle).await;
    assert_eq!(rec.turns, 1);
    let rec = sys
        .system
        .control(&lead.id, Control::Terminate)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(rec.status, AgentStatus::Terminated);
    sys.system.send(&lead.id, "new task", false).await.unwrap();
    sys.wait_for_entry(&lead.id, Role::Assistant, "lead: new task")
        .await;
}

#[actix_rt::test]
async fn delete_leaves_no_row_behind_in_the_embedded_store() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(RedbStore::open(dir.path()).unwrap());
    let sys = TestSystem::builder()
        .script(SCRIPT)
        .types(managing_cast())
        .store(store.clone())
        .start()
        .await;
    let lead = sys.root("lead", Some("hi")).await;
    let keep = sys.root("lead", Some("keep me")).await;
    let child = spawn_coder(&sys, &lead.id, "work").await;
    let m = tool(
        &sys,
        &lead.id,
        "Manage",
        json!({"command": "send_message", "worker": "Ops", "message": "x", "threadAlias": "a"}),
    )
    .await
    .unwrap();
    let worker = m["childThreadId"].as_str().unwrap().to_string();
    sys.wait_for_entry(&child, Role::Assistant, "coder: work")
        .await;
    sys.wait_for_entry(&keep.id, Role::Assistant, "lead: keep me")
        .await;
    for id in [&lead.id, &child, &worker] {
        assert!(store.rows_mentioning(id).await.unwrap() > 0);
    }
    sys.system.control(&lead.id, Control::Delete).await.unwrap();
    for id in [&lead.id, &child, &worker] {
        assert_eq!(
            store.rows_mentioning(id).await.unwrap(),
            0,
            "rows left for {id}"
        );
    }
    assert!(
        store.rows_mentioning(&keep.id).await.unwrap() > 0,
        "other trees are untouched"
    );
    assert_eq!(
        sys.system.inspect(&lead.id).await.err().map(|e| e.code),
        Some(ErrorCode::AgentNotFound)
    );
}

#[actix_rt::test]
async fn external_callers_are_scoped_to_the_root_they_name() {
    let sys = TestSystem::builder()
        .script(SCRIPT)
        .types(managing_cast())
        .start()
        .await;
    let a = sys.root("lead", None).await;
    let b = sys.root("lead", None).await;
    let scoped = |cmd: Command| {
        let s = sys.system.clone();
        let root = a.id.clone();
        async move { s.execute_scoped(cmd, Some(&root)).await }
    };
    let v = scoped(Command::Spawn(Box::new(SpawnRequest {
        agent_type: Some("coding".into()),
        prompt: Some("scoped".into()),
        ..Default::default()
    })))
    .await
    .unwrap();
    assert_eq!(
        v["parent_id"],
        a.id.as_str(),
        "a scoped spawn lands under the scope root"
    );
    assert_eq!(
        scoped(Command::Inspect {
            agent_id: b.id.clone()
        })
        .await
        .err()
        .map(|e| e.code),
        Some(ErrorCode::NotAncestor)
    );
    assert_eq!(
        scoped(Command::Send {
            agent_id: b.id.clone(),
            text: "x".into(),
            interrupt: false,
            idempotency_key: None,
        })
        .await
        .err()
        .map(|e| e.code),
        Some(ErrorCode::NotAncestor)
    );
    let listed = scoped(Command::List { parent_id: None }).await.unwrap();
    assert_eq!(listed["agents"].as_array().unwrap().len(), 1);
    assert!(
        scoped(Command::Inspect {
            agent_id: a.id.clone()
        })
        .await
        .is_ok()
    );
}

#[actix_rt::test]
async fn the_live_agent_limit_is_enforced_and_freed_by_close() {
    let sys = TestSystem::builder()
        .script(SCRIPT)
        .types(managing_cast())
        .config(|c| c.limits.max_live_agents = 2)
        .start()
        .await;
    let a = sys.root("lead", None).await;
    let _b = sys.root("lead", None).await;
    let third = sys
        .system
        .spawn(SpawnRequest {
            agent_type: Some("lead".into()),
            ..Default::default()
        })
        .await;
    assert_eq!(third.err().map(|e| e.code), Some(ErrorCode::Unavailable));
    sys.system.control(&a.id, Control::Close).await.unwrap();
    wait_until("slot freed", || async {
        sys.system
            .spawn(SpawnRequest {
                agent_type: Some("lead".into()),
                ..Default::default()
            })
            .await
            .is_ok()
    })
    .await;
}

#[actix_rt::test]
async fn a_tool_using_sub_agent_runs_its_allowed_tool() {
    let sys = TestSystem::builder()
        .script(SCRIPT)
        .types(managing_cast())
        .start()
        .await;
    let lead = sys.root("lead", None).await;
    let child = spawn_coder(&sys, &lead.id, "use the clock").await;
    let t = sys
        .wait_for_entry(&child, Role::Assistant, "clock answer")
        .await;
    let tool_entry = t.iter().find(|e| e.role == Role::Tool).unwrap();
    assert!(tool_entry.text.contains("now_ms"), "{}", tool_entry.text);
    assert_eq!(
        tool_entry.tool_call_id.as_deref(),
        t.iter()
            .find(|e| !e.tool_calls.is_empty())
            .map(|e| e.tool_calls[0].id.as_str())
    );
}

#[actix_rt::test]
async fn context_files_are_attached_only_from_allowed_directories_and_capped() {
    let allowed = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(allowed.path().join("spec.md"), "the spec says hello").unwrap();
    std::fs::write(allowed.path().join("big.txt"), "x".repeat(2048)).unwrap();
    std::fs::write(outside.path().join("secret.txt"), "top secret").unwrap();
    #[cfg(unix)]
    std::os::unix::fs::symlink(
        outside.path().join("secret.txt"),
        allowed.path().join("link.txt"),
    )
    .unwrap();
    let dir = allowed.path().to_path_buf();
    let sys = TestSystem::builder()
        .script(SCRIPT)
        .types(managing_cast())
        .config(move |c| {
            c.context_dirs = vec![dir];
            c.limits.context_file_max_bytes = 1024;
        })
        .start()
        .await;
    let lead = sys.root("lead", None).await;
    let spec = allowed.path().join("spec.md").display().to_string();
    let r = tool(
        &sys,
        &lead.id,
        "spawn_agent",
        json!({"agent_type": "coding", "prompt": "read it", "contextFiles": [spec]}),
    )
    .await
    .unwrap();
    let child = r["agent_id"].as_str().unwrap();
    let t = sys.wait_for_entry(child, Role::User, "read it").await;
    assert!(
        t[0].text.contains("the spec says hello") && t[0].text.contains("<context_file"),
        "{}",
        t[0].text
    );
    // A path relative to a context dir is read from there.
    let r = tool(
        &sys,
        &lead.id,
        "spawn_agent",
        json!({"agent_type": "coding", "prompt": "relative", "context_files": ["./spec.md"]}),
    )
    .await
    .unwrap();
    let child = r["agent_id"].as_str().unwrap();
    let t = sys.wait_for_entry(child, Role::User, "relative").await;
    assert!(t[0].text.contains("the spec says hello"), "{}", t[0].text);

    let escape = format!(
        "{}/../{}/secret.txt",
        allowed.path().display(),
        outside.path().file_name().unwrap().to_string_lossy()
    );
    let relative_escape = format!(
        "../{}/secret.txt",
        outside.path().file_name().unwrap().to_string_lossy()
    );
    let big = allowed.path().join("big.txt").display().to_string();
    let r = tool(
        &sys,
        &lead.id,
        "spawn_agent",
        json!({"agent_type": "coding", "prompt": "x", "context_files": [big]}),
    )
    .await;
    assert_eq!(code(r), Some(ErrorCode::PayloadTooLarge));
    // Outside (existing or not, directly, by `..` or through a link), missing, or not a
    // readable file: one answer, so nothing can be learnt about files outside the dirs.
    for file in [
        outside.path().join("secret.txt").display().to_string(),
        outside.path().join("missing.txt").display().to_string(),
        "/etc/hostname".to_string(),
        escape,
        relative_escape,
        allowed.path().join("link.txt").display().to_string(),
        allowed.path().join("missing.txt").display().to_string(),
        allowed.path().display().to_string(),
        String::new(),
    ] {
        let r = tool(
            &sys,
            &lead.id,
            "spawn_agent",
            json!({"agent_type": "coding", "prompt": "x", "context_files": [file]}),
        )
        .await;
        let e = r.unwrap_err();
        assert_eq!(e.code, ErrorCode::InvalidArgument, "{file}: {e}");
        assert_eq!(
            e.message,
            format!(
                "context file `{file}` is not a readable text file inside the context \
                 directories (agents.context_dirs)"
            ),
        );
    }
}

#[actix_rt::test]
async fn the_system_prompt_stacks_base_subagent_and_type_overlays() {
    const ECHO_PROMPT: &str = "[[rule]]\ntext = \"{{system_prompt}}\"\n";
    let mut t = managing_cast();
    for ty in &mut t {
        if ty.name == "coding" {
            ty.prompt = "TYPE OVERLAY".into();
        }
    }
    let sys = TestSystem::builder()
        .script(ECHO_PROMPT)
        .types(t)
        .config(|c| {
            c.base_prompt = "BASE".into();
            c.subagent_prompt = "SUBAGENT ROLE".into();
        })
        .start()
        .await;
    let lead = sys.root("lead", Some("hi")).await;
    let root_prompt = sys.wait_for_entry(&lead.id, Role::Assistant, "BASE").await;
    assert_eq!(
        root_prompt.last().unwrap().text,
        "BASE",
        "roots get no sub-agent overlay"
    );
    let child = spawn_coder(&sys, &lead.id, "go").await;
    let t = sys.wait_for_entry(&child, Role::Assistant, "BASE").await;
    assert_eq!(
        t.last().unwrap().text,
        "BASE\n\nSUBAGENT ROLE\n\nTYPE OVERLAY"
    );
}

#[actix_rt::test]
async fn tool_arguments_are_checked_against_the_schema_the_model_sees() {
    let sys = TestSystem::builder()
        .script(SCRIPT)
        .types(managing_cast())
        .start()
        .await;
    let lead = sys.root("lead", None).await;
    for (name, args, expected) in [
        (
            "Manage",
            json!({"command": "send_message", "worker": "Coder", "threadAlias": "a", "message": "hi", "syncTimeoutMs": "soon"}),
            ErrorCode::InvalidArgument,
        ),
        (
            "Manage",
            json!({"command": "reboot", "threadAlias": "a"}),
            ErrorCode::InvalidArgument,
        ),
        (
            "spawn_agent",
            json!({"prompt": "x", "priority": "urgent"}),
            ErrorCode::InvalidArgument,
        ),
        (
            "spawn_agent",
            json!({"prompt": "x", "budget": {"max_tokens": -5}}),
            ErrorCode::InvalidArgument,
        ),
        (
            "send_agent_followup",
            json!({"agentId": "x"}),
            ErrorCode::MissingField,
        ),
        (
            "send_agent_followup",
            json!({"agent_id": "x", "message": "m", "interrupt": "yes"}),
            ErrorCode::InvalidArgument,
        ),
    ] {
        let r = tool(&sys, &lead.id, name, args.clone()).await;
        assert_eq!(code(r), Some(expected), "{name} {args}");
    }
    // camelCase spellings of snake_case fields pass the check.
    let r = tool(
        &sys,
        &lead.id,
        "spawn_agent",
        json!({"prompt": "camel", "agentType": "coding", "allowedTools": []}),
    )
    .await
    .unwrap();
    assert_eq!(r["agent_type"], "coding");
}

#[actix_rt::test]
async fn reset_and_compact_take_seed_003_arguments_and_nothing_else() {
    let sys = TestSystem::builder()
        .script(SCRIPT)
        .types(managing_cast())
        .start()
        .await;
    let lead = sys.root("lead", None).await;
    let child = spawn_coder(&sys, &lead.id, "hello").await;
    sys.wait_for_entry(&child, Role::Assistant, "coder: hello")
        .await;
    sys.wait_for_status(&child, AgentStatus::Idle).await;

    // The schemas the model is shown say so.
    let specs = sys.system.tools_of(&lead.id).await.unwrap();
    for name in ["agent_reset", "agent_compact"] {
        let spec = specs.iter().find(|s| s.name == name).unwrap();
        assert_eq!(spec.parameters["additionalProperties"], false, "{name}");
    }
    let reset = specs.iter().find(|s| s.name == "agent_reset").unwrap();
    assert_eq!(reset.parameters["properties"]["message"]["minLength"], 1);
    for name in ["agent_reset", "agent_compact"] {
        let spec = specs.iter().find(|s| s.name == name).unwrap();
        assert_eq!(
            spec.parameters["properties"]["agent_id"]["minLength"], 1,
            "{name}"
        );
    }

    // Refused, and nothing is posted: an empty message, an unknown property (also one that is
    // an alias of nothing), a property given in both spellings.
    for (name, args) in [
        ("agent_reset", json!({"agent_id": ""})),
        ("agent_compact", json!({"agent_id": ""})),
        ("agent_compact", json!({"agentId": ""})),
        ("agent_reset", json!({"agent_id": child, "message": ""})),
        ("agent_reset", json!({"agent_id": child, "force": true})),
        ("agent_reset", json!({"agentId": child, "seedMessage": "x"})),
        ("agent_reset", json!({"agentId": child, "agent_id": child})),
        (
            "agent_compact",
            json!({"agent_id": child, "keep_recent": 2}),
        ),
        ("agent_compact", json!({"agentId": child, "message": "x"})),
    ] {
        let r = tool(&sys, &lead.id, name, args.clone()).await;
        assert_eq!(code(r), Some(ErrorCode::InvalidArgument), "{name} {args}");
    }
    assert_eq!(sys.thread(&child).await.len(), 2, "nothing was reset");

    // The camelCase alias is rewritten before the check; the answer is snake_case and only
    // {summary, target_agent_id}.
    let v = tool(
        &sys,
        &lead.id,
        "agent_reset",
        json!({"agentId": child, "message": "again"}),
    )
    .await
    .unwrap();
    let mut keys: Vec<&String> = v.as_object().unwrap().keys().collect();
    keys.sort();
    assert_eq!(keys, ["summary", "target_agent_id"]);
    assert_eq!(v["target_agent_id"], child.as_str());
    wait_until("reset on the seed message", || async {
        let t = sys.thread(&child).await;
        t.len() == 2 && t[0].text == "again"
    })
    .await;
    sys.wait_for_status(&child, AgentStatus::Idle).await;
    let v = tool(&sys, &lead.id, "agent_compact", json!({"agentId": child}))
        .await
        .unwrap();
    let mut keys: Vec<&String> = v.as_object().unwrap().keys().collect();
    keys.sort();
    assert_eq!(keys, ["summary", "target_agent_id"]);
    // A blank message has characters, so the schema takes it; it seeds nothing.
    tool(
        &sys,
        &lead.id,
        "agent_reset",
        json!({"agent_id": child, "message": "   "}),
    )
    .await
    .unwrap();
    wait_until("an empty session", || async {
        sys.thread(&child).await.is_empty()
    })
    .await;
}

#[actix_rt::test]
async fn a_background_root_neither_sees_nor_calls_management_tools() {
    let sys = TestSystem::builder()
        .script(SCRIPT)
        .types(managing_cast())
        .start()
        .await;
    let foreground = sys.root("lead", None).await;
    let child = spawn_coder(&sys, &foreground.id, "hello").await;
    // A cron-like job: a root of a managing type, and one whose type grants management.
    let mut jobs = Vec::new();
    for agent_type in ["lead", "mgr"] {
        let job = sys
            .system
            .spawn(SpawnRequest {
                agent_type: Some(agent_type.into()),
                background: true,
                ..Default::default()
            })
            .await
            .unwrap();
        assert!(!job.foreground, "{agent_type}");
        jobs.push(job);
    }
    assert!(foreground.foreground);
    let names = |specs: Vec<agentd_actors::ToolSpec>| -> Vec<String> {
        specs.into_iter().map(|t| t.name).collect()
    };
    let fg_tools = names(sys.system.tools_of(&foreground.id).await.unwrap());
    for t in ["Manage", "spawn_agent", "agent_reset", "agent_compact"] {
        assert!(fg_tools.contains(&t.to_string()), "{t}");
    }
    for job in &jobs {
        let tools = names(sys.system.tools_of(&job.id).await.unwrap());
        assert!(tools.is_empty(), "{}: {tools:?}", job.agent_type);
        let sub = spawn_coder(&sys, &foreground.id, "x").await;
        for (t, args) in [
            ("agent_reset", json!({"agent_id": child})),
            ("agent_compact", json!({"agent_id": child})),
            ("spawn_agent", json!({"prompt": "x"})),
            ("list_agents", json!({})),
            ("inspect_agent", json!({"agent_id": sub})),
            (
                "Manage",
                json!({"command": "check_status", "threadAlias": "a"}),
            ),
        ] {
            assert_eq!(
                code(tool(&sys, &job.id, t, args).await),
                Some(ErrorCode::NotRoot),
                "{} calling {t}",
                job.agent_type
            );
        }
    }
}
