//! OpenTelemetry export (docs/telemetry.md) against a real OTLP/HTTP receiver: tests/otlp/
//! receiver.py, built on the official `opentelemetry-proto` package (pinned, in the venv
//! `scripts/test.sh` makes under `target/.venv-otlp`), which decodes what agentd exports, and
//! agentd processes on a real redis-server.
//!
//! - `one_trace`: a root → Manage worker → sub-agent tree over two processes is one trace with
//!   the GenAI spans and their parents; a `kill -9` of the worker's process mid-turn gives a
//!   turn span linked to the lost one; a collector down at start loses no work, and its dropped
//!   spans are counted.
//! - `waits`: the waits for a turn slot, a review and a service tool's answer are spans under
//!   the work they hold up; a review decided while other calls wait hands over to a
//!   `waiting_tool` wait; the service call carries the trace to its workers.
//! - `calls`: an MCP call carries the trace in `params._meta`, an A2A call in its `traceparent`
//!   header; a Redis command, an A2A request and an answer that carry one join the caller's
//!   trace; a `chat` span names the model the provider says answered, and its cache tokens;
//!   a failed tool or model call names its class in `error.type`.
//! - `sampling`: `sample_ratio` 0 records only the traces a sampled caller started.

mod calls;
mod one_trace;
mod sampling;
mod waits;

use agentd_tests::{AgentdProcess, RedisServer, eventually_blocking};
use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Partitions of the clusters' Redis layout.
const PARTITIONS: u32 = 8;

/// The scripted model of every test here (rules are tried in order).
const SCRIPT: &str = r#"
[[rule]]
agent = "clerk"
role = "user"
contains = "order"
[[rule.tool_calls]]
name = "lookup_order"
arguments = { order_id = "A-1" }

[[rule]]
agent = "clerk"
role = "tool"
text = "Result: {{input}}"

[[rule]]
agent = "dispatcher"
role = "user"
[[rule.tool_calls]]
name = "lookup_order"
arguments = { order_id = "A-2" }
[[rule.tool_calls]]
name = "ship_order"
arguments = { order_id = "A-2" }

[[rule]]
agent = "prober"
role = "user"
[[rule.tool_calls]]
name = "mcp__probe__meta"

[[rule]]
agent = "subagent"
contains = "ask me"
text = "[USER_QUESTION]Which region?[/USER_QUESTION]"

[[rule]]
contains = "take a while"
delay_ms = 1500
text = "took a while"

[[rule]]
agent = "lead"
contains = "delegate"
usage = { input = 120, output = 30 }
[[rule.tool_calls]]
name = "Manage"
arguments = { command = "send_message", worker = "Researcher", message = "dig into it", threadAlias = "w", mode = "async" }

[[rule]]
agent = "research"
contains = "dig into"
[[rule.tool_calls]]
name = "spawn_agent"
arguments = { agent_type = "subagent", prompt = "sub task" }

[[rule]]
agent = "research"
contains = "slowly"
delay_ms = 4000
text = "slow done"

[[rule]]
agent = "subagent"
contains = "sub task"
[[rule.tool_calls]]
name = "yield_to_parent"
arguments = { result = "sub done" }

[[rule]]
agent = "research"
contains = "spawn a stranger"
[[rule.tool_calls]]
name = "spawn_agent"
arguments = { agent_type = "stranger", prompt = "hi" }

[[rule]]
contains = "break the model"
error = "the model broke"

[[rule]]
contains = "limit me"
once = true
rate_limit_ms = 300

[[rule]]
role = "tool"
text = "done"

[[rule]]
text = "ok"
"#;

/// The receiver: a Python process writing one JSON line per span or data point it decoded.
pub(super) struct Receiver {
    child: Child,
    port: u16,
    records: Arc<Mutex<Vec<Value>>>,
}

fn python() -> PathBuf {
    let python = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/.venv-otlp/bin/python");
    let ok = Command::new(&python)
        .args([
            "-c",
            "import opentelemetry.proto.collector.trace.v1.trace_service_pb2",
        ])
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        ok,
        "{} with opentelemetry-proto is missing: run scripts/test.sh",
        python.display()
    );
    python
}

impl Receiver {
    /// Starts the receiver on `port` (0: a free one).
    pub(super) fn start(port: u16) -> Receiver {
        let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("otlp/receiver.py");
        let mut child = Command::new(python())
            .arg(script)
            .arg(port.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start the OTLP receiver");
        let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
        let first: Value = serde_json::from_str(
            &lines
                .next()
                .expect("the receiver exited before listening")
                .expect("read"),
        )
        .expect("json");
        let port = first["port"].as_u64().expect("the port") as u16;
        let records = Arc::new(Mutex::new(Vec::new()));
        let kept = records.clone();
        std::thread::spawn(move || {
            for line in lines.map_while(Result::ok) {
                if let Ok(v) = serde_json::from_str::<Value>(&line) {
                    kept.lock().unwrap().push(v);
                }
            }
        });
        Receiver {
            child,
            port,
            records,
        }
    }

    pub(super) fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub(super) fn spans(&self) -> Vec<Value> {
        self.of("span")
    }

    pub(super) fn of(&self, signal: &str) -> Vec<Value> {
        self.records
            .lock()
            .unwrap()
            .iter()
            .filter(|r| r["signal"] == signal)
            .cloned()
            .collect()
    }

    /// Waits for a span whose name is `name` and whose attributes include `attrs`.
    pub(super) fn span(&self, name: &str, attrs: Value) -> Value {
        eventually_blocking(
            Duration::from_secs(30),
            &format!("a span {name} with {attrs}"),
            || {
                self.spans()
                    .into_iter()
                    .find(|s| s["name"] == name && matches(&s["attributes"], &attrs))
            },
        )
    }
}

impl Receiver {
    /// Waits for the span `name` whose parent is `parent` (a span this receiver got).
    pub(super) fn child_of(&self, parent: &Value, name: &str) -> Value {
        eventually_blocking(
            Duration::from_secs(30),
            &format!("a span {name} under {}", parent["name"]),
            || {
                self.spans().into_iter().find(|s| {
                    s["name"] == name
                        && s["parent_span_id"] == parent["span_id"]
                        && s["trace_id"] == parent["trace_id"]
                })
            },
        )
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub(super) fn matches(have: &Value, want: &Value) -> bool {
    want.as_object()
        .is_none_or(|w| w.iter().all(|(k, v)| have.get(k) == Some(v)))
}

/// Two agentd processes on one redis-server, exporting to `endpoint`.
pub(super) struct Cluster {
    pub(super) redis: RedisServer,
    dir: tempfile::TempDir,
    env: Vec<(&'static str, String)>,
}

impl Cluster {
    pub(super) fn new(endpoint: &str) -> Cluster {
        let redis = RedisServer::start();
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("script.toml");
        std::fs::write(&script, SCRIPT).unwrap();
        let types = dir.path().join("types");
        std::fs::create_dir(&types).unwrap();
        // The worker may spawn sub-agents of its own.
        std::fs::write(
            types.join("research.toml"),
            "title = \"Researcher\"\nprompt = \"You research.\"\ngrants_management = true\n",
        )
        .unwrap();
        let env = vec![
            ("AGENTD__REDIS__URL", redis.url()),
            ("AGENTD__REDIS__NAMESPACE", "otel".to_string()),
            ("AGENTD__REDIS__PARTITIONS", PARTITIONS.to_string()),
            ("AGENTD__REDIS__LEASE_MS", "1000".to_string()),
            ("AGENTD__MODEL__SCRIPT", script.display().to_string()),
            ("AGENTD__AGENTS__DIR", types.display().to_string()),
            ("AGENTD__LIMITS__MAX_DEPTH", "2".to_string()),
            ("AGENTD__TELEMETRY__OTLP_ENDPOINT", endpoint.to_string()),
            ("AGENTD__TELEMETRY__EXPORT_TIMEOUT_MS", "2000".to_string()),
            ("AGENTD__TELEMETRY__METRIC_INTERVAL_MS", "500".to_string()),
            // The SDK's batch delay (5 s by default), by its standard variable.
            ("OTEL_BSP_SCHEDULE_DELAY", "100".to_string()),
            ("RUST_LOG", "warn,agentd::telemetry=info".to_string()),
        ];
        Cluster { redis, dir, env }
    }

    pub(super) fn process(&self) -> AgentdProcess {
        AgentdProcess::start(&self.env)
    }

    /// This cluster, its processes started with `key` (an `AGENTD__…` variable) at `value`.
    pub(super) fn with(mut self, key: &'static str, value: &str) -> Cluster {
        self.env.push((key, value.to_string()));
        self
    }

    /// This cluster with agent type `name` (the TOML of its file).
    pub(super) fn with_type(self, name: &str, toml: &str) -> Cluster {
        let path = self.dir.path().join("types").join(format!("{name}.toml"));
        std::fs::write(path, toml).unwrap();
        self
    }

    /// This cluster, its processes started with `toml` as their configuration file.
    pub(super) fn with_config(self, toml: &str) -> Cluster {
        let path = self.dir.path().join("agentd.toml");
        std::fs::write(&path, toml).unwrap();
        let path = path.display().to_string();
        self.with("AGENTD_CONFIG", &path)
    }
}
