//! [`Tool`]: what a call's name resolves to. Built-in tools are known when agentd is built;
//! tools whose names are known only at run time (from configuration, from MCP servers) are
//! further variants, resolved by the [`ToolCatalogue`](super::ToolCatalogue).

use super::builtin::{BuiltinTool, ToolGroup};
use super::mcp::McpTool;
use super::{ToolContext, ToolOutcome};
use crate::deps::Deps;
use crate::ports::ToolSpec;
use agentd_proto::{AgentRecord, AgentdError, ErrorCode};
use serde_json::Value;

/// A tool agents can be shown and call. Not `Copy`: tools known at run time carry their
/// definition.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Tool {
    /// A tool agentd provides.
    Builtin(BuiltinTool),
    /// A tool of a configured MCP server (`mcp__<server>__<tool>`).
    Mcp(McpTool),
}

impl Tool {
    /// The name the model is shown and calls.
    pub fn name(&self) -> &str {
        match self {
            Tool::Builtin(tool) => tool.name(),
            Tool::Mcp(tool) => tool.name(),
        }
    }

    /// Who may see and call it.
    pub fn group(&self) -> ToolGroup {
        match self {
            Tool::Builtin(tool) => tool.group(),
            Tool::Mcp(_) => ToolGroup::Regular,
        }
    }

    /// Whether a call must wait for a person's approval before it runs: for an MCP tool, its
    /// server's `approval` list names it. Built-in tools never wait.
    pub fn needs_approval(&self) -> bool {
        match self {
            Tool::Builtin(_) => false,
            Tool::Mcp(tool) => tool.needs_approval(),
        }
    }

    /// The MCP server it belongs to, if it is an MCP tool.
    pub fn mcp_server(&self) -> Option<&str> {
        match self {
            Tool::Mcp(tool) => Some(tool.server()),
            Tool::Builtin(_) => None,
        }
    }

    /// The spec `rec` is shown.
    pub fn spec(&self, rec: &AgentRecord, deps: &Deps) -> ToolSpec {
        match self {
            Tool::Builtin(tool) => tool.spec(rec, deps),
            Tool::Mcp(tool) => tool.spec(),
        }
    }

    /// Runs the tool for `ctx.caller` on arguments that fit its spec.
    pub(crate) async fn run(
        &self,
        ctx: &ToolContext,
        args: &Value,
    ) -> Result<ToolOutcome, AgentdError> {
        match self {
            Tool::Builtin(tool) => tool.run(ctx, args).await,
            Tool::Mcp(tool) => tool.run(ctx, args).await.map(ToolOutcome::Value),
        }
    }
}

/// The refusal of a name that names no tool: `unknown_tool`.
pub(crate) fn unknown(name: &str) -> AgentdError {
    AgentdError::new(ErrorCode::UnknownTool, format!("no tool named `{name}`"))
}
