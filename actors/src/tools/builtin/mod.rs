//! The tools agentd itself provides ([`BuiltinTool`]), one file per tool with its spec (what the
//! model is shown) and its run.
//!
//! | module | tool |
//! |---|---|
//! | [`manage`] | `Manage` (seed 000): messages to workers on persistent child threads |
//! | [`spawn_agent`] | `spawn_agent`: starts an asynchronous sub-agent |
//! | [`send_agent_followup`] | `send_agent_followup`: more input for a sub-agent |
//! | [`inspect_agent`] | `inspect_agent`: one sub-agent's inspection |
//! | [`list_agents`] | `list_agents`: the caller's children |
//! | [`close_agent`] | `close_agent`: frees a sub-agent's runtime, history kept |
//! | [`delete_agent`] | `delete_agent`: removes a sub-agent and its history |
//! | [`agent_reset`] | `agent_reset`: resets another agent's session |
//! | [`agent_compact`] | `agent_compact`: compacts another agent's session |
//! | [`current_time`] | `current_time`: the clock's time |
//! | [`yield_to_parent`] | `yield_to_parent`: a sub-agent's result for its parent |
//! | [`arguments`] | reading a call's arguments (required strings, string lists, typed values) |
//! | [`targets`] | resolving and checking the agent a call acts on, posting to it as the caller |

mod agent_compact;
mod agent_reset;
mod arguments;
mod close_agent;
mod current_time;
mod delete_agent;
mod inspect_agent;
mod list_agents;
mod manage;
mod send_agent_followup;
mod spawn_agent;
mod targets;
mod yield_to_parent;

use super::{Call, ToolContext, ToolOutcome};
use crate::catalogue::BuiltinTool;
use crate::deps::Deps;
use crate::ports::ToolSpec;
use agentd_proto::{AgentRecord, AgentdError};
use serde_json::Value;

impl BuiltinTool {
    /// The spec `rec` is shown (Manage's lists the workers of `rec`'s type).
    pub fn spec(self, rec: &AgentRecord, deps: &Deps) -> ToolSpec {
        match self {
            BuiltinTool::Manage => manage::spec(rec, deps),
            BuiltinTool::SpawnAgent => spawn_agent::spec(),
            BuiltinTool::SendAgentFollowup => send_agent_followup::spec(),
            BuiltinTool::InspectAgent => inspect_agent::spec(),
            BuiltinTool::ListAgents => list_agents::spec(),
            BuiltinTool::CloseAgent => close_agent::spec(),
            BuiltinTool::DeleteAgent => delete_agent::spec(),
            BuiltinTool::AgentReset => agent_reset::spec(),
            BuiltinTool::AgentCompact => agent_compact::spec(),
            BuiltinTool::CurrentTime => current_time::spec(),
            BuiltinTool::YieldToParent => yield_to_parent::spec(),
        }
    }

    /// Runs the tool for `ctx.caller` on arguments that fit its spec, as `call` (what it does
    /// to other agents takes ids derived from the call's: see [`Call`]).
    pub(crate) async fn run(
        self,
        ctx: &ToolContext,
        call: Call,
        args: &Value,
    ) -> Result<ToolOutcome, AgentdError> {
        let value = match self {
            BuiltinTool::Manage => manage::run(ctx, call, args).await?,
            BuiltinTool::SpawnAgent => spawn_agent::run(ctx, call, args).await?,
            BuiltinTool::SendAgentFollowup => send_agent_followup::run(ctx, call, args).await?,
            BuiltinTool::InspectAgent => inspect_agent::run(ctx, args).await?,
            BuiltinTool::ListAgents => list_agents::run(ctx).await?,
            BuiltinTool::CloseAgent => close_agent::run(ctx, args).await?,
            BuiltinTool::DeleteAgent => delete_agent::run(ctx, args).await?,
            BuiltinTool::AgentReset => agent_reset::run(ctx, call, args).await?,
            BuiltinTool::AgentCompact => agent_compact::run(ctx, call, args).await?,
            BuiltinTool::CurrentTime => current_time::run(ctx),
            BuiltinTool::YieldToParent => {
                return yield_to_parent::run(args).map(ToolOutcome::Yielded);
            }
        };
        Ok(ToolOutcome::Value(value))
    }
}
