//! Deciding what runs next and starting turns.
//!
//! [`AgentActor::pump`] is where the actor decides: it asks its [`Activity`] and the status,
//! and either does nothing (a turn runs, a slot is awaited, the queue is held), marks the agent
//! waiting (a budget, dependencies), or takes the next item and starts its turn, through the
//! scheduler when turn slots are limited.

use super::AgentActor;
use super::activity::{Activity, RunningTurn, Slot, TurnStart};
use super::budget::UsageMeters;
use crate::ports::StoreWrite;
use crate::tools::ToolContext;
use crate::turn::{InputWritten, Turn, TurnInput, TurnShared};
use crate::turn::{Step, TurnProgress};
use actix::prelude::*;
use agentd_proto::ids::derived_id;
use agentd_proto::{
    AgentRecord, AgentStatus, Envelope, InboxItem, Item, Role, ThreadEntry, TraceContext,
};
use futures::FutureExt;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use tracing::Instrument;
use uuid::Uuid;

/// What an agent's turns show its model; it follows from the agent's type, allowed tools,
/// depth and parent, which do not change, and from the tool catalogue, whose version its specs
/// carry (a turn refreshes them when the catalogue changed).
pub(super) struct TurnSetup {
    tool_specs: crate::catalogue::VisibleSpecs,
    system_prompt: Arc<str>,
    pub(super) names: Arc<crate::turn::RequestNames>,
    pub(super) usage: UsageMeters,
    /// Where the agent's turns report their progress (the actor's own address, made once).
    progress: Option<Arc<Recipient<TurnProgress>>>,
    /// The agent's entry in the status gauge, taken at its first status change once it runs
    /// turns ([`agentd_observe::metrics::StatusCell`]).
    pub(super) status: Option<agentd_observe::metrics::StatusCell>,
}

impl TurnSetup {
    fn of(rec: &AgentRecord, deps: &crate::deps::Deps) -> Self {
        TurnSetup {
            tool_specs: crate::tools::visible_specs(rec, deps),
            system_prompt: crate::turn::system_prompt(rec, deps).into(),
            names: Arc::new(crate::turn::RequestNames::of(rec, deps)),
            usage: UsageMeters::of(rec, deps),
            progress: None,
            status: None,
        }
    }
}

/// An item whose turn start (input entry, `running` record) was written with its inbox push,
/// and the input made for it then: the turn uses that one, written as is.
pub(super) struct Prestart {
    pub(super) id: Uuid,
    pub(super) input: TurnInput,
    pub(super) record: WrittenRecord,
}

/// The `running` record a turn start wrote with its item's push, and the record it was made
/// from. While `base` is held, any change to the actor's record copies it, so the actor still
/// holding `base` itself proves nothing changed since: the turn then adopts `running` instead
/// of making the same changes again on a copy of its own.
pub(super) struct WrittenRecord {
    base: Arc<AgentRecord>,
    running: Arc<AgentRecord>,
}

/// Whether the writes that start a turn (its input entry, the `running` record) are still to
/// be made, or went with its item's push already.
pub(super) enum StartWrites {
    /// Still to be made: they go with the actor's next flush.
    Fresh,
    /// Written with the item's push ([`AgentActor::turn_start_writes`]).
    Written(WrittenRecord),
}

impl StartWrites {
    fn written(&self) -> bool {
        matches!(self, StartWrites::Written(_))
    }
}

/// Counts a turn on inbox item `env` as its task's next attempt (the first, for a new task),
/// and notes the turn's trace context, which goes into the store with the `running` record.
fn count_attempt(rec: &mut AgentRecord, env: &Envelope) {
    let task = env.id;
    if rec.current_task == Some(task) {
        rec.attempts += 1;
    } else {
        rec.attempts = 1;
        rec.current_task = Some(task);
        rec.task_steps_counted = 0;
    }
    rec.trace = Some(TraceContext::for_turn(
        trace_parent(env),
        task,
        rec.attempts,
    ));
}

/// The write of a turn's input entry on attempt `attempts` of its item: on the first, the entry
/// is new (its id derives from the item's, and an input is only ever written with the
/// `running` record that counts its attempt, so a first attempt finds none written).
fn input_write(agent_id: Arc<str>, entry: Arc<ThreadEntry>, attempts: u32) -> StoreWrite {
    if attempts == 1 {
        StoreWrite::AppendNew { agent_id, entry }
    } else {
        StoreWrite::Append { agent_id, entry }
    }
}

/// Whether `env` is an answer a child forwarded (a message from an agent, a yield's result):
/// the turn it starts follows the child's span (a link) in a trace of its own, instead of
/// being a child of a span that ended long ago.
fn forwarded(env: &Envelope) -> bool {
    matches!(
        &env.item,
        Item::Inbox(InboxItem::Yield { .. })
            | Item::Inbox(InboxItem::Message {
                from_agent: Some(_),
                ..
            })
    )
}

/// The span a turn on `env` is a child of: the one that sent it, unless it is forwarded.
fn trace_parent(env: &Envelope) -> Option<&TraceContext> {
    env.trace.as_ref().filter(|_| !forwarded(env))
}

impl AgentActor {
    /// Starts the next turn if nothing runs and the status lets work start.
    pub(super) fn pump(&mut self, ctx: &mut Context<Self>) {
        self.pump_with(None, ctx);
    }

    /// [`Self::pump`], where the turn start of `prestart`'s item was written already; answers
    /// `prestart` back if its item did not start.
    pub(super) fn pump_with(
        &mut self,
        prestart: Option<Prestart>,
        ctx: &mut Context<Self>,
    ) -> Option<Prestart> {
        let status = self.rec.status;
        if !self.activity.may_start_turn(status) {
            return prestart;
        }
        let has_work = !self.queue.is_empty();
        if has_work && self.pause_if_over_budget(ctx) {
            return prestart;
        }
        if let Activity::WaitingDependencies(unmet) = &self.activity
            && has_work
        {
            if status != AgentStatus::WaitingDependency {
                let reason = crate::depends_on::waiting_reason(unmet);
                let _ = self.set_status(AgentStatus::WaitingDependency, Some(reason), ctx);
            }
            return prestart;
        }
        if agentd_proto::DependencyOutcome::failure_of(status).is_none() {
            // Watches set aside while it was failed, cancelled or terminated: it is not now.
            self.queue.unpark_watches();
        }
        let Some(env) = self.queue.pop_next() else {
            if status == AgentStatus::Running {
                let _ = self.rest(None, ctx);
            }
            return prestart;
        };
        if super::relay::relays(&env) {
            self.relay(env, ctx);
            return self.pump_with(prestart, ctx);
        }
        if super::queue::is_watch(&env) {
            self.watch_reached(env, ctx);
            return self.pump_with(prestart, ctx);
        }
        let (input, writes, prestart) = match prestart {
            Some(p) if p.id == env.id => (Some(p.input), StartWrites::Written(p.record), None),
            other => (
                self.turn_input(&env, self.deps().clock.now_ms()),
                StartWrites::Fresh,
                other,
            ),
        };
        let Some(input) = input else {
            // Not an item that runs a turn.
            return self.pump_with(prestart, ctx);
        };
        if self.system.scheduler.is_some() {
            // Wait for a turn slot; the agent shows `queued` meanwhile.
            self.await_permit(env, input, ctx);
            return prestart;
        }
        self.begin(env, input, writes, Slot::NotHeld, ctx);
        prestart
    }

    /// The turn input an inbox item makes at `now` (`None` for anything else).
    fn turn_input(&self, env: &Envelope, now: u64) -> Option<TurnInput> {
        Some(match &env.item {
            Item::Inbox(InboxItem::Message {
                text,
                role,
                from_agent,
                ..
            }) => {
                let mut entry =
                    ThreadEntry::text(derived_id(env.id, "input"), *role, text.clone(), now);
                entry.from_agent = from_agent.as_deref().map(Into::into);
                TurnInput::Message(Arc::new(entry))
            }
            Item::Inbox(InboxItem::Yield { result }) => {
                let text = match result {
                    serde_json::Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                let mut entry =
                    ThreadEntry::text(derived_id(env.id, "input"), Role::User, text, now);
                entry.from_agent = env.from.agent_id().map(Into::into);
                TurnInput::Message(Arc::new(entry))
            }
            Item::Inbox(InboxItem::Reset { message }) => TurnInput::Reset(message.clone()),
            Item::Inbox(InboxItem::Compact) => TurnInput::Compact,
            _ => return None,
        })
    }

    /// The writes that start a turn on `env` (its input entry, the `running` record), if `env`
    /// would start one the moment it is queued; they then go with its inbox push.
    pub(super) fn turn_start_writes(
        &mut self,
        env: &Envelope,
    ) -> Option<(TurnInput, WrittenRecord, Vec<StoreWrite>)> {
        let ready = matches!(self.activity, Activity::Idle)
            && self.queue.is_empty()
            && self.system.scheduler.is_none()
            && self.rec.status.accepts_turns()
            && self.rec.status.can_become(AgentStatus::Running)
            && self.over_budget().is_none();
        if !ready || super::relay::relays(env) {
            return None;
        }
        let now = self.deps().clock.now_ms();
        let input = self.turn_input(env, now)?;
        let TurnInput::Message(entry) = &input else {
            return None;
        };
        let agent_id = self.shared_id();
        // As `begin` leaves the record.
        let mut rec = AgentRecord::clone(&self.rec);
        count_attempt(&mut rec, env);
        rec.status = AgentStatus::Running;
        rec.status_reason = None;
        rec.updated_at_ms = now;
        let append = input_write(agent_id, Arc::clone(entry), rec.attempts);
        let running = Arc::new(rec);
        let writes = vec![append, StoreWrite::PutAgent(Arc::clone(&running))];
        let record = WrittenRecord {
            base: self.rec.share(),
            running,
        };
        Some((input, record, writes))
    }

    /// Starts the turn of `env` now. `writes`: whether the turn's start (input entry, `running`
    /// record) went with the item's push already. `slot`: whether the scheduler granted one.
    pub(super) fn begin(
        &mut self,
        env: Envelope,
        input: TurnInput,
        writes: StartWrites,
        slot: Slot,
        ctx: &mut Context<Self>,
    ) {
        let give_back_permit = |act: &Self| {
            if slot == Slot::Held
                && let Some(scheduler) = &act.system.scheduler
            {
                scheduler.do_send(crate::scheduler::Release(act.rec.id.clone()));
            }
        };
        if let Err(e) = self.check_can_run() {
            tracing::warn!(agent_id = %self.rec.id, error = %e, "cannot start a turn");
            give_back_permit(self);
            return;
        }
        let written = writes.written();
        if let StartWrites::Written(record) = writes
            && Arc::ptr_eq(&self.rec.0, &record.base)
        {
            // Nothing changed since the push wrote the `running` record: it is the record.
            let from = self.rec.status;
            self.rec = super::SharedRecord(record.running);
            if from != AgentStatus::Running {
                self.announce_status(from, None);
            }
            self.writes.record_written();
            self.start_turn(env, input, written, slot, ctx);
            return;
        }
        // The task and its attempt are persisted with `running`, so a turn re-run after a
        // crash (same inbox item) shows as the next attempt.
        let (task, attempts, trace) = (self.rec.current_task, self.rec.attempts, self.rec.trace);
        let was_running = self.rec.status == AgentStatus::Running;
        count_attempt(&mut self.rec, &env);
        if let Err(e) = self.set_status(AgentStatus::Running, None, ctx) {
            tracing::warn!(agent_id = %self.rec.id, error = %e, "cannot start a turn");
            (self.rec.current_task, self.rec.attempts, self.rec.trace) = (task, attempts, trace);
            give_back_permit(self);
            return;
        }
        if was_running {
            // No status change to persist it with (e.g. after a rate limit): persist anyway.
            self.persist(ctx);
        }
        if matches!(input, TurnInput::Reset(_)) {
            self.rec.result = None;
            self.rec.last_error = None;
            // A reset starts a new conversation: an agent CLI starts a new session.
            if let Some(cli) = &mut self.rec.agent_cli {
                cli.session_id = None;
            }
            self.deps().model.conversation_replaced(&self.rec.id);
        }
        if written {
            // The `running` record went with the item's push.
            self.writes.record_written();
        }
        self.start_turn(env, input, written, slot, ctx);
    }

    /// Starts the turn of `env` on a record that shows `running` already (`written`: whether
    /// its input entry went with the item's push).
    fn start_turn(
        &mut self,
        env: Envelope,
        input: TurnInput,
        written: bool,
        slot: Slot,
        ctx: &mut Context<Self>,
    ) {
        let input_written = match &input {
            TurnInput::Message(entry) => Some(self.write_input(Arc::clone(entry), written, ctx)),
            _ => None,
        };
        let start = TurnStart {
            cause: env.id,
            env: Some(env),
            input,
            input_written,
            slot,
        };
        // The status is `running` already: this cannot be refused.
        if let Err(e) = self.run(start, None, ctx) {
            tracing::warn!(agent_id = %self.rec.id, error = %e, "cannot start a turn");
        }
    }

    /// The input entry goes into the thread with the `running` record, in one batch (or went
    /// with the item's push already: `writes`; or waits in a deferred flush, for an item the
    /// agent holds in its stream entry); answers the flag the turn reads to know.
    fn write_input(
        &mut self,
        entry: Arc<ThreadEntry>,
        written: bool,
        ctx: &mut Context<Self>,
    ) -> Arc<InputWritten> {
        let flag = InputWritten::new(written, !written && self.writes.is_deferring());
        if !written {
            self.writes.watch_input(flag.clone());
        }
        // A first attempt's input is new; only a re-run may find it there already.
        if let Some(thread) = &mut self.thread
            && (self.rec.attempts == 1 || !thread.iter().any(|e| e.id == entry.id))
        {
            Arc::make_mut(thread).push(Arc::clone(&entry));
        }
        if !written {
            let append = input_write(self.shared_id(), entry, self.rec.attempts);
            self.write_later(append, ctx);
        }
        flag
    }

    /// What the agent's turns show its model and how its usage is counted, made on first use.
    pub(super) fn turn_setup(&mut self) -> &TurnSetup {
        let (rec, deps) = (&self.rec, &self.system.deps);
        self.setup
            .get_or_insert_with(|| Box::new(TurnSetup::of(rec, deps)))
    }

    /// [`Self::turn_setup`], with the tool specs brought up to the catalogue's version.
    fn fresh_turn_setup(&mut self) -> &mut TurnSetup {
        let (rec, deps) = (&self.rec, &self.system.deps);
        let setup = self
            .setup
            .get_or_insert_with(|| Box::new(TurnSetup::of(rec, deps)));
        setup.tool_specs.refresh(rec, deps);
        setup
    }

    /// Spawns the turn `start` describes on the actor's context; answers it as it runs (the
    /// caller, [`Self::run`], makes it the agent's activity).
    pub(super) fn spawn_turn(&mut self, start: TurnStart, ctx: &mut Context<Self>) -> RunningTurn {
        let TurnStart {
            cause,
            env,
            input,
            input_written,
            slot,
        } = start;
        let shared = Arc::new(TurnShared::default());
        let setup = self.fresh_turn_setup();
        let progress = Arc::clone(
            setup
                .progress
                .get_or_insert_with(|| Arc::new(ctx.address().recipient())),
        );
        let (tool_specs, system_prompt, names) = (
            setup.tool_specs.specs().clone(),
            setup.system_prompt.clone(),
            setup.names.clone(),
        );
        // Only a re-run (a retry, or a paused turn continuing) can find its own earlier
        // entries in the thread; a first run looks nothing up.
        let continuing = matches!(input, TurnInput::Continue);
        let replaying = continuing || self.rec.attempts != 1;
        let step = match input {
            TurnInput::Message(_) | TurnInput::Continue => Step::CallingModel,
            TurnInput::Reset(_) => Step::Resetting,
            TurnInput::Compact => Step::Compacting,
        };
        let turn = Turn {
            replaying,
            tool_specs,
            system_prompt,
            names,
            thread: self.thread.take(),
            input_written,
            rec: self.rec.share(),
            deps: self.system.deps.clone(),
            tools: ToolContext {
                caller: self.rec.share(),
                deps: self.system.deps.clone(),
                agents: self.system.agents(),
                cause,
            },
            outputs: self.system.output_port(),
            rate_gates: Arc::clone(&self.system.rate_gates),
            progress,
            shared: Arc::clone(&shared),
            cause,
        };
        let correlation = env.as_ref().and_then(|e| e.correlation_id).unwrap_or(cause);
        let trace = self.turn_trace(cause, continuing);
        let span = tracing::info_span!("turn", agent_id = %self.rec.id, thread_id = %self.rec.id, message_id = %cause, correlation_id = %correlation, trace_id = %trace.trace_id_hex());
        // Boxed at once: the turn's future is several KB, and each wrapper below would move it
        // whole. Whatever the turn sends to other agents carries its trace context; with
        // telemetry on, the turn runs in its `invoke_agent` span.
        let run = Box::pin(turn.run(input));
        let (run, trace) = if agentd_observe::telemetry::enabled() {
            let (otel, trace) = self.invoke_agent_span(trace, env.as_ref(), continuing);
            (futures::future::Either::Left(run.instrument(otel)), trace)
        } else {
            (futures::future::Either::Right(run), trace)
        };
        let fut =
            AssertUnwindSafe(agentd_observe::telemetry::scope(Some(trace), run).instrument(span))
                .catch_unwind();
        let handle = ctx.spawn(fut.into_actor(self).map(move |res, act, ctx| {
            act.turn_done(cause, res, ctx);
        }));
        RunningTurn {
            handle,
            cause,
            input: env,
            shared,
            pause_reason: None,
            started: std::time::Instant::now(),
            slot,
            restart_backend_after: false,
            step,
        }
    }

    /// The trace context of the turn on inbox item `cause` (or going on: `continuing`): the
    /// one its start noted, or (a record from before there were any) one derived again.
    fn turn_trace(&self, cause: Uuid, continuing: bool) -> TraceContext {
        match self.rec.trace {
            Some(t) if continuing || self.rec.current_task == Some(cause) => t,
            _ => TraceContext::for_turn(None, cause, self.rec.attempts.max(1)),
        }
    }

    /// The turn's `invoke_agent` span (telemetry on), with the ids `trace` names: a child of
    /// the span that sent `env` (unless forwarded, which it follows by a link instead), linked
    /// to the attempt before it (a run a crash, a rate limit or a failure ended). A turn going
    /// on after a pause or a wait for tools is a new span under its first (`trace`). Answers
    /// the span with its context as exported (the sampler may have declined it).
    #[cold]
    fn invoke_agent_span(
        &self,
        trace: TraceContext,
        env: Option<&Envelope>,
        continuing: bool,
    ) -> (tracing::Span, TraceContext) {
        let rec = &self.rec;
        let (ids, parent, forward, before) = if continuing {
            (None, Some(trace), None, None)
        } else {
            let parent = env.and_then(trace_parent).copied();
            let forward = env.filter(|e| forwarded(e)).and_then(|e| e.trace);
            let before = (rec.attempts > 1)
                .then(|| {
                    env.map(|e| TraceContext::for_turn(parent.as_ref(), e.id, rec.attempts - 1))
                })
                .flatten();
            (Some(trace), parent, forward, before)
        };
        let type_model = self
            .deps()
            .config
            .types
            .get(&rec.agent_type)
            .and_then(|t| t.model.as_deref());
        let span = agentd_observe::telemetry::invoke_agent(&agentd_observe::telemetry::AgentSpan {
            agent_id: &rec.id,
            agent_type: &rec.agent_type,
            title: &rec.title,
            provider: self.deps().model.backend_of(rec.provider.as_deref()),
            model: rec.model.as_deref().or(type_model),
            ids,
            parent,
            links: [before, forward],
        });
        let exported = agentd_observe::telemetry::context_of(&span).unwrap_or(trace);
        (span, exported)
    }
}
