//! `agent_reset` (seed 003): resets another agent's session, optionally seeding it with a
//! message. Foreground agents only. Its arguments are seed 003's schema: `message`, when given,
//! has at least one character (a blank one counts as none), and nothing else is accepted.

use super::super::{Call, ToolContext};
use super::BuiltinTool;
use super::arguments::optional_str;
use super::targets::{agent_id_parameter, other_descendant, post_as_caller};
use crate::ports::ToolSpec;
use agentd_proto::{AgentdError, InboxItem};
use serde_json::{Value, json};

pub(super) fn spec() -> ToolSpec {
    BuiltinTool::AgentReset.described(
        "Reset another agent's session, optionally seeding it with a message.",
        json!({"type": "object", "properties": {
            "agent_id": agent_id_parameter(),
            "message": {"type": "string", "minLength": 1, "description": "First message of the fresh session."}
        }, "required": ["agent_id"], "additionalProperties": false}),
    )
}

pub(super) async fn run(ctx: &ToolContext, call: Call, args: &Value) -> Result<Value, AgentdError> {
    let target = other_descendant(ctx, args).await?;
    let message = optional_str(args, "message").map(str::to_string);
    post_as_caller(ctx, call, &target, InboxItem::Reset { message }).await?;
    Ok(json!({ "summary": "Agent session reset requested.", "target_agent_id": target }))
}
