//! Entries of an agent's thread: the conversation as the model sees it, in order.

use crate::usage::Usage;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// Who wrote a thread entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Instructions (e.g. a compaction summary).
    System,
    /// Input to the agent: a person, a parent, a forwarded result.
    User,
    /// The agent's model, or text forwarded as the agent's own (seed 000).
    Assistant,
    /// The result of a tool call.
    Tool,
}

/// One tool call requested by the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// Id that the matching [`Role::Tool`] entry refers to.
    pub id: String,
    /// Tool name.
    pub name: String,
    /// Arguments as JSON.
    #[serde(default)]
    pub arguments: serde_json::Value,
}

/// One entry of a thread.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ThreadEntry {
    /// Entry id (derived from the input for turn outputs, so replays de-duplicate).
    pub id: Uuid,
    /// Who wrote it.
    pub role: Role,
    /// The text.
    #[serde(default)]
    pub text: String,
    /// Tool calls requested (assistant entries).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    /// The call this entry answers (tool entries).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// Tokens the model call that produced this entry used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// The agent this text was forwarded from, if it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_agent: Option<String>,
    /// The turn was interrupted; this is its partial output.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub interrupted: bool,
    /// When it was written, ms since the Unix epoch.
    pub at_ms: u64,
}

impl ThreadEntry {
    /// A plain text entry.
    pub fn text(id: Uuid, role: Role, text: impl Into<String>, at_ms: u64) -> Self {
        ThreadEntry {
            id,
            role,
            text: text.into(),
            tool_calls: Vec::new(),
            tool_call_id: None,
            usage: None,
            from_agent: None,
            interrupted: false,
            at_ms,
        }
    }
}
