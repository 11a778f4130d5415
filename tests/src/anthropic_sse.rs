//! A local Anthropic Messages endpoint that streams its answers as SSE (`message_start`,
//! `content_block_start` / `_delta` / `_stop`, `message_delta` with usage, `message_stop`), for
//! running the real Claude Code CLI offline. Every request is logged; a streamed
//! `POST /v1/messages` is answered by the test's responder, anything else the CLI asks (`GET /`,
//! token counts, a non-streamed call) with a small JSON answer. A responder may refuse a call as
//! a subscription's usage limit does (`429` with the `anthropic-ratelimit-unified-*` headers).

use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What the endpoint answers a streamed message request with.
pub enum SseReply {
    /// A text answer.
    Text(String),
    /// A call of the CLI's tool `name` with `input`.
    ToolUse {
        /// Tool name (e.g. `Bash`).
        name: String,
        /// Its input.
        input: Value,
    },
    /// `429`: a usage limit (`five_hour`) refused the call until `resets_at_secs` (seconds
    /// since the epoch), in the `anthropic-ratelimit-unified-*` headers. The CLI reads them
    /// (and reports a `rate_limit_event`) when it runs on a subscription's token
    /// (`CLAUDE_CODE_OAUTH_TOKEN`), not an API key.
    UsageLimited {
        /// When the limit resets.
        resets_at_secs: u64,
    },
}

/// A request the endpoint received.
#[derive(Debug, Clone)]
pub struct Logged {
    /// Method.
    pub method: String,
    /// Path with query.
    pub path: String,
    /// JSON body (`null` if none).
    pub body: Value,
}

impl Logged {
    /// Whether this is a streamed Messages call (what the CLI's turns make).
    pub fn is_turn(&self) -> bool {
        self.method == "POST"
            && self.path.starts_with("/v1/messages")
            && !self.path.contains("count_tokens")
            && self.body["stream"] == json!(true)
    }
}

type Responder = dyn Fn(&Value) -> (SseReply, Duration) + Send + Sync;

/// The endpoint.
pub struct AnthropicSse {
    /// Base URL (`http://127.0.0.1:<port>`).
    pub url: String,
    log: Arc<Mutex<Vec<Logged>>>,
}

/// The usage every answer reports, in Anthropic's four kinds.
pub const USAGE: (u64, u64, u64, u64) = (11, 7, 3, 2);

impl AnthropicSse {
    /// Serves on a free loopback port; `respond` picks the answer (and a delay before it) for
    /// each streamed message request's body.
    pub fn start(respond: impl Fn(&Value) -> (SseReply, Duration) + Send + Sync + 'static) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let url = format!("http://{}", listener.local_addr().expect("addr"));
        let log: Arc<Mutex<Vec<Logged>>> = Arc::default();
        let respond: Arc<Responder> = Arc::new(respond);
        let shared = log.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().map_while(Result::ok) {
                let log = shared.clone();
                let respond = respond.clone();
                std::thread::spawn(move || serve(stream, &log, &*respond));
            }
        });
        AnthropicSse { url, log }
    }

    /// Every request so far.
    pub fn requests(&self) -> Vec<Logged> {
        self.log.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// The streamed message requests so far (the CLI's model calls).
    pub fn turns(&self) -> Vec<Logged> {
        self.requests()
            .into_iter()
            .filter(Logged::is_turn)
            .collect()
    }
}

/// All text in a request's `messages`, for matching on what the CLI sent.
pub fn conversation_text(body: &Value) -> String {
    body["messages"].to_string()
}

/// Whether the last message of a request carries a tool result.
pub fn answers_a_tool(body: &Value) -> bool {
    body["messages"]
        .as_array()
        .and_then(|m| m.last())
        .and_then(|m| m["content"].as_array())
        .is_some_and(|c| c.iter().any(|b| b["type"] == "tool_result"))
}

fn serve(stream: TcpStream, log: &Mutex<Vec<Logged>>, respond: &Responder) {
    let Ok(read_half) = stream.try_clone() else {
        return;
    };
    let mut reader = BufReader::new(read_half);
    let mut out = stream;
    loop {
        let mut request_line = String::new();
        if reader.read_line(&mut request_line).unwrap_or(0) == 0 {
            return;
        }
        let mut parts = request_line.split_whitespace();
        let method = parts.next().unwrap_or("").to_string();
        let path = parts.next().unwrap_or("").to_string();
        let mut length = 0usize;
        loop {
            let mut line = String::new();
            if reader.read_line(&mut line).unwrap_or(0) == 0 {
                return;
            }
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            if let Some((name, value)) = line.split_once(':')
                && name.eq_ignore_ascii_case("content-length")
            {
                length = value.trim().parse().unwrap_or(0);
            }
        }
        let mut body = vec![0; length];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        let logged = Logged {
            method: method.clone(),
            path: path.clone(),
            body: body.clone(),
        };
        let turn = logged.is_turn();
        log.lock().unwrap_or_else(|p| p.into_inner()).push(logged);
        let written = if turn {
            let (reply, delay) = respond(&body);
            std::thread::sleep(delay);
            stream_answer(&mut out, &body, reply)
        } else {
            let answer = if method == "POST" && path.starts_with("/v1/messages") {
                if path.contains("count_tokens") {
                    json!({"input_tokens": USAGE.0})
                } else {
                    json!({"id": "msg_plain", "type": "message", "role": "assistant",
                        "model": body["model"], "content": [{"type": "text", "text": "ok"}],
                        "stop_reason": "end_turn", "stop_sequence": null,
                        "usage": {"input_tokens": 1, "output_tokens": 1}})
                }
            } else {
                json!({})
            };
            let text = answer.to_string();
            write!(
                out,
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{text}",
                text.len()
            )
        };
        if written.and_then(|()| out.flush()).is_err() || turn {
            // A streamed answer ends with its connection.
            return;
        }
    }
}

fn event(out: &mut TcpStream, name: &str, data: Value) -> std::io::Result<()> {
    write!(out, "event: {name}\ndata: {data}\n\n")
}

fn stream_answer(out: &mut TcpStream, body: &Value, reply: SseReply) -> std::io::Result<()> {
    let (block, delta, stop) = match reply {
        SseReply::UsageLimited { resets_at_secs } => return refuse(out, resets_at_secs),
        SseReply::Text(text) => (
            json!({"type": "text", "text": ""}),
            json!({"type": "text_delta", "text": text}),
            "end_turn",
        ),
        SseReply::ToolUse { name, input } => (
            json!({"type": "tool_use", "id": "toolu_1", "name": name, "input": {}}),
            json!({"type": "input_json_delta", "partial_json": input.to_string()}),
            "tool_use",
        ),
    };
    write!(
        out,
        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\nconnection: close\r\n\r\n"
    )?;
    let (input, output, cache_write, cache_read) = USAGE;
    event(
        out,
        "message_start",
        json!({"type": "message_start", "message": {"id": "msg_1", "type": "message",
            "role": "assistant", "model": body["model"], "content": [], "stop_reason": null,
            "stop_sequence": null, "usage": {"input_tokens": input, "output_tokens": 1,
                "cache_creation_input_tokens": cache_write, "cache_read_input_tokens": cache_read}}}),
    )?;
    event(
        out,
        "content_block_start",
        json!({"type": "content_block_start", "index": 0, "content_block": block}),
    )?;
    event(
        out,
        "content_block_delta",
        json!({"type": "content_block_delta", "index": 0, "delta": delta}),
    )?;
    event(
        out,
        "content_block_stop",
        json!({"type": "content_block_stop", "index": 0}),
    )?;
    event(
        out,
        "message_delta",
        json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null},
            "usage": {"output_tokens": output}}),
    )?;
    event(out, "message_stop", json!({"type": "message_stop"}))
}

/// A `429` as a subscription's usage limit answers it.
fn refuse(out: &mut TcpStream, resets_at_secs: u64) -> std::io::Result<()> {
    let text = json!({"type": "error", "error": {"type": "rate_limit_error",
        "message": "usage limit reached"}})
    .to_string();
    write!(
        out,
        "HTTP/1.1 429 Too Many Requests\r\ncontent-type: application/json\r\n\
         anthropic-ratelimit-unified-status: rejected\r\n\
         anthropic-ratelimit-unified-reset: {resets_at_secs}\r\n\
         anthropic-ratelimit-unified-representative-claim: five_hour\r\n\
         content-length: {}\r\nconnection: close\r\n\r\n{text}",
        text.len()
    )
}
