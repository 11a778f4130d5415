//! What became of one task, read from its context agent's durable state: is its item still
//! in the inbox, and what does the thread hold after the turn's input entry.

use super::map::store_err;
use super::{State, TaskRecord, now_ms};
use crate::a2a::error::A2aError;
use agentd_actors::AgentSystem;
use agentd_proto::{AgentRecord, AgentStatus, Envelope, Role, ThreadEntry, Usage};
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

/// The context agent's state that tasks are read from.
pub struct Seen {
    /// Its record.
    pub rec: AgentRecord,
    /// Its pending items.
    pub pending: Vec<Envelope>,
    /// Its thread.
    pub thread: Vec<ThreadEntry>,
    /// Whether push notifications wait in its outbox (set by `reconcile`).
    pub push_pending: bool,
    /// Whether a task of it has a push notification config (set by `reconcile`).
    pub has_push: bool,
}

impl Seen {
    /// Reads context `ctx` (`None`: no such agent).
    pub async fn load(system: &AgentSystem, ctx: &str) -> Result<Option<Seen>, A2aError> {
        let store = &system.deps().store;
        // The record last: an agent writes its record, its last entry and its item's done
        // mark in one batch, so a record read after the inbox and the thread is at least as
        // new as what they showed (a status read first could be older than the answer).
        let pending = store.inbox_pending(ctx).await.map_err(store_err)?;
        let thread = store.thread(ctx).await.map_err(store_err)?;
        let Some(rec) = store.get_agent(ctx).await.map_err(store_err)? else {
            return Ok(None);
        };
        Ok(Some(Seen {
            rec,
            pending,
            thread,
            push_pending: false,
            has_push: false,
        }))
    }
}

/// Where a turn's entries end: at the next entry that is not one of its steps.
fn of_the_turn(e: &ThreadEntry) -> bool {
    match e.role {
        Role::Assistant => e.from_agent.is_none(),
        Role::Tool => true,
        Role::System => e.interrupted,
        Role::User => false,
    }
}

/// What the thread says of the turn whose input entry is at `pos`.
struct Turn {
    interrupted: bool,
    usage: Usage,
    answer: String,
    answer_entries: Vec<Uuid>,
    answered: bool,
    reaches_end: bool,
}

fn turn_at(thread: &[ThreadEntry], pos: usize) -> Turn {
    let mut t = Turn {
        interrupted: false,
        usage: Usage::default(),
        answer: String::new(),
        answer_entries: Vec::new(),
        answered: false,
        reaches_end: true,
    };
    for e in &thread[pos + 1..] {
        if !of_the_turn(e) {
            t.reaches_end = false;
            break;
        }
        match e.role {
            Role::System => t.interrupted = true,
            Role::Assistant => {
                if let Some(u) = &e.usage {
                    t.usage += **u;
                }
                if !e.text.is_empty() {
                    t.answer.push_str(&e.text);
                    t.answer_entries.push(e.id);
                }
                t.answered = e.tool_calls.is_empty();
            }
            _ => t.answered = false,
        }
    }
    t
}

/// What became of `task`, read from `seen`, with the tokens its turns used.
pub(super) fn derive(task: &TaskRecord, seen: &Seen, pending_inputs: &HashSet<Uuid>) -> TaskView {
    let mut v = state_of(task, seen, pending_inputs);
    for input in &task.inputs {
        if let Some(pos) = seen.thread.iter().position(|e| e.id == *input) {
            v.usage += turn_at(&seen.thread, pos).usage;
        }
    }
    v
}

/// What became of `task`, read from `seen`.
fn state_of(task: &TaskRecord, seen: &Seen, pending_inputs: &HashSet<Uuid>) -> TaskView {
    let now = now_ms();
    // `turn`: the turn whose answer (so far) the task shows.
    let view = |state, status_text: Option<String>, turn: Option<&Turn>| TaskView {
        task: task.clone(),
        state,
        status_text,
        answer: turn.map(|t| t.answer.clone()).filter(|a| !a.is_empty()),
        answer_entries: turn.map(|t| t.answer_entries.clone()).unwrap_or_default(),
        at_ms: now,
        running_item: None,
        usage: Usage::default(),
    };
    if let Some(why) = &task.rejected {
        return view(State::Rejected, Some(why.clone()), None);
    }
    let Some(&input) = task.inputs.last() else {
        return view(State::Failed, Some("the task has no input".into()), None);
    };
    let pos = seen.thread.iter().position(|e| e.id == input);
    if task.unposted || pending_inputs.contains(&input) {
        let state = if pos.is_some() || task.inputs.len() > 1 {
            State::Working
        } else {
            State::Submitted
        };
        let turn = pos.map(|p| turn_at(&seen.thread, p));
        let mut v = view(state, None, turn.as_ref());
        if pos.is_some() {
            v.running_item = task.items.last().copied();
        }
        return v;
    }
    let Some(pos) = pos else {
        // Neither pending nor begun: taken out of the queue (a cancel of the task or of the
        // whole context), or still on its way to the inbox (with Redis a post is answered
        // once it is in the context's partition stream).
        if task.cancel_requested {
            return view(
                State::Canceled,
                Some("cancelled before it ran".into()),
                None,
            );
        }
        if matches!(
            seen.rec.status,
            AgentStatus::Cancelled | AgentStatus::Terminated
        ) && seen.rec.updated_at_ms >= task.created_ms
        {
            let why = format!("dropped before it ran: the context was {}", seen.rec.status);
            return view(State::Canceled, Some(why), None);
        }
        let state = if task.inputs.len() > 1 {
            State::Working
        } else {
            State::Submitted
        };
        return view(state, None, None);
    };
    let turn = turn_at(&seen.thread, pos);
    let answer = Some(&turn);
    if turn.interrupted {
        return view(
            State::Canceled,
            Some("its turn was interrupted".into()),
            answer,
        );
    }
    if !turn.answered {
        // A failed turn fails its agent in the batch that marks the item done.
        if seen.rec.status != AgentStatus::Failed {
            return view(State::Working, None, answer);
        }
        let why = seen
            .rec
            .last_error
            .clone()
            .unwrap_or_else(|| "the turn failed".into());
        return view(State::Failed, Some(why), answer);
    }
    if seen.rec.status == AgentStatus::WaitingQuestion && turn.reaches_end {
        if task.cancel_requested {
            return view(
                State::Canceled,
                Some("cancelled while it asked".into()),
                answer,
            );
        }
        let question = seen.rec.status_reason.clone();
        return view(State::InputRequired, question, answer);
    }
    view(State::Completed, None, answer)
}
