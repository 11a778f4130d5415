//! Calls of service tools (`[tools.<name>] kind = "service"`): another service answers them,
//! so a call is a record in the store that waits for its one answer (see
//! `agentd_proto::tool_call`). What the turn that makes a call, the agent that waits for it and
//! the API that answers it share is here: closing a call (counted once, when the store says
//! this closing won), and the tool result a closed call gives the model.

use super::meters::{CallMeter, Outcome};
use crate::deps::Deps;
use crate::ports::ToolCallClosing;
use agentd_proto::{
    AgentdError, ErrorCode, ToolAnswer, ToolCallClose, ToolCallRecord, ToolCallStatus,
};
use serde_json::json;
use std::time::Duration;
use uuid::Uuid;

/// Closes call `call_id` as `closing` says if it is still open; the closing that wins is
/// counted and published (`tool_call_finished`).
pub(crate) async fn close(
    deps: &Deps,
    call_id: Uuid,
    closing: ToolCallClosing,
) -> Result<ToolCallClose, AgentdError> {
    let res = deps.store.tool_call_close(call_id, &closing).await?;
    if let ToolCallClose::Closed(call) = &res
        && !call.status.is_open()
    {
        finished(deps, call);
    }
    Ok(res)
}

/// Counts and publishes the end of `call` (closed).
pub(crate) fn finished(deps: &Deps, call: &ToolCallRecord) {
    let outcome = match (&call.status, &call.answer) {
        (ToolCallStatus::Answered, Some(ToolAnswer::Result(_))) => Outcome::Ok,
        (ToolCallStatus::TimedOut, _) => Outcome::TimedOut,
        (ToolCallStatus::Cancelled, _) => Outcome::Cancelled,
        (ToolCallStatus::Rejected, _) => Outcome::Rejected,
        _ => Outcome::Error,
    };
    let took = call
        .closed_at_ms
        .unwrap_or(call.requested_at_ms)
        .saturating_sub(call.requested_at_ms);
    CallMeter::of(deps, &call.agent_id, &call.tool, call.kind, call.call_id)
        .finished(outcome, Duration::from_millis(took));
}

/// Whether the result a closed call gives the model is an error (anything but a worker's
/// result).
pub(crate) fn is_error(call: &ToolCallRecord) -> bool {
    !matches!(
        (&call.status, &call.answer),
        (ToolCallStatus::Answered, Some(ToolAnswer::Result(_)))
    )
}

/// What the model is told of a closed call: its result, or a tool error.
pub(crate) fn result_text(call: &ToolCallRecord) -> String {
    let error = |code: &str, message: String| json!({"error": {"code": code, "message": message}});
    let value = match (&call.status, &call.answer) {
        (ToolCallStatus::Answered, Some(ToolAnswer::Result(v))) => return v.to_string(),
        (ToolCallStatus::Answered, Some(ToolAnswer::Error(e))) => {
            // The worker's own code is free text: it travels beside ours, never as ours.
            let mut v = error(ErrorCode::ToolFailed.as_str(), e.message.clone());
            if let Some(code) = &e.code {
                v["error"]["tool_code"] = json!(code);
            }
            v
        }
        (ToolCallStatus::TimedOut, _) => error(
            ErrorCode::ToolTimeout.as_str(),
            match call.deadline_ms {
                Some(d) => format!(
                    "`{}` was not answered within {} ms",
                    call.tool,
                    d.saturating_sub(call.requested_at_ms)
                ),
                None => format!("`{}` was not answered in time", call.tool),
            },
        ),
        (ToolCallStatus::Rejected, _) => error(
            "rejected",
            match &call.reason {
                Some(r) => format!("a person rejected this call of `{}`: {r}", call.tool),
                None => format!("a person rejected this call of `{}`", call.tool),
            },
        ),
        (ToolCallStatus::Cancelled, _) => error(
            ErrorCode::Interrupted.as_str(),
            "the turn was interrupted before this tool call returned".to_string(),
        ),
        _ => error(
            ErrorCode::Internal.as_str(),
            format!("`{}` closed without an answer", call.tool),
        ),
    };
    value.to_string()
}

/// The refusal of an answer to a call that is closed: `tool_call_closed`, saying how.
pub(crate) fn closed_error(call: &ToolCallRecord) -> AgentdError {
    let how = match call.status {
        ToolCallStatus::Answered => "was answered already",
        ToolCallStatus::TimedOut => "timed out",
        ToolCallStatus::Cancelled => "was cancelled",
        ToolCallStatus::Rejected => "was rejected",
        ToolCallStatus::Pending => "is approved already and waits for its answer",
        ToolCallStatus::AwaitingApproval => "waits for approval",
    };
    AgentdError::new(
        ErrorCode::ToolCallClosed,
        format!("tool call `{}` {how}", call.call_id),
    )
}

/// The refusal of an unknown call: `tool_call_not_found`.
/// An answer to a call agentd runs itself (MCP, webhook, built-in): nobody outside answers it.
pub(crate) fn not_a_service_call(call: &ToolCallRecord) -> AgentdError {
    AgentdError::new(
        ErrorCode::InvalidTransition,
        format!(
            "tool call `{}` is a call of `{}`, which agentd runs itself: only a service tool's call takes an answer",
            call.call_id, call.tool
        ),
    )
}

pub(crate) fn not_found(call_id: Uuid) -> AgentdError {
    AgentdError::new(
        ErrorCode::ToolCallNotFound,
        format!("no tool call `{call_id}` for this agent"),
    )
}
