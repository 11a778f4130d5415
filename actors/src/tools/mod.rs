//! The tools agents can call, who may see them, and how a call is executed.
//!
//! Visibility and execution share one rule ([`visible_tool_names`]): a tool an agent cannot see
//! is also refused when called, so a model that guesses a hidden tool's name gets `not_root` or
//! `tool_not_allowed`, never a result.

mod agents;
mod manage;
pub mod schema;

use crate::channel_router::ChannelRouter;
use crate::deps::Deps;
use crate::ports::ToolSpec;
use crate::supervisor::Supervisor;
use actix::Addr;
use agentd_proto::{AgentRecord, AgentdError, ErrorCode};
use serde_json::{Value, json};
use std::sync::Arc;
use uuid::Uuid;

/// The Manage tool (seed 000).
pub const MANAGE: &str = "Manage";
/// Sub-agent tool that hands the result to the parent (seed 002).
pub const YIELD_TO_PARENT: &str = "yield_to_parent";
/// Spawns a sub-agent (seeds 002/004).
pub const SPAWN_AGENT: &str = "spawn_agent";

/// Tools only managing agents (foreground roots, or types that grant them) get.
pub const MANAGEMENT_TOOLS: [&str; 9] = [
    MANAGE,
    SPAWN_AGENT,
    "send_agent_followup",
    "inspect_agent",
    "list_agents",
    "close_agent",
    "delete_agent",
    "agent_reset",
    "agent_compact",
];

/// Management tools no background agent gets, even when its type grants management.
pub const FOREGROUND_ONLY_TOOLS: [&str; 2] = ["agent_reset", "agent_compact"];

/// Ordinary tools an agent type may list.
pub const REGULAR_TOOLS: [&str; 1] = ["current_time"];

/// Other names accepted for a tool.
pub const TOOL_ALIASES: [(&str, &str); 2] = [("spawn_subagent", SPAWN_AGENT), ("manage", MANAGE)];

/// The canonical name of `name` (resolving aliases).
pub fn canonical(name: &str) -> &str {
    TOOL_ALIASES
        .iter()
        .find(|(alias, _)| *alias == name)
        .map(|(_, to)| *to)
        .unwrap_or(name)
}

/// Whether `rec` is a foreground agent: a root created by a person or a service.
pub fn is_foreground(rec: &AgentRecord) -> bool {
    rec.parent_id.is_none() && rec.foreground
}

/// Whether `rec` may use management tools: a foreground root, or a sub-agent whose type grants
/// them while `depth < max_depth`.
pub fn may_manage(rec: &AgentRecord, deps: &Deps) -> bool {
    let cfg = &deps.config;
    if is_foreground(rec) {
        return true;
    }
    cfg.types
        .get(&rec.agent_type)
        .map(|t| t.grants_management && rec.depth < cfg.limits.max_depth)
        .unwrap_or(false)
}

/// The tool names `rec` sees (and may call).
pub fn visible_tool_names(rec: &AgentRecord, deps: &Deps) -> Vec<&'static str> {
    let mut names: Vec<&'static str> = Vec::new();
    if may_manage(rec, deps) {
        names.extend(MANAGEMENT_TOOLS);
        if !is_foreground(rec) {
            // Seed 003: reset and compact stay with foreground agents, whatever a type grants.
            names.retain(|n| !FOREGROUND_ONLY_TOOLS.contains(n));
        }
    }
    if let Some(ty) = deps.config.types.get(&rec.agent_type) {
        for t in REGULAR_TOOLS {
            if ty.tools.iter().any(|n| n == t) {
                names.push(t);
            }
        }
    }
    if let Some(allowed) = &rec.allowed_tools {
        names.retain(|n| allowed.iter().any(|a| canonical(a) == *n));
    }
    if rec.parent_id.is_some() {
        names.push(YIELD_TO_PARENT);
    }
    names
}

/// The specs the model is shown for `rec` (shared by every agent of its type that sees the
/// same tools).
pub fn visible_specs(rec: &AgentRecord, deps: &Deps) -> std::sync::Arc<Vec<ToolSpec>> {
    let names = visible_tool_names(rec, deps);
    deps.config
        .types
        .tool_specs(&rec.agent_type, names, |names| {
            names.iter().map(|n| spec(n, rec, deps)).collect()
        })
}

fn spec(name: &str, rec: &AgentRecord, deps: &Deps) -> ToolSpec {
    let id_arg =
        json!({"type": "string", "description": "Target agent id (\"0\" names your root)."});
    let (description, parameters) = match name {
        MANAGE => {
            let titles: Vec<String> = deps
                .config
                .types
                .workers_of(&rec.agent_type)
                .iter()
                .map(|w| w.title.trim().to_string())
                .collect();
            (
                format!(
                    "Send a message to a connected worker on a persistent child thread, or check \
                     the status of your child threads. Workers: {}.",
                    if titles.is_empty() {
                        "none".into()
                    } else {
                        titles.join(", ")
                    }
                ),
                json!({"type": "object", "properties": {
                    "command": {"type": "string", "enum": ["send_message", "check_status"]},
                    "worker": {"type": "string", "description": "Worker title."},
                    "message": {"type": "string"},
                    "threadAlias": {"type": "string", "description": "Child thread alias."},
                    "mode": {"type": "string", "enum": ["sync", "async"]},
                    "syncTimeoutMs": {"type": "integer", "minimum": 0},
                    "syncMaxMessages": {"type": "integer", "minimum": 1}
                }, "required": ["command", "threadAlias"]}),
            )
        }
        SPAWN_AGENT => (
            "Start an asynchronous sub-agent from a prompt; returns its id at once. Its result \
             comes back to you as a message when it yields."
                .to_string(),
            json!({"type": "object", "properties": {
                "prompt": {"type": "string"},
                "agent_type": {"type": "string", "description": "subagent (default), research, coding/worker, debug/debugger, or a configured type"},
                "title": {"type": "string"},
                "allowed_tools": {"type": "array", "items": {"type": "string"}},
                "context_files": {"type": "array", "items": {"type": "string"}},
                "background": {"type": "boolean"},
                "priority": {"type": "string", "enum": ["critical", "high", "normal", "low"]},
                "depends_on": {"type": "array", "items": {"type": "string"}, "description": "Agent ids that must complete first."},
                "budget": {"type": "object", "properties": {
                    "max_tokens": {"type": "integer", "minimum": 0},
                    "max_cost_usd": {"type": "number", "minimum": 0},
                    "deadline_ms": {"type": "integer", "minimum": 0}
                }},
                "provider": {"type": "string", "description": "A configured model provider."},
                "model": {"type": "string"}
            }, "required": ["prompt"]}),
        ),
        "send_agent_followup" => (
            "Send more input to a live or closed sub-agent; interrupt aborts its current turn."
                .to_string(),
            json!({"type": "object", "properties": {
                "agent_id": id_arg, "message": {"type": "string"}, "interrupt": {"type": "boolean"}
            }, "required": ["agent_id", "message"]}),
        ),
        "inspect_agent" => (
            "Report one sub-agent's status, phase, step, last error, tokens and cost.".to_string(),
            json!({"type": "object", "properties": {"agent_id": id_arg}, "required": ["agent_id"]}),
        ),
        "list_agents" => (
            "List the live and closed sub-agents of your session with their status.".to_string(),
            json!({"type": "object", "properties": {}}),
        ),
        "close_agent" => (
            "Free a sub-agent's runtime, keeping its history (a follow-up re-opens it)."
                .to_string(),
            json!({"type": "object", "properties": {"agent_id": id_arg}, "required": ["agent_id"]}),
        ),
        "delete_agent" => (
            "Remove a sub-agent and its history for good.".to_string(),
            json!({"type": "object", "properties": {"agent_id": id_arg}, "required": ["agent_id"]}),
        ),
        "agent_reset" => (
            "Reset another agent's session, optionally seeding it with a message.".to_string(),
            json!({"type": "object", "properties": {"agent_id": id_arg, "message": {"type": "string"}}, "required": ["agent_id"]}),
        ),
        "agent_compact" => (
            "Compact another agent's session: old history becomes a summary.".to_string(),
            json!({"type": "object", "properties": {"agent_id": id_arg}, "required": ["agent_id"]}),
        ),
        YIELD_TO_PARENT => (
            "Finish your task and hand the result to your parent.".to_string(),
            json!({"type": "object", "properties": {"result": {"description": "Text or JSON."}}, "required": ["result"]}),
        ),
        "current_time" => (
            "The current time in ms since the Unix epoch.".to_string(),
            json!({"type": "object", "properties": {}}),
        ),
        _ => (String::new(), json!({"type": "object"})),
    };
    ToolSpec {
        name: name.to_string(),
        description,
        parameters,
    }
}

/// Everything a tool call needs to know about its caller.
#[derive(Clone)]
pub struct ToolContext {
    /// The calling agent (its thread is the runtime thread of the call).
    pub caller: std::sync::Arc<AgentRecord>,
    /// Ports and config.
    pub deps: Arc<Deps>,
    /// The process supervisor (shared: a context is built per turn and per call, and cloning
    /// an `Addr` allocates).
    pub supervisor: std::sync::Arc<Addr<Supervisor>>,
    /// The process channel router.
    pub router: std::sync::Arc<Addr<ChannelRouter>>,
    /// The envelope or turn that caused the call.
    pub cause: Uuid,
}

/// What a tool call produced.
#[derive(Debug, Clone, PartialEq)]
pub enum ToolOutcome {
    /// A result for the model.
    Value(Value),
    /// `yield_to_parent`: the turn ends and this goes to the parent.
    Yielded(Value),
}

/// Runs tool `name` for `ctx.caller`, refusing what the caller may not see.
pub async fn execute(
    ctx: &ToolContext,
    name: &str,
    args: &Value,
) -> Result<ToolOutcome, AgentdError> {
    let name = canonical(name);
    let visible = visible_tool_names(&ctx.caller, &ctx.deps);
    if !visible.contains(&name) {
        return Err(refusal(ctx, name));
    }
    let args = if args.is_null() {
        json!({})
    } else {
        args.clone()
    };
    // The arguments must fit the schema the model was shown.
    schema::validate(&spec(name, &ctx.caller, &ctx.deps).parameters, &args, "")?;
    tracing::debug!(tool = name, agent_id = %ctx.caller.id, "tool call");
    let value = match name {
        MANAGE => manage::run(ctx, &args).await?,
        YIELD_TO_PARENT => {
            let result = args
                .get("result")
                .cloned()
                .filter(|v| !v.is_null())
                .ok_or_else(|| AgentdError::missing_field("result"))?;
            return Ok(ToolOutcome::Yielded(result));
        }
        "current_time" => json!({ "now_ms": ctx.deps.clock.now_ms() }),
        other => agents::run(ctx, other, &args).await?,
    };
    Ok(ToolOutcome::Value(value))
}

fn refusal(ctx: &ToolContext, name: &str) -> AgentdError {
    if MANAGEMENT_TOOLS.contains(&name) {
        AgentdError::new(
            ErrorCode::NotRoot,
            format!(
                "`{name}` is for foreground (root) agents; `{}` may not manage agents",
                ctx.caller.id
            ),
        )
    } else if name == YIELD_TO_PARENT {
        AgentdError::new(
            ErrorCode::ToolNotAllowed,
            "only sub-agents can yield to a parent",
        )
    } else if REGULAR_TOOLS.contains(&name) {
        AgentdError::new(
            ErrorCode::ToolNotAllowed,
            format!("`{name}` is not among this agent's tools"),
        )
    } else {
        AgentdError::new(ErrorCode::UnknownTool, format!("no tool named `{name}`"))
    }
}

/// A string argument, trimmed and non-empty, or `missing_field`.
pub(crate) fn required_str<'a>(args: &'a Value, field: &str) -> Result<&'a str, AgentdError> {
    match args.get(field).and_then(Value::as_str).map(str::trim) {
        Some(s) if !s.is_empty() => Ok(s),
        _ => Err(AgentdError::missing_field(field)),
    }
}

/// A string argument under either of two names (snake_case and the seed's camelCase).
pub(crate) fn required_str2<'a>(
    args: &'a Value,
    field: &str,
    alias: &str,
) -> Result<&'a str, AgentdError> {
    required_str(args, field)
        .or_else(|_| required_str(args, alias).map_err(|_| AgentdError::missing_field(field)))
}
