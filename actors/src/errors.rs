//! Failures of the libraries the actors use, as the wire's [`AgentdError`]: a mailbox that is
//! gone or full is `unavailable`; an answer that cannot become JSON is `internal`.

use actix::MailboxError;
use agentd_proto::{AgentdError, ErrorCode};

/// Maps a mailbox failure (actor gone or full) to `unavailable`.
pub(crate) fn mailbox(e: MailboxError) -> AgentdError {
    AgentdError::with_source(ErrorCode::Unavailable, format!("actor mailbox: {e}"), e)
}

/// An answer as JSON (a command's or a tool's result). The wire types serialize to JSON
/// whatever their contents; a failure would be a bug, reported as `internal`.
pub(crate) fn to_json(answer: &impl serde::Serialize) -> Result<serde_json::Value, AgentdError> {
    serde_json::to_value(answer).map_err(|e| {
        AgentdError::with_source(ErrorCode::Internal, format!("answer as JSON: {e}"), e)
    })
}
