//! Service tools (`[tools.<name>] kind = "service"`) through the real `agentd` on its embedded
//! store and a real turn of the scripted model: the call is stored and listed, the agent waits
//! in `waiting_tool` (a message sent meanwhile waits too), survives a `kill -9`, and the first
//! answer — through `agentctl tool-result` — is applied once (a second one is `409`, an unknown
//! call `404`); a deadline that passes while agentd is down is applied at the restart; a
//! cancel closes the call with an `interrupted` result.

use agentd_tests::AgentdProcess;
use agentd_tests::scripted_files::{
    CLERK, CLERK_SCRIPT, embedded_store, lookup_order, scripted_deployment,
};
use serde_json::{Value, json};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

fn config(dir: &Path, timeout_ms: u64) -> Vec<(&'static str, String)> {
    let settings = lookup_order(timeout_ms, "never");
    let mut env = scripted_deployment(dir, &[("clerk", CLERK)], CLERK_SCRIPT, &settings);
    env.push(embedded_store(dir));
    env
}

fn spawn_clerk(p: &AgentdProcess) -> String {
    p.spawn("clerk", "where is order A-1?")
}

fn pending_call(p: &AgentdProcess) -> Value {
    let calls = p.get("/v1/tool_calls?status=pending");
    let calls = calls["tool_calls"].as_array().unwrap();
    assert_eq!(calls.len(), 1, "{calls:#?}");
    calls[0].clone()
}

/// Whether the turn that got a `tool_timeout` for the call ended.
fn timed_out(p: &AgentdProcess, id: &str) -> bool {
    let texts = p.texts(id);
    texts
        .iter()
        .position(|t| t.contains("tool_timeout"))
        .is_some_and(|i| texts[i..].iter().any(|t| t.starts_with("Result: ")))
}

fn entries(p: &AgentdProcess, id: &str) -> Vec<Value> {
    p.get(&format!("/v1/agents/{id}/thread"))["entries"]
        .as_array()
        .unwrap()
        .clone()
}

/// The conversation keeps the rule: the assistant entry's calls are answered, in order, by
/// the entries right after it.
fn assert_paired(entries: &[Value]) {
    for (i, e) in entries.iter().enumerate() {
        let Some(calls) = e["tool_calls"].as_array().filter(|c| !c.is_empty()) else {
            continue;
        };
        for (k, call) in calls.iter().enumerate() {
            let r = &entries[i + 1 + k];
            assert_eq!(r["role"], "tool", "{entries:#?}");
            assert_eq!(r["tool_call_id"], call["id"], "{entries:#?}");
        }
    }
    let tools = entries.iter().filter(|e| e["role"] == "tool").count();
    let calls: usize = entries
        .iter()
        .filter_map(|e| e["tool_calls"].as_array().map(Vec::len))
        .sum();
    assert_eq!(tools, calls, "one result per call: {entries:#?}");
}

#[test]
fn a_service_call_waits_survives_kill_9_and_its_first_answer_is_applied_once() {
    let dir = tempfile::tempdir().unwrap();
    let env = config(dir.path(), 600_000);
    let p = AgentdProcess::start(&env);
    let id = spawn_clerk(&p);
    p.wait_for("waiting_tool", |p| p.status(&id) == "waiting_tool");
    let call = pending_call(&p);
    assert_eq!(call["agent_id"], id.as_str());
    assert_eq!(call["root_id"], id.as_str());
    assert_eq!(call["tool"], "lookup_order");
    assert_eq!(call["kind"], "service");
    assert_eq!(call["status"], "pending");
    assert_eq!(call["arguments"], json!({"order_id": "A-1"}));
    let requested = call["requested_at_ms"].as_u64().unwrap();
    assert_eq!(call["deadline_ms"].as_u64(), Some(requested + 600_000));
    let call_id = call["call_id"].as_str().unwrap().to_string();
    // Scoped callers see their own tree only.
    let (code, other) = {
        let r = ureq::get(&format!("{}/v1/tool_calls", p.url))
            .set("X-Agentd-Root", "someone-else")
            .call()
            .unwrap();
        (r.status(), r.into_json::<Value>().unwrap())
    };
    assert_eq!((code, other), (200, json!({"tool_calls": []})));
    // A message sent meanwhile waits behind the call.
    p.post(
        &format!("/v1/agents/{id}/messages"),
        json!({"text": "hello"}),
    )
    .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(p.status(&id), "waiting_tool");
    assert!(!p.texts(&id).iter().any(|t| t.contains("hello")));

    p.kill9();
    let p = AgentdProcess::start(&env);
    p.wait_for("the wait again after the restart", |p| {
        p.status(&id) == "waiting_tool"
    });
    assert_eq!(
        pending_call(&p)["call_id"],
        call_id.as_str(),
        "the same call"
    );

    let out = Command::new(agentd_tests::process::binary("agentctl"))
        .args([
            "--url",
            &p.url,
            "--json",
            "tool-result",
            &id,
            &call_id,
            "--result",
            r#"{"status": "shipped"}"#,
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let answered: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(answered, json!({"call_id": call_id, "status": "answered"}));
    let again = p.post(
        &format!("/v1/agents/{id}/tool_results/{call_id}"),
        json!({"result": {"status": "lost"}}),
    );
    let (code, body) = again.unwrap_err();
    assert_eq!(
        (code, body["code"].as_str()),
        (409, Some("tool_call_closed"))
    );
    assert!(body["message"].as_str().unwrap().contains("answered"));
    let unknown = p.post(
        &format!("/v1/agents/{id}/tool_results/{}", uuid::Uuid::now_v7()),
        json!({"error": {"message": "nope"}}),
    );
    assert_eq!(
        unknown.unwrap_err().1["code"].as_str(),
        Some("tool_call_not_found")
    );

    p.wait_for("the answer and then the queued message", |p| {
        p.texts(&id).iter().any(|t| t == "got: hello")
    });
    let texts = p.texts(&id);
    // The answer, then the call after it (run once the answer came), then the model.
    let result = texts
        .iter()
        .position(|t| t == r#"{"status":"shipped"}"#)
        .unwrap_or_else(|| panic!("{texts:#?}"));
    assert!(texts[result + 1].starts_with(r#"{"now_ms":"#), "{texts:#?}");
    assert!(texts[result + 2].starts_with("Result: "), "{texts:#?}");
    let hello = texts.iter().position(|t| t == "hello").unwrap();
    assert!(result < hello, "the message ran after the call: {texts:#?}");
    assert_paired(&entries(&p, &id));
    assert_eq!(
        p.get("/v1/tool_calls")["tool_calls"],
        json!([]),
        "nothing left open"
    );
    let metrics = ureq::get(&format!("{}/metrics", p.url))
        .call()
        .unwrap()
        .into_string()
        .unwrap();
    assert!(
        metrics.contains(
            "agentd_tool_calls_total{tool=\"lookup_order\",kind=\"service\",outcome=\"ok\"} 1"
        ),
        "counted once"
    );
}

#[test]
fn a_deadline_that_passed_while_agentd_was_down_is_applied_at_the_restart() {
    let dir = tempfile::tempdir().unwrap();
    let env = config(dir.path(), 1_500);
    let p = AgentdProcess::start(&env);
    let id = spawn_clerk(&p);
    p.wait_for("waiting_tool", |p| p.status(&id) == "waiting_tool");
    let call_id = pending_call(&p)["call_id"].as_str().unwrap().to_string();
    p.kill9();
    std::thread::sleep(Duration::from_millis(1_800));
    let p = AgentdProcess::start(&env);
    p.wait_for("the timeout's result", |p| timed_out(p, &id));
    assert_paired(&entries(&p, &id));
    let late = p.post(
        &format!("/v1/agents/{id}/tool_results/{call_id}"),
        json!({"result": "too late"}),
    );
    let (code, body) = late.unwrap_err();
    assert_eq!(code, 409);
    assert!(
        body["message"].as_str().unwrap().contains("timed out"),
        "{body}"
    );
}

#[test]
fn a_deadline_passing_while_the_agent_waits_gives_the_model_a_timeout_and_a_cancel_closes_the_call()
{
    let dir = tempfile::tempdir().unwrap();
    let env = config(dir.path(), 2_500);
    let p = AgentdProcess::start(&env);
    let id = spawn_clerk(&p);
    p.wait_for("the timeout's result", |p| timed_out(p, &id));
    assert_paired(&entries(&p, &id));

    // Another call, cancelled while it waits.
    p.post(
        &format!("/v1/agents/{id}/messages"),
        json!({"text": "and order B-2?"}),
    )
    .unwrap();
    p.wait_for("waiting_tool", |p| p.status(&id) == "waiting_tool");
    let call_id = pending_call(&p)["call_id"].as_str().unwrap().to_string();
    p.post(
        &format!("/v1/agents/{id}/control"),
        json!({"control": "cancel"}),
    )
    .unwrap();
    p.wait_for("cancelled", |p| p.status(&id) == "cancelled");
    let late = p.post(
        &format!("/v1/agents/{id}/tool_results/{call_id}"),
        json!({"result": "too late"}),
    );
    let (code, body) = late.unwrap_err();
    assert_eq!(code, 409);
    assert!(body["message"].as_str().unwrap().contains("cancelled"));
    let all = entries(&p, &id);
    assert_paired(&all);
    assert!(
        all.iter()
            .any(|e| e["role"] == "tool" && e["text"].as_str().unwrap().contains("interrupted")),
        "{all:#?}"
    );
}
