//! The Manage tool (seed 000) through real actors: sync and async send_message, aliases,
//! check_status, the sync timeout on a manual clock, and every seed error by its code.

use agentd_proto::{AgentStatus, Control, ErrorCode, Event, ManageOptions, Role};
use agentd_tests::*;
use serde_json::{Value, json};
use std::sync::Arc;

const SCRIPT: &str = concat!(
    r#"
[[rule]]
agent = "lead"
role = "user"
contains = "delegate"
text = "Asking Ops."
[[rule.tool_calls]]
name = "Manage"
arguments = { command = "send_message", worker = "Ops", message = "deploy build 7", threadAlias = "deploy" }

[[rule]]
agent = "lead"
role = "user"
contains = "go async"
text = "Sent to Ops in the background."
[[rule.tool_calls]]
name = "Manage"
arguments = { command = "send_message", worker = "Ops", message = "status please", threadAlias = "bg", mode = "async" }

[[rule]]
agent = "lead"
role = "tool"
text = "Tool said: {{input}}"

[[rule]]
agent = "lead"
role = "user"
contains = "From Ops"
text = "Noted the forward: {{input}}"

[[rule]]
agent = "ops"
contains = "slow"
delay_ms = 20000
text = "ops late answer"

[[rule]]
agent = "ops"
contains = "doomed"
delay_ms = 20000
error = "ops broke"

"#,
    ops_two_answers!("two answers"),
    r#"
[[rule]]
agent = "ops"
text = "ops did: {{input}}"

[[rule]]
agent = "qa"
text = "qa checked: {{input}}"
"#
);

async fn manage(
    sys: &TestSystem,
    caller: &str,
    args: Value,
) -> Result<Value, agentd_proto::AgentdError> {
    sys.system.invoke_tool(Some(caller), "Manage", args).await
}

async fn check_status(sys: &TestSystem, caller: &str) -> Value {
    manage(
        sys,
        caller,
        json!({"command": "check_status", "threadAlias": "status"}),
    )
    .await
    .unwrap()
}

#[actix_rt::test]
async fn a_root_turn_calls_manage_sync_and_gets_the_answer_as_tool_result() {
    let sys = TestSystem::builder()
        .script(SCRIPT)
        .types(ops_with_clock(ManageOptions::default()))
        .start()
        .await;
    let lead = sys.root("lead", Some("please delegate this")).await;
    let thread = sys
        .wait_for_entry(&lead.id, Role::Assistant, "Tool said")
        .await;
    let tool = thread
        .iter()
        .find(|e| e.role == Role::Tool)
        .expect("tool entry");
    let result: Value = serde_json::from_str(&tool.text).unwrap();
    assert_eq!(result["status"], "ok");
    assert_eq!(result["messages"], json!(["ops did: deploy build 7"]));
    assert_eq!(result["threadAlias"], "deploy");
    // The child thread holds the conversation; its record names the parent.
    let child = result["childThreadId"].as_str().unwrap();
    let child_rec = sys.record(child).await;
    assert_eq!(child_rec.parent_id.as_deref(), Some(lead.id.as_str()));
    assert_eq!(&*child_rec.title, "Ops");
    let ct = sys.thread(child).await;
    assert_eq!(ct[0].role, Role::User);
    assert_eq!(ct[0].text, "deploy build 7");
    assert!(
        ct.iter()
            .any(|e| e.role == Role::Assistant && e.text == "ops did: deploy build 7")
    );
    sys.wait_for_status(&lead.id, AgentStatus::Idle).await;
}

#[actix_rt::test]
async fn two_workers_two_aliases_same_alias_same_child_and_check_status() {
    let sys = TestSystem::builder()
        .script(SCRIPT)
        .types(ops_with_clock(ManageOptions::default()))
        .start()
        .await;
    let lead = sys.root("lead", None).await;
    let a = manage(&sys, &lead.id, json!({"command": "send_message", "worker": "  Ops ", "message": "first", "threadAlias": "a1"})).await.unwrap();
    let b = manage(&sys, &lead.id, json!({"command": "send_message", "worker": "QA", "message": "check it", "threadAlias": "b1"})).await.unwrap();
    assert_eq!(a["messages"], json!(["ops did: first"]));
    assert_eq!(b["messages"], json!(["qa checked: check it"]));
    assert_eq!(a["created"], true);
    let a_child = a["childThreadId"].as_str().unwrap().to_string();
    let b_child = b["childThreadId"].as_str().unwrap().to_string();
    assert_ne!(a_child, b_child);

    // Same alias again (snake_case name this time) → same child thread, history kept.
    let a2 = manage(&sys, &lead.id, json!({"command": "send_message", "worker": "Ops", "message": "second", "thread_alias": "a1"})).await.unwrap();
    assert_eq!(a2["childThreadId"], a_child.as_str());
    assert_eq!(a2["created"], false);
    assert_eq!(a2["messages"], json!(["ops did: second"]));
    let texts: Vec<String> = sys.texts_of(&a_child, Role::User).await;
    assert_eq!(texts, vec!["first", "second"]);
    // Same alias under another worker is another thread.
    let a3 = manage(
        &sys,
        &lead.id,
        json!({"command": "send_message", "worker": "QA", "message": "x", "threadAlias": "a1"}),
    )
    .await
    .unwrap();
    assert_ne!(a3["childThreadId"], a_child.as_str());
    let a3_child = a3["childThreadId"].as_str().unwrap().to_string();

    let status = check_status(&sys, &lead.id).await;
    assert_eq!(status["activeTasks"], 3);
    let mut ids: Vec<String> = serde_json::from_value(status["childThreadIds"].clone()).unwrap();
    ids.sort();
    let mut expected = vec![a_child.clone(), b_child.clone(), a3_child.clone()];
    expected.sort();
    assert_eq!(ids, expected);

    // A closed child thread is no longer active; check_status only covers this parent.
    sys.system.control(&b_child, Control::Close).await.unwrap();
    let status = check_status(&sys, &lead.id).await;
    assert_eq!(status["activeTasks"], 2);
    assert!(
        !status["childThreadIds"]
            .as_array()
            .unwrap()
            .iter()
            .any(|v| v == b_child.as_str())
    );
    let other = sys.root("lead", None).await;
    let status = manage(
        &sys,
        &other.id,
        json!({"command": "check_status", "threadAlias": "s"}),
    )
    .await
    .unwrap();
    assert_eq!(status, json!({"activeTasks": 0, "childThreadIds": []}));
}

/// An alias whose child was deleted gets a new child; one that names a child never spawned (a
/// crash between the alias and the spawn) gets that child spawned. The parent router's memory
/// of the alias's last child is only a guess: the store decides.
#[actix_rt::test]
async fn an_alias_follows_its_child_through_deletion_and_a_missing_spawn() {
    let sys = TestSystem::builder()
        .script(SCRIPT)
        .types(ops_with_clock(ManageOptions::default()))
        .start()
        .await;
    let lead = sys.root("lead", None).await;
    let send = |text: &str| json!({"command": "send_message", "worker": "Ops", "message": text, "threadAlias": "w"});
    let first = manage(&sys, &lead.id, send("one")).await.unwrap();
    let first_child = first["childThreadId"].as_str().unwrap().to_string();
    let again = manage(&sys, &lead.id, send("two")).await.unwrap();
    assert_eq!(again["childThreadId"], first_child.as_str());
    assert_eq!(again["created"], false);

    // Deleted: the alias goes with it, and the next send makes a new child.
    sys.system
        .control(&first_child, Control::Delete)
        .await
        .unwrap();
    let after_delete = manage(&sys, &lead.id, send("three")).await.unwrap();
    let second_child = after_delete["childThreadId"].as_str().unwrap().to_string();
    assert_ne!(second_child, first_child);
    assert_eq!(after_delete["created"], true);
    assert_eq!(after_delete["messages"], json!(["ops did: three"]));

    // Deleted again, and the alias re-made elsewhere for a child that was never spawned: the
    // next send spawns exactly that child.
    sys.system
        .control(&second_child, Control::Delete)
        .await
        .unwrap();
    let orphan = agentd_proto::ids::new_id().to_string();
    let (named, created) = sys
        .store
        .alias_get_or_create(&lead.id, "Ops", "w", &orphan)
        .await
        .unwrap();
    assert_eq!((named.as_str(), created), (orphan.as_str(), true));
    let spawned = manage(&sys, &lead.id, send("four")).await.unwrap();
    assert_eq!(spawned["childThreadId"], orphan.as_str());
    assert_eq!(spawned["created"], false);
    assert_eq!(spawned["messages"], json!(["ops did: four"]));
    assert_eq!(
        sys.record(&orphan).await.parent_id.as_deref(),
        Some(lead.id.as_str())
    );
}

/// A parent that sent to an alias before sends to its child again without looking the alias
/// (or the child) up in the store: only the first send of each alias asks the store.
#[actix_rt::test]
async fn a_known_alias_is_sent_to_without_a_store_look_up() {
    let store = Arc::new(failing_store::FailingWrites::default());
    let sys = TestSystem::builder()
        .script(SCRIPT)
        .types(ops_with_clock(ManageOptions::default()))
        .store(store.clone())
        .start()
        .await;
    let lead = sys.root("lead", None).await;
    let send = |text: &str, alias: &str| json!({"command": "send_message", "worker": "Ops", "message": text, "threadAlias": alias});
    for (i, alias) in ["w", "w", "v", "w", "v"].into_iter().enumerate() {
        let r = manage(&sys, &lead.id, send(&format!("m{i}"), alias))
            .await
            .unwrap();
        assert_eq!(r["messages"], json!([format!("ops did: m{i}")]));
    }
    assert_eq!(store.alias_lookups(), 2, "one look-up per alias");
}

#[actix_rt::test]
async fn sync_max_messages_collects_several_assistant_messages() {
    let sys = TestSystem::builder()
        .script(SCRIPT)
        .types(ops_with_clock(ManageOptions::default()))
        .start()
        .await;
    let lead = sys.root("lead", None).await;
    let r = manage(&sys, &lead.id, json!({"command": "send_message", "worker": "Ops", "message": "two answers please", "threadAlias": "m", "syncMaxMessages": 2})).await.unwrap();
    assert_eq!(r["status"], "ok");
    assert_eq!(r["messages"], json!(["part one", "part two"]));
}

#[actix_rt::test]
async fn async_mode_forwards_the_reply_to_the_parent_as_user_input_with_prefix() {
    let sys = TestSystem::builder()
        .script(SCRIPT)
        .types(ops_with_clock(ManageOptions::default()))
        .start()
        .await;
    let mut events = sys.events();
    let lead = sys.root("lead", Some("go async")).await;
    let thread = sys
        .wait_for_entry(&lead.id, Role::Assistant, "Noted the forward")
        .await;
    // The tool returned at once.
    let tool = thread.iter().find(|e| e.role == Role::Tool).unwrap();
    let result: Value = serde_json::from_str(&tool.text).unwrap();
    assert_eq!(result["status"], "sent");
    // The forwarded text is on the parent thread as input for its model to answer (not in
    // its own voice), with the default prefix.
    let fwd = thread
        .iter()
        .find(|e| e.text.starts_with("From Ops: "))
        .expect("forward");
    assert_eq!(fwd.role, Role::User);
    assert_eq!(fwd.text, "From Ops: ops did: status please");
    assert_eq!(fwd.from_agent.as_deref(), result["childThreadId"].as_str());
    // ... and the parent ran a turn on it.
    let last = thread.last().unwrap();
    assert_eq!(
        last.text,
        "Noted the forward: From Ops: ops did: status please"
    );
    next_event(&mut events, "forwarded", |e| {
        matches!(e, Event::Forwarded { .. })
    })
    .await;
}

#[actix_rt::test]
async fn async_prefix_and_correlation_are_configurable() {
    let opts = ManageOptions {
        mode: agentd_proto::ManageMode::Async,
        async_prefix: "<{{agentTitle}}> ".into(),
        show_correlation_in_output: true,
        ..Default::default()
    };
    let sys = TestSystem::builder()
        .script(SCRIPT)
        .types(default_types(opts))
        .start()
        .await;
    let lead = sys.root("lead", None).await;
    let r = manage(&sys, &lead.id, json!({"command": "send_message", "worker": "QA", "message": "hello", "threadAlias": "corr"})).await.unwrap();
    assert_eq!(r["status"], "sent");
    let child = r["childThreadId"].as_str().unwrap();
    let expected = format!("[alias=corr thread={child}] <QA> qa checked: hello");
    let thread = sys.wait_for_entry(&lead.id, Role::User, &expected).await;
    assert!(thread.iter().any(|e| e.text == expected), "{thread:#?}");
}

#[actix_rt::test]
async fn the_sync_wait_defaults_to_15000_ms_then_times_out_and_keeps_the_late_reply() {
    let sys = TestSystem::builder()
        .script(SCRIPT)
        .types(ops_with_clock(ManageOptions::default()))
        .manual_clock()
        .start()
        .await;
    let clock = sys.manual_clock();
    let lead = sys.root("lead", None).await;
    let s2 = sys.system.clone();
    let lead_id = lead.id.clone();
    // No `syncTimeoutMs`: the lead type's options are the defaults.
    let call = actix_rt::spawn(async move {
        s2.invoke_tool(Some(&lead_id), "Manage", json!({"command": "send_message", "worker": "Ops", "message": "slow job", "threadAlias": "slow"})).await
    });
    // Both timers armed: the worker's model delay (20 s) and the sync wait (15 s).
    wait_until("two timers", || async { clock.sleepers() == 2 }).await;
    clock.advance(14_999);
    tokio::task::yield_now().await;
    assert!(!call.is_finished(), "returned before the timeout");
    clock.advance(1);
    let r = call.await.unwrap().unwrap();
    assert_eq!(r["status"], "timeout");
    assert_eq!(r["messages"], json!([]));
    let child = r["childThreadId"].as_str().unwrap().to_string();
    // Nothing lost: the late reply lands on the child thread.
    clock.advance(5_000);
    sys.wait_for_entry(&child, Role::Assistant, "ops late answer")
        .await;
    // In sync mode a late reply is not forwarded to the parent.
    sys.wait_for_status(&child, AgentStatus::Idle).await;
    assert!(
        !sys.thread(&lead.id)
            .await
            .iter()
            .any(|e| e.text.contains("ops late answer"))
    );
}

#[actix_rt::test]
async fn a_per_call_sync_timeout_overrides_the_default() {
    let sys = TestSystem::builder()
        .script(SCRIPT)
        .types(ops_with_clock(ManageOptions::default()))
        .manual_clock()
        .start()
        .await;
    let clock = sys.manual_clock();
    let lead = sys.root("lead", None).await;
    let s2 = sys.system.clone();
    let lead_id = lead.id.clone();
    let call = actix_rt::spawn(async move {
        s2.invoke_tool(Some(&lead_id), "Manage", json!({"command": "send_message", "worker": "Ops", "message": "slow job", "threadAlias": "slow", "syncTimeoutMs": 500})).await
    });
    wait_until("two timers", || async { clock.sleepers() == 2 }).await;
    clock.advance(499);
    tokio::task::yield_now().await;
    assert!(!call.is_finished(), "returned before the timeout");
    clock.advance(1);
    let r = call.await.unwrap().unwrap();
    assert_eq!(r["status"], "timeout");
}

/// A sync-mode worker's failure that no call waits for any more is forwarded, ahead of the
/// parent's queue, as input the parent runs a turn on: user role, with the prefix.
#[actix_rt::test]
async fn a_sync_worker_failure_nobody_waits_for_is_forwarded_as_user_input() {
    let sys = TestSystem::builder()
        .script(SCRIPT)
        .types(ops_with_clock(ManageOptions::default()))
        .manual_clock()
        .start()
        .await;
    let clock = sys.manual_clock();
    let lead = sys.root("lead", None).await;
    let s2 = sys.system.clone();
    let lead_id = lead.id.clone();
    let call = actix_rt::spawn(async move {
        s2.invoke_tool(Some(&lead_id), "Manage", json!({"command": "send_message", "worker": "Ops", "message": "doomed job", "threadAlias": "doomed", "syncTimeoutMs": 500})).await
    });
    wait_until("two timers", || async { clock.sleepers() == 2 }).await;
    clock.advance(500);
    let r = call.await.unwrap().unwrap();
    assert_eq!(r["status"], "timeout");
    clock.advance(20_000);
    let thread = sys
        .wait_for_entry(&lead.id, Role::Assistant, "Noted the forward")
        .await;
    let fwd = thread
        .iter()
        .find(|e| e.text.starts_with("From Ops: [failed] "))
        .expect("the forwarded failure");
    assert_eq!(fwd.role, Role::User, "{thread:#?}");
    assert!(fwd.text.contains("ops broke"), "{}", fwd.text);
    assert_eq!(
        thread.last().unwrap().text,
        format!("Noted the forward: {}", fwd.text)
    );
}

#[actix_rt::test]
async fn every_seed_error_has_its_code() {
    let sys = TestSystem::builder()
        .script(SCRIPT)
        .types(ops_with_clock(ManageOptions::default()))
        .start()
        .await;
    let lead = sys.root("lead", None).await;
    let code = |r: Result<Value, agentd_proto::AgentdError>| r.err().map(|e| e.code);

    // missing_thread_id: no runtime thread.
    let r = sys
        .system
        .invoke_tool(
            None,
            "Manage",
            json!({"command": "check_status", "threadAlias": "x"}),
        )
        .await;
    assert_eq!(code(r), Some(ErrorCode::MissingThreadId));

    // no_workers: send_message fails, check_status answers zero.
    let plain = sys.root("plain", None).await;
    let r = manage(
        &sys,
        &plain.id,
        json!({"command": "send_message", "worker": "Ops", "message": "m", "threadAlias": "t"}),
    )
    .await;
    assert_eq!(code(r), Some(ErrorCode::NoWorkers));
    let r = manage(
        &sys,
        &plain.id,
        json!({"command": "check_status", "threadAlias": "t"}),
    )
    .await
    .unwrap();
    assert_eq!(r, json!({"activeTasks": 0, "childThreadIds": []}));

    // unknown_worker.
    let r = manage(
        &sys,
        &lead.id,
        json!({"command": "send_message", "worker": "Nobody", "message": "m", "threadAlias": "t"}),
    )
    .await;
    assert_eq!(code(r), Some(ErrorCode::UnknownWorker));

    // threadAlias is required for check_status too (seed 000's schema), absent or blank.
    for alias in [None, Some("  ")] {
        let mut args = json!({"command": "check_status"});
        if let Some(alias) = alias {
            args["threadAlias"] = json!(alias);
        }
        let e = manage(&sys, &lead.id, args).await.err().unwrap();
        assert_eq!(e.code, ErrorCode::MissingField, "{alias:?}");
        assert!(e.message.contains("threadAlias"), "{e}");
    }

    // missing_field for worker, message and threadAlias, each named.
    for (args, field) in [
        (
            json!({"command": "send_message", "message": "m", "threadAlias": "t"}),
            "worker",
        ),
        (
            json!({"command": "send_message", "worker": "Ops", "message": "  ", "threadAlias": "t"}),
            "message",
        ),
        (
            json!({"command": "send_message", "worker": "Ops", "message": "m"}),
            "threadAlias",
        ),
    ] {
        let e = manage(&sys, &lead.id, args).await.err().unwrap();
        assert_eq!(e.code, ErrorCode::MissingField);
        assert!(e.message.contains(field), "{e}");
    }

    // invalid_title: refused at configuration (empty and duplicate trimmed titles).
    let dup = agentd_actors::AgentTypes::new(vec![
        agent_type("p", "P", &["x", "y"]),
        agent_type("x", "Same", &[]),
        agent_type("y", " Same ", &[]),
    ]);
    assert_eq!(dup.err().map(|e| e.code), Some(ErrorCode::InvalidTitle));
    let empty = agentd_actors::AgentTypes::new(vec![
        agent_type("p", "P", &["x"]),
        agent_type("x", "", &[]),
    ]);
    assert_eq!(empty.err().map(|e| e.code), Some(ErrorCode::InvalidTitle));
}

#[actix_rt::test]
async fn forwarding_to_a_parent_that_is_gone_is_manage_missing_parent() {
    let sys = TestSystem::builder()
        .script(SCRIPT)
        .types(ops_with_clock(ManageOptions::default()))
        .manual_clock()
        .start()
        .await;
    let clock = sys.manual_clock();
    let mut events = sys.events();
    let lead = sys.root("lead", None).await;
    let r = manage(&sys, &lead.id, json!({"command": "send_message", "worker": "Ops", "message": "slow", "threadAlias": "t", "mode": "async"})).await.unwrap();
    let child = r["childThreadId"].as_str().unwrap().to_string();
    wait_until("worker model armed", || async { clock.sleepers() == 1 }).await;
    // The parent's thread disappears (e.g. removed by another process) while the worker runs.
    sys.store.delete_agent(&lead.id).await.unwrap();
    clock.advance(20_000);
    let e = next_event(&mut events, "delivery failure", |e| {
        matches!(e, Event::DeliveryFailed { .. })
    })
    .await;
    match e {
        Event::DeliveryFailed { agent_id, code, .. } => {
            assert_eq!(agent_id, child);
            assert_eq!(code, ErrorCode::ManageMissingParent);
        }
        _ => unreachable!(),
    }
    // The worker's reply is still on its own thread.
    sys.wait_for_entry(&child, Role::Assistant, "ops late answer")
        .await;
}

#[actix_rt::test]
async fn forwarding_to_a_parent_without_a_live_channel_is_missing_parent_channel() {
    let sys = TestSystem::builder()
        .script(SCRIPT)
        .types(ops_with_clock(ManageOptions::default()))
        .manual_clock()
        .start()
        .await;
    let clock = sys.manual_clock();
    let mut events = sys.events();
    let lead = sys.root("lead", None).await;
    let r = manage(&sys, &lead.id, json!({"command": "send_message", "worker": "Ops", "message": "slow", "threadAlias": "t", "mode": "async"})).await.unwrap();
    let child = r["childThreadId"].as_str().unwrap().to_string();
    wait_until("worker model armed", || async { clock.sleepers() == 1 }).await;
    // Terminate hits the parent only; its worker keeps running and then has nowhere to deliver.
    sys.system
        .control(&lead.id, Control::Terminate)
        .await
        .unwrap();
    clock.advance(20_000);
    let e = next_event(&mut events, "delivery failure", |e| {
        matches!(e, Event::DeliveryFailed { .. })
    })
    .await;
    assert!(
        matches!(e, Event::DeliveryFailed { ref agent_id, code: ErrorCode::MissingParentChannel, .. } if *agent_id == child),
        "{e:?}"
    );
    assert!(
        !sys.thread(&lead.id)
            .await
            .iter()
            .any(|e| e.text.contains("ops late answer"))
    );
}

/// The usual cast with the lead relaying forwards (`manage.async_forward = "relay"`).
fn relaying_types() -> Vec<agentd_actors::AgentType> {
    let mut types = ops_with_clock(ManageOptions::default());
    for ty in &mut types {
        if ty.name == "lead" {
            ty.manage.async_forward = agentd_proto::AsyncForward::Relay;
        }
    }
    types
}

#[actix_rt::test]
async fn a_relaying_root_keeps_the_forward_without_running_a_turn_on_it() {
    let sys = TestSystem::builder()
        .script(SCRIPT)
        .types(relaying_types())
        .start()
        .await;
    let mut events = sys.events();
    let lead = sys.root("lead", Some("go async")).await;
    next_event(
        &mut events,
        "the forward",
        |e| matches!(e, Event::Forwarded { parent_id, .. } if *parent_id == lead.id),
    )
    .await;
    let thread = sys
        .wait_for_entry(
            &lead.id,
            Role::Assistant,
            "From Ops: ops did: status please",
        )
        .await;
    let rec = sys.wait_for_status(&lead.id, AgentStatus::Idle).await;
    assert_eq!(rec.turns, 1, "only the turn on its own message");
    assert!(
        !thread.iter().any(|e| e.text.contains("Noted the forward")),
        "no model turn on the forward: {thread:#?}"
    );
    assert_eq!(
        thread.last().unwrap().text,
        "From Ops: ops did: status please"
    );
}
