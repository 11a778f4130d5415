//! What a parent's model hears of a Manage worker's forwarded answer, on the HTTP backends,
//! against stand-in OpenAI and Anthropic endpoints that refuse a conversation ending with an
//! assistant message as the real APIs do for models without prefill ([`StrictProvider`]).
//!
//! A forward is input for the parent to answer: one the parent runs a turn on
//! (`async_forward = "turn"`) is stored and sent as a user message with its `From <Title>: `
//! prefix; one a relaying parent keeps on its thread (`async_forward = "relay"`, stored as the
//! seed's assistant message) is still sent as user input with the parent's next message, never
//! in the parent's own voice (merged into its previous answer, or as a second assistant
//! message in a row). The same holds for a compaction: its request ends with the ask for the
//! summary, even where the part it summarises ends with the model's own answer.

use agentd_proto::{AgentStatus, AsyncForward, InboxItem, ManageOptions, Role};
use agentd_tests::strict_provider::last_text_of;
use agentd_tests::*;
use serde_json::Value;
use std::time::Duration;

/// The worker's answer as the lead hears it.
const FORWARD: &str = "From Ops: ops did: status please";

/// The text of a message (a string, or its text blocks).
fn text_of(message: &Value) -> String {
    match &message["content"] {
        Value::String(s) => s.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .filter_map(|b| b["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

fn messages(body: &Value) -> Vec<Value> {
    body["messages"].as_array().cloned().unwrap_or_default()
}

/// The worker answers "status please"; the lead answers "hello" with "lead ok", and anything
/// else by quoting the last text it was sent.
fn respond(d: Dialect, body: &Value) -> Answer {
    let last = messages(body).last().map(last_text_of).unwrap_or_default();
    let text = match last.as_str() {
        "status please" => "ops did: status please".to_string(),
        "hello" => "lead ok".to_string(),
        other => format!("lead heard: {other}"),
    };
    Answer::now(d.text_answer(&text))
}

struct Scene {
    sys: TestSystem,
    provider: StrictProvider,
    lead: String,
}

/// A lead on `dialect`'s backend (its workers too) that forwards as `forward` says, after one
/// exchange: "hello", "lead ok".
async fn lead_after_one_exchange(dialect: Dialect, forward: AsyncForward) -> Scene {
    let provider = StrictProvider::start(respond);
    let model = provider.model(dialect, Duration::from_secs(10));
    let types = default_types(ManageOptions {
        async_forward: forward,
        ..ManageOptions::default()
    });
    let sys = TestSystem::builder()
        .model(model)
        .types(types)
        .config(|c| c.limits.compact_keep_recent = 2)
        .start()
        .await;
    let lead = sys.root("lead", Some("hello")).await.id;
    sys.wait_for_entry(&lead, Role::Assistant, "lead ok").await;
    sys.wait_for_status(&lead, AgentStatus::Idle).await;
    Scene {
        sys,
        provider,
        lead,
    }
}

impl Scene {
    /// Sends Ops "status please" in async mode, as the lead's Manage call would.
    async fn ask_ops(&self) {
        self.sys
            .send_async(&self.lead, "Ops", "status please", "bg")
            .await;
    }

    /// Waits until the lead answered `text` or a request was refused or the lead failed.
    async fn lead_answered(&self, text: &str) {
        wait_until("the lead's answer, a refusal or a failure", || async {
            let answered = self
                .sys
                .texts_of(&self.lead, Role::Assistant)
                .await
                .iter()
                .any(|t| t == text);
            answered
                || !self.provider.violations().is_empty()
                || self.sys.record(&self.lead).await.status == AgentStatus::Failed
        })
        .await;
        assert_eq!(
            self.provider.violations(),
            Vec::<String>::new(),
            "every request ends with input for the model"
        );
        let answers = self.sys.texts_of(&self.lead, Role::Assistant).await;
        assert!(answers.iter().any(|t| t == text), "{answers:#?}");
    }

    /// The forward reached the model in user messages only, in every request the provider
    /// accepted that carried it; the last request carried it.
    fn assert_heard_as_input(&self) {
        let accepted = self.provider.accepted();
        for body in &accepted {
            for m in messages(body) {
                if text_of(&m).contains(FORWARD) {
                    assert_eq!(m["role"], "user", "the forward in the lead's voice: {body}");
                }
            }
        }
        let last = accepted.last().unwrap();
        assert!(
            messages(last).iter().any(|m| text_of(m).contains(FORWARD)),
            "the last request carries the forward: {last}"
        );
    }
}

/// The forward starts a turn: it is the lead's input, stored and sent as a user message.
async fn a_forward_that_starts_a_turn_is_user_input(dialect: Dialect) {
    let s = lead_after_one_exchange(dialect, AsyncForward::Turn).await;
    s.ask_ops().await;
    s.lead_answered(&format!("lead heard: {FORWARD}")).await;
    s.assert_heard_as_input();
    let thread = s.sys.thread(&s.lead).await;
    let forward = thread.iter().find(|e| e.text == FORWARD).unwrap();
    assert_eq!(forward.role, Role::User, "stored as input: {thread:#?}");
    assert!(forward.from_agent.is_some());
    s.sys.system.shutdown().await;
}

/// The forward is relayed: kept on the thread as the seed's assistant message without a turn,
/// and sent as user input with the lead's next message.
async fn a_relayed_forward_is_sent_as_user_input(dialect: Dialect) {
    let s = lead_after_one_exchange(dialect, AsyncForward::Relay).await;
    s.ask_ops().await;
    s.sys
        .wait_for_entry(&s.lead, Role::Assistant, FORWARD)
        .await;
    let rec = s.sys.wait_for_status(&s.lead, AgentStatus::Idle).await;
    assert_eq!(rec.turns, 1, "no turn on the relayed forward");
    s.sys
        .system
        .send(&s.lead, "what did Ops say", false)
        .await
        .unwrap();
    s.lead_answered("lead heard: what did Ops say").await;
    s.assert_heard_as_input();
    s.sys.system.shutdown().await;
}

#[actix_rt::test]
async fn openai_a_forward_that_starts_a_turn_is_user_input() {
    a_forward_that_starts_a_turn_is_user_input(Dialect::OpenAi).await;
}

#[actix_rt::test]
async fn anthropic_a_forward_that_starts_a_turn_is_user_input() {
    a_forward_that_starts_a_turn_is_user_input(Dialect::Anthropic).await;
}

#[actix_rt::test]
async fn openai_a_relayed_forward_is_sent_as_user_input() {
    a_relayed_forward_is_sent_as_user_input(Dialect::OpenAi).await;
}

#[actix_rt::test]
async fn anthropic_a_relayed_forward_is_sent_as_user_input() {
    a_relayed_forward_is_sent_as_user_input(Dialect::Anthropic).await;
}

/// A compaction that summarises all but the last two entries ("hello", "lead ok") asks for its
/// summary after them: the request ends with that ask, not with the lead's answer.
#[actix_rt::test]
async fn a_compaction_request_ends_with_its_ask_not_the_models_answer() {
    for dialect in [Dialect::OpenAi, Dialect::Anthropic] {
        let s = lead_after_one_exchange(dialect, AsyncForward::Turn).await;
        s.sys.system.send(&s.lead, "again", false).await.unwrap();
        s.lead_answered("lead heard: again").await;
        s.sys.wait_for_status(&s.lead, AgentStatus::Idle).await;
        s.sys
            .system
            .post(&s.lead, InboxItem::Compact)
            .await
            .unwrap();
        wait_until("the compaction, a refusal or a failure", || async {
            let compacted = s
                .sys
                .thread(&s.lead)
                .await
                .first()
                .is_some_and(|e| e.text.starts_with("Summary of the earlier conversation"));
            compacted
                || !s.provider.violations().is_empty()
                || s.sys.record(&s.lead).await.status == AgentStatus::Failed
        })
        .await;
        assert_eq!(s.provider.violations(), Vec::<String>::new(), "{dialect:?}");
        let asked = s.provider.accepted().pop().unwrap();
        let last = messages(&asked).pop().unwrap();
        assert_eq!(last["role"], "user", "{asked}");
        assert!(
            text_of(&last).starts_with("Summarise the conversation"),
            "{asked}"
        );
        assert!(
            asked.to_string().contains("lead ok") && !asked.to_string().contains("again"),
            "the summarised part: {asked}"
        );
        s.sys.system.shutdown().await;
    }
}
