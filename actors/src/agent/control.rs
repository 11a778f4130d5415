//! Lifecycle controls on a live agent (pause, resume, cancel, terminate), stopping its actor, and
//! what they share: aborting the running turn and dropping the queue.

use super::AgentActor;
use super::activity::{Activity, Slot, TurnStart};
use super::messages::{ApplyControl, CancelItem, SetEnv, StopAgent};
use crate::ports::StoreWrite;
use crate::turn::{OpenCall, TurnInput};
use actix::prelude::*;
use agentd_proto::conversation;
use agentd_proto::ids::derived_id;
use agentd_proto::{
    AgentRecord, AgentStatus, AgentdError, CheckpointReason, Control, DependencyOutcome, ErrorCode,
    ItemCancel, Role, ThreadEntry,
};
use std::sync::Arc;
use uuid::Uuid;

/// What becomes of the item of a turn ended early.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ItsItem {
    /// Marked done in the durable inbox: the turn does not run again (an interrupt, a cancel,
    /// a terminate, a restore, a close).
    Done,
    /// Left pending there: the turn runs again on the agent's next activation (a shutdown).
    Pending,
}

/// What becomes of the dependents' watches when the queue is emptied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Watches {
    /// Taken with the rest (the agent is closed: its dependents are told by the supervisor).
    Take,
    /// Parked until a later success reaches them (see [`super::queue`]).
    Park,
}

/// What records a turn ended early: a result for each call it left open, then a marker entry
/// before whatever the agent handles next.
pub(super) struct Interruption {
    pub(super) closings: Vec<ThreadEntry>,
    pub(super) marker: ThreadEntry,
}

impl Interruption {
    /// What records that the turn of `cause` ended at `at_ms` with `open` calls unanswered.
    pub(super) fn of(open: &[OpenCall], cause: Uuid, at_ms: u64) -> Interruption {
        let closings = open
            .iter()
            .map(|call| {
                conversation::interrupted_result(
                    call.result_id,
                    &call.call_id,
                    "the turn was interrupted before this tool call returned",
                    at_ms,
                )
            })
            .collect();
        let marker = ThreadEntry {
            interrupted: true,
            ..ThreadEntry::text(
                derived_id(cause, "interrupted"),
                Role::System,
                "(the previous turn was interrupted)",
                at_ms,
            )
        };
        Interruption { closings, marker }
    }

    /// The entries to append, in order.
    pub(super) fn entries(self) -> Vec<ThreadEntry> {
        let mut entries = self.closings;
        entries.push(self.marker);
        entries
    }
}

impl AgentActor {
    /// Applies `control`; a process-per-agent backend follows the same control (signals).
    pub(super) fn control(
        &mut self,
        control: Control,
        ctx: &mut Context<Self>,
    ) -> Result<AgentRecord, AgentdError> {
        let res = self.apply_control(control, ctx);
        if res.is_ok() {
            self.deps().model.control(&self.rec.id, control);
        }
        res
    }

    fn apply_control(
        &mut self,
        control: Control,
        ctx: &mut Context<Self>,
    ) -> Result<AgentRecord, AgentdError> {
        match control {
            Control::Pause => self.pause(ctx)?,
            Control::Resume => {
                if self.rec.status != AgentStatus::Paused {
                    // A pause asked of a running turn is withdrawn before it takes effect.
                    if let Some(turn) = self.activity.running() {
                        turn.shared.withdraw_stop();
                        return Ok(self.rec.clone());
                    }
                    return Err(AgentdError::new(
                        ErrorCode::InvalidTransition,
                        format!("agent `{}` is {}, not paused", self.rec.id, self.rec.status),
                    ));
                }
                self.resume(ctx)?;
            }
            Control::Cancel | Control::Terminate => {
                let (to, outcome) = if control == Control::Cancel {
                    (AgentStatus::Cancelled, DependencyOutcome::Cancelled)
                } else {
                    (AgentStatus::Terminated, DependencyOutcome::Terminated)
                };
                if !self.rec.status.can_become(to) && self.rec.status != to {
                    return Err(AgentdError::new(
                        ErrorCode::InvalidTransition,
                        format!(
                            "agent `{}` cannot go from {} to {to}",
                            self.rec.id, self.rec.status
                        ),
                    ));
                }
                if control == Control::Cancel {
                    self.interrupt_turn(ctx);
                } else {
                    // Seed 001: always checkpoint before terminating.
                    self.checkpoint(CheckpointReason::Auto, "terminate", ctx);
                    let interruption = match self.abort_turn(ItsItem::Done, ctx) {
                        Some(i) => Some(i),
                        None => self.end_tool_wait(ItsItem::Done, ctx),
                    };
                    if let Some(interruption) = interruption {
                        self.write_entries_later(interruption.closings, ctx);
                    }
                }
                self.drop_queue(ctx);
                self.stop_waiting_for_dependencies();
                self.set_status(to, Some(format!("{} by control", control.as_str())), ctx)?;
                // Not only the turn's end: its dependents hear it too.
                self.tell_dependents(outcome);
            }
            Control::Close | Control::Delete => {
                return Err(AgentdError::new(
                    ErrorCode::InvalidArgument,
                    "close and delete go through the supervisor",
                ));
            }
        }
        self.pump(ctx);
        Ok(self.rec.clone())
    }

    /// A running turn stops at its next step boundary (and continues on resume); otherwise the
    /// agent is paused now (an item waiting for a turn slot goes back first in the queue).
    pub(super) fn pause(&mut self, ctx: &mut Context<Self>) -> Result<(), AgentdError> {
        if let Some(turn) = self.activity.running() {
            if self.rec.status != AgentStatus::Paused {
                turn.shared.request_stop();
                self.rec.status_reason = Some("pause requested".into());
            }
            return Ok(());
        }
        self.pause_now("paused by control".into(), ctx)
    }

    /// Pauses the agent now, with `reason`: an item waiting for a turn slot withdraws its
    /// request and goes back first in the queue (resume asks for a slot again).
    pub(super) fn pause_now(
        &mut self,
        reason: String,
        ctx: &mut Context<Self>,
    ) -> Result<(), AgentdError> {
        self.check_can_pause()?;
        self.withdraw_permit_request();
        self.set_status(AgentStatus::Paused, Some(reason), ctx)
    }

    /// Refuses, changing nothing, if the agent's status cannot become `paused`.
    fn check_can_pause(&self) -> Result<(), AgentdError> {
        let status = self.rec.status;
        if status == AgentStatus::Paused || status.can_become(AgentStatus::Paused) {
            return Ok(());
        }
        Err(AgentdError::new(
            ErrorCode::InvalidTransition,
            format!("agent `{}` cannot go from {status} to paused", self.rec.id),
        ))
    }

    /// A turn a pause stopped continues; otherwise the agent shows what it does at rest again
    /// (`idle`; `waiting_dependency` while its dependencies are unmet; `queued` while a retry
    /// is held).
    fn resume(&mut self, ctx: &mut Context<Self>) -> Result<(), AgentdError> {
        if matches!(self.activity, Activity::WaitingTool(_)) {
            // Paused while waiting for service calls: the turn goes on if they are all
            // closed, otherwise the wait does.
            if self.tools_answered() {
                self.continue_after_tools(ctx);
                return Ok(());
            }
            let status = self.tool_wait_status();
            return self.set_status(status, Some("resumed".into()), ctx);
        }
        if !matches!(self.activity, Activity::PausedMidTurn { .. }) {
            return self.rest(Some("resumed".into()), ctx);
        }
        self.check_can_run()?;
        let input = self.take_paused_turn().flatten();
        let start = TurnStart {
            cause: agentd_proto::ids::new_id(),
            env: input,
            input: TurnInput::Continue,
            input_written: None,
            slot: Slot::NotHeld,
        };
        self.run(start, Some("resumed".into()), ctx)
    }

    /// Aborts the running turn (its persisted output stays), leaving its item as `item` says.
    /// Answers what records the interruption (the caller writes what it keeps of it), or `None`
    /// if no turn ran.
    pub(super) fn abort_turn(
        &mut self,
        item: ItsItem,
        ctx: &mut Context<Self>,
    ) -> Option<Interruption> {
        self.activity.running()?;
        self.release_permit();
        let turn = self.take_running()?;
        ctx.cancel_future(turn.handle);
        // Its model call, if one was in flight, is aborted with it; the provider bills what it
        // produced so far, and the turn that would have counted it is gone.
        if let Some(usage) = turn.shared.abort_call() {
            self.count_usage(usage, ctx);
        }
        // The known thread went with the turn; what the aborted turn wrote is read again.
        self.thread = None;
        if turn.restart_backend_after {
            self.deps().model.control(&self.rec.id, Control::Terminate);
        }
        if item == ItsItem::Done {
            self.done(turn.input.map(|e| e.id), ctx);
        }
        let at_ms = self.deps().clock.now_ms();
        Some(Interruption::of(
            &turn.shared.take_open_calls(),
            turn.cause,
            at_ms,
        ))
    }

    /// Aborts the running turn and writes the interruption (its open calls closed, then the
    /// marker) before the next message.
    pub(super) fn interrupt_turn(&mut self, ctx: &mut Context<Self>) {
        let interruption = match self.abort_turn(ItsItem::Done, ctx) {
            Some(i) => Some(i),
            None => self.end_tool_wait(ItsItem::Done, ctx),
        };
        let Some(interruption) = interruption else {
            return;
        };
        self.write_entries_later(interruption.entries(), ctx);
    }

    /// Queues appends of `entries` to the agent's thread, in order.
    fn write_entries_later(&mut self, entries: Vec<ThreadEntry>, ctx: &mut Context<Self>) {
        for entry in entries {
            let agent_id = self.shared_id();
            let entry = Arc::new(entry);
            self.write_later(StoreWrite::Append { agent_id, entry }, ctx);
        }
    }

    /// Drops every queued item (cancel, terminate, restore, a failed dependency), marking them
    /// done; dependents' watches are parked instead (see [`super::queue`]).
    pub(super) fn drop_queue(&mut self, ctx: &mut Context<Self>) {
        for id in self.take_queue(Watches::Park) {
            self.done(Some(id), ctx);
        }
    }

    /// Empties the queue (its watches as `watches` says), the item waiting for a slot and a
    /// paused turn's item; answers their ids for the caller to mark done in the durable inbox.
    fn take_queue(&mut self, watches: Watches) -> Vec<Uuid> {
        let mut ids = match watches {
            Watches::Take => self.queue.take_all(),
            Watches::Park => self.queue.take_all_but_watches(),
        };
        if matches!(self.activity, Activity::AwaitingPermit(_)) {
            self.release_permit();
        }
        if let Some(pending) = self.take_pending_start() {
            ids.push(pending.env.id);
        }
        if let Some(input) = self.take_paused_turn() {
            ids.extend(input.map(|e| e.id));
        }
        ids
    }

    /// Ends a process-per-agent backend's process so that its next turn starts a new one with
    /// the agent's current environment; a running turn finishes first.
    pub(super) fn restart_backend(&mut self) {
        match self.activity.running_mut() {
            Some(turn) => turn.restart_backend_after = true,
            None => self.deps().model.control(&self.rec.id, Control::Terminate),
        }
    }
}

impl Handler<ApplyControl> for AgentActor {
    type Result = Result<AgentRecord, AgentdError>;

    fn handle(&mut self, ApplyControl(c): ApplyControl, ctx: &mut Self::Context) -> Self::Result {
        let res = self.control(c, ctx);
        self.check_activity();
        res
    }
}

impl Handler<CancelItem> for AgentActor {
    type Result = Result<ItemCancel, AgentdError>;

    fn handle(&mut self, CancelItem(id): CancelItem, ctx: &mut Self::Context) -> Self::Result {
        let res = self.cancel_item(id, ctx);
        self.pump(ctx);
        self.check_activity();
        res
    }
}

impl AgentActor {
    /// [`CancelItem`]: item `id` is done without its answer, and nothing else of the queue
    /// changes.
    fn cancel_item(
        &mut self,
        id: Uuid,
        ctx: &mut Context<Self>,
    ) -> Result<ItemCancel, AgentdError> {
        if self.queue.remove(id) {
            self.done(Some(id), ctx);
            return Ok(ItemCancel::Dropped);
        }
        if !self.activity.holds(id) {
            return Ok(ItemCancel::NotHeld);
        }
        match &self.activity {
            Activity::AwaitingPermit(_) => {
                self.release_permit();
                if let Some(pending) = self.take_pending_start() {
                    self.done(Some(pending.env.id), ctx);
                }
                self.rest(Some("queued item cancelled".into()), ctx)?;
                Ok(ItemCancel::Dropped)
            }
            Activity::PausedMidTurn { .. } => {
                // The agent stays paused; the turn it would have continued is gone.
                if let Some(input) = self.take_paused_turn() {
                    self.done(input.map(|e| e.id), ctx);
                }
                Ok(ItemCancel::Interrupted)
            }
            _ => {
                self.interrupt_turn(ctx);
                self.rest(Some("turn cancelled".into()), ctx)?;
                Ok(ItemCancel::Interrupted)
            }
        }
    }
}

impl Handler<SetEnv> for AgentActor {
    type Result = MessageResult<SetEnv>;

    fn handle(&mut self, msg: SetEnv, ctx: &mut Self::Context) -> Self::Result {
        self.rec.env = msg.0;
        self.persist(ctx);
        self.restart_backend();
        self.check_activity();
        MessageResult(self.rec.clone())
    }
}

impl Handler<StopAgent> for AgentActor {
    // The answer comes once the record (and the interruption marker) are persisted, so a
    // re-activation right after never reads a stale status.
    type Result = ResponseActFuture<Self, AgentRecord>;

    fn handle(&mut self, msg: StopAgent, ctx: &mut Self::Context) -> Self::Result {
        // The agent's runtime ends: a process-per-agent backend ends its process too (it is
        // started again, with the whole thread, on re-activation) — gracefully for a cancel
        // (seed 001: SIGTERM first), at once otherwise; a closed agent's backend keeps what it
        // keeps of the agent (an agent CLI's session).
        let ending = match msg.final_status {
            Some(AgentStatus::Cancelled) => Control::Cancel,
            Some(AgentStatus::Closed) => Control::Close,
            _ => Control::Terminate,
        };
        self.deps().model.control(&self.rec.id, ending);
        // Close drops queued work; a shutdown (no final status) keeps it in the durable inbox
        // for the next activation. The actor stops right after this answer, so dropped items
        // are marked done in the answer's own future (a spawned one would never run).
        let closing = msg.final_status.is_some();
        // A held item's deferred turn start is written (before what its end writes here), and
        // what the agent holds in stream entries is taken out: dropped with the rest on a
        // close, adopted into the durable inbox otherwise.
        self.release_deferred_flush(ctx);
        let held = self.take_held();
        let mut dropped: Vec<Uuid> = Vec::new();
        if closing {
            dropped.extend(
                self.activity
                    .running()
                    .and_then(|t| t.input.as_ref().map(|e| e.id)),
            );
        }
        // A shutdown leaves the turn's calls open: the turn runs again on re-activation and
        // answers them (a service call it waits for stays open in the store).
        let usage_before = self.rec.usage;
        let interruption = match self.abort_turn(ItsItem::Pending, ctx) {
            Some(i) => Some(i).filter(|_| closing),
            None if closing => {
                if let Activity::WaitingTool(w) = &self.activity {
                    dropped.extend(w.input.as_ref().map(|e| e.id));
                }
                self.end_tool_wait(ItsItem::Pending, ctx)
            }
            None => None,
        };
        // The model call aborted with the turn cost tokens: the record keeps them, shutdown
        // or not (the turn's re-run makes a call of its own).
        let spent = self.rec.usage != usage_before;
        if closing {
            // A closed root or worker meets its dependents (the supervisor tells them).
            dropped.extend(self.take_queue(Watches::Take));
        } else {
            self.queue.forget_queued();
        }
        self.release_permit();
        // What it accepted from now on would be dropped from memory with no live actor left to
        // run it: it refuses deliveries, and the router activates a fresh actor instead.
        self.stop();
        if let Some(to) = msg.final_status {
            if self.rec.status != to && !self.rec.status.can_become(to) {
                // e.g. a running agent being closed: its turn is over, so it is idle first.
                let _ = self.transition(AgentStatus::Idle, None);
            }
            let _ = self.transition(to, Some("closed by control".into()));
            self.rec.updated_at_ms = self.deps().clock.now_ms();
        }
        let store = self.deps().store.clone();
        let rec = self.rec.clone();
        Box::pin(
            async move {
                for entry in interruption.map(Interruption::entries).unwrap_or_default() {
                    if let Err(e) = store.append(&rec.id, &entry).await {
                        tracing::error!(agent_id = %rec.id, error = %e, "recording the interruption failed");
                        break;
                    }
                }
                for id in dropped {
                    if let Err(e) = store.inbox_done(&rec.id, id).await {
                        tracing::warn!(agent_id = %rec.id, error = %e, "dropping a queued item failed");
                    }
                }
                if closing {
                    let agent_id: Arc<str> = rec.id.as_str().into();
                    let acks: Vec<StoreWrite> = held
                        .into_iter()
                        .map(|(_, entry)| StoreWrite::Acknowledge {
                            agent_id: agent_id.clone(),
                            entry,
                        })
                        .collect();
                    if !acks.is_empty()
                        && let Err(e) = store.write_batch(&acks).await
                    {
                        tracing::warn!(agent_id = %rec.id, error = %e, "acknowledging dropped held items failed");
                    }
                } else {
                    super::held::adopt_on_stop(&store, &rec.id, held).await;
                }
                if (closing || spent)
                    && let Err(e) = store.put_agent(&rec).await
                {
                    tracing::error!(agent_id = %rec.id, error = %e, "persisting the agent record failed");
                }
                rec
            }
            .into_actor(self)
            .map(|rec, _, ctx| {
                ctx.stop();
                rec
            }),
        )
    }
}
