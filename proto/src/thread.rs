//! Entries of an agent's thread: the conversation as the model sees it, in order.

use crate::usage::Usage;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// Who wrote a thread entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
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
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ToolCall {
    /// Id that the matching [`Role::Tool`] entry refers to.
    pub id: String,
    /// Tool name.
    pub name: String,
    /// Arguments as JSON.
    #[serde(default)]
    pub arguments: serde_json::Value,
}

/// One entry of a thread. The fields most entries leave empty are boxed (the same wire
/// format): an entry stays in the 128-byte allocation class with its `Arc`, not the 192-byte
/// one. Threads are what an agentd process holds most of, two entries per message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ThreadEntry {
    /// Entry id (derived from the input for turn outputs, so replays de-duplicate).
    pub id: Uuid,
    /// Who wrote it.
    pub role: Role,
    /// The text.
    #[serde(default)]
    pub text: String,
    /// Tool calls requested (assistant entries).
    #[serde(default, skip_serializing_if = "<[ToolCall]>::is_empty")]
    pub tool_calls: Box<[ToolCall]>,
    /// The call this entry answers (tool entries).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<Box<str>>,
    /// Tokens the model call that produced this entry used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Box<Usage>>,
    /// The agent this text was forwarded from, if it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_agent: Option<Box<str>>,
    /// The turn was interrupted; this is its partial output.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub interrupted: bool,
    /// A tool entry whose text is the call's error, not its result (Anthropic's `is_error`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub is_error: bool,
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
            tool_calls: Box::default(),
            tool_call_id: None,
            usage: None,
            from_agent: None,
            interrupted: false,
            is_error: false,
            at_ms,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_with_its_arc_fits_the_128_byte_allocation_class() {
        // `Arc` adds two counters (16 bytes); allocators round 129..=160 up past 128.
        assert!(std::mem::size_of::<ThreadEntry>() + 16 <= 128);
    }

    #[test]
    fn boxed_fields_keep_the_wire_format() {
        let mut e = ThreadEntry::text(uuid::Uuid::nil(), Role::Tool, "t", 1);
        e.tool_call_id = Some("call-1".into());
        e.from_agent = Some("a1".into());
        e.usage = Some(Box::new(Usage {
            input: 1,
            output: 2,
            cache_write: 3,
            cache_read: 4,
            ..Usage::default()
        }));
        let json = serde_json::to_value(&e).unwrap_or_default();
        assert_eq!(json["tool_call_id"], "call-1");
        assert_eq!(json["from_agent"], "a1");
        assert_eq!(json["usage"]["cache_read"], 4);
        assert!(json.get("tool_calls").is_none());
        let bytes = crate::codec::encode(&e).unwrap_or_default();
        assert_eq!(crate::codec::decode::<ThreadEntry>(&bytes).ok(), Some(e));
    }
}
