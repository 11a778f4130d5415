//! How tools run: who may see a tool, what it shows the model, and how a call runs. What a
//! name resolves to is the [`crate::catalogue`]'s; this module adds the behaviour, and sees the
//! rest of the system only through the [`Agents`] port.
//!
//! | module | what it holds |
//! |---|---|
//! | [`agents`] | [`Agents`]: what a tool may ask of the system (spawn, post, inspect, …) |
//! | [`tool`] | a [`Tool`]'s spec and run, by kind |
//! | [`builtin`] | one file per built-in tool with its spec and run |
//! | [`mcp`] | an MCP tool's run and the result the model reads |
//! | [`configured`] | a configured tool's run (webhooks now; service calls wait in a turn) |
//! | [`specs`] | the specs an agent is shown, shared per kind of agent |
//! | [`service`] | service tools' calls: closing one once, the result a closed one gives |
//! | [`meters`] | the calls of configured tools: their metrics and events |
//! | [`visibility`] | which tools an agent sees, and the refusal of the others (one rule) |
//! | [`schema`] | validation of a call's arguments against the schema the model was shown |
//!
//! A call runs as [`execute`] says: its name resolves to a tool the caller sees (or is refused
//! as [`callable`] says), its arguments must fit that tool's spec, then the tool
//! runs.

mod agents;
mod builtin;
mod configured;
mod mcp;
pub(crate) mod meters;
pub mod schema;
pub(crate) mod service;
mod specs;
mod tool;
mod visibility;

pub(crate) use agents::Agents;
pub(crate) use specs::visible_specs;
pub(crate) use visibility::callable;

use crate::catalogue::Tool;
use crate::deps::Deps;
use agentd_proto::{AgentRecord, AgentdError};
use serde_json::{Value, json};
use std::sync::Arc;
use uuid::Uuid;

/// Everything a tool call needs to know about its caller.
#[derive(Clone)]
pub(crate) struct ToolContext {
    /// The calling agent (its thread is the runtime thread of the call).
    pub caller: Arc<AgentRecord>,
    /// The process's ports, config and tool catalogue.
    pub deps: Arc<Deps>,
    /// What a tool may ask of the rest of the system (the agents it manages).
    pub agents: Arc<dyn Agents>,
    /// The envelope or turn that caused the call.
    pub cause: Uuid,
}

/// The call a tool runs as. What the call does to other agents (a message, a spawn, a reset, a
/// compaction) takes ids derived from [`Call::id`], so a turn that runs the call again after a
/// crash or a retry repeats none of it: the receivers take each effect once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Call {
    /// agentd's id of the call: the id of its result in the caller's thread, the same in every
    /// run of the turn (a webhook's `X-Agentd-Call-Id`).
    pub id: Uuid,
    /// When the model made the call (its step's entry), ms since the epoch: a sync Manage wait
    /// run again waits only for what is left of its timeout.
    pub made_at_ms: u64,
    /// The call may have run before (its turn runs again): what it did is looked for first.
    pub again: bool,
}

impl Call {
    /// A call made now that cannot have run before (the API's tool door).
    pub(crate) fn fresh(now_ms: u64) -> Call {
        Call {
            id: agentd_proto::ids::new_id(),
            made_at_ms: now_ms,
            again: false,
        }
    }

    /// The id of this call's effect `what` (`"spawn"`, `"post"`, `"manage"`): the same in
    /// every run of the call.
    pub(crate) fn effect_id(&self, what: &str) -> Uuid {
        agentd_proto::ids::derived_id(self.id, what)
    }
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
    let tool = callable(&ctx.caller, &ctx.deps, name)?;
    if tool.needs_approval() {
        return Err(agentd_proto::AgentdError::new(
            agentd_proto::ErrorCode::InvalidTransition,
            format!(
                "`{}` waits for approval before each call: only an agent's turn may call it",
                tool.name()
            ),
        ));
    }
    execute_tool(ctx, &tool, Call::fresh(ctx.deps.clock.now_ms()), args).await
}

/// Runs `tool` (which `ctx.caller` may call) as `call` of a turn: its arguments must fit its
/// spec. Calls of configured tools are counted and announced ([`meters`]).
pub(crate) async fn execute_tool(
    ctx: &ToolContext,
    tool: &Tool,
    call: Call,
    args: &Value,
) -> Result<ToolOutcome, AgentdError> {
    let no_args = json!({});
    let args = if args.is_null() { &no_args } else { args };
    // The arguments must fit the schema the model was shown.
    let args = tool.check_args(&ctx.caller, &ctx.deps, args)?;
    // The arguments stay out of logs.
    tracing::debug!(tool = tool.name(), agent_id = %ctx.caller.id, "tool call");
    let Some(configured) = tool.configured() else {
        return tool.run(ctx, call, &args).await;
    };
    let started = std::time::Instant::now();
    let meter = meters::CallMeter::requested(ctx, configured, call.id);
    let res = tool.run(ctx, call, &args).await;
    let outcome = match &res {
        Ok(_) => meters::Outcome::Ok,
        Err(e) if e.code == agentd_proto::ErrorCode::ToolTimeout => meters::Outcome::TimedOut,
        Err(_) => meters::Outcome::Error,
    };
    meter.finished(outcome, started.elapsed());
    res
}
