//! A turn's calls of service tools. Another service answers such a call, so the turn does not
//! wait for it: it stores the call (before anyone hears of it), announces it, and ends the step
//! waiting; the agent shows `waiting_tool` and holds no turn slot. Once every waiting call of
//! the step is closed (answered, timed out), the agent runs the turn again under the same
//! cause: the step replays from the thread, and each closed call's result is written here, in
//! the calls' order, before the model is asked again.
//!
//! Invariants: a call's id is its result entry's id (`derived_id(cause, "step-{n}-tool-{i}")`),
//! so a re-run — after the answer, after a restart, after a `kill -9` — finds the same stored
//! call and never makes a second one; a deadline is absolute and is applied as soon as a run
//! sees it passed.

use super::Turn;
use crate::catalogue::{ConfiguredTool, Tool};
use crate::ports::ToolCallClosing;
use crate::tools::service;
use agentd_proto::{
    AgentdError, ErrorCode, ToolCall, ToolCallClose, ToolCallRecord, ToolCallStatus, ToolKind,
};
use serde_json::json;
use std::borrow::Cow;
use std::sync::Arc;
use uuid::Uuid;

/// A call of a service tool that a turn left waiting for its answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct WaitingCall {
    /// agentd's id of the call.
    pub call_id: Uuid,
    /// The tool.
    pub tool: Box<str>,
    /// When it times out (absolute), if ever.
    pub deadline_ms: Option<u64>,
    /// It waits for a person's approval (`waiting_review`), not for an answer.
    pub review: bool,
}

/// Where a service call is, as the turn sees it.
pub(super) enum ServiceCall {
    /// Closed: this is the result the model gets, and whether it is an error (flagged as one
    /// for the provider, Anthropic's `is_error`).
    Closed(String, bool),
    /// Still open.
    Waiting(WaitingCall),
}

impl Turn {
    /// Call `call_id` of service tool `tool`: made (stored, then announced) if it is new,
    /// closed as timed out if its deadline passed, or found closed.
    pub(super) async fn service_call(
        &self,
        tool: &Arc<ConfiguredTool>,
        call: &ToolCall,
        call_id: Uuid,
    ) -> Result<ServiceCall, AgentdError> {
        let deps = &self.deps;
        let now = self.now();
        let stored = match deps.store.tool_call_get(call_id).await? {
            Some(stored) if !stored.status.is_open() => {
                return Ok(ServiceCall::Closed(
                    service::result_text(&stored),
                    service::is_error(&stored),
                ));
            }
            Some(stored) => stored,
            None => {
                let arguments = if call.arguments.is_null() {
                    json!({})
                } else {
                    call.arguments.clone()
                };
                // The arguments must fit the schema the model was shown.
                let checked =
                    Tool::Configured(tool.clone()).check_args(&self.rec, deps, &arguments);
                let arguments = match checked.map(Cow::into_owned) {
                    Ok(arguments) => arguments,
                    Err(e) => {
                        return Ok(ServiceCall::Closed(json!({ "error": e }).to_string(), true));
                    }
                };
                let made = ToolCallRecord {
                    call_id,
                    agent_id: self.rec.id.clone(),
                    root_id: self.rec.root_id.to_string(),
                    tool: tool.name.clone(),
                    kind: ToolKind::Service,
                    arguments,
                    status: ToolCallStatus::Pending,
                    requested_at_ms: now,
                    deadline_ms: (tool.timeout_ms > 0).then(|| now.saturating_add(tool.timeout_ms)),
                    model_call_id: call.id.clone(),
                    // In one process nothing is handed to workers: they find the call through
                    // the API (`GET /v1/tool_calls`) and its event.
                    published: deps.transport.is_none(),
                    answer: None,
                    reason: None,
                    closed_at_ms: None,
                };
                // Stored before anyone hears of it: a crash after this finds it.
                deps.store.tool_call_put(&made).await?;
                crate::tools::meters::CallMeter::of(
                    deps,
                    &made.agent_id,
                    &made.tool,
                    made.kind,
                    call_id,
                )
                .announce();
                made
            }
        };
        if stored.deadline_ms.is_some_and(|d| d <= now) {
            let closing = ToolCallClosing {
                status: ToolCallStatus::TimedOut,
                answer: None,
                reason: None,
                at_ms: now,
            };
            return match service::close(deps, call_id, closing).await? {
                ToolCallClose::Closed(c) | ToolCallClose::AlreadyClosed(c) => Ok(
                    ServiceCall::Closed(service::result_text(&c), service::is_error(&c)),
                ),
                ToolCallClose::NotFound => Err(AgentdError::new(
                    ErrorCode::Internal,
                    format!("tool call `{call_id}` vanished from the store"),
                )),
            };
        }
        let mut stored = stored;
        if !stored.published
            && stored.status == ToolCallStatus::Pending
            && let Some(transport) = &deps.transport
        {
            // Stored, not yet handed to the workers (new, or stored just before a crash):
            // published now under its id, then marked so. With telemetry on, it is handed
            // over in an `execute_tool` span, whose context the workers get.
            let span = agentd_observe::telemetry::execute_tool(tool.name.as_str(), &call.id, None);
            let ctx = agentd_observe::telemetry::context_of(&span)
                .or_else(agentd_observe::telemetry::current);
            let publish =
                tracing::Instrument::instrument(transport.publish_tool_call(&stored), span.clone());
            let published = agentd_observe::telemetry::scope(ctx, publish).await;
            if let Err(e) = &published {
                agentd_observe::telemetry::failed(&span, e.code.as_str());
            }
            published?;
            stored.published = true;
            deps.store.tool_call_put(&stored).await?;
        }
        Ok(ServiceCall::Waiting(WaitingCall {
            call_id,
            tool: stored.tool.as_str().into(),
            deadline_ms: stored.deadline_ms,
            review: false,
        }))
    }
}
