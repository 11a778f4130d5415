//! What a call to agentd's MCP server can fail with, each with a stable code (the `code` of
//! the JSON-RPC error's `data`) and the JSON-RPC error it is answered as.

use rmcp::ErrorData;
use serde_json::json;

/// Why a tool call was refused or failed. Every refusal happens before anything is queued.
#[derive(Debug, thiserror::Error)]
pub enum McpServerError {
    /// The tool is not one this server lists.
    #[error("unknown tool `{0}`: tools/list names the tools of this server")]
    UnknownTool(String),
    /// The arguments do not match the tool's input schema.
    #[error("invalid arguments for `{tool}`: {why}")]
    InvalidArguments {
        /// The tool called.
        tool: String,
        /// What is wrong.
        why: String,
    },
    /// The thread was never opened (or its root was deleted).
    #[error(
        "unknown thread `{thread}` of `{agent_type}`: an ask_{agent_type} or send_message call with it opens it"
    )]
    UnknownThread {
        /// The agent type.
        agent_type: String,
        /// The alias.
        thread: String,
    },
    /// There is nothing to cancel (no run, or its last run ended).
    #[error("{0}")]
    NotCancelable(String),
    /// The agent type is not exposed.
    #[error("agent type `{0}` is not served here: tools/list names the tools of this server")]
    UnknownType(String),
    /// The message is larger than `limits.max_message_bytes`.
    #[error("{0}")]
    TooLarge(String),
    /// agentd refused the work (a budget, a limit, the agent's state).
    #[error("agentd refused the call: {0}")]
    Refused(String),
    /// The store or the actors failed.
    #[error("internal error: {0}")]
    Internal(String),
}

impl McpServerError {
    /// The stable code: `unknown_tool`, `invalid_arguments`, `unknown_thread`,
    /// `not_cancelable`, `unknown_type`, `message_too_large`, `refused` or `internal`.
    pub fn code(&self) -> &'static str {
        match self {
            McpServerError::UnknownTool(_) => "unknown_tool",
            McpServerError::InvalidArguments { .. } => "invalid_arguments",
            McpServerError::UnknownThread { .. } => "unknown_thread",
            McpServerError::NotCancelable(_) => "not_cancelable",
            McpServerError::UnknownType(_) => "unknown_type",
            McpServerError::TooLarge(_) => "message_too_large",
            McpServerError::Refused(_) => "refused",
            McpServerError::Internal(_) => "internal",
        }
    }

    /// A store failure.
    pub(super) fn store(e: impl std::fmt::Display) -> Self {
        McpServerError::Internal(format!("the store failed: {e}"))
    }
}

impl From<McpServerError> for ErrorData {
    fn from(e: McpServerError) -> Self {
        let data = Some(json!({"code": e.code()}));
        let message = e.to_string();
        match e {
            McpServerError::UnknownTool(_)
            | McpServerError::InvalidArguments { .. }
            | McpServerError::UnknownThread { .. }
            | McpServerError::UnknownType(_)
            | McpServerError::NotCancelable(_)
            | McpServerError::TooLarge(_) => ErrorData::invalid_params(message, data),
            McpServerError::Refused(_) | McpServerError::Internal(_) => {
                ErrorData::internal_error(message, data)
            }
        }
    }
}
