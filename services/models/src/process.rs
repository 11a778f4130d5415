//! The process backend: one OS process per agent running a configured command (for example a
//! coding-agent CLI), spoken to in JSON lines, and following the agent's lifecycle with signals.
//!
//! Framing: for each model call agentd writes one line to the process's stdin,
//! `{"type":"turn","id":…,"agent_id":…,"agent_type":…,"title":…,"system_prompt":…,"thread":[…],"tools":[…]}`,
//! and reads one line from its stdout: `{"id":…,"text":…,"tool_calls":[{"id","name","arguments"}],
//! "usage":{"input","output","cache_write","cache_read"}}`, or `{"id":…,"error":"…"}`, or
//! `{"id":…,"rate_limited_ms":N}`. Lines that are not JSON are skipped (a CLI's chatter).
//!
//! `id` is new for every request, and an answer echoes it: a call aborted while the process
//! works on it (an interrupt) leaves an answer behind, which the next call reads first and
//! discards because its `id` is another's. An answer without an `id` is taken as it comes (a
//! program that does not echo ids cannot be told its late answers apart).
//!
//! Signals: pause = SIGTSTP, then SIGSTOP if the process has not stopped within the grace
//! period (SIGTSTP can be caught); resume = SIGCONT; cancel = SIGTERM, then SIGKILL after the
//! grace period; terminate = SIGKILL. Every child is reaped, and killed when agentd drops the
//! backend (`kill_on_drop`).

use agentd_ports::{ModelCapabilities, ModelClient, ModelError, ModelRequest, ModelResponse};
use agentd_proto::{Control, ToolCall, Usage};
use async_trait::async_trait;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

struct Proc {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

/// The process backend.
pub struct ProcessModel {
    command: Vec<String>,
    grace: Duration,
    timeout: Duration,
    procs: Mutex<HashMap<String, Arc<tokio::sync::Mutex<Proc>>>>,
    pids: Mutex<HashMap<String, u32>>,
    /// The pause in force per agent (a number new with each pause; gone once resumed): a
    /// pause's escalation to SIGSTOP applies only while that pause holds.
    pauses: Arc<Mutex<HashMap<String, u64>>>,
    /// The number of the next pause.
    next_pause: std::sync::atomic::AtomicU64,
}

impl ProcessModel {
    /// Runs `command` (program and arguments) once per agent.
    pub fn new(command: Vec<String>, grace: Duration, timeout: Duration) -> Self {
        ProcessModel {
            command,
            grace,
            timeout,
            procs: Mutex::new(HashMap::new()),
            pids: Mutex::new(HashMap::new()),
            pauses: Arc::default(),
            next_pause: std::sync::atomic::AtomicU64::new(1),
        }
    }

    /// The OS process id of an agent's process, if it runs.
    pub fn pid(&self, agent_id: &str) -> Option<u32> {
        self.pids
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(agent_id)
            .copied()
    }

    fn process(&self, req: &ModelRequest) -> Result<Arc<tokio::sync::Mutex<Proc>>, ModelError> {
        let mut procs = self.procs.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(p) = procs.get(&*req.agent_id) {
            return Ok(p.clone());
        }
        let (program, args) = self
            .command
            .split_first()
            .ok_or_else(|| ModelError::Failed("model.command is empty".into()))?;
        let mut child = Command::new(program)
            .args(args)
            .envs(&req.env)
            .env("AGENTD_AGENT_ID", &*req.agent_id)
            .env("AGENTD_AGENT_TYPE", &*req.agent_type)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| ModelError::Failed(format!("starting `{program}`: {e}")))?;
        let stdin = child
            .stdin
            .take()
            .ok_or_else(|| ModelError::Failed("no stdin".into()))?;
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| ModelError::Failed("no stdout".into()))?;
        if let Some(pid) = child.id() {
            self.pids
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(req.agent_id.to_string(), pid);
        }
        let p = Arc::new(tokio::sync::Mutex::new(Proc {
            child,
            stdin,
            stdout: BufReader::new(stdout),
        }));
        procs.insert(req.agent_id.to_string(), p.clone());
        Ok(p)
    }

    fn forget(&self, agent_id: &str) -> Option<Arc<tokio::sync::Mutex<Proc>>> {
        self.pids
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(agent_id);
        self.procs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(agent_id)
    }
}

/// Whether process `pid` is stopped (state `T` in `/proc/<pid>/stat`).
pub fn is_stopped(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rsplit(')')
                .next()
                .map(|rest| rest.trim_start().starts_with('T'))
        })
        .unwrap_or(false)
}

/// Parses one answer line.
pub fn parse_line(v: &Value) -> Result<ModelResponse, ModelError> {
    if let Some(e) = v.get("error").and_then(Value::as_str) {
        return Err(ModelError::Failed(e.to_string()));
    }
    if let Some(ms) = v.get("rate_limited_ms").and_then(Value::as_u64) {
        return Err(ModelError::RateLimited { retry_after_ms: ms });
    }
    let tool_calls = v
        .get("tool_calls")
        .cloned()
        .map(serde_json::from_value::<Vec<ToolCall>>)
        .transpose()
        .map_err(|e| {
            ModelError::Failed(format!("malformed tool_calls from the agent process: {e}"))
        })?
        .unwrap_or_default();
    let usage = v
        .get("usage")
        .cloned()
        .map(serde_json::from_value::<Usage>)
        .transpose()
        .map_err(|e| ModelError::Failed(format!("malformed usage from the agent process: {e}")))?
        .unwrap_or_default();
    Ok(ModelResponse {
        text: v
            .get("text")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string(),
        tool_calls,
        usage,
        cut_off: false,
        cli_run: None,
        model: None,
    })
}

#[async_trait]
impl ModelClient for ProcessModel {
    fn backend(&self) -> &'static str {
        "process"
    }

    /// A process of its own per agent: what limits it is its agent's alone, and its answer
    /// comes as one line.
    fn capabilities(&self) -> ModelCapabilities {
        ModelCapabilities::default()
    }

    async fn complete(&self, req: ModelRequest) -> Result<ModelResponse, ModelError> {
        // Calls paired, a forward as user input, never ending with the model's own answer.
        let thread = crate::sent::conversation(&req)?;
        let proc = self.process(&req)?;
        let id = uuid::Uuid::new_v4().to_string();
        let line = json!({
            "type": "turn", "id": &id, "agent_id": &*req.agent_id, "agent_type": &*req.agent_type, "title": &*req.title,
            "system_prompt": &*req.system_prompt, "thread": thread.iter().map(|e| &**e).collect::<Vec<&agentd_proto::ThreadEntry>>(), "tools": req.tools.iter().map(|t| json!({
                "name": t.name, "description": t.description, "parameters": t.parameters
            })).collect::<Vec<_>>(),
        })
        .to_string();
        let mut p = proc.lock().await;
        let io = async {
            p.stdin.write_all(line.as_bytes()).await?;
            p.stdin.write_all(b"\n").await?;
            p.stdin.flush().await?;
            loop {
                let mut answer = String::new();
                if p.stdout.read_line(&mut answer).await? == 0 {
                    return Err(std::io::Error::new(
                        std::io::ErrorKind::UnexpectedEof,
                        "the agent process exited",
                    ));
                }
                let Ok(v) = serde_json::from_str::<Value>(answer.trim()) else {
                    continue;
                };
                match v.get("id").and_then(Value::as_str) {
                    Some(other) if other != id => {
                        tracing::debug!(agent_id = %req.agent_id, answer_id = other, "discarding the late answer to an aborted call");
                    }
                    _ => return Ok(v),
                }
            }
        };
        let v = tokio::time::timeout(self.timeout, io)
            .await
            .map_err(|_| {
                ModelError::Failed(format!(
                    "the agent process did not answer within {:?}",
                    self.timeout
                ))
            })?
            .map_err(|e| ModelError::Failed(format!("agent process: {e}")))?;
        parse_line(&v)
    }

    fn control(&self, agent_id: &str, control: Control) {
        let Some(pid) = self.pid(agent_id) else {
            return;
        };
        let target = Pid::from_raw(pid as i32);
        let grace = self.grace;
        let mut pauses = self.pauses.lock().unwrap_or_else(|p| p.into_inner());
        match control {
            Control::Pause => {
                let pause = *pauses.entry(agent_id.to_string()).or_insert_with(|| {
                    self.next_pause
                        .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
                });
                drop(pauses);
                let _ = kill(target, Signal::SIGTSTP);
                let (agent, pauses) = (agent_id.to_string(), Arc::clone(&self.pauses));
                tokio::spawn(async move {
                    tokio::time::sleep(grace).await;
                    // Only while this pause holds: a process that stopped on SIGTSTP and was
                    // resumed within the grace is not stopped again.
                    let still = pauses.lock().unwrap_or_else(|p| p.into_inner()).get(&agent)
                        == Some(&pause);
                    if still && !is_stopped(pid) {
                        let _ = kill(target, Signal::SIGSTOP);
                    }
                });
            }
            Control::Resume => {
                pauses.remove(agent_id);
                drop(pauses);
                let _ = kill(target, Signal::SIGCONT);
            }
            Control::Cancel | Control::Terminate | Control::Close | Control::Delete => {
                pauses.remove(agent_id);
                drop(pauses);
                let proc = self.forget(agent_id);
                let graceful = control == Control::Cancel;
                tokio::spawn(async move {
                    // A stopped process must run to handle SIGTERM.
                    let _ = kill(target, Signal::SIGCONT);
                    if graceful {
                        let _ = kill(target, Signal::SIGTERM);
                        tokio::time::sleep(grace).await;
                    }
                    let _ = kill(target, Signal::SIGKILL);
                    if let Some(p) = proc {
                        // Reap it: no zombie left behind.
                        let _ = p.lock().await.child.wait().await;
                    }
                });
            }
        }
    }
}
