//! The messages an [`AgentActor`](super::AgentActor) handles. Inbox items and lifecycle controls
//! travel inside [`Deliver`] / [`Delivery`] envelopes or as [`ApplyControl`]; the rest are asked
//! of a live agent by the supervisor, the facade and its own turns.

use actix::prelude::*;
use agentd_proto::{AgentRecord, AgentStatus, AgentdError, Control, Envelope};

/// An envelope for one agent: an inbox item (queued durably, once, in arrival order) or a
/// control. Answers `Ok(true)` once the item is in the agent's durable inbox, `Ok(false)` for a
/// duplicate (already queued before), so a transport acknowledges only what is safe.
#[derive(Message, Debug)]
#[rtype(result = "Result<bool, AgentdError>")]
pub struct Deliver(pub Envelope);

/// An envelope on its way to an agent, with whoever waits for the answer of [`Deliver`]
/// (`None`: nobody). The router `do_send`s it, which queues it behind every message sent
/// before even when the mailbox is full (a `send` to a full mailbox waits and could be
/// overtaken), so per-agent order holds without the router waiting.
#[derive(Message, Debug)]
#[rtype(result = "()")]
pub struct Delivery {
    /// The envelope.
    pub env: Envelope,
    /// Where the answer goes.
    pub ack: Ack,
    /// Read from a partition stream this process owns (delivered here even while the
    /// partition drains after a takeover).
    pub from_stream: bool,
    /// The stream entry it came in ([`StreamEntry`](crate::ports::StreamEntry)): taken only
    /// within the ownership period it was read in, and, when it allows, held by the agent
    /// instead of a push to its durable inbox.
    pub entry: Option<std::sync::Arc<crate::ports::StreamEntry>>,
    /// Sent by a request bounded by a deadline ([`crate::deadline`]): once its sender has
    /// stopped waiting for the answer (the request was answered `unavailable`, and may be
    /// retried), a delivery whose durable push has not begun is dropped, not applied.
    pub abandonable: bool,
}

/// Who waits for a [`Delivery`]'s answer.
pub type Ack = Option<tokio::sync::oneshot::Sender<Result<bool, AgentdError>>>;

impl Delivery {
    /// Whether its sender has stopped waiting for it (see [`Self::abandonable`]).
    pub fn abandoned(&self) -> bool {
        self.abandonable && self.ack.as_ref().is_some_and(|a| a.is_closed())
    }

    /// Answers the sender (without one, a failure is logged).
    pub fn answer(self, res: Result<bool, AgentdError>) {
        answer(self.ack, self.env.id, res);
    }
}

/// Answers `ack` about envelope `id` (without one, a failure is logged).
pub fn answer(ack: Ack, id: uuid::Uuid, res: Result<bool, AgentdError>) {
    match ack {
        Some(ack) => {
            let _ = ack.send(res);
        }
        None => {
            if let Err(e) = res {
                tracing::warn!(message_id = %id, error = %e, "routing an envelope failed");
            }
        }
    }
}

/// Cancels one inbox item alone: taken out of the queue if it waits there, its turn
/// interrupted (its open calls closed, the interruption marked) if it runs; the agent then
/// goes on with the rest of its queue. Answers what was done.
#[derive(Message, Debug)]
#[rtype(result = "Result<agentd_proto::ItemCancel, AgentdError>")]
pub struct CancelItem(pub uuid::Uuid);

/// Items of the durable inbox that a freshly activated agent resumes from (already stored).
#[derive(Message, Debug)]
#[rtype(result = "()")]
pub struct Restore(pub Vec<Envelope>);

/// Pause, resume, cancel or terminate one live agent; answers its record afterwards.
#[derive(Message, Debug)]
#[rtype(result = "Result<AgentRecord, AgentdError>")]
pub struct ApplyControl(pub Control);

/// Take a checkpoint of the agent now.
#[derive(Message, Debug)]
#[rtype(result = "Result<agentd_proto::Checkpoint, AgentdError>")]
pub struct TakeCheckpoint {
    /// Why.
    pub reason: agentd_proto::CheckpointReason,
    /// What triggered it.
    pub trigger: String,
}

/// Bring the agent back to a checkpoint: its running turn and queue are dropped, the
/// conversation, phase, step, progress and environment are put back, and the checkpoint's
/// pending items are queued again.
#[derive(Message, Debug)]
#[rtype(result = "Result<AgentRecord, AgentdError>")]
pub struct RestoreCheckpoint(pub agentd_proto::Checkpoint);

/// The live agent's current record; while a turn runs, its `current_step` says what the turn
/// does now. Shared, not copied, when no turn runs (the record is then as the actor holds it).
#[derive(Message, Debug)]
#[rtype(result = "std::sync::Arc<AgentRecord>")]
pub struct Snapshot;

/// What a live agent holds besides its record: queued inbox items and whether a turn runs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Runtime {
    /// Inbox items waiting.
    pub inbox: usize,
    /// A turn is in progress.
    pub turn_running: bool,
}

/// The live agent's [`Runtime`] state.
#[derive(Message, Debug)]
#[rtype(result = "Runtime")]
pub struct RuntimeState;

/// Stop a live agent: abort its turn, persist `final_status` (e.g. `closed`) and stop the actor.
/// Answers once the record is persisted, so a re-activation never sees a stale status.
#[derive(Message, Debug)]
#[rtype(result = "AgentRecord")]
pub struct StopAgent {
    /// Status to persist before stopping; `None` leaves the record as it is (delete, shutdown).
    pub final_status: Option<AgentStatus>,
}

/// The agent yielded: if its task is still over and nothing waits (no queued item, nothing left
/// to write), its actor stops (`passivate.rs`). Sent by the actor to itself.
#[derive(Message, Debug)]
#[rtype(result = "()")]
pub struct PassivateIfDone;

/// A dependency (`waiting_for = waiting_dependency`) or an answer (`waiting_question`) for a
/// waiting agent: `env` carries it as a message.
#[derive(Message, Debug)]
#[rtype(result = "Result<AgentRecord, AgentdError>")]
pub struct Provide {
    /// The message envelope.
    pub env: Envelope,
    /// The status the agent must be in.
    pub waiting_for: AgentStatus,
}

/// Replaces a live agent's budget.
#[derive(Message, Debug)]
#[rtype(result = "AgentRecord")]
pub struct SetBudget(pub agentd_proto::Budget);

/// Pause this agent for a budget (at the next step boundary if a turn runs).
#[derive(Message, Debug)]
#[rtype(result = "()")]
pub struct BudgetPause(pub String);

/// Replaces a live agent's environment variables.
#[derive(Message, Debug)]
#[rtype(result = "AgentRecord")]
pub struct SetEnv(pub std::collections::BTreeMap<String, String>);

/// The answer to call `call_id` of a service tool of this agent: recorded if the call is open
/// (the first answer wins, in one store write), and the turn goes on once every call it waits
/// for is closed. Answers the call as closed, or `tool_call_closed` / `tool_call_not_found`.
#[derive(Message, Debug)]
#[rtype(result = "Result<agentd_proto::ToolCallRecord, AgentdError>")]
pub struct AnswerToolCall {
    /// agentd's id of the call.
    pub call_id: uuid::Uuid,
    /// The answer.
    pub answer: agentd_proto::ToolAnswer,
}

/// A person's decision on a call of the agent that waits for approval: one store write
/// (`pending` when approved, `rejected` otherwise), then the wait goes on as for an answer.
/// Answers the call as decided, or `tool_call_closed` / `tool_call_not_found`.
#[derive(Message, Debug)]
#[rtype(result = "Result<agentd_proto::ToolCallRecord, AgentdError>")]
pub struct DecideToolCall {
    /// agentd's id of the call.
    pub call_id: uuid::Uuid,
    /// Approve (run it) or reject it.
    pub approve: bool,
    /// Why (a rejection's reason reaches the model).
    pub reason: Option<String>,
}
