//! A task's updates as a stream of `StreamResponse` objects (`SendStreamingMessage`,
//! `SubscribeToTask`): the task first, then `statusUpdate`s and `artifactUpdate`s until it is
//! terminal or asks for input.
//!
//! The answer streams as one artifact (`answer`): the model's text deltas appended in order,
//! then a last chunk that completes it to the stored answer. A stream that starts while the
//! task runs takes its snapshot and its live events under one lock of the event log
//! ([`agentd_bus::EventLog::subscribe_with_ring`]): the snapshot's artifact holds the steps the
//! thread has and the deltas the log holds of the step that streams; the live events go on
//! after the last of those, so a reconnecting client misses nothing and gets nothing twice.
//! With Redis the log holds every process's events, so any process serves any task's stream.

use super::A2a;
use super::error::A2aError;
use super::task::{self, State, TaskView, artifact, task_json};
use agentd_proto::Event;
use agentd_proto::ids::derived_step_id;
use futures::Stream;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::time::Duration;
use tokio::sync::broadcast::error::RecvError;
use uuid::Uuid;

/// The ids the steps of the turn of `item` have, step by step.
fn step_ids(item: Uuid, max_steps: u32) -> Vec<Uuid> {
    (0..=u64::from(max_steps) + 1)
        .map(|n| derived_step_id(item, n))
        .collect()
}

/// What the stream has sent of the answer.
struct Sent {
    text: String,
    /// The running item's step ids, and the last delta seq taken of each.
    steps: Vec<Uuid>,
    seqs: HashMap<Uuid, u64>,
    /// Steps whose entries the snapshot's thread had (their deltas are in the text already).
    finished: Vec<Uuid>,
    running: Option<Uuid>,
}

struct Follow {
    a2a: A2a,
    id: String,
    /// The context agent (whose events the stream follows).
    ctx: String,
    /// The context's `contextId` as the client sees it.
    shown_ctx: String,
    rx: tokio::sync::broadcast::Receiver<std::sync::Arc<agentd_bus::Logged>>,
    queue: std::collections::VecDeque<Value>,
    state: State,
    sent: Sent,
    done: bool,
    max_steps: u32,
}

impl Follow {
    fn status_update(&self, v: &TaskView) -> Value {
        let mut t = task_json(v, Some(0), false);
        let mut update = json!({
            "taskId": self.id,
            "contextId": self.shown_ctx,
            "status": t["status"].take(),
        });
        // The usage so far (`agentd.usage`), for a client that counts it.
        if let Some(m) = t.get_mut("metadata").map(Value::take) {
            update["metadata"] = m;
        }
        json!({"statusUpdate": update})
    }

    fn artifact_update(&self, text: &str, append: bool, last: bool) -> Value {
        json!({"artifactUpdate": {
            "taskId": self.id,
            "contextId": self.shown_ctx,
            "artifact": artifact(text),
            "append": append,
            "lastChunk": last,
        }})
    }

    /// Takes on the item the task's turn runs now (its step ids).
    fn running(&mut self, item: Option<Uuid>) {
        if item.is_some() && item != self.sent.running {
            self.sent.running = item;
            self.sent.steps = item
                .map(|i| step_ids(i, self.max_steps))
                .unwrap_or_default();
            self.sent.seqs.clear();
            self.sent.finished.clear();
        }
    }

    /// A text delta of the context: appended if it is of the running turn and new.
    fn delta(&mut self, step: Uuid, seq: u64, text: &str) {
        if !self.sent.steps.contains(&step) || self.sent.finished.contains(&step) {
            return;
        }
        if self.sent.seqs.get(&step).is_some_and(|&last| seq <= last) {
            return;
        }
        self.sent.seqs.insert(step, seq);
        let append = !self.sent.text.is_empty();
        self.sent.text.push_str(text);
        let update = self.artifact_update(text, append, false);
        self.queue.push_back(update);
    }

    /// The task as it is now: a status update when its state moved; at its end the answer
    /// completed and the stream closed.
    async fn look(&mut self) {
        let v = match task::get(&self.a2a.system, &self.id).await {
            Ok((_, v)) => v,
            Err(A2aError::TaskNotFound(_)) => {
                // Deleted with its context.
                self.done = true;
                return;
            }
            Err(e) => {
                tracing::warn!(task = %self.id, error = %e, "reading a streamed task");
                return;
            }
        };
        self.running(v.running_item);
        if v.state() == self.state {
            return;
        }
        self.state = v.state();
        if v.state().ends_wait() {
            if let Some(answer) = v.outcome.answer.as_ref().filter(|a| !a.is_empty()) {
                let update = match answer.strip_prefix(self.sent.text.as_str()) {
                    Some(rest) if !self.sent.text.is_empty() => {
                        self.artifact_update(rest, true, true)
                    }
                    _ => self.artifact_update(answer, false, true),
                };
                self.sent.text = answer.clone();
                self.queue.push_back(update);
            }
            self.done = true;
        }
        let update = self.status_update(&v);
        self.queue.push_back(update);
    }
}

/// The stream of task `id`, starting with its snapshot.
pub async fn follow(a2a: &A2a, id: &str) -> Result<impl Stream<Item = Value> + use<>, A2aError> {
    let (rx, ring) = a2a.events.log.subscribe_with_ring();
    let (seen, v) = task::get(&a2a.system, id).await?;
    let ctx = v.task.context_id.clone();
    let max_steps = a2a.system.deps().config.limits.max_steps_per_turn;
    let mut f = Follow {
        a2a: a2a.clone(),
        id: id.to_string(),
        ctx: ctx.clone(),
        shown_ctx: v.task.shown_context().to_string(),
        rx,
        queue: Default::default(),
        state: v.state(),
        sent: Sent {
            text: v.outcome.answer.clone().unwrap_or_default(),
            steps: Vec::new(),
            seqs: HashMap::new(),
            finished: Vec::new(),
            running: None,
        },
        done: v.state().ends_wait(),
        max_steps,
    };
    let mut snapshot = v.clone();
    if let Some(item) = v.running_item {
        f.running(Some(item));
        let ids: std::collections::HashSet<Uuid> = seen.thread.iter().map(|e| e.id).collect();
        f.sent.finished = f
            .sent
            .steps
            .iter()
            .copied()
            .filter(|s| ids.contains(s))
            .collect();
        // The step streaming now: its deltas the log holds, in order.
        for l in ring {
            if let Event::TextDelta {
                agent_id,
                step_id,
                seq,
                text,
            } = &l.event
                && *agent_id == ctx
                && f.sent.steps.contains(step_id)
                && !f.sent.finished.contains(step_id)
                && f.sent.seqs.get(step_id).is_none_or(|&last| *seq > last)
            {
                f.sent.seqs.insert(*step_id, *seq);
                f.sent.text.push_str(text);
            }
        }
        snapshot.outcome.answer = Some(f.sent.text.clone()).filter(|t| !t.is_empty());
    }
    f.queue
        .push_back(json!({"task": task_json(&snapshot, None, true)}));
    Ok(futures::stream::unfold(f, |mut f| async move {
        loop {
            if let Some(v) = f.queue.pop_front() {
                return Some((v, f));
            }
            if f.done {
                return None;
            }
            let tick = tokio::time::sleep(Duration::from_millis(1000));
            tokio::select! {
                got = f.rx.recv() => match got {
                    Ok(l) => match &l.event {
                        Event::TextDelta { agent_id, step_id, seq, text } if *agent_id == f.ctx => {
                            if f.sent.running.is_none() {
                                // The turn started since the last look: learn its steps.
                                f.look().await;
                            }
                            f.delta(*step_id, *seq, text);
                        }
                        e if crate::runs::concerns(e, &f.ctx) => f.look().await,
                        _ => {}
                    },
                    Err(RecvError::Lagged(_)) => f.look().await,
                    Err(RecvError::Closed) => return None,
                },
                _ = tick => f.look().await,
            }
        }
    }))
}
