//! What a turn sends to the remote, and the response that keeps the remote conversation.

use super::Session;
use agentd_ports::{CliRun, ModelResponse};
use agentd_proto::conversation::heard_role;
use agentd_proto::{Role, ThreadEntry, Usage};
use std::sync::Arc;

/// The input the remote has not heard (the entries after the last answer), as one text, and
/// the id of its last entry (the message id derives from it).
pub(super) fn new_input(thread: &[Arc<ThreadEntry>]) -> (String, uuid::Uuid) {
    let start = thread
        .iter()
        .rposition(|e| matches!(heard_role(e), Role::Assistant | Role::Tool))
        .map_or(0, |i| i + 1);
    let new = &thread[start.min(thread.len())..];
    let text = new
        .iter()
        .filter(|e| heard_role(e) == Role::User)
        .map(|e| match &e.from_agent {
            Some(from) => format!("[from agent {from}] {}", e.text),
            None => e.text.clone(),
        })
        .filter(|t| !t.trim().is_empty())
        .collect::<Vec<_>>()
        .join("\n\n");
    let id = new
        .last()
        .or_else(|| thread.last())
        .map(|e| e.id)
        .unwrap_or_default();
    (text, id)
}

/// The response that answers `text`, keeping `session` on the agent's record and counting
/// the `usage` the remote reported.
pub(super) fn answer(
    text: String,
    session: Option<Session>,
    usage: Option<Usage>,
) -> ModelResponse {
    ModelResponse {
        text,
        usage: usage.unwrap_or_default(),
        cli_run: Some(Box::new(CliRun {
            steps: Vec::new(),
            session_id: session.and_then(|s| s.to_json()),
            reported_cost_usd: None,
        })),
        ..Default::default()
    }
}
