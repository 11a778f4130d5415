//! The conformance suite of the store port, a module per concern (each with its `run`;
//! [`run_all`] runs them all). Every implementation runs it (memory and embedded here, Redis
//! with its own server), so the actors can rely on one set of semantics.
//! It panics on the first broken property: that is the test failing.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use agentd_ports::ThreadStore;
use agentd_proto::{AgentRecord, AgentStatus, Channel, ManageOptions, Role, ThreadEntry, Usage};
use std::sync::Arc;

pub mod agent_values;
pub mod batches;
pub mod checkpoints;
pub mod claims;
pub mod external_ids;
pub mod inbox;
pub mod records;
pub mod runs;
pub mod threads;
pub mod tool_calls;
pub mod tree;

/// A record for tests.
pub fn record(id: &str, parent: Option<&str>, created: u64) -> AgentRecord {
    AgentRecord {
        id: id.into(),
        parent_id: parent.map(Into::into),
        root_id: parent.unwrap_or(id).into(),
        depth: u32::from(parent.is_some()),
        title: format!("title of {id}").into(),
        agent_type: "subagent".into(),
        status: AgentStatus::Idle,
        status_reason: None,
        foreground: parent.is_none(),
        allowed_tools: Some(vec!["current_time".into()]),
        channel: match parent {
            Some(p) => Channel::Manage(std::sync::Arc::new(agentd_proto::ManageChannel {
                parent_id: p.into(),
                worker_title: "Ops".into(),
                alias: "a1".into(),
                options: ManageOptions::default(),
            })),
            None => Channel::None,
        },
        last_error: None,
        usage: Usage {
            input: 1,
            output: 2,
            cache_write: 3,
            cache_read: 4,
            ..Usage::default()
        },
        cost_usd: 0.25,
        phase: Some(2),
        current_step: Some("step".into()),
        progress: Some(0.5),
        resume_at_ms: Some(42),
        provider: Some("fast".into()),
        model: Some("m-1".into()),
        env: [("MODE".to_string(), "test".to_string())].into(),
        turns: 3,
        priority: agentd_proto::Priority::High,
        depends_on: vec!["dep-a".into()],
        dependencies_settled: true,
        on_dependency_failure: None,
        attempts: 2,
        current_task: Some(uuid::Uuid::nil()),
        task_steps_counted: 1,
        trace: None,
        budget: Some(Box::new(agentd_proto::Budget {
            max_tokens: Some(9),
            max_cost_usd: Some(0.5),
            deadline_ms: None,
        })),
        result: Some(Box::new(serde_json::json!({"ok": true}))),
        agent_cli: None,
        prompt_preview: None,
        created_at_ms: created,
        updated_at_ms: created,
    }
}

/// A root whose every field with a default is at it (the required ones set).
pub fn bare_record(id: &str) -> AgentRecord {
    AgentRecord {
        id: id.into(),
        parent_id: None,
        root_id: id.into(),
        depth: 0,
        title: "".into(),
        agent_type: "subagent".into(),
        status: AgentStatus::Idle,
        status_reason: None,
        foreground: false,
        allowed_tools: None,
        channel: Channel::None,
        last_error: None,
        usage: Usage::default(),
        cost_usd: 0.0,
        phase: None,
        current_step: None,
        progress: None,
        resume_at_ms: None,
        provider: None,
        model: None,
        env: Default::default(),
        turns: 0,
        priority: agentd_proto::Priority::default(),
        depends_on: vec![],
        dependencies_settled: false,
        on_dependency_failure: None,
        attempts: 0,
        current_task: None,
        task_steps_counted: 0,
        trace: None,
        budget: None,
        result: None,
        agent_cli: None,
        prompt_preview: None,
        created_at_ms: 1,
        updated_at_ms: 1,
    }
}

/// A thread entry for tests.
pub fn entry(text: &str) -> ThreadEntry {
    ThreadEntry::text(agentd_proto::ids::new_id(), Role::User, text, 7)
}

fn texts(entries: &[ThreadEntry]) -> Vec<String> {
    entries.iter().map(|e| e.text.clone()).collect()
}

fn envelope(text: &str) -> agentd_proto::Envelope {
    agentd_proto::Envelope::new(
        agentd_proto::Address::System,
        agentd_proto::Address::agent("i-agent"),
        agentd_proto::Item::Inbox(agentd_proto::InboxItem::message(text)),
        1,
    )
}

/// A thread length well past what any store might treat as a short thread (an id set or an
/// index from some length on: the Redis store of layout 3 kept one from 32 entries).
pub const LONG_THREAD: usize = 100;

/// Runs every property of every concern against `store`, which must be empty (records first:
/// they list the roots).
pub async fn run_all(store: Arc<dyn ThreadStore>) {
    records::run(store.clone()).await;
    threads::run(store.clone()).await;
    checkpoints::run(store.clone()).await;
    tree::run(store.clone()).await;
    inbox::run(store.clone()).await;
    batches::run(store.clone()).await;
    claims::run(store.clone()).await;
    external_ids::run(store.clone()).await;
    tool_calls::run(store.clone()).await;
    agent_values::run(store.clone()).await;
    runs::run(store.clone()).await;
}
