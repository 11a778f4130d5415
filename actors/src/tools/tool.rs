//! [`Tool`]: what a call's name resolves to. Built-in tools are known when agentd is built;
//! tools whose names are known only at run time (from configuration, from MCP servers) are
//! further variants, resolved by the [`ToolCatalogue`](super::ToolCatalogue).

use super::builtin::{BuiltinTool, ToolGroup};
use super::configured::ConfiguredTool;
use super::mcp::McpTool;
use super::{ToolContext, ToolOutcome};
use crate::deps::Deps;
use crate::ports::ToolSpec;
use agentd_proto::{AgentRecord, AgentdError, ErrorCode};
use serde_json::Value;
use std::sync::Arc;

/// A tool agents can be shown and call. Not `Copy`: tools known at run time carry their
/// definition.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Tool {
    /// A tool agentd provides.
    Builtin(BuiltinTool),
    /// A tool of a configured MCP server (`mcp__<server>__<tool>`).
    Mcp(McpTool),
    /// A tool of `[tools.<name>]`: a service's or a webhook's.
    Configured(Arc<ConfiguredTool>),
}

impl Tool {
    /// The name the model is shown and calls.
    pub fn name(&self) -> &str {
        match self {
            Tool::Builtin(tool) => tool.name(),
            Tool::Mcp(tool) => tool.name(),
            Tool::Configured(tool) => &tool.name,
        }
    }

    /// Who may see and call it.
    pub fn group(&self) -> ToolGroup {
        match self {
            Tool::Builtin(tool) => tool.group(),
            // Agents whose type lists it.
            Tool::Mcp(_) | Tool::Configured(_) => ToolGroup::Regular,
        }
    }

    /// Whether a call must wait for a person's approval before it runs: an MCP tool its
    /// server's `approval` list names, a configured tool with `approval = "always"`. Built-in
    /// tools never wait.
    pub fn needs_approval(&self) -> bool {
        match self {
            Tool::Builtin(_) => false,
            Tool::Mcp(tool) => tool.needs_approval(),
            Tool::Configured(tool) => tool.approval == super::Approval::Always,
        }
    }

    /// The MCP server it belongs to, if it is an MCP tool.
    pub fn mcp_server(&self) -> Option<&str> {
        match self {
            Tool::Mcp(tool) => Some(tool.server()),
            Tool::Builtin(_) | Tool::Configured(_) => None,
        }
    }

    /// The configured tool this is, if it is one.
    pub fn configured(&self) -> Option<&Arc<ConfiguredTool>> {
        match self {
            Tool::Configured(tool) => Some(tool),
            Tool::Builtin(_) | Tool::Mcp(_) => None,
        }
    }

    /// The spec `rec` is shown.
    pub fn spec(&self, rec: &AgentRecord, deps: &Deps) -> ToolSpec {
        match self {
            Tool::Builtin(tool) => tool.spec(rec, deps),
            Tool::Mcp(tool) => tool.spec(),
            Tool::Configured(tool) => tool.spec(),
        }
    }

    /// Runs the tool for `ctx.caller` on arguments that fit its spec.
    /// `call_id` is agentd's id of the call (a webhook's `X-Agentd-Call-Id`).
    pub(crate) async fn run(
        &self,
        ctx: &ToolContext,
        call_id: uuid::Uuid,
        args: &Value,
    ) -> Result<ToolOutcome, AgentdError> {
        match self {
            Tool::Builtin(tool) => tool.run(ctx, args).await,
            Tool::Mcp(tool) => tool.run(ctx, args).await.map(ToolOutcome::Value),
            Tool::Configured(tool) => tool.run(ctx, call_id, args).await,
        }
    }
}

/// The refusal of a name that names no tool: `unknown_tool`.
pub(crate) fn unknown(name: &str) -> AgentdError {
    AgentdError::new(ErrorCode::UnknownTool, format!("no tool named `{name}`"))
}
