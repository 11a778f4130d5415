//! What an agent is doing, as one value: the [`Phase`].
//!
//! The agent's *status* (`proto/src/status.rs`) is what it shows the world and persists; its
//! phase is what the actor holds in memory to act on it: the running turn, the item waiting for a
//! turn slot, the paused turn's item. Each variant owns the data that exists only in that phase,
//! so no field outlives the phase it belongs to, and [`super::start`]'s `pump` matches on it to
//! decide what happens next. Adding a way to wait is adding a variant.
//!
//! ```text
//!                 ┌──────────── permit ─────────────┐
//!   Idle ── pump ─┤                                  ▼
//!    ▲            └─ (a scheduler) ─► AwaitingPermit  Running ── turn ends ──► Idle
//!    │                                               │  │  └─ store down / retry ─► HoldingForRetry ─ timer ─► Idle
//!    │                                               │  └──── paused at a step ──► PausedMidTurn ── resume ──► Running
//!    └── dependencies settled ── WaitingDependencies │  └─ service calls wait ─► WaitingTool ─ all closed ─► Running
//!                                                     └── interrupt / cancel / terminate / restore ─► Idle
//!   any phase ── StopAgent ──► Stopping (the actor ends)
//! ```

use crate::turn::{OpenCall, TurnInput, TurnShared, WaitingCall};
use actix::SpawnHandle;
use agentd_proto::Envelope;
use std::collections::HashSet;
use std::sync::Arc;
use uuid::Uuid;

/// What the agent's actor is doing.
#[derive(Default)]
pub(super) enum Phase {
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
    /// The actor ends as soon as its answer to [`super::messages::StopAgent`] is written; it
    /// takes no more deliveries.
    Stopping,
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
    /// It holds a turn slot of the scheduler (given back when it ends).
    pub(super) holds_permit: bool,
    /// The agent's environment changed during the turn: a process-per-agent backend's process
    /// is restarted once it ends.
    pub(super) restart_backend_after: bool,
    /// What the turn does now (the agent's `current_step` while it runs). Kept here, not in
    /// the record: a step is neither persisted nor a change of the record the turn shares.
    pub(super) step: crate::turn::Step,
}

impl Phase {
    /// The running turn, if one runs.
    pub(super) fn running(&self) -> Option<&RunningTurn> {
        match self {
            Phase::Running(turn) => Some(turn),
            _ => None,
        }
    }

    /// The running turn, if one runs.
    pub(super) fn running_mut(&mut self) -> Option<&mut RunningTurn> {
        match self {
            Phase::Running(turn) => Some(turn),
            _ => None,
        }
    }

    /// Whether envelope `id` is the item this phase runs or holds.
    pub(super) fn holds(&self, id: Uuid) -> bool {
        match self {
            Phase::AwaitingPermit(p) => p.env.id == id,
            Phase::Running(t) => t.input.as_ref().is_some_and(|e| e.id == id),
            Phase::PausedMidTurn { input } => input.as_ref().is_some_and(|e| e.id == id),
            Phase::WaitingTool(w) => w.input.as_ref().is_some_and(|e| e.id == id),
            _ => false,
        }
    }

    /// Whether the agent asked the scheduler for a slot or holds one (to be given back).
    pub(super) fn involves_scheduler(&self) -> bool {
        match self {
            Phase::AwaitingPermit(_) => true,
            Phase::Running(t) => t.holds_permit,
            _ => false,
        }
    }
}
