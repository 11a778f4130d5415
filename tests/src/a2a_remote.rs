//! A remote A2A agent written with the official SDK's server classes (`tests/a2a/remote.py`,
//! `a2a-sdk` installed by `scripts/test.sh` into `target/.venv-a2a`), for the tests of
//! agentd as an A2A client (`a2a_client`, `a2a_client_processes` in the suite); and the venv's
//! Python, which the A2A server's tests (`a2a`) run the SDK's client with.

use agentd_actors::ModelClient;
use agentd_models::{A2aModel, HttpSettings};
use serde_json::{Value, json};
use std::path::PathBuf;
use std::process::{Child, Command};
use std::sync::Arc;
use std::time::Duration;

/// The repository's root.
fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The A2A venv's Python, if `scripts/test.sh` installed it (tests skip, saying so, without).
pub fn python() -> Option<PathBuf> {
    let py = root().join("target/.venv-a2a/bin/python");
    py.exists().then_some(py)
}

/// The SDK remote agent, killed when dropped.
pub struct RemoteAgent {
    child: Child,
    url: String,
    log: PathBuf,
    calls: PathBuf,
    rest: bool,
    _dir: tempfile::TempDir,
}

impl Drop for RemoteAgent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// How a [`RemoteAgent`] runs.
pub struct Options {
    /// Its card says it streams.
    pub streams: bool,
    /// It serves the HTTP+JSON binding only (else JSON-RPC only).
    pub rest: bool,
    /// It asks for `Authorization: Bearer <token>`.
    pub token: Option<&'static str>,
    /// How long it works on a message containing "slow".
    pub slow_secs: u32,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            streams: true,
            rest: false,
            token: None,
            slow_secs: 3,
        }
    }
}

impl RemoteAgent {
    /// Starts it (streaming as `streams` says), once its card answers.
    pub fn start(py: &PathBuf, streams: bool) -> RemoteAgent {
        Self::start_with(
            py,
            Options {
                streams,
                ..Options::default()
            },
        )
    }

    /// Starts it as `options` say, once its card answers.
    pub fn start_with(py: &PathBuf, options: Options) -> RemoteAgent {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("received.jsonl");
        let calls = dir.path().join("calls.jsonl");
        let mut cmd = Command::new(py);
        cmd.arg(root().join("tests/a2a/remote.py"))
            .args(["--port", &port.to_string()])
            .args(["--log", &log.display().to_string()])
            .args(["--calls", &calls.display().to_string()])
            .args(["--slow", &options.slow_secs.to_string()]);
        if options.rest {
            cmd.arg("--rest");
        }
        if !options.streams {
            cmd.arg("--no-stream");
        }
        if let Some(t) = options.token {
            cmd.args(["--token", t]);
        }
        let child = cmd.spawn().expect("start the remote agent");
        let url = format!("http://127.0.0.1:{port}");
        let card = format!("{url}/.well-known/agent-card.json");
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while ureq::get(&card).call().is_err() {
            assert!(
                std::time::Instant::now() < deadline,
                "the remote agent did not start"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        RemoteAgent {
            child,
            url,
            log,
            calls,
            rest: options.rest,
            _dir: dir,
        }
    }

    /// The calls made to the remote, in order: a JSON-RPC call's method, an HTTP+JSON call's
    /// HTTP method and path (`GET /tasks/…`).
    pub fn calls(&self) -> Vec<String> {
        std::fs::read_to_string(&self.calls)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter_map(|v| v["method"].as_str().map(str::to_string))
            .collect()
    }

    pub fn card_url(&self) -> String {
        format!("{}/.well-known/agent-card.json", self.url)
    }

    /// The messages the remote received.
    pub fn received(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    /// Task `id` as the remote has it (`GetTask`, over the binding it serves).
    pub fn task(&self, id: &Value) -> Value {
        if !self.rest {
            return self.rpc("GetTask", json!({"id": id}));
        }
        ureq::get(&format!(
            "{}/tasks/{}",
            self.url,
            id.as_str().unwrap_or_default()
        ))
        .set("A2A-Version", "1.0")
        .set("Authorization", "Bearer remote-secret")
        .call()
        .unwrap()
        .into_json()
        .unwrap()
    }

    /// A JSON-RPC call to the remote, as any A2A client makes it.
    pub fn rpc(&self, method: &str, params: Value) -> Value {
        let reply: Value = ureq::post(&format!("{}/", self.url))
            .set("A2A-Version", "1.0")
            .set("Authorization", "Bearer remote-secret")
            .send_json(json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}))
            .unwrap()
            .into_json()
            .unwrap();
        reply["result"].clone()
    }

    pub fn backend(&self) -> Arc<dyn ModelClient> {
        Arc::new(
            A2aModel::new(
                self.card_url(),
                Vec::new(),
                HttpSettings {
                    base_url: String::new(),
                    api_key: String::new(),
                    timeout: Duration::from_secs(30),
                    stream: true,
                    idle_timeout: Duration::from_secs(30),
                    max_retries: 0,
                    backoff: Duration::from_millis(100),
                },
            )
            .unwrap(),
        )
    }
}
