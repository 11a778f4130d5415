//! What a running turn tells its agent as it goes ([`TurnProgress`]), and the [`Step`] it is at.
//! The turn owns these types; its agent handles them (through a `Recipient`, so the turn never
//! names the agent's actor).

use actix::prelude::*;
use agentd_proto::Usage;

/// What a running turn is doing: its agent's `current_step` while it runs (seed 001). A wait a
/// turn may come to (an approval, a pending call) would be a variant here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Waiting for the model's answer.
    CallingModel,
    /// Running the tool of this name.
    RunningTool(Box<str>),
    /// Having the model summarise old history (an `agent_compact`).
    Compacting,
    /// Clearing the thread (an `agent_reset`).
    Resetting,
}

impl std::fmt::Display for Step {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Step::CallingModel => f.write_str("calling model"),
            Step::RunningTool(name) => write!(f, "running tool {name}"),
            Step::Compacting => f.write_str("compacting"),
            Step::Resetting => f.write_str("resetting"),
        }
    }
}

/// What a running turn tells its agent as it goes.
#[derive(Message, Debug)]
#[rtype(result = "()")]
pub enum TurnProgress {
    /// Tokens of one model call (of a step that asked for tools, a replayed step, or a
    /// compaction; the last step's are counted at the turn's end), counted at once so that a
    /// budget can stop the turn between steps.
    Usage {
        /// The tokens.
        usage: Usage,
        /// The step of the turn's task the call made, if it was a step (a compaction's is not).
        step: Option<u32>,
    },
    /// The turn is about to write to its thread, and its input (with the `running` record) is
    /// still in a flush its agent deferred ([`super::InputWritten`]): the agent writes it now.
    StartNeeded,
    /// The turn caused by `cause` now does `doing`.
    Doing {
        /// The turn's cause (a late report of an aborted turn is ignored).
        cause: uuid::Uuid,
        /// What it does now.
        doing: Step,
    },
}
