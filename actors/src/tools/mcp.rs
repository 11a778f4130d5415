//! How an [`McpTool`] runs: a call through the [`McpTools`](crate::ports::McpTools) port, its
//! result what the server answered, cut to `limits.tool_result_max_bytes`.

use super::ToolContext;
use crate::catalogue::McpTool;
use crate::ports::McpCallResult;
use agentd_proto::{AgentdError, ErrorCode};
use serde_json::{Value, json};

impl McpTool {
    /// Calls the tool on its server. A result the server flags as an error, and a failure to
    /// get one, are `tool_failed`s: the model reads them as the call's result.
    pub(crate) async fn run(&self, ctx: &ToolContext, args: &Value) -> Result<Value, AgentdError> {
        let Some(host) = ctx.deps.tools.mcp() else {
            return Err(crate::catalogue::unknown(self.name()));
        };
        let max = ctx.deps.config.limits.tool_result_max_bytes;
        let result = host.call(&self.0, args.clone()).await?;
        if result.is_error {
            return Err(AgentdError::new(
                ErrorCode::ToolFailed,
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
