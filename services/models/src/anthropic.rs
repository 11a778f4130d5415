//! The Anthropic Messages backend: tool use, and usage in the four kinds (input, output,
//! `cache_creation_input_tokens`, `cache_read_input_tokens`).

use crate::http::{HttpClient, HttpSettings};
use agentd_actors::{ModelClient, ModelError, ModelRequest, ModelResponse};
use agentd_proto::{Role, ToolCall, Usage};
use async_trait::async_trait;
use serde_json::{Value, json};

/// The Anthropic backend.
pub struct AnthropicModel {
    http: HttpClient,
    default_model: String,
    max_tokens: u32,
}

impl AnthropicModel {
    /// A backend at `http.base_url` (e.g. `https://api.anthropic.com`); fails only if its HTTP
    /// client cannot be set up (TLS).
    pub fn new(
        http: HttpSettings,
        default_model: String,
        max_tokens: u32,
    ) -> Result<Self, ModelError> {
        Ok(AnthropicModel {
            http: HttpClient::new(http)?,
            default_model,
            max_tokens,
        })
    }
}

/// Where Anthropic may cache the prompt up to (prompt caching): the end of the system prompt,
/// of the tools and of the conversation. A request reads from the cache what the agent's
/// previous request wrote (everything but the newest turn) and writes its own, so cache writes
/// and reads are real and priced by the four-kind table.
fn cache_breakpoint() -> Value {
    json!({"type": "ephemeral"})
}

/// The Messages request body for `req`: consecutive same-role turns are merged (the API wants
/// them alternating), tool results travel as user `tool_result` blocks, system entries (e.g.
/// compaction summaries) join the system prompt; the system prompt, the tools and the last
/// block of the conversation carry [`cache_breakpoint`]s.
pub fn request_body(req: &ModelRequest, model: &str, max_tokens: u32) -> Value {
    let mut system = req.system_prompt.to_string();
    let mut messages: Vec<(String, Vec<Value>)> = Vec::new();
    // Every call answered right after it, as the provider requires.
    let thread = agentd_proto::conversation::paired(&req.thread);
    for e in thread.iter() {
        let (role, blocks) = match e.role {
            Role::System => {
                system.push_str("\n\n");
                system.push_str(&e.text);
                continue;
            }
            Role::User => ("user", vec![json!({"type": "text", "text": e.text})]),
            Role::Tool => (
                "user",
                vec![if e.is_error {
                    json!({"type": "tool_result", "tool_use_id": e.tool_call_id, "content": e.text, "is_error": true})
                } else {
                    json!({"type": "tool_result", "tool_use_id": e.tool_call_id, "content": e.text})
                }],
            ),
            Role::Assistant => {
                let mut b = Vec::new();
                if !e.text.is_empty() {
                    b.push(json!({"type": "text", "text": e.text}));
                }
                for c in &e.tool_calls {
                    b.push(json!({"type": "tool_use", "id": c.id, "name": c.name, "input": c.arguments}));
                }
                if b.is_empty() {
                    continue;
                }
                ("assistant", b)
            }
        };
        match messages.last_mut() {
            Some((r, existing)) if r == role => existing.extend(blocks),
            _ => messages.push((role.to_string(), blocks)),
        }
    }
    if let Some(last) = messages
        .last_mut()
        .and_then(|(_, blocks)| blocks.last_mut())
    {
        last["cache_control"] = cache_breakpoint();
    }
    let mut body = json!({
        "model": model,
        "max_tokens": max_tokens,
        "messages": messages.into_iter().map(|(role, content)| json!({"role": role, "content": content})).collect::<Vec<_>>(),
    });
    if !system.trim().is_empty() {
        body["system"] =
            json!([{"type": "text", "text": system, "cache_control": cache_breakpoint()}]);
    }
    if !req.tools.is_empty() {
        let mut tools: Vec<Value> = req
            .tools
            .iter()
            .map(|t| {
                json!({
                    "name": t.name, "description": t.description, "input_schema": t.parameters
                })
            })
            .collect();
        if let Some(last) = tools.last_mut() {
            last["cache_control"] = cache_breakpoint();
        }
        body["tools"] = json!(tools);
    }
    body
}

/// Parses a Messages response.
pub fn parse_response(v: &Value) -> Result<ModelResponse, ModelError> {
    let content = v
        .get("content")
        .and_then(Value::as_array)
        .ok_or_else(|| ModelError::Failed("malformed message: no content array".into()))?;
    let mut text = String::new();
    let mut tool_calls = Vec::new();
    for b in content {
        match b.get("type").and_then(Value::as_str) {
            Some("text") => text.push_str(b.get("text").and_then(Value::as_str).unwrap_or("")),
            Some("tool_use") => tool_calls.push(ToolCall {
                id: b
                    .get("id")
                    .and_then(Value::as_str)
                    .unwrap_or("toolu")
                    .to_string(),
                name: b
                    .get("name")
                    .and_then(Value::as_str)
                    .ok_or_else(|| {
                        ModelError::Failed("malformed message: tool_use without a name".into())
                    })?
                    .to_string(),
                arguments: b.get("input").cloned().unwrap_or(json!({})),
            }),
            _ => {}
        }
    }
    let n = |k: &str| {
        v.pointer(&format!("/usage/{k}"))
            .and_then(Value::as_u64)
            .unwrap_or(0)
    };
    Ok(ModelResponse {
        text,
        tool_calls,
        usage: Usage {
            input: n("input_tokens"),
            output: n("output_tokens"),
            cache_write: n("cache_creation_input_tokens"),
            cache_read: n("cache_read_input_tokens"),
        },
        cut_off: v.get("stop_reason").and_then(Value::as_str) == Some("max_tokens"),
    })
}

#[async_trait]
impl ModelClient for AnthropicModel {
    fn backend(&self) -> &'static str {
        "anthropic"
    }

    async fn complete(&self, req: ModelRequest) -> Result<ModelResponse, ModelError> {
        let model = req
            .model
            .clone()
            .unwrap_or_else(|| self.default_model.clone());
        let body = request_body(&req, &model, self.max_tokens);
        let headers = [
            ("x-api-key", self.http.api_key()),
            ("anthropic-version", "2023-06-01"),
        ];
        let v = self.http.post_json("/v1/messages", &headers, &body).await?;
        parse_response(&v)
    }
}
