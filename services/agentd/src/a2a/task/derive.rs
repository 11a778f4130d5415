//! What became of one task: the run it is, derived from its context agent's durable state
//! (`crate::runs`), in A2A's words.

use super::{State, TaskRecord};
use crate::runs::{RunView, Seen};
use agentd_actors::RunOutcome;
use std::collections::HashSet;
use uuid::Uuid;

/// A task with what became of it.
#[derive(Debug, Clone)]
pub struct TaskView {
    /// The task.
    pub task: TaskRecord,
    /// What became of it (its run's outcome, read now or kept from before).
    pub outcome: RunOutcome,
    /// The item whose turn runs now, with the ids its steps have (for text deltas).
    pub running_item: Option<Uuid>,
}

impl TaskView {
    /// Its state, in A2A's words.
    pub fn state(&self) -> State {
        self.outcome.state.into()
    }
}

/// What became of `task`, read from `seen` (`pending_inputs`: `runs::pending_inputs` of it),
/// with the tokens its turns used.
pub(super) fn derive(task: &TaskRecord, seen: &Seen, pending_inputs: &HashSet<Uuid>) -> TaskView {
    let RunView {
        outcome,
        running_item,
    } = crate::runs::derive(&task.to_run(), seen, pending_inputs);
    TaskView {
        task: task.clone(),
        outcome,
        running_item,
    }
}
