//! One turn of an agent: build the context (layered system prompt, thread, allowed tools), call
//! the model, execute tool calls, append results, repeat until the model answers without tool
//! calls, yields, is paused, or hits the step limit. Reset and compaction run here too, because
//! they are turns of a kind: they rewrite the thread in the agent's inbox order.
//!
//! Every entry a turn writes has an id derived from the turn's input id and its step, so a
//! turn re-run after a crash writes the same ids and the store de-duplicates them.
//!
//! | module | what it holds |
//! |---|---|
//! | [`request`] | what the model is asked: names, the layered system prompt, metered calls |
//! | [`known_thread`] | the thread as the turn knows it: appends, replays, replacement |
//! | [`compact`] | compaction: old history becomes a summary |
//! | [`context_window`] | compaction before a call that would overflow the provider's window |
//! | [`live_answer`] | an answer while it arrives: `text_delta` events, what an aborted call cost |
//! | [`service_calls`] | calls of service tools: stored, announced, waited for, their results |
//! | [`shared`] | what the turn shares with its actor: a stop request, the calls it has open, the model call in flight |
//! | [`steps`] | the steps themselves: the input taken; per step the model asked (or the step replayed), its answer recorded, its markers read, its tool calls run |

mod approvals;
mod compact;
mod context_window;
mod known_thread;
mod live_answer;
mod progress;
mod request;
mod service_calls;
mod shared;
mod steps;

pub(crate) use progress::{Step, TurnProgress};
pub(crate) use request::{RequestNames, system_prompt};
pub(crate) use service_calls::WaitingCall;
pub(crate) use shared::{InputWritten, OpenCall, TurnShared};

use crate::deps::Deps;
use crate::messages::{ChildOutput, OutputPort};
use crate::rate_gate::RateGates;
use crate::tools::ToolContext;
use actix::Recipient;
use agentd_proto::{AgentRecord, AgentdError, Marker, ThreadEntry};
use std::sync::Arc;
use uuid::Uuid;

/// What a turn starts from.
#[derive(Debug, Clone)]
pub(crate) enum TurnInput {
    /// A new entry to append, then run the model (shared with the actor's copy of the thread
    /// and the batch that writes it).
    Message(Arc<ThreadEntry>),
    /// Clear the thread, optionally seeding it.
    Reset(Option<String>),
    /// Replace old history with a summary.
    Compact,
    /// Continue a turn that a pause stopped at a step boundary.
    Continue,
}

/// How a turn ended.
#[derive(Debug, Default)]
pub(crate) struct TurnResult {
    /// The text of the last assistant message.
    pub final_text: String,
    /// `yield_to_parent` was called with this result.
    pub yielded: Option<serde_json::Value>,
    /// A pause stopped the turn at a step boundary.
    pub paused: bool,
    /// The step limit ended the turn.
    pub step_limit: bool,
    /// Protocol markers found in the turn's assistant messages, in order.
    pub markers: Vec<Marker>,
    /// Malformed markers found.
    pub malformed: Vec<String>,
    /// The provider rate-limited the turn; retry after this many ms.
    pub rate_limited: Option<u64>,
    /// The thread as stored when the turn ended (the actor keeps it for the next turn).
    pub thread: Option<Arc<crate::ports::ThreadEntries>>,
    /// The last step's assistant entry, not stored yet: a step without tool calls ends the
    /// turn, so its entry goes into the store with the turn's end (record and inbox item
    /// done) as one batch, one write per turn less. A crash before that batch re-runs the
    /// step, as a crash before its own write did.
    pub final_entry: Option<Arc<ThreadEntry>>,
    /// `final_entry` is new to the thread (a first run's: no earlier run can have written it).
    pub final_entry_new: bool,
    /// Outputs made from `final_entry` (a Manage worker's reply): the actor sends them once
    /// that batch is written, so a parent never sees a reply its worker's thread lacks.
    pub after_write: Vec<ChildOutput>,
    /// The last step's token usage, counted by the actor at the turn's end. The steps before
    /// it send theirs at once ([`TurnProgress::Usage`]), so a budget can stop a turn between
    /// steps; the last one's would arrive while this turn still shares the agent's record, and
    /// the actor would have to copy the record to count it.
    pub final_usage: Option<agentd_proto::Usage>,
    /// What an agent CLI reported besides its steps (its session, its own cost figure), for
    /// the record; its steps are in the thread already.
    pub cli_run: Option<Box<crate::ports::CliRun>>,
    /// Calls of service tools the last step made that wait for their answers: the turn ended
    /// there, and runs again (same cause) once each is closed.
    pub waiting: Vec<WaitingCall>,
}

/// What a running turn needs; cloned from the actor when the turn starts.
pub(crate) struct Turn {
    /// The thread as stored, if the actor knew it (read from the store otherwise). Shared
    /// with the model requests made from it; appends copy it only while one is still alive.
    pub thread: Option<Arc<crate::ports::ThreadEntries>>,
    /// Set once the actor's flush wrote the input entry; the turn writes it if not (or, if
    /// the actor deferred that flush, asks for it before it writes anything of its own).
    pub input_written: Option<Arc<InputWritten>>,
    /// The tools the model is shown (the agent's, built once).
    pub tool_specs: Arc<Vec<crate::ports::ToolSpec>>,
    /// The layered system prompt (the agent's, built once).
    pub system_prompt: Arc<str>,
    /// What the agent's model requests name it by (built once).
    pub names: Arc<RequestNames>,
    /// Whether this run may find its own earlier entries in the thread (a retry after a rate
    /// limit, a failure, an unreachable store or a crash, or a paused turn continuing).
    pub replaying: bool,
    /// The record as the turn started (shared with the actor until it changes).
    pub rec: Arc<AgentRecord>,
    pub deps: Arc<Deps>,
    /// What the turn's tool calls see: the caller, the ports, the [`crate::tools::Agents`] port.
    pub tools: ToolContext,
    /// Where the child outputs the turn makes go when they did not leave with its store batch.
    pub outputs: Arc<dyn OutputPort>,
    /// Providers that rate-limited this process, and until when (paces the model calls).
    pub rate_gates: Arc<RateGates>,
    /// Where the usage of each step but the last goes (the agent counts it at once, so a
    /// budget can stop the turn between steps), and what the turn does now (its agent's
    /// `current_step`; the first model call is the agent's to note, saving a message a turn).
    pub progress: Arc<Recipient<TurnProgress>>,
    /// A stop request from the actor, and the calls this turn has open (which the actor closes
    /// if it ends the turn first).
    pub shared: Arc<TurnShared>,
    pub cause: Uuid,
}

impl Turn {
    pub(super) fn now(&self) -> u64 {
        self.deps.clock.now_ms()
    }

    /// Tells the agent what the turn does now.
    fn doing(&self, step: Step) {
        let cause = self.cause;
        self.progress
            .do_send(TurnProgress::Doing { cause, doing: step });
    }

    pub(crate) async fn run(mut self, input: TurnInput) -> Result<TurnResult, AgentdError> {
        let mut result = self.run_steps(input).await?;
        result.thread = self.thread.take();
        Ok(result)
    }
}
