//! Approval gates: a call of a tool that needs a person's approval (`Tool::needs_approval`,
//! or a `yield_to_parent` of an agent whose type sets `review_yield`) is stored as
//! `awaiting_approval` before anything runs, and its turn ends waiting for the
//! decision like a service call waits for its answer (the agent shows `waiting_review`). The
//! decision is one store write (`awaiting_approval` → `pending` when approved, → `rejected`
//! otherwise); the turn then runs again under the same cause and finds the call decided here:
//! a rejected call's result is the reason as a tool error, an approved one runs (a service
//! tool's call is then published and waits for its answer in `waiting_tool`; an approved
//! yield hands its result to the parent as an ungated one does).
//!
//! Invariants: the record is keyed by the call's result entry id, so a re-run (after the
//! decision, after a restart) finds the same record and never asks twice; an approved call of
//! an MCP or webhook tool runs once its turn re-runs, and its result entry is written before
//! the record is closed, so a re-run after a crash never runs it again once the result is in
//! the thread.

use super::Turn;
use super::service_calls::WaitingCall;
use crate::catalogue::{BuiltinTool, Tool};
use crate::ports::ToolCallClosing;
use crate::tools::service;
use agentd_proto::{
    AgentdError, ErrorCode, ToolAnswer, ToolAnswerError, ToolCall, ToolCallClose, ToolCallRecord,
    ToolCallStatus, ToolKind,
};
use serde_json::json;
use uuid::Uuid;

/// Where a gated call is, as the turn sees it.
pub(super) enum Gate {
    /// Approved: the call runs now.
    Approved,
    /// Decided against (rejected, timed out, cancelled): this is the result the model gets.
    Closed(String),
    /// Still waits for the decision.
    Waiting(WaitingCall),
}

impl Turn {
    /// Whether a call of `tool` by this turn's agent waits for a person's approval: the tool
    /// needs it wherever it is called, or it is the yield of an agent whose type reviews its
    /// yields (`review_yield`).
    pub(super) fn needs_approval(&self, tool: &Tool) -> bool {
        tool.needs_approval()
            || (*tool == Tool::Builtin(BuiltinTool::YieldToParent)
                && self
                    .deps
                    .config
                    .types
                    .get(&self.rec.agent_type)
                    .is_some_and(|t| t.review_yield))
    }

    /// The gate of call `call_id` of `tool` (which needs approval): asked for (stored) if it
    /// is new, closed as timed out if its approval deadline passed, or found decided.
    pub(super) async fn approval_gate(
        &self,
        tool: &Tool,
        call: &ToolCall,
        call_id: Uuid,
    ) -> Result<Gate, AgentdError> {
        let deps = &self.deps;
        let now = self.now();
        let configured = tool.configured();
        let kind = match tool {
            Tool::Configured(c) => c.kind(),
            Tool::Mcp(_) => ToolKind::Mcp,
            Tool::Builtin(_) => ToolKind::Builtin,
        };
        let mut stored = match deps.store.tool_call_get(call_id).await? {
            Some(stored) => stored,
            None => {
                let mut arguments = if call.arguments.is_null() {
                    json!({})
                } else {
                    call.arguments.clone()
                };
                // The arguments of a configured or built-in tool must fit the schema the
                // model was shown (an MCP tool's are checked when it runs): nobody is asked
                // to approve a call that cannot run.
                if kind != ToolKind::Mcp {
                    arguments = match tool.check_args(&self.rec, deps, &arguments) {
                        Ok(arguments) => arguments.into_owned(),
                        Err(e) => return Ok(Gate::Closed(json!({ "error": e }).to_string())),
                    };
                }
                // A yield hands over a result: one without is refused before review.
                if *tool == Tool::Builtin(BuiltinTool::YieldToParent)
                    && arguments
                        .get("result")
                        .is_none_or(serde_json::Value::is_null)
                {
                    let e = AgentdError::missing_field("result");
                    return Ok(Gate::Closed(json!({ "error": e }).to_string()));
                }
                let timeout = deps.config.limits.approval_timeout_ms;
                let made = ToolCallRecord {
                    call_id,
                    agent_id: self.rec.id.clone(),
                    root_id: self.rec.root_id.to_string(),
                    tool: tool.name().to_string(),
                    kind,
                    arguments,
                    status: ToolCallStatus::AwaitingApproval,
                    requested_at_ms: now,
                    deadline_ms: (timeout > 0).then(|| now.saturating_add(timeout)),
                    model_call_id: call.id.clone(),
                    published: false,
                    answer: None,
                    reason: None,
                    closed_at_ms: None,
                };
                // Stored before anyone is asked: a crash after this finds it.
                deps.store.tool_call_put(&made).await?;
                if kind == ToolKind::Service {
                    // The service's meter counts from the request (webhooks count their run).
                    crate::tools::meters::CallMeter::of(
                        deps,
                        &made.agent_id,
                        &made.tool,
                        kind,
                        call_id,
                    )
                    .announce();
                }
                made
            }
        };
        match stored.status {
            ToolCallStatus::AwaitingApproval if stored.deadline_ms.is_some_and(|d| d <= now) => {
                let closing = ToolCallClosing {
                    status: ToolCallStatus::TimedOut,
                    answer: None,
                    reason: Some("nobody approved the call in time".into()),
                    at_ms: now,
                };
                match service::close(deps, call_id, closing).await? {
                    ToolCallClose::Closed(c) | ToolCallClose::AlreadyClosed(c) => {
                        Ok(Gate::Closed(service::result_text(&c)))
                    }
                    ToolCallClose::NotFound => Err(vanished(call_id)),
                }
            }
            ToolCallStatus::AwaitingApproval => Ok(Gate::Waiting(WaitingCall {
                call_id,
                tool: stored.tool.as_str().into(),
                deadline_ms: stored.deadline_ms,
                review: true,
            })),
            ToolCallStatus::Pending => {
                if kind == ToolKind::Service
                    && !stored.published
                    && let Some(c) = configured
                {
                    // Approved: from now on it waits for its answer, within the tool's own
                    // timeout (the service call publishes it).
                    stored.deadline_ms =
                        (c.timeout_ms > 0).then(|| now.saturating_add(c.timeout_ms));
                    stored.published = deps.transport.is_none();
                    deps.store.tool_call_put(&stored).await?;
                }
                Ok(Gate::Approved)
            }
            _ => Ok(Gate::Closed(service::result_text(&stored))),
        }
    }

    /// Closes the record of approved call `call_id` (an MCP or webhook tool's) with what it
    /// returned, once its result entry is written. Not counted again: the run was.
    pub(super) async fn gated_call_ran(
        &self,
        call_id: Uuid,
        text: &str,
        is_error: bool,
    ) -> Result<(), AgentdError> {
        let answer = if is_error {
            ToolAnswer::Error(ToolAnswerError {
                message: text.to_string(),
                code: None,
            })
        } else {
            ToolAnswer::Result(serde_json::from_str(text).unwrap_or_else(|_| json!(text)))
        };
        let closing = ToolCallClosing {
            status: ToolCallStatus::Answered,
            answer: Some(answer),
            reason: None,
            at_ms: self.now(),
        };
        self.deps.store.tool_call_close(call_id, &closing).await?;
        Ok(())
    }
}

fn vanished(call_id: Uuid) -> AgentdError {
    AgentdError::new(
        ErrorCode::Internal,
        format!("tool call `{call_id}` vanished from the store"),
    )
}
