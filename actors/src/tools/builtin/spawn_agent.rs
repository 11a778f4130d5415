//! `spawn_agent` (seeds 002/004; alias `spawn_subagent`): starts an asynchronous sub-agent of
//! the caller from a prompt and answers its id at once; its result comes back to the caller as
//! a message when it yields: handled before what is queued for the caller, or, for a
//! `background` sub-agent, in the caller's inbox order like any message.

use super::super::{Call, ToolContext};
use super::BuiltinTool;
use super::arguments::{required_str, string_list, typed};
use crate::messages::SpawnSpec;
use crate::ports::ToolSpec;
use agentd_proto::{AgentdError, Channel};
use serde_json::{Value, json};

pub(super) fn spec() -> ToolSpec {
    BuiltinTool::SpawnAgent.described(
        "Start an asynchronous sub-agent from a prompt; returns its id at once. Its result \
         comes back to you as a message when it yields.",
        json!({"type": "object", "properties": {
            "prompt": {"type": "string"},
            "agent_type": {"type": "string", "description": "subagent (default), research, coding/worker, debug/debugger, or a configured type"},
            "title": {"type": "string"},
            "allowed_tools": {"type": "array", "items": {"type": "string"}},
            "context_files": {"type": "array", "items": {"type": "string"}},
            "background": {"type": "boolean", "description": "Its result waits its turn in your inbox instead of coming first."},
            "priority": {"type": "string", "enum": ["critical", "high", "normal", "low"]},
            "depends_on": {"type": "array", "items": {"type": "string"}, "description": "Agent ids that must complete first."},
            "on_dependency_failure": {"type": "string", "enum": ["fail", "hold"], "description": "If a dependency fails, is cancelled or terminated: fail this agent too, or hold it until the dependency succeeds after all. Default: the configured limit."},
            "budget": {"type": "object", "properties": {
                "max_tokens": {"type": "integer", "minimum": 1},
                "max_cost_usd": {"type": "number", "minimum": 0, "description": "USD, more than 0."},
                "deadline_ms": {"type": "integer", "minimum": 1}
            }},
            "provider": {"type": "string", "description": "A configured model provider."},
            "model": {"type": "string"}
        }, "required": ["prompt"]}),
    )
}

pub(super) async fn run(ctx: &ToolContext, call: Call, args: &Value) -> Result<Value, AgentdError> {
    let prompt = required_str(args, "prompt")?;
    let agent_type = args
        .get("agent_type")
        .or_else(|| args.get("agentType"))
        .and_then(Value::as_str)
        .filter(|s| !s.trim().is_empty())
        .unwrap_or("subagent");
    let text = |field: &str| args.get(field).and_then(Value::as_str).map(str::to_string);
    let allowed_tools = string_list(args, "allowed_tools", "allowedTools")?;
    let files = string_list(args, "context_files", "contextFiles")?.unwrap_or_default();
    let prompt = crate::context_files::first_message(&ctx.deps, Some(prompt), &files)?;
    let spec = SpawnSpec {
        // The same agent in every run of the call: a run after a crash finds it.
        id: Some(call.effect_id("spawn").to_string()),
        parent: Some((*ctx.caller).clone()),
        agent_type: agent_type.to_string(),
        title: text("title"),
        prompt,
        allowed_tools,
        budget: typed(args, "budget")?,
        priority: typed(args, "priority")?,
        depends_on: string_list(args, "depends_on", "dependsOn")?.unwrap_or_default(),
        on_dependency_failure: typed(args, "on_dependency_failure")?,
        provider: text("provider"),
        model: text("model"),
        env: Default::default(),
        background: false,
        trace: agentd_observe::telemetry::current(),
        channel: Channel::Spawn {
            parent_id: ctx.caller.id.clone(),
            background: typed(args, "background")?.unwrap_or(false),
        },
    };
    let rec = if call.again {
        ctx.agents.spawn_again(spec).await?
    } else {
        ctx.agents.spawn(spec).await?
    };
    Ok(json!({
        "agent_id": rec.id, "title": rec.title, "agent_type": rec.agent_type,
        "status": "running", "depth": rec.depth,
    }))
}
