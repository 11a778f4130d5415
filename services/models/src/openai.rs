//! An OpenAI-compatible chat-completions backend (OpenAI, vLLM, llama.cpp server, Ollama, …):
//! tool calling and usage parsing, cached prompt tokens counted as cache reads.

use crate::http::{HttpClient, HttpSettings};
use agentd_actors::{ModelClient, ModelError, ModelRequest, ModelResponse};
use agentd_proto::{Role, ToolCall, Usage};
use async_trait::async_trait;
use serde_json::{Value, json};

/// The OpenAI-compatible backend.
pub struct OpenAiModel {
    http: HttpClient,
    default_model: String,
}

impl OpenAiModel {
    /// A backend at `http.base_url` using `default_model` unless the agent type names one;
    /// fails only if its HTTP client cannot be set up (TLS).
    pub fn new(http: HttpSettings, default_model: String) -> Result<Self, ModelError> {
        Ok(OpenAiModel {
            http: HttpClient::new(http)?,
            default_model,
        })
    }
}

/// The chat-completions request body for `req`.
pub fn request_body(req: &ModelRequest, model: &str) -> Value {
    let mut messages = vec![json!({"role": "system", "content": &*req.system_prompt})];
    // Every call answered right after it, as the provider requires.
    let thread = agentd_proto::conversation::paired(&req.thread);
    for e in thread.iter() {
        messages.push(match e.role {
            Role::System => json!({"role": "system", "content": e.text}),
            Role::User => json!({"role": "user", "content": e.text}),
            Role::Assistant if !e.tool_calls.is_empty() => json!({
                "role": "assistant",
                "content": if e.text.is_empty() { Value::Null } else { json!(e.text) },
                "tool_calls": e.tool_calls.iter().map(|c| json!({
                    "id": c.id, "type": "function",
                    "function": {"name": c.name, "arguments": c.arguments.to_string()}
                })).collect::<Vec<_>>(),
            }),
            Role::Assistant => json!({"role": "assistant", "content": e.text}),
            Role::Tool => {
                json!({"role": "tool", "tool_call_id": e.tool_call_id, "content": e.text})
            }
        });
    }
    let mut body = json!({"model": model, "messages": messages});
    if !req.tools.is_empty() {
        body["tools"] = json!(req.tools.iter().map(|t| json!({
            "type": "function",
            "function": {"name": t.name, "description": t.description, "parameters": t.parameters}
        })).collect::<Vec<_>>());
    }
    body
}

/// Parses a chat-completions response.
pub fn parse_response(v: &Value) -> Result<ModelResponse, ModelError> {
    let bad = |what: &str| ModelError::Failed(format!("malformed chat completion: {what}"));
    let message = v
        .pointer("/choices/0/message")
        .ok_or_else(|| bad("no choices[0].message"))?;
    let text = message
        .get("content")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let mut tool_calls = Vec::new();
    for c in message
        .get("tool_calls")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let name = c
            .pointer("/function/name")
            .and_then(Value::as_str)
            .ok_or_else(|| bad("tool call without a name"))?;
        let raw = c
            .pointer("/function/arguments")
            .and_then(Value::as_str)
            .unwrap_or("{}");
        let arguments: Value = serde_json::from_str(if raw.trim().is_empty() { "{}" } else { raw })
            .map_err(|e| bad(&format!("arguments of `{name}` are not JSON: {e}")))?;
        tool_calls.push(ToolCall {
            id: c
                .get("id")
                .and_then(Value::as_str)
                .unwrap_or("call")
                .to_string(),
            name: name.to_string(),
            arguments,
        });
    }
    let n = |p: &str| v.pointer(p).and_then(Value::as_u64).unwrap_or(0);
    let cached = n("/usage/prompt_tokens_details/cached_tokens");
    let usage = Usage {
        input: n("/usage/prompt_tokens").saturating_sub(cached),
        output: n("/usage/completion_tokens"),
        cache_write: 0,
        cache_read: cached,
    };
    Ok(ModelResponse {
        text,
        tool_calls,
        usage,
        cut_off: v
            .pointer("/choices/0/finish_reason")
            .and_then(Value::as_str)
            == Some("length"),
        cli_run: None,
    })
}

#[async_trait]
impl ModelClient for OpenAiModel {
    fn backend(&self) -> &'static str {
        "openai"
    }

    async fn complete(&self, req: ModelRequest) -> Result<ModelResponse, ModelError> {
        let model = req
            .model
            .clone()
            .unwrap_or_else(|| self.default_model.clone());
        let body = request_body(&req, &model);
        let auth = format!("Bearer {}", self.http.api_key());
        let v = self
            .http
            .post_json("/chat/completions", &[("Authorization", &auth)], &body)
            .await?;
        parse_response(&v)
    }
}
