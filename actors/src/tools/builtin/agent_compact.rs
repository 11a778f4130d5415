//! `agent_compact` (seed 003): compacts another agent's session, its old history becoming a
//! summary. Foreground agents only. Its only argument is the target (seed 003's schema: nothing
//! else is accepted).

use super::super::{Call, ToolContext};
use super::BuiltinTool;
use super::targets::{agent_id_parameter, other_descendant, post_as_caller};
use crate::ports::ToolSpec;
use agentd_proto::{AgentdError, InboxItem};
use serde_json::{Value, json};

pub(super) fn spec() -> ToolSpec {
    BuiltinTool::AgentCompact.described(
        "Compact another agent's session: old history becomes a summary.",
        json!({"type": "object", "properties": {"agent_id": agent_id_parameter()},
            "required": ["agent_id"], "additionalProperties": false}),
    )
}

pub(super) async fn run(ctx: &ToolContext, call: Call, args: &Value) -> Result<Value, AgentdError> {
    let target = other_descendant(ctx, args).await?;
    post_as_caller(ctx, call, &target, InboxItem::Compact).await?;
    Ok(json!({ "summary": "Agent compaction requested.", "target_agent_id": target }))
}
