//! `AgentActor`: one agent = one session = one thread. It owns its status, its inbox queue and
//! its running turn. Items are handled one at a time in arrival order; an `interrupt` message
//! aborts the running turn and goes first; `urgent` messages (results of sub-agents) go before
//! what is queued without aborting anything. A turn's error or panic marks this agent `failed`
//! and never touches another agent.

use crate::channel_router::ChannelRouter;
use crate::deps::Deps;
use crate::messages::{
    AddUsage, AgentStopped, ApplyControl, ChildOutput, Deliver, Forget, Output, Restore, Runtime,
    RuntimeState, Snapshot, StopAgent,
};
use crate::metrics;
use crate::ports::StoreWrite;
use crate::supervisor::Supervisor;
use crate::tools::ToolContext;
use crate::turn::{Turn, TurnInput, TurnResult};
use actix::prelude::*;
use agentd_proto::Marker;
use agentd_proto::ids::derived_id;
use agentd_proto::{
    AgentRecord, AgentStatus, AgentdError, Channel, CheckpointReason, Control, Envelope, ErrorCode,
    Event, InboxItem, Item, Role, ThreadEntry,
};
use futures::FutureExt;
use std::collections::VecDeque;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use tracing::Instrument;
use uuid::Uuid;

/// What taking a delivery answers, once its item is durably queued (`Ok(false)`: a duplicate).
type Delivered = ResponseActFuture<AgentActor, Result<bool, AgentdError>>;

/// Moves the `agentd_inbox_depth` gauge (inbox items queued in this process) by `delta`.
fn inbox_depth_changed(delta: f64) {
    static DEPTH: std::sync::OnceLock<metrics::Counter> = std::sync::OnceLock::new();
    DEPTH
        .get_or_init(|| {
            metrics::global().gauge(
                "agentd_inbox_depth",
                "Inbox items queued in this process.",
                &[],
            )
        })
        .add(delta);
}

/// The dependencies an agent still waits for. Boxed, and absent when there are none (most
/// agents): an idle agent's actor stays small.
#[derive(Default)]
#[allow(clippy::box_collection)] // the box is the point: one pointer in the actor, not 48 bytes
struct Unmet(Option<Box<std::collections::HashSet<String>>>);

impl Unmet {
    fn is_empty(&self) -> bool {
        self.0.as_ref().is_none_or(|set| set.is_empty())
    }

    fn contains(&self, id: &str) -> bool {
        self.0.as_ref().is_some_and(|set| set.contains(id))
    }

    fn remove(&mut self, id: &str) {
        if let Some(set) = &mut self.0 {
            set.remove(id);
        }
    }

    fn iter(&self) -> impl Iterator<Item = &String> {
        self.0.iter().flat_map(|set| set.iter())
    }
}

/// What every agent of a process shares: ports, config and the process actors' addresses
/// (one pointer per agent; `Addr` clones would allocate).
pub struct AgentEnv {
    /// Ports and config.
    pub deps: Arc<Deps>,
    /// The process supervisor.
    pub supervisor: Arc<Addr<Supervisor>>,
    /// The process router.
    pub router: Arc<Addr<ChannelRouter>>,
    /// Turn slots under a concurrency limit, if one is set.
    pub scheduler: Option<Arc<Addr<crate::scheduler::Scheduler>>>,
    /// What each agent tree has spent, as last summed (tree budgets).
    pub tree_spend: crate::tree_spend::TreeSpend,
}

/// What an agent's turns show its model; it follows from the agent's type, allowed tools,
/// depth and parent, which do not change, and from the tool catalogue, whose version its specs
/// carry.
struct TurnSetup {
    tool_specs: crate::tools::VisibleSpecs,
    system_prompt: Arc<str>,
    names: Arc<crate::turn::RequestNames>,
    usage: UsageMeters,
}

/// The price of an agent's model, the counters its usage adds to and its turn-duration
/// histogram, resolved once (a type look-up, a price look-up and six metric series per turn
/// otherwise).
struct UsageMeters {
    price: agentd_proto::usage::Price,
    /// Input, output, cache write, cache read.
    tokens: [metrics::Counter; 4],
    cost: metrics::Counter,
    /// Duration of its turns (by agent type).
    turns: metrics::Timer,
}

impl UsageMeters {
    fn of(rec: &AgentRecord, deps: &Deps) -> Self {
        let config = &deps.config;
        let model = config
            .types
            .get(&rec.agent_type)
            .and_then(|t| t.model.as_deref());
        let model_name = model.unwrap_or("default");
        let m = metrics::global();
        let tokens = |kind| {
            m.counter(
                "agentd_tokens_total",
                "Tokens used, by model and kind.",
                &[("model", model_name), ("kind", kind)],
            )
        };
        UsageMeters {
            price: config.price_of(model),
            tokens: [
                tokens("input"),
                tokens("output"),
                tokens("cache_write"),
                tokens("cache_read"),
            ],
            cost: m.counter(
                "agentd_cost_usd_total",
                "Cost in USD, by model.",
                &[("model", model_name)],
            ),
            turns: m.histogram(
                "agentd_turn_seconds",
                "Duration of agent turns.",
                &[("agent_type", &rec.agent_type)],
            ),
        }
    }
}

struct RunningTurn {
    handle: SpawnHandle,
    cause: Uuid,
    /// The inbox envelope this turn handles (marked done in the store when the turn ends, or
    /// queued again when the store was unreachable).
    input: Option<Envelope>,
    stop: Arc<AtomicBool>,
    started: std::time::Instant,
}

/// The actor of one agent.
pub struct AgentActor {
    rec: SharedRecord,
    /// Shared with every agent of the process (one pointer here instead of nine).
    env: Arc<AgentEnv>,
    inbox: VecDeque<Envelope>,
    turn: Option<Box<RunningTurn>>,
    /// A pause stopped a turn at a step boundary; resume continues it.
    paused_mid_turn: bool,
    /// The inbox envelope of the paused turn.
    paused_input: Option<Box<Envelope>>,
    /// Delay before retrying a turn that hit an unreachable store.
    retry_backoff_ms: u16,
    /// The queue is held until a scheduled retry.
    holding_for_retry: bool,
    /// An interrupted turn's item (rate limit, unreachable store): it runs again before
    /// anything queued, urgent items included.
    retry: Option<Box<Envelope>>,
    /// Why a pause requested at a step boundary happens (a budget), if not a control.
    pause_reason: Option<Box<str>>,
    /// The item waiting for a turn slot.
    awaiting_permit: Option<Box<(Envelope, TurnInput)>>,
    /// This agent holds a turn slot.
    has_permit: bool,
    /// Dependencies (spawn `depends_on`) that have not completed yet; turns wait for them.
    unmet: Unmet,
    /// The environment changed during a turn: the backend's process restarts after it.
    restart_backend_after_turn: bool,
    /// Writes of this agent's own state (thread entries, inbox items done) waiting for the
    /// next flush, in order; the record goes with them when it changed.
    pending_writes: Vec<StoreWrite>,
    /// The record changed since the last flush.
    record_dirty: bool,
    /// A flush is queued and has not started yet (later writes join it).
    flush_queued: bool,
    /// An inbox item's durable push is under way ([`Self::deliver`]). actix may still run a
    /// spawned future's completion meanwhile (a turn's end, when it completes in the same poll
    /// as the delivery), and a flush queued then is held until the push is answered: the
    /// turn's end and the pushed item's turn start then go in one batch, not two.
    push_in_flight: bool,
    /// A flush was asked for while [`Self::push_in_flight`]; it is queued once the push is
    /// answered.
    flush_held: bool,
    /// Set by the flush that makes the current turn's input durable (the turn appends the
    /// input itself if that flush failed).
    input_written: Option<Arc<AtomicBool>>,
    /// Outputs to send once the next flush is written (they were made from what it writes).
    after_flush: Vec<ChildOutput>,
    /// Outputs go to `after_flush` instead of out at once (while a turn's end is handled
    /// whose last entry is still to be written).
    hold_outputs: bool,
    /// Delay before writing a failed flush again.
    flush_backoff_ms: u16,
    /// The item whose turn start (input entry, `running` record) was written together with its
    /// inbox push, and the input made for it then (the turn uses that one, written as is).
    prestarted: Option<Box<(Uuid, TurnInput)>>,
    /// The agent's thread as stored, once read: handed to each turn (which then needs no
    /// store read per step) and given back when the turn ends; dropped whenever it may be
    /// stale (an aborted turn, a restore).
    thread: Option<Arc<crate::ports::ThreadEntries>>,
    /// What every turn of this agent shows its model, built on its first turn (boxed: an
    /// agent that never ran a turn does not pay for it).
    setup: Option<Box<TurnSetup>>,
    /// A [`StopAgent`] was handled: the actor ends as soon as its answer is written, so it
    /// takes no more deliveries (what it accepted now would be dropped from memory with no
    /// live actor left to run it); the router activates a fresh actor instead.
    stopping: bool,
}

/// Counts a turn on inbox item `task` as the task's next attempt (the first, for a new task).
fn count_attempt(rec: &mut AgentRecord, task: Uuid) {
    if rec.current_task == Some(task) {
        rec.attempts += 1;
    } else {
        rec.attempts = 1;
        rec.current_task = Some(task);
    }
}

/// The agent's record, shared (not copied) with the store batches and turns that read it: a
/// change copies it only while one of them still holds the old version (copy-on-write).
struct SharedRecord(Arc<AgentRecord>);

impl SharedRecord {
    /// This version, for a store write or a turn.
    fn share(&self) -> Arc<AgentRecord> {
        self.0.clone()
    }
}

impl std::ops::Deref for SharedRecord {
    type Target = AgentRecord;
    fn deref(&self) -> &AgentRecord {
        &self.0
    }
}

impl std::ops::DerefMut for SharedRecord {
    fn deref_mut(&mut self) -> &mut AgentRecord {
        Arc::make_mut(&mut self.0)
    }
}

impl AgentActor {
    /// An actor for `rec` (started by the [`Supervisor`]).
    pub fn new(rec: impl Into<Arc<AgentRecord>>, env: Arc<AgentEnv>) -> Self {
        AgentActor {
            rec: SharedRecord(rec.into()),
            env,
            inbox: VecDeque::new(),
            turn: None,
            paused_mid_turn: false,
            paused_input: None,
            retry_backoff_ms: 0,
            holding_for_retry: false,
            retry: None,
            pause_reason: None,
            awaiting_permit: None,
            has_permit: false,
            unmet: Unmet::default(),
            restart_backend_after_turn: false,
            pending_writes: Vec::new(),
            record_dirty: false,
            flush_queued: false,
            push_in_flight: false,
            flush_held: false,
            input_written: None,
            after_flush: Vec::new(),
            hold_outputs: false,
            flush_backoff_ms: 0,
            prestarted: None,
            thread: None,
            setup: None,
            stopping: false,
        }
    }

    /// The dependencies this agent still waits for.
    pub fn with_unmet(mut self, unmet: std::collections::HashSet<String>) -> Self {
        self.unmet = Unmet((!unmet.is_empty()).then(|| Box::new(unmet)));
        self
    }

    /// Gives the turn slot back (or withdraws a queued request).
    fn release_permit(&mut self) {
        if let Some(s) = &self.env.scheduler
            && (self.has_permit || self.awaiting_permit.is_some())
        {
            s.do_send(crate::scheduler::Release(self.rec.id.clone()));
        }
        self.has_permit = false;
    }

    /// Moves to `to` if the transition table allows it and publishes the event; the caller
    /// persists.
    fn transition(&mut self, to: AgentStatus, reason: Option<String>) -> Result<bool, AgentdError> {
        let from = self.rec.status;
        if from == to {
            return Ok(false);
        }
        if !from.can_become(to) {
            return Err(AgentdError::new(
                ErrorCode::InvalidTransition,
                format!("agent `{}` cannot go from {from} to {to}", self.rec.id),
            ));
        }
        self.rec.status = to;
        self.rec.status_reason = reason.clone();
        metrics::global().agent_status(&self.rec.id, Some(to.as_str()));
        if self.env.deps.events.is_listened() {
            self.env.deps.events.publish(&Event::StatusChanged {
                agent_id: self.rec.id.clone(),
                from,
                to,
                reason,
            });
        }
        Ok(true)
    }

    /// [`Self::transition`], then persists the record before any further message is handled.
    fn set_status(
        &mut self,
        to: AgentStatus,
        reason: Option<String>,
        ctx: &mut Context<Self>,
    ) -> Result<(), AgentdError> {
        if self.transition(to, reason.clone())? {
            self.persist(ctx);
            // Seed 001: automatic checkpoints on a pause, a rate limit and an error.
            let why = match to {
                AgentStatus::Paused => CheckpointReason::Auto,
                AgentStatus::WaitingRateLimit => CheckpointReason::RateLimit,
                AgentStatus::Failed => CheckpointReason::Error,
                _ => return Ok(()),
            };
            let trigger = reason.unwrap_or_else(|| to.as_str().to_string());
            self.checkpoint(why, &trigger, ctx);
        }
        Ok(())
    }

    /// Saves a checkpoint of the agent as it is now, before any further message is handled.
    fn checkpoint(&mut self, reason: CheckpointReason, trigger: &str, ctx: &mut Context<Self>) {
        let deps = self.env.deps.clone();
        let rec = self.rec.clone();
        let trigger = trigger.to_string();
        // What is waiting to be written goes first: the checkpoint captures the stored thread.
        let flushed = self.flush_now();
        ctx.wait(flushed.then(move |_, act, _| {
            async move {
                if let Err(e) = crate::checkpoints::capture(&deps, &rec, reason, &trigger).await {
                    tracing::warn!(agent_id = %rec.id, error = %e, "taking a checkpoint failed");
                }
            }
            .into_actor(act)
        }));
    }

    /// Ends a process-per-agent backend's process so that its next turn starts a new one with
    /// the agent's current environment; a running turn finishes first.
    fn restart_backend(&mut self, _ctx: &mut Context<Self>) {
        if self.turn.is_some() {
            self.restart_backend_after_turn = true;
        } else {
            self.env
                .deps
                .model
                .control(&self.rec.id, Control::Terminate);
        }
    }

    /// Resumes a rate-limited agent by itself after `ms` (on the injected clock).
    fn schedule_rate_limit_resume(&mut self, ms: u64, ctx: &mut Context<Self>) {
        let sleep = self.env.deps.clock.sleep(ms);
        ctx.spawn(sleep.into_actor(self).map(|_, act, ctx| {
            if act.rec.status == AgentStatus::WaitingRateLimit {
                act.rec.resume_at_ms = None;
                let _ = act.set_status(AgentStatus::Running, Some("rate limit over".into()), ctx);
                act.pump(ctx);
            }
        }));
    }

    /// Writes the record before any further message is handled (with the other writes
    /// pending, in one batch).
    fn persist(&mut self, ctx: &mut Context<Self>) {
        self.rec.updated_at_ms = self.env.deps.clock.now_ms();
        self.record_dirty = true;
        self.schedule_flush(ctx);
    }

    /// Queues `write` for the next flush, before any further message is handled.
    fn write_later(&mut self, write: StoreWrite, ctx: &mut Context<Self>) {
        self.pending_writes.push(write);
        self.schedule_flush(ctx);
    }

    /// Queues one flush of the pending writes (and of the record, if it changed), unless one
    /// is queued already. What is written is read when the flush starts, not when it is
    /// queued: actix runs queued `wait` futures last-in first-out, so everything written up
    /// to that moment goes, in the order it was queued, as one store batch (one transaction
    /// or pipeline instead of one per write). A batch that fails is not dropped: it goes back
    /// in front of what was queued since and is written again after a backoff.
    fn schedule_flush(&mut self, ctx: &mut Context<Self>) {
        if self.flush_queued {
            return;
        }
        if self.push_in_flight {
            self.flush_held = true;
            return;
        }
        self.flush_queued = true;
        let flush = actix::ActorFutureExt::then(
            actix::fut::ready::<()>(()),
            move |_, act: &mut Self, _| {
                act.flush_queued = false;
                act.flush_now()
            },
        );
        ctx.wait(flush);
    }

    /// Takes everything waiting to be written (writes, the record if it changed) as one
    /// batch; the future writes it, then sends the outputs that waited for it.
    fn flush_now(&mut self) -> impl ActorFuture<Self, Output = ()> + use<> {
        let store = self.env.deps.store.clone();
        let mut writes = std::mem::take(&mut self.pending_writes);
        if std::mem::take(&mut self.record_dirty) {
            writes.push(StoreWrite::PutAgent(self.rec.share()));
        }
        let input_written = self.input_written.take();
        let mut outputs = std::mem::take(&mut self.after_flush);
        crate::channel_router::outputs_into_batch(&self.env.deps, &mut writes, &mut outputs);
        let me = self.rec.share();
        async move {
            let res = if writes.is_empty() {
                Ok(())
            } else {
                store.write_own_batch(&me.id, &writes).await
            };
            (res, writes)
        }
        .into_actor(self)
        .map(move |(res, writes), act, ctx| match res {
            Ok(()) => {
                act.flush_backoff_ms = 0;
                if let Some(flag) = input_written {
                    flag.store(true, Ordering::SeqCst);
                }
                for out in outputs {
                    act.env.router.do_send(out);
                }
            }
            Err(e) => act.flush_failed(e, writes, input_written, outputs, ctx),
        })
    }

    /// A flush's batch could not be written: it is queued again, before anything queued
    /// since, and written after a capped backoff (or with the next flush, if sooner). A batch
    /// that cannot be encoded would fail the same way forever: it is reported and given up.
    fn flush_failed(
        &mut self,
        e: crate::ports::StoreError,
        writes: Vec<StoreWrite>,
        input_written: Option<Arc<AtomicBool>>,
        outputs: Vec<ChildOutput>,
        ctx: &mut Context<Self>,
    ) {
        if e.kind() == crate::ports::StoreErrorKind::Corrupt {
            tracing::error!(agent_id = %self.rec.id, error = %e, writes = writes.len(), "the agent's state cannot be encoded; not written");
            for out in outputs {
                self.env.router.do_send(out);
            }
            // The outputs that were to leave with the batch leave on their own.
            if let Some(transport) = self.env.deps.transport.clone() {
                let forwards: Vec<Arc<Envelope>> = writes
                    .into_iter()
                    .filter_map(|w| match w {
                        StoreWrite::Forward { env, .. } => Some(env),
                        _ => None,
                    })
                    .collect();
                if !forwards.is_empty() {
                    actix_rt::spawn(async move {
                        for env in forwards {
                            if let Err(e) = transport.forward(&env).await {
                                tracing::error!(message_id = %env.id, error = %e, "a child output could not be forwarded");
                            }
                        }
                    });
                }
            }
            return;
        }
        self.flush_backoff_ms = (self.flush_backoff_ms * 2).clamp(50, 2_000);
        tracing::error!(agent_id = %self.rec.id, error = %e, retry_ms = self.flush_backoff_ms, "writing the agent's state failed; writing it again");
        let later = std::mem::replace(&mut self.pending_writes, writes);
        self.pending_writes.extend(later);
        let later = std::mem::replace(&mut self.after_flush, outputs);
        self.after_flush.extend(later);
        if self.input_written.is_none() {
            self.input_written = input_written;
        }
        ctx.run_later(
            std::time::Duration::from_millis(self.flush_backoff_ms.into()),
            |act, ctx| act.schedule_flush(ctx),
        );
    }

    fn enqueue(&mut self, env: Envelope, ctx: &mut Context<Self>) {
        inbox_depth_changed(1.0);
        let (interrupt, urgent) = match &env.item {
            Item::Inbox(InboxItem::Message {
                interrupt, urgent, ..
            }) => (*interrupt, *urgent),
            _ => (false, false),
        };
        if interrupt {
            self.interrupt_turn(ctx);
            self.inbox.push_front(env);
        } else if urgent {
            // After other urgent items (they keep their order), before everything else.
            let at = self
                .inbox
                .iter()
                .position(|e| {
                    !matches!(
                        &e.item,
                        Item::Inbox(
                            InboxItem::Message { urgent: true, .. }
                                | InboxItem::Message {
                                    interrupt: true,
                                    ..
                                }
                        )
                    )
                })
                .unwrap_or(self.inbox.len());
            self.inbox.insert(at, env);
        } else {
            self.inbox.push_back(env);
        }
    }

    /// Aborts the running turn; its persisted output stays. Returns the marker entry that
    /// records the interruption (the caller writes it).
    fn abort_turn(&mut self, mark_done: bool, ctx: &mut Context<Self>) -> Option<ThreadEntry> {
        let turn = self.turn.take()?;
        ctx.cancel_future(turn.handle);
        // The cache went with the turn; what the aborted turn wrote is read again next time.
        self.thread = None;
        self.release_permit();
        if mark_done {
            self.done(turn.input.map(|e| e.id), ctx);
        }
        Some(ThreadEntry {
            interrupted: true,
            ..ThreadEntry::text(
                derived_id(turn.cause, "interrupted"),
                Role::System,
                "(the previous turn was interrupted)",
                self.env.deps.clock.now_ms(),
            )
        })
    }

    /// Aborts the running turn and writes the interruption marker before the next message.
    fn interrupt_turn(&mut self, ctx: &mut Context<Self>) {
        let Some(entry) = self.abort_turn(true, ctx) else {
            return;
        };
        let agent_id = self.shared_id();
        let entry = Arc::new(entry);
        self.write_later(StoreWrite::Append { agent_id, entry }, ctx);
    }

    /// Whether envelope `id` is queued, waiting or running here (or was the last one begun).
    fn holds(&self, id: Uuid) -> bool {
        self.rec.current_task == Some(id)
            || self.inbox.iter().any(|e| e.id == id)
            || [&self.retry, &self.paused_input]
                .iter()
                .any(|e| e.as_ref().is_some_and(|e| e.id == id))
            || self.awaiting_permit.as_ref().is_some_and(|p| p.0.id == id)
            || self
                .turn
                .as_ref()
                .is_some_and(|t| t.input.as_ref().is_some_and(|e| e.id == id))
    }

    /// A redelivered envelope the durable inbox already had: normally one this agent queued
    /// (or handled) before. But if the first delivery's write reached the store and its answer
    /// was lost (a connection cut mid-call), or another process pushed it and then lost the
    /// agent's partition before taking it, the item is pending there and queued nowhere: it
    /// is taken, at its place in the durable inbox's order (after what was stored before it,
    /// ahead of what arrived after it). The delivery answers only once this is settled, so no
    /// later delivery starts a turn ahead of it.
    fn take_if_still_pending(
        &mut self,
        env: Envelope,
    ) -> impl ActorFuture<Self, Output = ()> + use<> {
        let store = self.env.deps.store.clone();
        let id = self.rec.id.clone();
        async move { store.inbox_pending(&id).await }
            .into_actor(self)
            .map(move |pending, act, ctx| {
                let pending = match pending {
                    Ok(p) => p,
                    Err(e) => {
                        tracing::warn!(agent_id = %act.rec.id, error = %e, "checking a redelivered envelope failed");
                        return;
                    }
                };
                let place = |id: Uuid| pending.iter().position(|e| e.id == id);
                if let Some(mine) = place(env.id)
                    && !act.holds(env.id)
                {
                    tracing::info!(agent_id = %act.rec.id, message_id = %env.id, "redelivered envelope was stored but never queued; taking it");
                    // Before the first queued item stored after it (or not stored at all).
                    let at = act
                        .inbox
                        .iter()
                        .position(|q| place(q.id).is_none_or(|p| p > mine))
                        .unwrap_or(act.inbox.len());
                    act.inbox.insert(at, env);
                    inbox_depth_changed(1.0);
                    act.pump(ctx);
                } else {
                    tracing::debug!(agent_id = %act.rec.id, message_id = %env.id, "duplicate envelope ignored");
                }
            })
    }

    /// Marks an inbox envelope handled in the durable inbox (with the next flush).
    fn done(&mut self, input: Option<Uuid>, ctx: &mut Context<Self>) {
        let Some(env_id) = input else { return };
        let agent_id = self.shared_id();
        self.write_later(StoreWrite::InboxDone { agent_id, env_id }, ctx);
    }

    /// Drops every queued item (cancel, terminate, close), marking them done.
    fn drop_queue(&mut self, ctx: &mut Context<Self>) {
        for id in self.take_queue() {
            self.done(Some(id), ctx);
        }
    }

    /// Empties the queue (inbox, retry, the item waiting for a slot, a paused turn's item) and
    /// answers the ids the caller must mark done in the durable inbox.
    fn take_queue(&mut self) -> Vec<Uuid> {
        inbox_depth_changed(-(self.inbox.len() as f64));
        let mut ids: Vec<Uuid> = std::mem::take(&mut self.inbox)
            .into_iter()
            .map(|e| e.id)
            .collect();
        ids.extend(self.retry.take().map(|e| e.id));
        self.release_permit();
        ids.extend(self.awaiting_permit.take().map(|p| p.0.id));
        ids.extend(self.paused_input.take().map(|e| e.id));
        self.paused_mid_turn = false;
        ids
    }

    /// Starts the next turn if nothing runs and the status lets work start.
    fn pump(&mut self, ctx: &mut Context<Self>) {
        if self.stopping
            || self.turn.is_some()
            || self.paused_mid_turn
            || self.holding_for_retry
            || self.awaiting_permit.is_some()
        {
            return;
        }
        let status = self.rec.status;
        if !(status.accepts_turns() || status == AgentStatus::Running) {
            return;
        }
        if (self.retry.is_some() || !self.inbox.is_empty()) && self.pause_if_over_budget(ctx) {
            return;
        }
        if !self.unmet.is_empty() && (self.retry.is_some() || !self.inbox.is_empty()) {
            if self.rec.status != AgentStatus::WaitingDependency {
                let mut deps: Vec<&String> = self.unmet.iter().collect();
                deps.sort();
                let reason = format!(
                    "depends on {}",
                    deps.iter()
                        .map(|d| d.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                );
                let _ = self.set_status(AgentStatus::WaitingDependency, Some(reason), ctx);
            }
            return;
        }
        let popped = match self.retry.take() {
            Some(env) => {
                inbox_depth_changed(1.0);
                Some(*env)
            }
            None => self.inbox.pop_front(),
        };
        if popped.is_some() {
            inbox_depth_changed(-1.0);
        }
        let Some(env) = popped else {
            if status == AgentStatus::Running {
                let _ = self.set_status(AgentStatus::Idle, None, ctx);
            }
            return;
        };
        let prestarted = self
            .prestarted
            .take()
            .filter(|p| p.0 == env.id)
            .map(|p| p.1);
        let start_written = prestarted.is_some();
        let input = match prestarted.or_else(|| self.turn_input(&env)) {
            Some(input) => input,
            None => return self.pump(ctx),
        };
        if let Some(scheduler) = self.env.scheduler.clone().filter(|_| !self.has_permit) {
            // Wait for a turn slot; the agent shows `queued` meanwhile.
            let _ = self.set_status(
                AgentStatus::Queued,
                Some("waiting for a turn slot".into()),
                ctx,
            );
            scheduler.do_send(crate::scheduler::Acquire {
                agent_id: self.rec.id.clone(),
                priority: self.rec.priority,
                parent: self.rec.parent_id.clone(),
                provider: self
                    .rec
                    .provider
                    .clone()
                    .unwrap_or_else(|| "default".into()),
                queued_at_ms: env.sent_at,
                addr: ctx.address(),
            });
            self.awaiting_permit = Some(Box::new((env, input)));
            return;
        }
        self.begin(env, input, start_written, ctx);
    }

    /// The turn input an inbox item makes (`None` for anything else).
    fn turn_input(&self, env: &Envelope) -> Option<TurnInput> {
        Some(match &env.item {
            Item::Inbox(InboxItem::Message {
                text,
                role,
                from_agent,
                ..
            }) => {
                let mut entry = ThreadEntry::text(
                    derived_id(env.id, "input"),
                    *role,
                    text.clone(),
                    self.env.deps.clock.now_ms(),
                );
                entry.from_agent = from_agent.as_deref().map(Into::into);
                TurnInput::Message(Arc::new(entry))
            }
            Item::Inbox(InboxItem::Yield { result }) => {
                let text = match result {
                    serde_json::Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                let mut entry = ThreadEntry::text(
                    derived_id(env.id, "input"),
                    Role::User,
                    text,
                    self.env.deps.clock.now_ms(),
                );
                entry.from_agent = env.from.agent_id().map(Into::into);
                TurnInput::Message(Arc::new(entry))
            }
            Item::Inbox(InboxItem::Reset { message }) => TurnInput::Reset(message.clone()),
            Item::Inbox(InboxItem::Compact) => TurnInput::Compact,
            _ => return None,
        })
    }

    /// The writes that start a turn on `env` (its input entry, the `running` record), if
    /// `env` would start one the moment it is queued; they then go with its inbox push.
    fn turn_start_writes(&mut self, env: &Envelope) -> Option<(TurnInput, Vec<StoreWrite>)> {
        let ready = !self.stopping
            && self.turn.is_none()
            && !self.paused_mid_turn
            && !self.holding_for_retry
            && self.awaiting_permit.is_none()
            && self.retry.is_none()
            && self.inbox.is_empty()
            && self.unmet.is_empty()
            && (self.env.scheduler.is_none() || self.has_permit)
            && self.rec.status.accepts_turns()
            && self.rec.status.can_become(AgentStatus::Running)
            && self.over_budget().is_none();
        if !ready {
            return None;
        }
        let input = self.turn_input(env)?;
        let TurnInput::Message(entry) = &input else {
            return None;
        };
        let agent_id = self.shared_id();
        // As `begin` leaves the record.
        let mut rec = AgentRecord::clone(&self.rec);
        count_attempt(&mut rec, env.id);
        rec.status = AgentStatus::Running;
        rec.status_reason = None;
        rec.updated_at_ms = self.env.deps.clock.now_ms();
        let writes = vec![
            StoreWrite::Append {
                agent_id,
                entry: Arc::clone(entry),
            },
            StoreWrite::PutAgent(Arc::new(rec)),
        ];
        Some((input, writes))
    }

    /// Starts the turn of `env` now (a slot is held, or there is no limit).
    /// `start_written`: the turn's start (input entry, `running` record) went with the item's
    /// push already (`turn_start_writes`).
    fn begin(
        &mut self,
        env: Envelope,
        input: TurnInput,
        start_written: bool,
        ctx: &mut Context<Self>,
    ) {
        if !self.rec.status.can_become(AgentStatus::Running)
            && self.rec.status != AgentStatus::Running
        {
            tracing::warn!(agent_id = %self.rec.id, status = %self.rec.status, "cannot start a turn");
            self.release_permit();
            return;
        }
        // The task and its attempt are persisted with `running`, so a turn re-run after a
        // crash (same inbox item) shows as the next attempt.
        let (task, attempts) = (self.rec.current_task, self.rec.attempts);
        let was_running = self.rec.status == AgentStatus::Running;
        count_attempt(&mut self.rec, env.id);
        if let Err(e) = self.set_status(AgentStatus::Running, None, ctx) {
            tracing::warn!(agent_id = %self.rec.id, error = %e, "cannot start a turn");
            (self.rec.current_task, self.rec.attempts) = (task, attempts);
            self.release_permit();
            return;
        }
        if was_running {
            // No status change to persist it with (e.g. after a rate limit): persist anyway.
            self.persist(ctx);
        }
        if matches!(input, TurnInput::Reset(_)) {
            self.rec.result = None;
            self.rec.last_error = None;
        }
        if start_written {
            // The `running` record went with the item's push (`turn_start_writes`).
            self.record_dirty = false;
        }
        if let TurnInput::Message(entry) = &input {
            // The input goes into the thread with the `running` record, in one batch (or went
            // with the item's push already).
            let written = Arc::new(AtomicBool::new(start_written));
            if !start_written {
                self.input_written = Some(written.clone());
            }
            // A first attempt's input is new; only a re-run may find it there already.
            let shared = Arc::clone(entry);
            if let Some(thread) = &mut self.thread
                && (self.rec.attempts == 1 || !thread.iter().any(|e| e.id == entry.id))
            {
                Arc::make_mut(thread).push(Arc::clone(&shared));
            }
            if !start_written {
                let append = StoreWrite::Append {
                    agent_id: self.shared_id(),
                    entry: shared,
                };
                self.write_later(append, ctx);
            }
            self.start_turn(env.id, Some(env), input, Some(written), ctx);
        } else {
            self.start_turn(env.id, Some(env), input, None, ctx);
        }
    }

    /// Starts a turn on `input`. `input_written` tells the turn whether the actor's flush
    /// already put the input entry in the thread.
    /// The agent's id, shared (for store writes: no allocation per write).
    fn shared_id(&mut self) -> Arc<str> {
        self.turn_setup().names.agent_id.clone()
    }

    /// What the agent's turns show its model and how its usage is counted, made on first use.
    fn turn_setup(&mut self) -> &TurnSetup {
        let setup = self.setup.get_or_insert_with(|| {
            Box::new(TurnSetup {
                tool_specs: crate::tools::visible_specs(&self.rec, &self.env.deps),
                system_prompt: crate::turn::system_prompt(&self.rec, &self.env.deps).into(),
                names: Arc::new(crate::turn::RequestNames::of(&self.rec, &self.env.deps)),
                usage: UsageMeters::of(&self.rec, &self.env.deps),
            })
        });
        setup.tool_specs.refresh(&self.rec, &self.env.deps);
        setup
    }

    fn start_turn(
        &mut self,
        cause: Uuid,
        env: Option<Envelope>,
        input: TurnInput,
        input_written: Option<Arc<AtomicBool>>,
        ctx: &mut Context<Self>,
    ) {
        let stop = Arc::new(AtomicBool::new(false));
        let setup = self.turn_setup();
        let (tool_specs, system_prompt, names) = (
            setup.tool_specs.specs().clone(),
            setup.system_prompt.clone(),
            setup.names.clone(),
        );
        // Only a re-run (a retry, or a paused turn continuing) can find its own earlier
        // entries in the thread; a first run looks nothing up.
        let replaying = matches!(input, TurnInput::Continue) || self.rec.attempts != 1;
        let turn = Turn {
            replaying,
            tool_specs,
            system_prompt,
            names,
            thread: self.thread.take(),
            input_written,
            rec: self.rec.share(),
            deps: self.env.deps.clone(),
            tools: ToolContext {
                caller: self.rec.share(),
                deps: self.env.deps.clone(),
                supervisor: self.env.supervisor.clone(),
                router: self.env.router.clone(),
                cause,
            },
            me: ctx.address(),
            stop: stop.clone(),
            cause,
        };
        let correlation = env.as_ref().and_then(|e| e.correlation_id).unwrap_or(cause);
        let span = tracing::info_span!("turn", agent_id = %self.rec.id, thread_id = %self.rec.id, message_id = %cause, correlation_id = %correlation);
        // Boxed at once: the turn's future is several KB, and each wrapper below would move
        // it whole (~3 % of an in-process message's instructions went to those copies).
        let fut = AssertUnwindSafe(Box::pin(turn.run(input)).instrument(span)).catch_unwind();
        let handle = ctx.spawn(fut.into_actor(self).map(move |res, act, ctx| {
            act.turn_done(cause, res, ctx);
        }));
        self.turn = Some(Box::new(RunningTurn {
            handle,
            cause,
            input: env,
            stop,
            started: std::time::Instant::now(),
        }));
    }

    /// A turn ended. What its end sends out (its reply, a yield, a failure) waits for the
    /// batch that records that end (the final entry, the done mark, the status) and leaves
    /// with it ([`crate::channel_router::outputs_into_batch`]): sent before, an output could
    /// be lost with the process while the item it answers was already done.
    fn turn_done(
        &mut self,
        cause: Uuid,
        res: Result<Result<TurnResult, AgentdError>, Box<dyn std::any::Any + Send>>,
        ctx: &mut Context<Self>,
    ) {
        if self.turn.as_ref().map(|t| t.cause) != Some(cause) {
            // An aborted turn's late completion: nothing of it applies, but the tokens of its
            // last model call were spent all the same.
            if let Ok(Ok(TurnResult {
                final_usage: Some(usage),
                ..
            })) = res
            {
                self.count_usage(usage, ctx);
            }
            return;
        }
        self.hold_outputs = true;
        let pump = self.end_turn(cause, res, ctx);
        self.hold_outputs = false;
        if !self.after_flush.is_empty() {
            self.schedule_flush(ctx);
        }
        if pump {
            self.pump(ctx);
        }
    }

    /// [`Self::turn_done`] without the outputs' hold; `true` if the next item may start now.
    fn end_turn(
        &mut self,
        cause: Uuid,
        mut res: Result<Result<TurnResult, AgentdError>, Box<dyn std::any::Any + Send>>,
        ctx: &mut Context<Self>,
    ) -> bool {
        let (input, started) = match self.turn.take() {
            Some(t) => (t.input, Some(t.started)),
            None => (None, None),
        };
        if let Some(started) = started {
            self.turn_setup()
                .usage
                .turns
                .observe(started.elapsed().as_secs_f64());
        }
        let input_id = input.as_ref().map(|e| e.id);
        self.release_permit();
        if let Ok(Ok(r)) = &mut res {
            if let Some(usage) = r.final_usage.take() {
                // The agent's own budget is checked below, as the turn's end decides the
                // status; the tree's now.
                self.count_usage(usage, ctx);
            }
            self.thread = r.thread.take();
            if let Some(entry) = r.final_entry.take() {
                // The last step's entry goes with the turn's end in one batch; what the turn
                // and its end send out waits for that batch.
                let agent_id = self.shared_id();
                self.write_later(StoreWrite::Append { agent_id, entry }, ctx);
                self.after_flush.append(&mut r.after_write);
            }
        }
        if std::mem::take(&mut self.restart_backend_after_turn) {
            self.env
                .deps
                .model
                .control(&self.rec.id, Control::Terminate);
        }
        let outcome = match res {
            Ok(r) => r,
            Err(panic) => {
                let msg = panic
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "unknown panic".into());
                Err(AgentdError::new(
                    ErrorCode::Internal,
                    format!("turn panicked: {msg}"),
                ))
            }
        };
        match outcome {
            Err(e) if matches!(e.code, ErrorCode::StoreError | ErrorCode::Unavailable) => {
                // The store (e.g. Redis) is unreachable: nothing is lost. The item goes back to
                // the front of the queue and the turn is retried after a backoff; outputs
                // already written de-duplicate by their derived ids.
                self.retry_backoff_ms = (self.retry_backoff_ms * 2).clamp(100, 2_000);
                tracing::warn!(agent_id = %self.rec.id, error = %e, retry_ms = self.retry_backoff_ms, "turn hit an unavailable store; retrying");
                self.retry = input.map(Box::new);
                self.holding_for_retry = true;
                ctx.run_later(
                    std::time::Duration::from_millis(self.retry_backoff_ms.into()),
                    |act, ctx| {
                        act.holding_for_retry = false;
                        act.pump(ctx);
                    },
                );
                return false;
            }
            Err(e)
                if self.rec.attempts < self.env.deps.config.limits.max_attempts
                    && input.is_some() =>
            {
                // Automatic retry with capped exponential backoff; the attempt shows in inspect.
                let limits = &self.env.deps.config.limits;
                let shift = self.rec.attempts.saturating_sub(1).min(20);
                let delay = limits
                    .retry_backoff_ms
                    .saturating_mul(1u64 << shift)
                    .min(limits.retry_backoff_max_ms);
                tracing::warn!(agent_id = %self.rec.id, error = %e, attempt = self.rec.attempts, retry_ms = delay, "turn failed; retrying");
                self.rec.last_error = Some(e.to_string());
                self.env.deps.events.publish(&Event::TurnFailed {
                    agent_id: self.rec.id.clone(),
                    message: format!(
                        "{e} (attempt {}, retrying in {delay} ms)",
                        self.rec.attempts
                    ),
                });
                self.retry = input.map(Box::new);
                self.holding_for_retry = true;
                let reason = format!(
                    "retry {} of {} in {delay} ms",
                    self.rec.attempts + 1,
                    self.env.deps.config.limits.max_attempts
                );
                let _ = self.set_status(AgentStatus::Queued, Some(reason), ctx);
                self.checkpoint(CheckpointReason::Error, &e.to_string(), ctx);
                let sleep = self.env.deps.clock.sleep(delay);
                ctx.spawn(sleep.into_actor(self).map(|_, act, ctx| {
                    act.holding_for_retry = false;
                    act.pump(ctx);
                }));
                return false;
            }
            Err(e) => self.fail(e, cause, ctx),
            Ok(r) if r.rate_limited.is_some() => {
                let ms = r.rate_limited.unwrap_or(1000);
                self.rate_limited(ms, input, ctx);
                return false;
            }
            Ok(r) => {
                self.retry_backoff_ms = 0;
                self.rec.turns += 1;
                let wait = self.apply_markers(&r.markers, &r.malformed);
                for m in &r.markers {
                    if let Marker::PhaseComplete { phase } = m {
                        self.persist(ctx);
                        self.checkpoint(
                            CheckpointReason::Auto,
                            &format!("phase {phase} complete"),
                            ctx,
                        );
                    }
                }
                let error_marker = r.markers.iter().find_map(|m| match m {
                    Marker::Error { message } => Some(message.clone()),
                    _ => None,
                });
                if let Some(message) =
                    error_marker.filter(|_| self.env.deps.config.limits.fail_on_error_marker)
                {
                    // `[ERROR]…[/ERROR]` fails the agent when the config says so.
                    let e = AgentdError::new(
                        ErrorCode::ModelError,
                        format!("agent reported: {message}"),
                    );
                    self.fail(e, cause, ctx);
                } else if r.paused {
                    self.paused_mid_turn = true;
                    self.paused_input = input.map(Box::new);
                    let reason = self
                        .pause_reason
                        .take()
                        .map_or_else(|| "paused by control".into(), String::from);
                    let _ = self.set_status(AgentStatus::Paused, Some(reason), ctx);
                } else if let Some(result) = r.yielded {
                    self.rec.result = Some(Box::new(result.clone()));
                    let _ = self.set_status(AgentStatus::Completed, Some("yielded".into()), ctx);
                    self.env.supervisor.do_send(crate::messages::Finished {
                        agent_id: self.rec.id.clone(),
                        ok: true,
                    });
                    if let Some(parent_id) = self.rec.channel.parent_id() {
                        self.env.deps.events.publish(&Event::Yielded {
                            agent_id: self.rec.id.clone(),
                            parent_id: parent_id.to_string(),
                            result: result.clone(),
                        });
                    }
                    self.output(Output::Yield { result }, cause);
                } else {
                    if r.step_limit {
                        tracing::warn!(agent_id = %self.rec.id, "turn ended at the step limit");
                    }
                    if matches!(self.rec.channel, Channel::Spawn { .. })
                        && !r.final_text.trim().is_empty()
                    {
                        // Seed 004: a finished sub-agent turn reports its final text.
                        self.output(
                            Output::Reply { text: r.final_text },
                            derived_id(cause, "final"),
                        );
                    }
                    match wait {
                        Some((status, reason)) => {
                            let _ = self.set_status(status, Some(reason), ctx);
                        }
                        None => {
                            if !self.pause_if_over_budget(ctx) {
                                self.persist(ctx);
                            }
                        }
                    }
                }
            }
        }
        if !self.paused_mid_turn {
            self.done(input_id, ctx);
        }
        true
    }

    /// Pauses the agent for budget `limit`: a running turn stops at its next step boundary
    /// (and continues once the budget is raised and the agent resumed); otherwise now.
    fn pause_for_budget(&mut self, limit: String, ctx: &mut Context<Self>) {
        let reason = format!("{}: {limit}", ErrorCode::BudgetExceeded.as_str());
        match &self.turn {
            Some(turn) if !turn.stop.load(Ordering::SeqCst) => {
                turn.stop.store(true, Ordering::SeqCst);
                self.pause_reason = Some(reason.into());
            }
            Some(_) => return,
            None => {
                if self.rec.status == AgentStatus::Paused
                    || self
                        .set_status(AgentStatus::Paused, Some(reason), ctx)
                        .is_err()
                {
                    return;
                }
            }
        }
        self.env.deps.events.publish(&Event::BudgetExceeded {
            agent_id: self.rec.id.clone(),
            limit,
        });
    }

    /// Checks the root's budget (as stored now) against the whole tree's spending, `spent`
    /// being what this agent just spent; a spent tree budget pauses every agent of the tree
    /// (reason `budget_exceeded: tree …`). The tree's spending is the usage and cost of every
    /// agent as stored (this one's as it is now), summed at most once per
    /// [`crate::tree_spend::SUM_TTL_MS`] per tree in this process, with this process's spending
    /// since added ([`crate::tree_spend::TreeSpend`]). In a tree with a budget, each agent's
    /// usage is persisted after every model call so the others' sums see it.
    fn check_tree_budget(&mut self, spent: crate::tree_spend::Spent, ctx: &mut Context<Self>) {
        if self.rec.parent_id.is_none() && self.rec.budget.is_none() {
            return; // a root without a budget: no tree budget to check
        }
        let env = self.env.clone();
        let own_budget = self.rec.budget.as_deref().copied();
        let is_root = self.rec.parent_id.is_none();
        let (id, root_id) = (self.rec.id.clone(), self.rec.root_id.clone());
        let mine = crate::tree_spend::Spent {
            usage: self.rec.usage,
            cost_usd: self.rec.cost_usd,
        };
        ctx.spawn(
            async move {
                let deps = &env.deps;
                let budget = if is_root {
                    own_budget
                } else {
                    let root = deps.store.get_agent(&root_id).await.ok().flatten();
                    root.and_then(|r| r.budget.as_deref().copied())
                }?;
                let now = deps.clock.now_ms();
                let tree = match env.tree_spend.add(&root_id, spent, now) {
                    Some(tree) => tree,
                    None => {
                        let tree = sum_tree(deps, &root_id, &id, mine).await;
                        env.tree_spend.put(&root_id, tree, now);
                        tree
                    }
                };
                Some(
                    budget
                        .exceeded(&tree.usage, tree.cost_usd, deps.clock.now_ms())
                        .map(|limit| format!("tree {limit}")),
                )
            }
            .into_actor(self)
            .map(|checked, act, ctx| {
                let Some(limit) = checked else {
                    return; // no tree budget
                };
                act.persist(ctx);
                if let Some(limit) = limit {
                    act.env.supervisor.do_send(crate::messages::PauseTree {
                        root_id: act.rec.root_id.clone(),
                        limit,
                    });
                }
            }),
        );
    }

    /// Which budget limit the agent is over, if any.
    fn over_budget(&self) -> Option<&'static str> {
        self.rec.budget.as_deref().and_then(|b| {
            b.exceeded(
                &self.rec.usage,
                self.rec.cost_usd,
                self.env.deps.clock.now_ms(),
            )
        })
    }

    /// Pauses the agent (reason `budget_exceeded: <limit>`, event) if it is over its budget;
    /// answers whether it did. Raising the budget and resuming continues it.
    fn pause_if_over_budget(&mut self, ctx: &mut Context<Self>) -> bool {
        let Some(limit) = self.over_budget() else {
            return false;
        };
        if self.rec.status == AgentStatus::Paused {
            return true;
        }
        let reason = format!("{}: {limit}", ErrorCode::BudgetExceeded.as_str());
        if self
            .set_status(AgentStatus::Paused, Some(reason), ctx)
            .is_err()
        {
            return false;
        }
        self.env.deps.events.publish(&Event::BudgetExceeded {
            agent_id: self.rec.id.clone(),
            limit: limit.to_string(),
        });
        true
    }

    /// Publishes marker events and updates phase and last error; answers the waiting status a
    /// dependency request or a user question puts the agent in.
    fn apply_markers(
        &mut self,
        markers: &[Marker],
        malformed: &[String],
    ) -> Option<(AgentStatus, String)> {
        let mut wait = None;
        for problem in malformed {
            tracing::warn!(agent_id = %self.rec.id, problem, "malformed protocol marker");
            self.env.deps.events.publish(&Event::MarkerMalformed {
                agent_id: self.rec.id.clone(),
                problem: problem.clone(),
            });
        }
        for m in markers {
            match m {
                Marker::PhaseComplete { phase } => {
                    self.rec.phase = Some(*phase);
                    self.rec.current_step = Some(format!("phase {phase} complete"));
                    let phases = self
                        .env
                        .deps
                        .config
                        .types
                        .get(&self.rec.agent_type)
                        .and_then(|t| t.phases)
                        .filter(|n| *n > 0);
                    self.rec.progress = phases.map(|n| (f64::from(*phase) / f64::from(n)).min(1.0));
                }
                Marker::Error { message } => self.rec.last_error = Some(message.clone()),
                Marker::DependencyRequest { request } => {
                    wait = Some((AgentStatus::WaitingDependency, request.clone()));
                }
                Marker::UserQuestion { question } => {
                    wait = Some((AgentStatus::WaitingQuestion, question.clone()))
                }
            }
            self.env.deps.events.publish(&Event::Marker {
                agent_id: self.rec.id.clone(),
                marker: m.clone(),
            });
        }
        wait
    }

    /// A provider rate limit: the item goes back to the front of the queue, the agent waits in
    /// `waiting_rate_limit`, and resumes by itself after `ms` (on the injected clock); the turn
    /// re-runs once, its recorded outputs and tool results de-duplicated.
    fn rate_limited(&mut self, ms: u64, input: Option<Envelope>, ctx: &mut Context<Self>) {
        let resume_at = self.env.deps.clock.now_ms() + ms;
        self.retry = input.map(Box::new);
        self.rec.resume_at_ms = Some(resume_at);
        let _ = self.set_status(
            AgentStatus::WaitingRateLimit,
            Some(format!("provider rate limit; resumes at {resume_at}")),
            ctx,
        );
        self.env.deps.events.publish(&Event::RateLimited {
            agent_id: self.rec.id.clone(),
            resume_at_ms: resume_at,
        });
        self.schedule_rate_limit_resume(ms, ctx);
    }

    /// A dependency or an answer for an agent that waits for one: it becomes the next message
    /// and the agent runs again.
    fn provide(
        &mut self,
        env: Envelope,
        waiting_for: AgentStatus,
        ctx: &mut Context<Self>,
    ) -> Result<AgentRecord, AgentdError> {
        if self.rec.status != waiting_for {
            return Err(AgentdError::new(
                ErrorCode::InvalidTransition,
                format!(
                    "agent `{}` is {}, not {waiting_for}",
                    self.rec.id, self.rec.status
                ),
            ));
        }
        self.set_status(AgentStatus::Running, Some("provided".into()), ctx)?;
        inbox_depth_changed(1.0);
        self.inbox.push_front(env);
        self.pump(ctx);
        Ok(self.rec.clone())
    }

    fn fail(&mut self, e: AgentdError, cause: Uuid, ctx: &mut Context<Self>) {
        tracing::warn!(agent_id = %self.rec.id, error = %e, "turn failed");
        self.rec.last_error = Some(e.to_string());
        self.env.deps.events.publish(&Event::TurnFailed {
            agent_id: self.rec.id.clone(),
            message: e.to_string(),
        });
        let _ = self.set_status(AgentStatus::Failed, Some(e.code.as_str().into()), ctx);
        self.env.supervisor.do_send(crate::messages::Finished {
            agent_id: self.rec.id.clone(),
            ok: false,
        });
        self.output(
            Output::Failed {
                error: e.to_string(),
            },
            derived_id(cause, "failed"),
        );
    }

    fn output(&mut self, output: Output, cause: Uuid) {
        if self.rec.channel.parent_id().is_some() {
            let out = ChildOutput {
                child: self.rec.share(),
                output,
                cause,
                kept: false,
            };
            if self.hold_outputs {
                self.after_flush.push(out);
            } else {
                self.env.router.do_send(out);
            }
        }
    }

    fn control(
        &mut self,
        control: Control,
        ctx: &mut Context<Self>,
    ) -> Result<AgentRecord, AgentdError> {
        let res = self.apply_control(control, ctx);
        if res.is_ok() {
            // Backends with a process per agent follow the same control (signals).
            self.env.deps.model.control(&self.rec.id, control);
        }
        res
    }

    fn apply_control(
        &mut self,
        control: Control,
        ctx: &mut Context<Self>,
    ) -> Result<AgentRecord, AgentdError> {
        match control {
            Control::Pause => {
                if let Some(turn) = &self.turn {
                    if self.rec.status == AgentStatus::Paused {
                        return Ok(self.rec.clone());
                    }
                    // Stop at the next step boundary; the turn continues on resume.
                    turn.stop.store(true, Ordering::SeqCst);
                    self.rec.status_reason = Some("pause requested".into());
                } else {
                    self.set_status(AgentStatus::Paused, Some("paused by control".into()), ctx)?;
                }
            }
            Control::Resume => {
                if self.rec.status != AgentStatus::Paused {
                    if let Some(turn) = &self.turn {
                        turn.stop.store(false, Ordering::SeqCst);
                        return Ok(self.rec.clone());
                    }
                    return Err(AgentdError::new(
                        ErrorCode::InvalidTransition,
                        format!("agent `{}` is {}, not paused", self.rec.id, self.rec.status),
                    ));
                }
                if self.paused_mid_turn {
                    self.paused_mid_turn = false;
                    self.set_status(AgentStatus::Running, Some("resumed".into()), ctx)?;
                    let cause = agentd_proto::ids::new_id();
                    let input = self.paused_input.take().map(|e| *e);
                    self.start_turn(cause, input, TurnInput::Continue, None, ctx);
                } else {
                    self.set_status(AgentStatus::Idle, Some("resumed".into()), ctx)?;
                }
            }
            Control::Cancel | Control::Terminate => {
                let to = if control == Control::Cancel {
                    AgentStatus::Cancelled
                } else {
                    AgentStatus::Terminated
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
                    self.abort_turn(true, ctx);
                }
                self.drop_queue(ctx);
                self.set_status(to, Some(format!("{} by control", control.as_str())), ctx)?;
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
}

impl Actor for AgentActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        ctx.set_mailbox_capacity(1024);
        if self.rec.status == AgentStatus::WaitingRateLimit {
            // Re-activated (restart, failover) while rate-limited: it still resumes by itself.
            let now = self.env.deps.clock.now_ms();
            let ms = self.rec.resume_at_ms.unwrap_or(now).saturating_sub(now);
            self.schedule_rate_limit_resume(ms, ctx);
        }
    }

    fn stopped(&mut self, _ctx: &mut Self::Context) {
        self.release_permit();
        self.env
            .supervisor
            .do_send(AgentStopped(self.rec.id.clone()));
        self.env.router.do_send(Forget(self.rec.id.clone()));
    }
}

impl Handler<Deliver> for AgentActor {
    // Atomic: the item is in the durable inbox before the next message is handled, so arrival
    // order is kept and a transport may acknowledge once this answers.
    type Result = AtomicResponse<Self, Result<bool, AgentdError>>;

    fn handle(&mut self, Deliver(env): Deliver, ctx: &mut Self::Context) -> Self::Result {
        AtomicResponse::new(self.deliver(env, ctx))
    }
}

impl Handler<crate::messages::Delivery> for AgentActor {
    // Atomic, as `Deliver`: the answer goes to the sender's channel.
    type Result = AtomicResponse<Self, ()>;

    fn handle(&mut self, d: crate::messages::Delivery, ctx: &mut Self::Context) -> Self::Result {
        if self.stopping {
            // What this actor took now would be dropped from memory with no live actor left
            // to run it: the router routes it again (to a fresh actor or the new owner).
            tracing::debug!(agent_id = %self.rec.id, message_id = %d.env.id, "delivery refused: the agent is stopping");
            self.env
                .router
                .do_send(crate::messages::Refused(d, ctx.address()));
            return AtomicResponse::new(Box::pin(actix::fut::ready(())));
        }
        let crate::messages::Delivery { env, ack, .. } = d;
        let id = env.id;
        let delivered = self.deliver(env, ctx);
        AtomicResponse::new(Box::pin(delivered.map(move |res, _, _| {
            crate::messages::answer(ack, id, res);
        })))
    }
}

impl AgentActor {
    /// Takes an envelope: an inbox item is queued durably (once) before the next message is
    /// handled; a control is applied.
    fn deliver(&mut self, env: Envelope, ctx: &mut Context<Self>) -> Delivered {
        let span = tracing::debug_span!("deliver", agent_id = %self.rec.id, thread_id = %self.rec.id, message_id = %env.id);
        let _g = span.enter();
        let kind = match &env.item {
            Item::Inbox(i) => i.kind(),
            Item::Control(c) => c.as_str(),
            _ => "other",
        };
        if self.stopping {
            tracing::debug!(agent_id = %self.rec.id, message_id = %env.id, "delivery refused: the agent is stopping");
            return Box::pin(actix::fut::ready(Err(AgentdError::new(
                ErrorCode::Unavailable,
                format!("agent `{}` is stopping", self.rec.id),
            ))));
        }
        metrics::global().inc_named(
            "agentd_messages_in_total",
            "Envelopes delivered to agents, by kind.",
            "kind",
            kind,
        );
        match env.item {
            Item::Inbox(_) => {
                if let Some(transport) = &self.env.deps.transport
                    && !transport.may_deliver(&self.rec.id)
                {
                    // Left to the partition's owner: a stream entry stays pending for it, a
                    // direct sender is told to try again.
                    tracing::debug!(agent_id = %self.rec.id, message_id = %env.id, "delivery refused: this process no longer holds the agent's partition");
                    return Box::pin(actix::fut::ready(Err(AgentdError::new(
                        ErrorCode::Unavailable,
                        format!(
                            "agent `{}`: this process no longer holds its partition",
                            self.rec.id
                        ),
                    ))));
                }
                let store = self.env.deps.store.clone();
                let id = self.rec.id.clone();
                let (input, then) = match self.turn_start_writes(&env) {
                    Some((input, then)) => (Some(input), then),
                    None => (None, Vec::new()),
                };
                self.push_in_flight = true;
                Box::pin(
                    async move {
                        let pushed = store.inbox_push_then(&id, &env, &then).await;
                        (pushed, env)
                    }
                    .into_actor(self)
                    .then(|(pushed, env), act, ctx| -> Delivered {
                        act.push_in_flight = false;
                        if std::mem::take(&mut act.flush_held) {
                            // Runs after this closure: what it queues below joins the batch.
                            act.schedule_flush(ctx);
                        }
                        let pushed = match pushed {
                            Ok(p) => p,
                            Err(e) => return Box::pin(actix::fut::ready(Err(e.into()))),
                        };
                        let fresh = pushed.fresh;
                        if fresh {
                            if let Some(input) = input.filter(|_| pushed.then_applied) {
                                act.prestarted = Some(Box::new((env.id, input)));
                            }
                            act.enqueue(env, ctx);
                            act.pump(ctx);
                            if act.prestarted.take().is_some() {
                                // Not started after all: the stored record is put right.
                                act.persist(ctx);
                            }
                        } else if !act.holds(env.id) {
                            return Box::pin(act.take_if_still_pending(env).map(|(), _, _| Ok(false)));
                        } else {
                            tracing::debug!(agent_id = %act.rec.id, message_id = %env.id, "duplicate envelope ignored");
                        }
                        Box::pin(actix::fut::ready(Ok(fresh)))
                    }),
                )
            }
            Item::Control(c) => {
                let res = self.control(c, ctx).map(|_| true);
                if let Err(e) = &res {
                    tracing::warn!(error = %e, "control refused");
                }
                Box::pin(actix::fut::ready(res))
            }
            _ => Box::pin(actix::fut::ready(Err(AgentdError::new(
                ErrorCode::BadEnvelope,
                "an agent only takes inbox and control items",
            )))),
        }
    }
}

impl Handler<crate::messages::Provide> for AgentActor {
    // Atomic: the provided text is durably queued before the agent runs on it.
    type Result = AtomicResponse<Self, Result<AgentRecord, AgentdError>>;

    fn handle(&mut self, msg: crate::messages::Provide, _: &mut Self::Context) -> Self::Result {
        let store = self.env.deps.store.clone();
        let id = self.rec.id.clone();
        let env = msg.env;
        let waiting_for = msg.waiting_for;
        AtomicResponse::new(Box::pin(
            async move {
                let pushed = store.inbox_push(&id, &env).await;
                (pushed, env)
            }
            .into_actor(self)
            .map(move |(pushed, env), act, ctx| {
                pushed.map_err(AgentdError::from)?;
                act.provide(env, waiting_for, ctx)
            }),
        ))
    }
}

impl Handler<crate::messages::SetBudget> for AgentActor {
    type Result = MessageResult<crate::messages::SetBudget>;

    fn handle(&mut self, msg: crate::messages::SetBudget, ctx: &mut Self::Context) -> Self::Result {
        self.rec.budget = Some(Box::new(msg.0));
        self.persist(ctx);
        MessageResult(self.rec.clone())
    }
}

impl Handler<crate::messages::SetEnv> for AgentActor {
    type Result = MessageResult<crate::messages::SetEnv>;

    fn handle(&mut self, msg: crate::messages::SetEnv, ctx: &mut Self::Context) -> Self::Result {
        self.rec.env = msg.0;
        self.persist(ctx);
        self.restart_backend(ctx);
        MessageResult(self.rec.clone())
    }
}

impl Handler<crate::scheduler::Permit> for AgentActor {
    type Result = ();

    fn handle(&mut self, _: crate::scheduler::Permit, ctx: &mut Self::Context) {
        self.has_permit = true;
        match self.awaiting_permit.take().map(|p| *p) {
            Some((env, input)) => self.begin(env, input, false, ctx),
            None => self.release_permit(),
        }
    }
}

impl Handler<crate::messages::DependencyDone> for AgentActor {
    type Result = ();

    fn handle(&mut self, msg: crate::messages::DependencyDone, ctx: &mut Self::Context) {
        if !self.unmet.contains(&msg.agent_id) {
            return;
        }
        if !msg.ok {
            if self.env.deps.config.limits.on_dependency_failure == "fail" {
                let e = AgentdError::new(
                    ErrorCode::InvalidTransition,
                    format!("dependency `{}` failed", msg.agent_id),
                );
                self.fail(e, agentd_proto::ids::new_id(), ctx);
            }
            return; // hold: wait until it completes after all
        }
        self.unmet.remove(&msg.agent_id);
        if self.unmet.is_empty() && self.rec.status == AgentStatus::WaitingDependency {
            let _ = self.set_status(
                AgentStatus::Idle,
                Some("dependencies completed".into()),
                ctx,
            );
        }
        self.pump(ctx);
    }
}

impl Handler<Restore> for AgentActor {
    type Result = ();

    fn handle(&mut self, Restore(items): Restore, ctx: &mut Self::Context) {
        if self.stopping {
            // The items stay in the durable inbox for the next activation.
            return;
        }
        for env in items {
            self.enqueue(env, ctx);
        }
        self.pump(ctx);
    }
}

impl Handler<ApplyControl> for AgentActor {
    type Result = Result<AgentRecord, AgentdError>;

    fn handle(&mut self, ApplyControl(c): ApplyControl, ctx: &mut Self::Context) -> Self::Result {
        self.control(c, ctx)
    }
}

impl Handler<Snapshot> for AgentActor {
    type Result = MessageResult<Snapshot>;

    fn handle(&mut self, _: Snapshot, _: &mut Self::Context) -> Self::Result {
        MessageResult(self.rec.clone())
    }
}

impl Handler<RuntimeState> for AgentActor {
    type Result = MessageResult<RuntimeState>;

    fn handle(&mut self, _: RuntimeState, _: &mut Self::Context) -> Self::Result {
        MessageResult(Runtime {
            inbox: self.inbox.len(),
            turn_running: self.turn.is_some(),
        })
    }
}

impl Handler<AddUsage> for AgentActor {
    type Result = ();

    fn handle(&mut self, AddUsage(usage): AddUsage, ctx: &mut Self::Context) {
        self.count_usage(usage, ctx);
        if let Some(limit) = self.over_budget() {
            self.pause_for_budget(limit.to_string(), ctx);
        }
    }
}

impl AgentActor {
    /// Counts a model call's `usage` in the agent's record, the token and cost meters and the
    /// events, and checks its tree's budget with it (the agent's own budget is its caller's
    /// to check: mid-turn at once, at a turn's end with the status the end decides).
    fn count_usage(&mut self, usage: agentd_proto::Usage, ctx: &mut Context<Self>) {
        let spent = self.usage_counted(usage);
        self.check_tree_budget(spent, ctx);
    }

    /// [`Self::count_usage`] without the tree's check; answers what was spent.
    fn usage_counted(&mut self, usage: agentd_proto::Usage) -> crate::tree_spend::Spent {
        let meters = &self.turn_setup().usage;
        let cost = meters.price.cost(&usage);
        for (counter, n) in meters.tokens.iter().zip([
            usage.input,
            usage.output,
            usage.cache_write,
            usage.cache_read,
        ]) {
            counter.add(n as f64);
        }
        meters.cost.add(cost);
        self.rec.usage += usage;
        self.rec.cost_usd += cost;
        if self.env.deps.events.is_listened() {
            self.env.deps.events.publish(&Event::TokenUsage {
                agent_id: self.rec.id.clone(),
                usage,
                cost_usd: cost,
            });
        }
        crate::tree_spend::Spent {
            usage,
            cost_usd: cost,
        }
    }
}

impl Handler<crate::messages::BudgetPause> for AgentActor {
    type Result = ();

    fn handle(&mut self, msg: crate::messages::BudgetPause, ctx: &mut Self::Context) {
        self.pause_for_budget(msg.0, ctx);
    }
}

impl Handler<StopAgent> for AgentActor {
    // The answer comes once the record (and the interruption marker) are persisted, so a
    // re-activation right after never reads a stale status.
    type Result = ResponseActFuture<Self, AgentRecord>;

    fn handle(&mut self, msg: StopAgent, ctx: &mut Self::Context) -> Self::Result {
        self.stopping = true;
        // The agent's runtime ends: a process-per-agent backend ends its process too (it is
        // started again, with the whole thread, on re-activation).
        self.env
            .deps
            .model
            .control(&self.rec.id, Control::Terminate);
        // Close drops queued work; a shutdown (no final status) keeps it in the durable inbox
        // for the next activation.
        let closing = msg.final_status.is_some();
        // The actor stops right after this answer, so dropped items are marked done in the
        // answer's own future (a spawned one would never run).
        let mut dropped: Vec<Uuid> = Vec::new();
        if closing {
            dropped.extend(
                self.turn
                    .as_ref()
                    .and_then(|t| t.input.as_ref().map(|e| e.id)),
            );
        }
        let marker = self.abort_turn(false, ctx).filter(|_| closing);
        if closing {
            dropped.extend(self.take_queue());
        } else {
            inbox_depth_changed(-(self.inbox.len() as f64));
            self.inbox.clear();
            self.paused_mid_turn = false;
        }
        if let Some(to) = msg.final_status {
            if self.rec.status != to && !self.rec.status.can_become(to) {
                // e.g. a running agent being closed: its turn is over, so it is idle first.
                let _ = self.transition(AgentStatus::Idle, None);
            }
            let _ = self.transition(to, Some("closed by control".into()));
            self.rec.updated_at_ms = self.env.deps.clock.now_ms();
        }
        let persist = msg.final_status.is_some();
        let store = self.env.deps.store.clone();
        let rec = self.rec.clone();
        Box::pin(
            async move {
                if let Some(entry) = marker
                    && let Err(e) = store.append(&rec.id, &entry).await
                {
                    tracing::error!(agent_id = %rec.id, error = %e, "recording the interruption failed");
                }
                for id in dropped {
                    if let Err(e) = store.inbox_done(&rec.id, id).await {
                        tracing::warn!(agent_id = %rec.id, error = %e, "dropping a queued item failed");
                    }
                }
                if persist && let Err(e) = store.put_agent(&rec).await {
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

impl Handler<crate::messages::TakeCheckpoint> for AgentActor {
    // Atomic: the checkpoint is the agent's state between two of its messages.
    type Result = AtomicResponse<Self, Result<agentd_proto::Checkpoint, AgentdError>>;

    fn handle(
        &mut self,
        msg: crate::messages::TakeCheckpoint,
        _: &mut Self::Context,
    ) -> Self::Result {
        let deps = self.env.deps.clone();
        let rec = self.rec.clone();
        AtomicResponse::new(Box::pin(
            async move { crate::checkpoints::capture(&deps, &rec, msg.reason, &msg.trigger).await }
                .into_actor(self),
        ))
    }
}

impl Handler<crate::messages::RestoreCheckpoint> for AgentActor {
    // Atomic: nothing else touches the agent between dropping its work and re-queuing the
    // checkpoint's.
    type Result = AtomicResponse<Self, Result<AgentRecord, AgentdError>>;

    fn handle(
        &mut self,
        crate::messages::RestoreCheckpoint(cp): crate::messages::RestoreCheckpoint,
        ctx: &mut Self::Context,
    ) -> Self::Result {
        // What runs or waits now is dropped (marked done); the checkpoint's pending items
        // replace it.
        self.abort_turn(true, ctx);
        self.drop_queue(ctx);
        self.holding_for_retry = false;
        self.thread = None;
        let plan = crate::checkpoints::plan(&cp, agentd_proto::ids::new_id());
        let store = self.env.deps.store.clone();
        let id = self.rec.id.clone();
        AtomicResponse::new(Box::pin(
            async move {
                store.replace_thread(&id, &plan.conversation).await?;
                let mut queued = Vec::new();
                for env in plan.pending {
                    if store.inbox_push(&id, &env).await? {
                        queued.push(env);
                    }
                }
                Ok::<_, AgentdError>(queued)
            }
            .into_actor(self)
            .map(move |res, act, ctx| {
                let queued = res?;
                act.rec.phase = cp.phase;
                act.rec.current_step = cp.current_step.clone();
                act.rec.progress = cp.progress;
                act.rec.env = cp.environment.clone();
                act.rec.result = None;
                act.rec.last_error = None;
                act.rec.resume_at_ms = None;
                act.rec.attempts = 0;
                act.rec.current_task = None;
                // A process-backend agent starts a new process, with the restored environment
                // and the restored conversation, on its next turn.
                act.restart_backend(ctx);
                act.env.deps.events.publish(&Event::Restored {
                    agent_id: act.rec.id.clone(),
                    checkpoint_id: cp.id,
                });
                for env in queued {
                    act.enqueue(env, ctx);
                }
                // Running until the pump finds nothing to do (then idle): every status may
                // become running but closed, which activation already re-opened.
                let reason = Some(format!("restored from checkpoint {}", cp.id));
                if act.set_status(AgentStatus::Running, reason, ctx).is_err() {
                    act.persist(ctx);
                }
                act.pump(ctx);
                Ok(act.rec.clone())
            }),
        ))
    }
}
/// The spending of `root_id`'s tree: every agent's usage and cost as stored, agent `me`'s as
/// `mine` (its newest, maybe not stored yet).
async fn sum_tree(
    deps: &Deps,
    root_id: &str,
    me: &str,
    mine: crate::tree_spend::Spent,
) -> crate::tree_spend::Spent {
    let mut tree = crate::tree_spend::Spent::default();
    let mut stack = vec![root_id.to_string()];
    while let Some(id) = stack.pop() {
        if id == me {
            tree.usage += mine.usage;
            tree.cost_usd += mine.cost_usd;
        } else if let Some(rec) = deps.store.get_agent(&id).await.ok().flatten() {
            tree.usage += rec.usage;
            tree.cost_usd += rec.cost_usd;
        }
        stack.extend(deps.store.children(&id).await.unwrap_or_default());
    }
    tree
}

#[cfg(test)]
mod size {
    /// Every live agent is one spawned actor: what it rarely holds (a running turn, a paused
    /// or retried item, an item waiting for a slot) is boxed so that 100,000 idle agents stay
    /// small (the `rss_bytes_per_idle_agent` benchmark). 8 bytes more (208) moved the actor's
    /// context to the allocator's next size class: +124 bytes of RSS per idle agent, 2,042 of
    /// the benchmark's 2,048.
    #[test]
    fn an_idle_agent_actor_stays_small() {
        let size = std::mem::size_of::<super::AgentActor>();
        assert!(size <= 200, "AgentActor is {size} bytes");
    }
}
