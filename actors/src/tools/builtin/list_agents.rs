//! `list_agents`: the caller's children, live and closed, as an
//! [`AgentList`](agentd_proto::AgentList).

use super::super::ToolContext;
use super::BuiltinTool;
use crate::ports::ToolSpec;
use agentd_proto::{AgentList, AgentdError};
use serde_json::{Value, json};

pub(super) fn spec() -> ToolSpec {
    BuiltinTool::ListAgents.described(
        "List the live and closed sub-agents of your session with their status.",
        json!({"type": "object", "properties": {}}),
    )
}

pub(super) async fn run(ctx: &ToolContext) -> Result<Value, AgentdError> {
    let agents = ctx.agents.children(&ctx.caller.id).await?;
    crate::errors::to_json(&AgentList { agents })
}
