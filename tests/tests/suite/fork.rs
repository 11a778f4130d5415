//! Forks through real actors: a new root of the source's type whose thread is a copy of the
//! source's up to a point (now, a thread entry, a checkpoint), the source untouched; a cut
//! between a tool call and its result closes the call; the fork records where it came from; a
//! retry under one idempotency key answers one fork and never rolls it back.

use agentd_proto::{AgentStatus, CheckpointReason, Command, ErrorCode, Role};
use agentd_tests::*;

const SCRIPT: &str = r#"
[[rule]]
contains = "what time"
role = "user"
[[rule.tool_calls]]
name = "current_time"
arguments = {}

[[rule]]
role = "tool"
text = "it is late"

[[rule]]
text = "ok: {{input}}"
"#;

async fn system() -> TestSystem {
    TestSystem::builder()
        .script(SCRIPT)
        .types(plain_with_clock())
        .start()
        .await
}

/// The texts of `id`'s thread.
async fn texts(sys: &TestSystem, id: &str) -> Vec<String> {
    sys.thread(id).await.into_iter().map(|e| e.text).collect()
}

/// A root of `plain` that answered `first` and then `second`.
async fn answered_twice(sys: &TestSystem) -> String {
    let a = sys.root("plain", Some("first")).await;
    sys.wait_for_entry(&a.id, Role::Assistant, "ok: first")
        .await;
    sys.wait_for_status(&a.id, AgentStatus::Idle).await;
    sys.system.send(&a.id, "second", false).await.unwrap();
    sys.wait_for_entry(&a.id, Role::Assistant, "ok: second")
        .await;
    sys.wait_for_status(&a.id, AgentStatus::Idle).await;
    a.id
}

#[actix_rt::test]
async fn a_fork_copies_the_thread_and_goes_on_alone() {
    let sys = system().await;
    let source = answered_twice(&sys).await;
    let before = texts(&sys, &source).await;
    let fork = sys.system.fork(&source, None, None).await.unwrap();
    assert_ne!(fork.id, source);
    assert_eq!(&*fork.agent_type, "plain");
    assert_eq!(fork.parent_id, None, "a fork is a root");
    assert_eq!(texts(&sys, &fork.id).await, before);
    // It records where it came from: its first checkpoint.
    let cps = sys.system.checkpoints(&fork.id).await.unwrap();
    assert_eq!(cps.len(), 1);
    assert_eq!(cps[0].reason, CheckpointReason::Fork);
    assert_eq!(cps[0].trigger, format!("forked from {source} at now"));

    sys.system.send(&fork.id, "third", false).await.unwrap();
    sys.wait_for_entry(&fork.id, Role::Assistant, "ok: third")
        .await;
    assert_eq!(
        texts(&sys, &source).await,
        before,
        "the source is untouched"
    );
    let seen = sys.thread(&fork.id).await;
    assert!(
        seen.iter().any(|e| e.text == "ok: second"),
        "the fork's turn had the copied history: {seen:?}"
    );
}

#[actix_rt::test]
async fn a_fork_at_an_entry_or_a_checkpoint_copies_up_to_it() {
    let sys = system().await;
    let a = sys.root("plain", Some("first")).await;
    sys.wait_for_entry(&a.id, Role::Assistant, "ok: first")
        .await;
    sys.wait_for_status(&a.id, AgentStatus::Idle).await;
    let cp = sys.system.checkpoint(&a.id).await.unwrap();
    sys.system.send(&a.id, "second", false).await.unwrap();
    sys.wait_for_entry(&a.id, Role::Assistant, "ok: second")
        .await;
    sys.wait_for_status(&a.id, AgentStatus::Idle).await;

    let first_answer = sys.thread(&a.id).await[1].id;
    let at_entry = sys
        .system
        .fork(&a.id, Some(first_answer), None)
        .await
        .unwrap();
    assert_eq!(texts(&sys, &at_entry.id).await, ["first", "ok: first"]);
    let at_checkpoint = sys.system.fork(&a.id, Some(cp.id), None).await.unwrap();
    assert_eq!(texts(&sys, &at_checkpoint.id).await, ["first", "ok: first"]);
    let trigger = &sys.system.checkpoints(&at_checkpoint.id).await.unwrap()[0].trigger;
    assert_eq!(
        trigger,
        &format!("forked from {} at checkpoint {}", a.id, cp.id)
    );

    let nowhere = uuid::Uuid::now_v7();
    let err = sys
        .system
        .fork(&a.id, Some(nowhere), None)
        .await
        .unwrap_err();
    assert_eq!(err.code, ErrorCode::InvalidArgument, "{err}");
    let missing = uuid::Uuid::now_v7().to_string();
    let err = sys.system.fork(&missing, None, None).await.unwrap_err();
    assert_eq!(err.code, ErrorCode::AgentNotFound, "{err}");
}

#[actix_rt::test]
async fn a_cut_between_a_tool_call_and_its_result_closes_the_call() {
    let sys = system().await;
    let a = sys.root("plain", Some("what time is it")).await;
    sys.wait_for_entry(&a.id, Role::Assistant, "it is late")
        .await;
    sys.wait_for_status(&a.id, AgentStatus::Idle).await;
    let thread = sys.thread(&a.id).await;
    let call = thread
        .iter()
        .find(|e| !e.tool_calls.is_empty())
        .expect("the turn's tool call")
        .id;
    let fork = sys.system.fork(&a.id, Some(call), None).await.unwrap();
    let copied = sys.thread(&fork.id).await;
    assert!(
        agentd_proto::conversation::is_paired(&copied),
        "every call has its result: {copied:?}"
    );
    assert_eq!(
        copied.len(),
        3,
        "the question, the call, its closing: {copied:?}"
    );
    assert_eq!(copied[2].role, Role::Tool);
    assert_ne!(copied[2].text, "12:00");
    assert!(!copied.iter().any(|e| e.text == "it is late"));
    // A provider that pairs calls takes the fork's thread: the fork goes on.
    sys.system.send(&fork.id, "go on", false).await.unwrap();
    sys.wait_for_entry(&fork.id, Role::Assistant, "ok: go on")
        .await;
}

#[actix_rt::test]
async fn a_fork_retried_under_one_key_is_one_fork_and_is_not_rolled_back() {
    let sys = system().await;
    let source = answered_twice(&sys).await;
    let fork_cmd = || Command::Fork {
        agent_id: source.clone(),
        at: None,
        idempotency_key: Some("fork-1".into()),
    };
    let first = sys.system.execute(fork_cmd()).await.unwrap();
    let fork = first["agent_id"].as_str().unwrap().to_string();
    sys.system.send(&fork, "third", false).await.unwrap();
    sys.wait_for_entry(&fork, Role::Assistant, "ok: third")
        .await;
    sys.wait_for_status(&fork, AgentStatus::Idle).await;
    let again = sys.system.execute(fork_cmd()).await.unwrap();
    assert_eq!(again["agent_id"], first["agent_id"], "one fork");
    assert!(
        texts(&sys, &fork).await.contains(&"ok: third".to_string()),
        "the retry did not put the copy back over what the fork did since"
    );
    // The key with another fork — another point — is refused, not answered with this fork.
    let first_entry = sys.thread(&source).await[0].id;
    let other = Command::Fork {
        agent_id: source.clone(),
        at: Some(first_entry),
        idempotency_key: Some("fork-1".into()),
    };
    let err = sys.system.execute(other).await.unwrap_err();
    assert_eq!(err.code, ErrorCode::IdempotencyKeyReused, "{err}");
}
