//! The agent a sub-agent tool acts on: named by `agent_id` (`"0"` = the caller's root), it
//! must be the caller or one of its descendants (`not_ancestor`), and for the tools that
//! change it, not the caller itself (`self_target`). What such a tool posts goes out as sent by
//! the caller, caused by the current turn.

use super::super::{Call, ToolContext};
use super::arguments::required_str2;
use agentd_proto::{AgentdError, ErrorCode, InboxItem};
use serde_json::{Value, json};

/// The schema of the `agent_id` argument: at least one character (seed 003), so an empty id
/// is `invalid_argument` at the schema, before any look-up.
pub(super) fn agent_id_parameter() -> Value {
    json!({"type": "string", "minLength": 1, "description": "Target agent id (\"0\" names your root)."})
}

/// The schema of arguments that name only the target.
pub(super) fn agent_id_only() -> Value {
    json!({"type": "object", "properties": {"agent_id": agent_id_parameter()}, "required": ["agent_id"]})
}

/// Resolves `agent_id` (`"0"` = the caller's root) and checks it is the caller or below it.
pub(super) async fn descendant(ctx: &ToolContext, args: &Value) -> Result<String, AgentdError> {
    let raw = required_str2(args, "agent_id", "agentId")?;
    let target = if raw == "0" {
        ctx.caller.root_id.to_string()
    } else {
        raw.to_string()
    };
    crate::lineage::require_descendant(&ctx.deps, &ctx.caller.id, &target).await?;
    Ok(target)
}

/// `self_target` if `target` is the caller.
pub(super) fn not_self(ctx: &ToolContext, target: &str) -> Result<(), AgentdError> {
    if target == ctx.caller.id {
        return Err(AgentdError::new(
            ErrorCode::SelfTarget,
            "an agent cannot target itself (reset, compact, follow-up, close or delete)",
        ));
    }
    Ok(())
}

/// [`descendant`], then [`not_self`]: the target of a tool that changes another agent.
pub(super) async fn other_descendant(
    ctx: &ToolContext,
    args: &Value,
) -> Result<String, AgentdError> {
    let target = descendant(ctx, args).await?;
    not_self(ctx, &target)?;
    Ok(target)
}

/// Posts `item` to `target` as sent by the calling agent, caused by the current turn, as the
/// effect of `call`: a call run again posts the same envelope, which the target takes once.
pub(super) async fn post_as_caller(
    ctx: &ToolContext,
    call: Call,
    target: &str,
    item: InboxItem,
) -> Result<(), AgentdError> {
    ctx.agents
        .post(
            agentd_proto::Address::agent(&ctx.caller.id),
            target,
            call.effect_id("post"),
            item,
            ctx.cause,
        )
        .await
}
