//! [`McpTool`]: a tool of a configured MCP server, exposed as `mcp__<server>__<tool>`; its
//! spec is the server's, its run a call through the [`McpTools`](crate::ports::McpTools) port,
//! and its result what the server answered, cut to `limits.tool_result_max_bytes`.

use super::ToolContext;
use crate::ports::{McpCallResult, McpToolDef, ToolSpec};
use agentd_proto::{AgentdError, ErrorCode};
use serde_json::{Value, json};
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

    /// Calls the tool on its server. A result the server flags as an error, and a failure to
    /// get one, are `tool_error`s: the model reads them as the call's result.
    pub(crate) async fn run(&self, ctx: &ToolContext, args: &Value) -> Result<Value, AgentdError> {
        let Some(host) = ctx.system.deps.config.tools.mcp() else {
            return Err(super::tool::unknown(self.name()));
        };
        let max = ctx.system.deps.config.limits.tool_result_max_bytes;
        let result = host.call(&self.0, args.clone()).await?;
        if result.is_error {
            return Err(AgentdError::new(
                ErrorCode::ToolError,
                capped(&result.content.join("\n"), max),
            ));
        }
        Ok(result_value(result, max))
    }
}

/// What the model reads of a result: its text when it is only text, otherwise `{content,
/// structured_content}`; cut to `max` bytes.
fn result_value(result: McpCallResult, max: usize) -> Value {
    let text = result.content.join("\n");
    let whole = match result.structured {
        None => Value::String(text),
        Some(structured) => json!({"content": text, "structured_content": structured}),
    };
    let size = match &whole {
        Value::String(s) => s.len(),
        other => other.to_string().len(),
    };
    if size <= max {
        return whole;
    }
    let flat = match whole {
        Value::String(s) => s,
        other => other.to_string(),
    };
    Value::String(capped(&flat, max))
}

/// `text` cut to at most `max` bytes at a character boundary, saying how much was cut.
fn capped(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!(
        "{}\n[… {} more bytes cut: the result is larger than limits.tool_result_max_bytes]",
        &text[..end],
        text.len() - end
    )
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
    fn results_keep_text_and_structured_content_and_are_capped() {
        let plain = McpCallResult {
            content: vec!["hello".into(), "[image: image/png, 12 bytes]".into()],
            structured: None,
            is_error: false,
        };
        assert_eq!(
            result_value(plain, 100),
            json!("hello\n[image: image/png, 12 bytes]")
        );
        let structured = McpCallResult {
            content: vec!["{\"t\":1}".into()],
            structured: Some(json!({"t": 1})),
            is_error: false,
        };
        assert_eq!(
            result_value(structured, 100),
            json!({"content": "{\"t\":1}", "structured_content": {"t": 1}})
        );
        let long = McpCallResult {
            content: vec!["é".repeat(10)],
            structured: None,
            is_error: false,
        };
        let cut = result_value(long, 5);
        let cut = cut.as_str().unwrap_or_default();
        assert!(cut.starts_with("éé\n[… 16 more bytes cut"), "{cut}");
    }
}
