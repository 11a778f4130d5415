//! Reviewed yields through the real `agentd` on its embedded store and real turns of the
//! scripted model: a sub-agent whose type sets `review_yield = true` yields, and its result
//! does not reach the parent; the yield waits at the approval gate like a gated tool's call
//! (`awaiting_approval`, kind `builtin`, the agent `waiting_review` naming `yield_to_parent`).
//! A rejection reaches the sub-agent's model as the tool's error with the reason, and its turn
//! goes on (it revises and yields again); the new yield's wait survives a `kill -9`; once
//! approved, the parent gets exactly the approved result. An approval nobody gives in
//! `limits.approval_timeout_ms` reaches the sub-agent as `tool_timeout`, and the result never
//! reaches the parent.

use agentd_tests::AgentdProcess;
use agentd_tests::scripted_files::{embedded_store, scripted_deployment};
use serde_json::{Value, json};
use std::path::Path;
use std::time::Duration;

fn config(dir: &Path, approval_timeout_ms: u64) -> Vec<(&'static str, String)> {
    let writer = "name = \"writer\"\ntitle = \"Writer\"\nreview_yield = true\n";
    let settings = format!("[limits]\napproval_timeout_ms = {approval_timeout_ms}\n");
    let mut env = scripted_deployment(dir, &[("writer", writer)], SCRIPT, &settings);
    env.push(embedded_store(dir));
    env
}

/// The lead delegates to a writer, whose first draft is rejected and second approved.
const SCRIPT: &str = r#"
[[rule]]
agent = "lead"
role = "user"
contains = "delegate"
text = "delegating"
[[rule.tool_calls]]
name = "spawn_agent"
arguments = { agent_type = "writer", prompt = "write the draft" }

[[rule]]
agent = "lead"
role = "tool"
text = "spawned"

[[rule]]
agent = "lead"
contains = "From Writer"
text = "lead got: {{input}}"

[[rule]]
agent = "writer"
role = "user"
contains = "write the draft"
text = "draft ready"
[[rule.tool_calls]]
name = "yield_to_parent"
arguments = { result = "draft v1" }

[[rule]]
agent = "writer"
role = "tool"
contains = "rejected"
text = "revising after: {{input}}"
[[rule.tool_calls]]
name = "yield_to_parent"
arguments = { result = "draft v2" }

[[rule]]
agent = "writer"
role = "tool"
text = "writer saw: {{input}}"
"#;

fn spawn_lead(p: &AgentdProcess) -> String {
    p.spawn("lead", "delegate the draft")
}

fn gated(p: &AgentdProcess) -> Vec<Value> {
    p.get("/v1/tool_calls?status=awaiting_approval")["tool_calls"]
        .as_array()
        .unwrap()
        .clone()
}

/// The one yield waiting for approval, once there is one other than `not`.
fn waiting_yield(p: &AgentdProcess, not: Option<&str>) -> Value {
    p.wait_for("a yield awaiting approval", |p| {
        gated(p)
            .iter()
            .any(|c| Some(c["call_id"].as_str().unwrap()) != not)
    });
    let calls = gated(p);
    assert_eq!(calls.len(), 1, "{calls:#?}");
    calls[0].clone()
}

fn heard_from_writer(p: &AgentdProcess, lead: &str) -> Vec<String> {
    p.texts(lead)
        .into_iter()
        .filter(|t| t.contains("From Writer"))
        .collect()
}

#[test]
fn a_reviewed_yield_reaches_the_parent_only_once_approved() {
    let dir = tempfile::tempdir().unwrap();
    let env = config(dir.path(), 0);
    let p = AgentdProcess::start(&env);
    let lead = spawn_lead(&p);

    let first = waiting_yield(&p, None);
    assert_eq!(first["tool"], "yield_to_parent");
    assert_eq!(first["kind"], "builtin");
    assert_eq!(first["arguments"], json!({"result": "draft v1"}));
    assert_eq!(first["root_id"], lead.as_str());
    let writer = first["agent_id"].as_str().unwrap().to_string();
    assert_ne!(writer, lead);
    let agent = p.get(&format!("/v1/agents/{writer}"));
    assert_eq!(agent["status"], "waiting_review", "{agent:#}");
    assert!(
        agent["status_reason"]
            .as_str()
            .is_some_and(|r| r.contains("yield_to_parent")),
        "{agent:#}"
    );
    // The parent has not heard of the result while it waits.
    std::thread::sleep(Duration::from_millis(300));
    assert!(heard_from_writer(&p, &lead).is_empty());

    // Rejected: the writer's model gets the reason as the yield's error and goes on.
    let call_id = first["call_id"].as_str().unwrap().to_string();
    let decided = p
        .post(
            &format!("/v1/agents/{writer}/approvals/{call_id}"),
            json!({"approve": false, "reason": "it needs a title"}),
        )
        .unwrap();
    assert_eq!(decided, json!({"call_id": call_id, "decision": "rejected"}));
    let second = waiting_yield(&p, Some(&call_id));
    assert_eq!(second["arguments"], json!({"result": "draft v2"}));
    assert_eq!(second["agent_id"], writer.as_str());
    let texts = p.texts(&writer);
    let revised = texts
        .iter()
        .find(|t| t.starts_with("revising after: "))
        .unwrap_or_else(|| panic!("{texts:#?}"));
    assert!(
        revised.contains("rejected") && revised.contains("it needs a title"),
        "{revised}"
    );
    assert!(heard_from_writer(&p, &lead).is_empty());

    // The wait for the second decision survives a kill -9.
    p.kill9();
    let p = AgentdProcess::start(&env);
    p.wait_for("the review again after the restart", |p| {
        p.status(&writer) == "waiting_review"
    });
    assert!(heard_from_writer(&p, &lead).is_empty());

    // Approved: the yield happens as an ungated one, once.
    let second_id = second["call_id"].as_str().unwrap().to_string();
    let decided = p.agentctl(&["approve", &writer, &second_id]);
    assert_eq!(
        decided,
        json!({"call_id": second_id, "decision": "approved"})
    );
    p.wait_for("the lead's answer to the yield", |p| {
        p.texts(&lead)
            .iter()
            .any(|t| t == "lead got: From Writer: draft v2")
    });
    assert_eq!(
        heard_from_writer(&p, &lead),
        vec![
            "From Writer: draft v2".to_string(),
            "lead got: From Writer: draft v2".to_string()
        ]
    );
    assert_eq!(p.get("/v1/tool_calls")["tool_calls"], json!([]));
    let again = p.post(
        &format!("/v1/agents/{writer}/approvals/{second_id}"),
        json!({"approve": true}),
    );
    assert_eq!(again.unwrap_err().0, 409);
}

#[test]
fn a_reviewed_yield_nobody_approves_in_time_is_a_tool_timeout_for_the_sub_agent() {
    let dir = tempfile::tempdir().unwrap();
    let env = config(dir.path(), 500);
    let p = AgentdProcess::start(&env);
    let lead = spawn_lead(&p);
    let call = waiting_yield(&p, None);
    let writer = call["agent_id"].as_str().unwrap().to_string();
    p.wait_for("the timeout's tool error", |p| {
        p.texts(&writer)
            .iter()
            .any(|t| t.starts_with("writer saw: ") && t.contains("tool_timeout"))
    });
    assert_eq!(p.get("/v1/tool_calls")["tool_calls"], json!([]));
    // The parent hears the sub-agent's final text (as from any sub-agent that ends a turn
    // without a yield), never the result nobody approved.
    p.wait_for("the writer's last text at the lead", |p| {
        heard_from_writer(p, &lead)
            .iter()
            .any(|t| t.starts_with("From Writer: writer saw: "))
    });
    let heard = heard_from_writer(&p, &lead);
    assert!(!heard.iter().any(|t| t.contains("draft v1")), "{heard:#?}");
}
