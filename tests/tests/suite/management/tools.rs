//! Every management tool on its success path, every rule with its error code, argument schemas, reset and compact arguments, who may call the tools and on which agents.

use super::*;

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
