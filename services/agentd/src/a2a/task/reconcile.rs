//! Every task of a context brought up to date: each state read once written beside the task
//! (with its push notifications first), and output no client's message started taken up as
//! tasks of its own.

use super::derive::{TaskView, derive};
use super::map::Contents;
use super::stored::{save_settled, stored};
use super::{Origin, Settled, TaskRecord, context_of, now_ms, save, task_id};
use crate::a2a::error::A2aError;
use crate::runs::{Seen, pending_inputs};
use agentd_actors::AgentSystem;
use agentd_actors::{RunOutcome, RunState};
use agentd_proto::ids::derived_id;
use agentd_proto::{InboxItem, Item, Role, ThreadEntry};
use serde_json::{Value, json};
use std::collections::HashSet;
use uuid::Uuid;

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
    let Some(mut seen) = Seen::load(system, ctx).await.map_err(A2aError::store)? else {
        return Ok(None);
    };
    discover(system, ctx, &seen, &mut tasks).await?;
    let pending_inputs = pending_inputs(&seen);
    let mut views = Vec::with_capacity(tasks.len());
    for task in tasks {
        let last = task.inputs.last().copied().unwrap_or_default();
        let known = settled
            .iter()
            .find(|s| s.task_id == task.id && s.outcome.for_input == last)
            .map(|s| &s.outcome);
        if let Some(s) = known.filter(|s| s.state.is_terminal()) {
            views.push(TaskView {
                task,
                outcome: s.clone(),
                running_item: None,
            });
            continue;
        }
        let mut v = derive(&task, &seen, &pending_inputs);
        let now = &mut v.outcome;
        let changed = known.is_none_or(|s| {
            s.state != now.state || s.status_text != now.status_text || s.answer != now.answer
        });
        match known {
            Some(s) if s.state == now.state => now.at_ms = s.at_ms,
            _ => {}
        }
        // A working task's answer grows with each step: written when the state changes or
        // settles, not at every step.
        let worth_writing = known.is_none_or(|s| s.state != now.state) || now.state.is_terminal();
        if changed && worth_writing && !task.unposted {
            // The notifications first: a crash between the two writes finds the state
            // unsettled and writes the same notifications (same ids) again.
            super::enqueue(system, &push, &mut notices, &v, last).await?;
            let s = Settled {
                task_id: task.id.clone(),
                outcome: v.outcome.clone(),
            };
            save_settled(system, ctx, &s).await?;
        }
        views.push(v);
    }
    seen.push_pending = notices.iter().any(super::Notice::is_pending);
    seen.has_push = push.iter().any(|c| !c.deleted);
    Ok(Some((seen, views)))
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
    if unclaimed(seen, &claimed) {
        // A client's task is saved before its item is posted, but the tasks were read before
        // the inbox and the thread: an input of a task saved in between looks unclaimed. Read
        // again (after the inbox and the thread), the tasks hold every client's input seen.
        *tasks = stored(system, ctx).await?.tasks;
        claimed = tasks.iter().flat_map(|t| t.inputs.clone()).collect();
    }
    // The context's `contextId` as its client chose it, which a task of its own carries.
    let client_context = tasks.iter().find_map(|t| t.client_context_id.clone());
    let shown = client_context.as_deref().unwrap_or(ctx);
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
            client_context_id: client_context.clone(),
            items: vec![env.id],
            inputs: vec![input],
            history: vec![origin_message(
                shown,
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
        if !is_input(e) || !claimed.insert(e.id) {
            continue;
        }
        let id = task_id(ctx, e.id);
        let task = TaskRecord {
            id: id.clone(),
            context_id: ctx.to_string(),
            client_context_id: client_context.clone(),
            items: Vec::new(),
            inputs: vec![e.id],
            history: vec![origin_message(
                shown,
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
                outcome: RunOutcome {
                    for_input: e.id,
                    state: RunState::Completed,
                    status_text: None,
                    answer: Some(e.text.clone()),
                    answer_entries: vec![e.id],
                    at_ms: e.at_ms,
                    usage: agentd_proto::Usage::default(),
                },
            };
            save_settled(system, ctx, &s).await?;
        }
        tasks.push(task);
    }
    Ok(())
}

/// Whether `seen` holds an input no task claims: a pending message, or an input entry of the
/// thread.
fn unclaimed(seen: &Seen, claimed: &HashSet<Uuid>) -> bool {
    let pending = seen.pending.iter().any(|env| {
        matches!(&env.item, Item::Inbox(InboxItem::Message { .. }))
            && !claimed.contains(&derived_id(env.id, "input"))
    });
    pending
        || seen
            .thread
            .iter()
            .any(|e| is_input(e) && !claimed.contains(&e.id))
}

/// Whether thread entry `e` is an input that starts a task: a user's message, or a relayed
/// forward (an assistant entry from another agent).
fn is_input(e: &ThreadEntry) -> bool {
    match e.role {
        Role::User => true,
        Role::Assistant => e.from_agent.is_some(),
        _ => false,
    }
}

/// The history message of a task no client started: what started it (`ctx`: the context as
/// clients see it).
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
