//! `inspect_agent`: one sub-agent's [`Inspection`](agentd_proto::Inspection): status, phase,
//! step, last error, tokens and cost.

use super::super::ToolContext;
use super::BuiltinTool;
use super::targets::{agent_id_only, descendant};
use crate::ports::ToolSpec;
use agentd_proto::AgentdError;
use serde_json::Value;

pub(super) fn spec() -> ToolSpec {
    BuiltinTool::InspectAgent.described(
        "Report one sub-agent's status, phase, step, last error, tokens and cost.",
        agent_id_only(),
    )
}

pub(super) async fn run(ctx: &ToolContext, args: &Value) -> Result<Value, AgentdError> {
    let target = descendant(ctx, args).await?;
    crate::errors::to_json(&ctx.agents.inspect(&target).await?)
}
