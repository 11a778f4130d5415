//! What became of one task: the run it is, derived from its context agent's durable state
//! (`crate::runs`), in A2A's words.

use super::{State, TaskRecord};
use crate::runs::{RunView, Seen};
use agentd_proto::Usage;
use std::collections::HashSet;
use uuid::Uuid;

/// A task with what became of it.
#[derive(Debug, Clone)]
pub struct TaskView {
    /// The task.
    pub task: TaskRecord,
    /// Its state.
    pub state: State,
    /// The question, the error, the reason.
    pub status_text: Option<String>,
    /// The answer so far (working) or the answer.
    pub answer: Option<String>,
    /// The ids of the thread entries the answer is made of.
    pub answer_entries: Vec<Uuid>,
    /// When the state was reached.
    pub at_ms: u64,
    /// The item whose turn runs now, with the ids its steps have (for text deltas).
    pub running_item: Option<Uuid>,
    /// The tokens its turns used so far (reported as `metadata["agentd.usage"]`).
    pub usage: Usage,
}

/// What became of `task`, read from `seen` (`pending_inputs`: `runs::pending_inputs` of it),
/// with the tokens its turns used.
pub(super) fn derive(task: &TaskRecord, seen: &Seen, pending_inputs: &HashSet<Uuid>) -> TaskView {
    let RunView {
        state,
        status_text,
        answer,
        answer_entries,
        at_ms,
        running_item,
        usage,
    } = crate::runs::derive(&task.to_run(), seen, pending_inputs);
    TaskView {
        task: task.clone(),
        state: state.into(),
        status_text,
        answer,
        answer_entries,
        at_ms,
        running_item,
        usage,
    }
}
