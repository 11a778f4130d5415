//! Checkpoints of a live agent (seed 001): taking one between two of its messages, and bringing
//! the agent back to one.

use super::AgentActor;
use super::activity::Timer;
use super::control::ItsItem;
use super::messages::{RestoreCheckpoint, TakeCheckpoint};
use actix::prelude::*;
use agentd_proto::{AgentRecord, AgentStatus, AgentdError, CheckpointReason, Event};

impl AgentActor {
    /// Saves a checkpoint of the agent as it is now, before any further message is handled.
    /// What is waiting to be written goes first: the checkpoint captures the stored thread.
    pub(super) fn checkpoint(
        &mut self,
        reason: CheckpointReason,
        trigger: &str,
        ctx: &mut Context<Self>,
    ) {
        let deps = self.system.deps.clone();
        // With the running step, if a turn runs.
        let rec = self.live_record();
        let trigger = trigger.to_string();
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
}

impl Handler<TakeCheckpoint> for AgentActor {
    // Atomic: the checkpoint is the agent's state between two of its messages.
    type Result = AtomicResponse<Self, Result<agentd_proto::Checkpoint, AgentdError>>;

    fn handle(&mut self, msg: TakeCheckpoint, _: &mut Self::Context) -> Self::Result {
        self.check_activity();
        let deps = self.system.deps.clone();
        // With the running step, if a turn runs.
        let rec = self.live_record();
        AtomicResponse::new(Box::pin(
            async move { crate::checkpoints::capture(&deps, &rec, msg.reason, &msg.trigger).await }
                .into_actor(self),
        ))
    }
}

impl Handler<RestoreCheckpoint> for AgentActor {
    // Atomic: nothing else touches the agent between dropping its work and re-queuing the
    // checkpoint's.
    type Result = AtomicResponse<Self, Result<AgentRecord, AgentdError>>;

    fn handle(
        &mut self,
        RestoreCheckpoint(cp): RestoreCheckpoint,
        ctx: &mut Self::Context,
    ) -> Self::Result {
        // What runs or waits now is dropped (marked done); the checkpoint's pending items
        // replace it.
        // A turn waiting for its service calls is dropped too (its calls cancelled): left
        // waiting, it would hold the restored items back for good.
        if self.abort_turn(ItsItem::Done, ctx).is_none() {
            self.end_tool_wait(ItsItem::Done, ctx);
        }
        self.drop_queue(ctx);
        self.end_hold(Timer::Cancel, ctx);
        self.thread = None;
        let plan = crate::checkpoints::plan(&cp, agentd_proto::ids::new_id());
        let store = self.deps().store.clone();
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
                let queued = match res {
                    Ok(queued) => queued,
                    Err(e) => {
                        act.check_activity();
                        return Err(e);
                    }
                };
                act.rec.phase = cp.phase;
                act.rec.current_step = cp.current_step.clone();
                act.rec.progress = cp.progress;
                act.rec.env = cp.environment.clone();
                act.rec.result = None;
                act.rec.last_error = None;
                act.rec.resume_at_ms = None;
                act.rec.attempts = 0;
                act.rec.current_task = None;
                if let Some(cli) = &mut act.rec.agent_cli {
                    cli.session_id = cp.cli_session_id.clone();
                }
                // A process-backend agent starts a new process, with the restored environment
                // and the restored conversation (an agent CLI: the checkpoint's session), on
                // its next turn.
                act.restart_backend();
                act.deps().model.conversation_replaced(&act.rec.id);
                act.deps().events.publish(&Event::Restored {
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
                act.check_activity();
                Ok(act.rec.clone())
            }),
        ))
    }
}
