//! Stable error codes. A caller (a model, a service, a script) branches on the code, never on
//! the message text, so codes never change once published.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::sync::Arc;

/// Every failure a caller can see carries one of these codes (serialized snake_case).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    /// Manage was invoked without the caller's (parent) thread id (seed 000).
    MissingThreadId,
    /// `send_message` on a parent with no connected workers (seed 000).
    NoWorkers,
    /// The worker title does not match any connected worker (seed 000).
    UnknownWorker,
    /// A required field (worker, message, threadAlias, ...) is missing or empty.
    MissingField,
    /// A worker title is empty or duplicates another after trimming (refused at configuration).
    InvalidTitle,
    /// A child's output could not be forwarded because its parent no longer exists (seed 000).
    ManageMissingParent,
    /// The parent exists but has no channel that can take the forwarded text (seed 000).
    MissingParentChannel,
    /// A management tool was used by an agent that is not allowed to manage (seed 004).
    NotRoot,
    /// An agent tried to reset or compact itself (seed 003).
    SelfTarget,
    /// Control was attempted on an agent that is not a descendant of the caller.
    NotAncestor,
    /// No agent with that id exists.
    AgentNotFound,
    /// The tool is not among the caller's allowed tools.
    ToolNotAllowed,
    /// No tool of that name exists.
    UnknownTool,
    /// The agent type named is not configured.
    UnknownAgentType,
    /// The model provider named is not configured.
    UnknownProvider,
    /// No checkpoint with that id exists for the agent.
    CheckpointNotFound,
    /// Spawning would exceed the depth limit.
    DepthLimit,
    /// Spawning would exceed the per-parent children limit.
    FanoutLimit,
    /// An encoded envelope exceeds the decode size cap.
    PayloadTooLarge,
    /// An envelope could not be decoded or has an unknown version.
    BadEnvelope,
    /// A status change that the transition table does not allow.
    InvalidTransition,
    /// A token, cost or time budget was exceeded.
    BudgetExceeded,
    /// Missing or wrong credentials.
    Unauthorized,
    /// An argument has the wrong type or value.
    InvalidArgument,
    /// The model backend failed.
    ModelError,
    /// The store failed.
    StoreError,
    /// The target cannot take more work right now (mailbox full, shutting down).
    Unavailable,
    /// A tool call's turn ended (interrupt, cancel, terminate, close, restore, a yield) before
    /// the call returned: the call's result in the thread says so.
    Interrupted,
    /// An internal invariant broke; a bug.
    Internal,
    /// No route of the API has that path.
    NotFound,
    /// The path exists but not with that method.
    MethodNotAllowed,
    /// A request body came with a content type the route does not take (JSON routes take
    /// `application/json`).
    UnsupportedMediaType,
    /// A tool run outside agentd (an MCP server, a webhook, a service) failed the call: it
    /// answered with an error, or could not be reached; the message says how (status, an
    /// excerpt of the body, the worker's own code). The model gets it as the call's result and
    /// the agent goes on.
    ToolFailed,
    /// A tool call waited longer than its tool's `timeout_ms` (or its approval longer than
    /// `approval_timeout_ms`).
    ToolTimeout,
    /// No pending or closed tool call has that id (for that agent).
    ToolCallNotFound,
    /// The tool call was answered, timed out, cancelled or rejected already: an answer or a
    /// decision is applied once.
    ToolCallClosed,
    /// An agent's dependency (spawn `depends_on`) failed, was cancelled, terminated or
    /// deleted, so the agent failed without running (the reason of its `failed` status).
    DependencyFailed,
    /// A request's body did not arrive in full within the server's request timeout.
    RequestTimeout,
    /// A spawn's idempotency key was used before, with another request (another body): the
    /// key names the first request's agent, so this one is refused (422, as the IETF
    /// `Idempotency-Key` draft says) instead of being answered with an agent it did not ask
    /// for.
    IdempotencyKeyReused,
}

impl ErrorCode {
    /// The stable wire name, e.g. `"manage_missing_parent"`.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::MissingThreadId => "missing_thread_id",
            ErrorCode::NoWorkers => "no_workers",
            ErrorCode::UnknownWorker => "unknown_worker",
            ErrorCode::MissingField => "missing_field",
            ErrorCode::InvalidTitle => "invalid_title",
            ErrorCode::ManageMissingParent => "manage_missing_parent",
            ErrorCode::MissingParentChannel => "missing_parent_channel",
            ErrorCode::NotRoot => "not_root",
            ErrorCode::SelfTarget => "self_target",
            ErrorCode::NotAncestor => "not_ancestor",
            ErrorCode::AgentNotFound => "agent_not_found",
            ErrorCode::ToolNotAllowed => "tool_not_allowed",
            ErrorCode::UnknownTool => "unknown_tool",
            ErrorCode::UnknownAgentType => "unknown_agent_type",
            ErrorCode::UnknownProvider => "unknown_provider",
            ErrorCode::CheckpointNotFound => "checkpoint_not_found",
            ErrorCode::DepthLimit => "depth_limit",
            ErrorCode::FanoutLimit => "fanout_limit",
            ErrorCode::PayloadTooLarge => "payload_too_large",
            ErrorCode::BadEnvelope => "bad_envelope",
            ErrorCode::InvalidTransition => "invalid_transition",
            ErrorCode::BudgetExceeded => "budget_exceeded",
            ErrorCode::Unauthorized => "unauthorized",
            ErrorCode::InvalidArgument => "invalid_argument",
            ErrorCode::ModelError => "model_error",
            ErrorCode::StoreError => "store_error",
            ErrorCode::Unavailable => "unavailable",
            ErrorCode::Interrupted => "interrupted",
            ErrorCode::Internal => "internal",
            ErrorCode::NotFound => "not_found",
            ErrorCode::MethodNotAllowed => "method_not_allowed",
            ErrorCode::UnsupportedMediaType => "unsupported_media_type",
            ErrorCode::ToolFailed => "tool_failed",
            ErrorCode::ToolTimeout => "tool_timeout",
            ErrorCode::ToolCallNotFound => "tool_call_not_found",
            ErrorCode::ToolCallClosed => "tool_call_closed",
            ErrorCode::DependencyFailed => "dependency_failed",
            ErrorCode::RequestTimeout => "request_timeout",
            ErrorCode::IdempotencyKeyReused => "idempotency_key_reused",
        }
    }

    /// The HTTP status an API answers with for this code.
    pub fn http_status(self) -> u16 {
        match self {
            ErrorCode::AgentNotFound
            | ErrorCode::UnknownTool
            | ErrorCode::UnknownAgentType
            | ErrorCode::UnknownProvider
            | ErrorCode::CheckpointNotFound
            | ErrorCode::ToolCallNotFound
            | ErrorCode::NotFound => 404,
            ErrorCode::MethodNotAllowed => 405,
            ErrorCode::RequestTimeout => 408,
            ErrorCode::IdempotencyKeyReused => 422,
            ErrorCode::UnsupportedMediaType => 415,
            ErrorCode::Unauthorized => 401,
            ErrorCode::NotRoot
            | ErrorCode::NotAncestor
            | ErrorCode::ToolNotAllowed
            | ErrorCode::SelfTarget => 403,
            ErrorCode::InvalidTransition
            | ErrorCode::Interrupted
            | ErrorCode::ToolCallClosed
            | ErrorCode::DependencyFailed => 409,
            ErrorCode::ToolFailed => 502,
            ErrorCode::ToolTimeout => 504,
            ErrorCode::PayloadTooLarge => 413,
            ErrorCode::DepthLimit | ErrorCode::FanoutLimit | ErrorCode::BudgetExceeded => 429,
            ErrorCode::Unavailable => 503,
            ErrorCode::ModelError
            | ErrorCode::StoreError
            | ErrorCode::Internal
            | ErrorCode::ManageMissingParent
            | ErrorCode::MissingParentChannel => 500,
            _ => 400,
        }
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An error as every caller sees it: a stable code and a human message. What caused it (a
/// store's or a transport's own error) rides along as [`std::error::Error::source`] for logs
/// and for code that must tell kinds of failure apart (e.g. a transient store failure); it
/// never goes on the wire and two errors with the same code and message are equal whatever
/// their sources.
#[derive(Debug, Clone, Serialize, Deserialize, thiserror::Error)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[error("{code}: {message}")]
pub struct AgentdError {
    /// What went wrong, for programs.
    pub code: ErrorCode,
    /// What went wrong, for people.
    pub message: String,
    /// The failure underneath, if another layer's error caused this one.
    #[serde(skip)]
    #[source]
    source: Option<Arc<dyn std::error::Error + Send + Sync + 'static>>,
}

impl PartialEq for AgentdError {
    fn eq(&self, other: &Self) -> bool {
        self.code == other.code && self.message == other.message
    }
}

impl Eq for AgentdError {}

impl AgentdError {
    /// Builds an error from a code and a message.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            source: None,
        }
    }

    /// Builds an error from a code and a message, caused by `source`.
    pub fn with_source(
        code: ErrorCode,
        message: impl Into<String>,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        Self {
            code,
            message: message.into(),
            source: Some(Arc::new(source)),
        }
    }

    /// The cause, if it is an `E` (e.g. the store error behind a `store_error`).
    pub fn source_as<E: std::error::Error + 'static>(&self) -> Option<&E> {
        self.source.as_deref().and_then(|e| e.downcast_ref::<E>())
    }

    /// `missing_field` naming the field, the most common validation failure.
    pub fn missing_field(field: &str) -> Self {
        Self::new(
            ErrorCode::MissingField,
            format!("`{field}` is required and must not be empty"),
        )
    }

    /// `agent_not_found` naming the id.
    pub fn agent_not_found(agent_id: &str) -> Self {
        Self::new(
            ErrorCode::AgentNotFound,
            format!("no agent with id `{agent_id}`"),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serde_name_matches_as_str() {
        for code in [
            ErrorCode::MissingThreadId,
            ErrorCode::ManageMissingParent,
            ErrorCode::MissingParentChannel,
            ErrorCode::PayloadTooLarge,
            ErrorCode::Interrupted,
            ErrorCode::Internal,
            ErrorCode::NotFound,
            ErrorCode::MethodNotAllowed,
            ErrorCode::UnsupportedMediaType,
            ErrorCode::ToolCallNotFound,
            ErrorCode::ToolCallClosed,
            ErrorCode::RequestTimeout,
            ErrorCode::IdempotencyKeyReused,
        ] {
            let json = serde_json::to_string(&code).unwrap_or_default();
            assert_eq!(json, format!("\"{}\"", code.as_str()));
        }
    }

    #[derive(Debug, thiserror::Error)]
    #[error("disk on fire")]
    struct Cause;

    #[test]
    fn a_source_is_kept_for_callers_but_neither_sent_nor_compared() {
        use std::error::Error as _;
        let with = AgentdError::with_source(ErrorCode::StoreError, "write failed", Cause);
        let without = AgentdError::new(ErrorCode::StoreError, "write failed");
        assert_eq!(with, without);
        assert!(with.source_as::<Cause>().is_some());
        assert_eq!(
            with.source().map(|s| s.to_string()).as_deref(),
            Some("disk on fire")
        );
        let wire = serde_json::to_value(&with).unwrap_or_default();
        assert_eq!(
            wire,
            serde_json::json!({"code": "store_error", "message": "write failed"})
        );
    }
}
