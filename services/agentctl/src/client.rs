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
    /// Anything else: agentd unreachable, an unreadable answer, a bad argument.
    Other(anyhow::Error),
}

/// A client of one agentd's API.
pub struct Client {
    /// Base URL without a trailing slash.
    base: String,
    token: Option<String>,
}

impl Client {
    /// A client of the API at `url`, sending `token` as a bearer token when there is one.
    pub fn new(url: &str, token: Option<&str>) -> Client {
        Client {
            base: url.trim_end_matches('/').to_string(),
            token: token.map(str::to_string),
        }
    }

    /// `GET /v1<path>`.
    pub fn get(&self, path: &str) -> Result<Value, Failure> {
        self.call("GET", path, None)
    }

    /// `POST /v1<path>` with a JSON body.
    pub fn post(&self, path: &str, body: Value) -> Result<Value, Failure> {
        self.call("POST", path, Some(body))
    }

    fn request(&self, method: &str, url: &str) -> ureq::Request {
        let req = ureq::request(method, url);
        match &self.token {
            Some(t) => req.set("Authorization", &format!("Bearer {t}")),
            None => req,
        }
    }

    fn call(&self, method: &str, path: &str, body: Option<Value>) -> Result<Value, Failure> {
        let url = format!("{}/v1{path}", self.base);
        let req = self.request(method, &url);
        let res = match body {
            Some(b) => req.send_json(b),
            None => req.call(),
        };
        match res {
            Ok(r) => r
                .into_json::<Value>()
                .map_err(|e| Failure::Other(anyhow!("reading the answer: {e}"))),
            Err(e) => Err(failure(e, &url)),
        }
    }

    /// Opens `GET /v1/events[?agent_id=…]`: the lines of the Server-Sent Events stream.
    pub fn events(&self, agent: Option<&str>) -> Result<impl BufRead, Failure> {
        let url = match agent {
            Some(a) => format!("{}/v1/events?agent_id={a}", self.base),
            None => format!("{}/v1/events", self.base),
        };
        let resp = self
            .request("GET", &url)
            .call()
            .map_err(|e| failure(e, &url))?;
        Ok(std::io::BufReader::new(resp.into_reader()))
    }
}

/// An error status's JSON body, or why agentd could not be asked.
fn failure(e: ureq::Error, url: &str) -> Failure {
    match e {
        ureq::Error::Status(_, r) => Failure::Api(r.into_json::<Value>().unwrap_or(Value::Null)),
        e => Failure::Other(anyhow!("cannot reach agentd at {url}: {e}")),
    }
}
