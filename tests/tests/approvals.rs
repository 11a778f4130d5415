//! Approval gates through the real `agentd` on its embedded store and a real turn of the
//! scripted model: a call of a tool with `approval = "always"` is stored as
//! `awaiting_approval` before anything runs and the agent waits in `waiting_review` (a message
//! sent meanwhile waits too; a worker's answer is refused); the wait survives a `kill -9`; the
//! first decision is applied once (a second one is `409`, an unknown call `404`); an approved
//! service call then waits for its answer in `waiting_tool`; a rejection reaches the model as
//! a tool error with its reason (through `agentctl reject`); an approval that nobody gives in
//! `limits.approval_timeout_ms` reaches the model as a timeout.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use agentd_tests::AgentdProcess;
use agentd_tests::scripted_files::{
    CLERK, CLERK_SCRIPT, embedded_store, lookup_order, scripted_deployment,
};
use serde_json::{Value, json};
use std::path::Path;
use std::time::Duration;

fn config(dir: &Path, approval_timeout_ms: u64) -> Vec<(&'static str, String)> {
    let settings = format!(
        "[limits]\napproval_timeout_ms = {approval_timeout_ms}\n{}",
        lookup_order(600_000, "always")
    );
    let mut env = scripted_deployment(dir, &[("clerk", CLERK)], CLERK_SCRIPT, &settings);
    env.push(embedded_store(dir));
    env
}

fn spawn_clerk(p: &AgentdProcess) -> String {
    p.spawn("clerk", "where is order A-1?")
}

fn calls(p: &AgentdProcess, status: &str) -> Vec<Value> {
    p.get(&format!("/v1/tool_calls?status={status}"))["tool_calls"]
        .as_array()
        .unwrap()
        .clone()
}

#[test]
fn an_approved_call_waits_for_review_survives_kill_9_and_is_decided_once() {
    let dir = tempfile::tempdir().unwrap();
    let env = config(dir.path(), 0);
    let p = AgentdProcess::start(&env);
    let id = spawn_clerk(&p);
    p.wait_for("waiting_review", |p| p.status(&id) == "waiting_review");
    let gated = calls(&p, "awaiting_approval");
    assert_eq!(gated.len(), 1, "{gated:#?}");
    let call = &gated[0];
    assert_eq!(call["agent_id"], id.as_str());
    assert_eq!(call["tool"], "lookup_order");
    assert_eq!(call["kind"], "service");
    assert_eq!(call["arguments"], json!({"order_id": "A-1"}));
    assert_eq!(call["deadline_ms"], Value::Null, "0 waits for ever");
    assert!(calls(&p, "pending").is_empty(), "nothing published yet");
    let call_id = call["call_id"].as_str().unwrap().to_string();

    // A worker cannot answer past the gate.
    let early = p.post(
        &format!("/v1/agents/{id}/tool_results/{call_id}"),
        json!({"result": {"status": "early"}}),
    );
    assert_eq!(
        early.unwrap_err().1["code"].as_str(),
        Some("tool_call_closed")
    );
    // A message sent meanwhile waits for the decision.
    p.post(
        &format!("/v1/agents/{id}/messages"),
        json!({"text": "hello"}),
    )
    .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(p.status(&id), "waiting_review");
    assert!(!p.texts(&id).iter().any(|t| t.contains("hello")));

    p.kill9();
    let p = AgentdProcess::start(&env);
    p.wait_for("the review again after the restart", |p| {
        p.status(&id) == "waiting_review"
    });
    let gated = calls(&p, "awaiting_approval");
    assert_eq!(gated.len(), 1, "{gated:#?}");
    assert_eq!(gated[0]["call_id"], call_id.as_str(), "the same call");

    let unknown = p.post(
        &format!("/v1/agents/{id}/approvals/{}", uuid::Uuid::now_v7()),
        json!({"approve": true}),
    );
    let (code, body) = unknown.unwrap_err();
    assert_eq!(
        (code, body["code"].as_str()),
        (404, Some("tool_call_not_found"))
    );
    let decided = p
        .post(
            &format!("/v1/agents/{id}/approvals/{call_id}"),
            json!({"approve": true, "reason": "fine"}),
        )
        .unwrap();
    assert_eq!(decided, json!({"call_id": call_id, "decision": "approved"}));
    let again = p.post(
        &format!("/v1/agents/{id}/approvals/{call_id}"),
        json!({"approve": false, "reason": "changed my mind"}),
    );
    let (code, body) = again.unwrap_err();
    assert_eq!(
        (code, body["code"].as_str()),
        (409, Some("tool_call_closed"))
    );

    // Approved: the service call is published and waits for its answer.
    p.wait_for("waiting_tool", |p| p.status(&id) == "waiting_tool");
    let pending = calls(&p, "pending");
    assert_eq!(pending.len(), 1, "{pending:#?}");
    assert_eq!(pending[0]["call_id"], call_id.as_str());
    assert!(
        pending[0]["deadline_ms"].as_u64().is_some(),
        "the tool's own timeout"
    );
    assert!(calls(&p, "awaiting_approval").is_empty());
    p.post(
        &format!("/v1/agents/{id}/tool_results/{call_id}"),
        json!({"result": {"status": "shipped"}}),
    )
    .unwrap();
    p.wait_for("the answer and then the queued message", |p| {
        p.texts(&id).iter().any(|t| t == "got: hello")
    });
    let texts = p.texts(&id);
    let result = texts
        .iter()
        .position(|t| t == r#"{"status":"shipped"}"#)
        .unwrap_or_else(|| panic!("{texts:#?}"));
    assert!(texts[result + 1].starts_with(r#"{"now_ms":"#), "{texts:#?}");
    assert!(texts[result + 2].starts_with("Result: "), "{texts:#?}");
    let hello = texts.iter().position(|t| t == "hello").unwrap();
    assert!(
        result < hello,
        "the message ran after the decision: {texts:#?}"
    );
    assert_eq!(p.get("/v1/tool_calls")["tool_calls"], json!([]));
}

#[test]
fn a_rejection_and_an_approval_timeout_reach_the_model_as_tool_errors() {
    let dir = tempfile::tempdir().unwrap();
    let env = config(dir.path(), 0);
    let p = AgentdProcess::start(&env);
    let id = spawn_clerk(&p);
    p.wait_for("waiting_review", |p| p.status(&id) == "waiting_review");
    let call_id = calls(&p, "awaiting_approval")[0]["call_id"]
        .as_str()
        .unwrap()
        .to_string();
    let decided = p.agentctl(&["reject", &id, &call_id, "--reason", "not today"]);
    assert_eq!(decided, json!({"call_id": call_id, "decision": "rejected"}));
    p.wait_for("the turn's end", |p| {
        p.texts(&id).iter().any(|t| t.starts_with("Result: "))
    });
    let texts = p.texts(&id);
    let rejected = texts
        .iter()
        .position(|t| t.contains("rejected") && t.contains("not today"))
        .unwrap_or_else(|| panic!("{texts:#?}"));
    assert!(
        texts[rejected + 1].starts_with(r#"{"now_ms":"#),
        "{texts:#?}"
    );
    assert_eq!(p.get("/v1/tool_calls")["tool_calls"], json!([]));
    let again = p.post(
        &format!("/v1/agents/{id}/approvals/{call_id}"),
        json!({"approve": true}),
    );
    assert_eq!(again.unwrap_err().0, 409);
    drop(p);

    let dir = tempfile::tempdir().unwrap();
    let env = config(dir.path(), 500);
    let p = AgentdProcess::start(&env);
    let id = spawn_clerk(&p);
    p.wait_for("the timeout's tool error", |p| {
        p.texts(&id).iter().any(|t| t.contains("tool_timeout"))
    });
    p.wait_for("the turn's end", |p| {
        p.texts(&id).iter().any(|t| t.starts_with("Result: "))
    });
    assert_eq!(p.get("/v1/tool_calls")["tool_calls"], json!([]));
}

/// A restore while the agent waits for a review drops the wait (its gated call is cancelled)
/// as it drops a running turn: the checkpoint's pending item runs again and is gated anew.
#[test]
fn a_restore_while_waiting_for_review_drops_the_wait() {
    let dir = tempfile::tempdir().unwrap();
    let env = config(dir.path(), 0);
    let p = AgentdProcess::start(&env);
    let id = spawn_clerk(&p);
    p.wait_for("waiting_review", |p| p.status(&id) == "waiting_review");
    let first = calls(&p, "awaiting_approval")[0]["call_id"].clone();
    p.post(&format!("/v1/agents/{id}/checkpoints"), json!({}))
        .unwrap();
    p.post(&format!("/v1/agents/{id}/restore"), json!({}))
        .unwrap();
    p.wait_for("the restored item gated anew, the first call closed", |p| {
        let gated = calls(p, "awaiting_approval");
        gated.len() == 1 && gated[0]["call_id"] != first && p.status(&id) == "waiting_review"
    });
}
