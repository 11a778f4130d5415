//! Every tool call has exactly one result, right after it, before each model request — against
//! stand-in OpenAI and Anthropic endpoints that refuse a conversation breaking that rule as the
//! real APIs do ([`StrictProvider`]). A lead's turn is cut off while its `Manage` call waits for a
//! slow worker, by each of interrupt, cancel, terminate (then restore), close, and an interrupt
//! followed by a reset or a compaction; the lead's stored thread keeps the rule (the open call is
//! closed with an `interrupted` error result before the interruption marker) and every request
//! it makes afterwards is accepted.

use agentd_actors::Threads;
use agentd_proto::conversation::is_paired;
use agentd_proto::{AgentRecord, AgentStatus, Control, InboxItem, ManageOptions, Role};
use agentd_store::MemoryStore;
use agentd_tests::*;
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;

/// The text of a request's last message (a string, or its text blocks).
fn last_text(body: &Value) -> String {
    let last = body["messages"]
        .as_array()
        .and_then(|m| m.last())
        .cloned()
        .unwrap_or_default();
    match &last["content"] {
        Value::String(s) => s.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .filter_map(|b| b["text"].as_str())
            .collect::<Vec<_>>()
            .join(""),
        _ => String::new(),
    }
}

/// Two calls in one step: `current_time` (answers at once), then `Manage` to the slow worker.
fn answer_delegating(d: Dialect) -> Value {
    let manage = json!({
        "command": "send_message", "worker": "Ops", "message": "slow job",
        "threadAlias": "slow", "syncTimeoutMs": 60000
    });
    match d {
        Dialect::OpenAi => json!({
            "choices": [{"message": {"role": "assistant", "content": null, "tool_calls": [
                {"id": "call_time", "type": "function",
                 "function": {"name": "current_time", "arguments": "{}"}},
                {"id": "call_manage", "type": "function",
                 "function": {"name": "Manage", "arguments": manage.to_string()}}
            ]}}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 2}
        }),
        Dialect::Anthropic => json!({
            "content": [
                {"type": "tool_use", "id": "call_time", "name": "current_time", "input": {}},
                {"type": "tool_use", "id": "call_manage", "name": "Manage", "input": manage}
            ],
            "usage": {"input_tokens": 10, "output_tokens": 2}
        }),
    }
}

fn respond(d: Dialect, body: &Value) -> Answer {
    let text = last_text(body);
    if body.to_string().contains("slow job") && !body.to_string().contains("call_manage") {
        // The worker: it answers long after every test here is over.
        return Answer {
            delay: Duration::from_secs(60),
            body: d.text_answer("ops late"),
        };
    }
    if text == "delegate" {
        return Answer::now(answer_delegating(d));
    }
    Answer::now(d.text_answer(&format!("lead ok after {text}")))
}

struct Scene {
    sys: TestSystem,
    provider: StrictProvider,
    lead: AgentRecord,
}

/// A lead on `dialect`'s backend whose turn waits in `Manage` for a worker that answers late:
/// its `current_time` call is answered, its `Manage` call is open.
async fn lead_waiting_on_a_call(dialect: Dialect) -> Scene {
    let provider = StrictProvider::start(respond);
    let model = provider.model(dialect, Duration::from_secs(120));
    let mut types = default_types(ManageOptions::default());
    for ty in &mut types {
        if ty.name == "lead" {
            ty.tools = vec!["current_time".into()];
        }
    }
    let sys = TestSystem::builder()
        .model(model)
        .types(types)
        .config(|c| c.limits.compact_keep_recent = 2)
        .start()
        .await;
    let lead = sys.root("lead", Some("delegate")).await;
    wait_until("the lead's Manage call waits on the worker", || async {
        let t = sys.thread(&lead.id).await;
        t.iter()
            .any(|e| e.tool_call_id.as_deref() == Some("call_time"))
            && provider.accepted().iter().any(|b| {
                b.to_string().contains("slow job") && !b.to_string().contains("call_manage")
            })
    })
    .await;
    Scene {
        sys,
        provider,
        lead,
    }
}

impl Scene {
    /// The lead's thread keeps the rule, and its `Manage` call was closed as interrupted before
    /// the interruption marker (when `marker`).
    async fn assert_closed(&self, marker: bool) -> Vec<agentd_proto::ThreadEntry> {
        let t = self.sys.thread(&self.lead.id).await;
        assert!(is_paired(&t), "the stored thread breaks the rule: {t:#?}");
        let closing = t
            .iter()
            .position(|e| e.tool_call_id.as_deref() == Some("call_manage"))
            .expect("the Manage call has a result");
        let v: Value = serde_json::from_str(&t[closing].text).unwrap();
        assert_eq!(v["error"]["code"], "interrupted", "{}", t[closing].text);
        if marker {
            let at = t.iter().position(|e| e.interrupted).expect("the marker");
            assert!(closing < at, "the closing comes before the marker");
        }
        t
    }

    /// Applies `control` and waits until the lead's open call has its result.
    async fn control(&self, control: Control) {
        self.sys
            .system
            .control(&self.lead.id, control)
            .await
            .unwrap();
        wait_until("the open call closed", || async {
            self.sys
                .thread(&self.lead.id)
                .await
                .iter()
                .any(|e| e.tool_call_id.as_deref() == Some("call_manage"))
        })
        .await;
    }

    fn assert_every_request_accepted(&self) {
        assert_eq!(self.provider.violations(), Vec::<String>::new());
    }

    /// Sends `text` and waits for the lead's answer to it.
    async fn answered(&self, text: &str, interrupt: bool) {
        self.sys
            .system
            .send(&self.lead.id, text, interrupt)
            .await
            .unwrap();
        self.sys
            .wait_for_entry(
                &self.lead.id,
                Role::Assistant,
                &format!("lead ok after {text}"),
            )
            .await;
    }
}

async fn interrupted_then_answers(dialect: Dialect) {
    let s = lead_waiting_on_a_call(dialect).await;
    s.answered("after the interrupt", true).await;
    s.assert_closed(true).await;
    s.assert_every_request_accepted();
    s.sys.wait_for_status(&s.lead.id, AgentStatus::Idle).await;
}

#[actix_rt::test]
async fn openai_an_interrupted_call_is_closed_and_the_next_request_accepted() {
    interrupted_then_answers(Dialect::OpenAi).await;
}

#[actix_rt::test]
async fn anthropic_an_interrupted_call_is_closed_and_the_next_request_accepted() {
    interrupted_then_answers(Dialect::Anthropic).await;
}

async fn cancelled(dialect: Dialect) {
    let s = lead_waiting_on_a_call(dialect).await;
    s.control(Control::Cancel).await;
    s.assert_closed(true).await;
}

#[actix_rt::test]
async fn openai_a_cancel_closes_the_open_call() {
    cancelled(Dialect::OpenAi).await;
}

#[actix_rt::test]
async fn anthropic_a_cancel_closes_the_open_call() {
    cancelled(Dialect::Anthropic).await;
}

async fn terminated_then_restored(dialect: Dialect) {
    let s = lead_waiting_on_a_call(dialect).await;
    s.control(Control::Terminate).await;
    s.assert_closed(false).await;
    // The terminate checkpoint was taken while the call was open: the restored conversation
    // keeps the rule too, and the lead works again.
    s.sys.system.restore(&s.lead.id, None).await.unwrap();
    let t = s.sys.thread(&s.lead.id).await;
    assert!(is_paired(&t), "the restored thread breaks the rule: {t:#?}");
    s.answered("after the restore", false).await;
    assert!(is_paired(&s.sys.thread(&s.lead.id).await));
    s.assert_every_request_accepted();
}

#[actix_rt::test]
async fn openai_terminate_and_restore_keep_every_call_answered() {
    terminated_then_restored(Dialect::OpenAi).await;
}

#[actix_rt::test]
async fn anthropic_terminate_and_restore_keep_every_call_answered() {
    terminated_then_restored(Dialect::Anthropic).await;
}

async fn closed(dialect: Dialect) {
    let s = lead_waiting_on_a_call(dialect).await;
    s.sys
        .system
        .control(&s.lead.id, Control::Close)
        .await
        .unwrap();
    s.sys.wait_for_status(&s.lead.id, AgentStatus::Closed).await;
    s.assert_closed(true).await;
    // A closed agent re-opens on a message, on a conversation the provider takes.
    s.answered("after the close", false).await;
    s.assert_every_request_accepted();
}

#[actix_rt::test]
async fn openai_a_close_closes_the_open_call() {
    closed(Dialect::OpenAi).await;
}

#[actix_rt::test]
async fn anthropic_a_close_closes_the_open_call() {
    closed(Dialect::Anthropic).await;
}

async fn interrupted_then_compacted_and_reset(dialect: Dialect) {
    let s = lead_waiting_on_a_call(dialect).await;
    s.answered("after the interrupt", true).await;
    s.sys.wait_for_status(&s.lead.id, AgentStatus::Idle).await;
    // Compaction keeps the 2 most recent entries: never a result without its call, and the
    // summarised part it sends the model keeps the rule too.
    let before = s.provider.accepted().len();
    s.sys
        .system
        .post(&s.lead.id, InboxItem::Compact)
        .await
        .unwrap();
    wait_until("the compaction", || async {
        s.sys
            .thread(&s.lead.id)
            .await
            .first()
            .is_some_and(|e| e.text.starts_with("Summary of the earlier conversation"))
    })
    .await;
    assert!(
        s.provider.accepted().len() > before,
        "the compaction asked the model"
    );
    assert!(is_paired(&s.sys.thread(&s.lead.id).await));
    s.answered("after the compaction", false).await;
    s.sys
        .system
        .post(
            &s.lead.id,
            InboxItem::Reset {
                message: Some("fresh start".into()),
            },
        )
        .await
        .unwrap();
    s.sys
        .wait_for_entry(&s.lead.id, Role::Assistant, "lead ok after fresh start")
        .await;
    assert!(is_paired(&s.sys.thread(&s.lead.id).await));
    s.assert_every_request_accepted();
}

#[actix_rt::test]
async fn openai_compaction_and_reset_after_an_interrupt_keep_the_rule() {
    interrupted_then_compacted_and_reset(Dialect::OpenAi).await;
}

#[actix_rt::test]
async fn anthropic_compaction_and_reset_after_an_interrupt_keep_the_rule() {
    interrupted_then_compacted_and_reset(Dialect::Anthropic).await;
}

/// A thread written before the rule was kept (an interrupted call left open, then more
/// messages) is still sent as the provider requires: the backends pair it at request time.
#[actix_rt::test]
async fn a_thread_already_broken_is_paired_in_every_request() {
    for dialect in [Dialect::OpenAi, Dialect::Anthropic] {
        let provider = StrictProvider::start(respond);
        let model = provider.model(dialect, Duration::from_secs(5));
        let store = Arc::new(MemoryStore::new());
        let sys = TestSystem::builder()
            .model(model)
            .store(store.clone())
            .start()
            .await;
        let a = sys.root("plain", None).await;
        // Written while no actor holds the thread, so that its next activation reads it.
        sys.system.control(&a.id, Control::Close).await.unwrap();
        let first =
            agentd_proto::ThreadEntry::text(uuid::Uuid::from_u128(1), Role::User, "start", 1);
        let mut call =
            agentd_proto::ThreadEntry::text(uuid::Uuid::from_u128(2), Role::Assistant, "", 2);
        call.tool_calls = vec![agentd_proto::ToolCall {
            id: "old_call".into(),
            name: "current_time".into(),
            arguments: json!({}),
        }]
        .into();
        let marker = agentd_proto::ThreadEntry {
            interrupted: true,
            ..agentd_proto::ThreadEntry::text(
                uuid::Uuid::from_u128(3),
                Role::System,
                "(the previous turn was interrupted)",
                3,
            )
        };
        for e in [&first, &call, &marker] {
            store.append(&a.id, e).await.unwrap();
        }
        sys.system.send(&a.id, "hello", false).await.unwrap();
        sys.wait_for_entry(&a.id, Role::Assistant, "lead ok after hello")
            .await;
        assert_eq!(provider.violations(), Vec::<String>::new(), "{dialect:?}");
        let sent = provider.accepted().last().cloned().unwrap();
        assert!(
            sent.to_string().contains("old_call") && sent.to_string().contains("interrupted"),
            "the old call went out answered: {sent}"
        );
    }
}
