//! What became of one run, read from its agent's durable state: is its item still in the
//! inbox, and what does the thread hold after the turn's input entry.

use agentd_actors::{AgentSystem, Run, RunOutcome, RunState, StoreResult};
use agentd_proto::{AgentRecord, AgentStatus, Envelope, Role, ThreadEntry, Usage};
use std::collections::HashSet;
use uuid::Uuid;

/// What became of a run, as its agent's state says now.
#[derive(Debug, Clone)]
pub struct RunView {
    /// The outcome (`for_input`: the run's last input), as a door keeps it once read.
    pub outcome: RunOutcome,
    /// The item whose turn runs now, with the ids its steps have (for text deltas).
    pub running_item: Option<Uuid>,
}

/// The agent's state that runs are read from.
pub struct Seen {
    /// Its record.
    pub rec: AgentRecord,
    /// Its pending items.
    pub pending: Vec<Envelope>,
    /// Its thread.
    pub thread: Vec<ThreadEntry>,
    /// Whether push notifications wait in its outbox (set by a door that has them: A2A).
    pub push_pending: bool,
    /// Whether a run of it has a push notification config (set by a door that has them).
    pub has_push: bool,
}

impl Seen {
    /// Reads agent `agent_id` (`None`: no such agent).
    pub async fn load(system: &AgentSystem, agent_id: &str) -> StoreResult<Option<Seen>> {
        let store = &system.deps().store;
        // The record last: an agent writes its record, its last entry and its item's done
        // mark in one batch, so a record read after the inbox and the thread is at least as
        // new as what they showed (a status read first could be older than the answer).
        let pending = store.inbox_pending(agent_id).await?;
        let thread = store.thread(agent_id).await?;
        let Some(rec) = store.get_agent(agent_id).await? else {
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

/// The ids the inputs of `seen`'s pending items will have in the thread: a run whose last
/// input is one of them is still queued.
pub fn pending_inputs(seen: &Seen) -> HashSet<Uuid> {
    seen.pending
        .iter()
        .map(|e| agentd_proto::ids::derived_id(e.id, "input"))
        .collect()
}

/// What became of `run`, read from `seen` (`pending_inputs`: [`pending_inputs`] of it), with
/// the tokens its turns used.
pub fn derive(run: &Run, seen: &Seen, pending_inputs: &HashSet<Uuid>) -> RunView {
    let mut v = state_of(run, seen, pending_inputs);
    for input in &run.inputs {
        if let Some(pos) = seen.thread.iter().position(|e| e.id == *input) {
            v.outcome.usage += turn_at(&seen.thread, pos).usage;
        }
    }
    v
}

/// What became of `run`, read from `seen`.
fn state_of(run: &Run, seen: &Seen, pending_inputs: &HashSet<Uuid>) -> RunView {
    let now = now_ms();
    // `turn`: the turn whose answer (so far) the run shows.
    let view = |state, status_text: Option<String>, turn: Option<&Turn>| RunView {
        outcome: RunOutcome {
            for_input: run.inputs.last().copied().unwrap_or_default(),
            state,
            status_text,
            answer: turn.map(|t| t.answer.clone()).filter(|a| !a.is_empty()),
            answer_entries: turn.map(|t| t.answer_entries.clone()).unwrap_or_default(),
            at_ms: now,
            usage: Usage::default(),
        },
        running_item: None,
    };
    if let Some(why) = &run.rejected {
        return view(RunState::Rejected, Some(why.clone()), None);
    }
    let Some(&input) = run.inputs.last() else {
        return view(RunState::Failed, Some("the run has no input".into()), None);
    };
    let pos = seen.thread.iter().position(|e| e.id == input);
    if run.unposted || pending_inputs.contains(&input) {
        let state = if pos.is_some() || run.inputs.len() > 1 {
            RunState::Running
        } else {
            RunState::Pending
        };
        let turn = pos.map(|p| turn_at(&seen.thread, p));
        let mut v = view(state, None, turn.as_ref());
        if pos.is_some() {
            v.running_item = run.items.last().copied();
        }
        return v;
    }
    let Some(pos) = pos else {
        // Neither pending nor begun: taken out of the queue (a cancel of the run or of the
        // whole agent), or still on its way to the inbox (with Redis a post is answered once
        // it is in the agent's partition stream).
        if run.cancel_requested {
            return view(
                RunState::Cancelled,
                Some("cancelled before it ran".into()),
                None,
            );
        }
        if matches!(
            seen.rec.status,
            AgentStatus::Cancelled | AgentStatus::Terminated
        ) && seen.rec.updated_at_ms >= run.created_ms
        {
            let why = format!("dropped before it ran: its agent was {}", seen.rec.status);
            return view(RunState::Cancelled, Some(why), None);
        }
        let state = if run.inputs.len() > 1 {
            RunState::Running
        } else {
            RunState::Pending
        };
        return view(state, None, None);
    };
    let turn = turn_at(&seen.thread, pos);
    let answer = Some(&turn);
    if turn.interrupted {
        return view(
            RunState::Cancelled,
            Some("its turn was interrupted".into()),
            answer,
        );
    }
    if !turn.answered {
        // A failed turn fails its agent in the batch that marks the item done.
        if seen.rec.status != AgentStatus::Failed {
            return view(RunState::Running, None, answer);
        }
        let why = seen
            .rec
            .last_error
            .clone()
            .unwrap_or_else(|| "the turn failed".into());
        return view(RunState::Failed, Some(why), answer);
    }
    if seen.rec.status == AgentStatus::WaitingQuestion && turn.reaches_end {
        if run.cancel_requested {
            return view(
                RunState::Cancelled,
                Some("cancelled while it asked".into()),
                answer,
            );
        }
        let question = seen.rec.status_reason.clone();
        return view(RunState::InputRequired, question, answer);
    }
    view(RunState::Completed, None, answer)
}

/// Now, ms since the epoch.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentd_actors::RunOrigin;
    use agentd_proto::ids::derived_id;

    /// A run of one message item, and its input's id.
    fn run_of(item: Uuid) -> (Run, Uuid) {
        let input = derived_id(item, "input");
        let run = Run {
            id: "r".into(),
            agent_id: "a".into(),
            door: "test".into(),
            origin: RunOrigin::Door,
            items: vec![item],
            inputs: vec![input],
            rejected: None,
            cancel_requested: false,
            unposted: false,
            created_ms: 1,
            fields: Default::default(),
        };
        (run, input)
    }

    fn seen(status: AgentStatus, pending: Vec<Envelope>, thread: Vec<ThreadEntry>) -> Seen {
        let mut rec = agentd_store::conformance::bare_record("a");
        rec.status = status;
        rec.status_reason = Some("Which region?".into());
        Seen {
            rec,
            pending,
            thread,
            push_pending: false,
            has_push: false,
        }
    }

    fn view(run: &Run, seen: &Seen) -> RunView {
        derive(run, seen, &pending_inputs(seen))
    }

    /// A run's state follows its item from the inbox through its turn to the answer, whose
    /// text and entries it keeps, with the tokens the turn used.
    #[test]
    fn a_run_is_pending_then_running_then_completed_with_its_answers_entries() {
        let env = Envelope::new(
            agentd_proto::Address::agent("caller"),
            agentd_proto::Address::agent("a"),
            agentd_proto::Item::Inbox(agentd_proto::InboxItem::message("hi")),
            1,
        );
        let item = env.id;
        let (run, input) = run_of(item);
        let queued = seen(AgentStatus::Idle, vec![env.clone()], vec![]);
        assert_eq!(view(&run, &queued).outcome.state, RunState::Pending);

        let asked = ThreadEntry::text(input, Role::User, "hi", 2);
        let mut step = ThreadEntry::text(Uuid::now_v7(), Role::Assistant, "hel", 3);
        step.tool_calls = vec![agentd_proto::ToolCall {
            id: "c".into(),
            name: "current_time".into(),
            arguments: serde_json::json!({}),
        }]
        .into();
        let running = seen(
            AgentStatus::Running,
            vec![env],
            vec![asked.clone(), step.clone()],
        );
        let v = view(&run, &running);
        assert_eq!(v.outcome.state, RunState::Running);
        assert_eq!(v.running_item, Some(item));

        let mut result = ThreadEntry::text(Uuid::now_v7(), Role::Tool, "12:00", 4);
        result.tool_call_id = Some("c".into());
        let mut last = ThreadEntry::text(Uuid::now_v7(), Role::Assistant, "lo", 5);
        last.usage = Some(Box::new(Usage {
            input: 3,
            output: 2,
            ..Usage::default()
        }));
        let thread = vec![asked, step.clone(), result, last.clone()];
        let v = view(&run, &seen(AgentStatus::Idle, vec![], thread.clone())).outcome;
        assert_eq!(v.state, RunState::Completed);
        assert_eq!(v.for_input, input);
        assert_eq!(v.answer.as_deref(), Some("hello"));
        assert_eq!(v.answer_entries, vec![step.id, last.id]);
        assert_eq!(v.usage.total(), 5);

        // The same thread with the agent asking its caller: the run waits for an answer.
        let v = view(&run, &seen(AgentStatus::WaitingQuestion, vec![], thread)).outcome;
        assert_eq!(v.state, RunState::InputRequired);
        assert_eq!(v.status_text.as_deref(), Some("Which region?"));
    }

    /// Refused, failed and cancelled runs say why.
    #[test]
    fn a_run_refused_failed_or_cancelled_says_why() {
        let (mut run, input) = run_of(Uuid::now_v7());
        let asked = ThreadEntry::text(input, Role::User, "hi", 2);

        let mut failed = seen(AgentStatus::Failed, vec![], vec![asked.clone()]);
        failed.rec.last_error = Some("model_error: down".into());
        let v = view(&run, &failed).outcome;
        assert_eq!(
            (v.state, v.status_text.as_deref()),
            (RunState::Failed, Some("model_error: down"))
        );

        run.cancel_requested = true;
        let v = view(&run, &seen(AgentStatus::Idle, vec![], vec![])).outcome;
        assert_eq!(v.state, RunState::Cancelled);

        run.rejected = Some("over budget".into());
        let v = view(&run, &seen(AgentStatus::Idle, vec![], vec![asked])).outcome;
        assert_eq!(
            (v.state, v.status_text.as_deref()),
            (RunState::Rejected, Some("over budget"))
        );
    }
}
