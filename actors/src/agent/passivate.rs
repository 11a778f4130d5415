//! Passivating an agent whose task is over: a sub-agent that yielded (seed 002: the yield ends
//! its thread) has nothing left to do, so its actor stops instead of holding a live slot
//! (`limits.max_live_agents`) and memory until the process ends. Its record (`completed`, with
//! its result) and its thread stay in the store; whatever is sent to it later (a follow-up, a
//! control) activates it again, as any agent that is not live.
//!
//! The actor stops only between two of its messages, when nothing is left: no item queued or
//! running, everything it decided written (a batch that failed is written again first), and
//! only if it is still `completed` (a follow-up that arrived meanwhile keeps it live). What
//! reaches it while it stops is refused and routed again, to a fresh actor.

use super::AgentActor;
use super::activity::Activity;
use super::messages::PassivateIfDone;
use actix::prelude::*;
use agentd_proto::{AgentStatus, Control};

/// How long a yielded agent waits before it checks again whether its writes are done.
const RECHECK: std::time::Duration = std::time::Duration::from_millis(50);

impl Handler<PassivateIfDone> for AgentActor {
    type Result = ();

    fn handle(&mut self, _: PassivateIfDone, ctx: &mut Self::Context) {
        let done = self.rec.status == AgentStatus::Completed
            && matches!(self.activity, Activity::Idle)
            && self.queue.is_empty();
        if !done {
            // It has work again (or is stopping already): it stays.
            self.check_activity();
            return;
        }
        if !self.writes.is_settled() {
            // A batch waits to be written again: its retry comes first.
            ctx.notify_later(PassivateIfDone, RECHECK);
            return;
        }
        tracing::debug!(agent_id = %self.rec.id, "task over; passivating the agent");
        // A process-per-agent backend's process ends with the actor (it starts again, with the
        // whole thread, on re-activation).
        self.deps().model.control(&self.rec.id, Control::Terminate);
        self.stop();
        ctx.stop();
    }
}
