//! [`McpTool`]: a tool of a configured MCP server, exposed as `mcp__<server>__<tool>`; its
//! spec is the server's (its run: `tools::mcp`; the rules of the names: `agentd_ports::mcp`).

use crate::ports::{McpToolDef, ToolSpec};
use std::hash::{Hash, Hasher};
use std::sync::Arc;

/// A tool of an MCP server. Two are equal when they have the same exposed name: the catalogue
/// version tells an old definition from a new one.
#[derive(Debug, Clone)]
pub struct McpTool(pub(crate) Arc<McpToolDef>);

impl PartialEq for McpTool {
    fn eq(&self, other: &Self) -> bool {
        self.0.exposed == other.0.exposed
    }
}

impl Eq for McpTool {}

impl Hash for McpTool {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.0.exposed.hash(state);
    }
}

impl McpTool {
    /// The name the model is shown and calls.
    pub fn name(&self) -> &str {
        &self.0.exposed
    }

    /// The server it belongs to.
    pub fn server(&self) -> &str {
        &self.0.server
    }

    /// Whether its server's `approval` list names it.
    pub fn needs_approval(&self) -> bool {
        self.0.needs_approval
    }

    /// The spec the model is shown: the server's description and input schema.
    pub fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: self.0.exposed.clone(),
            description: self.0.description.clone(),
            parameters: self.0.parameters.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalogue::{BuiltinTool, Tool};
    use serde_json::json;

    fn def(needs_approval: bool) -> Arc<McpToolDef> {
        Arc::new(McpToolDef {
            server: "files".into(),
            tool: "write_file".into(),
            exposed: "mcp__files__write_file".into(),
            description: String::new(),
            parameters: json!({"type": "object", "properties": {}}),
            needs_approval,
        })
    }

    #[test]
    fn a_tool_its_server_lists_under_approval_needs_approval() {
        assert!(Tool::Mcp(McpTool(def(true))).needs_approval());
        assert!(!Tool::Mcp(McpTool(def(false))).needs_approval());
        assert!(!Tool::Builtin(BuiltinTool::CurrentTime).needs_approval());
        assert_eq!(Tool::Mcp(McpTool(def(true))).mcp_server(), Some("files"));
    }
}
