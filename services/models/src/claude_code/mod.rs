//! The process backend's `claude-code` protocol: one Claude Code CLI process per agent, spoken
//! to in its stream-json protocol ([`protocol`]), following the agent's lifecycle with signals.
//!
//! Each model call writes the agent's new message as one `user` line to the process's stdin and
//! reads the CLI's lines until its `result` line. The CLI runs its own tools: the calls and
//! results it reports come back as [`agentd_ports::CliRun`] steps, which the turn records as
//! already executed. stdin stays open between calls, so one process keeps one session; the
//! session's id (from `system/init`) goes to the agent's record, and a new process for the
//! agent — after a restart, a cancel, a new environment — resumes it (`--resume`). Each agent
//! has its own `CLAUDE_CONFIG_DIR` under the data directory, where the CLI keeps its sessions,
//! and its own working directory unless one is configured; both are stable across restarts,
//! which `--resume` needs (the CLI files sessions by working directory).
//!
//! Signals (seed 001), to the process's group (the CLI and the commands its tools run): pause =
//! SIGTSTP, then SIGSTOP if it has not stopped within the grace period; resume = SIGCONT; cancel
//! = SIGTERM, then SIGKILL after the grace period; terminate = SIGKILL. A call waiting on a
//! paused process does not time out: paused time is not counted. A call that is abandoned (an
//! interrupt drops it) or fails without a `result` line kills its process, whose state is then
//! unknown; the next call resumes the session in a new one. What the CLI reported of such a call
//! (its messages' usage, what they wrote) went to the request's observer as its lines came, so
//! its tokens count as an aborted HTTP call's do. A usage limit waits until the reset the CLI
//! reported.

pub mod protocol;

use agentd_ports::{
    ModelCapabilities, ModelClient, ModelError, ModelRequest, ModelResponse, Purpose,
};
use agentd_proto::Control;
use async_trait::async_trait;
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use protocol::{Launch, TurnAssembly};
use serde_json::Value;
use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

/// How the backend runs the CLI.
#[derive(Debug, Clone)]
pub struct ClaudeCodeSettings {
    /// Program and arguments (agentd adds its flags after them).
    pub command: Vec<String>,
    /// The directory under which each agent gets its own directory: `<home>/<agent_id>/config`
    /// (its `CLAUDE_CONFIG_DIR`) and `<home>/<agent_id>/work`.
    pub home: PathBuf,
    /// The working directory of every agent's CLI; `None` = each agent's own `work` directory.
    pub workdir: Option<PathBuf>,
    /// The model of agents whose type or spawn names none (`--model`); `None` = the CLI's own
    /// choice.
    pub model: Option<String>,
    /// Grace period of the signals (SIGTSTP→SIGSTOP, SIGTERM→SIGKILL).
    pub grace: Duration,
    /// Longest time one call may take, paused time not counted.
    pub timeout: Duration,
}

/// Lines of the CLI's stderr kept for the error of a call whose process exits.
const STDERR_KEPT: usize = 20;

/// One running CLI.
struct CliProcess {
    child: Child,
    stdin: ChildStdin,
    lines: Lines<BufReader<ChildStdout>>,
    stderr: Arc<Mutex<VecDeque<String>>>,
    /// The CLI's running `total_cost_usd` after its last turn.
    total_cost_usd: f64,
    /// Started with `--resume`.
    resumed: bool,
}

type Shared<T> = Arc<Mutex<T>>;

/// Time an agent's process spent paused, so a call's timeout leaves it out.
#[derive(Debug, Default)]
struct PauseClock {
    since: Option<Instant>,
    total: Duration,
}

impl PauseClock {
    /// Paused time so far, the current pause included.
    fn paused(&self) -> Duration {
        self.total + self.since.map_or(Duration::ZERO, |s| s.elapsed())
    }
}

/// What the backend keeps per agent.
#[derive(Default)]
struct AgentSlot {
    /// The session its CLI runs (or last ran): what a new process resumes.
    session_id: Option<String>,
    process: Option<Arc<tokio::sync::Mutex<CliProcess>>>,
    pid: Option<u32>,
    pause: Shared<PauseClock>,
    /// The last thread entry written to the session (by this agentd): what follows it is what
    /// the CLI has not seen, even when an interrupt killed the process that read it.
    sent_through: Option<uuid::Uuid>,
}

/// The backend.
pub struct ClaudeCodeModel {
    settings: ClaudeCodeSettings,
    agents: Shared<HashMap<String, AgentSlot>>,
}

/// Why one attempt of a call failed.
enum CallError {
    Model(ModelError),
    /// The CLI could not resume the session (e.g. its files are gone): a new one is started.
    ResumeFailed(String),
}

impl From<ModelError> for CallError {
    fn from(e: ModelError) -> Self {
        CallError::Model(e)
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The time, ms since the epoch (a rate limit's reset is given as a moment).
fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

fn failed(msg: impl Into<String>) -> ModelError {
    ModelError::Failed(msg.into())
}

/// Sends `signal` to process group `pid` (the CLI was started as its group's leader).
fn signal_group(pid: u32, signal: Signal) {
    if let Ok(raw) = i32::try_from(pid) {
        let _ = killpg(Pid::from_raw(raw), signal);
    }
}

/// Kills the process group of `proc` and reaps its leader.
fn kill_and_reap(pid: Option<u32>, proc: Option<Arc<tokio::sync::Mutex<CliProcess>>>) {
    if let Some(pid) = pid {
        signal_group(pid, Signal::SIGCONT);
        signal_group(pid, Signal::SIGKILL);
    }
    if let Some(p) = proc {
        tokio::spawn(async move {
            let _ = p.lock().await.child.wait().await;
        });
    }
}

/// Kills the process group of `proc` (if one runs), then removes `dir` once its leader exited.
fn remove_after_exit(
    pid: Option<u32>,
    proc: Option<Arc<tokio::sync::Mutex<CliProcess>>>,
    dir: PathBuf,
) {
    if let Some(pid) = pid {
        signal_group(pid, Signal::SIGCONT);
        signal_group(pid, Signal::SIGKILL);
    }
    tokio::spawn(async move {
        if let Some(p) = proc {
            let _ = p.lock().await.child.wait().await;
        }
        match tokio::fs::remove_dir_all(&dir).await {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                tracing::warn!(dir = %dir.display(), error = %e, "removing a deleted agent's CLI directory");
            }
        }
    });
}

/// Kills the process of a call that did not end with a `result` line (dropped by an interrupt,
/// timed out, or its process failed): what the CLI does next is unknown, so the next call
/// resumes the session in a new process.
struct AbandonGuard {
    agents: Shared<HashMap<String, AgentSlot>>,
    agent_id: String,
    proc: Arc<tokio::sync::Mutex<CliProcess>>,
    pid: Option<u32>,
    armed: bool,
}

impl Drop for AbandonGuard {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        if let Some(slot) = lock(&self.agents).get_mut(&self.agent_id)
            && slot
                .process
                .as_ref()
                .is_some_and(|p| Arc::ptr_eq(p, &self.proc))
        {
            slot.process = None;
            slot.pid = None;
        }
        if let Some(pid) = self.pid {
            signal_group(pid, Signal::SIGCONT);
            signal_group(pid, Signal::SIGKILL);
        }
    }
}

/// A path component made of an agent id (uuid text in practice; anything else is escaped).
fn dir_name(agent_id: &str) -> String {
    agent_id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

impl ClaudeCodeModel {
    /// A backend running `settings.command` once per agent.
    pub fn new(mut settings: ClaudeCodeSettings) -> Self {
        // The CLI runs in another working directory: a relative program path is made absolute
        // against agentd's own (a bare name is looked up on `PATH`).
        if let Some(program) = settings.command.first_mut()
            && program.contains('/')
            && let Ok(abs) = std::path::absolute(&*program)
        {
            *program = abs.display().to_string();
        }
        ClaudeCodeModel {
            settings,
            agents: Arc::default(),
        }
    }

    /// The OS process id of an agent's CLI, if one runs.
    pub fn pid(&self, agent_id: &str) -> Option<u32> {
        lock(&self.agents).get(agent_id).and_then(|s| s.pid)
    }

    /// The session the backend knows for an agent (from its CLI's `system/init`).
    pub fn session_id(&self, agent_id: &str) -> Option<String> {
        lock(&self.agents)
            .get(agent_id)
            .and_then(|s| s.session_id.clone())
    }

    /// The agent's process (started if it has none: resuming its session unless `fresh`), its
    /// pause clock, and whether it starts a new session.
    #[allow(clippy::type_complexity)]
    fn process_for(
        &self,
        req: &ModelRequest,
        fresh: bool,
    ) -> Result<
        (
            Arc<tokio::sync::Mutex<CliProcess>>,
            Option<u32>,
            Shared<PauseClock>,
            bool,
        ),
        ModelError,
    > {
        let mut agents = lock(&self.agents);
        let slot = agents.entry(req.agent_id.to_string()).or_default();
        if fresh {
            slot.session_id = None;
            kill_and_reap(slot.pid.take(), slot.process.take());
        }
        if let Some(p) = &slot.process {
            return Ok((p.clone(), slot.pid, slot.pause.clone(), false));
        }
        let resume = if fresh {
            None
        } else {
            slot.session_id
                .clone()
                .or_else(|| req.cli_session_id.clone())
        };
        let (program, args) = self
            .settings
            .command
            .split_first()
            .ok_or_else(|| failed("model.command is empty"))?;
        let own = self.settings.home.join(dir_name(&req.agent_id));
        let config_dir = own.join("config");
        let workdir = self
            .settings
            .workdir
            .clone()
            .unwrap_or_else(|| own.join("work"));
        for dir in [&config_dir, &workdir] {
            std::fs::create_dir_all(dir)
                .map_err(|e| failed(format!("creating {}: {e}", dir.display())))?;
        }
        let flags = protocol::flags(&Launch {
            system_prompt: &req.system_prompt,
            tools: &req.cli_tools,
            model: req.model.as_deref().or(self.settings.model.as_deref()),
            resume: resume.as_deref(),
        });
        let mut child = Command::new(program)
            .args(args)
            .args(&flags)
            .current_dir(&workdir)
            .envs(&req.env)
            .env("CLAUDE_CONFIG_DIR", &config_dir)
            .env("AGENTD_AGENT_ID", &*req.agent_id)
            .env("AGENTD_AGENT_TYPE", &*req.agent_type)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .process_group(0)
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| failed(format!("starting `{program}`: {e}")))?;
        let stdin = child.stdin.take().ok_or_else(|| failed("no stdin"))?;
        let stdout = child.stdout.take().ok_or_else(|| failed("no stdout"))?;
        let stderr_kept: Shared<VecDeque<String>> = Arc::default();
        if let Some(stderr) = child.stderr.take() {
            let kept = stderr_kept.clone();
            let agent_id = req.agent_id.clone();
            tokio::spawn(async move {
                let mut lines = BufReader::new(stderr).lines();
                while let Ok(Some(line)) = lines.next_line().await {
                    tracing::debug!(agent_id = %agent_id, line, "agent CLI stderr");
                    let mut kept = lock(&kept);
                    if kept.len() == STDERR_KEPT {
                        kept.pop_front();
                    }
                    kept.push_back(line);
                }
            });
        }
        tracing::info!(agent_id = %req.agent_id, pid = child.id(), resume = resume.as_deref(), "started the agent CLI");
        slot.pid = child.id();
        *lock(&slot.pause) = PauseClock::default();
        let p = Arc::new(tokio::sync::Mutex::new(CliProcess {
            child,
            stdin,
            lines: BufReader::new(stdout).lines(),
            stderr: stderr_kept,
            total_cost_usd: 0.0,
            resumed: resume.is_some(),
        }));
        slot.process = Some(p.clone());
        Ok((p, slot.pid, slot.pause.clone(), resume.is_none()))
    }

    /// One attempt of a call: the message out, the CLI's lines in until its `result`.
    async fn attempt(&self, req: &ModelRequest, fresh: bool) -> Result<ModelResponse, CallError> {
        let mut fresh = fresh;
        let (proc, pid, pause, new_session, mut p) = loop {
            let (proc, pid, pause, new_session) = self.process_for(req, fresh)?;
            fresh = false;
            let p = proc.clone().lock_owned().await;
            // A call abandoned while this one waited for the process (an interrupt) killed it:
            // this call takes the next one.
            let current = lock(&self.agents)
                .get(&*req.agent_id)
                .and_then(|slot| slot.process.as_ref())
                .is_some_and(|current| Arc::ptr_eq(current, &proc));
            if current {
                break (proc, pid, pause, new_session, p);
            }
        };
        let mut guard = AbandonGuard {
            agents: self.agents.clone(),
            agent_id: req.agent_id.to_string(),
            proc,
            pid,
            armed: true,
        };
        let text = if req.purpose == Purpose::Compact {
            // agentd compacts its copy of the thread; the CLI compacts its session with its own
            // command, and its summary becomes agentd's.
            protocol::COMPACT.to_string()
        } else {
            let sent_through = lock(&self.agents).get_mut(&*req.agent_id).and_then(|slot| {
                std::mem::replace(&mut slot.sent_through, req.thread.last().map(|e| e.id))
            });
            protocol::message_text(&req.thread, new_session, sent_through)
        };
        let line = protocol::user_line(&text);
        let io = |e: std::io::Error| failed(format!("agent CLI: {e}"));
        p.stdin.write_all(line.as_bytes()).await.map_err(io)?;
        p.stdin.write_all(b"\n").await.map_err(io)?;
        p.stdin.flush().await.map_err(io)?;
        let started = Instant::now();
        let paused_before = lock(&pause).paused();
        let prior_cost = p.total_cost_usd;
        let mut turn = TurnAssembly::default();
        loop {
            let wait = {
                let clock = lock(&pause);
                let active = started
                    .elapsed()
                    .saturating_sub(clock.paused().saturating_sub(paused_before));
                if clock.since.is_some() {
                    // Paused: no timeout runs; look again in a while.
                    Duration::from_millis(500)
                } else if active >= self.settings.timeout {
                    return Err(failed(format!(
                        "the agent CLI did not end its turn within {:?}",
                        self.settings.timeout
                    ))
                    .into());
                } else {
                    self.settings.timeout - active
                }
            };
            let next = match tokio::time::timeout(wait, p.lines.next_line()).await {
                Err(_) => continue,
                Ok(next) => next.map_err(io)?,
            };
            let Some(line) = next else {
                let stderr = lock(&p.stderr)
                    .iter()
                    .cloned()
                    .collect::<Vec<_>>()
                    .join("\n");
                if p.resumed && turn.session_id.is_none() {
                    return Err(CallError::ResumeFailed(stderr));
                }
                return Err(failed(format!("the agent CLI exited: {stderr}")).into());
            };
            let Ok(v) = serde_json::from_str::<Value>(&line) else {
                tracing::debug!(agent_id = %req.agent_id, line, "agent CLI output that is not JSON");
                continue;
            };
            let had_session = turn.session_id.is_some();
            let reading = protocol::Reading {
                prior_cost_usd: prior_cost,
                now_ms: now_ms(),
                observer: req.observer.as_deref(),
            };
            let ended = turn.line(&v, reading);
            if !had_session && let Some(id) = &turn.session_id {
                // Known at once, so a call abandoned later still resumes this session.
                if let Some(slot) = lock(&self.agents).get_mut(&*req.agent_id) {
                    slot.session_id = Some(id.clone());
                }
            }
            let Some(ended) = ended else {
                continue;
            };
            if let Some(total) = v.get("total_cost_usd").and_then(Value::as_f64) {
                p.total_cost_usd = total;
            }
            if ended.is_err() && p.resumed && turn.session_id.is_none() {
                let stderr = lock(&p.stderr)
                    .iter()
                    .cloned()
                    .collect::<Vec<_>>()
                    .join("\n");
                return Err(CallError::ResumeFailed(stderr));
            }
            // The turn ended as the CLI says: its process goes on with the session.
            guard.armed = false;
            return ended.map_err(CallError::Model);
        }
    }
}

#[async_trait]
impl ModelClient for ClaudeCodeModel {
    fn backend(&self) -> &'static str {
        "process"
    }

    /// One CLI per agent, which runs its own tools and reports whole steps: a subscription's
    /// rate limit reaches each CLI on its own.
    fn capabilities(&self) -> ModelCapabilities {
        ModelCapabilities::default()
    }

    async fn complete(&self, req: ModelRequest) -> Result<ModelResponse, ModelError> {
        match self.attempt(&req, false).await {
            Ok(r) => Ok(r),
            Err(CallError::Model(e)) => Err(e),
            Err(CallError::ResumeFailed(why)) => {
                tracing::warn!(agent_id = %req.agent_id, why, "the agent CLI could not resume its session; starting a new one");
                match self.attempt(&req, true).await {
                    Ok(r) => Ok(r),
                    Err(CallError::Model(e)) => Err(e),
                    Err(CallError::ResumeFailed(why)) => Err(failed(why)),
                }
            }
        }
    }

    fn control(&self, agent_id: &str, control: Control) {
        let mut agents = lock(&self.agents);
        if control == Control::Delete {
            // A deleted agent's history is gone: its CLI's sessions and its own working
            // directory go with it, once its process (if one runs) has exited.
            let (pid, proc) = agents.remove(agent_id).map_or((None, None), |mut slot| {
                (slot.pid.take(), slot.process.take())
            });
            drop(agents);
            remove_after_exit(pid, proc, self.settings.home.join(dir_name(agent_id)));
            return;
        }
        let Some(slot) = agents.get_mut(agent_id) else {
            return;
        };
        let grace = self.settings.grace;
        match control {
            Control::Pause => {
                let mut clock = lock(&slot.pause);
                let since = *clock.since.get_or_insert_with(Instant::now);
                drop(clock);
                let Some(pid) = slot.pid else { return };
                signal_group(pid, Signal::SIGTSTP);
                let pause = Arc::clone(&slot.pause);
                tokio::spawn(async move {
                    tokio::time::sleep(grace).await;
                    // Only while this pause holds: a resume within the grace (after the CLI
                    // stopped on SIGTSTP and was continued) must not be stopped again.
                    let still_paused = lock(&pause).since == Some(since);
                    if still_paused && !crate::process::is_stopped(pid) {
                        signal_group(pid, Signal::SIGSTOP);
                    }
                });
            }
            Control::Resume => {
                let mut clock = lock(&slot.pause);
                if let Some(since) = clock.since.take() {
                    clock.total += since.elapsed();
                }
                drop(clock);
                if let Some(pid) = slot.pid {
                    signal_group(pid, Signal::SIGCONT);
                }
            }
            Control::Cancel => {
                let (pid, proc) = (slot.pid.take(), slot.process.take());
                *lock(&slot.pause) = PauseClock::default();
                let Some(pid) = pid else { return };
                tokio::spawn(async move {
                    // A stopped process must run to handle SIGTERM.
                    signal_group(pid, Signal::SIGCONT);
                    signal_group(pid, Signal::SIGTERM);
                    tokio::time::sleep(grace).await;
                    kill_and_reap(Some(pid), proc);
                });
            }
            Control::Terminate => {
                *lock(&slot.pause) = PauseClock::default();
                kill_and_reap(slot.pid.take(), slot.process.take());
            }
            Control::Close | Control::Delete => {
                // Closed: the process ends, its session stays on disk (history is kept).
                if let Some(mut slot) = agents.remove(agent_id) {
                    kill_and_reap(slot.pid.take(), slot.process.take());
                }
            }
        }
    }

    fn conversation_replaced(&self, agent_id: &str) {
        if let Some(slot) = lock(&self.agents).get_mut(agent_id) {
            slot.session_id = None;
            slot.sent_through = None;
            kill_and_reap(slot.pid.take(), slot.process.take());
        }
    }
}
