//! The tools agentd itself provides: [`BuiltinTool`], one file per tool with its spec (what the
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

use super::{ToolContext, ToolOutcome};
use crate::deps::Deps;
use crate::ports::ToolSpec;
use agentd_proto::{AgentRecord, AgentdError};
use serde_json::Value;
use std::str::FromStr;

/// A tool agentd itself provides.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BuiltinTool {
    /// `Manage` (seed 000).
    Manage,
    /// `spawn_agent` (seeds 002/004).
    SpawnAgent,
    /// `send_agent_followup`.
    SendAgentFollowup,
    /// `inspect_agent`.
    InspectAgent,
    /// `list_agents`.
    ListAgents,
    /// `close_agent`.
    CloseAgent,
    /// `delete_agent`.
    DeleteAgent,
    /// `agent_reset` (seed 003).
    AgentReset,
    /// `agent_compact` (seed 003).
    AgentCompact,
    /// `current_time`.
    CurrentTime,
    /// `yield_to_parent` (seed 002).
    YieldToParent,
}

/// Who may see (and call) a tool; visibility and refusal both follow it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ToolGroup {
    /// Managing agents: foreground roots, and sub-agents whose type grants management.
    Management,
    /// Managing agents that are foreground: no background agent gets them, whatever its type
    /// grants (seed 003).
    ForegroundOnly,
    /// Agents whose type lists the tool.
    Regular,
    /// Sub-agents (agents with a parent).
    SubAgentOnly,
}

impl BuiltinTool {
    /// Every built-in tool, in the order agents are shown them.
    pub const ALL: [BuiltinTool; 11] = [
        BuiltinTool::Manage,
        BuiltinTool::SpawnAgent,
        BuiltinTool::SendAgentFollowup,
        BuiltinTool::InspectAgent,
        BuiltinTool::ListAgents,
        BuiltinTool::CloseAgent,
        BuiltinTool::DeleteAgent,
        BuiltinTool::AgentReset,
        BuiltinTool::AgentCompact,
        BuiltinTool::CurrentTime,
        BuiltinTool::YieldToParent,
    ];

    /// Other names a call may use for a tool.
    pub const ALIASES: [(&'static str, BuiltinTool); 2] = [
        ("spawn_subagent", BuiltinTool::SpawnAgent),
        ("manage", BuiltinTool::Manage),
    ];

    /// The name the model is shown and calls.
    pub fn name(self) -> &'static str {
        match self {
            BuiltinTool::Manage => "Manage",
            BuiltinTool::SpawnAgent => "spawn_agent",
            BuiltinTool::SendAgentFollowup => "send_agent_followup",
            BuiltinTool::InspectAgent => "inspect_agent",
            BuiltinTool::ListAgents => "list_agents",
            BuiltinTool::CloseAgent => "close_agent",
            BuiltinTool::DeleteAgent => "delete_agent",
            BuiltinTool::AgentReset => "agent_reset",
            BuiltinTool::AgentCompact => "agent_compact",
            BuiltinTool::CurrentTime => "current_time",
            BuiltinTool::YieldToParent => "yield_to_parent",
        }
    }

    /// Who may see and call it.
    pub fn group(self) -> ToolGroup {
        match self {
            BuiltinTool::Manage
            | BuiltinTool::SpawnAgent
            | BuiltinTool::SendAgentFollowup
            | BuiltinTool::InspectAgent
            | BuiltinTool::ListAgents
            | BuiltinTool::CloseAgent
            | BuiltinTool::DeleteAgent => ToolGroup::Management,
            BuiltinTool::AgentReset | BuiltinTool::AgentCompact => ToolGroup::ForegroundOnly,
            BuiltinTool::CurrentTime => ToolGroup::Regular,
            BuiltinTool::YieldToParent => ToolGroup::SubAgentOnly,
        }
    }

    /// The tool `name` (or an alias) names, if it names a built-in tool.
    pub fn named(name: &str) -> Option<BuiltinTool> {
        BuiltinTool::ALL
            .into_iter()
            .find(|t| t.name() == name)
            .or_else(|| {
                BuiltinTool::ALIASES
                    .iter()
                    .find(|(alias, _)| *alias == name)
                    .map(|(_, tool)| *tool)
            })
    }

    /// Whether a call naming `name` (or one of its aliases) calls this tool.
    pub fn is_named(self, name: &str) -> bool {
        BuiltinTool::named(name) == Some(self)
    }

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

    /// Runs the tool for `ctx.caller` on arguments that fit its spec.
    pub(crate) async fn run(
        self,
        ctx: &ToolContext,
        args: &Value,
    ) -> Result<ToolOutcome, AgentdError> {
        let value = match self {
            BuiltinTool::Manage => manage::run(ctx, args).await?,
            BuiltinTool::SpawnAgent => spawn_agent::run(ctx, args).await?,
            BuiltinTool::SendAgentFollowup => send_agent_followup::run(ctx, args).await?,
            BuiltinTool::InspectAgent => inspect_agent::run(ctx, args).await?,
            BuiltinTool::ListAgents => list_agents::run(ctx).await?,
            BuiltinTool::CloseAgent => close_agent::run(ctx, args).await?,
            BuiltinTool::DeleteAgent => delete_agent::run(ctx, args).await?,
            BuiltinTool::AgentReset => agent_reset::run(ctx, args).await?,
            BuiltinTool::AgentCompact => agent_compact::run(ctx, args).await?,
            BuiltinTool::CurrentTime => current_time::run(ctx),
            BuiltinTool::YieldToParent => {
                return yield_to_parent::run(args).map(ToolOutcome::Yielded);
            }
        };
        Ok(ToolOutcome::Value(value))
    }

    /// The spec of this tool with `description` and the JSON schema `parameters`.
    fn described(self, description: impl Into<String>, parameters: Value) -> ToolSpec {
        ToolSpec {
            name: self.name().to_string(),
            description: description.into(),
            parameters,
        }
    }
}

/// A name or alias of a built-in tool; `unknown_tool` for any other name.
impl FromStr for BuiltinTool {
    type Err = AgentdError;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        BuiltinTool::named(name).ok_or_else(|| super::tool::unknown(name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentd_proto::ErrorCode;

    #[test]
    fn names_and_aliases_parse_and_others_are_unknown() {
        for tool in BuiltinTool::ALL {
            assert_eq!(tool.name().parse(), Ok(tool));
        }
        assert_eq!("spawn_subagent".parse(), Ok(BuiltinTool::SpawnAgent));
        assert_eq!("manage".parse(), Ok(BuiltinTool::Manage));
        assert!(BuiltinTool::YieldToParent.is_named("yield_to_parent"));
        let unknown = "lookup_order".parse::<BuiltinTool>().err().map(|e| e.code);
        assert_eq!(unknown, Some(ErrorCode::UnknownTool));
    }
}
