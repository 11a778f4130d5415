//! `yield_to_parent` (seed 002): a sub-agent finishes its task; the turn ends and the result
//! goes to its parent.

use super::BuiltinTool;
use crate::ports::ToolSpec;
use agentd_proto::AgentdError;
use serde_json::{Value, json};

pub(super) fn spec() -> ToolSpec {
    BuiltinTool::YieldToParent.described(
        "Finish your task and hand the result to your parent.",
        json!({"type": "object", "properties": {"result": {"description": "Text or JSON."}}, "required": ["result"]}),
    )
}

/// The result to hand over: `result`, which must not be `null`.
pub(super) fn run(args: &Value) -> Result<Value, AgentdError> {
    args.get("result")
        .cloned()
        .filter(|v| !v.is_null())
        .ok_or_else(|| AgentdError::missing_field("result"))
}
