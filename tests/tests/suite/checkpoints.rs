//! Checkpoints through real actors (seed 001): taken by themselves on a phase completion, a
//! pause, a rate limit, an error and a terminate, taken on demand and before a requested
//! compaction, pruned by config, and restored exactly — conversation, phase, progress, pending
//! work and environment.

use agentd_proto::{AgentStatus, CheckpointReason, Command, Control, Role};
use agentd_tests::*;
use std::collections::BTreeMap;

const SCRIPT: &str = r#"
[[rule]]
agent = "plain"
contains = "phase one"
text = "=== PHASE 1 COMPLETE ==="

[[rule]]
agent = "plain"
contains = "phase two"
text = "=== PHASE 2 COMPLETE ==="

[[rule]]
agent = "plain"
contains = "limited"
once = true
rate_limit_ms = 5000

[[rule]]
agent = "plain"
contains = "explode"
error = "the model broke"

[[rule]]
text = "ok: {{input}}"
"#;

/// [`cast`] with `plain` working in four phases.
fn phased_cast() -> Vec<agentd_actors::AgentType> {
    cast().edited("plain", |t| t.phases = Some(4))
}

fn reasons(list: &[agentd_proto::Checkpoint]) -> Vec<(CheckpointReason, String)> {
    list.iter().map(|c| (c.reason, c.trigger.clone())).collect()
}

#[actix_rt::test]
async fn phase_completion_takes_a_checkpoint_with_phase_and_progress() {
    let sys = TestSystem::builder()
        .script(SCRIPT)
        .types(phased_cast())
        .start()
        .await;
    let a = sys.root("plain", Some("phase one")).await;
    wait_until("phase checkpoint", || async {
        !sys.system.checkpoints(&a.id).await.unwrap().is_empty()
    })
    .await;
    let list = sys.system.checkpoints(&a.id).await.unwrap();
    let cp = &list[0];
    assert_eq!(
        (cp.reason, cp.trigger.as_str()),
        (CheckpointReason::Auto, "phase 1 complete")
    );
    assert_eq!(cp.phase, Some(1));
    assert_eq!(cp.progress, Some(0.25));
    let texts: Vec<&str> = cp.conversation.iter().map(|e| e.text.as_str()).collect();
    assert_eq!(texts, vec!["phase one", "=== PHASE 1 COMPLETE ==="]);
    let rec = sys.wait_for_status(&a.id, AgentStatus::Idle).await;
    assert_eq!(rec.progress, Some(0.25));
}

#[actix_rt::test]
async fn pause_rate_limit_error_and_terminate_each_take_one() {
    let sys = TestSystem::builder()
        .script(SCRIPT)
        .types(phased_cast())
        .manual_clock()
        .start()
        .await;
    let clock = sys.manual_clock();
    let a = sys.root("plain", None).await;
    sys.system.control(&a.id, Control::Pause).await.unwrap();
    sys.system.send(&a.id, "limited work", false).await.unwrap();
    sys.system.control(&a.id, Control::Resume).await.unwrap();
    let rec = sys
        .wait_for_status(&a.id, AgentStatus::WaitingRateLimit)
        .await;
    assert_eq!(rec.resume_at_ms, Some(1_000_000 + 5_000));
    wait_until("resume timer", || async { clock.sleepers() == 1 }).await;
    clock.advance(5_000);
    sys.wait_for_entry(&a.id, Role::Assistant, "ok: limited work")
        .await;
    sys.system.send(&a.id, "explode", false).await.unwrap();
    sys.wait_for_status(&a.id, AgentStatus::Failed).await;
    sys.system.control(&a.id, Control::Terminate).await.unwrap();
    sys.wait_for_status(&a.id, AgentStatus::Terminated).await;
    let list = sys.system.checkpoints(&a.id).await.unwrap();
    let got = reasons(&list);
    assert_eq!(
        got.iter().map(|(r, _)| *r).collect::<Vec<_>>(),
        vec![
            CheckpointReason::Auto,
            CheckpointReason::Error,
            CheckpointReason::RateLimit,
            CheckpointReason::Auto,
        ],
        "newest first: terminate, error, rate limit, pause — {got:?}"
    );
    assert_eq!(got[0].1, "terminate");
    assert!(got[1].1.contains("model"), "{got:?}");
    // The rate-limit checkpoint holds the interrupted item as pending work.
    let limited = &list[2];
    assert_eq!(limited.status, AgentStatus::WaitingRateLimit);
    assert_eq!(limited.pending.len(), 1);
    assert_eq!(
        limited.pending_actions(),
        vec!["message: limited work".to_string()]
    );
    // The pause checkpoint holds the message that arrived while paused.
    assert_eq!(list[3].status, AgentStatus::Paused);
}

#[actix_rt::test]
async fn a_manual_checkpoint_restores_conversation_phase_and_environment_exactly() {
    let sys = TestSystem::builder()
        .script(SCRIPT)
        .types(phased_cast())
        .start()
        .await;
    let a = sys
        .system
        .spawn(agentd_proto::SpawnRequest {
            agent_type: Some("plain".into()),
            prompt: Some("phase one".into()),
            env: BTreeMap::from([("REGION".to_string(), "eu".to_string())]),
            ..Default::default()
        })
        .await
        .unwrap();
    sys.wait_for_entry(&a.id, Role::Assistant, "PHASE 1").await;
    sys.wait_for_status(&a.id, AgentStatus::Idle).await;
    let manual = sys
        .system
        .execute(Command::Checkpoint {
            agent_id: a.id.clone(),
        })
        .await
        .unwrap();
    assert_eq!(manual["reason"], "manual");
    assert_eq!(manual["environment"], serde_json::json!(["REGION"]));
    let at = sys.thread(&a.id).await;

    sys.system.send(&a.id, "phase two", false).await.unwrap();
    sys.wait_for_entry(&a.id, Role::Assistant, "PHASE 2").await;
    sys.wait_for_status(&a.id, AgentStatus::Idle).await;
    assert_eq!(sys.record(&a.id).await.phase, Some(2));

    let id: uuid::Uuid = serde_json::from_value(manual["checkpoint_id"].clone()).unwrap();
    let rec = sys.system.restore(&a.id, Some(id)).await.unwrap();
    assert_eq!(rec.phase, Some(1));
    assert_eq!(rec.progress, Some(0.25));
    assert_eq!(rec.env.get("REGION").map(String::as_str), Some("eu"));
    assert_eq!(sys.thread(&a.id).await, at, "the conversation is back");
    sys.wait_for_status(&a.id, AgentStatus::Idle).await;
    // And it goes on from there.
    sys.system
        .send(&a.id, "after restore", false)
        .await
        .unwrap();
    sys.wait_for_entry(&a.id, Role::Assistant, "ok: after restore")
        .await;
    assert_eq!(sys.thread(&a.id).await.len(), at.len() + 2);
}

#[actix_rt::test]
async fn restoring_a_rate_limit_checkpoint_runs_its_pending_turn_once() {
    let sys = TestSystem::builder()
        .script(SCRIPT)
        .types(phased_cast())
        .manual_clock()
        .start()
        .await;
    let clock = sys.manual_clock();
    let a = sys.root("plain", Some("limited run")).await;
    sys.wait_for_status(&a.id, AgentStatus::WaitingRateLimit)
        .await;
    let cp = sys.system.checkpoints(&a.id).await.unwrap()[0].clone();
    assert_eq!(cp.reason, CheckpointReason::RateLimit);
    wait_until("resume timer", || async { clock.sleepers() == 1 }).await;
    clock.advance(5_000);
    sys.wait_for_entry(&a.id, Role::Assistant, "ok: limited run")
        .await;
    sys.wait_for_status(&a.id, AgentStatus::Idle).await;
    // Back to the moment of the rate limit: the turn runs again from its start, once.
    sys.system.restore(&a.id, Some(cp.id)).await.unwrap();
    sys.wait_for_entry(&a.id, Role::Assistant, "ok: limited run")
        .await;
    sys.wait_for_status(&a.id, AgentStatus::Idle).await;
    let texts: Vec<String> = sys
        .thread(&a.id)
        .await
        .into_iter()
        .map(|e| e.text)
        .collect();
    assert_eq!(texts, vec!["limited run", "ok: limited run"]);
}

#[actix_rt::test]
async fn old_checkpoints_are_pruned_and_unknown_ones_are_refused() {
    let sys = TestSystem::builder()
        .script(SCRIPT)
        .types(phased_cast())
        .config(|c| c.checkpoints_keep = 2)
        .start()
        .await;
    let a = sys.root("plain", None).await;
    for _ in 0..4 {
        sys.system.checkpoint(&a.id).await.unwrap();
    }
    assert_eq!(sys.system.checkpoints(&a.id).await.unwrap().len(), 2);
    let err = sys
        .system
        .restore(&a.id, Some(agentd_proto::ids::new_id()))
        .await
        .unwrap_err();
    assert_eq!(err.code, agentd_proto::ErrorCode::CheckpointNotFound);
    let other = sys.root("plain", None).await;
    let err = sys.system.restore(&other.id, None).await.unwrap_err();
    assert_eq!(err.code, agentd_proto::ErrorCode::CheckpointNotFound);
}

/// A lead that compacts the agent its message names (`agent_compact`), and hears its child's
/// forwards without acting on them.
const COMPACTING_LEAD: &str = r#"
[[rule]]
purpose = "compact"
text = "SUMMARY of the early work"

[[rule]]
agent = "lead"
contains = "From "
text = "lead heard it"

[[rule]]
agent = "lead"
role = "user"
text = "compacting"
[[rule.tool_calls]]
name = "agent_compact"
arguments = { agent_id = "{{input}}" }

[[rule]]
agent = "lead"
role = "tool"
text = "compaction asked"

[[rule]]
text = "ok: {{input}}"
"#;

/// Seed 003's compaction log: `agent_compact` checkpoints the whole thread first (reason
/// `compact`, without the compact item as pending work), then replaces it and says so with a
/// `context_compacted` event that has the sizes before and after; restoring the checkpoint
/// brings the dropped history back, and nothing compacts it again.
#[actix_rt::test]
async fn agent_compact_checkpoints_the_whole_thread_first_and_logs_the_sizes() {
    let sys = TestSystem::builder()
        .script(COMPACTING_LEAD)
        .config(|c| c.limits.compact_keep_recent = 2)
        .start()
        .await;
    let lead = sys.root("lead", None).await;
    // Early messages long enough that their summary is shorter.
    let long = |m: &str| format!("{m} {}", "and some detail ".repeat(20));
    let child = sys.spawn_child(&lead.id, "coding", &long("one")).await;
    sys.wait_for_entry(&child, Role::Assistant, "ok: one").await;
    for m in [long("two"), "three".to_string()] {
        sys.wait_for_status(&child, AgentStatus::Idle).await;
        sys.system.send(&child, &m, false).await.unwrap();
        sys.wait_for_entry(&child, Role::Assistant, &format!("ok: {m}"))
            .await;
    }
    sys.wait_for_status(&child, AgentStatus::Idle).await;
    let full = sys.thread(&child).await;
    assert_eq!(full.len(), 6);

    let mut events = sys.events();
    sys.system.send(&lead.id, &child, false).await.unwrap();
    let checkpointed = next_event(&mut events, "the compaction's checkpoint", |e| {
        matches!(e, agentd_proto::Event::Checkpointed { agent_id, reason: CheckpointReason::Compact, .. } if *agent_id == child)
    })
    .await;
    let compacted = next_event(&mut events, "the compaction log", |e| {
        matches!(e, agentd_proto::Event::ContextCompacted { agent_id, .. } if *agent_id == child)
    })
    .await;
    let agentd_proto::Event::Checkpointed { checkpoint_id, .. } = checkpointed else {
        unreachable!()
    };
    let agentd_proto::Event::ContextCompacted {
        estimated_tokens,
        context_tokens,
        trigger,
        entries_before,
        entries_after,
        estimated_tokens_after,
        checkpoint_id: logged_checkpoint,
        ..
    } = compacted
    else {
        unreachable!()
    };
    assert_eq!(trigger, agentd_proto::CompactionTrigger::Requested);
    assert_eq!((entries_before, entries_after), (6, 3));
    assert!(
        estimated_tokens_after < estimated_tokens,
        "{estimated_tokens} → {estimated_tokens_after}"
    );
    assert_eq!(context_tokens, 0, "the provider states no window");
    assert_eq!(logged_checkpoint, Some(checkpoint_id));

    let compacted = sys.thread(&child).await;
    let texts: Vec<&str> = compacted.iter().map(|e| e.text.as_str()).collect();
    assert_eq!(
        texts,
        vec![
            "Summary of the earlier conversation: SUMMARY of the early work",
            "three",
            "ok: three"
        ]
    );

    // The checkpoint holds the whole thread as it was, and no pending work: the compact
    // item that took it is not in it.
    let list = sys.system.checkpoints(&child).await.unwrap();
    let cp = list
        .iter()
        .find(|c| c.id == checkpoint_id)
        .expect("the checkpoint is listed");
    assert_eq!(
        (cp.reason, cp.trigger.as_str()),
        (CheckpointReason::Compact, "compact")
    );
    assert_eq!(cp.conversation, full);
    assert!(cp.pending.is_empty(), "{:?}", cp.pending_actions());
    sys.wait_for_status(&child, AgentStatus::Idle).await;

    // Restored: the dropped history is back, and stays (nothing compacts it again).
    sys.system
        .restore(&child, Some(checkpoint_id))
        .await
        .unwrap();
    sys.wait_for_status(&child, AgentStatus::Idle).await;
    assert_eq!(sys.thread(&child).await, full);
    sys.system.send(&child, "four", false).await.unwrap();
    let t = sys
        .wait_for_entry(&child, Role::Assistant, "ok: four")
        .await;
    assert_eq!(t.len(), 8);
    assert_eq!(t[..6], full[..]);
}

/// A checkpoint taken while a turn runs records what the turn does then, not only the last
/// phase milestone: the model call, then the tool call that waits.
#[actix_rt::test]
async fn a_checkpoint_taken_mid_turn_records_the_running_step() {
    let script = r#"
[[rule]]
agent = "lead"
role = "user"
contains = "ask"
delay_ms = 10000
[[rule.tool_calls]]
name = "Manage"
arguments = { command = "send_message", worker = "Ops", message = "count", threadAlias = "a" }

[[rule]]
agent = "ops"
delay_ms = 60000
text = "seven"

[[rule]]
text = "ok: {{input}}"
"#;
    let sys = TestSystem::builder()
        .script(script)
        .manual_clock()
        .start()
        .await;
    let clock = sys.manual_clock();
    let lead = sys.root("lead", Some("ask ops")).await;
    wait_until("the model asked", || async { clock.sleepers() == 1 }).await;
    let cp = sys.system.checkpoint(&lead.id).await.unwrap();
    assert_eq!(cp.current_step.as_deref(), Some("calling model"));
    clock.advance(10_000);
    wait_until("the worker asked", || async { clock.sleepers() == 2 }).await;
    let cp = sys.system.checkpoint(&lead.id).await.unwrap();
    assert_eq!(cp.current_step.as_deref(), Some("running tool Manage"));
    // The record itself keeps no running step.
    assert_eq!(
        sys.store
            .get_agent(&lead.id)
            .await
            .unwrap()
            .unwrap()
            .current_step,
        None
    );
}
