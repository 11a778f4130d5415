//! The persisted record of one agent, and the channel descriptor that tells the router where
//! the agent's output goes.

use crate::manage::ManageOptions;
use crate::status::AgentStatus;
use crate::usage::Usage;
use serde::{Deserialize, Serialize};

/// Agent ids are strings (uuid v7 text); an agent's id is also its session and thread id.
pub type AgentId = String;

/// An id or a name a record shares with its copies: the record is copied on write (an agent
/// changes it while a store batch or a turn still reads the old version), and a copy then
/// counts references instead of copying the strings. Written as a plain string.
pub type SharedName = std::sync::Arc<str>;

/// Where an agent's output is delivered (seed 000: the thread's descriptor).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Channel {
    /// A root: output stays on its thread (readers use the API or events).
    #[default]
    None,
    /// A worker thread created through `Manage send_message`. Shared, not boxed: it never
    /// changes after the spawn, and every change of the worker's record copies the record.
    Manage(std::sync::Arc<ManageChannel>),
    /// A sub-agent created by `spawn_agent` (seeds 002 and 004).
    Spawn {
        /// The parent agent.
        parent_id: AgentId,
        /// Spawned with `background: true` (seed 004): its output is queued for the parent
        /// like any message, instead of being handled before what is queued.
        #[serde(default)]
        background: bool,
    },
}

/// The descriptor of a worker thread created through `Manage send_message`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ManageChannel {
    /// The parent agent (whose thread is the parent thread).
    pub parent_id: AgentId,
    /// The worker's trimmed title.
    pub worker_title: String,
    /// The thread alias under the parent.
    pub alias: String,
    /// Mode, prefix and correlation settings in force for this thread.
    pub options: ManageOptions,
}

impl Channel {
    /// The parent this channel forwards to, if any.
    pub fn parent_id(&self) -> Option<&str> {
        match self {
            Channel::None => None,
            Channel::Manage(m) => Some(&m.parent_id),
            Channel::Spawn { parent_id, .. } => Some(parent_id),
        }
    }
}

/// Whether `value` is its type's default (a record field left out when stored).
fn is_default<T: Default + PartialEq>(value: &T) -> bool {
    *value == T::default()
}

/// What agentd keeps of the agent CLI that runs an agent (the process backend's `claude-code`
/// protocol).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct AgentCli {
    /// The CLI's session (the `session_id` of its `system/init` line): a new process for the
    /// agent resumes it (`--resume`), so the conversation survives restarts. `None` after a
    /// reset, until the next call starts a new one.
    pub session_id: Option<String>,
    /// What the CLI itself reported its calls cost, USD, added up; agentd prices the same
    /// calls' usage with its own table into `cost_usd`.
    pub reported_cost_usd: f64,
}

/// Everything agentd keeps about one agent besides its thread. A stored type only (the API
/// shows [`crate::AgentView`]s made from it): a field at its default is not written, so the
/// stored record of a small agent is a few hundred bytes, and every such field reads back as
/// its default.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentRecord {
    /// Agent id = session id = thread id.
    pub id: AgentId,
    /// Parent agent, `None` for roots.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_id: Option<SharedName>,
    /// The root of this agent's tree (itself for roots).
    pub root_id: SharedName,
    /// 0 for roots, parent depth + 1 otherwise.
    #[serde(default, skip_serializing_if = "is_default")]
    pub depth: u32,
    /// Display title (workers are addressed by it, trimmed).
    pub title: SharedName,
    /// Agent type name (a key of the agent type table).
    pub agent_type: SharedName,
    /// Current status.
    pub status: AgentStatus,
    /// Why the status was entered (e.g. a pause reason), if said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_reason: Option<String>,
    /// A foreground agent: a root created by a person or a service without `background`
    /// (seed 003). Sub-agents are never foreground.
    #[serde(default, skip_serializing_if = "is_default")]
    pub foreground: bool,
    /// Tools this agent may use; `None` means "what its type allows".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allowed_tools: Option<Vec<String>>,
    /// Where its output goes.
    #[serde(default, skip_serializing_if = "is_default")]
    pub channel: Channel,
    /// Last error message, kept after recovery for inspection.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// Tokens used by this agent's own model calls.
    #[serde(default, skip_serializing_if = "is_default")]
    pub usage: Usage,
    /// Cost of `usage` in USD.
    #[serde(default, skip_serializing_if = "is_default")]
    pub cost_usd: f64,
    /// Current phase (from `=== PHASE N COMPLETE ===` markers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<u32>,
    /// What the agent is doing now, in a few words.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_step: Option<String>,
    /// Progress 0.0–1.0: phase / the type's phase count, when the type declares one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress: Option<f64>,
    /// When a rate-limited agent resumes by itself, ms since the epoch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resume_at_ms: Option<u64>,
    /// Model provider (a `[providers.<name>]` of the config); `None` = the default `[model]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    /// Model name for the provider; `None` = the type's or the provider's default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Environment variables of the agent: passed to a process-backend agent's process and
    /// saved in checkpoints (restoring reinjects them).
    #[serde(default, skip_serializing_if = "is_default")]
    pub env: std::collections::BTreeMap<String, String>,
    /// Turns completed.
    #[serde(default, skip_serializing_if = "is_default")]
    pub turns: u64,
    /// Spending limits (inherited from and capped by the parent's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<Box<crate::usage::Budget>>,
    /// Scheduling priority of its turns.
    #[serde(default, skip_serializing_if = "is_default")]
    pub priority: crate::usage::Priority,
    /// Agents it depends on: it runs once each is met (`waiting_dependency` until then).
    #[serde(default, skip_serializing_if = "is_default")]
    pub depends_on: Vec<AgentId>,
    /// Its `depends_on` are settled: all met, or one failed it (or a cancel or terminate
    /// ended the wait). From then on they are never checked again, whatever becomes of them.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub dependencies_settled: bool,
    /// What it does when a dependency fails, is cancelled or terminated, as its spawn asked;
    /// `None`: `limits.on_dependency_failure` at the time (also for records written before the
    /// spawn could ask).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_dependency_failure: Option<crate::event::OnDependencyFailure>,
    /// Attempts of the current task (1 on the first run; more after automatic retries and
    /// after a crash re-ran it).
    #[serde(default, skip_serializing_if = "is_default")]
    pub attempts: u32,
    /// The inbox item the latest turn handled (a re-run of the same item is another attempt).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_task: Option<uuid::Uuid>,
    /// The steps of `current_task`'s turn whose usage `usage` counts already. A turn re-run
    /// after a crash finds its recorded steps in the thread, each carrying its usage, and counts
    /// those past this mark: a restart neither loses a step's tokens nor counts them twice.
    #[serde(default, skip_serializing_if = "is_default")]
    pub task_steps_counted: u32,
    /// The trace context of `current_task`'s latest turn (its trace and its `invoke_agent`
    /// span), stored as the turn starts: a run after a crash, whose first span was never
    /// exported, links to it; the views show its trace id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<crate::trace::TraceContext>,
    /// The yield result, once the agent completed its task.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Box<serde_json::Value>>,
    /// Its agent CLI's session and reported cost, for an agent an agent CLI runs (the process
    /// backend's `claude-code` protocol); `None` for the others.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_cli: Option<Box<AgentCli>>,
    /// The first words of its prompt (the spawn's first message, [`prompt_preview`]): what
    /// tells apart agents of one type and title in a list; `None` without a prompt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_preview: Option<String>,
    /// Creation time, ms since the epoch.
    pub created_at_ms: u64,
    /// Last change, ms since the epoch.
    pub updated_at_ms: u64,
}

/// Most characters of a [`prompt_preview`], its ellipsis included.
pub const PROMPT_PREVIEW_CHARS: usize = 80;

/// The first words of `prompt` on one line, cut at a word boundary to at most
/// [`PROMPT_PREVIEW_CHARS`] characters with `…` when cut (a first word longer than that is cut
/// inside); `None` for a prompt of only whitespace.
pub fn prompt_preview(prompt: &str) -> Option<String> {
    let mut out = String::new();
    let mut chars = 0;
    for word in prompt.split_whitespace() {
        let len = word.chars().count();
        let sep = usize::from(!out.is_empty());
        if chars + sep + len > PROMPT_PREVIEW_CHARS {
            if out.is_empty() {
                out.extend(word.chars().take(PROMPT_PREVIEW_CHARS - 1));
            }
            out.push('…');
            return Some(out);
        }
        if sep == 1 {
            out.push(' ');
        }
        out.push_str(word);
        chars += sep + len;
    }
    (!out.is_empty()).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::{PROMPT_PREVIEW_CHARS, prompt_preview};

    #[test]
    fn a_prompt_preview_is_its_first_words_on_one_line() {
        assert_eq!(
            prompt_preview("  plan the\n release  "),
            Some("plan the release".into())
        );
        assert_eq!(prompt_preview(" \n "), None);
        let long = "word ".repeat(40);
        let cut = prompt_preview(&long).unwrap_or_default();
        assert!(cut.ends_with("word…"), "{cut}");
        assert!(cut.chars().count() <= PROMPT_PREVIEW_CHARS, "{cut}");
        let one = "x".repeat(200);
        let cut = prompt_preview(&one).unwrap_or_default();
        assert_eq!(cut.chars().count(), PROMPT_PREVIEW_CHARS);
        assert!(cut.ends_with('…'));
    }
}
