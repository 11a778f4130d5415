//! A canned HTTP server on a free loopback port for the model backends' tests: it answers
//! each request with the next scripted response and records what it was sent.

use serde_json::Value;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

/// One canned answer.
#[derive(Clone)]
pub struct Canned {
    /// HTTP status.
    pub status: u16,
    /// Extra headers.
    pub headers: Vec<(String, String)>,
    /// Body (sent as-is, so malformed JSON can be tested).
    pub body: String,
}

impl Canned {
    /// `200` with a JSON body.
    pub fn json(v: Value) -> Canned {
        Canned {
            status: 200,
            headers: vec![],
            body: v.to_string(),
        }
    }

    /// Any status and raw body.
    pub fn raw(status: u16, body: &str) -> Canned {
        Canned {
            status,
            headers: vec![],
            body: body.to_string(),
        }
    }
}

/// A request the server received.
#[derive(Debug, Clone)]
pub struct Received {
    /// Request method (`GET`, `POST`, …).
    pub method: String,
    /// Request path.
    pub path: String,
    /// Request headers, lower-cased names.
    pub headers: Vec<(String, String)>,
    /// JSON body.
    pub body: Value,
}

/// The server.
pub struct MockHttp {
    /// Base URL.
    pub url: String,
    /// Requests received so far.
    pub received: Arc<Mutex<Vec<Received>>>,
}

impl MockHttp {
    /// Serves `responses` in order (the last one repeats).
    pub fn start(responses: Vec<Canned>) -> MockHttp {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind loopback");
        let url = format!("http://{}", listener.local_addr().expect("addr"));
        let received = Arc::new(Mutex::new(Vec::new()));
        let rec = received.clone();
        std::thread::spawn(move || {
            let mut i = 0;
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { return };
                let mut reader = BufReader::new(stream.try_clone().expect("clone"));
                let mut line = String::new();
                if reader.read_line(&mut line).is_err() {
                    continue;
                }
                let mut words = line.split_whitespace();
                let method = words.next().unwrap_or("").to_string();
                let path = words.next().unwrap_or("/").to_string();
                let mut headers = Vec::new();
                let mut len = 0;
                loop {
                    let mut h = String::new();
                    if reader.read_line(&mut h).is_err() || h.trim().is_empty() {
                        break;
                    }
                    if let Some((k, v)) = h.trim().split_once(':') {
                        let k = k.trim().to_lowercase();
                        if k == "content-length" {
                            len = v.trim().parse().unwrap_or(0);
                        }
                        headers.push((k, v.trim().to_string()));
                    }
                }
                let mut body = vec![0; len];
                let _ = reader.read_exact(&mut body);
                rec.lock().expect("lock").push(Received {
                    method,
                    path,
                    headers,
                    body: serde_json::from_slice(&body).unwrap_or(Value::Null),
                });
                let c = responses[i.min(responses.len() - 1)].clone();
                i += 1;
                let mut out = format!(
                    "HTTP/1.1 {} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n",
                    c.status,
                    c.body.len()
                );
                for (k, v) in &c.headers {
                    out.push_str(&format!("{k}: {v}\r\n"));
                }
                out.push_str("\r\n");
                out.push_str(&c.body);
                let _ = stream.write_all(out.as_bytes());
            }
        });
        MockHttp { url, received }
    }

    /// The requests received so far.
    pub fn requests(&self) -> Vec<Received> {
        self.received.lock().expect("lock").clone()
    }
}
