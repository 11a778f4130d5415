//! An OpenAI-compatible chat-completions backend (OpenAI, vLLM, llama.cpp server, Ollama, …):
//! tool calling and usage parsing, cached prompt tokens counted as cache reads. Answers are
//! streamed (`stream: true` with `stream_options.include_usage`, so the last chunk carries the
//! usage) unless the provider says `stream = false`: text goes to the request's observer as it
//! arrives, tool calls are assembled from their deltas.

use crate::http::{HttpClient, HttpSettings};
use agentd_ports::{
    AnswerObserver, ModelCapabilities, ModelClient, ModelError, ModelRequest, ModelResponse,
};
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

/// The chat-completions request body for `req`: its conversation as sent (calls paired, a
/// forward as user input, never ending with the model's own answer: `crate::sent`).
pub fn request_body(req: &ModelRequest, model: &str) -> Result<Value, ModelError> {
    let mut messages = vec![json!({"role": "system", "content": &*req.system_prompt})];
    let thread = crate::sent::conversation(req)?;
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
    Ok(body)
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
    Ok(ModelResponse {
        text,
        tool_calls,
        usage: v.get("usage").map(parse_usage).unwrap_or_default(),
        cut_off: v
            .pointer("/choices/0/finish_reason")
            .and_then(Value::as_str)
            == Some("length"),
        cli_run: None,
        model: v.get("model").and_then(Value::as_str).map(str::to_string),
    })
}

/// A chat-completions `usage` object in the four kinds.
fn parse_usage(u: &Value) -> Usage {
    let n = |p: &str| u.pointer(p).and_then(Value::as_u64).unwrap_or(0);
    let cached = n("/prompt_tokens_details/cached_tokens");
    Usage {
        input: n("/prompt_tokens").saturating_sub(cached),
        output: n("/completion_tokens"),
        cache_read: cached,
        ..Usage::default()
    }
}

/// A tool call whose deltas are arriving.
#[derive(Debug, Default)]
struct PartialCall {
    id: String,
    name: String,
    arguments: String,
}

/// A streamed chat completion being assembled from its chunks.
#[derive(Debug, Default)]
pub struct ChatStream {
    text: String,
    /// By the `index` the deltas give.
    calls: std::collections::BTreeMap<u64, PartialCall>,
    usage: Option<Usage>,
    finish_reason: Option<String>,
    done: bool,
    /// The model the chunks name (each names it; the first is kept).
    model: Option<String>,
}

impl ChatStream {
    /// Takes one event of the stream, telling `observer` what arrived; answers whether the
    /// stream is over (`[DONE]`).
    pub fn feed(
        &mut self,
        data: &str,
        observer: Option<&dyn AnswerObserver>,
    ) -> Result<bool, ModelError> {
        if data.trim() == "[DONE]" {
            self.done = true;
            return Ok(true);
        }
        let chunk: Value = serde_json::from_str(data)
            .map_err(|e| ModelError::Failed(format!("malformed chat completion chunk: {e}")))?;
        if let Some(message) = chunk.pointer("/error/message").and_then(Value::as_str) {
            // An error in the middle of an answer the provider had accepted is its own.
            return Err(ModelError::Unavailable(format!(
                "the provider broke off its answer: {message}"
            )));
        }
        if self.model.is_none()
            && let Some(model) = chunk.get("model").and_then(Value::as_str)
        {
            self.model = Some(model.to_string());
        }
        if let Some(u) = chunk.get("usage").filter(|u| u.is_object()) {
            let usage = parse_usage(u);
            self.usage = Some(usage);
            if let Some(o) = observer {
                o.usage(usage);
            }
        }
        let Some(choice) = chunk.pointer("/choices/0") else {
            return Ok(false);
        };
        if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
            self.finish_reason = Some(reason.to_string());
        }
        let Some(delta) = choice.get("delta") else {
            return Ok(false);
        };
        if let Some(text) = delta.get("content").and_then(Value::as_str)
            && !text.is_empty()
        {
            self.text.push_str(text);
            if let Some(o) = observer {
                o.text(text);
            }
        }
        for (position, c) in delta
            .get("tool_calls")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
        {
            let index = c
                .get("index")
                .and_then(Value::as_u64)
                .unwrap_or(position as u64);
            let call = self.calls.entry(index).or_default();
            let piece = |p: &str| c.pointer(p).and_then(Value::as_str).unwrap_or("");
            if call.id.is_empty() {
                call.id = piece("/id").to_string();
            }
            let name = piece("/function/name");
            let arguments = piece("/function/arguments");
            call.name.push_str(name);
            call.arguments.push_str(arguments);
            if let Some(o) = observer {
                o.other_output(name.len() + arguments.len());
            }
        }
        Ok(false)
    }

    /// The answer, once the stream ended; an answer the stream broke off before its finish
    /// reason is an error, not a shorter answer.
    pub fn finish(self) -> Result<ModelResponse, ModelError> {
        let Some(reason) = self.finish_reason else {
            return Err(ModelError::Unavailable(
                "the chat completion stream ended before the answer was complete".into(),
            ));
        };
        let mut tool_calls = Vec::with_capacity(self.calls.len());
        for (index, call) in self.calls {
            if call.name.is_empty() {
                return Err(ModelError::Failed(format!(
                    "malformed chat completion: streamed tool call {index} without a name"
                )));
            }
            let raw = if call.arguments.trim().is_empty() {
                "{}"
            } else {
                call.arguments.as_str()
            };
            let arguments: Value = serde_json::from_str(raw).map_err(|e| {
                ModelError::Failed(format!(
                    "malformed chat completion: arguments of `{}` are not JSON: {e}",
                    call.name
                ))
            })?;
            tool_calls.push(ToolCall {
                id: if call.id.is_empty() {
                    format!("call_{index}")
                } else {
                    call.id
                },
                name: call.name,
                arguments,
            });
        }
        Ok(ModelResponse {
            text: self.text,
            tool_calls,
            usage: self.usage.unwrap_or_default(),
            cut_off: reason == "length",
            cli_run: None,
            model: self.model,
        })
    }
}

#[async_trait]
impl ModelClient for OpenAiModel {
    fn backend(&self) -> &'static str {
        "openai"
    }

    fn capabilities(&self) -> ModelCapabilities {
        ModelCapabilities {
            shared_rate_limit: true,
            bills_aborted_input: true,
            strict_tool_pairing: true,
            // OpenAI caches long prompts by itself; a request asks nothing of it.
            prompt_caching: false,
            streams: self.http.streams(),
        }
    }

    fn default_model_of(&self, _provider: Option<&str>) -> Option<&str> {
        Some(&self.default_model)
            .filter(|m| !m.is_empty())
            .map(String::as_str)
    }

    async fn complete(&self, req: ModelRequest) -> Result<ModelResponse, ModelError> {
        let model = req
            .model
            .clone()
            .unwrap_or_else(|| self.default_model.clone());
        let mut body = request_body(&req, &model)?;
        let auth = format!("Bearer {}", self.http.api_key());
        let headers = [("Authorization", auth.as_str())];
        if !self.http.streams() {
            let v = self
                .http
                .post_json("/chat/completions", &headers, &body, &req.cancel)
                .await?;
            return parse_response(&v);
        }
        body["stream"] = json!(true);
        body["stream_options"] = json!({"include_usage": true});
        let mut answer = ChatStream::default();
        let observer = req.observer.as_deref();
        self.http
            .post_events("/chat/completions", &headers, &body, &req.cancel, |event| {
                answer.feed(&event.data, observer)
            })
            .await?;
        answer.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streamed_chunks_assemble_text_calls_by_index_and_usage() {
        let mut s = ChatStream::default();
        let chunks = [
            json!({"model": "gpt-4o-2024-08-06",
                   "choices": [{"index": 0, "delta": {"role": "assistant", "content": "Hi "}}]}),
            json!({"choices": [{"index": 0, "delta": {"content": "there", "tool_calls": [
                {"index": 1, "id": "call_b", "function": {"name": "second", "arguments": ""}},
                {"index": 0, "id": "call_a", "function": {"name": "first", "arguments": "{\"x\""}}
            ]}}]}),
            json!({"choices": [{"index": 0, "delta": {"tool_calls": [
                {"index": 0, "function": {"arguments": ": 1}"}}
            ]}, "finish_reason": "tool_calls"}]}),
            json!({"choices": [], "usage": {"prompt_tokens": 30, "completion_tokens": 9,
                "prompt_tokens_details": {"cached_tokens": 10}}}),
        ];
        for c in &chunks {
            assert_eq!(s.feed(&c.to_string(), None).ok(), Some(false));
        }
        assert_eq!(s.feed("[DONE]", None).ok(), Some(true));
        let r = s.finish().unwrap_or_default();
        assert_eq!(r.text, "Hi there");
        let calls: Vec<(&str, &str, Value)> = r
            .tool_calls
            .iter()
            .map(|c| (c.id.as_str(), c.name.as_str(), c.arguments.clone()))
            .collect();
        assert_eq!(
            calls,
            vec![
                ("call_a", "first", json!({"x": 1})),
                ("call_b", "second", json!({}))
            ]
        );
        assert_eq!(
            (r.usage.input, r.usage.cache_read, r.usage.output),
            (20, 10, 9)
        );
        assert!(!r.cut_off);
        assert_eq!(r.model.as_deref(), Some("gpt-4o-2024-08-06"));
    }

    #[test]
    fn a_whole_completion_names_the_model_that_answered() {
        let v = json!({"model": "gpt-4o-2024-08-06", "choices": [{"index": 0,
            "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}]});
        let r = parse_response(&v).unwrap_or_default();
        assert_eq!(r.model.as_deref(), Some("gpt-4o-2024-08-06"));
        assert_eq!(r.text, "hi");
    }

    #[test]
    fn a_stream_without_its_finish_or_with_an_error_is_not_an_answer() {
        let mut s = ChatStream::default();
        let chunk = json!({"choices": [{"index": 0, "delta": {"content": "half"}}]});
        assert!(s.feed(&chunk.to_string(), None).is_ok());
        assert!(s.finish().is_err(), "broken off before its finish_reason");
        let mut s = ChatStream::default();
        let error = json!({"error": {"message": "overloaded"}});
        assert!(s.feed(&error.to_string(), None).is_err());
    }
}
