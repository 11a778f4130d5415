//! [`Tool`]: what a call's name resolves to. Built-in tools are known when agentd is built;
//! tools whose names are known only at run time (from configuration, from MCP servers) are
//! further variants, resolved by the [`ToolCatalogue`](super::ToolCatalogue).
//!
//! What a tool shows the model and how it runs are the concern of the `tools` module, which adds
//! `spec` and `run` to these types.

use super::builtin::{BuiltinTool, ToolGroup};
use super::configured::{Approval, ConfiguredTool};
use super::mcp::McpTool;
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
            Tool::Configured(tool) => tool.approval == Approval::Always,
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
}
