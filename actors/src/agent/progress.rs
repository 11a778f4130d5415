//! What a running turn reports to its agent ([`TurnProgress`]): what it does now (the agent's
//! `current_step` while it runs) and the usage of each step but its last (counted at once, so a
//! budget can stop the turn at its next step boundary: [`super::budget`]).

use super::AgentActor;
use crate::turn::TurnProgress;
use actix::prelude::*;

impl Handler<TurnProgress> for AgentActor {
    type Result = ();

    fn handle(&mut self, progress: TurnProgress, ctx: &mut Self::Context) {
        match progress {
            TurnProgress::Usage { usage, step } => self.usage_reported(usage, step, ctx),
            TurnProgress::StartNeeded => self.release_deferred_flush(ctx),
            TurnProgress::Doing { cause, doing } => {
                if let Some(turn) = self.activity.running_mut()
                    && turn.cause == cause
                {
                    turn.step = doing;
                }
            }
        }
        self.check_activity();
    }
}
