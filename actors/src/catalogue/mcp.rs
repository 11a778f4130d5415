//! [`McpTool`]: a tool of a configured MCP server, exposed as `mcp__<server>__<tool>`; its
//! spec is the server's (its run: `tools::mcp`).

use crate::ports::{McpToolDef, ToolSpec};
use std::hash::{Hash, Hasher};
use std::sync::Arc;

/// The prefix of every exposed MCP tool name.
pub const PREFIX: &str = "mcp__";

/// The separator between a server's name and its tool's in an exposed name (a server name
/// never holds it).
pub const SEPARATOR: &str = "__";

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

/// `(server, tool)` of an exposed name `mcp__<server>__<tool>`, if it is one (`tool` may be
/// `*`, a whole server in a type's `tools`).
pub fn split_exposed(name: &str) -> Option<(&str, &str)> {
    let rest = name.strip_prefix(PREFIX)?;
    let (server, tool) = rest.split_once(SEPARATOR)?;
    (!server.is_empty() && !tool.is_empty()).then_some((server, tool))
}

/// Whether `name` fits what the providers take as a tool name: `^[A-Za-z0-9_-]{1,64}$`.
pub fn is_valid_exposed_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
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

    #[test]
    fn exposed_names_split_into_server_and_tool() {
        assert_eq!(
            split_exposed("mcp__files__read_text_file"),
            Some(("files", "read_text_file"))
        );
        assert_eq!(split_exposed("mcp__files__*"), Some(("files", "*")));
        assert_eq!(split_exposed("mcp__a__b__c"), Some(("a", "b__c")));
        assert_eq!(split_exposed("mcp__files"), None);
        assert_eq!(split_exposed("current_time"), None);
    }

    #[test]
    fn exposed_names_must_fit_the_providers_rule() {
        assert!(is_valid_exposed_name("mcp__everything__get-sum"));
        assert!(!is_valid_exposed_name("mcp__x__a.b"));
        assert!(!is_valid_exposed_name(&format!(
            "mcp__x__{}",
            "a".repeat(60)
        )));
        assert!(!is_valid_exposed_name(""));
    }
}
