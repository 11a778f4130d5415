//! The durable inbox: work queued when a process stops is resumed by the next one, in order,
//! each item once.

use agentd_actors::{AgentRecords, Inboxes};
use agentd_actors::{ManualClock, StoreErrorKind, ThreadStore};
use agentd_proto::{AgentStatus, ManageOptions, Role};
use agentd_store::MemoryStore;
use agentd_tests::*;
use std::sync::Arc;

const SCRIPT: &str = r#"
[[rule]]
agent = "plain"
contains = "slow"
delay_ms = 1000
text = "done: {{input}}"

[[rule]]
agent = "plain"
text = "done: {{input}}"
"#;

#[actix_rt::test]
async fn queued_work_survives_a_stop_and_resumes_in_order_once() {
    let store: Arc<dyn ThreadStore> = Arc::new(MemoryStore::new());
    let clock = ManualClock::new(1);
    let first = TestSystem::builder()
        .script(SCRIPT)
        .store(store.clone())
        .clock(Arc::new(clock.clone()))
        .start()
        .await;
    let a = first.root("plain", Some("slow m0")).await;
    wait_until("m0 running", || async { clock.sleepers() == 1 }).await;
    first.system.send(&a.id, "m1", false).await.unwrap();
    first.system.send(&a.id, "m2", false).await.unwrap();
    wait_until("queued", || async {
        first.system.inspect(&a.id).await.unwrap().live.inbox == Some(2)
    })
    .await;
    first.system.shutdown().await;
    assert_eq!(
        store.inbox_pending(&a.id).await.unwrap().len(),
        3,
        "in-flight and queued items stay pending"
    );

    let clock2 = ManualClock::new(1);
    let second = TestSystem::builder()
        .script(SCRIPT)
        .store(store.clone())
        .clock(Arc::new(clock2.clone()))
        .start()
        .await;
    second.system.send(&a.id, "m3", false).await.unwrap();
    wait_until("m0 re-run armed", || async { clock2.sleepers() == 1 }).await;
    clock2.advance(1000);
    second
        .wait_for_entry(&a.id, Role::Assistant, "done: m3")
        .await;
    second.wait_for_status(&a.id, AgentStatus::Idle).await;
    let texts: Vec<String> = second
        .thread(&a.id)
        .await
        .into_iter()
        .map(|e| e.text)
        .collect();
    assert_eq!(
        texts,
        vec![
            "slow m0",
            "done: slow m0",
            "m1",
            "done: m1",
            "m2",
            "done: m2",
            "m3",
            "done: m3"
        ]
    );
    wait_until("inbox drained", || async {
        store.inbox_pending(&a.id).await.unwrap().is_empty()
    })
    .await;
}

/// An item whose inbox write landed but whose answer was lost (a connection cut mid-call) is
/// stored yet queued nowhere; when it is delivered again, the agent takes it at its place in
/// the durable inbox: after what was stored before it, before what was stored after it.
#[actix_rt::test]
async fn a_stored_but_unqueued_item_delivered_again_keeps_its_place_in_the_inbox() {
    use agentd_proto::{Address, Envelope, InboxItem, Item};
    let store: Arc<dyn ThreadStore> = Arc::new(MemoryStore::new());
    let clock = ManualClock::new(1);
    let t = TestSystem::builder()
        .script(SCRIPT)
        .store(store.clone())
        .clock(Arc::new(clock.clone()))
        .start()
        .await;
    let a = t.root("plain", Some("slow m0")).await;
    wait_until("m0 running", || async { clock.sleepers() == 1 }).await;
    t.system.send(&a.id, "m1", false).await.unwrap();
    // m2's write reached the store; its answer never came back.
    let m2 = Envelope::new(
        Address::System,
        Address::agent(&a.id),
        Item::Inbox(InboxItem::message("m2")),
        1,
    );
    assert!(store.inbox_push(&a.id, &m2).await.unwrap());
    t.system.send(&a.id, "m3", false).await.unwrap();
    // The redelivery finds it stored already (a duplicate) but not queued: it is taken.
    let fresh = t.system.route_acked(m2).await.unwrap();
    assert!(!fresh, "the store had it");
    wait_until("m1, m2 and m3 queued", || async {
        t.system.inspect(&a.id).await.unwrap().live.inbox == Some(3)
    })
    .await;
    clock.advance(1000);
    t.wait_for_entry(&a.id, Role::Assistant, "done: m3").await;
    let inputs: Vec<String> = t.texts_of(&a.id, Role::User).await;
    assert_eq!(inputs, vec!["slow m0", "m1", "m2", "m3"]);
}

/// A system on a store whose batch writes can be made to fail, and a root on it.
async fn on_failing_store() -> (
    TestSystem,
    Arc<failing_store::FailingWrites>,
    agentd_proto::AgentRecord,
) {
    let store = Arc::new(failing_store::FailingWrites::default());
    let sys = TestSystem::builder()
        .script(SCRIPT)
        .store(store.clone())
        .start()
        .await;
    let a = sys.root("plain", None).await;
    (sys, store, a)
}

#[actix_rt::test]
async fn state_an_agent_could_not_write_is_written_once_the_store_takes_writes_again() {
    let (sys, store, a) = on_failing_store().await;
    store.fail(true);
    sys.system.send(&a.id, "hello", false).await.unwrap();
    // The turn runs (its input is queued durably), but its end cannot be written: the item
    // stays pending and the answer is not in the stored thread.
    wait_until("failed flushes", || async { store.refused() >= 3 }).await;
    assert_eq!(store.inbox_pending(&a.id).await.unwrap().len(), 1);
    assert!(
        !sys.texts_of(&a.id, Role::Assistant)
            .await
            .contains(&"done: hello".to_string())
    );
    // Writes work again: what was held is written, nothing was dropped.
    store.fail(false);
    sys.wait_for_entry(&a.id, Role::Assistant, "done: hello")
        .await;
    wait_until("the item done", || async {
        store.inbox_pending(&a.id).await.unwrap().is_empty()
    })
    .await;
    wait_until("the stored record idle with one turn", || async {
        let rec = store.get_agent(&a.id).await.unwrap().unwrap();
        rec.status == AgentStatus::Idle && rec.turns == 1
    })
    .await;
    assert_eq!(
        sys.texts_of(&a.id, Role::Assistant).await,
        vec!["done: hello"]
    );
}

#[actix_rt::test]
async fn state_that_cannot_be_encoded_is_given_up_and_the_agent_goes_on() {
    let (sys, store, a) = on_failing_store().await;
    store.fail_to_encode(true);
    sys.system.send(&a.id, "one", false).await.unwrap();
    // Both of the turn's batches (its start, its end) are refused.
    wait_until("two refused batches", || async { store.refused() >= 2 }).await;
    sys.wait_for_status(&a.id, AgentStatus::Idle).await;
    store.fail_to_encode(false);
    sys.system.send(&a.id, "two", false).await.unwrap();
    sys.wait_for_entry(&a.id, Role::Assistant, "done: two")
        .await;
    // The batch that could not be written was given up (retrying it could never succeed),
    // so the first item stays pending for the next activation; nothing held up the second.
    wait_until("the second item done", || async {
        store.inbox_pending(&a.id).await.unwrap().len() == 1
    })
    .await;
    let pending = store.inbox_pending(&a.id).await.unwrap();
    assert!(matches!(&pending[0].item,
        agentd_proto::Item::Inbox(agentd_proto::InboxItem::Message { text, .. }) if text == "one"));
}

/// A turn whose store read fails with `kind`: a passing failure (`transient`, `fenced`) is
/// retried until the store works again, and the turn then answers.
async fn a_turn_is_retried_through_a_store_failure_of_kind(kind: StoreErrorKind) {
    let (sys, store, a) = on_failing_store().await;
    store.fail_thread_reads(Some(kind));
    sys.system.send(&a.id, "hello", false).await.unwrap();
    wait_until("the turn retried", || async { store.refused_reads() >= 2 }).await;
    assert_ne!(
        sys.record(&a.id).await.status,
        AgentStatus::Failed,
        "{kind:?}"
    );
    store.fail_thread_reads(None);
    sys.wait_for_entry(&a.id, Role::Assistant, "done: hello")
        .await;
    sys.wait_for_status(&a.id, AgentStatus::Idle).await;
}

/// A turn whose store read fails with `kind`: a lasting failure (`corrupt`, `unsupported`)
/// fails the agent at once, with the store's reason, and is not tried again.
async fn a_turn_fails_at_once_on_a_store_failure_of_kind(kind: StoreErrorKind) {
    let (sys, store, a) = on_failing_store().await;
    store.fail_thread_reads(Some(kind));
    sys.system.send(&a.id, "hello", false).await.unwrap();
    let rec = sys.wait_for_status(&a.id, AgentStatus::Failed).await;
    assert_eq!(
        rec.status_reason.as_deref(),
        Some("store_error"),
        "{kind:?}"
    );
    let error = rec.last_error.unwrap_or_default();
    assert!(
        error.contains("thread reads are switched off"),
        "{kind:?}: {error}"
    );
    // The failure's checkpoint reads the thread too: one read for the turn, one for it.
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert!(store.refused_reads() <= 2, "{kind:?}: tried again");
}

#[actix_rt::test]
async fn a_transient_store_failure_retries_the_turn() {
    a_turn_is_retried_through_a_store_failure_of_kind(StoreErrorKind::Transient).await;
}

#[actix_rt::test]
async fn a_fenced_store_failure_retries_the_turn() {
    a_turn_is_retried_through_a_store_failure_of_kind(StoreErrorKind::Fenced).await;
}

#[actix_rt::test]
async fn a_corrupt_store_value_fails_the_agent_at_once() {
    a_turn_fails_at_once_on_a_store_failure_of_kind(StoreErrorKind::Corrupt).await;
}

#[actix_rt::test]
async fn an_unsupported_store_request_fails_the_agent_at_once() {
    a_turn_fails_at_once_on_a_store_failure_of_kind(StoreErrorKind::Unsupported).await;
}

/// On the embedded store a child's output to its parent is kept in the store's outbox with
/// the batch it was made from, until the parent's router has handled it: an output whose
/// process died before the parent got it (the child's item done, so nothing makes it again)
/// is handed to the parent by the next process's recovery.
#[actix_rt::test]
async fn a_child_output_kept_when_its_process_died_reaches_the_parent_after_a_restart() {
    use agentd_proto::{Address, Envelope, Item, Output};
    let dir = tempfile::tempdir().unwrap();
    let script = "[[rule]]\ntext = \"echo: {{input}}\"\n";
    let first = TestSystem::builder()
        .script(script)
        .embedded(dir.path())
        .start()
        .await;
    let store = first.store.clone();
    let lead = first.root("lead", Some("hi")).await;
    let child = first.spawn_child(&lead.id, "coding", "work").await;
    first
        .wait_for_entry(&lead.id, Role::User, "echo: work")
        .await;
    // Kept with the child's batch, let go once the lead's router handled it.
    outbox_emptied(&store).await;
    first.system.shutdown().await;
    // As a process that died right after the child's batch leaves it: kept, not handed over.
    let cause = uuid::Uuid::new_v4();
    let mut left = Envelope::new(
        Address::agent(&child),
        Address::agent(&lead.id),
        Item::Output(Output::Reply {
            text: "left behind".into(),
        }),
        1,
    );
    left.id = agentd_proto::ids::derived_id(cause, "output");
    left.causation_id = Some(cause);
    store
        .write_batch(&[agentd_actors::StoreWrite::Outbox {
            env: Arc::new(left),
        }])
        .await
        .unwrap();
    let second = TestSystem::builder()
        .script(script)
        .store(store.clone())
        .without_recovery()
        .start()
        .await;
    second.system.recover().await.unwrap();
    second
        .wait_for_entry(&lead.id, Role::User, "left behind")
        .await;
    outbox_emptied(&store).await;
    let forwards: Vec<String> = second
        .texts_of(&lead.id, Role::User)
        .await
        .into_iter()
        .filter(|t| t.contains("left behind") || t.contains("echo: work"))
        .collect();
    assert_eq!(forwards.len(), 2, "each output once: {forwards:?}");
}

/// Waits until `store`'s outbox keeps nothing.
async fn outbox_emptied(store: &Arc<dyn ThreadStore>) {
    wait_until("the outbox emptied", || async {
        store.outbox_pending().await.unwrap().is_empty()
    })
    .await;
}

/// What a turn sends its parent leaves with the store batch that records what it answers, so
/// a crash between the two cannot lose it: a Manage worker's reply from a step that also calls
/// tools goes with that step's entry, and a failed child's `[failed]` goes with the done mark
/// of the item that failed (both kept in the embedded store's outbox until handled).
#[actix_rt::test]
async fn a_step_reply_and_a_failure_leave_in_the_batch_of_what_they_answer() {
    use agentd_actors::StoreWrite;
    use agentd_proto::{Item, Output};
    let dir = tempfile::tempdir().unwrap();
    let redb = agentd_store::RedbStore::open(dir.path()).unwrap();
    let store = Arc::new(failing_store::FailingWrites::over(Arc::new(redb)));
    store.keep_batches();
    let script = concat!(
        ops_two_answers!("two answers"),
        "[[rule]]\nagent = \"coding\"\nerror = \"the model broke\"\n"
    );
    let sys = TestSystem::builder()
        .script(script)
        .types(ops_with_clock(ManageOptions::default()))
        .store(store.clone())
        .start()
        .await;
    let lead = sys.root("lead", None).await;
    let answer = sys
        .system
        .invoke_tool(
            Some(&lead.id),
            "Manage",
            serde_json::json!({"command": "send_message", "worker": "Ops",
                "message": "two answers", "threadAlias": "a", "syncMaxMessages": 2}),
        )
        .await
        .unwrap();
    assert_eq!(
        answer["messages"],
        serde_json::json!(["part one", "part two"])
    );
    let child = sys.spawn_child(&lead.id, "coding", "break it").await;
    sys.wait_for_entry(&lead.id, Role::User, "[failed]").await;
    outbox_emptied(&(store.clone() as Arc<dyn ThreadStore>)).await;

    let batches = store.batches();
    // The batch that kept an output `what` answers to.
    let keeping = |what: &dyn Fn(&Output) -> bool| {
        batches.iter().find(|b| {
            b.iter().any(|w| {
                matches!(w, StoreWrite::Outbox { env } if matches!(&env.item, Item::Output(o) if what(o)))
            })
        })
    };
    let step_reply = keeping(&|o| matches!(o, Output::Reply { text } if text == "part one"))
        .expect("the step's reply was kept in a batch");
    assert!(
        step_reply.iter().any(
            |w| matches!(w, StoreWrite::Append { entry, .. } | StoreWrite::AppendNew { entry, .. }
            if entry.text == "part one" && !entry.tool_calls.is_empty())
        ),
        "the reply went with its step's entry: {step_reply:?}"
    );
    let failure = keeping(&|o| matches!(o, Output::Failed { .. }));
    let failure = failure.expect("the failure was kept in a batch");
    assert!(
        failure
            .iter()
            .any(|w| matches!(w, StoreWrite::InboxDone { agent_id, .. }
            if agent_id.as_ref() == child.as_str())),
        "the failure went with the done mark of the item that failed: {failure:?}"
    );
}

/// A turn that ends while the next item's push is still under way (actix completes the turn in
/// the same poll as that item's delivery) is written together with the next turn's start, in
/// one batch: its answer, its item's done mark, the next input and the record. Written as soon
/// as it ended, the end took a batch and the next start another one (two store round trips a
/// message on Redis).
#[actix_rt::test]
async fn a_turn_ending_during_the_next_push_is_written_with_the_next_turns_start() {
    use agentd_actors::StoreWrite;
    let store = Arc::new(failing_store::FailingWrites::default());
    let sys = TestSystem::builder()
        .script("[[rule]]\ntext = \"ok\"\n")
        .store(store.clone())
        .start()
        .await;
    let agent = sys.root("lead", None).await.id;
    store.delay_pushes(20);
    store.keep_batches();
    let texts: Vec<String> = (0..8).map(|i| format!("m{i}")).collect();
    let sends = texts.iter().map(|t| sys.system.send(&agent, t, false));
    for sent in futures::future::join_all(sends).await {
        sent.unwrap();
    }
    wait_until("eight answers", || async {
        sys.texts_of(&agent, Role::Assistant).await.len() == 8
    })
    .await;
    let batches = store.batches();
    let appends = |b: &Vec<StoreWrite>| {
        b.iter()
            .filter(|w| matches!(w, StoreWrite::Append { .. } | StoreWrite::AppendNew { .. }))
            .count()
    };
    let shared = batches.iter().filter(|b| appends(b) == 2).count();
    assert!(
        batches.len() <= 8 + 2 && shared >= 6,
        "{} batches, {shared} with an answer and the next input: {:?}",
        batches.len(),
        batches.iter().map(appends).collect::<Vec<_>>()
    );
    assert_eq!(sys.texts_of(&agent, Role::User).await, texts);
}

/// A two-step turn: a step that calls `current_time` (30 tokens), then, on a clock that never
/// moves in the process that crashes, an answer (16 tokens).
const TWO_STEPS: &str = r#"
[[rule]]
agent = "plain"
role = "user"
text = "step one"
usage = { input = 20, output = 10 }
[[rule.tool_calls]]
name = "current_time"
arguments = {}

[[rule]]
agent = "plain"
role = "tool"
delay_ms = DELAY
text = "step two"
usage = { input = 12, output = 4 }
"#;

fn with_clock_tool() -> Vec<agentd_actors::AgentType> {
    let mut types = default_types(ManageOptions::default());
    for ty in &mut types {
        if ty.name == "plain" {
            ty.tools = vec!["current_time".into()];
        }
    }
    types
}

/// A process dies in the second step of a turn (its store takes no more writes, as after a
/// `kill -9`); the next process runs the turn again from the recorded first step. The tokens of
/// both steps are counted, once each — whether or not the dead process had written its record
/// with the first step's usage (`persisted_first`).
async fn a_crash_between_steps(persisted_first: bool) {
    let inner: Arc<dyn ThreadStore> = Arc::new(MemoryStore::new());
    let dying = Arc::new(failing_store::FailingWrites::over(inner.clone()));
    let clock = Arc::new(ManualClock::new(1_000));
    let a = TestSystem::builder()
        .script(&TWO_STEPS.replace("DELAY", "60000"))
        .types(with_clock_tool())
        .store(dying.clone())
        .clock(clock)
        .start()
        .await;
    let agent = a.root("plain", None).await;
    a.system.send(&agent.id, "two steps", false).await.unwrap();
    wait_until("the first step recorded", || async {
        inner
            .thread(&agent.id)
            .await
            .unwrap()
            .iter()
            .any(|e| e.role == Role::Tool)
    })
    .await;
    if persisted_first {
        // Any change of the record writes it, with the usage counted so far.
        a.system
            .set_env(&agent.id, [("K".to_string(), "v".to_string())].into())
            .await
            .unwrap();
        wait_until("the record written with the first step's usage", || async {
            inner
                .get_agent(&agent.id)
                .await
                .unwrap()
                .unwrap()
                .usage
                .input
                == 20
        })
        .await;
    }
    dying.fail(true);
    let b = TestSystem::builder()
        .script(&TWO_STEPS.replace("DELAY", "0"))
        .types(with_clock_tool())
        .store(inner.clone())
        .without_recovery()
        .start()
        .await;
    b.system.recover().await.unwrap();
    b.wait_for_entry(&agent.id, Role::Assistant, "step two")
        .await;
    let rec = b.wait_for_status(&agent.id, AgentStatus::Idle).await;
    assert_eq!(
        (rec.usage.input, rec.usage.output),
        (32, 14),
        "both steps' tokens, once each"
    );
}

#[actix_rt::test]
async fn the_tokens_of_steps_taken_before_a_crash_are_counted_after_it() {
    a_crash_between_steps(false).await;
}

#[actix_rt::test]
async fn the_tokens_of_a_step_already_counted_before_a_crash_are_not_counted_again() {
    a_crash_between_steps(true).await;
}

/// A process on the embedded store in `dir` with the default agent types, whose model echoes
/// (`done: …`).
fn embedded_process(dir: &std::path::Path) -> AgentdProcess {
    AgentdProcess::start(&[
        (
            "AGENTD__STORE__DATA_DIR",
            dir.join("data").display().to_string(),
        ),
        ("AGENTD__MODEL__SCRIPT", {
            let script = dir.join("script.toml");
            std::fs::write(&script, "[[rule]]\ntext = \"done: {{input}}\"\n").unwrap();
            script.display().to_string()
        }),
    ])
}

/// A lead's sub-agent, made and answered through the lead's own tools; answers `(lead, child)`.
fn a_lead_and_its_sub_agent(p: &AgentdProcess) -> (String, String) {
    let lead = p.spawn_with(serde_json::json!({"agent_type": "lead"}));
    let spawned = p
        .post(
            &format!("/v1/agents/{lead}/tools/spawn_agent"),
            serde_json::json!({"prompt": "survey the harbour"}),
        )
        .unwrap();
    let child = spawned["agent_id"].as_str().unwrap().to_string();
    p.wait_for("the sub-agent's answer", |p| {
        p.texts(&child)
            .contains(&"done: survey the harbour".to_string())
    });
    (lead, child)
}

/// Seed 002: a sub-agent closed before a restart keeps its history, and a follow-up after the
/// restart re-opens it on that history.
#[test]
fn a_sub_agent_closed_before_a_restart_is_followed_up_after_it() {
    let dir = tempfile::tempdir().unwrap();
    let a = embedded_process(dir.path());
    let (lead, child) = a_lead_and_its_sub_agent(&a);
    a.post(
        &format!("/v1/agents/{lead}/tools/close_agent"),
        serde_json::json!({"agent_id": child}),
    )
    .unwrap();
    a.wait_for("closed", |p| p.status(&child) == "closed");
    a.stop();
    let b = embedded_process(dir.path());
    assert_eq!(b.status(&child), "closed", "still closed after the restart");
    b.post(
        &format!("/v1/agents/{lead}/tools/send_agent_followup"),
        serde_json::json!({"agent_id": child, "message": "count the ships"}),
    )
    .unwrap();
    b.wait_for("the follow-up's answer", |p| {
        p.texts(&child)
            .contains(&"done: count the ships".to_string())
    });
    assert_eq!(
        b.texts(&child),
        vec![
            "survey the harbour",
            "done: survey the harbour",
            "count the ships",
            "done: count the ships"
        ],
        "re-opened on its history"
    );
    assert_ne!(b.status(&child), "closed");
}

/// Seed 002: a sub-agent deleted after a restart is gone — record, thread, its place among its
/// parent's children.
#[test]
fn a_sub_agent_is_deleted_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let a = embedded_process(dir.path());
    let (lead, child) = a_lead_and_its_sub_agent(&a);
    a.stop();
    let b = embedded_process(dir.path());
    b.post(
        &format!("/v1/agents/{lead}/tools/delete_agent"),
        serde_json::json!({"agent_id": child}),
    )
    .unwrap();
    assert_eq!(b.get_status(&format!("/v1/agents/{child}"), None).0, 404);
    assert_eq!(
        b.get_status(&format!("/v1/agents/{child}/thread"), None).0,
        404
    );
    let children = b.get(&format!("/v1/agents/{lead}/children"));
    assert_eq!(children["agents"], serde_json::json!([]), "{children}");
}
