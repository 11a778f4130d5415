//! A model provider on a free loopback port that answers as the real APIs do when asked for a
//! stream: OpenAI chat-completion chunks (`data: {...}` lines ending with `data: [DONE]`) or
//! Anthropic Messages events (`event: message_start` … `event: message_stop`), each event
//! written and flushed on its own, optionally after a delay, so a test sees text arrive piece by
//! piece and can abort a call mid-way. Replies are scripted in order (the last one repeats); a
//! reply can also be a plain status (a `429` with `retry-after`, a `503` before the first byte).
//!
//! A client that hangs up mid-stream is counted ([`StreamingProvider::hung_up`]): the wait
//! before an event notices it, or the next write fails.

use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// One Server-Sent Event of a streamed reply.
#[derive(Debug, Clone)]
pub struct SseEvent {
    /// Wait this long before writing it.
    pub delay: Duration,
    /// Its `event:` name (`None`: no `event:` line, as OpenAI writes them).
    pub name: Option<String>,
    /// Its `data:`.
    pub data: String,
}

/// What the provider answers one request with.
#[derive(Debug, Clone)]
pub enum Reply {
    /// A status with headers and a body, and nothing streamed.
    Status {
        /// HTTP status.
        status: u16,
        /// Extra headers.
        headers: Vec<(String, String)>,
        /// Body.
        body: String,
    },
    /// `200` and these events as `text/event-stream`, then the connection closes.
    Stream(Vec<SseEvent>),
}

impl Reply {
    /// A bare status.
    pub fn status(status: u16, headers: &[(&str, &str)]) -> Reply {
        Reply::Status {
            status,
            headers: headers
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            body: json!({"error": {"message": format!("status {status}")}}).to_string(),
        }
    }

    /// The same stream naming `model` as the model that answers, where the real APIs name it:
    /// every OpenAI chunk's `model`, Anthropic's `message_start` `message.model`.
    pub fn naming_model(self, model: &str) -> Reply {
        match self {
            Reply::Stream(events) => Reply::Stream(
                events
                    .into_iter()
                    .map(|mut e| {
                        if let Ok(mut v) = serde_json::from_str::<Value>(&e.data) {
                            match e.name.as_deref() {
                                None => v["model"] = json!(model),
                                Some("message_start") => v["message"]["model"] = json!(model),
                                Some(_) => {}
                            }
                            e.data = v.to_string();
                        }
                        e
                    })
                    .collect(),
            ),
            other => other,
        }
    }

    /// The same stream with `delay` before each event from the `from`th on.
    pub fn paced(self, from: usize, delay: Duration) -> Reply {
        match self {
            Reply::Stream(events) => Reply::Stream(
                events
                    .into_iter()
                    .enumerate()
                    .map(|(i, mut e)| {
                        if i >= from {
                            e.delay = delay;
                        }
                        e
                    })
                    .collect(),
            ),
            other => other,
        }
    }
}

fn data(v: Value) -> SseEvent {
    SseEvent {
        delay: Duration::ZERO,
        name: None,
        data: v.to_string(),
    }
}

fn named(name: &str, v: Value) -> SseEvent {
    SseEvent {
        delay: Duration::ZERO,
        name: Some(name.into()),
        data: v.to_string(),
    }
}

/// OpenAI chunks of an answer whose text arrives in `pieces`, stopped for `finish_reason`;
/// with `usage = Some((prompt, completion))` the last chunk before `[DONE]` carries it (as
/// `stream_options.include_usage` asks).
pub fn openai_text(pieces: &[&str], finish_reason: &str, usage: Option<(u64, u64)>) -> Reply {
    let chunk = |delta: Value, finish: Value| {
        data(
            json!({"id": "chatcmpl-1", "object": "chat.completion.chunk",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}),
        )
    };
    let mut events = vec![chunk(
        json!({"role": "assistant", "content": ""}),
        Value::Null,
    )];
    events.extend(
        pieces
            .iter()
            .map(|p| chunk(json!({"content": p}), Value::Null)),
    );
    events.push(chunk(json!({}), json!(finish_reason)));
    if let Some((prompt, completion)) = usage {
        events.push(data(json!({"id": "chatcmpl-1", "choices": [],
            "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                      "total_tokens": prompt + completion}})));
    }
    events.push(SseEvent {
        delay: Duration::ZERO,
        name: None,
        data: "[DONE]".into(),
    });
    Reply::Stream(events)
}

/// OpenAI chunks of an answer calling `name` with `arguments` (a JSON text), sent in pieces of
/// `piece` characters, as providers split a call's arguments.
pub fn openai_tool_call(id: &str, name: &str, arguments: &str, piece: usize) -> Reply {
    let chunk = |delta: Value, finish: Value| {
        data(json!({"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}))
    };
    let mut events = vec![chunk(
        json!({"role": "assistant", "content": null, "tool_calls": [
            {"index": 0, "id": id, "type": "function", "function": {"name": name, "arguments": ""}}
        ]}),
        Value::Null,
    )];
    let chars: Vec<char> = arguments.chars().collect();
    for part in chars.chunks(piece.max(1)) {
        let part: String = part.iter().collect();
        events.push(chunk(
            json!({"tool_calls": [{"index": 0, "function": {"arguments": part}}]}),
            Value::Null,
        ));
    }
    events.push(chunk(json!({}), json!("tool_calls")));
    events.push(data(json!({"choices": [],
        "usage": {"prompt_tokens": 50, "completion_tokens": 8}})));
    events.push(SseEvent {
        delay: Duration::ZERO,
        name: None,
        data: "[DONE]".into(),
    });
    Reply::Stream(events)
}

/// Anthropic events of a message whose text arrives in `pieces`, stopped for `stop_reason`;
/// `message_start` reports `input` tokens, the `message_delta` before the stop `output`.
pub fn anthropic_text(pieces: &[&str], stop_reason: &str, input: u64, output: u64) -> Reply {
    let mut events = vec![
        named(
            "message_start",
            json!({"type": "message_start", "message": {"id": "msg_1", "type": "message",
                "role": "assistant", "content": [], "stop_reason": null,
                "usage": {"input_tokens": input, "output_tokens": 1,
                          "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}}}),
        ),
        named(
            "content_block_start",
            json!({"type": "content_block_start", "index": 0,
                "content_block": {"type": "text", "text": ""}}),
        ),
        named("ping", json!({"type": "ping"})),
    ];
    events.extend(pieces.iter().map(|p| {
        named(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0,
                "delta": {"type": "text_delta", "text": p}}),
        )
    }));
    events.push(named(
        "content_block_stop",
        json!({"type": "content_block_stop", "index": 0}),
    ));
    events.push(named(
        "message_delta",
        json!({"type": "message_delta", "delta": {"stop_reason": stop_reason},
            "usage": {"output_tokens": output}}),
    ));
    events.push(named("message_stop", json!({"type": "message_stop"})));
    Reply::Stream(events)
}

/// Anthropic events of a message that says `text`, then calls `name` with `input` (a JSON
/// text) sent in pieces of `piece` characters.
pub fn anthropic_tool_use(text: &str, id: &str, name: &str, input: &str, piece: usize) -> Reply {
    let mut events = vec![
        named(
            "message_start",
            json!({"type": "message_start", "message": {"id": "msg_2", "type": "message",
                "role": "assistant", "content": [],
                "usage": {"input_tokens": 70, "output_tokens": 1,
                          "cache_creation_input_tokens": 30, "cache_read_input_tokens": 20}}}),
        ),
        named(
            "content_block_start",
            json!({"type": "content_block_start", "index": 0,
                "content_block": {"type": "text", "text": ""}}),
        ),
        named(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0,
                "delta": {"type": "text_delta", "text": text}}),
        ),
        named(
            "content_block_stop",
            json!({"type": "content_block_stop", "index": 0}),
        ),
        named(
            "content_block_start",
            json!({"type": "content_block_start", "index": 1,
                "content_block": {"type": "tool_use", "id": id, "name": name, "input": {}}}),
        ),
    ];
    let chars: Vec<char> = input.chars().collect();
    for part in chars.chunks(piece.max(1)) {
        let part: String = part.iter().collect();
        events.push(named(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 1,
                "delta": {"type": "input_json_delta", "partial_json": part}}),
        ));
    }
    events.push(named(
        "content_block_stop",
        json!({"type": "content_block_stop", "index": 1}),
    ));
    events.push(named(
        "message_delta",
        json!({"type": "message_delta", "delta": {"stop_reason": "tool_use"},
            "usage": {"output_tokens": 12}}),
    ));
    events.push(named("message_stop", json!({"type": "message_stop"})));
    Reply::Stream(events)
}

/// The server.
pub struct StreamingProvider {
    /// Base URL (the OpenAI backend's `base_url`; the Anthropic backend adds `/v1/messages`).
    pub url: String,
    bodies: Arc<Mutex<Vec<Value>>>,
    hung_up: Arc<AtomicUsize>,
}

impl StreamingProvider {
    /// Serves `replies` in order, one per request (the last one repeats).
    pub fn start(replies: Vec<Reply>) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind loopback");
        let url = format!("http://{}", listener.local_addr().expect("addr"));
        let bodies = Arc::new(Mutex::new(Vec::new()));
        let hung_up = Arc::new(AtomicUsize::new(0));
        let next = Arc::new(AtomicUsize::new(0));
        let replies = Arc::new(replies);
        let (b, h) = (bodies.clone(), hung_up.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { return };
                let (b, h, next, replies) = (b.clone(), h.clone(), next.clone(), replies.clone());
                std::thread::spawn(move || {
                    let Some(body) = read_request(&stream) else {
                        return;
                    };
                    b.lock().expect("lock").push(body);
                    let i = next.fetch_add(1, Ordering::SeqCst);
                    let Some(reply) = replies.get(i.min(replies.len().saturating_sub(1))) else {
                        return;
                    };
                    if write_reply(stream, reply).is_err() {
                        h.fetch_add(1, Ordering::SeqCst);
                    }
                });
            }
        });
        StreamingProvider {
            url,
            bodies,
            hung_up,
        }
    }

    /// The request bodies received so far.
    pub fn bodies(&self) -> Vec<Value> {
        self.bodies.lock().expect("lock").clone()
    }

    /// How many clients hung up before their stream was written whole.
    pub fn hung_up(&self) -> usize {
        self.hung_up.load(Ordering::SeqCst)
    }
}

/// Reads one request; answers its JSON body.
fn read_request(stream: &std::net::TcpStream) -> Option<Value> {
    let mut reader = BufReader::new(stream.try_clone().ok()?);
    let mut line = String::new();
    reader.read_line(&mut line).ok()?;
    let mut length = 0usize;
    loop {
        line.clear();
        reader.read_line(&mut line).ok()?;
        let header = line.trim_end();
        if header.is_empty() {
            break;
        }
        if let Some((k, v)) = header.split_once(':')
            && k.eq_ignore_ascii_case("content-length")
        {
            length = v.trim().parse().ok()?;
        }
    }
    let mut body = vec![0u8; length];
    reader.read_exact(&mut body).ok()?;
    Some(serde_json::from_slice(&body).unwrap_or(Value::Null))
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

/// Writes `reply`; an error means the client went away (seen while waiting, or on a write).
fn write_reply(mut out: std::net::TcpStream, reply: &Reply) -> std::io::Result<()> {
    match reply {
        Reply::Status {
            status,
            headers,
            body,
        } => {
            let mut head = format!(
                "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n",
                body.len()
            );
            for (k, v) in headers {
                head.push_str(&format!("{k}: {v}\r\n"));
            }
            head.push_str("\r\n");
            out.write_all(head.as_bytes())?;
            out.write_all(body.as_bytes())?;
            out.flush()
        }
        Reply::Stream(events) => {
            out.write_all(
                b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\nConnection: close\r\n\r\n",
            )?;
            out.flush()?;
            for event in events {
                let until = Instant::now() + event.delay;
                while Instant::now() < until {
                    if closed(&out) {
                        return Err(std::io::ErrorKind::BrokenPipe.into());
                    }
                    std::thread::sleep(Duration::from_millis(5));
                }
                let mut text = String::new();
                if let Some(name) = &event.name {
                    text.push_str(&format!("event: {name}\n"));
                }
                text.push_str(&format!("data: {}\n\n", event.data));
                out.write_all(text.as_bytes())?;
                out.flush()?;
            }
            Ok(())
        }
    }
}
