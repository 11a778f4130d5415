//! Turn slots of the scheduler (`limits.max_running_turns`): the grant of one ([`Permit`]) to
//! the item waiting for it ([`super::activity::Activity::AwaitingPermit`]), and giving one back.

use super::AgentActor;
use super::activity::{PendingStart, Slot};
use super::start::StartWrites;
use crate::scheduler::{Permit, Release};
use actix::prelude::*;

impl AgentActor {
    /// Gives the turn slot back, or withdraws a request for one.
    pub(super) fn release_permit(&self) {
        if let Some(scheduler) = &self.system.scheduler
            && self.activity.involves_scheduler()
        {
            scheduler.do_send(Release(self.rec.id.clone()));
        }
    }
}

impl Handler<Permit> for AgentActor {
    type Result = ();

    fn handle(&mut self, _: Permit, ctx: &mut Self::Context) {
        match self.take_pending_start() {
            Some(pending) => {
                let PendingStart { env, input } = *pending;
                self.begin(env, input, StartWrites::Fresh, Slot::Held, ctx);
            }
            None => {
                // Nothing waits for it any more: the slot goes back.
                if let Some(scheduler) = &self.system.scheduler {
                    scheduler.do_send(Release(self.rec.id.clone()));
                }
            }
        }
        self.check_activity();
    }
}
