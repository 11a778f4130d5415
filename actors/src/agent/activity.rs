//! What an agent is doing, as one value: its [`Activity`], and the one place that moves it.
//!
//! The agent's *status* (`proto/src/status.rs`) is what it shows the world and persists; its
//! activity is what the actor holds in memory to act on it: the running turn, the item waiting
//! for a turn slot, the paused turn's item. Each variant owns the data that exists only in that
//! activity, so no field outlives the activity it belongs to, and `start.rs`'s `pump`
//! asks it what happens next. Adding a way to wait is adding a variant.
//!
//! The two are kept in step here: every change of activity is a method of this module
//! ([`AgentActor::run`], [`AgentActor::await_permit`], [`AgentActor::pause_mid_turn`],
//! [`AgentActor::wait_for_calls`], [`AgentActor::hold_for_retry`], the `take_…` methods that
//! leave an activity for `Idle`, [`AgentActor::stop`]) that sets the status it implies, and
//! [`Activity::shows`] is the table of which statuses each activity may show (the same table is
//! in docs/architecture.md). In debug builds (the tests) [`AgentActor::check_activity`] asserts
//! it at the end of every message handler and every continuation of the actor.
//!
//! ```text
//!                 ┌──────────── permit ─────────────┐
//!   Idle ── pump ─┤                                  ▼
//!    ▲            └─ (a scheduler) ─► AwaitingPermit  Running ── turn ends ──► Idle
//!    │                 │                             │  │  └─ store down / retry ─► HoldingForRetry ─ timer ─► Idle
//!    │                 └─ pause / cancel ─► Idle      │  └──── paused at a step ──► PausedMidTurn ── resume ──► Running
//!    └── dependencies settled ── WaitingDependencies │  └─ service calls wait ─► WaitingTool ─ all closed ─► Running
//!                                                     └── interrupt / cancel / terminate / restore ─► Idle
//!   any activity ── StopAgent, passivation ──► Stopping (the actor ends)
//! ```

use super::AgentActor;
use crate::scheduler::Acquire;
use crate::turn::{OpenCall, TurnInput, TurnShared, WaitingCall};
use actix::prelude::*;
use agentd_proto::{AgentStatus, AgentdError, Envelope, ErrorCode};
use std::collections::HashSet;
use std::sync::Arc;
use uuid::Uuid;

/// What the agent's actor is doing.
#[derive(Default)]
pub(super) enum Activity {
    /// Nothing runs; the next queued item may start a turn (if the status lets work start).
    #[default]
    Idle,
    /// The agent depends on agents (spawn `depends_on`) not met yet (failed ones it holds for
    /// included): its turns wait. Never empty (the last one met makes the agent `Idle`).
    #[allow(clippy::box_collection)] // one pointer in the actor, not a 48-byte set
    WaitingDependencies(Box<HashSet<String>>),
    /// The next item waits for a turn slot from the scheduler.
    AwaitingPermit(Box<PendingStart>),
    /// A turn runs.
    Running(Box<RunningTurn>),
    /// A pause stopped the turn at a step boundary; resume continues it. `input` is the inbox
    /// item the turn handles (marked done when the continued turn ends).
    PausedMidTurn { input: Option<Box<Envelope>> },
    /// The turn's last step made calls of service tools that wait for their answers: the
    /// agent shows `waiting_tool`, holds no turn slot, and queues what arrives meanwhile.
    WaitingTool(Box<ToolWait>),
    /// The queue is held until a retry, scheduled by this timer, fires: the turn met an
    /// unreachable store or failed with attempts left. Its item waits in the queue's retry slot.
    HoldingForRetry(SpawnHandle),
    /// The actor ends as soon as its answer to `StopAgent` is written; it
    /// takes no more deliveries.
    Stopping,
}

/// Whether a turn holds a slot of the scheduler.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Slot {
    /// The scheduler granted it one, given back when the turn ends.
    Held,
    /// It holds none: turn slots are not limited, or the turn goes on from a pause or a wait
    /// for service calls (which never queue for a slot again).
    NotHeld,
}

/// What a turn starts with.
pub(super) struct TurnStart {
    /// The id the turn's outputs derive theirs from (its inbox item's, or a fresh one).
    pub(super) cause: Uuid,
    /// The inbox item the turn handles, if there is one.
    pub(super) env: Option<Envelope>,
    pub(super) input: TurnInput,
    /// Set once the actor's flush wrote the input entry (the turn writes it if not); `None`
    /// when there is no entry to write.
    pub(super) input_written: Option<Arc<crate::turn::InputWritten>>,
    pub(super) slot: Slot,
}

/// An item about to start a turn, once a slot is granted.
pub(super) struct PendingStart {
    pub(super) env: Envelope,
    pub(super) input: TurnInput,
}

/// A turn that waits for the answers of service calls.
pub(super) struct ToolWait {
    /// The turn's cause: it runs again under it, so its step replays and finds the answers.
    pub(super) cause: Uuid,
    /// The inbox item the turn handles (marked done when the continued turn ends).
    pub(super) input: Option<Envelope>,
    /// The service calls still open. Never empty while the agent waits: the last one closed
    /// continues the turn.
    pub(super) open: Vec<WaitingCall>,
    /// Every call of the step without a result yet, in order: what an interruption closes.
    pub(super) unanswered: Vec<OpenCall>,
    /// The timer of the earliest deadline, if a call has one.
    pub(super) deadline: Option<SpawnHandle>,
}

/// The turn in progress.
pub(super) struct RunningTurn {
    /// The turn's future on the actor's context (cancelled to abort it).
    pub(super) handle: SpawnHandle,
    /// The id the turn's outputs derive theirs from (its inbox item's, or a fresh one).
    pub(super) cause: Uuid,
    /// The inbox envelope this turn handles: marked done in the store when the turn ends, or
    /// queued again when it must run again.
    pub(super) input: Option<Envelope>,
    /// Shared with the turn: a stop asked for at its next step boundary (a pause), and the tool
    /// calls it has open, which ending the turn early closes.
    pub(super) shared: Arc<TurnShared>,
    /// Why the stop was asked for, when not by a control (a budget).
    pub(super) pause_reason: Option<Box<str>>,
    /// When it started (the `agentd_turn_seconds` histogram).
    pub(super) started: std::time::Instant,
    /// Whether it holds a turn slot of the scheduler (given back when it ends).
    pub(super) slot: Slot,
    /// The agent's environment changed during the turn: a process-per-agent backend's process
    /// is restarted once it ends.
    pub(super) restart_backend_after: bool,
    /// What the turn does now (the agent's `current_step` while it runs). Kept here, not in
    /// the record: a step is neither persisted nor a change of the record the turn shares.
    pub(super) step: crate::turn::Step,
}

impl Activity {
    /// What a new actor does: waits for the agents of `unmet` (its `depends_on` not met yet),
    /// or nothing.
    pub(super) fn at_start(unmet: HashSet<String>) -> Self {
        if unmet.is_empty() {
            Activity::Idle
        } else {
            Activity::WaitingDependencies(Box::new(unmet))
        }
    }

    /// The running turn, if one runs.
    pub(super) fn running(&self) -> Option<&RunningTurn> {
        match self {
            Activity::Running(turn) => Some(turn),
            _ => None,
        }
    }

    /// The running turn, if one runs.
    pub(super) fn running_mut(&mut self) -> Option<&mut RunningTurn> {
        match self {
            Activity::Running(turn) => Some(turn),
            _ => None,
        }
    }

    /// Whether envelope `id` is the item this activity runs or holds.
    pub(super) fn holds(&self, id: Uuid) -> bool {
        self.item().is_some_and(|e| e.id == id)
    }

    /// The item this activity runs or holds, if any.
    pub(super) fn item(&self) -> Option<&Envelope> {
        match self {
            Activity::AwaitingPermit(p) => Some(&p.env),
            Activity::Running(t) => t.input.as_ref(),
            Activity::PausedMidTurn { input } => input.as_deref(),
            Activity::WaitingTool(w) => w.input.as_ref(),
            _ => None,
        }
    }

    /// Whether the agent asked the scheduler for a slot or holds one (to be given back).
    pub(super) fn involves_scheduler(&self) -> bool {
        match self {
            Activity::AwaitingPermit(_) => true,
            Activity::Running(t) => t.slot == Slot::Held,
            _ => false,
        }
    }

    /// The variant's name (for the assertion's message).
    pub(super) fn name(&self) -> &'static str {
        match self {
            Activity::Idle => "Idle",
            Activity::WaitingDependencies(_) => "WaitingDependencies",
            Activity::AwaitingPermit(_) => "AwaitingPermit",
            Activity::Running(_) => "Running",
            Activity::PausedMidTurn { .. } => "PausedMidTurn",
            Activity::WaitingTool(_) => "WaitingTool",
            Activity::HoldingForRetry(_) => "HoldingForRetry",
            Activity::Stopping => "Stopping",
        }
    }

    /// Whether an agent doing this may show `status` between two of its messages: the table
    /// that relates the two state machines (docs/architecture.md has it too).
    pub(super) fn shows(&self, status: AgentStatus) -> bool {
        use AgentStatus::*;
        match self {
            // What the last turn, control or marker left; a status of a turn under way only
            // right after an activation (its turn runs again from its item at the next pump).
            Activity::Idle => !matches!(status, Queued | Running | Closed),
            Activity::WaitingDependencies(_) => matches!(status, WaitingDependency | Paused),
            Activity::AwaitingPermit(_) => status == Queued,
            // A pause asked of the turn shows when it stops, at a step boundary.
            Activity::Running(_) => status == Running,
            Activity::PausedMidTurn { .. } => status == Paused,
            Activity::WaitingTool(_) => matches!(status, WaitingTool | WaitingReview | Paused),
            // `running` after an unreachable store, `queued` before a retry of a failed turn;
            // a cancel or terminate drops the held item, and the timer then finds nothing.
            Activity::HoldingForRetry(_) => {
                matches!(status, Running | Queued | Paused | Cancelled | Terminated)
            }
            // The actor ends: its final status is whatever the stop leaves.
            Activity::Stopping => true,
        }
    }

    /// Whether the queue may start a turn: nothing runs or waits here, and the status lets
    /// work start or says a turn is under way that is not here: set just before the pump (a
    /// provided value, a restore, the end of a rate limit), or left by a process that stopped
    /// while its turn waited for service calls. That turn then runs again from its item.
    pub(super) fn may_start_turn(&self, status: AgentStatus) -> bool {
        matches!(self, Activity::Idle | Activity::WaitingDependencies(_))
            && (status.accepts_turns() || shows_a_turn_under_way(status))
    }

    /// The status an agent doing this shows when nothing runs and nothing is to be waited for
    /// by a marker: `waiting_dependency` while its dependencies are unmet, `queued` while a
    /// retry is held, else `idle`.
    fn at_rest(&self) -> AgentStatus {
        match self {
            Activity::WaitingDependencies(_) => AgentStatus::WaitingDependency,
            Activity::HoldingForRetry(_) => AgentStatus::Queued,
            _ => AgentStatus::Idle,
        }
    }
}

/// Whether `status` says a turn is under way: shown by the activities of a turn (`Running`,
/// `WaitingTool`; `HoldingForRetry` after an unreachable store), and by `Idle` only right after
/// an activation.
fn shows_a_turn_under_way(status: AgentStatus) -> bool {
    matches!(
        status,
        AgentStatus::Running | AgentStatus::WaitingTool | AgentStatus::WaitingReview
    )
}

/// The transitions: each moves the activity and sets the status it implies. Nothing outside
/// this module assigns the actor's activity.
impl AgentActor {
    /// The next item waits for a turn slot: the scheduler is asked for one, and the agent shows
    /// `queued` meanwhile.
    pub(super) fn await_permit(
        &mut self,
        env: Envelope,
        input: TurnInput,
        ctx: &mut Context<Self>,
    ) {
        let Some(scheduler) = self.system.scheduler.clone() else {
            return;
        };
        let _ = self.set_status(
            AgentStatus::Queued,
            Some("waiting for a turn slot".into()),
            ctx,
        );
        scheduler.do_send(Acquire {
            agent_id: self.rec.id.clone(),
            priority: self.rec.priority,
            parent: self.rec.parent_id.as_deref().map(String::from),
            provider: self
                .rec
                .provider
                .clone()
                .unwrap_or_else(|| "default".into()),
            queued_at_ms: env.sent_at,
            addr: ctx.address().recipient(),
        });
        self.waits("queued", env.trace);
        self.activity = Activity::AwaitingPermit(Box::new(PendingStart { env, input }));
    }

    /// Refuses, changing nothing, if the agent's status cannot become `running`.
    pub(super) fn check_can_run(&self) -> Result<(), AgentdError> {
        let status = self.rec.status;
        if status == AgentStatus::Running || status.can_become(AgentStatus::Running) {
            return Ok(());
        }
        Err(AgentdError::new(
            ErrorCode::InvalidTransition,
            format!("agent `{}` cannot go from {status} to running", self.rec.id),
        ))
    }

    /// Starts the turn `start` describes: the agent shows `running` (with `reason`). A status
    /// that cannot become `running` refuses it, and nothing changes.
    pub(super) fn run(
        &mut self,
        start: TurnStart,
        reason: Option<String>,
        ctx: &mut Context<Self>,
    ) -> Result<(), AgentdError> {
        self.set_status(AgentStatus::Running, reason, ctx)?;
        self.wait_over();
        let turn = self.spawn_turn(start, ctx);
        self.activity = Activity::Running(Box::new(turn));
        Ok(())
    }

    /// A pause stopped the turn at a step boundary: it continues on resume, handling `input`.
    pub(super) fn pause_mid_turn(
        &mut self,
        input: Option<Envelope>,
        reason: String,
        ctx: &mut Context<Self>,
    ) {
        self.activity = Activity::PausedMidTurn {
            input: input.map(Box::new),
        };
        let _ = self.set_status(AgentStatus::Paused, Some(reason), ctx);
    }

    /// The turn waits for the service calls of `wait`: `waiting_review` while one waits for
    /// approval, else `waiting_tool`.
    pub(super) fn wait_for_calls(&mut self, wait: ToolWait, ctx: &mut Context<Self>) {
        let tools: Vec<&str> = wait.open.iter().map(|c| &*c.tool).collect();
        let (status, reason) = if wait.open.iter().any(|c| c.review) {
            (
                AgentStatus::WaitingReview,
                format!("waiting for approval of {}", tools.join(", ")),
            )
        } else {
            (
                AgentStatus::WaitingTool,
                format!("waiting for {}", tools.join(", ")),
            )
        };
        self.activity = Activity::WaitingTool(Box::new(wait));
        self.waits(
            if status == AgentStatus::WaitingReview {
                "waiting_review"
            } else {
                "waiting_tool"
            },
            self.rec.trace,
        );
        if let Err(e) = self.set_status(status, Some(reason), ctx) {
            tracing::warn!(agent_id = %self.rec.id, error = %e, "cannot wait for tools");
        }
    }

    /// The queue is held until `timer` fires: the turn met an unreachable store (the agent
    /// still shows `running`: its turn runs again), or, with `reason`, it failed with attempts
    /// left (`queued`, the retry in its reason).
    pub(super) fn hold_for_retry(
        &mut self,
        timer: SpawnHandle,
        reason: Option<String>,
        ctx: &mut Context<Self>,
    ) {
        self.activity = Activity::HoldingForRetry(timer);
        if let Some(reason) = reason {
            let _ = self.set_status(AgentStatus::Queued, Some(reason), ctx);
        }
    }

    /// Ends a hold for a retry (its timer fired, or is cancelled here): the agent is `Idle`
    /// again. Answers whether it held one.
    pub(super) fn end_hold(&mut self, cancel: Timer, ctx: &mut Context<Self>) -> bool {
        let Activity::HoldingForRetry(timer) = self.activity else {
            return false;
        };
        if cancel == Timer::Cancel {
            ctx.cancel_future(timer);
        }
        self.activity = Activity::Idle;
        true
    }

    /// Leaves `Running` for `Idle`: the turn that ran (the caller decides the status its end
    /// implies).
    pub(super) fn take_running(&mut self) -> Option<Box<RunningTurn>> {
        if !matches!(self.activity, Activity::Running(_)) {
            return None;
        }
        match std::mem::take(&mut self.activity) {
            Activity::Running(turn) => Some(turn),
            _ => None,
        }
    }

    /// Leaves `WaitingTool` for `Idle`: the wait (the caller runs the turn on, or ends it).
    pub(super) fn take_tool_wait(&mut self) -> Option<Box<ToolWait>> {
        if !matches!(self.activity, Activity::WaitingTool(_)) {
            return None;
        }
        self.wait_over();
        match std::mem::take(&mut self.activity) {
            Activity::WaitingTool(wait) => Some(wait),
            _ => None,
        }
    }

    /// Leaves `PausedMidTurn` for `Idle`: the paused turn's item (`Some(None)`: it had none).
    pub(super) fn take_paused_turn(&mut self) -> Option<Option<Envelope>> {
        if !matches!(self.activity, Activity::PausedMidTurn { .. }) {
            return None;
        }
        match std::mem::take(&mut self.activity) {
            Activity::PausedMidTurn { input } => Some(input.map(|e| *e)),
            _ => None,
        }
    }

    /// Leaves `AwaitingPermit` for `Idle`: the item that waited for a slot (the caller gives
    /// the request back or acts on the grant).
    pub(super) fn take_pending_start(&mut self) -> Option<Box<PendingStart>> {
        if !matches!(self.activity, Activity::AwaitingPermit(_)) {
            return None;
        }
        self.wait_over();
        match std::mem::take(&mut self.activity) {
            Activity::AwaitingPermit(pending) => Some(pending),
            _ => None,
        }
    }

    /// A pause while the next item waits for a turn slot: the request is withdrawn and the
    /// item goes back first in the queue (resume asks again). Answers whether it waited.
    pub(super) fn withdraw_permit_request(&mut self) -> bool {
        if !matches!(self.activity, Activity::AwaitingPermit(_)) {
            return false;
        }
        self.release_permit();
        if let Some(pending) = self.take_pending_start() {
            self.queue.retry_first(pending.env);
        }
        true
    }

    /// Leaves `WaitingDependencies` for `Idle`: met, failed, or ended by a cancel or terminate.
    /// Answers whether the agent waited.
    pub(super) fn stop_waiting_for_dependencies(&mut self) -> bool {
        if !matches!(self.activity, Activity::WaitingDependencies(_)) {
            return false;
        }
        self.activity = Activity::Idle;
        self.rec.dependencies_settled = true;
        true
    }

    /// The actor ends: it takes no more deliveries.
    pub(super) fn stop(&mut self) {
        self.activity = Activity::Stopping;
    }

    /// Nothing runs: the agent shows what its activity shows at rest
    /// ([`Activity::at_rest`]), with `reason`.
    pub(super) fn rest(
        &mut self,
        reason: Option<String>,
        ctx: &mut Context<Self>,
    ) -> Result<(), AgentdError> {
        let (status, reason) = match &self.activity {
            Activity::WaitingDependencies(unmet) => (
                AgentStatus::WaitingDependency,
                Some(crate::depends_on::waiting_reason(unmet)),
            ),
            other => (other.at_rest(), reason),
        };
        self.set_status(status, reason, ctx)
    }

    /// Asserts (in debug builds: the tests) that the status is one the activity may show
    /// ([`Activity::shows`]). Called at the end of every message handler and continuation.
    pub(super) fn check_activity(&self) {
        debug_assert!(
            self.activity.shows(self.rec.status),
            "agent `{}`: activity {} does not show status {} ({:?})",
            self.rec.id,
            self.activity.name(),
            self.rec.status,
            self.rec.status_reason,
        );
    }
}

/// Whether ending a hold cancels its timer (it has not fired).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Timer {
    /// The timer fired: nothing to cancel.
    Fired,
    /// The hold ends early: its timer is cancelled.
    Cancel,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every status but `closed` is shown by some activity other than `Stopping` (`closed`
    /// is set only as an actor stops).
    #[test]
    fn every_live_status_belongs_to_an_activity() {
        let timerless = [
            Activity::Idle,
            Activity::WaitingDependencies(Box::default()),
            Activity::PausedMidTurn { input: None },
        ];
        for status in AgentStatus::ALL {
            let shown = timerless.iter().any(|a| a.shows(status))
                || matches!(
                    status,
                    AgentStatus::Queued | AgentStatus::Running | AgentStatus::Closed
                );
            assert!(shown, "{status}");
        }
    }

    #[test]
    fn a_turn_under_way_that_is_not_here_may_start_again() {
        for status in [
            AgentStatus::Running,
            AgentStatus::WaitingTool,
            AgentStatus::WaitingReview,
        ] {
            assert!(Activity::Idle.may_start_turn(status), "{status}");
        }
        for status in [
            AgentStatus::Paused,
            AgentStatus::WaitingDependency,
            AgentStatus::WaitingQuestion,
            AgentStatus::WaitingRateLimit,
            AgentStatus::Closed,
        ] {
            assert!(!Activity::Idle.may_start_turn(status), "{status}");
        }
        assert!(!Activity::PausedMidTurn { input: None }.may_start_turn(AgentStatus::Idle));
    }
}
