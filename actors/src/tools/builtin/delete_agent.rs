//! `delete_agent`: removes a sub-agent (and its descendants) and its history for good.

use super::super::ToolContext;
use super::BuiltinTool;
use super::targets::{agent_id_only, other_descendant};
use crate::ports::ToolSpec;
use agentd_proto::{AgentdError, Control};
use serde_json::{Value, json};

pub(super) fn spec() -> ToolSpec {
    BuiltinTool::DeleteAgent.described(
        "Remove a sub-agent and its history for good.",
        agent_id_only(),
    )
}

pub(super) async fn run(ctx: &ToolContext, args: &Value) -> Result<Value, AgentdError> {
    let target = other_descendant(ctx, args).await?;
    ctx.agents.lifecycle(&target, Control::Delete).await?;
    Ok(json!({ "agent_id": target, "status": "deleted" }))
}
