//! [`BuiltinTool`]: the tools agentd itself provides, by name, alias and [`ToolGroup`]. What
//! each shows the model and how it runs live in `tools::builtin`, one file per tool.

use crate::ports::ToolSpec;
use agentd_proto::AgentdError;
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

    /// The spec of this tool with `description` and the JSON schema `parameters`.
    pub(crate) fn described(self, description: impl Into<String>, parameters: Value) -> ToolSpec {
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
        BuiltinTool::named(name).ok_or_else(|| unknown(name))
    }
}

/// The refusal of a name that names no tool: `unknown_tool`. (Here, with the names of the
/// tools agentd itself has, where every other file of the catalogue can name it.)
pub(crate) fn unknown(name: &str) -> AgentdError {
    AgentdError::new(
        agentd_proto::ErrorCode::UnknownTool,
        format!("no tool named `{name}`"),
    )
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
