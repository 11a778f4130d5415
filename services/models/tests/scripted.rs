//! The scripted model: matching, placeholders, ids, failures and the injected clock.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use agentd_models::ScriptedModel;
use agentd_ports::{ManualClock, ModelClient, ModelError, ModelRequest, Purpose, SystemClock};
use agentd_proto::{Role, ThreadEntry};
use futures::FutureExt;
use serde_json::json;
use std::sync::Arc;

fn req(agent_type: &str, title: &str, entries: &[(Role, &str)]) -> ModelRequest {
    ModelRequest {
        agent_id: format!("{agent_type}-1").into(),
        agent_type: agent_type.into(),
        title: title.into(),
        model: None,
        provider: None,
        env: Default::default(),
        system_prompt: "sys".into(),
        thread: std::sync::Arc::new(
            entries
                .iter()
                .map(|(r, t)| {
                    std::sync::Arc::new(ThreadEntry::text(uuid::Uuid::now_v7(), *r, *t, 0))
                })
                .collect(),
        ),
        tools: Default::default(),
        purpose: Purpose::Turn,
        cli_session_id: None,
        cli_tools: Default::default(),
        observer: None,
        cancel: tokio_util::sync::CancellationToken::new(),
    }
}

const SCRIPT: &str = r#"
[defaults]
text = "default for {{title}}"

[[rule]]
agent = "Lead"
role = "tool"
text = "tool said {{input}}"

[[rule]]
agent = "lead"
role = "user"
contains = "deploy"
text = "Deploying {{input}}"
usage = { input = 10, output = 5, cache_write = 1, cache_read = 2 }
[[rule.tool_calls]]
name = "Manage"
arguments = { command = "send_message", worker = "Ops", message = "do {{input}}", nested = { list = ["{{agent_type}}", 3] } }
[[rule.tool_calls]]
name = "current_time"

[[rule]]
equals = "first only"
once = true
text = "fired once"

[[rule]]
contains = "fail"
error = "provider down"

[[rule]]
contains = "limit"
rate_limit_ms = 1500

[[rule]]
contains = "slow"
delay_ms = 500
text = "finally"

[[rule]]
contains = "explode"
panic = "boom"

[[rule]]
purpose = "compact"
contains = "summarise me"
text = "SUMMARY"
"#;

fn model() -> ScriptedModel {
    ScriptedModel::from_toml_str(SCRIPT, Arc::new(SystemClock)).unwrap()
}

#[tokio::test]
async fn first_matching_rule_answers_with_placeholders_usage_and_tool_calls() {
    let m = model();
    assert_eq!(m.backend(), "scripted");
    assert_eq!(m.rule_count(), 8);
    let r = m
        .complete(req("lead", "Lead", &[(Role::User, "deploy v2")]))
        .await
        .unwrap();
    assert_eq!(r.text, "Deploying deploy v2");
    assert_eq!(r.usage.total(), 18);
    assert_eq!(r.tool_calls.len(), 2);
    assert_eq!(r.tool_calls[0].name, "Manage");
    assert_eq!(
        r.tool_calls[0].arguments,
        json!({"command": "send_message", "worker": "Ops", "message": "do deploy v2", "nested": {"list": ["lead", 3]}})
    );
    assert_ne!(r.tool_calls[0].id, r.tool_calls[1].id);
    let again = m
        .complete(req("lead", "Lead", &[(Role::User, "deploy v3")]))
        .await
        .unwrap();
    assert!(
        !again
            .tool_calls
            .iter()
            .any(|c| r.tool_calls.iter().any(|d| d.id == c.id)),
        "ids stay unique per agent"
    );
    // Matching by title and role.
    let t = m
        .complete(req("lead", "Lead", &[(Role::Tool, "{\"ok\":1}")]))
        .await
        .unwrap();
    assert_eq!(t.text, "tool said {\"ok\":1}");
    // The role condition excludes: an assistant "deploy" is not the user rule.
    let d = m
        .complete(req("lead", "Lead", &[(Role::Assistant, "deploy")]))
        .await
        .unwrap();
    assert_eq!(d.text, "default for Lead");
    assert!(d.usage.input > 0 && d.usage.output > 0);
}

#[tokio::test]
async fn once_rules_fire_once_per_agent() {
    let m = model();
    let a = m
        .complete(req("x", "X", &[(Role::User, "first only")]))
        .await
        .unwrap();
    assert_eq!(a.text, "fired once");
    let b = m
        .complete(req("x", "X", &[(Role::User, "first only")]))
        .await
        .unwrap();
    assert_eq!(b.text, "default for X");
    let c = m
        .complete(req("y", "Y", &[(Role::User, "first only")]))
        .await
        .unwrap();
    assert_eq!(c.text, "fired once");
}

#[tokio::test]
async fn errors_rate_limits_and_panics() {
    let m = model();
    match m
        .complete(req("x", "X", &[(Role::User, "please fail")]))
        .await
    {
        Err(ModelError::Failed(msg)) => assert_eq!(msg, "provider down"),
        other => panic!("{other:?}"),
    }
    match m
        .complete(req("x", "X", &[(Role::User, "rate limit")]))
        .await
    {
        Err(ModelError::RateLimited { retry_after_ms }) => assert_eq!(retry_after_ms, 1500),
        other => panic!("{other:?}"),
    }
    let res = std::panic::AssertUnwindSafe(m.complete(req("x", "X", &[(Role::User, "explode")])))
        .catch_unwind()
        .await;
    let err = res.err().unwrap();
    assert_eq!(
        err.downcast_ref::<String>().map(String::as_str),
        Some("boom")
    );
}

#[tokio::test]
async fn delays_wait_on_the_injected_clock() {
    let clock = ManualClock::new(0);
    let m = Arc::new(ScriptedModel::from_toml_str(SCRIPT, Arc::new(clock.clone())).unwrap());
    let m2 = m.clone();
    let task =
        tokio::spawn(async move { m2.complete(req("x", "X", &[(Role::User, "slow")])).await });
    while clock.sleepers() == 0 {
        tokio::task::yield_now().await;
    }
    clock.advance(499);
    tokio::task::yield_now().await;
    assert!(!task.is_finished());
    clock.advance(1);
    assert_eq!(task.await.unwrap().unwrap().text, "finally");
}

#[tokio::test]
async fn compaction_has_its_own_rules_and_a_default() {
    let m = model();
    let mut r = req(
        "x",
        "X",
        &[(Role::User, "a"), (Role::Assistant, "summarise me")],
    );
    r.purpose = Purpose::Compact;
    assert_eq!(m.complete(r.clone()).await.unwrap().text, "SUMMARY");
    std::sync::Arc::make_mut(&mut r.thread).pop();
    assert_eq!(
        m.complete(r).await.unwrap().text,
        "1 earlier entries; last: a"
    );
    // Compaction requests never hit turn rules and vice versa.
    let t = m
        .complete(req("x", "X", &[(Role::User, "summarise me")]))
        .await
        .unwrap();
    assert_eq!(t.text, "default for X");
}

#[test]
fn bad_scripts_are_refused_with_a_reason() {
    let e = ScriptedModel::from_toml_str("[[rule]]\ntext = ", Arc::new(SystemClock))
        .err()
        .unwrap();
    assert!(e.to_string().contains("invalid script"), "{e}");
    let e = ScriptedModel::from_toml_str("[[rule]]\nrole = \"robot\"", Arc::new(SystemClock))
        .err()
        .unwrap();
    assert!(
        e.to_string().contains("rule #1") && e.to_string().contains("robot"),
        "{e}"
    );
    let e = ScriptedModel::from_toml_str("[[rule]]\ncontain = \"x\"", Arc::new(SystemClock))
        .err()
        .unwrap();
    assert!(e.to_string().contains("contain"), "{e}");
    let e = ScriptedModel::from_file(
        std::path::Path::new("/nonexistent/script.toml"),
        Arc::new(SystemClock),
    )
    .err()
    .unwrap();
    assert!(e.to_string().contains("cannot read script"), "{e}");
}

/// `{{user_turns}}` counts the user entries of the thread the model is shown, the one asked now
/// included: a conversation's later turn says so.
#[tokio::test]
async fn user_turns_counts_the_user_entries_shown() {
    let m = ScriptedModel::from_toml_str(
        "[defaults]\ntext = \"{{input}} (turn {{user_turns}})\"\n",
        Arc::new(SystemClock),
    )
    .unwrap();
    let first = m
        .complete(req("research", "R", &[(Role::User, "hi")]))
        .await
        .unwrap();
    assert_eq!(first.text, "hi (turn 1)");
    let later = m
        .complete(req(
            "research",
            "R",
            &[
                (Role::User, "hi"),
                (Role::Assistant, "hi (turn 1)"),
                (Role::User, "again"),
            ],
        ))
        .await
        .unwrap();
    assert_eq!(later.text, "again (turn 2)");
}
