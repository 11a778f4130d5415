//! `McpTools`: the tools of the configured MCP servers, as the actors see them. The service
//! implements it with an MCP client (`services/mcp`); the actors never name the client, its
//! transports or its processes. The rules of the names come first: a server's, and the name a
//! tool is exposed under (`mcp__<server>__<tool>`), which the catalogue checks in agent types'
//! `tools` and the client checks in what a server lists.

use agentd_proto::AgentdError;
use async_trait::async_trait;
use serde::Serialize;
use serde_json::Value;
use std::sync::Arc;

/// The prefix of every exposed MCP tool name.
pub const PREFIX: &str = "mcp__";

/// The separator between a server's name and its tool's in an exposed name (a server name
/// never holds it).
pub const SEPARATOR: &str = "__";

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

/// Whether `name` is a valid MCP server name: `^[a-z0-9][a-z0-9_-]{0,31}$` without `__` (which
/// separates the server from the tool in an exposed name).
pub fn is_valid_server_name(name: &str) -> bool {
    let bytes = name.as_bytes();
    (1..=32).contains(&bytes.len())
        && bytes[0].is_ascii_lowercase() | bytes[0].is_ascii_digit()
        && bytes
            .iter()
            .all(|&b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-')
        && !name.contains("__")
}

/// One tool of an MCP server, as agents are shown it.
///
/// Invariant: `exposed` is `mcp__<server>__<tool>` and matches `^[A-Za-z0-9_-]{1,64}$` (tools
/// whose name does not fit are never listed), and `parameters` is an object schema (its
/// top-level `type` is `"object"`).
#[derive(Debug, Clone, PartialEq)]
pub struct McpToolDef {
    /// The configured server's name.
    pub server: String,
    /// The tool's name on its server (what `tools/call` names).
    pub tool: String,
    /// The name the model is shown and calls.
    pub exposed: String,
    /// The server's description of the tool.
    pub description: String,
    /// The server's input schema, normalised for the model.
    pub parameters: Value,
    /// The server's `approval` list names it: a call waits for a person's decision.
    pub needs_approval: bool,
}

/// What a tool call of an MCP server answered.
#[derive(Debug, Clone, PartialEq)]
pub struct McpCallResult {
    /// The content, in the server's order: text as it is, other kinds described.
    pub content: Vec<String>,
    /// The server's structured content, if it sent any.
    pub structured: Option<Value>,
    /// The server flagged the result as an error (`isError`): the model gets a tool error.
    pub is_error: bool,
}

/// One configured MCP server's state, for `/v1/info` (no secrets: neither its environment nor
/// its headers).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct McpServerStatus {
    /// The configured name.
    pub name: String,
    /// `stdio` or `streamable_http`.
    pub transport: &'static str,
    /// Connected and initialised now.
    pub up: bool,
    /// The exposed names of its tools agents may be shown.
    pub tools: Vec<String>,
    /// Tools it lists whose exposed name does not fit `^[A-Za-z0-9_-]{1,64}$`: never shown.
    pub skipped: Vec<String>,
    /// Tools of this server an agent type names that it does not list (calls of them get
    /// `unknown_tool`).
    pub missing: Vec<String>,
    /// Why the last connection attempt or the last connection failed, if it did.
    pub last_error: Option<String>,
}

/// The MCP servers of a process and their tools.
#[async_trait]
pub trait McpTools: Send + Sync {
    /// Changes whenever the set of tools does (a server listed its tools, or told it changed
    /// them). Tool specs built for an older version are stale.
    fn version(&self) -> u64;

    /// The configured server names.
    fn servers(&self) -> Vec<String>;

    /// Every tool of every server that is listed now, servers in name order, each server's
    /// tools in its own order.
    fn tools(&self) -> Arc<Vec<Arc<McpToolDef>>>;

    /// Each server's state.
    fn status(&self) -> Vec<McpServerStatus>;

    /// Calls `tool` with `arguments` (already checked against its schema), within the server's
    /// per-call timeout. A server that is not up is waited for within that timeout. Dropping
    /// the future cancels the call (the server is sent `notifications/cancelled`).
    ///
    /// An `Err` is a failure to get an answer (transport, timeout, a protocol error): the model
    /// gets it as a tool error, like a result with `is_error`.
    async fn call(&self, tool: &McpToolDef, arguments: Value)
    -> Result<McpCallResult, AgentdError>;
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn server_names_follow_the_rule() {
        for good in ["files", "a", "0x", "my-server_2", &"a".repeat(32)] {
            assert!(is_valid_server_name(good), "{good}");
        }
        for bad in ["", "Files", "-x", "_x", "a__b", "a.b", &"a".repeat(33)] {
            assert!(!is_valid_server_name(bad), "{bad}");
        }
    }
}
