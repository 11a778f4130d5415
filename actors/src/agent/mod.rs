//! `AgentActor`: one agent = one session = one thread. It owns its status, its inbox queue and
//! its running turn. Items are handled one at a time in arrival order; an `interrupt` message
//! aborts the running turn and goes first; `urgent` messages (results of sub-agents) go before
//! what is queued without aborting anything. A turn's error or panic marks this agent `failed`
//! and never touches another agent.
//!
//! | module | what it holds |
//! |---|---|
//! | [`messages`] | the messages the actor handles |
//! | [`activity`] | [`Activity`]: what the actor is doing, each variant owning its data; the transitions, which set the status each implies |
//! | [`queue`] | [`InboxQueue`]: the queued items, in the order they run (plain code) |
//! | [`write_behind`] | [`WriteBehind`]: own writes waiting for the next flush (plain code) |
//! | [`persist`] | the actor's side of flushing: batches, retries, the record |
//! | [`status`] | status transitions, persisted and published, with their automatic checkpoints |
//! | [`delivery`] | taking envelopes: the durable push, duplicates, controls |
//! | [`held`] | items held in their partition stream entries instead of the durable inbox, and their adoption into it |
//! | [`start`] | deciding what runs next (`pump`) and starting turns |
//! | [`permit`] | turn slots of the scheduler: the grant of one, giving one back |
//! | [`progress`] | what a running turn reports: its step, its usage |
//! | [`outcome`] | a turn's end, one function per outcome |
//! | [`relay`] | forwards a parent passes on without a turn (`async_forward = "relay"`) |
//! | [`dependencies`] | waiting for `depends_on`; the watches of dependents in this agent's inbox |
//! | [`control`] | pause, resume, cancel, terminate, stop; aborting a turn |
//! | [`checkpoint`] | taking checkpoints and restoring one |
//! | [`budget`] | usage accounting and the agent's and its tree's budgets |
//! | [`tool_wait`] | waiting for the answers of service calls (`waiting_tool`), then going on |
//! | [`passivate`] | stopping the actor of an agent whose task is over (it yielded) |
//!
//! The actor's invariants:
//! - An inbox item is in the agent's durable inbox before the actor handles its next message
//!   (so a transport acknowledges a delivery only once it is safe), or held in its partition
//!   stream entry, which stays pending until then ([`held`]); it is marked done (its entry
//!   acknowledged) in the same store batch as the turn's end.
//! - At most one turn runs; what it handles is the activity's, nothing outside the activity
//!   points at it.
//! - The status is one the activity may show ([`Activity::shows`]) between two messages.
//! - The agent's own writes go through its [`WriteBehind`] in order and are never dropped.

mod activity;
mod budget;
mod checkpoint;
mod control;
mod delivery;
mod dependencies;
mod held;
pub(crate) mod messages;
mod outcome;
mod passivate;
mod permit;
mod persist;
mod progress;
mod queue;
mod relay;
mod start;
mod status;
mod tool_wait;
mod write_behind;

use crate::deps::Deps;
use crate::supervisor::SystemHandle;
use activity::Activity;
use actix::prelude::*;
use agentd_proto::AgentRecord;
use messages::{Runtime, RuntimeState, Snapshot};
use queue::InboxQueue;
use std::collections::HashSet;
use std::sync::Arc;
use write_behind::WriteBehind;

/// The actor of one agent.
///
/// Every live agent is one spawned actor: what it rarely holds (a running turn, a retried item,
/// an item waiting for a slot, dependencies) is boxed inside its [`Activity`] or queue so that a
/// process with 100,000 idle agents stays small (see the size test below).
pub struct AgentActor {
    rec: SharedRecord,
    /// Shared with every actor of the process.
    system: SystemHandle,
    activity: Activity,
    queue: InboxQueue,
    writes: WriteBehind,
    /// Delay before retrying a turn that met an unreachable store (0 after a turn that did not).
    store_retry_ms: u16,
    /// The agent's thread as stored, once read: handed to each turn (which then needs no store
    /// read per step) and given back when the turn ends; dropped whenever it may be stale (an
    /// aborted turn, a restore).
    thread: Option<Arc<crate::ports::ThreadEntries>>,
    /// What every turn of this agent shows its model, built on its first turn (boxed: an agent
    /// that never ran a turn does not pay for it).
    setup: Option<Box<start::TurnSetup>>,
    /// The span of the wait it is in (a turn slot, tools, a review, a rate limit), with
    /// telemetry on; it ends when the turn starts or the wait is left. `None` with telemetry
    /// off.
    wait_span: Option<Box<tracing::Span>>,
    /// The items it holds in their stream entries, if any.
    held: Option<Box<held::Held>>,
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
    /// An actor for `rec` (started by the supervisor) that waits for the agents of `unmet`
    /// (its `depends_on` not met yet) before its turns run.
    pub(crate) fn new(
        rec: impl Into<Arc<AgentRecord>>,
        system: SystemHandle,
        unmet: HashSet<String>,
    ) -> Self {
        AgentActor {
            rec: SharedRecord(rec.into()),
            system,
            activity: Activity::at_start(unmet),
            queue: InboxQueue::default(),
            writes: WriteBehind::default(),
            store_retry_ms: 0,
            thread: None,
            setup: None,
            wait_span: None,
            held: None,
        }
    }

    /// Notes that the agent waits (`what`: `queued`, `waiting_tool`, …) for the work of
    /// `trace`: a `wait {what}` span with telemetry on, nothing otherwise. A wait this one
    /// takes over from ends first, so the two never overlap.
    fn waits(&mut self, what: &'static str, trace: Option<agentd_proto::TraceContext>) {
        if agentd_observe::telemetry::enabled() {
            self.wait_over();
            let span = agentd_observe::telemetry::wait(what, &self.rec.id, trace.as_ref());
            self.wait_span = Some(Box::new(span));
        }
    }

    /// The wait [`Self::waits`] noted is over: its span ends.
    fn wait_over(&mut self) {
        if self.wait_span.is_some() {
            self.wait_span = None;
        }
    }

    /// The agent's id, shared (for store writes: no allocation per write).
    fn shared_id(&mut self) -> Arc<str> {
        self.turn_setup().names.agent_id.clone()
    }

    fn deps(&self) -> &Deps {
        &self.system.deps
    }
}

impl Actor for AgentActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        ctx.set_mailbox_capacity(1024);
        self.show_dependency_wait(ctx);
        if self.rec.status == agentd_proto::AgentStatus::WaitingRateLimit {
            // Re-activated (restart, failover) while rate-limited: it still resumes by itself.
            let now = self.deps().clock.now_ms();
            let ms = self.rec.resume_at_ms.unwrap_or(now).saturating_sub(now);
            self.schedule_rate_limit_resume(ms, ctx);
        }
        self.check_activity();
    }

    fn stopped(&mut self, _ctx: &mut Self::Context) {
        self.release_permit();
        self.system
            .supervisor
            .do_send(crate::supervisor::messages::AgentStopped(
                self.rec.id.clone(),
            ));
    }
}

impl Handler<Snapshot> for AgentActor {
    type Result = MessageResult<Snapshot>;

    fn handle(&mut self, _: Snapshot, _: &mut Self::Context) -> Self::Result {
        self.check_activity();
        MessageResult(self.live_record())
    }
}

impl AgentActor {
    /// The record as the agent is now: while a turn runs, its `current_step` is what the turn
    /// does (a copy; the record itself keeps the last milestone, and the store never sees the
    /// running step), else the record itself, shared.
    pub(super) fn live_record(&self) -> Arc<AgentRecord> {
        let Some(turn) = self.activity.running() else {
            return self.rec.share();
        };
        let mut rec = AgentRecord::clone(&self.rec);
        rec.current_step = Some(turn.step.to_string());
        Arc::new(rec)
    }
}

impl Handler<RuntimeState> for AgentActor {
    type Result = MessageResult<RuntimeState>;

    fn handle(&mut self, _: RuntimeState, _: &mut Self::Context) -> Self::Result {
        self.check_activity();
        MessageResult(Runtime {
            inbox: self.queue.len() + self.queue.parked_len(),
            turn_running: self.activity.running().is_some(),
        })
    }
}

#[cfg(test)]
mod size {
    /// Every live agent is one spawned actor, so its size is paid 100,000 times in a large
    /// process (the `rss_bytes_per_idle_agent` benchmark): an actor above 200 bytes moves its
    /// context into the allocator's next size class.
    #[test]
    fn an_idle_agent_actor_stays_small() {
        let size = std::mem::size_of::<super::AgentActor>();
        assert!(size <= 200, "AgentActor is {size} bytes");
    }
}
