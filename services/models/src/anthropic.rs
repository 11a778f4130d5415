//! The Anthropic Messages backend: tool use, and usage in the four kinds (input, output,
//! `cache_creation_input_tokens`, `cache_read_input_tokens`). Answers are streamed (`stream:
//! true`) unless the provider says `stream = false`: text goes to the request's observer as it
//! arrives, `tool_use` blocks are assembled from their JSON deltas, and the usage of
//! `message_start` (input, cache) and `message_delta` (output) is reported as it comes, so an
//! aborted call counts what the provider said it used.

use crate::http::{HttpClient, HttpSettings, event_json};
use agentd_ports::{
    AnswerObserver, ModelCapabilities, ModelClient, ModelError, ModelRequest, ModelResponse,
};
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

/// The Messages request body for `req`, from its conversation as sent (calls paired, a
/// forward as user input, never ending with the model's own answer: `crate::sent`):
/// consecutive same-role turns are merged (the API wants them alternating), so a forward joins
/// the user's turn, never the assistant's; tool results travel as user `tool_result` blocks,
/// system entries (e.g. compaction summaries) join the system prompt; the system prompt, the
/// tools and the last block of the conversation carry [`cache_breakpoint`]s.
pub fn request_body(req: &ModelRequest, model: &str, max_tokens: u32) -> Result<Value, ModelError> {
    let mut system = req.system_prompt.to_string();
    let mut messages: Vec<(String, Vec<Value>)> = Vec::new();
    let thread = crate::sent::conversation(req)?;
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
    Ok(body)
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
    let mut usage = Usage::default();
    if let Some(u) = v.get("usage") {
        merge_usage(&mut usage, u);
    }
    Ok(ModelResponse {
        text,
        tool_calls,
        usage,
        cut_off: v.get("stop_reason").and_then(Value::as_str) == Some("max_tokens"),
        cli_run: None,
        model: v.get("model").and_then(Value::as_str).map(str::to_string),
    })
}

/// Takes the counts a `usage` object gives into `usage` (a streamed `message_delta` gives only
/// some of them; those it lacks keep their value).
fn merge_usage(usage: &mut Usage, u: &Value) {
    let n = |k: &str| u.get(k).and_then(Value::as_u64);
    let fields = [
        ("input_tokens", &mut usage.input),
        ("output_tokens", &mut usage.output),
        ("cache_creation_input_tokens", &mut usage.cache_write),
        ("cache_read_input_tokens", &mut usage.cache_read),
    ];
    for (key, field) in fields {
        if let Some(v) = n(key) {
            *field = v;
        }
    }
}

/// A content block whose deltas are arriving.
#[derive(Debug)]
enum PartialBlock {
    Text,
    ToolUse {
        id: String,
        name: String,
        input_json: String,
    },
    /// A block of a kind this backend does not use (e.g. thinking).
    Other,
}

/// A streamed message being assembled from its events.
#[derive(Debug, Default)]
pub struct MessageStream {
    text: String,
    /// By the `index` the events give.
    blocks: std::collections::BTreeMap<u64, PartialBlock>,
    usage: Usage,
    stop_reason: Option<String>,
    stopped: bool,
    /// The model `message_start` names.
    model: Option<String>,
}

impl MessageStream {
    /// Takes one event of the stream, telling `observer` what arrived; answers whether the
    /// message is over (`message_stop`).
    pub fn feed(
        &mut self,
        event: &eventsource_stream::Event,
        observer: Option<&dyn AnswerObserver>,
    ) -> Result<bool, ModelError> {
        if event.event == "ping" {
            return Ok(false);
        }
        let v = event_json(event)?;
        let bad = |what: &str| ModelError::Failed(format!("malformed message stream: {what}"));
        let kind = v
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or(&event.event);
        let index = v.get("index").and_then(Value::as_u64).unwrap_or(0);
        match kind {
            "message_start" => {
                if let Some(model) = v.pointer("/message/model").and_then(Value::as_str) {
                    self.model = Some(model.to_string());
                }
                if let Some(u) = v.pointer("/message/usage") {
                    merge_usage(&mut self.usage, u);
                    if let Some(o) = observer {
                        o.usage(self.usage);
                    }
                }
            }
            "content_block_start" => {
                let block = v
                    .get("content_block")
                    .ok_or_else(|| bad("content_block_start without a block"))?;
                let part = match block.get("type").and_then(Value::as_str) {
                    Some("text") => {
                        let text = block.get("text").and_then(Value::as_str).unwrap_or("");
                        self.push_text(text, observer);
                        PartialBlock::Text
                    }
                    Some("tool_use") => {
                        let name = block
                            .get("name")
                            .and_then(Value::as_str)
                            .ok_or_else(|| bad("tool_use without a name"))?;
                        if let Some(o) = observer {
                            o.other_output(name.len());
                        }
                        PartialBlock::ToolUse {
                            id: block
                                .get("id")
                                .and_then(Value::as_str)
                                .unwrap_or("")
                                .to_string(),
                            name: name.to_string(),
                            input_json: String::new(),
                        }
                    }
                    _ => PartialBlock::Other,
                };
                self.blocks.insert(index, part);
            }
            "content_block_delta" => {
                let delta = v
                    .get("delta")
                    .ok_or_else(|| bad("content_block_delta without a delta"))?;
                match (
                    delta.get("type").and_then(Value::as_str),
                    self.blocks.get_mut(&index),
                ) {
                    (Some("text_delta"), _) => {
                        let text = delta.get("text").and_then(Value::as_str).unwrap_or("");
                        self.push_text(text, observer);
                    }
                    (Some("input_json_delta"), Some(PartialBlock::ToolUse { input_json, .. })) => {
                        let piece = delta
                            .get("partial_json")
                            .and_then(Value::as_str)
                            .unwrap_or("");
                        input_json.push_str(piece);
                        if let Some(o) = observer {
                            o.other_output(piece.len());
                        }
                    }
                    _ => {}
                }
            }
            "message_delta" => {
                if let Some(reason) = v.pointer("/delta/stop_reason").and_then(Value::as_str) {
                    self.stop_reason = Some(reason.to_string());
                }
                if let Some(u) = v.get("usage") {
                    merge_usage(&mut self.usage, u);
                    if let Some(o) = observer {
                        o.usage(self.usage);
                    }
                }
            }
            "message_stop" => {
                self.stopped = true;
                return Ok(true);
            }
            "error" => {
                let message = v
                    .pointer("/error/message")
                    .and_then(Value::as_str)
                    .unwrap_or("no message");
                let text = format!("the provider broke off its answer: {message}");
                // Anthropic's own errors of the moment (`overloaded_error`, `api_error`) pass;
                // one about the request does not.
                return Err(match v.pointer("/error/type").and_then(Value::as_str) {
                    Some("overloaded_error" | "api_error") => ModelError::Unavailable(text),
                    _ => ModelError::Failed(text),
                });
            }
            // content_block_stop, and kinds added later.
            _ => {}
        }
        Ok(false)
    }

    fn push_text(&mut self, text: &str, observer: Option<&dyn AnswerObserver>) {
        if text.is_empty() {
            return;
        }
        self.text.push_str(text);
        if let Some(o) = observer {
            o.text(text);
        }
    }

    /// The answer, once the stream ended; a message the stream broke off before its stop is
    /// an error, not a shorter answer.
    pub fn finish(self) -> Result<ModelResponse, ModelError> {
        if !self.stopped && self.stop_reason.is_none() {
            return Err(ModelError::Unavailable(
                "the message stream ended before the answer was complete".into(),
            ));
        }
        let mut tool_calls = Vec::new();
        for block in self.blocks.into_values() {
            if let PartialBlock::ToolUse {
                id,
                name,
                input_json,
            } = block
            {
                let arguments = if input_json.trim().is_empty() {
                    json!({})
                } else {
                    serde_json::from_str(&input_json).map_err(|e| {
                        ModelError::Failed(format!(
                            "malformed message stream: input of `{name}` is not JSON: {e}"
                        ))
                    })?
                };
                tool_calls.push(ToolCall {
                    id: if id.is_empty() { "toolu".into() } else { id },
                    name,
                    arguments,
                });
            }
        }
        Ok(ModelResponse {
            text: self.text,
            tool_calls,
            usage: self.usage,
            cut_off: self.stop_reason.as_deref() == Some("max_tokens"),
            cli_run: None,
            model: self.model,
        })
    }
}

#[async_trait]
impl ModelClient for AnthropicModel {
    fn backend(&self) -> &'static str {
        "anthropic"
    }

    fn capabilities(&self) -> ModelCapabilities {
        ModelCapabilities {
            shared_rate_limit: true,
            bills_aborted_input: true,
            strict_tool_pairing: true,
            prompt_caching: true,
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
        let mut body = request_body(&req, &model, self.max_tokens)?;
        let headers = [
            ("x-api-key", self.http.api_key()),
            ("anthropic-version", "2023-06-01"),
        ];
        if !self.http.streams() {
            let v = self
                .http
                .post_json("/v1/messages", &headers, &body, &req.cancel)
                .await?;
            return parse_response(&v);
        }
        body["stream"] = json!(true);
        let mut answer = MessageStream::default();
        let observer = req.observer.as_deref();
        self.http
            .post_events("/v1/messages", &headers, &body, &req.cancel, |event| {
                answer.feed(event, observer)
            })
            .await?;
        answer.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(name: &str, data: Value) -> eventsource_stream::Event {
        eventsource_stream::Event {
            event: name.into(),
            data: data.to_string(),
            id: String::new(),
            retry: None,
        }
    }

    #[test]
    fn a_whole_message_names_the_model_that_answered() {
        let v = json!({"id": "msg_1", "type": "message", "role": "assistant",
            "model": "claude-sonnet-4-5-20250929", "stop_reason": "end_turn",
            "content": [{"type": "text", "text": "hi"}], "usage": {"input_tokens": 3}});
        let r = parse_response(&v).unwrap_or_default();
        assert_eq!(r.model.as_deref(), Some("claude-sonnet-4-5-20250929"));
        assert_eq!(r.text, "hi");
    }

    #[test]
    fn a_max_tokens_stop_is_kept_and_an_error_event_fails_the_call() {
        let mut s = MessageStream::default();
        let events = [
            event(
                "message_start",
                json!({"type": "message_start", "message": {"model": "claude-sonnet-4-5-20250929",
                    "usage": {"input_tokens": 12}}}),
            ),
            event(
                "content_block_start",
                json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": "Par"}}),
            ),
            event(
                "content_block_delta",
                json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "tial"}}),
            ),
            event(
                "message_delta",
                json!({"type": "message_delta", "delta": {"stop_reason": "max_tokens"}, "usage": {"output_tokens": 64}}),
            ),
        ];
        for e in &events {
            assert_eq!(s.feed(e, None).ok(), Some(false));
        }
        assert_eq!(
            s.feed(
                &event("message_stop", json!({"type": "message_stop"})),
                None
            )
            .ok(),
            Some(true)
        );
        let r = s.finish().unwrap_or_default();
        assert_eq!(r.text, "Partial");
        assert!(r.cut_off);
        assert_eq!((r.usage.input, r.usage.output), (12, 64));
        assert_eq!(r.model.as_deref(), Some("claude-sonnet-4-5-20250929"));

        let mut s = MessageStream::default();
        let overloaded = event(
            "error",
            json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
        );
        assert!(s.feed(&overloaded, None).is_err());
        assert!(
            MessageStream::default().finish().is_err(),
            "no stop: broken off"
        );
    }
}
