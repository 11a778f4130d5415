//! A2A tasks over agentd's durable state.
//!
//! A task is one message's handling by its context agent: from the item in the agent's durable
//! inbox to the end of the turn that handled it. What a task *is* (its id, its items, the
//! messages the client sent, a cancel asked) is kept in a [`TaskRecord`] the request handlers
//! write; what *became* of it is read from agentd's own durable state — the inbox (still
//! pending?) and the thread (the turn's input entry, then its steps, whose ids derive from the
//! item's id) — and kept, once read, in a [`Settled`] record any process may write: the answer
//! survives a later compaction or reset of the thread. Both live under the context agent's keys
//! (`ThreadStore::a2a_task_put`), so deleting the context deletes its tasks.
//!
//! Invariant: a [`TaskRecord`] is saved before its item is posted (`unposted` until the post
//! returns), so no reader ever takes a client's item for output no client message started.

use agentd_actors::AgentSystem;
use agentd_proto::ids::derived_id;
use agentd_proto::{AgentRecord, AgentStatus, Envelope, InboxItem, Item, Role, ThreadEntry};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::collections::HashSet;
use uuid::Uuid;

use super::error::A2aError;

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

/// What became of a task, as last read from the agent's state (any process writes it).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Settled {
    /// The task.
    pub task_id: String,
    /// The input it was read for (a later item makes it stale).
    pub for_input: Uuid,
    /// The state.
    pub state: State,
    /// The question, the error, or why it was cancelled.
    #[serde(default)]
    pub status_text: Option<String>,
    /// The answer (the artifact's text).
    #[serde(default)]
    pub answer: Option<String>,
    /// When this state was first seen, ms since the epoch.
    pub at_ms: u64,
}

/// Now, ms since the epoch.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// What one stored value is (the kinds share the context's task map).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub(super) enum Stored {
    Task(TaskRecord),
    Settled(Settled),
    /// A push notification config of a task (`super::push`).
    Push(super::push::PushConfig),
    /// A push notification in the outbox (`super::push`).
    Notice(super::push::Notice),
}

/// The key a task's settled state is stored under, beside the task.
fn settled_key(task_id: &str) -> String {
    format!("{task_id}#settled")
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

fn store_err(e: impl std::fmt::Display) -> A2aError {
    A2aError::Internal(format!("the store failed: {e}"))
}

/// Saves a task record.
pub async fn save(system: &AgentSystem, task: &TaskRecord) -> Result<(), A2aError> {
    let bytes = serde_json::to_vec(&Stored::Task(task.clone())).map_err(store_err)?;
    system
        .deps()
        .store
        .a2a_task_put(&task.context_id, &task.id, &bytes)
        .await
        .map_err(store_err)
}

/// Stores `value` under `key` in context `ctx`'s task map.
pub(super) async fn put(
    system: &AgentSystem,
    ctx: &str,
    key: &str,
    value: &Stored,
) -> Result<(), A2aError> {
    let bytes = serde_json::to_vec(value).map_err(store_err)?;
    system
        .deps()
        .store
        .a2a_task_put(ctx, key, &bytes)
        .await
        .map_err(store_err)
}

async fn save_settled(system: &AgentSystem, ctx: &str, s: &Settled) -> Result<(), A2aError> {
    let bytes = serde_json::to_vec(&Stored::Settled(s.clone())).map_err(store_err)?;
    system
        .deps()
        .store
        .a2a_task_put(ctx, &settled_key(&s.task_id), &bytes)
        .await
        .map_err(store_err)
}

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
    /// When the state was reached.
    pub at_ms: u64,
    /// The item whose turn runs now, with the ids its steps have (for text deltas).
    pub running_item: Option<Uuid>,
}

/// The context agent's state that tasks are read from.
pub struct Seen {
    /// Its record.
    pub rec: AgentRecord,
    /// Its pending items.
    pub pending: Vec<Envelope>,
    /// Its thread.
    pub thread: Vec<ThreadEntry>,
    /// Whether push notifications wait in its outbox (set by [`reconcile`]).
    pub push_pending: bool,
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
    answer: String,
    answered: bool,
    reaches_end: bool,
}

fn turn_at(thread: &[ThreadEntry], pos: usize) -> Turn {
    let mut t = Turn {
        interrupted: false,
        answer: String::new(),
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
                t.answer.push_str(&e.text);
                t.answered = e.tool_calls.is_empty();
            }
            _ => t.answered = false,
        }
    }
    t
}

/// What became of `task`, read from `seen`.
fn derive(task: &TaskRecord, seen: &Seen, pending_inputs: &HashSet<Uuid>) -> TaskView {
    let now = now_ms();
    let view = |state, status_text: Option<String>, answer: Option<String>| TaskView {
        task: task.clone(),
        state,
        status_text,
        answer,
        at_ms: now,
        running_item: None,
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
        let answer = pos
            .map(|p| turn_at(&seen.thread, p).answer)
            .filter(|a| !a.is_empty());
        let mut v = view(state, None, answer);
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
    let answer = Some(turn.answer.clone()).filter(|a| !a.is_empty());
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

/// What a context's task map holds, read.
#[derive(Default)]
pub(super) struct Contents {
    pub tasks: Vec<TaskRecord>,
    pub settled: Vec<Settled>,
    pub push: Vec<super::push::PushConfig>,
    pub notices: Vec<super::push::Notice>,
}

/// The context's tasks, settled states, push configs and notifications, read.
pub(super) async fn stored(system: &AgentSystem, ctx: &str) -> Result<Contents, A2aError> {
    let values = system
        .deps()
        .store
        .a2a_tasks(ctx)
        .await
        .map_err(store_err)?;
    let mut c = Contents::default();
    for v in values {
        match serde_json::from_slice::<Stored>(&v) {
            Ok(Stored::Task(t)) => c.tasks.push(t),
            Ok(Stored::Settled(s)) => c.settled.push(s),
            Ok(Stored::Push(p)) => c.push.push(p),
            Ok(Stored::Notice(n)) => c.notices.push(n),
            Err(e) => tracing::warn!(context = ctx, error = %e, "an A2A task could not be read"),
        }
    }
    Ok(c)
}

/// Whether context `ctx` has tasks (is an A2A context).
pub async fn is_context(system: &AgentSystem, ctx: &str) -> Result<bool, A2aError> {
    Ok(!system
        .deps()
        .store
        .a2a_tasks(ctx)
        .await
        .map_err(store_err)?
        .is_empty())
}

/// Every task of context `ctx` with what became of it, the settled states written where they
/// changed, and output no client started taken up as tasks of its own. `None`: no such
/// agent.
pub async fn reconcile(
    system: &AgentSystem,
    ctx: &str,
) -> Result<Option<(Seen, Vec<TaskView>)>, A2aError> {
    let Contents {
        mut tasks,
        settled,
        push,
        mut notices,
    } = stored(system, ctx).await?;
    let Some(mut seen) = Seen::load(system, ctx).await? else {
        return Ok(None);
    };
    discover(system, ctx, &seen, &mut tasks).await?;
    let pending_inputs: HashSet<Uuid> = seen
        .pending
        .iter()
        .map(|e| derived_id(e.id, "input"))
        .collect();
    let mut views = Vec::with_capacity(tasks.len());
    for task in tasks {
        let last = task.inputs.last().copied().unwrap_or_default();
        let known = settled
            .iter()
            .find(|s| s.task_id == task.id && s.for_input == last);
        if let Some(s) = known.filter(|s| s.state.is_terminal()) {
            views.push(view_of(task, s));
            continue;
        }
        let mut v = derive(&task, &seen, &pending_inputs);
        let changed = known.is_none_or(|s| {
            s.state != v.state || s.status_text != v.status_text || s.answer != v.answer
        });
        match known {
            Some(s) if s.state == v.state => v.at_ms = s.at_ms,
            _ => {}
        }
        // A working task's answer grows with each step: written when the state changes or
        // settles, not at every step.
        let worth_writing = known.is_none_or(|s| s.state != v.state) || v.state.is_terminal();
        if changed && worth_writing && !task.unposted {
            // The notifications first: a crash between the two writes finds the state
            // unsettled and writes the same notifications (same ids) again.
            super::push::enqueue(system, &push, &mut notices, &v, last).await?;
            let s = Settled {
                task_id: task.id.clone(),
                for_input: last,
                state: v.state,
                status_text: v.status_text.clone(),
                answer: v.answer.clone(),
                at_ms: v.at_ms,
            };
            save_settled(system, ctx, &s).await?;
        }
        views.push(v);
    }
    seen.push_pending = notices.iter().any(super::push::Notice::is_pending);
    Ok(Some((seen, views)))
}

fn view_of(task: TaskRecord, s: &Settled) -> TaskView {
    TaskView {
        task,
        state: s.state,
        status_text: s.status_text.clone(),
        answer: s.answer.clone(),
        at_ms: s.at_ms,
        running_item: None,
    }
}

/// Takes up as tasks what made the context agent run that no client's message started: a
/// pending message from another agent, or an input in the thread (a worker's or a
/// sub-agent's output, a message through agentd's API, a relayed forward) no task claims.
async fn discover(
    system: &AgentSystem,
    ctx: &str,
    seen: &Seen,
    tasks: &mut Vec<TaskRecord>,
) -> Result<(), A2aError> {
    let mut claimed: HashSet<Uuid> = tasks.iter().flat_map(|t| t.inputs.clone()).collect();
    let now = now_ms();
    for env in &seen.pending {
        let Item::Inbox(InboxItem::Message {
            text, from_agent, ..
        }) = &env.item
        else {
            continue;
        };
        let input = derived_id(env.id, "input");
        if !claimed.insert(input) {
            continue;
        }
        let task = TaskRecord {
            id: task_id(ctx, input),
            context_id: ctx.to_string(),
            items: vec![env.id],
            inputs: vec![input],
            history: vec![origin_message(
                ctx,
                &task_id(ctx, input),
                input,
                text,
                from_agent.as_deref(),
            )],
            origin: Origin::Agent,
            rejected: None,
            cancel_requested: false,
            unposted: false,
            created_ms: now,
        };
        save(system, &task).await?;
        tasks.push(task);
    }
    for e in &seen.thread {
        let input_like = match e.role {
            Role::User => true,
            Role::Assistant => e.from_agent.is_some(),
            _ => false,
        };
        if !input_like || !claimed.insert(e.id) {
            continue;
        }
        let id = task_id(ctx, e.id);
        let task = TaskRecord {
            id: id.clone(),
            context_id: ctx.to_string(),
            items: Vec::new(),
            inputs: vec![e.id],
            history: vec![origin_message(
                ctx,
                &id,
                e.id,
                &e.text,
                e.from_agent.as_deref(),
            )],
            origin: Origin::Agent,
            rejected: None,
            cancel_requested: false,
            unposted: false,
            created_ms: e.at_ms,
        };
        save(system, &task).await?;
        if e.role == Role::Assistant {
            // A relayed forward: kept on the thread without a turn; it is its own answer.
            let s = Settled {
                task_id: id.clone(),
                for_input: e.id,
                state: State::Completed,
                status_text: None,
                answer: Some(e.text.clone()),
                at_ms: e.at_ms,
            };
            save_settled(system, ctx, &s).await?;
        }
        tasks.push(task);
    }
    Ok(())
}

/// The history message of a task no client started: what started it.
fn origin_message(ctx: &str, task: &str, id: Uuid, text: &str, from: Option<&str>) -> Value {
    let mut metadata = json!({"agentd.origin": "agent"});
    if let Some(from) = from {
        metadata["agentd.fromAgent"] = json!(from);
    }
    json!({
        "messageId": id.to_string(),
        "contextId": ctx,
        "taskId": task,
        "role": "ROLE_USER",
        "parts": [{"text": text}],
        "metadata": metadata,
    })
}

/// Task `id` with what became of it (`TaskNotFound` if there is none).
pub async fn get(system: &AgentSystem, id: &str) -> Result<(Seen, TaskView), A2aError> {
    let not_found = || A2aError::TaskNotFound(format!("no task `{id}`"));
    let ctx = context_of(id).ok_or_else(not_found)?;
    let (seen, views) = reconcile(system, ctx).await?.ok_or_else(not_found)?;
    let v = views
        .into_iter()
        .find(|v| v.task.id == id)
        .ok_or_else(not_found)?;
    Ok((seen, v))
}

/// The ms an RFC 3339 timestamp names.
pub fn parse_timestamp(s: &str) -> Option<u64> {
    let t = time_parse(s)?;
    u64::try_from(t).ok()
}

/// `YYYY-MM-DDTHH:MM:SS[.fff]Z` (or `+00:00`) as ms since the epoch.
fn time_parse(s: &str) -> Option<i64> {
    let s = s.trim();
    let s = s
        .strip_suffix('Z')
        .or_else(|| s.strip_suffix("+00:00"))
        .unwrap_or(s);
    let (date, time) = s.split_once('T')?;
    let mut d = date.split('-');
    let (y, m, day): (i64, i64, i64) = (
        d.next()?.parse().ok()?,
        d.next()?.parse().ok()?,
        d.next()?.parse().ok()?,
    );
    let (hms, frac) = time.split_once('.').unwrap_or((time, "0"));
    let mut t = hms.split(':');
    let (h, mi, sec): (i64, i64, i64) = (
        t.next()?.parse().ok()?,
        t.next()?.parse().ok()?,
        t.next().unwrap_or("0").parse().ok()?,
    );
    let ms: i64 = format!("{frac:0<3}")[..3].parse().ok()?;
    if !(1..=12).contains(&m) || !(1..=31).contains(&day) || h > 23 || mi > 59 || sec > 60 {
        return None;
    }
    // Days from the civil date (Howard Hinnant's algorithm).
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(((days * 24 + h) * 60 + mi) * 60_000 + sec * 1000 + ms)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_parse_as_the_specification_writes_them() {
        assert_eq!(parse_timestamp("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(
            parse_timestamp("2023-11-14T22:13:20.123Z"),
            Some(1_700_000_000_123)
        );
        assert_eq!(
            parse_timestamp(&agentd_proto::time::rfc3339_utc(1_712_345_678_901)),
            Some(1_712_345_678_901)
        );
        assert_eq!(parse_timestamp("yesterday"), None);
    }

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
