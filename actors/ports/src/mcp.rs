//! `McpTools`: the tools of the configured MCP servers, as the actors see them. The service
//! implements it with an MCP client (`services/mcp`); the actors never name the client, its
//! transports or its processes.

use agentd_proto::AgentdError;
use async_trait::async_trait;
use serde::Serialize;
use serde_json::Value;
use std::sync::Arc;

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
