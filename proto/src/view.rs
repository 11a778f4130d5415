//! What agentd answers when asked about agents: one agent ([`AgentView`], [`Inspection`]), a
//! list of them ([`AgentList`]), their trees ([`AgentTrees`] of [`TreeNode`]s) and the work
//! queue ([`WorkQueue`] of [`QueueTask`]s).
//!
//! These are wire shapes: the HTTP API, the command stream and the `inspect_agent` and
//! `list_agents` tools answer them as JSON objects, and a process relays an [`Inspection`] to
//! another as one. Every field is written, `None` as `null`: clients read a missing value as
//! `null`, never as an absent key.

use crate::record::{AgentId, AgentRecord, Channel};
use crate::status::AgentStatus;
use crate::usage::{Budget, Priority, Usage};
use serde::{Deserialize, Serialize};

/// What an agent's record says about it, as every view of the agent shows it. Secrets stay
/// out: of its environment only the variable names are shown.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AgentSummary {
    /// Agent id = session id = thread id.
    pub agent_id: AgentId,
    /// Parent agent, `None` for roots.
    pub parent_id: Option<AgentId>,
    /// The root of its tree (itself for roots).
    pub root_id: AgentId,
    /// Display title.
    pub title: String,
    /// Agent type name.
    pub agent_type: String,
    /// 0 for roots, parent depth + 1 otherwise.
    pub depth: u32,
    /// Current status.
    pub status: AgentStatus,
    /// Why the status was entered, if said.
    pub status_reason: Option<String>,
    /// Created by a person or a service (not by another agent).
    pub foreground: bool,
    /// Current phase.
    pub phase: Option<u32>,
    /// What the agent is doing now, in a few words: while a turn runs, the turn's step
    /// (`calling model`, `running tool <name>`); otherwise the last milestone (`phase N
    /// complete`), or `null`.
    pub current_step: Option<String>,
    /// Progress 0.0–1.0 (seed 001: always a number): 1.0 once completed, else phase / the
    /// type's phase count when it declares one, else 0.
    #[serde(default, deserialize_with = "number_or_zero")]
    pub progress: f64,
    /// When a rate-limited agent resumes by itself, ms since the epoch.
    pub resume_at_ms: Option<u64>,
    /// Model provider, `None` = the default.
    pub provider: Option<String>,
    /// Model name, `None` = the type's or the provider's default.
    pub model: Option<String>,
    /// The names of its environment variables (never their values).
    pub env: Vec<String>,
    /// Last error message.
    pub last_error: Option<String>,
    /// Tokens of its own model calls, by kind.
    pub usage: Usage,
    /// `usage` added up.
    pub tokens_used: u64,
    /// Cost of `usage` in USD.
    pub cost_usd: f64,
    /// The cost its agent CLI reported for the same calls, USD (an agent an agent CLI runs);
    /// `null` for the others.
    #[serde(default)]
    pub reported_cost_usd: Option<f64>,
    /// Its agent CLI's session, which a new process resumes; `null` when no agent CLI runs
    /// it or after a reset.
    #[serde(default)]
    pub cli_session_id: Option<String>,
    /// The remote A2A agent's context this agent talks in (its provider is of kind `a2a`;
    /// `cli_session_id` holds it as JSON); `null` for the others, before its first answer or
    /// after a reset.
    #[serde(default)]
    pub remote_context_id: Option<String>,
    /// The remote A2A task waiting for this agent's next message (the remote asked for
    /// input); `null` when none waits.
    #[serde(default)]
    pub remote_task_id: Option<String>,
    /// Turns completed.
    pub turns: u64,
    /// Attempts of the current task.
    pub attempts: u32,
    /// Scheduling priority of its turns.
    pub priority: Priority,
    /// Agents it depends on: it runs once each is met (`docs/lifecycle.md`).
    pub depends_on: Vec<AgentId>,
    /// Spending limits.
    pub budget: Option<Budget>,
    /// The yield result, once it completed its task.
    pub result: Option<serde_json::Value>,
    /// Where its output goes.
    pub channel: Channel,
    /// The first words of its prompt, at most 80 characters (cut with `…`): with its title and
    /// age, what tells apart agents of one type; `null` for one spawned without a prompt.
    #[serde(default)]
    pub prompt_preview: Option<String>,
    /// Creation time, ms since the epoch.
    pub created_at_ms: u64,
    /// Last change, ms since the epoch.
    pub updated_at_ms: u64,
    /// `updated_at_ms` as an RFC 3339 UTC timestamp (seed 001's `lastUpdate`).
    #[serde(default)]
    pub last_update: String,
    /// The trace of its latest turn, 32 hex digits (as tracing back ends show it), OpenTelemetry
    /// export on or off; `null` before its first turn.
    #[serde(default)]
    pub trace_id: Option<String>,
}

/// A progress written by a process that still wrote `null` for "unknown" reads as 0.
fn number_or_zero<'de, D: serde::Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    Ok(Option::<f64>::deserialize(d)?.unwrap_or(0.0))
}

impl AgentSummary {
    /// The summary of `rec`.
    pub fn of(rec: &AgentRecord) -> Self {
        let session = rec.agent_cli.as_ref().and_then(|c| c.session_id.clone());
        let remote = crate::RemoteA2aSession::parse(session.as_deref());
        AgentSummary {
            agent_id: rec.id.clone(),
            parent_id: rec.parent_id.as_deref().map(String::from),
            root_id: rec.root_id.to_string(),
            title: rec.title.to_string(),
            agent_type: rec.agent_type.to_string(),
            depth: rec.depth,
            status: rec.status,
            status_reason: rec.status_reason.clone(),
            foreground: rec.foreground,
            phase: rec.phase,
            current_step: rec.current_step.clone(),
            progress: if rec.status == AgentStatus::Completed {
                1.0
            } else {
                rec.progress.unwrap_or(0.0)
            },
            resume_at_ms: rec.resume_at_ms,
            provider: rec.provider.clone(),
            model: rec.model.clone(),
            env: rec.env.keys().cloned().collect(),
            last_error: rec.last_error.clone(),
            usage: rec.usage,
            tokens_used: rec.usage.total(),
            cost_usd: rec.cost_usd,
            reported_cost_usd: rec.agent_cli.as_ref().map(|c| c.reported_cost_usd),
            cli_session_id: session.clone(),
            remote_context_id: remote.as_ref().map(|r| r.context_id.clone()),
            remote_task_id: remote.and_then(|r| r.task_id),
            turns: rec.turns,
            attempts: rec.attempts,
            priority: rec.priority,
            depends_on: rec.depends_on.clone(),
            budget: rec.budget.as_deref().copied(),
            result: rec.result.as_deref().cloned(),
            channel: rec.channel.clone(),
            prompt_preview: rec.prompt_preview.clone(),
            created_at_ms: rec.created_at_ms,
            updated_at_ms: rec.updated_at_ms,
            last_update: crate::time::rfc3339_utc(rec.updated_at_ms),
            trace_id: rec.trace.map(|t| t.trace_id_hex().to_string()),
        }
    }
}

/// One agent with its number of children: what a command that changes an agent (spawn, set a
/// budget, restore, ...) answers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AgentView {
    /// What its record says.
    #[serde(flatten)]
    pub summary: AgentSummary,
    /// How many children it has (0 where the answer does not count them).
    pub children: usize,
}

impl AgentView {
    /// The view of `rec` with `children` children.
    pub fn of(rec: &AgentRecord, children: usize) -> Self {
        AgentView {
            summary: AgentSummary::of(rec),
            children,
        }
    }
}

/// What only the process that owns an agent knows: whether it has an actor there, how many
/// inbox items wait and whether a turn runs. All three are `None` (`null`) when that process
/// did not answer: unknown, not `false`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct LiveState {
    /// The agent has an actor in its owning process.
    pub live: Option<bool>,
    /// Inbox items waiting: queued behind the running turn, if any, or held; for an agent
    /// without an actor, the items its durable inbox holds.
    pub inbox: Option<usize>,
    /// A turn is in progress.
    pub turn_running: Option<bool>,
}

impl LiveState {
    /// The owning process did not answer.
    pub const UNKNOWN: LiveState = LiveState {
        live: None,
        inbox: None,
        turn_running: None,
    };

    /// Known: `runtime` is the live actor's `(inbox, turn_running)`, `None` if it has no actor.
    pub fn known(runtime: Option<(usize, bool)>) -> Self {
        LiveState {
            live: Some(runtime.is_some()),
            inbox: Some(runtime.map_or(0, |(inbox, _)| inbox)),
            turn_running: Some(runtime.is_some_and(|(_, running)| running)),
        }
    }

    /// Known: the agent has no actor, and its durable inbox holds `pending` items.
    pub fn stopped(pending: usize) -> Self {
        LiveState {
            live: Some(false),
            inbox: Some(pending),
            turn_running: Some(false),
        }
    }
}

/// One agent as `inspect` (the API, the command, the `inspect_agent` tool) shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Inspection {
    /// Its record and child count.
    #[serde(flatten)]
    pub view: AgentView,
    /// Its actor, inbox and turn in the owning process.
    #[serde(flatten)]
    pub live: LiveState,
}

/// The answer of `list`: children of a parent, or the roots.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AgentList {
    /// The agents, oldest first.
    pub agents: Vec<Inspection>,
}

/// One agent of a tree with its descendants nested and their spending rolled up.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TreeNode {
    /// What its record says.
    #[serde(flatten)]
    pub summary: AgentSummary,
    /// Its actor, inbox and turn in the owning process.
    #[serde(flatten)]
    pub live: LiveState,
    /// Its children's nodes (where a view has the child count).
    #[cfg_attr(feature = "openapi", schema(no_recursion))]
    pub children: Vec<TreeNode>,
    /// Its own cost and its descendants', USD.
    pub tree_cost_usd: f64,
    /// Its own tokens and its descendants'.
    pub tree_tokens: u64,
}

impl TreeNode {
    /// The node of `agent` over `children`: the sums start from its own spending and add each
    /// child's tree in order.
    pub fn new(agent: Inspection, children: Vec<TreeNode>) -> Self {
        let Inspection {
            view: AgentView { summary, .. },
            live,
        } = agent;
        let tree_cost_usd = children
            .iter()
            .fold(summary.cost_usd, |sum, c| sum + c.tree_cost_usd);
        let tree_tokens = children
            .iter()
            .fold(summary.tokens_used, |sum, c| sum + c.tree_tokens);
        TreeNode {
            summary,
            live,
            children,
            tree_cost_usd,
            tree_tokens,
        }
    }
}

/// The answer of `tree`: every root (or the one in scope) with its descendants.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AgentTrees {
    /// One node per root, oldest first.
    pub roots: Vec<TreeNode>,
}

/// Where an agent with work stands in the work queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum QueueState {
    /// A turn runs.
    Executing,
    /// Waiting for a turn slot.
    Queued,
    /// Waiting until a provider rate limit resets (`resume_at_ms`).
    WaitingRateLimit,
    /// Waiting for its dependencies (`depends_on`).
    WaitingDependency,
    /// Items queued, but paused, closed, waiting for an answer or a review, or failed,
    /// cancelled or terminated: what it holds (a dependent's watch it set aside) waits until a
    /// message or a control makes it run again.
    Held,
    /// Items queued, about to start.
    Ready,
}

impl QueueState {
    /// The queue state of an agent in `status` with `pending` inbox items; `None` if it has no
    /// work (nothing running, queued or waiting, and nothing pending).
    pub fn of(status: AgentStatus, pending: usize) -> Option<Self> {
        use AgentStatus as S;
        Some(match status {
            S::Running => QueueState::Executing,
            S::Queued => QueueState::Queued,
            S::WaitingRateLimit => QueueState::WaitingRateLimit,
            S::WaitingDependency => QueueState::WaitingDependency,
            _ if pending == 0 => return None,
            S::Paused
            | S::WaitingQuestion
            | S::WaitingReview
            | S::WaitingTool
            | S::Closed
            | S::Failed
            | S::Cancelled
            | S::Terminated => QueueState::Held,
            _ => QueueState::Ready,
        })
    }
}

/// One agent of the work queue.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct QueueTask {
    /// The agent.
    pub agent_id: AgentId,
    /// Its title.
    pub title: String,
    /// Its type.
    pub agent_type: String,
    /// Its root.
    pub root_id: AgentId,
    /// Its scheduling priority.
    pub priority: Priority,
    /// Where it stands in the queue.
    pub queue_state: QueueState,
    /// Its status.
    pub status: AgentStatus,
    /// Why it entered its status, if said.
    pub status_reason: Option<String>,
    /// Agents it depends on: it runs once each is met (`docs/lifecycle.md`).
    pub depends_on: Vec<AgentId>,
    /// Inbox items not yet handled.
    pub pending: usize,
    /// When a rate-limited agent resumes, ms since the epoch.
    pub resume_at_ms: Option<u64>,
    /// Attempts of its current task.
    pub attempts: u32,
    /// Its model provider, `None` = the default.
    pub provider: Option<String>,
}

/// The answer of `queue`: the agents with work, in the order their turns start.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct WorkQueue {
    /// By priority, then age.
    pub tasks: Vec<QueueTask>,
}

impl QueueTask {
    /// The task of `rec` in `queue_state` with `pending` inbox items.
    pub fn of(rec: &AgentRecord, queue_state: QueueState, pending: usize) -> Self {
        QueueTask {
            agent_id: rec.id.clone(),
            title: rec.title.to_string(),
            agent_type: rec.agent_type.to_string(),
            root_id: rec.root_id.to_string(),
            priority: rec.priority,
            queue_state,
            status: rec.status,
            status_reason: rec.status_reason.clone(),
            depends_on: rec.depends_on.clone(),
            pending,
            resume_at_ms: rec.resume_at_ms,
            attempts: rec.attempts,
            provider: rec.provider.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn record(id: &str, cost_usd: f64, input: u64) -> AgentRecord {
        AgentRecord {
            id: id.into(),
            parent_id: None,
            root_id: id.into(),
            depth: 0,
            title: "Lead".into(),
            agent_type: "lead".into(),
            status: AgentStatus::Idle,
            status_reason: None,
            foreground: true,
            allowed_tools: None,
            channel: Channel::None,
            last_error: None,
            usage: Usage {
                input,
                ..Usage::default()
            },
            cost_usd,
            phase: None,
            current_step: None,
            progress: None,
            resume_at_ms: None,
            provider: None,
            model: None,
            env: [("TOKEN".to_string(), "secret".to_string())].into(),
            turns: 0,
            budget: None,
            priority: Priority::Normal,
            depends_on: vec![],
            dependencies_settled: false,
            on_dependency_failure: None,
            attempts: 0,
            current_task: None,
            task_steps_counted: 0,
            trace: None,
            result: None,
            agent_cli: None,
            prompt_preview: None,
            created_at_ms: 1,
            updated_at_ms: 2,
        }
    }

    fn keys(v: &Value) -> Vec<&str> {
        let mut keys: Vec<&str> = v
            .as_object()
            .map(|o| o.keys().map(String::as_str).collect())
            .unwrap_or_default();
        keys.sort_unstable();
        keys
    }

    const SUMMARY_KEYS: [&str; 36] = [
        "agent_id",
        "agent_type",
        "attempts",
        "budget",
        "channel",
        "cli_session_id",
        "cost_usd",
        "created_at_ms",
        "current_step",
        "depends_on",
        "depth",
        "env",
        "foreground",
        "last_error",
        "last_update",
        "model",
        "parent_id",
        "phase",
        "priority",
        "progress",
        "prompt_preview",
        "provider",
        "remote_context_id",
        "remote_task_id",
        "reported_cost_usd",
        "result",
        "resume_at_ms",
        "root_id",
        "status",
        "status_reason",
        "title",
        "tokens_used",
        "trace_id",
        "turns",
        "updated_at_ms",
        "usage",
    ];

    #[test]
    fn an_inspection_has_every_key_and_unknown_live_state_is_null() -> serde_json::Result<()> {
        let inspection = Inspection {
            view: AgentView::of(&record("a", 0.5, 7), 3),
            live: LiveState::UNKNOWN,
        };
        let v = serde_json::to_value(&inspection)?;
        let mut expected: Vec<&str> = SUMMARY_KEYS.to_vec();
        expected.extend(["children", "inbox", "live", "turn_running"]);
        expected.sort_unstable();
        assert_eq!(keys(&v), expected);
        assert_eq!(v["children"], 3);
        assert_eq!(v["env"], json!(["TOKEN"]), "variable names only");
        assert_eq!(v["tokens_used"], 7);
        assert!(v["live"].is_null() && v["inbox"].is_null() && v["turn_running"].is_null());
        assert!(v["budget"].is_null() && v["result"].is_null() && v["parent_id"].is_null());
        assert_eq!(serde_json::from_value::<Inspection>(v)?, inspection);
        Ok(())
    }

    #[test]
    fn a_record_keeps_its_spawn_s_dependency_policy_and_older_ones_read() {
        use crate::event::OnDependencyFailure;
        let mut rec = record("a", 0.0, 0);
        let older = rmp_serde::to_vec_named(&rec).unwrap_or_default();
        let read: Result<AgentRecord, _> = rmp_serde::from_slice(&older);
        assert_eq!(read.map(|r| r.on_dependency_failure).ok(), Some(None));
        rec.on_dependency_failure = Some(OnDependencyFailure::Fail);
        let bytes = rmp_serde::to_vec_named(&rec).unwrap_or_default();
        let read: Result<AgentRecord, _> = rmp_serde::from_slice(&bytes);
        assert_eq!(read.ok(), Some(rec));
    }

    #[test]
    fn a_view_has_no_live_state_and_a_known_one_is_written() -> serde_json::Result<()> {
        let view = serde_json::to_value(AgentView::of(&record("a", 0.0, 0), 0))?;
        let mut expected: Vec<&str> = SUMMARY_KEYS.to_vec();
        expected.push("children");
        expected.sort_unstable();
        assert_eq!(keys(&view), expected);
        let live = serde_json::to_value(LiveState::known(None))?;
        assert_eq!(
            live,
            json!({"live": false, "inbox": 0, "turn_running": false})
        );
        let live = serde_json::to_value(LiveState::known(Some((2, true))))?;
        assert_eq!(
            live,
            json!({"live": true, "inbox": 2, "turn_running": true})
        );
        Ok(())
    }

    #[test]
    fn a_tree_node_nests_children_and_rolls_spending_up() -> serde_json::Result<()> {
        let inspect = |id, cost, tokens| Inspection {
            view: AgentView::of(&record(id, cost, tokens), 9),
            live: LiveState::known(None),
        };
        let leaf = TreeNode::new(inspect("c", 0.25, 4), vec![]);
        let root = TreeNode::new(inspect("r", 0.5, 10), vec![leaf]);
        assert_eq!((root.tree_cost_usd, root.tree_tokens), (0.75, 14));
        let v = serde_json::to_value(&root)?;
        assert_eq!(v["children"][0]["agent_id"], "c");
        assert_eq!(v["children"][0]["children"], json!([]));
        assert!(v.get("live").is_some_and(|l| l == false));
        assert_eq!(serde_json::from_value::<TreeNode>(v)?, root);
        Ok(())
    }

    #[test]
    fn queue_states_follow_status_and_pending_items() {
        use AgentStatus as S;
        assert_eq!(QueueState::of(S::Running, 0), Some(QueueState::Executing));
        assert_eq!(QueueState::of(S::Idle, 0), None);
        assert_eq!(QueueState::of(S::Idle, 1), Some(QueueState::Ready));
        assert_eq!(QueueState::of(S::Paused, 1), Some(QueueState::Held));
        // A failed dependency's set-aside watch waits for a message, not for a turn slot.
        for stopped in [S::Failed, S::Cancelled, S::Terminated] {
            assert_eq!(QueueState::of(stopped, 1), Some(QueueState::Held));
            assert_eq!(QueueState::of(stopped, 0), None);
        }
        let task = QueueTask::of(&record("a", 0.0, 0), QueueState::Ready, 1);
        let v = serde_json::to_value(task).unwrap_or_default();
        assert_eq!(v["queue_state"], "ready");
        assert_eq!(v["priority"], "normal");
    }

    #[test]
    fn progress_is_always_a_number_and_last_update_a_utc_timestamp() -> serde_json::Result<()> {
        let mut rec = record("a", 0.0, 0);
        rec.updated_at_ms = 1_700_000_000_123;
        let v = serde_json::to_value(AgentSummary::of(&rec))?;
        assert_eq!(v["progress"], json!(0.0), "no phases known: 0");
        assert_eq!(v["last_update"], "2023-11-14T22:13:20.123Z");
        assert_eq!(v["updated_at_ms"], 1_700_000_000_123u64);
        rec.progress = Some(0.5);
        assert_eq!(AgentSummary::of(&rec).progress, 0.5, "phase / phases");
        rec.status = AgentStatus::Completed;
        assert_eq!(AgentSummary::of(&rec).progress, 1.0, "completed");
        // What a process that wrote `null` sends still reads.
        let mut old = v;
        old["progress"] = Value::Null;
        if let Some(o) = old.as_object_mut() {
            o.remove("last_update");
        }
        let read: AgentSummary = serde_json::from_value(old)?;
        assert_eq!(read.progress, 0.0);
        Ok(())
    }
}
