//! The actor's side of its [`WriteBehind`](super::write_behind::WriteBehind): when a flush runs,
//! how its batch is written, and what happens when it cannot be.
//!
//! A flush is an actix `wait` future: it runs before the actor handles its next message. actix
//! runs queued `wait` futures last-in first-out, so a flush queued once collects, when it
//! starts, everything written up to that moment, in the order it was queued.

use super::AgentActor;
use super::write_behind::Batch;
use crate::messages::{ChildOutput, OutputPort};
use crate::ports::{StoreError, StoreErrorKind, StoreWrite};
use actix::prelude::*;
use agentd_proto::Envelope;
use std::sync::Arc;
use uuid::Uuid;

impl AgentActor {
    /// Writes the record before any further message is handled (with the other writes
    /// pending, in one batch).
    pub(super) fn persist(&mut self, ctx: &mut Context<Self>) {
        self.rec.updated_at_ms = self.deps().clock.now_ms();
        if self.writes.record_changed() {
            self.queue_flush(ctx);
        }
    }

    /// Queues `write` for the next flush, before any further message is handled.
    pub(super) fn write_later(&mut self, write: StoreWrite, ctx: &mut Context<Self>) {
        if self.writes.write(write) {
            self.queue_flush(ctx);
        }
    }

    /// Asks for a flush of what is waiting (unless one is queued already or waits for a push).
    pub(super) fn schedule_flush(&mut self, ctx: &mut Context<Self>) {
        if self.writes.request_flush() {
            self.queue_flush(ctx);
        }
    }

    /// Queues the flush that was deferred (see [`super::write_behind`]), if one was.
    pub(super) fn release_deferred_flush(&mut self, ctx: &mut Context<Self>) {
        if self.writes.release_deferred() {
            self.queue_flush(ctx);
        }
    }

    /// Queues the flush the buffer asked for; it takes its batch when it starts.
    fn queue_flush(&mut self, ctx: &mut Context<Self>) {
        let flush = ActorFutureExt::then(actix::fut::ready(()), |_, act: &mut Self, _| {
            act.writes.flush_starting();
            act.flush_now()
        });
        ctx.wait(flush);
    }

    /// Marks an inbox envelope handled (with the next flush): done in the durable inbox, or,
    /// for an item the agent holds in its stream entry, that entry acknowledged.
    pub(super) fn done(&mut self, input: Option<Uuid>, ctx: &mut Context<Self>) {
        let Some(env_id) = input else { return };
        let agent_id = self.shared_id();
        let write = match self.held_done(env_id) {
            Some(entry) => StoreWrite::Acknowledge { agent_id, entry },
            None => StoreWrite::InboxDone { agent_id, env_id },
        };
        self.write_later(write, ctx);
    }

    /// Takes everything waiting to be written as one batch; the future writes it, then sends
    /// the outputs that waited for it.
    pub(super) fn flush_now(&mut self) -> impl ActorFuture<Self, Output = ()> + use<> {
        let store = self.deps().store.clone();
        let rec = &self.rec;
        let mut batch = self.writes.take_batch(|| rec.share());
        crate::messages::outputs_into_batch(
            &self.system.deps,
            &mut batch.writes,
            &mut batch.outputs,
        );
        let me = self.rec.share();
        async move {
            let res = if batch.writes.is_empty() {
                Ok(())
            } else {
                store.write_own_batch(&me.id, &batch.writes).await
            };
            (res, batch)
        }
        .into_actor(self)
        .map(move |(res, batch), act, ctx| match res {
            Ok(()) => {
                act.writes.batch_written(batch.input_written);
                for out in batch.outputs {
                    act.system.send_output(out);
                }
            }
            Err(e) => act.flush_failed(e, batch, ctx),
        })
    }

    /// A flush's batch could not be written: it is written again after a capped backoff (or
    /// with the next flush, if sooner). A batch that cannot be encoded would fail the same way
    /// forever: it is reported and given up, and the outputs that were to leave with it leave
    /// on their own.
    fn flush_failed(&mut self, e: StoreError, batch: Batch, ctx: &mut Context<Self>) {
        if e.kind() == StoreErrorKind::Corrupt {
            tracing::error!(agent_id = %self.rec.id, error = %e, writes = batch.writes.len(), "the agent's state cannot be encoded; not written");
            self.send_outputs_alone(batch.writes, batch.outputs);
            return;
        }
        let retry_in = self.writes.batch_failed(batch);
        tracing::error!(agent_id = %self.rec.id, error = %e, retry_ms = retry_in.as_millis(), "writing the agent's state failed; writing it again");
        ctx.run_later(retry_in, |act, ctx| act.schedule_flush(ctx));
    }

    /// Sends the outputs of a batch that was given up: those for the router at once, the
    /// forwards it carried to their parents' partitions.
    fn send_outputs_alone(&self, writes: Vec<StoreWrite>, outputs: Vec<ChildOutput>) {
        for out in outputs {
            self.system.send_output(out);
        }
        let Some(transport) = self.deps().transport.clone() else {
            return;
        };
        let forwards: Vec<Arc<Envelope>> = writes
            .into_iter()
            .filter_map(|w| match w {
                StoreWrite::Forward { env, .. } => Some(env),
                _ => None,
            })
            .collect();
        if forwards.is_empty() {
            return;
        }
        actix_rt::spawn(async move {
            for env in forwards {
                if let Err(e) = transport.forward(&env).await {
                    tracing::error!(message_id = %env.id, error = %e, "a child output could not be forwarded");
                }
            }
        });
    }
}
