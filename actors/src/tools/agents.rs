//! The sub-agent management tools of seeds 002, 003 and 004: spawn, follow-up, inspect, list,
//! close, delete, reset and compact. Each checks the target is a descendant of the caller.

use super::{ToolContext, required_str, required_str2};
use crate::ops;
use agentd_proto::{AgentList, AgentdError, Channel, Control, ErrorCode, InboxItem};
use serde_json::{Value, json};

pub(super) async fn run(ctx: &ToolContext, name: &str, args: &Value) -> Result<Value, AgentdError> {
    match name {
        super::SPAWN_AGENT => spawn(ctx, args).await,
        "send_agent_followup" => {
            let target = descendant(ctx, args).await?;
            let message = required_str(args, "message")?;
            let interrupt = args
                .get("interrupt")
                .and_then(Value::as_bool)
                .unwrap_or(false);
            not_self(ctx, &target)?;
            post_as_caller(ctx, &target, InboxItem::followup(message, interrupt)).await?;
            Ok(json!({ "agent_id": target, "status": "sent", "interrupt": interrupt }))
        }
        "inspect_agent" => {
            let target = descendant(ctx, args).await?;
            ops::to_json(&ops::inspect(&ctx.deps, &ctx.supervisor, &target).await?)
        }
        "list_agents" => {
            let agents = ops::list(&ctx.deps, &ctx.supervisor, Some(&ctx.caller.id)).await?;
            ops::to_json(&AgentList { agents })
        }
        "close_agent" | "delete_agent" => {
            let target = descendant(ctx, args).await?;
            not_self(ctx, &target)?;
            let control = if name == "close_agent" {
                Control::Close
            } else {
                Control::Delete
            };
            ops::lifecycle(&ctx.deps, &ctx.supervisor, &target, control).await?;
            let status = if control == Control::Close {
                "closed"
            } else {
                "deleted"
            };
            Ok(json!({ "agent_id": target, "status": status }))
        }
        "agent_reset" | "agent_compact" => {
            let target = descendant(ctx, args).await?;
            not_self(ctx, &target)?;
            let item = if name == "agent_reset" {
                let message = args
                    .get("message")
                    .and_then(Value::as_str)
                    .filter(|m| !m.trim().is_empty())
                    .map(str::to_string);
                InboxItem::Reset { message }
            } else {
                InboxItem::Compact
            };
            let summary = if name == "agent_reset" {
                "Agent session reset requested."
            } else {
                "Agent compaction requested."
            };
            post_as_caller(ctx, &target, item).await?;
            Ok(json!({ "summary": summary, "target_agent_id": target }))
        }
        other => Err(AgentdError::new(
            ErrorCode::UnknownTool,
            format!("no tool named `{other}`"),
        )),
    }
}

/// Posts `item` to `target` as sent by the calling agent, caused by the current turn.
async fn post_as_caller(
    ctx: &ToolContext,
    target: &str,
    item: InboxItem,
) -> Result<(), AgentdError> {
    ops::post(
        &ctx.router,
        ops::from_agent(&ctx.caller.id),
        target,
        item,
        Some(ctx.cause),
    )
    .await
    .map(|_| ())
}

fn not_self(ctx: &ToolContext, target: &str) -> Result<(), AgentdError> {
    if target == ctx.caller.id {
        return Err(AgentdError::new(
            ErrorCode::SelfTarget,
            "an agent cannot target itself (reset, compact, follow-up, close or delete)",
        ));
    }
    Ok(())
}

/// Resolves `agent_id` (`"0"` = the caller's root) and checks it is the caller or below it.
async fn descendant(ctx: &ToolContext, args: &Value) -> Result<String, AgentdError> {
    let raw = required_str2(args, "agent_id", "agentId")?;
    let target = if raw == "0" {
        ctx.caller.root_id.clone()
    } else {
        raw.to_string()
    };
    ops::require_descendant(&ctx.deps, &ctx.caller.id, &target).await?;
    Ok(target)
}

async fn spawn(ctx: &ToolContext, args: &Value) -> Result<Value, AgentdError> {
    let prompt = required_str(args, "prompt")?;
    let agent_type = args
        .get("agent_type")
        .or_else(|| args.get("agentType"))
        .and_then(Value::as_str)
        .filter(|s| !s.trim().is_empty())
        .unwrap_or("subagent");
    let title = args
        .get("title")
        .and_then(Value::as_str)
        .map(str::to_string);
    let allowed_tools = string_list(args, "allowed_tools", "allowedTools")?;
    let files = string_list(args, "context_files", "contextFiles")?.unwrap_or_default();
    let prompt = ops::attach_context_files(&ctx.deps, prompt, &files)?;
    let rec = ops::spawn(
        &ctx.supervisor,
        crate::messages::SpawnSpec {
            id: None,
            parent: Some((*ctx.caller).clone()),
            agent_type: agent_type.to_string(),
            title,
            prompt: Some(prompt),
            allowed_tools,
            budget: match args.get("budget") {
                None | Some(Value::Null) => None,
                Some(b) => Some(serde_json::from_value(b.clone()).map_err(|e| {
                    AgentdError::new(ErrorCode::InvalidArgument, format!("`budget`: {e}"))
                })?),
            },
            priority: match args.get("priority") {
                None | Some(Value::Null) => None,
                Some(p) => Some(serde_json::from_value(p.clone()).map_err(|e| {
                    AgentdError::new(ErrorCode::InvalidArgument, format!("`priority`: {e}"))
                })?),
            },
            depends_on: string_list(args, "depends_on", "dependsOn")?.unwrap_or_default(),
            provider: args
                .get("provider")
                .and_then(Value::as_str)
                .map(str::to_string),
            model: args
                .get("model")
                .and_then(Value::as_str)
                .map(str::to_string),
            env: Default::default(),
            channel: Channel::Spawn {
                parent_id: ctx.caller.id.clone(),
            },
        },
    )
    .await?;
    Ok(json!({
        "agent_id": rec.id, "title": rec.title, "agent_type": rec.agent_type,
        "status": "running", "depth": rec.depth,
    }))
}

fn string_list(args: &Value, field: &str, alias: &str) -> Result<Option<Vec<String>>, AgentdError> {
    match args.get(field).or_else(|| args.get(alias)) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Array(items)) => items
            .iter()
            .map(|v| {
                v.as_str().map(str::to_string).ok_or_else(|| {
                    AgentdError::new(
                        ErrorCode::InvalidArgument,
                        format!("`{field}` must be a list of strings"),
                    )
                })
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Some),
        Some(_) => Err(AgentdError::new(
            ErrorCode::InvalidArgument,
            format!("`{field}` must be a list of strings"),
        )),
    }
}
