//! Runs as the doors read them: what became of a run (the store's `Runs` concern: the record
//! of one piece of work a door started on an agent), derived from the agent's own durable
//! state — is the run's item still in the inbox, what does the thread hold after its turn's
//! input entry, what does the record say. Every door that has runs (A2A's tasks, the MCP
//! server's calls) reads them here, so a run's state means the same through each; a door maps
//! [`RunState`] to its own words and keeps what it reads as the run's outcome.
//!
//! | module | what it holds |
//! |---|---|
//! | `cancel` | a run's cancel: its item out of the inbox, or its turn interrupted and the sub-agents that turn started cancelled |
//! | `derive` | [`Seen`] (the agent's state read in an order that keeps it consistent), [`RunView`] and [`derive`] |
//! | `post` | a run's item posted after the run is stored, and the run stored again, posted or rejected |
//! | `wait` | waiting for what becomes of a run: a look at each event of its agent, and every half second |
//!
//! [`RunState`]: agentd_actors::RunState

mod cancel;
mod derive;
mod post;
mod wait;

pub use cancel::{cancel_children_since, cancel_item};
pub use derive::{RunView, Seen, derive, now_ms, pending_inputs};
pub use post::{PostError, post};
pub use wait::{concerns, until};

use agentd_proto::{AgentdError, ErrorCode};

/// Whether posting a run's item failed for a reason the run's `rejected` state stands for
/// (agentd refused it before it ran: a budget, a depth or fan-out limit, the store not taking
/// writes), rather than a failure of the request itself.
pub fn refused_before_running(e: &AgentdError) -> bool {
    matches!(
        e.code,
        ErrorCode::BudgetExceeded
            | ErrorCode::DepthLimit
            | ErrorCode::FanoutLimit
            | ErrorCode::Unavailable
    )
}
