//! Interrupts, cascading cancels, pause, resume and terminate, delete, the fan-out and live-agent limits.

use super::*;

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
