//! The HTTP client: one blocking request per call, the bearer token on each, and the answer
//! sorted into what the API said (a JSON body, or its `{code, message}` error) and what went
//! wrong on the way (agentd unreachable, an answer that is not JSON).

use anyhow::anyhow;
use serde_json::Value;
use std::io::BufRead;

/// Why a command did not succeed.
pub enum Failure {
    /// The API answered an error (`{code, message}`).
    Api(Value),
    /// Whoever read agentctl's output stopped reading (`agentctl … | head`): not an error,
    /// agentctl stops quietly.
    OutputClosed,
    /// Anything else: agentd unreachable, an unreadable answer, a bad argument.
    Other(anyhow::Error),
}

/// A client of one agentd's API.
pub struct Client {
    /// Base URL without a trailing slash.
    base: String,
    token: Option<String>,
}

/// Query parameters; a `None` value is left out.
pub type Query<'a> = &'a [(&'a str, Option<&'a str>)];

impl Client {
    /// A client of the API at `url`, sending `token` as a bearer token when there is one.
    pub fn new(url: &str, token: Option<&str>) -> Client {
        Client {
            base: url.trim_end_matches('/').to_string(),
            token: token.map(str::to_string),
        }
    }

    /// `GET <path>` (e.g. `/v1/tree`), answered with JSON.
    pub fn get(&self, path: &str) -> Result<Value, Failure> {
        self.get_with(path, &[])
    }

    /// `GET <path>?<query>`, answered with JSON.
    pub fn get_with(&self, path: &str, query: Query) -> Result<Value, Failure> {
        let (url, req) = self.request("GET", path, query);
        json_of(req.call(), &url)
    }

    /// `GET <path>`, answered with text (the metrics).
    pub fn get_text(&self, path: &str) -> Result<String, Failure> {
        let (url, req) = self.request("GET", path, &[]);
        req.call()
            .map_err(|e| failure(e, &url))?
            .into_string()
            .map_err(|e| Failure::Other(anyhow!("reading the answer: {e}")))
    }

    /// `POST <path>` with a JSON body.
    pub fn post(&self, path: &str, body: Value) -> Result<Value, Failure> {
        self.post_keyed(path, body, None)
    }

    /// [`Self::post`] with an `Idempotency-Key` header when `key` is given: a retry of the
    /// command with the same key does what the first did, once.
    pub fn post_keyed(&self, path: &str, body: Value, key: Option<&str>) -> Result<Value, Failure> {
        let (url, mut req) = self.request("POST", path, &[]);
        if let Some(key) = key {
            req = req.set("Idempotency-Key", key);
        }
        json_of(req.send_json(body), &url)
    }

    /// `DELETE <path>`.
    pub fn delete(&self, path: &str) -> Result<Value, Failure> {
        let (url, req) = self.request("DELETE", path, &[]);
        json_of(req.call(), &url)
    }

    /// Opens the Server-Sent Events stream at `path` (`/v1/events`), resumed after
    /// `last_event_id` when given (`Last-Event-ID`): its lines.
    pub fn events(
        &self,
        path: &str,
        query: Query,
        last_event_id: Option<&str>,
    ) -> Result<impl BufRead + use<>, Failure> {
        let (url, mut req) = self.request("GET", path, query);
        if let Some(id) = last_event_id {
            req = req.set("Last-Event-ID", id);
        }
        let resp = req.call().map_err(|e| failure(e, &url))?;
        Ok(std::io::BufReader::new(resp.into_reader()))
    }

    fn request(&self, method: &str, path: &str, query: Query) -> (String, ureq::Request) {
        let url = format!("{}{path}", self.base);
        let mut req = ureq::request(method, &url);
        for (name, value) in query {
            if let Some(value) = value {
                req = req.query(name, value);
            }
        }
        if let Some(t) = &self.token {
            req = req.set("Authorization", &format!("Bearer {t}"));
        }
        (url, req)
    }
}

fn json_of(res: Result<ureq::Response, ureq::Error>, url: &str) -> Result<Value, Failure> {
    res.map_err(|e| failure(e, url))?
        .into_json::<Value>()
        .map_err(|e| Failure::Other(anyhow!("reading the answer: {e}")))
}

/// An error status's JSON body, or why agentd could not be asked (naming `url` once: ureq's
/// own message starts with it too).
fn failure(e: ureq::Error, url: &str) -> Failure {
    match e {
        ureq::Error::Status(_, r) => Failure::Api(r.into_json::<Value>().unwrap_or(Value::Null)),
        ureq::Error::Transport(t) => {
            let mut why = t.kind().to_string();
            if let Some(message) = t.message() {
                why.push_str(": ");
                why.push_str(message);
            }
            if let Some(source) = std::error::Error::source(&t) {
                why.push_str(&format!(": {source}"));
            }
            Failure::Other(anyhow!("cannot reach agentd at {url}: {why}"))
        }
    }
}
