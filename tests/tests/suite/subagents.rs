//! Sub-agents through real actors: spawn → work → yield → the parent hears back without
//! polling, ahead of what was queued (seeds 002 and 004); failures stay with the failing agent.

use agentd_proto::{AgentStatus, ErrorCode, Event, Role};
use agentd_tests::*;
use serde_json::json;
use std::sync::Arc;

const SCRIPT: &str = r#"
[[rule]]
agent = "lead"
role = "user"
contains = "From Coder"
text = "Thanks, coder: {{input}}"

[[rule]]
agent = "lead"
role = "user"
contains = "busy"
delay_ms = 1000
text = "finished the busy work"

[[rule]]
agent = "lead"
role = "user"
contains = "spawn one"
text = "Spawning."
[[rule.tool_calls]]
name = "spawn_agent"
arguments = { agent_type = "worker", prompt = "write the code", allowed_tools = ["current_time"] }

[[rule]]
agent = "lead"
role = "tool"
text = "Spawned; waiting."

[[rule]]
agent = "lead"
text = "lead saw: {{input}}"

[[rule]]
agent = "coding"
role = "user"
contains = "write the code"
text = "On it."
[[rule.tool_calls]]
name = "yield_to_parent"
arguments = { result = "code written" }

[[rule]]
agent = "coding"
role = "user"
contains = "json please"
[[rule.tool_calls]]
name = "yield_to_parent"
arguments = { result = { files = 2, ok = true } }

[[rule]]
agent = "coding"
role = "user"
contains = "yield then more"
[[rule.tool_calls]]
name = "yield_to_parent"
arguments = { result = "early" }
[[rule.tool_calls]]
name = "current_time"
arguments = {}

[[rule]]
agent = "coding"
role = "user"
contains = "yield badly"
[[rule.tool_calls]]
name = "yield_to_parent"
arguments = {}

[[rule]]
agent = "coding"
role = "tool"
contains = "missing_field"
once = true
[[rule.tool_calls]]
name = "yield_to_parent"
arguments = { answer = "misnamed" }

[[rule]]
agent = "coding"
role = "tool"
contains = "missing_field"
[[rule.tool_calls]]
name = "yield_to_parent"
arguments = { result = "third time right" }

[[rule]]
agent = "coding"
role = "user"
contains = "try manage"
[[rule.tool_calls]]
name = "spawn_agent"
arguments = { prompt = "nested" }

[[rule]]
agent = "coding"
role = "user"
contains = "more please"
text = "more done"

[[rule]]
agent = "coding"
role = "tool"
text = "tool result: {{input}}"

[[rule]]
agent = "plain"
contains = "explode"
panic = "boom in the model"

[[rule]]
agent = "plain"
contains = "fail"
error = "provider said no"

[[rule]]
agent = "plain"
text = "plain ok: {{input}}"
"#;

#[actix_rt::test]
async fn spawn_work_yield_answer_round_trip() {
    let mut types = cast();
    for t in &mut types {
        match t.name.as_str() {
            "coding" => t.prompt = "You write code.".into(),
            "lead" => t.prompt = "You lead.".into(),
            _ => {}
        }
    }
    let (sys, model) = on_a_recording_model_with(types.clone()).await;
    let mut events = sys.events();
    let lead = sys.root("lead", Some("spawn one")).await;
    let thread = sys
        .wait_for_entry(&lead.id, Role::Assistant, "Thanks, coder")
        .await;
    // The yield arrived as a user message with the sub-agent's prefix, then the lead answered.
    let fwd = thread
        .iter()
        .find(|e| e.text == "From Coder: code written")
        .expect("forwarded yield");
    assert_eq!(fwd.role, Role::User);
    assert_eq!(
        thread.last().unwrap().text,
        "Thanks, coder: From Coder: code written"
    );
    let child_id = fwd.from_agent.as_deref().unwrap().to_string();
    let child = sys.wait_for_status(&child_id, AgentStatus::Completed).await;
    assert_eq!(
        child.result.as_deref().cloned(),
        Some(json!("code written"))
    );
    assert_eq!(&*child.agent_type, "coding", "worker is an alias of coding");
    assert_eq!(child.depth, 1);
    assert_eq!(child.allowed_tools, Some(vec!["current_time".to_string()]));
    next_event(
        &mut events,
        "yielded",
        |e| matches!(e, Event::Yielded { agent_id, .. } if *agent_id == child_id),
    )
    .await;
    // The sub-agent's model was sent the three prompt layers, in order — the base, the
    // sub-agent's role, its type's overlay — and shown only its allowed tools.
    let config = agentd_actors::config::RuntimeConfig::with_types(
        agentd_actors::config::AgentTypes::new(types.clone()).unwrap(),
    );
    let coding = types.iter().find(|t| t.name == "coding").unwrap();
    let layers = [
        config.base_prompt.trim(),
        config.subagent_prompt.trim(),
        coding.prompt.trim(),
    ];
    assert!(layers.iter().all(|l| !l.is_empty()), "{layers:?}");
    let asked = model.requests_of(&child_id);
    assert!(!asked.is_empty());
    for request in &asked {
        assert_eq!(request.system_prompt, layers.join("\n\n"));
        assert_eq!(
            request.tools,
            vec!["yield_to_parent"],
            "coding type lists no regular tools, so only yield remains"
        );
    }
    // The lead, a root, was sent the base and its type's overlay only.
    let lead_asked = model.requests_of(&lead.id);
    let root_layers = [config.base_prompt.trim(), "You lead."];
    assert_eq!(lead_asked[0].system_prompt, root_layers.join("\n\n"));
}

#[actix_rt::test]
async fn a_yield_is_handled_before_messages_already_queued_for_the_parent() {
    let sys = TestSystem::builder()
        .script(SCRIPT)
        .manual_clock()
        .start()
        .await;
    let clock = sys.manual_clock();
    let lead = sys.root("lead", Some("busy")).await;
    wait_until("lead model busy", || async { clock.sleepers() == 1 }).await;
    sys.system.send(&lead.id, "m1", false).await.unwrap();
    sys.system.send(&lead.id, "m2", false).await.unwrap();
    let mut events = sys.events();
    let spawned = sys
        .system
        .invoke_tool(
            Some(&lead.id),
            "spawn_agent",
            json!({"agent_type": "coding", "prompt": "write the code"}),
        )
        .await
        .unwrap();
    let child = spawned["agent_id"].as_str().unwrap().to_string();
    next_event(
        &mut events,
        "forward to lead",
        |e| matches!(e, Event::Forwarded { child_id, .. } if *child_id == child),
    )
    .await;
    clock.advance(1000);
    sys.wait_for_entry(&lead.id, Role::Assistant, "lead saw: m2")
        .await;
    let users: Vec<String> = sys.texts_of(&lead.id, Role::User).await;
    assert_eq!(users, vec!["busy", "From Coder: code written", "m1", "m2"]);
}

#[actix_rt::test]
async fn a_background_sub_agent_s_result_waits_its_turn_in_the_parent_s_inbox() {
    let sys = TestSystem::builder()
        .script(SCRIPT)
        .manual_clock()
        .start()
        .await;
    let clock = sys.manual_clock();
    let lead = sys.root("lead", Some("busy")).await;
    wait_until("lead model busy", || async { clock.sleepers() == 1 }).await;
    sys.system.send(&lead.id, "m1", false).await.unwrap();
    sys.system.send(&lead.id, "m2", false).await.unwrap();
    let mut events = sys.events();
    let spawn = |args: serde_json::Value| {
        let sys = &sys;
        let lead_id = lead.id.clone();
        async move {
            let r = sys
                .system
                .invoke_tool(Some(&lead_id), "spawn_agent", args)
                .await
                .unwrap();
            r["agent_id"].as_str().unwrap().to_string()
        }
    };
    // The background child yields first; the other one's result still goes before it.
    let background =
        spawn(json!({"agent_type": "coding", "prompt": "json please", "background": true})).await;
    next_event(
        &mut events,
        "the background result forwarded",
        |e| matches!(e, Event::Forwarded { child_id, .. } if *child_id == background),
    )
    .await;
    let foreground = spawn(json!({"agent_type": "coding", "prompt": "write the code"})).await;
    next_event(
        &mut events,
        "the other result forwarded",
        |e| matches!(e, Event::Forwarded { child_id, .. } if *child_id == foreground),
    )
    .await;
    clock.advance(1000);
    sys.wait_for_entry(&lead.id, Role::Assistant, "Thanks, coder: From Coder: {")
        .await;
    let users: Vec<String> = sys.texts_of(&lead.id, Role::User).await;
    assert_eq!(
        users,
        vec![
            "busy",
            "From Coder: code written",
            "m1",
            "m2",
            r#"From Coder: {"files":2,"ok":true}"#
        ]
    );
    assert!(matches!(
        sys.record(&background).await.channel,
        agentd_proto::Channel::Spawn {
            background: true,
            ..
        }
    ));
}

#[actix_rt::test]
async fn a_yielded_sub_agent_is_passivated_and_frees_its_live_slot() {
    // The lead and one more live agent.
    let sys = TestSystem::builder()
        .script(SCRIPT)
        .config(|c| c.limits.max_live_agents = 2)
        .start()
        .await;
    let live = || async { sys.system.live_count().await.unwrap() };
    let lead = sys.root("lead", None).await;
    let child = sys.spawn_child(&lead.id, "coding", "write the code").await;
    sys.wait_for_entry(
        &lead.id,
        Role::Assistant,
        "Thanks, coder: From Coder: code written",
    )
    .await;
    wait_until("the yielded child passivated", || async {
        live().await == 1
    })
    .await;
    // Its record and its history stay.
    let v = sys.system.inspect(&child).await.unwrap();
    assert_eq!(v.live.live, Some(false));
    assert_eq!(v.view.summary.status, AgentStatus::Completed);
    assert_eq!(v.view.summary.result, Some(json!("code written")));
    let history = sys.thread(&child).await;
    assert_eq!(history[0].text, "write the code");
    assert!(history.iter().any(|e| e.role == Role::Tool), "{history:#?}");
    // Its slot is free: another sub-agent starts, and is passivated once it yields too.
    let second = sys.spawn_child(&lead.id, "coding", "json please").await;
    sys.wait_for_status(&second, AgentStatus::Completed).await;
    wait_until("the second child passivated", || async {
        live().await == 1
    })
    .await;
    // A follow-up re-activates the first on demand, on its whole history.
    sys.system
        .invoke_tool(
            Some(&lead.id),
            "send_agent_followup",
            json!({"agent_id": child, "message": "more please"}),
        )
        .await
        .unwrap();
    let thread = sys
        .wait_for_entry(&child, Role::Assistant, "more done")
        .await;
    assert_eq!(thread[..history.len()], history[..]);
    sys.wait_for_status(&child, AgentStatus::Idle).await;
    assert_eq!(
        live().await,
        2,
        "an agent that answered (not yielded) stays live"
    );
}

/// A system on [`SCRIPT`] whose model calls are recorded.
async fn on_a_recording_model() -> (TestSystem, Arc<RecordingModel>) {
    on_a_recording_model_with(cast()).await
}

/// [`on_a_recording_model`] with agent types `types`.
async fn on_a_recording_model_with(
    types: Vec<agentd_actors::AgentType>,
) -> (TestSystem, Arc<RecordingModel>) {
    let clock: Arc<dyn agentd_actors::Clock> = Arc::new(agentd_actors::SystemClock);
    let scripted = agentd_models::ScriptedModel::from_toml_str(SCRIPT, clock.clone()).unwrap();
    let model = Arc::new(RecordingModel::new(Arc::new(scripted)));
    let sys = TestSystem::builder()
        .model(model.clone())
        .types(types)
        .clock(clock)
        .start()
        .await;
    (sys, model)
}

#[actix_rt::test]
async fn no_model_call_follows_a_yield_to_parent() {
    let (sys, model) = on_a_recording_model().await;
    let lead = sys.root("lead", None).await;
    let child = sys.spawn_child(&lead.id, "coding", "write the code").await;
    sys.wait_for_entry(&lead.id, Role::Assistant, "Thanks, coder")
        .await;
    sys.wait_for_status(&child, AgentStatus::Completed).await;
    // The script would answer the yield's tool result ("tool result: …") if it were asked.
    let asked = model.requests_of(&child);
    assert_eq!(asked.len(), 1, "{asked:#?}");
    assert_eq!(
        asked[0].last,
        Some((Role::User, "write the code".to_string()))
    );
    let thread = sys.thread(&child).await;
    let last = thread.last().unwrap();
    assert_eq!(last.role, Role::Tool, "{thread:#?}");
    assert_eq!(last.text, r#"{"status":"yielded"}"#);
}

/// `yield_to_parent`'s arguments are checked in the turn: without `result` (absent, or under
/// another name) the call is a `missing_field` error the model reads, the agent does not
/// complete and its parent hears nothing; the model's next, well-formed call yields.
#[actix_rt::test]
async fn a_yield_without_a_result_is_refused_and_the_model_tries_again() {
    let (sys, model) = on_a_recording_model().await;
    let mut events = sys.events();
    let lead = sys.root("lead", None).await;
    let child = sys.spawn_child(&lead.id, "coding", "yield badly").await;
    let rec = sys.wait_for_status(&child, AgentStatus::Completed).await;
    assert_eq!(rec.result.as_deref(), Some(&json!("third time right")));
    let yielded = next_event(&mut events, "the one yield", |e| {
        matches!(e, Event::Yielded { .. })
    })
    .await;
    assert!(
        matches!(&yielded, Event::Yielded { agent_id, result, .. }
            if *agent_id == child && *result == json!("third time right")),
        "{yielded:?}"
    );

    let thread = sys.thread(&child).await;
    let results: Vec<_> = thread.iter().filter(|e| e.role == Role::Tool).collect();
    assert_eq!(results.len(), 3, "{thread:#?}");
    for refused in &results[..2] {
        assert!(refused.is_error, "{refused:?}");
        let v: serde_json::Value = serde_json::from_str(&refused.text).unwrap();
        assert_eq!(v["error"]["code"], "missing_field", "{v}");
        assert!(
            v["error"]["message"].as_str().unwrap().contains("result"),
            "names the field: {v}"
        );
    }
    assert_eq!(results[2].text, r#"{"status":"yielded"}"#);
    // Each refusal went back to the model; the yield ended the turn.
    let asked = model.requests_of(&child);
    assert_eq!(asked.len(), 3, "{asked:#?}");
    // The parent heard the one result, once.
    sys.wait_for_entry(&lead.id, Role::Assistant, "third time right")
        .await;
    let heard = sys
        .thread(&lead.id)
        .await
        .into_iter()
        .filter(|e| e.role != Role::Assistant && e.text.contains("From Coder"))
        .count();
    assert_eq!(heard, 1);
}

#[actix_rt::test]
async fn a_json_result_is_kept_as_json() {
    let sys = TestSystem::builder().script(SCRIPT).start().await;
    let lead = sys.root("lead", None).await;
    let r = sys
        .system
        .invoke_tool(
            Some(&lead.id),
            "spawn_subagent",
            json!({"agentType": "coding", "prompt": "json please"}),
        )
        .await
        .unwrap();
    let child = r["agent_id"].as_str().unwrap();
    let rec = sys.wait_for_status(child, AgentStatus::Completed).await;
    assert_eq!(
        rec.result.as_deref().cloned(),
        Some(json!({"files": 2, "ok": true}))
    );
    sys.wait_for_entry(&lead.id, Role::User, "\"files\":2")
        .await;
}

/// A yield ends the turn: a call the same step makes after it never runs, and still gets its one
/// result (an `interrupted` error), so the thread stays one a provider takes.
#[actix_rt::test]
async fn calls_after_a_yield_in_the_same_step_are_closed_not_run() {
    let sys = TestSystem::builder().script(SCRIPT).start().await;
    let lead = sys.root("lead", None).await;
    let child = sys.spawn_child(&lead.id, "coding", "yield then more").await;
    sys.wait_for_status(&child, AgentStatus::Completed).await;
    let t = sys.thread(&child).await;
    assert!(agentd_proto::conversation::is_paired(&t), "{t:#?}");
    let last = t.last().unwrap();
    assert_eq!(last.role, Role::Tool);
    assert!(last.text.contains("\"interrupted\""), "{}", last.text);
    assert!(!last.text.contains("now_ms"), "current_time never ran");
}

#[actix_rt::test]
async fn management_tools_are_hidden_from_sub_agents_and_refused_when_called() {
    let sys = TestSystem::builder().script(SCRIPT).start().await;
    let lead = sys.root("lead", None).await;
    let root_tools: Vec<String> = sys
        .system
        .tools_of(&lead.id)
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.name)
        .collect();
    assert!(
        root_tools.contains(&"Manage".to_string())
            && root_tools.contains(&"spawn_agent".to_string())
    );
    assert!(
        !root_tools.contains(&"yield_to_parent".to_string()),
        "roots cannot yield"
    );
    let r = sys
        .system
        .invoke_tool(
            Some(&lead.id),
            "spawn_agent",
            json!({"agent_type": "coding", "prompt": "try manage"}),
        )
        .await
        .unwrap();
    let child = r["agent_id"].as_str().unwrap().to_string();
    // The child's model called spawn_agent anyway: refused with not_root, visible on its thread.
    let thread = sys
        .wait_for_entry(&child, Role::Assistant, "tool result")
        .await;
    let tool = thread.iter().find(|e| e.role == Role::Tool).unwrap();
    assert!(tool.text.contains("not_root"), "{}", tool.text);
    // The sub-agent is shown none of the management tools, and yield_to_parent instead.
    let management = [
        "Manage",
        "spawn_agent",
        "send_agent_followup",
        "inspect_agent",
        "list_agents",
        "close_agent",
        "delete_agent",
        "agent_reset",
        "agent_compact",
    ];
    let child_tools: Vec<String> = sys
        .system
        .tools_of(&child)
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.name)
        .collect();
    for tool in management {
        assert!(
            root_tools.contains(&tool.to_string()),
            "the root sees {tool}: {root_tools:?}"
        );
        assert!(
            !child_tools.contains(&tool.to_string()),
            "the sub-agent does not see {tool}: {child_tools:?}"
        );
    }
    assert!(
        child_tools.contains(&"yield_to_parent".to_string()),
        "{child_tools:?}"
    );
    // And each one it calls all the same is refused, by its real name and by an alias.
    let calls = [
        (
            "Manage",
            json!({"command": "check_status", "threadAlias": "x"}),
        ),
        (
            "manage",
            json!({"command": "check_status", "threadAlias": "x"}),
        ),
        ("spawn_agent", json!({"prompt": "p"})),
        ("spawn_subagent", json!({"prompt": "p"})),
        (
            "send_agent_followup",
            json!({"agent_id": child, "message": "m"}),
        ),
        ("inspect_agent", json!({"agent_id": child})),
        ("list_agents", json!({})),
        ("close_agent", json!({"agent_id": child})),
        ("delete_agent", json!({"agent_id": child})),
        ("agent_reset", json!({"agent_id": child})),
        ("agent_compact", json!({"agent_id": child})),
    ];
    for (tool, args) in calls {
        let e = sys
            .system
            .invoke_tool(Some(&child), tool, args)
            .await
            .err()
            .unwrap_or_else(|| panic!("{tool} ran for a sub-agent"));
        assert_eq!(e.code, ErrorCode::NotRoot, "{tool}: {e:?}");
    }
    let after = sys.system.inspect(&child).await.unwrap();
    assert_ne!(
        after.view.summary.status,
        AgentStatus::Closed,
        "the refused close_agent closed nothing"
    );
    // A root cannot yield.
    let e = sys
        .system
        .invoke_tool(Some(&lead.id), "yield_to_parent", json!({"result": "x"}))
        .await
        .err()
        .unwrap();
    assert_eq!(e.code, ErrorCode::ToolNotAllowed);
}

#[actix_rt::test]
async fn a_panicking_turn_fails_only_its_agent() {
    let sys = TestSystem::builder().script(SCRIPT).start().await;
    let mut events = sys.events();
    let a = sys.root("plain", Some("explode now")).await;
    let b = sys.root("plain", None).await;
    let failed = sys.wait_for_status(&a.id, AgentStatus::Failed).await;
    assert!(
        failed
            .last_error
            .as_deref()
            .unwrap_or("")
            .contains("boom in the model"),
        "{failed:?}"
    );
    next_event(
        &mut events,
        "turn failed",
        |e| matches!(e, Event::TurnFailed { agent_id, .. } if *agent_id == a.id),
    )
    .await;
    // The other agent is unaffected.
    sys.system.send(&b.id, "hello", false).await.unwrap();
    sys.wait_for_entry(&b.id, Role::Assistant, "plain ok: hello")
        .await;
    // A model error fails too, with its code; a follow-up re-opens the failed agent.
    sys.system.send(&b.id, "fail please", false).await.unwrap();
    let rec = sys.wait_for_status(&b.id, AgentStatus::Failed).await;
    assert!(rec.last_error.unwrap().contains("model_error"));
    sys.system.send(&a.id, "again", false).await.unwrap();
    sys.wait_for_entry(&a.id, Role::Assistant, "plain ok: again")
        .await;
    sys.wait_for_status(&a.id, AgentStatus::Idle).await;
}

#[actix_rt::test]
async fn items_are_handled_in_arrival_order_per_agent() {
    let sys = TestSystem::builder().script(SCRIPT).start().await;
    let a = sys.root("plain", None).await;
    for i in 0..20 {
        sys.system
            .send(&a.id, &format!("msg {i}"), false)
            .await
            .unwrap();
    }
    sys.wait_for_entry(&a.id, Role::Assistant, "plain ok: msg 19")
        .await;
    let thread = sys.thread(&a.id).await;
    let users: Vec<String> = thread
        .iter()
        .filter(|e| e.role == Role::User)
        .map(|e| e.text.clone())
        .collect();
    let expected: Vec<String> = (0..20).map(|i| format!("msg {i}")).collect();
    assert_eq!(users, expected);
    // Each answer directly follows its message.
    for pair in thread.chunks(2) {
        assert_eq!(pair[1].text, format!("plain ok: {}", pair[0].text));
    }
}
