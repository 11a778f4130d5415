//! A2A tasks over agentd's durable state.
//!
//! A task is one message's handling by its context agent: from the item in the agent's durable
//! inbox to the end of the turn that handled it. What a task *is* (its id, its items, the
//! messages the client sent, a cancel asked) is kept in a [`TaskRecord`] the request handlers
//! write; what *became* of it is read from agentd's own durable state — the inbox (still
//! pending?) and the thread (the turn's input entry, then its steps, whose ids derive from the
//! item's id) — and kept, once read, in a [`Settled`] record any process may write: the answer
//! survives a later compaction or reset of the thread. A task is a run of door `a2a` (the
//! store's `Runs` concern) and its settled state the run's outcome (`as_run`); both live under
//! the context agent's keys (the task map of `map`), so deleting the context deletes its tasks.
//!
//! Invariant: a [`TaskRecord`] is saved before its item is posted (`unposted` until the post
//! returns), so no reader ever takes a client's item for output no client message started.
//!
//! | module | what it holds |
//! |---|---|
//! | `map` | the context's task map: what is kept there, and [`TaskMap`](map::TaskMap), the trait it is kept through |
//! | `as_run` | a task as a run of door `a2a`, its settled state as the run's outcome |
//! | `stored` | reading and writing the task map through the agent system's store |
//! | `derive` | what became of one task: its run's view (`crate::runs`) in A2A's words |
//! | `reconcile` | every task of a context brought up to date, output no client started taken up |
//! | `notices` | push notification configs and the outbox of notices, as the task map keeps them |
//! | `json` | the ProtoJSON of a task and its artifact, as every method answers it |
//! | `timestamp` | RFC 3339 timestamps (`statusTimestampAfter`) |

mod as_run;
mod derive;
mod json;
mod map;
mod notices;
mod reconcile;
mod stored;
mod timestamp;

pub use crate::runs::now_ms;
pub use derive::TaskView;
pub use json::{artifact, task_json};
pub(super) use map::{Contents, Stored};
pub(super) use notices::enqueue;
pub use notices::{Auth, Delivery, Notice, PushConfig};
pub use reconcile::{get, reconcile};
pub use stored::{is_context, save};
pub(super) use stored::{put, put_new, stored};
pub use timestamp::parse_timestamp;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use uuid::Uuid;

/// A task's state, as the specification names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum State {
    /// Queued in the context agent's inbox.
    Submitted,
    /// Its turn runs (a tool call or an approval it waits for included).
    Working,
    /// The turn asked the client a question (`waiting_question`).
    InputRequired,
    /// The turn answered: the answer is the task's artifact.
    Completed,
    /// The turn failed.
    Failed,
    /// Cancelled (`CancelTask`, or agentd's cancel of the context).
    Canceled,
    /// agentd refused it before it ran (budget, limits).
    Rejected,
}

impl State {
    /// The ProtoJSON name (`TASK_STATE_…`).
    pub fn wire(self) -> &'static str {
        match self {
            State::Submitted => "TASK_STATE_SUBMITTED",
            State::Working => "TASK_STATE_WORKING",
            State::InputRequired => "TASK_STATE_INPUT_REQUIRED",
            State::Completed => "TASK_STATE_COMPLETED",
            State::Failed => "TASK_STATE_FAILED",
            State::Canceled => "TASK_STATE_CANCELED",
            State::Rejected => "TASK_STATE_REJECTED",
        }
    }

    /// The state a `status` filter names (`TASK_STATE_WORKING`; the 0.3 names such as
    /// `working` too).
    pub fn parse(s: &str) -> Option<State> {
        let s = s.trim();
        let bare = s.strip_prefix("TASK_STATE_").unwrap_or(s);
        Some(match bare.to_ascii_lowercase().replace('-', "_").as_str() {
            "submitted" => State::Submitted,
            "working" => State::Working,
            "input_required" => State::InputRequired,
            "completed" => State::Completed,
            "failed" => State::Failed,
            "canceled" | "cancelled" => State::Canceled,
            "rejected" => State::Rejected,
            _ => return None,
        })
    }

    /// Whether nothing changes it any more.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            State::Completed | State::Failed | State::Canceled | State::Rejected
        )
    }

    /// Whether a blocking send or a stream stops here (terminal or interrupted).
    pub fn ends_wait(self) -> bool {
        self.is_terminal() || self == State::InputRequired
    }
}

/// Who started a task.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Origin {
    /// An A2A client's message.
    Client,
    /// Something else that made the context agent run: a worker's or a sub-agent's output, a
    /// message through agentd's own API.
    Agent,
}

/// What a task is: written by the request handlers only.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskRecord {
    /// `<context id>.<first id>`.
    pub id: String,
    /// The context agent.
    pub context_id: String,
    /// The `contextId` the client chose for the context, which clients see instead of the
    /// agent's id (`None`: the context is known by its agent's id).
    #[serde(default)]
    pub client_context_id: Option<String>,
    /// The inbox items that belong to it, in order: the message that started it, then each
    /// answer to a question it asked. Empty for output found only in the thread.
    #[serde(default)]
    pub items: Vec<Uuid>,
    /// The ids their turns' input entries have in the thread (`derived_id(item, "input")`).
    pub inputs: Vec<Uuid>,
    /// The client's messages (A2A JSON), and for output no client started, what started it.
    #[serde(default)]
    pub history: Vec<Value>,
    /// Who started it.
    pub origin: Origin,
    /// Set when it was refused before it ran.
    #[serde(default)]
    pub rejected: Option<String>,
    /// A cancel was asked.
    #[serde(default)]
    pub cancel_requested: bool,
    /// Saved, its last item not posted yet: nothing is concluded from the item's absence.
    #[serde(default)]
    pub unposted: bool,
    /// Created, ms since the epoch.
    pub created_ms: u64,
}

impl TaskRecord {
    /// Its context's `contextId` as clients see it: the id the client chose, else the
    /// context agent's.
    pub fn shown_context(&self) -> &str {
        self.client_context_id
            .as_deref()
            .unwrap_or(&self.context_id)
    }
}

/// What became of a task, as last read from the agent's state (any process writes it): its
/// run's outcome.
#[derive(Debug, Clone, PartialEq)]
pub struct Settled {
    /// The task.
    pub task_id: String,
    /// The outcome.
    pub outcome: agentd_actors::RunOutcome,
}

/// A task's id: its context and the id of what started it.
pub fn task_id(context: &str, first: Uuid) -> String {
    format!("{context}.{first}")
}

/// The context of task `id`, if `id` has the form of a task id.
pub fn context_of(id: &str) -> Option<&str> {
    let (ctx, first) = id.split_once('.')?;
    (ctx.len() == 36 && Uuid::try_parse(ctx).is_ok() && Uuid::try_parse(first).is_ok())
        .then_some(ctx)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn task_ids_name_their_context() {
        let ctx = Uuid::now_v7().to_string();
        let id = task_id(&ctx, Uuid::now_v7());
        assert_eq!(context_of(&id), Some(ctx.as_str()));
        assert_eq!(context_of("nope"), None);
        assert_eq!(context_of(&format!("{ctx}.x")), None);
    }

    #[test]
    fn states_parse_from_their_wire_names() {
        for s in [
            State::Submitted,
            State::Working,
            State::InputRequired,
            State::Completed,
            State::Failed,
            State::Canceled,
            State::Rejected,
        ] {
            assert_eq!(State::parse(s.wire()), Some(s));
        }
        assert_eq!(State::parse("input-required"), Some(State::InputRequired));
        assert_eq!(State::parse("TASK_STATE_UNSPECIFIED"), None);
    }
}
