//! The concern of service tool calls: calls answered outside their turn, closed once.

use super::{StoreKind, StoreResult};
use agentd_proto::{ToolAnswer, ToolCallClose, ToolCallRecord, ToolCallStatus};
use async_trait::async_trait;
use uuid::Uuid;

/// How [`ToolCalls::tool_call_close`] changes an open call.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCallClosing {
    /// Its new status.
    pub status: ToolCallStatus,
    /// Its answer, if answered.
    pub answer: Option<ToolAnswer>,
    /// Why (a rejection's or a cancel's reason).
    pub reason: Option<String>,
    /// When, ms since the epoch.
    pub at_ms: u64,
}

impl ToolCallClosing {
    /// What `call` becomes: the closing applied to it.
    pub fn apply(&self, call: &mut ToolCallRecord) {
        call.status = self.status;
        if self.answer.is_some() {
            call.answer = self.answer.clone();
        }
        if self.reason.is_some() {
            call.reason = self.reason.clone();
        }
        if !self.status.is_open() {
            call.closed_at_ms = Some(self.at_ms);
        }
    }

    /// Whether it may apply to a call in `status`: a closing applies to an open call; an
    /// approval (to `pending`) only to one awaiting approval.
    pub fn applies_to(&self, status: ToolCallStatus) -> bool {
        match self.status {
            ToolCallStatus::Pending => status == ToolCallStatus::AwaitingApproval,
            _ => status.is_open(),
        }
    }
}

/// Service tool calls answered outside their turn: stored before they are published, and
/// closed once (of two closings, the first wins; a closed call stays closed).
#[async_trait]
pub trait ToolCalls: StoreKind {
    /// Stores tool call `call.call_id` (a service tool's, answered outside its turn), replacing
    /// what was stored under its id — unless that is closed: a closed call stays closed (a
    /// late write of the open call, e.g. marking it published, changes nothing). Called before
    /// the call is published, so a crash right after finds it.
    async fn tool_call_put(&self, call: &ToolCallRecord) -> StoreResult<()>;

    /// Tool call `call_id`, open or closed.
    async fn tool_call_get(&self, call_id: Uuid) -> StoreResult<Option<ToolCallRecord>>;

    /// Closes tool call `call_id` as `closing` says **if it is open**, in one atomic write: of
    /// two closings (two answers, an answer and a timeout), the first wins and the second
    /// finds it closed. Opening it again is not a closing: an approval (`awaiting_approval` →
    /// `pending`) goes through here too, with `closing.status = Pending`.
    async fn tool_call_close(
        &self,
        call_id: Uuid,
        closing: &ToolCallClosing,
    ) -> StoreResult<ToolCallClose>;

    /// The tool calls that are open (pending or awaiting approval), oldest first.
    async fn tool_calls_open(&self) -> StoreResult<Vec<ToolCallRecord>>;
}
