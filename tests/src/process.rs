//! A real `agentd` process for end-to-end tests: started from the workspace's binary with
//! environment overrides on a free loopback port, driven over HTTP, stopped with SIGTERM or
//! killed with SIGKILL.

use crate::eventually::eventually_blocking;
use serde_json::Value;
use std::collections::HashSet;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, Once};
use std::time::{Duration, Instant};

static BUILD: Once = Once::new();

/// The workspace's target directory (`target/debug`), from the running test binary's path.
pub fn bin_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("current exe");
    // target/debug/deps/<test> → target/debug
    exe.parent()
        .and_then(Path::parent)
        .map(Path::to_path_buf)
        .expect("target dir")
}

/// Path of a workspace binary, built (once per test process) so it is never stale. The whole
/// workspace's binaries are built, not only agentd's and agentctl's: features are then unified
/// over the same packages as `cargo test --workspace` unifies them, so the dependencies it
/// compiled are reused instead of compiled again with other features.
pub fn binary(name: &str) -> PathBuf {
    BUILD.call_once(|| {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let mut build = Command::new(cargo);
        build.args(["build", "-q", "--workspace", "--bins"]);
        // Without the variables cargo sets for this test crate (`CARGO_PKG_NAME`, …): ring's
        // build script reads some, and values other than those `cargo test` built with would
        // rebuild ring and all that depends on it, here and again at the next `cargo test`.
        for (name, _) in std::env::vars_os() {
            if name.to_str().is_some_and(set_by_cargo_for_this_crate) {
                build.env_remove(name);
            }
        }
        let status = build.status().expect("run cargo build");
        assert!(status.success(), "building the workspace's binaries failed");
    });
    let p = bin_dir().join(name);
    assert!(p.exists(), "{} was not built", p.display());
    p
}

/// Runs `cmd`, which must succeed (else the test fails with its arguments and what it wrote
/// to stderr): what it wrote to stdout.
pub fn succeeded(cmd: &mut Command) -> Vec<u8> {
    let out = cmd.output().expect("run the command");
    assert!(
        out.status.success(),
        "{:?} {:?}: {}",
        cmd.get_program(),
        cmd.get_args().collect::<Vec<_>>(),
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// Whether cargo sets the environment variable `name` for the crate it runs (its tests), as
/// opposed to settings of cargo itself (`CARGO_HOME`, `CARGO_TARGET_DIR`, …).
fn set_by_cargo_for_this_crate(name: &str) -> bool {
    name.starts_with("CARGO_PKG_")
        || name.starts_with("CARGO_BIN_")
        || matches!(
            name,
            "CARGO_MANIFEST_DIR"
                | "CARGO_MANIFEST_PATH"
                | "CARGO_CRATE_NAME"
                | "CARGO_PRIMARY_PACKAGE"
                | "CARGO_TARGET_TMPDIR"
                | "CARGO_RUSTC_CURRENT_DIR"
        )
}

/// A running agentd process.
pub struct AgentdProcess {
    child: Child,
    /// Base URL of its HTTP API.
    pub url: String,
    /// Every line it wrote to stdout (its logs), in order.
    log: Arc<Mutex<Vec<String>>>,
}

impl AgentdProcess {
    /// Starts `agentd` with `env` overrides (e.g. `AGENTD__REDIS__URL`), bound to a free port.
    pub fn start(env: &[(&str, String)]) -> AgentdProcess {
        let mut cmd = Command::new(binary("agentd"));
        cmd.env("AGENTD__SERVER__BIND", "127.0.0.1:0")
            .env("RUST_LOG", "warn");
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start agentd");
        let stdout = child.stdout.take().expect("stdout");
        let mut lines = BufReader::new(stdout).lines();
        let log = Arc::new(Mutex::new(Vec::new()));
        let keep = |line: &str| log.lock().expect("log lines").push(line.to_string());
        let url = loop {
            let line = lines
                .next()
                .expect("agentd exited before listening")
                .expect("read stdout");
            eprintln!("[agentd {}] {line}", child.id());
            keep(&line);
            if let Some(rest) = line.strip_prefix("agentd listening on ") {
                break rest.split_whitespace().next().expect("url").to_string();
            }
        };
        // Keep draining stdout (agentd's logs) so it never blocks: kept for `log_lines`, and
        // shown with --nocapture.
        let pid = child.id();
        let kept = log.clone();
        std::thread::spawn(move || {
            for line in lines.map_while(Result::ok) {
                eprintln!("[agentd {pid}] {line}");
                kept.lock().expect("log lines").push(line);
            }
        });
        AgentdProcess { child, url, log }
    }

    /// The lines it logged so far (its stdout: the log level is `RUST_LOG`, `warn` unless
    /// `start`'s overrides set it).
    pub fn log_lines(&self) -> Vec<String> {
        self.log.lock().expect("log lines").clone()
    }

    /// Waits (up to 20 s) for a logged line that contains `text`: that line.
    pub fn wait_for_log(&self, text: &str) -> String {
        eventually_blocking(
            Duration::from_secs(20),
            &format!("a log line with {text:?}"),
            || self.log_lines().into_iter().find(|l| l.contains(text)),
        )
    }

    /// The OS process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// GET a JSON path.
    pub fn get(&self, path: &str) -> Value {
        ureq::get(&format!("{}{path}", self.url))
            .call()
            .expect("GET")
            .into_json()
            .expect("json")
    }

    /// GET with an optional bearer token; `(status, body)` whatever the status.
    pub fn get_status(&self, path: &str, token: Option<&str>) -> (u16, Value) {
        let mut req = ureq::get(&format!("{}{path}", self.url));
        if let Some(t) = token {
            req = req.set("Authorization", &format!("Bearer {t}"));
        }
        match req.call() {
            Ok(r) => (r.status(), r.into_json().unwrap_or(Value::Null)),
            Err(ureq::Error::Status(code, r)) => (code, r.into_json().unwrap_or(Value::Null)),
            Err(e) => (0, Value::String(e.to_string())),
        }
    }

    /// POST JSON; `Err((status, body))` for API errors.
    pub fn post(&self, path: &str, body: Value) -> Result<Value, (u16, Value)> {
        match ureq::post(&format!("{}{path}", self.url)).send_json(body) {
            Ok(r) => Ok(r.into_json().expect("json")),
            Err(ureq::Error::Status(code, r)) => Err((code, r.into_json().unwrap_or(Value::Null))),
            Err(e) => Err((0, Value::String(e.to_string()))),
        }
    }

    /// POST JSON with an `Idempotency-Key` header; `Err((status, body))` for API errors.
    pub fn post_keyed(&self, path: &str, key: &str, body: Value) -> Result<Value, (u16, Value)> {
        match ureq::post(&format!("{}{path}", self.url))
            .set("Idempotency-Key", key)
            .send_json(body)
        {
            Ok(r) => Ok(r.into_json().expect("json")),
            Err(ureq::Error::Status(code, r)) => Err((code, r.into_json().unwrap_or(Value::Null))),
            Err(e) => Err((0, Value::String(e.to_string()))),
        }
    }

    /// The texts of an agent's thread.
    pub fn texts(&self, agent_id: &str) -> Vec<String> {
        self.get(&format!("/v1/agents/{agent_id}/thread"))["entries"]
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|e| e["text"].as_str().unwrap_or("").to_string())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Polls `cond` for up to 20 s.
    pub fn wait_for(&self, what: &str, cond: impl Fn(&AgentdProcess) -> bool) {
        eventually_blocking(Duration::from_secs(20), what, || cond(self))
    }

    /// Agent `id`'s status now (`GET /v1/agents/{id}`).
    pub fn status(&self, id: &str) -> Value {
        self.get(&format!("/v1/agents/{id}"))["status"].clone()
    }

    /// Spawns a root agent of `agent_type` with `prompt` (`POST /v1/agents`): its id.
    pub fn spawn(&self, agent_type: &str, prompt: &str) -> String {
        let spawned = self
            .post(
                "/v1/agents",
                serde_json::json!({"agent_type": agent_type, "prompt": prompt}),
            )
            .unwrap_or_else(|e| panic!("spawning a {agent_type}: {e:?}"));
        spawned["agent_id"]
            .as_str()
            .expect("a spawned agent's id")
            .to_string()
    }

    /// Spawns an agent as `body` says (`POST /v1/agents`), which must succeed: its id.
    pub fn spawn_with(&self, body: Value) -> String {
        let spawned = self
            .post("/v1/agents", body.clone())
            .unwrap_or_else(|e| panic!("spawning {body}: {e:?}"));
        spawned["agent_id"]
            .as_str()
            .expect("a spawned agent's id")
            .to_string()
    }

    /// Runs `agentctl --url <this process> --json <args>`, which must succeed: its JSON answer.
    pub fn agentctl(&self, args: &[&str]) -> Value {
        let out = succeeded(self.agentctl_command().arg("--json").args(args));
        serde_json::from_slice(&out).expect("agentctl answers JSON")
    }

    /// Runs `agentctl --url <this process> <args>`, which must succeed: what it prints for a
    /// person.
    pub fn agentctl_text(&self, args: &[&str]) -> String {
        let out = succeeded(self.agentctl_command().args(args));
        String::from_utf8(out).expect("agentctl prints UTF-8")
    }

    /// `agentctl --url <this process>`, to add arguments and run as a test needs.
    pub fn agentctl_command(&self) -> Command {
        let mut cmd = Command::new(binary("agentctl"));
        cmd.args(["--url", &self.url]);
        cmd
    }

    /// The Redis partitions this process owns now (`/v1/info`'s `partitions_owned`).
    pub fn partitions_owned(&self) -> HashSet<u32> {
        self.get("/v1/info")["partitions_owned"]
            .as_array()
            .map(|owned| {
                owned
                    .iter()
                    .filter_map(|v| v.as_u64().and_then(|p| u32::try_from(p).ok()))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// SIGTERM, then wait for a clean exit.
    pub fn stop(self) {
        self.stop_within(Duration::from_secs(10));
    }

    /// SIGTERM, then wait for a clean exit within `limit`; answers how long it took.
    pub fn stop_within(mut self, limit: Duration) -> Duration {
        self.signal("TERM");
        let start = Instant::now();
        let status = eventually_blocking(limit, "agentd to stop after SIGTERM", || {
            self.child.try_wait().expect("wait")
        });
        assert!(status.success(), "agentd exited with {status}");
        start.elapsed()
    }

    /// Sends `signal` (a `kill` name: `STOP`, `CONT`, …) to the process.
    pub fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(self.child.id().to_string())
            .status()
            .expect("kill");
        assert!(status.success(), "kill -{signal} failed");
    }

    /// Waits up to `limit` for the process to exit by itself (a fail point that kills it, a
    /// fatal error), whatever its exit status.
    pub fn wait_exit(mut self, limit: Duration) {
        eventually_blocking(limit, "agentd to exit by itself", || {
            self.child.try_wait().expect("wait")
        });
    }

    /// SIGKILL: no shutdown at all.
    pub fn kill9(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for AgentdProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Waits until `a` and `b` split the `partitions` of their Redis namespace between them, each
/// owning some. Until then a partition may move from one to the other, and an agent of a moving
/// partition has its turn aborted and run again by its new owner.
pub fn wait_balanced(a: &AgentdProcess, b: &AgentdProcess, partitions: u32) {
    eventually_blocking(Duration::from_secs(20), "the partitions to balance", || {
        let (x, y) = (a.partitions_owned(), b.partitions_owned());
        let balanced = x.len() + y.len() == partitions as usize
            && x.is_disjoint(&y)
            && !x.is_empty()
            && !y.is_empty();
        if balanced {
            Ok(())
        } else {
            Err(format!("partitions never balanced: {x:?} {y:?}"))
        }
    })
}
