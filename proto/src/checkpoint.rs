//! Checkpoints (seed 001): a saved copy of everything needed to bring one agent back to a
//! moment — its conversation, phase, step and progress, the work it had not done yet and its
//! environment. agentd takes them by itself on a rate limit, an error, a pause and a phase
//! completion, and on demand; restoring one puts the agent back exactly there.

use crate::checkpoint_reason::CheckpointReason;
use crate::envelope::Envelope;
use crate::record::AgentId;
use crate::status::AgentStatus;
use crate::thread::ThreadEntry;
use crate::usage::Usage;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use uuid::Uuid;

/// One saved state of an agent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Checkpoint {
    /// Checkpoint id (v7: sorts by time).
    pub id: Uuid,
    /// The agent it belongs to.
    pub agent_id: AgentId,
    /// Why it was taken.
    pub reason: CheckpointReason,
    /// What triggered it, in a few words (`pause`, `phase 2 complete`, an error message).
    #[serde(default)]
    pub trigger: String,
    /// When it was taken, ms since the epoch.
    pub created_at_ms: u64,
    /// The agent's status at that moment.
    pub status: AgentStatus,
    /// Phase (from `=== PHASE N COMPLETE ===`).
    #[serde(default)]
    pub phase: Option<u32>,
    /// Current step.
    #[serde(default)]
    pub current_step: Option<String>,
    /// Progress 0.0–1.0 (phase / the type's phase count), when known.
    #[serde(default)]
    pub progress: Option<f64>,
    /// The whole conversation at that moment.
    #[serde(default)]
    pub conversation: Vec<ThreadEntry>,
    /// Inbox items not yet handled, in order (the turn in flight first): the pending actions.
    #[serde(default)]
    pub pending: Vec<Envelope>,
    /// Environment variables of the agent (reinjected into a process-backend agent).
    #[serde(default)]
    pub environment: BTreeMap<String, String>,
    /// Tokens used up to then.
    #[serde(default)]
    pub usage: Usage,
    /// Cost up to then.
    #[serde(default)]
    pub cost_usd: f64,
    /// Turns completed up to then.
    #[serde(default)]
    pub turns: u64,
    /// The agent CLI session of an agent an agent CLI runs (restoring resumes it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cli_session_id: Option<String>,
}

impl Checkpoint {
    /// A short description of the pending actions (the seed's `pendingActions: string[]`).
    pub fn pending_actions(&self) -> Vec<String> {
        self.pending
            .iter()
            .map(|env| match &env.item {
                crate::envelope::Item::Inbox(crate::inbox::InboxItem::Message { text, .. }) => {
                    let mut short: String = text.chars().take(80).collect();
                    if short.len() < text.len() {
                        short.push('…');
                    }
                    format!("message: {short}")
                }
                crate::envelope::Item::Inbox(item) => item.kind().to_string(),
                other => format!("{other:?}"),
            })
            .collect()
    }

    /// The checkpoint without its bulky parts, for listings.
    pub fn summary(&self) -> serde_json::Value {
        serde_json::json!({
            "checkpoint_id": self.id,
            "agent_id": self.agent_id,
            "reason": self.reason,
            "trigger": self.trigger,
            "created_at_ms": self.created_at_ms,
            "status": self.status,
            "phase": self.phase,
            "current_step": self.current_step,
            "progress": self.progress,
            "entries": self.conversation.len(),
            "pending_actions": self.pending_actions(),
            "environment": self.environment.keys().collect::<Vec<_>>(),
            "tokens_used": self.usage.total(),
            "cost_usd": self.cost_usd,
            "turns": self.turns,
        })
    }
}
