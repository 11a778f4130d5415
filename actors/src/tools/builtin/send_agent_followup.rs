//! `send_agent_followup`: more input for a live or closed sub-agent (a closed one re-opens);
//! `interrupt` aborts its current turn.

use super::super::{Call, ToolContext};
use super::BuiltinTool;
use super::arguments::required_str;
use super::targets::{agent_id_parameter, descendant, not_self, post_as_caller};
use crate::ports::ToolSpec;
use agentd_proto::{AgentdError, InboxItem};
use serde_json::{Value, json};

pub(super) fn spec() -> ToolSpec {
    BuiltinTool::SendAgentFollowup.described(
        "Send more input to a live or closed sub-agent; interrupt aborts its current turn.",
        json!({"type": "object", "properties": {
            "agent_id": agent_id_parameter(), "message": {"type": "string"}, "interrupt": {"type": "boolean"}
        }, "required": ["agent_id", "message"]}),
    )
}

pub(super) async fn run(ctx: &ToolContext, call: Call, args: &Value) -> Result<Value, AgentdError> {
    // The target is checked before the message, and the message before refusing the caller
    // itself: the first problem found is the one reported.
    let target = descendant(ctx, args).await?;
    let message = required_str(args, "message")?;
    let interrupt = args
        .get("interrupt")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    not_self(ctx, &target)?;
    post_as_caller(ctx, call, &target, InboxItem::followup(message, interrupt)).await?;
    Ok(json!({ "agent_id": target, "status": "sent", "interrupt": interrupt }))
}
