//! The tools agents can call: what a name resolves to, who may see it, and how a call runs.
//!
//! | module | what it holds |
//! |---|---|
//! | [`tool`] | [`Tool`]: what a call's name resolves to (built-in, or an MCP server's) |
//! | [`builtin`] | [`BuiltinTool`] and its [`ToolGroup`]s, one file per tool with its spec and run |
//! | [`mcp`] | [`McpTool`]: a tool of a configured MCP server, its spec, run and result |
//! | [`configured`] | [`ConfiguredTool`]: `[tools.<name>]`, a service's or a webhook's |
//! | [`meters`] | the calls of configured tools: their metrics and events |
//! | [`catalogue`] | [`ToolCatalogue`]: the tools, their version, and the specs built per version |
//! | [`pattern`] | the grammar of a type's `tools` and a spawn's `allowed_tools`, checked at start |
//! | [`visibility`] | which tools an agent sees, and the refusal of the others (one rule) |
//! | [`schema`] | validation of a call's arguments against the schema the model was shown |
//!
//! A call runs as [`execute`] says: its name resolves to a tool the caller sees (or is refused
//! as [`callable`] says), its arguments must fit that tool's spec, then the tool
//! runs.

mod builtin;
mod catalogue;
mod configured;
pub mod mcp;
mod meters;
pub mod pattern;
pub mod schema;
mod tool;
mod visibility;

pub(crate) use builtin::BuiltinTool;
pub use catalogue::ToolCatalogue;
pub(crate) use catalogue::{VisibleSpecs, visible_specs};
pub(crate) use configured::check_name;
pub use configured::{Approval, ConfiguredRun, ConfiguredTool, Secret};
pub use pattern::{ToolPattern, check_type_tools, is_valid_server_name};
pub(crate) use tool::Tool;
pub(crate) use visibility::callable;

use crate::handle::SystemHandle;
use agentd_proto::{AgentRecord, AgentdError};
use serde_json::{Value, json};
use uuid::Uuid;

/// Everything a tool call needs to know about its caller.
#[derive(Clone)]
pub struct ToolContext {
    /// The calling agent (its thread is the runtime thread of the call).
    pub caller: std::sync::Arc<AgentRecord>,
    /// The process's ports and actors.
    pub(crate) system: SystemHandle,
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

/// Runs tool `name` for `ctx.caller` outside a turn (the API's `POST …/tools/{tool}`),
/// refusing what the caller may not see, and what only a turn may call: a tool behind an
/// approval gate, or a service tool (its answer comes later, to a waiting turn).
pub async fn execute(
    ctx: &ToolContext,
    name: &str,
    args: &Value,
) -> Result<ToolOutcome, AgentdError> {
    let tool = callable(&ctx.caller, &ctx.system.deps, name)?;
    if tool.needs_approval() {
        return Err(agentd_proto::AgentdError::new(
            agentd_proto::ErrorCode::InvalidTransition,
            format!(
                "`{}` waits for approval before each call: only an agent's turn may call it",
                tool.name()
            ),
        ));
    }
    execute_tool(ctx, &tool, agentd_proto::ids::new_id(), args).await
}

/// Runs `tool` (which `ctx.caller` may call) as call `call_id` of a turn: its arguments must
/// fit its spec. Calls of configured tools are counted and announced ([`meters`]).
pub(crate) async fn execute_tool(
    ctx: &ToolContext,
    tool: &Tool,
    call_id: Uuid,
    args: &Value,
) -> Result<ToolOutcome, AgentdError> {
    let args = if args.is_null() {
        json!({})
    } else {
        args.clone()
    };
    // The arguments must fit the schema the model was shown.
    let args = schema::validate(&tool.spec(&ctx.caller, &ctx.system.deps).parameters, &args)?;
    // The arguments stay out of logs.
    tracing::debug!(tool = tool.name(), agent_id = %ctx.caller.id, "tool call");
    let Some(configured) = tool.configured() else {
        return tool.run(ctx, call_id, &args).await;
    };
    let started = std::time::Instant::now();
    let meter = meters::CallMeter::requested(ctx, configured, call_id);
    let res = tool.run(ctx, call_id, &args).await;
    let outcome = match &res {
        Ok(_) => meters::Outcome::Ok,
        Err(e) if e.code == agentd_proto::ErrorCode::ToolTimeout => meters::Outcome::TimedOut,
        Err(_) => meters::Outcome::Error,
    };
    meter.finished(outcome, started.elapsed());
    res
}
