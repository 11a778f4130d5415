//! A stand-in model provider on a free loopback port that enforces what the real APIs document
//! about tool calls, so that a request the real provider would refuse is refused here too:
//!
//! - OpenAI chat completions (`POST /chat/completions`): "An assistant message with
//!   'tool_calls' must be followed by tool messages responding to each 'tool_call_id'", and a
//!   message with role `tool` must answer a call of the assistant message before it.
//! - Anthropic Messages (`POST /v1/messages`): roles alternate, starting with `user`; each
//!   `tool_use` block needs a `tool_result` block, at the start of the next (user) message; a
//!   `tool_result` must answer a `tool_use` of the message before it.
//! - Both: the conversation ends with input for the model to answer, not with an assistant
//!   message. Anthropic takes a final assistant message as a prefill (the model continues it as
//!   its own words) and models without prefill refuse it with this error; an OpenAI model
//!   answers after two assistant messages in a row as if it had said both. Either way a
//!   request ending so puts the last text in the model's own voice.
//!
//! A refused request gets the provider's `400` with its error shape, and is kept in
//! [`StrictProvider::violations`]. An accepted one is answered by the test's responder, which
//! may take its time (each connection has its own thread, so a slow answer holds no other) until
//! the provider is released ([`StrictProvider::release`], or dropped): a test's system cannot
//! stop while one of its model calls waits.

use agentd_actors::ModelClient;
use agentd_models::{AnthropicModel, HttpSettings, OpenAiModel};
use serde_json::{Value, json};
use std::collections::HashSet;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Which API a request speaks, from its path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// OpenAI chat completions.
    OpenAi,
    /// Anthropic Messages.
    Anthropic,
}

/// What the responder answers an accepted request with.
pub struct Answer {
    /// Wait this long first.
    pub delay: Duration,
    /// The `200` JSON body.
    pub body: Value,
}

impl Dialect {
    /// A final answer (no tool call) with `text`, in this dialect's response shape.
    pub fn text_answer(self, text: &str) -> Value {
        match self {
            Dialect::OpenAi => json!({
                "choices": [{"message": {"role": "assistant", "content": text}}],
                "usage": {"prompt_tokens": 10, "completion_tokens": 2}
            }),
            Dialect::Anthropic => json!({
                "content": [{"type": "text", "text": text}],
                "usage": {"input_tokens": 10, "output_tokens": 2}
            }),
        }
    }
}

impl Answer {
    /// An answer at once.
    pub fn now(body: Value) -> Answer {
        Answer {
            delay: Duration::ZERO,
            body,
        }
    }
}

type Responder = dyn Fn(Dialect, &Value) -> Answer + Send + Sync;

/// The server.
pub struct StrictProvider {
    /// Base URL (the OpenAI backend's `base_url`; the Anthropic backend adds `/v1/messages`).
    pub url: String,
    accepted: Arc<Mutex<Vec<Value>>>,
    violations: Arc<Mutex<Vec<String>>>,
    released: Arc<AtomicBool>,
    hung_up: Arc<std::sync::atomic::AtomicUsize>,
}

impl Drop for StrictProvider {
    fn drop(&mut self) {
        self.release();
    }
}

impl StrictProvider {
    /// Serves requests with `respond` once they pass the dialect's rules.
    pub fn start(respond: impl Fn(Dialect, &Value) -> Answer + Send + Sync + 'static) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind loopback");
        let url = format!("http://{}", listener.local_addr().expect("addr"));
        let accepted = Arc::new(Mutex::new(Vec::new()));
        let violations = Arc::new(Mutex::new(Vec::new()));
        let released = Arc::new(AtomicBool::new(false));
        let hung_up = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let respond: Arc<Responder> = Arc::new(respond);
        let shared = Shared {
            accepted: accepted.clone(),
            violations: violations.clone(),
            released: released.clone(),
            hung_up: hung_up.clone(),
        };
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { return };
                let (respond, shared) = (respond.clone(), shared.clone());
                std::thread::spawn(move || serve(stream, &*respond, &shared));
            }
        });
        StrictProvider {
            url,
            accepted,
            violations,
            released,
            hung_up,
        }
    }

    /// How many clients hung up while their answer was delayed (a call aborted in flight).
    pub fn hung_up(&self) -> usize {
        self.hung_up.load(Ordering::SeqCst)
    }

    /// Answers waiting requests now, and every later one without its delay.
    pub fn release(&self) {
        self.released.store(true, Ordering::SeqCst);
    }

    /// The request bodies accepted so far.
    pub fn accepted(&self) -> Vec<Value> {
        self.accepted.lock().expect("lock").clone()
    }

    /// Why requests were refused so far.
    pub fn violations(&self) -> Vec<String> {
        self.violations.lock().expect("lock").clone()
    }

    /// The HTTP backend of `dialect` on this provider (no streaming, no retries), whose calls
    /// give up after `timeout`.
    pub fn model(&self, dialect: Dialect, timeout: Duration) -> Arc<dyn ModelClient> {
        let http = HttpSettings {
            base_url: self.url.clone(),
            api_key: "test-key".into(),
            timeout,
            stream: false,
            idle_timeout: timeout,
            max_retries: 0,
            backoff: Duration::from_millis(5),
        };
        match dialect {
            Dialect::OpenAi => Arc::new(OpenAiModel::new(http, "gpt-test".into()).expect("model")),
            Dialect::Anthropic => {
                Arc::new(AnthropicModel::new(http, "claude-test".into(), 512).expect("model"))
            }
        }
    }
}

/// The last text of a request's message: its content if a string, else its last text block
/// (Anthropic merges a user message into the one before it; the Claude Code CLI puts
/// reminders before the newest input).
pub fn last_text_of(message: &Value) -> String {
    match &message["content"] {
        Value::String(s) => s.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .rev()
            .find_map(|b| b["text"].as_str())
            .unwrap_or("")
            .to_string(),
        _ => String::new(),
    }
}

/// What the connection threads share with the provider.
#[derive(Clone)]
struct Shared {
    accepted: Arc<Mutex<Vec<Value>>>,
    violations: Arc<Mutex<Vec<String>>>,
    released: Arc<AtomicBool>,
    hung_up: Arc<std::sync::atomic::AtomicUsize>,
}

/// Whether the client closed `stream` (a peek finds its end).
fn closed(stream: &std::net::TcpStream) -> bool {
    if stream.set_nonblocking(true).is_err() {
        return false;
    }
    let ended = matches!(stream.peek(&mut [0u8; 1]), Ok(0));
    let _ = stream.set_nonblocking(false);
    ended
}

fn serve(stream: std::net::TcpStream, respond: &Responder, shared: &Shared) {
    let Ok(mut out) = stream.try_clone() else {
        return;
    };
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    if reader.read_line(&mut line).is_err() {
        return;
    }
    let path = line.split_whitespace().nth(1).unwrap_or("/").to_string();
    let mut len = 0;
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h).is_err() || h.trim().is_empty() {
            break;
        }
        if let Some((k, v)) = h.trim().split_once(':')
            && k.trim().eq_ignore_ascii_case("content-length")
        {
            len = v.trim().parse().unwrap_or(0);
        }
    }
    let mut body = vec![0; len];
    if reader.read_exact(&mut body).is_err() {
        return;
    }
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let dialect = if path.ends_with("/messages") {
        Dialect::Anthropic
    } else {
        Dialect::OpenAi
    };
    let checked = match dialect {
        Dialect::OpenAi => check_openai(&body),
        Dialect::Anthropic => check_anthropic(&body),
    }
    .and_then(|()| check_ends_with_input(&body));
    let (status, reply) = match checked {
        Ok(()) => {
            shared.accepted.lock().expect("lock").push(body.clone());
            let answer = respond(dialect, &body);
            let until = Instant::now() + answer.delay;
            while Instant::now() < until && !shared.released.load(Ordering::SeqCst) {
                if closed(&out) {
                    shared.hung_up.fetch_add(1, Ordering::SeqCst);
                    return;
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            (200, answer.body)
        }
        Err(why) => {
            shared.violations.lock().expect("lock").push(why.clone());
            let error = match dialect {
                Dialect::OpenAi => json!({"error": {
                    "message": why, "type": "invalid_request_error", "param": "messages", "code": null
                }}),
                Dialect::Anthropic => json!({"type": "error", "error": {
                    "type": "invalid_request_error", "message": why
                }}),
            };
            (400, error)
        }
    };
    let text = reply.to_string();
    let head = format!(
        "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        text.len()
    );
    let _ = out.write_all(head.as_bytes());
    let _ = out.write_all(text.as_bytes());
}

/// The rule both dialects share here: the last message is not the assistant's.
fn check_ends_with_input(body: &Value) -> Result<(), String> {
    let last = body["messages"].as_array().and_then(|m| m.last());
    if last.is_some_and(|m| m["role"] == "assistant") {
        return Err(
            "This model does not support assistant message prefill. The conversation must end with a user message.".into(),
        );
    }
    Ok(())
}

/// OpenAI's rules on `messages`.
fn check_openai(body: &Value) -> Result<(), String> {
    let messages = body["messages"].as_array().ok_or("no messages")?;
    // The calls of the latest assistant message not answered yet; `None` once a message other
    // than a tool message followed it.
    let mut open: Option<Vec<String>> = None;
    for (i, m) in messages.iter().enumerate() {
        let role = m["role"].as_str().unwrap_or("");
        if role == "tool" {
            let id = m["tool_call_id"].as_str().unwrap_or("");
            let answered = open
                .as_mut()
                .and_then(|ids| ids.iter().position(|c| c == id).map(|k| ids.remove(k)));
            if answered.is_none() {
                return Err(format!(
                    "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls' (messages[{i}], tool_call_id `{id}`)."
                ));
            }
            continue;
        }
        if let Some(ids) = open.take()
            && !ids.is_empty()
        {
            return Err(unanswered_openai(&ids));
        }
        if role == "assistant"
            && let Some(calls) = m["tool_calls"].as_array()
        {
            open = Some(
                calls
                    .iter()
                    .map(|c| c["id"].as_str().unwrap_or("").to_string())
                    .collect(),
            );
        }
    }
    match open {
        Some(ids) if !ids.is_empty() => Err(unanswered_openai(&ids)),
        _ => Ok(()),
    }
}

fn unanswered_openai(ids: &[String]) -> String {
    format!(
        "An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: {}",
        ids.join(", ")
    )
}

/// Anthropic's rules on `messages`.
fn check_anthropic(body: &Value) -> Result<(), String> {
    let messages = body["messages"].as_array().ok_or("no messages")?;
    let mut uses: HashSet<String> = HashSet::new();
    let mut expected_role = "user";
    for (i, m) in messages.iter().enumerate() {
        let role = m["role"].as_str().unwrap_or("");
        if role != expected_role {
            return Err(format!(
                "messages: roles must alternate between \"user\" and \"assistant\", starting with \"user\" (messages[{i}] is \"{role}\")"
            ));
        }
        let blocks: Vec<Value> = match &m["content"] {
            Value::Array(b) => b.clone(),
            Value::String(s) => vec![json!({"type": "text", "text": s})],
            _ => vec![],
        };
        if role == "user" {
            // tool_result blocks come first and answer exactly the previous message's uses.
            let mut results = HashSet::new();
            let mut seen_other = false;
            for b in &blocks {
                if b["type"] == "tool_result" {
                    let id = b["tool_use_id"].as_str().unwrap_or("").to_string();
                    if seen_other {
                        return Err(format!(
                            "messages.{i}: tool_result blocks must come before any other content"
                        ));
                    }
                    if !uses.contains(&id) {
                        return Err(format!(
                            "messages.{i}.content: unexpected `tool_use_id` found in `tool_result` blocks: {id}. Each `tool_result` block must have a corresponding `tool_use` block in the previous message."
                        ));
                    }
                    results.insert(id);
                } else {
                    seen_other = true;
                }
            }
            let mut missing: Vec<&String> = uses.difference(&results).collect();
            if !missing.is_empty() {
                missing.sort();
                return Err(format!(
                    "messages.{i}: `tool_use` ids were found without `tool_result` blocks immediately after: {missing:?}. Each `tool_use` block must have a corresponding `tool_result` block in the next message."
                ));
            }
            uses.clear();
            expected_role = "assistant";
        } else {
            uses = blocks
                .iter()
                .filter(|b| b["type"] == "tool_use")
                .map(|b| b["id"].as_str().unwrap_or("").to_string())
                .collect();
            expected_role = "user";
        }
    }
    if !uses.is_empty() {
        return Err(
            "the last message's `tool_use` blocks have no `tool_result` blocks after them".into(),
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn openai_refuses_an_unanswered_call_and_a_stray_result() {
        let call =
            json!({"role": "assistant", "content": null, "tool_calls": [{"id": "a"}, {"id": "b"}]});
        let result = |id: &str| json!({"role": "tool", "tool_call_id": id, "content": "{}"});
        let user = json!({"role": "user", "content": "hi"});
        let ok = json!({"messages": [user, call, result("b"), result("a"), user]});
        assert_eq!(check_openai(&ok), Ok(()));
        let open = json!({"messages": [user, call, result("a"), {"role": "system", "content": "x"}, result("b")]});
        assert!(
            check_openai(&open)
                .unwrap_err()
                .contains("did not have response messages: b")
        );
        let stray = json!({"messages": [user, result("a")]});
        assert!(check_openai(&stray).unwrap_err().contains("preceeding"));
        let last = json!({"messages": [user, call]});
        assert!(check_openai(&last).is_err());
    }

    #[test]
    fn both_refuse_a_conversation_that_ends_with_an_assistant_message() {
        let user = json!({"role": "user", "content": "hi"});
        let answer = json!({"role": "assistant", "content": "hello"});
        let tool = json!({"role": "tool", "tool_call_id": "a", "content": "{}"});
        assert_eq!(
            check_ends_with_input(&json!({"messages": [user, answer, user]})),
            Ok(())
        );
        assert_eq!(
            check_ends_with_input(&json!({"messages": [user, tool]})),
            Ok(())
        );
        assert!(
            check_ends_with_input(&json!({"messages": [user, answer]}))
                .unwrap_err()
                .contains("must end with a user message")
        );
        assert!(check_ends_with_input(&json!({"messages": [user, answer, answer]})).is_err());
    }

    #[test]
    fn anthropic_refuses_a_use_without_its_result_and_a_result_of_no_use() {
        let uses = json!({"role": "assistant", "content": [{"type": "tool_use", "id": "u1"}]});
        let answer = json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "u1"}, {"type": "text", "text": "next"}
        ]});
        let ok = json!({"messages": [{"role": "user", "content": "go"}, uses, answer]});
        assert_eq!(check_anthropic(&ok), Ok(()));
        let missing = json!({"messages": [{"role": "user", "content": "go"}, uses, {"role": "user", "content": "next"}]});
        assert!(
            check_anthropic(&missing)
                .unwrap_err()
                .contains("without `tool_result`")
        );
        let stray = json!({"messages": [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "zz"}]}]});
        assert!(check_anthropic(&stray).unwrap_err().contains("unexpected"));
        let late = json!({"messages": [{"role": "user", "content": "go"}, uses, {"role": "user", "content": [
            {"type": "text", "text": "next"}, {"type": "tool_result", "tool_use_id": "u1"}
        ]}]});
        assert!(check_anthropic(&late).is_err());
    }
}
