//! Taking envelopes: an inbox item is pushed to the agent's durable inbox (once) before the
//! actor handles its next message, then queued; a control is applied at once.
//!
//! Delivery handlers are atomic: the item is durable before anything else happens to the agent,
//! so arrival order is kept and a transport may acknowledge once the handler answers. When the
//! item would start a turn the moment it is queued, that turn's start (its input entry, the
//! `running` record) is written in the push's own store call.

use super::AgentActor;
use super::activity::Activity;
use super::messages::{Deliver, Delivery, Provide, Restore, answer};
use super::queue;
use super::start::Prestart;
use crate::ports::StreamEntry;
use actix::prelude::*;
use agentd_observe::metrics;
use agentd_proto::{AgentRecord, AgentStatus, AgentdError, Envelope, ErrorCode, Event, Item};
use std::sync::Arc;

/// What taking a delivery answers, once its item is durably queued (`Ok(false)`: a duplicate).
type Delivered = ResponseActFuture<AgentActor, Result<bool, AgentdError>>;

fn ready(res: Result<bool, AgentdError>) -> Delivered {
    Box::pin(actix::fut::ready(res))
}

impl AgentActor {
    /// Takes an envelope: an inbox item is queued durably (once) before the next message is
    /// handled, or held in its stream entry `entry`; a control is applied.
    fn deliver(
        &mut self,
        env: Envelope,
        entry: Option<Arc<StreamEntry>>,
        ctx: &mut Context<Self>,
    ) -> Delivered {
        let span = tracing::debug_span!("deliver", agent_id = %self.rec.id, thread_id = %self.rec.id, message_id = %env.id);
        let _g = span.enter();
        if matches!(self.activity, Activity::Stopping) {
            tracing::debug!(agent_id = %self.rec.id, message_id = %env.id, "delivery refused: the agent is stopping");
            return ready(Err(AgentdError::new(
                ErrorCode::Unavailable,
                format!("agent `{}` is stopping", self.rec.id),
            )));
        }
        let kind = match &env.item {
            Item::Inbox(i) => i.kind(),
            Item::Control(c) => c.as_str(),
            _ => "other",
        };
        metrics::global().inc_named(
            "agentd_messages_in_total",
            "Envelopes delivered to agents, by kind.",
            "kind",
            kind,
        );
        match env.item {
            Item::Inbox(_) => match entry {
                Some(entry) => self.take_from_stream(env, entry, ctx),
                None => match self.may_take(&env, None) {
                    Ok(()) => self.push_inbox_item(env),
                    Err(e) => ready(Err(e)),
                },
            },
            // A dependency settled (see `supervisor/dependencies.rs`).
            Item::Event(Event::DependencySettled { agent_id, outcome }) => {
                self.dependency_settled(&agent_id, outcome, ctx);
                self.check_activity();
                ready(Ok(true))
            }
            Item::Control(c) => {
                let res = self.control(c, ctx).map(|_| true);
                if let Err(e) = &res {
                    tracing::warn!(error = %e, "control refused");
                }
                self.check_activity();
                ready(res)
            }
            _ => ready(Err(AgentdError::new(
                ErrorCode::BadEnvelope,
                "an agent only takes inbox items, controls and the news of a dependency",
            ))),
        }
    }

    /// Takes an inbox item that came in stream entry `entry`: holds it in the entry if the agent
    /// may (see [`super::held`]), else pushes it.
    fn take_from_stream(
        &mut self,
        env: Envelope,
        entry: Arc<StreamEntry>,
        ctx: &mut Context<Self>,
    ) -> Delivered {
        if let Err(e) = self.may_take(&env, Some(&entry)) {
            return ready(Err(e));
        }
        // Queued or running here already (another entry of one envelope): this copy is
        // acknowledged. (Not `holds`: the record's task may be one a crash cut short, which this
        // copy is to run again.)
        if self.queue.holds(env.id) || self.activity.holds(env.id) {
            tracing::debug!(agent_id = %self.rec.id, message_id = %env.id, "duplicate envelope ignored");
            return ready(Ok(false));
        }
        if !entry.hold_for.is_zero() && self.may_hold(&env) {
            self.hold(env, entry, ctx);
            self.check_activity();
            return ready(Ok(true));
        }
        self.push_inbox_item(env)
    }

    /// Refuses an item this process may no longer queue for the agent (read from stream entry
    /// `entry`, if it was: only within the ownership period it was read in).
    fn may_take(&self, env: &Envelope, entry: Option<&StreamEntry>) -> Result<(), AgentdError> {
        if let Some(transport) = &self.deps().transport
            && !entry.map_or_else(
                || transport.may_deliver(&self.rec.id),
                |e| transport.may_take(&self.rec.id, e),
            )
        {
            // Left to the partition's owner: a stream entry stays pending for it, a direct
            // sender is told to try again.
            tracing::debug!(agent_id = %self.rec.id, message_id = %env.id, "delivery refused: this process no longer holds the agent's partition");
            return Err(AgentdError::new(
                ErrorCode::Unavailable,
                format!(
                    "agent `{}`: this process no longer holds its partition",
                    self.rec.id
                ),
            ));
        }
        Ok(())
    }

    /// Pushes an inbox item (that this process may take, [`Self::may_take`]) to the durable
    /// inbox, then queues it (a fresh one) or settles a duplicate. What the agent holds in
    /// stream entries is adopted into the inbox first: it came before.
    fn push_inbox_item(&mut self, env: Envelope) -> Delivered {
        let store = self.deps().store.clone();
        let id = self.rec.id.clone();
        let adoption = self.adoption(true);
        let (input, then) = match self.turn_start_writes(&env) {
            Some((input, record, then)) => (Some((input, record)), then),
            None => (None, Vec::new()),
        };
        self.writes.push_started();
        Box::pin(
            async move {
                let adopted = match adoption {
                    Some((ids, pushes)) => Some((ids, pushes.await)),
                    None => None,
                };
                let pushed = store.inbox_push_then(&id, &env, &then).await;
                (adopted, pushed, env)
            }
            .into_actor(self)
            .then(|(adopted, pushed, env), act, ctx| -> Delivered {
                if let Some((ids, results)) = adopted {
                    act.adopted(ids, results, ctx);
                }
                if act.writes.push_answered() {
                    // Runs after this closure: what it queues below joins the batch.
                    act.schedule_flush(ctx);
                }
                let pushed = match pushed {
                    Ok(p) => p,
                    Err(e) => return ready(Err(e.into())),
                };
                if pushed.fresh {
                    let prestart = input.filter(|_| pushed.then_applied).map(
                        |(input, record)| Prestart {
                            id: env.id,
                            input,
                            record,
                        },
                    );
                    act.enqueue(env, ctx);
                    if act.pump_with(prestart, ctx).is_some() {
                        // Not started after all: the stored record is put right.
                        act.persist(ctx);
                    }
                    act.check_activity();
                    return ready(Ok(true));
                }
                if !act.holds(env.id) {
                    return Box::pin(act.take_if_still_pending(env).map(|(), _, _| Ok(false)));
                }
                tracing::debug!(agent_id = %act.rec.id, message_id = %env.id, "duplicate envelope ignored");
                ready(Ok(false))
            }),
        )
    }

    /// Queues `env` at its place, aborting the running turn first for an interrupt.
    pub(super) fn enqueue(&mut self, env: Envelope, ctx: &mut Context<Self>) {
        if queue::interrupts(&env) {
            self.interrupt_turn(ctx);
        }
        self.queue.push(env);
    }

    /// Whether envelope `id` is queued, waiting or running here (or was the last one begun).
    fn holds(&self, id: uuid::Uuid) -> bool {
        self.rec.current_task == Some(id) || self.queue.holds(id) || self.activity.holds(id)
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
        let store = self.deps().store.clone();
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
                let place = |id: uuid::Uuid| pending.iter().position(|e| e.id == id);
                match place(env.id) {
                    Some(mine) if !act.holds(env.id) => {
                        tracing::info!(agent_id = %act.rec.id, message_id = %env.id, "redelivered envelope was stored but never queued; taking it");
                        act.queue.insert_in_stored_order(env, mine, place);
                        act.pump(ctx);
                        act.check_activity();
                    }
                    _ => {
                        tracing::debug!(agent_id = %act.rec.id, message_id = %env.id, "duplicate envelope ignored");
                    }
                }
            })
    }

    /// Whether the agent waits for what is provided: in `waiting_for`, and, for a dependency,
    /// for a `[DEPENDENCY_REQUEST]` marker's (the agents of `depends_on` are met by themselves).
    fn waits_for(&self, waiting_for: AgentStatus) -> Result<(), AgentdError> {
        if self.rec.status != waiting_for {
            return Err(AgentdError::new(
                ErrorCode::InvalidTransition,
                format!(
                    "agent `{}` is {}, not {waiting_for}",
                    self.rec.id, self.rec.status
                ),
            ));
        }
        if let Activity::WaitingDependencies(unmet) = &self.activity {
            return Err(AgentdError::new(
                ErrorCode::InvalidTransition,
                format!(
                    "agent `{}` waits for its dependencies ({}), not for a provided value",
                    self.rec.id,
                    crate::depends_on::waiting_reason(unmet)
                ),
            ));
        }
        Ok(())
    }

    /// A dependency or an answer for an agent that waits for one: it becomes the next message
    /// and the agent runs again.
    fn provide(
        &mut self,
        env: Envelope,
        waiting_for: AgentStatus,
        ctx: &mut Context<Self>,
    ) -> Result<AgentRecord, AgentdError> {
        self.waits_for(waiting_for)?;
        self.set_status(AgentStatus::Running, Some("provided".into()), ctx)?;
        self.queue.push_front(env);
        self.pump(ctx);
        Ok(self.rec.clone())
    }
}

impl Handler<Deliver> for AgentActor {
    // Atomic: the item is in the durable inbox before the next message is handled, so arrival
    // order is kept and a transport may acknowledge once this answers.
    type Result = AtomicResponse<Self, Result<bool, AgentdError>>;

    fn handle(&mut self, Deliver(env): Deliver, ctx: &mut Self::Context) -> Self::Result {
        AtomicResponse::new(self.deliver(env, None, ctx))
    }
}

impl Handler<Delivery> for AgentActor {
    // Atomic, as `Deliver`: the answer goes to the sender's channel.
    type Result = AtomicResponse<Self, ()>;

    fn handle(&mut self, d: Delivery, ctx: &mut Self::Context) -> Self::Result {
        if matches!(self.activity, Activity::Stopping) {
            // What this actor took now would be dropped from memory with no live actor left
            // to run it: the router routes it again (to a fresh actor or the new owner).
            tracing::debug!(agent_id = %self.rec.id, message_id = %d.env.id, "delivery refused: the agent is stopping");
            self.system.refused(d);
            return AtomicResponse::new(Box::pin(actix::fut::ready(())));
        }
        if d.abandoned() {
            // Its sender was answered `unavailable` meanwhile (and may send it again).
            tracing::debug!(agent_id = %self.rec.id, message_id = %d.env.id, "delivery dropped: its sender stopped waiting");
            return AtomicResponse::new(Box::pin(actix::fut::ready(())));
        }
        let Delivery {
            env, ack, entry, ..
        } = d;
        let id = env.id;
        let delivered = self.deliver(env, entry, ctx);
        AtomicResponse::new(Box::pin(delivered.map(move |res, _, _| {
            answer(ack, id, res);
        })))
    }
}

impl Handler<Restore> for AgentActor {
    type Result = ();

    fn handle(&mut self, Restore(items): Restore, ctx: &mut Self::Context) {
        if matches!(self.activity, Activity::Stopping) {
            // The items stay in the durable inbox for the next activation.
            return;
        }
        for env in items {
            self.enqueue(env, ctx);
        }
        self.pump(ctx);
        self.check_activity();
    }
}

impl Handler<Provide> for AgentActor {
    // Atomic: the provided text is durably queued before the agent runs on it.
    type Result = AtomicResponse<Self, Result<AgentRecord, AgentdError>>;

    fn handle(&mut self, msg: Provide, _: &mut Self::Context) -> Self::Result {
        let Provide { env, waiting_for } = msg;
        // Checked before the push: a refused value leaves nothing in the inbox.
        if let Err(e) = self.waits_for(waiting_for) {
            return AtomicResponse::new(Box::pin(actix::fut::ready(Err(e))));
        }
        let store = self.deps().store.clone();
        let id = self.rec.id.clone();
        AtomicResponse::new(Box::pin(
            async move {
                let pushed = store.inbox_push(&id, &env).await;
                (pushed, env)
            }
            .into_actor(self)
            .map(move |(pushed, env), act, ctx| {
                pushed.map_err(AgentdError::from)?;
                let res = act.provide(env, waiting_for, ctx);
                act.check_activity();
                res
            }),
        ))
    }
}
