//! `close_agent`: frees a sub-agent's runtime (and its descendants'), keeping its history; a
//! follow-up re-opens it.

use super::super::ToolContext;
use super::BuiltinTool;
use super::targets::{agent_id_only, other_descendant};
use crate::ports::ToolSpec;
use agentd_proto::{AgentdError, Control};
use serde_json::{Value, json};

pub(super) fn spec() -> ToolSpec {
    BuiltinTool::CloseAgent.described(
        "Free a sub-agent's runtime, keeping its history (a follow-up re-opens it).",
        agent_id_only(),
    )
}

pub(super) async fn run(ctx: &ToolContext, args: &Value) -> Result<Value, AgentdError> {
    let target = other_descendant(ctx, args).await?;
    ctx.agents.lifecycle(&target, Control::Close).await?;
    Ok(json!({ "agent_id": target, "status": "closed" }))
}
