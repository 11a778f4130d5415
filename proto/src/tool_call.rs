//! Tool calls answered outside a turn: a service tool's call waits for another service (or a
//! person, through the API) to answer it. [`ToolCallRecord`] is what the store keeps of one
//! such call, from the moment it is requested (before anyone hears of it) to its one answer.
//!
//! Invariants:
//! - The `call_id` is the id of the call's result entry in the thread
//!   (`derived_id(cause, "step-{n}-tool-{i}")`), so a turn re-run after a crash finds the same
//!   call; the model's own id is kept as `model_call_id`.
//! - A call is closed once: the first answer (or timeout, cancel, rejection) is recorded and
//!   closes it in one store write; anything later is refused with `tool_call_closed`.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use uuid::Uuid;

/// How a configured tool is run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum ToolKind {
    /// Answered by another service: the call waits (`waiting_tool`) for its answer.
    Service,
    /// A webhook agentd calls (a signed POST) and whose response is the result.
    Http,
    /// A tool of an MCP server; only gated calls of MCP tools are recorded (they wait for
    /// approval before they run).
    Mcp,
    /// A tool agentd provides; only gated calls are recorded: a `yield_to_parent` of an agent
    /// whose type sets `review_yield` waits for approval before the result goes up.
    Builtin,
}

impl ToolKind {
    /// The wire name (`"service"`, `"http"`, `"mcp"`, `"builtin"`).
    pub fn as_str(self) -> &'static str {
        match self {
            ToolKind::Service => "service",
            ToolKind::Http => "http",
            ToolKind::Mcp => "mcp",
            ToolKind::Builtin => "builtin",
        }
    }
}

/// Where a tool call answered outside a turn is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum ToolCallStatus {
    /// Waiting for a person to approve or reject it.
    AwaitingApproval,
    /// Published (or about to be) and waiting for its answer.
    Pending,
    /// Answered (with a result or an error).
    Answered,
    /// Its deadline passed first: the model got a `tool_timeout` error.
    TimedOut,
    /// Its turn was interrupted, cancelled or terminated first.
    Cancelled,
    /// A person rejected it: the model got the reason as a tool error.
    Rejected,
}

impl ToolCallStatus {
    /// The wire name (`"pending"`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            ToolCallStatus::AwaitingApproval => "awaiting_approval",
            ToolCallStatus::Pending => "pending",
            ToolCallStatus::Answered => "answered",
            ToolCallStatus::TimedOut => "timed_out",
            ToolCallStatus::Cancelled => "cancelled",
            ToolCallStatus::Rejected => "rejected",
        }
    }

    /// Whether the call still waits (for an answer or a decision).
    pub fn is_open(self) -> bool {
        matches!(
            self,
            ToolCallStatus::AwaitingApproval | ToolCallStatus::Pending
        )
    }
}

impl std::fmt::Display for ToolCallStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A worker's (or a person's) answer to a tool call: a result, or an error whose `code` is the
/// worker's own free text (never one of agentd's codes).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolAnswer {
    /// The tool's result, handed to the model as is.
    Result(Value),
    /// The tool failed; the model gets this as a tool error.
    Error(ToolAnswerError),
}

/// A tool's failure as its worker said it (in an answer through the API or the command
/// `tool_result`, which refuse fields it does not have; a worker's reply on the stream is read
/// by its own lenient shape).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct ToolAnswerError {
    /// What went wrong, for the model.
    pub message: String,
    /// The worker's own code, if it gave one (free text).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
}

/// One tool call answered outside a turn, as the store keeps it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCallRecord {
    /// agentd's id of the call (its result entry's id).
    pub call_id: Uuid,
    /// The agent whose turn made it.
    pub agent_id: String,
    /// The root of that agent's tree (scopes `X-Agentd-Root` callers).
    pub root_id: String,
    /// The tool's name.
    pub tool: String,
    /// How the tool runs.
    pub kind: ToolKind,
    /// The arguments the model gave (never logged).
    pub arguments: Value,
    /// Where the call is.
    pub status: ToolCallStatus,
    /// When it was requested, ms since the epoch.
    pub requested_at_ms: u64,
    /// When it times out, ms since the epoch (absolute, so it holds across restarts); `None`
    /// waits for ever.
    #[serde(default)]
    pub deadline_ms: Option<u64>,
    /// The model's own id of the call.
    #[serde(default)]
    pub model_call_id: String,
    /// It was handed to the workers (a stream entry); a call stored but not published when
    /// agentd stopped is published again, under the same id.
    #[serde(default)]
    pub published: bool,
    /// Its answer, once answered.
    #[serde(default)]
    pub answer: Option<ToolAnswer>,
    /// Why it was rejected or cancelled, if said.
    #[serde(default)]
    pub reason: Option<String>,
    /// When it was closed, ms since the epoch.
    #[serde(default)]
    pub closed_at_ms: Option<u64>,
}

impl ToolCallRecord {
    /// The call's public view (`GET /v1/tool_calls`): no answer, no internal flags.
    pub fn view(&self) -> ToolCallView {
        ToolCallView {
            call_id: self.call_id,
            agent_id: self.agent_id.clone(),
            root_id: self.root_id.clone(),
            tool: self.tool.clone(),
            kind: self.kind,
            arguments: self.arguments.clone(),
            status: self.status,
            requested_at_ms: self.requested_at_ms,
            deadline_ms: self.deadline_ms,
        }
    }
}

/// A tool call as `GET /v1/tool_calls` lists it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ToolCallView {
    /// agentd's id of the call.
    pub call_id: Uuid,
    /// The agent whose turn made it.
    pub agent_id: String,
    /// The root of that agent's tree.
    pub root_id: String,
    /// The tool's name.
    pub tool: String,
    /// How the tool runs.
    pub kind: ToolKind,
    /// The arguments the model gave.
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub arguments: Value,
    /// Where the call is.
    pub status: ToolCallStatus,
    /// When it was requested, ms since the epoch.
    pub requested_at_ms: u64,
    /// When it times out, ms since the epoch (`null`: never).
    pub deadline_ms: Option<u64>,
}

/// A call of a service tool as its workers get it (`item.kind = "tool_call"`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCallItem {
    /// agentd's id of the call: de-duplicate by it (delivery is at least once), answer with it
    /// as the reply's `correlation_id`.
    pub call_id: Uuid,
    /// The agent whose turn made it.
    pub agent_id: String,
    /// The tool's name.
    pub tool: String,
    /// The arguments (they fit the tool's `parameters`).
    pub arguments: Value,
    /// When agentd stops waiting for the answer, ms since the epoch (`None`: never).
    #[serde(default)]
    pub deadline_ms: Option<u64>,
}

impl ToolCallRecord {
    /// The item its workers get.
    pub fn item(&self) -> ToolCallItem {
        ToolCallItem {
            call_id: self.call_id,
            agent_id: self.agent_id.clone(),
            tool: self.tool.clone(),
            arguments: self.arguments.clone(),
            deadline_ms: self.deadline_ms,
        }
    }
}

/// A person's decision on a call that waits for approval.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum ApprovalDecision {
    /// The call runs (a service tool's call is then published and waits for its answer).
    Approved,
    /// The call does not run: the model gets the reason as a tool error.
    Rejected,
}

/// What closing a call in the store found.
#[derive(Debug, Clone, PartialEq)]
pub enum ToolCallClose {
    /// It was open and is now closed as asked: the record as written.
    Closed(ToolCallRecord),
    /// It was closed already (the first answer stands): the record as it is.
    AlreadyClosed(ToolCallRecord),
    /// No call has that id.
    NotFound,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_and_statuses_have_their_wire_names() {
        let ok = serde_json::to_value(ToolAnswer::Result(serde_json::json!({"a": 1})));
        assert_eq!(ok.ok(), Some(serde_json::json!({"result": {"a": 1}})));
        let err = serde_json::to_value(ToolAnswer::Error(ToolAnswerError {
            message: "no such order".into(),
            code: Some("E42".into()),
        }));
        assert_eq!(
            err.ok(),
            Some(serde_json::json!({"error": {"message": "no such order", "code": "E42"}}))
        );
        for s in [
            ToolCallStatus::AwaitingApproval,
            ToolCallStatus::Pending,
            ToolCallStatus::Answered,
            ToolCallStatus::TimedOut,
            ToolCallStatus::Cancelled,
            ToolCallStatus::Rejected,
        ] {
            let json = serde_json::to_string(&s).unwrap_or_default();
            assert_eq!(json, format!("\"{}\"", s.as_str()));
        }
    }
}
