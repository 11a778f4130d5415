//! Lanes: the envelopes of one receiver that cannot go straight to a live local actor (it is
//! being activated, or another process owns it), in the order they were routed. A lane is
//! worked off one envelope at a time while other receivers' lanes run concurrently, and goes
//! away once empty (later envelopes take the direct way again).

use super::ChannelRouter;
use super::messages::Refused;
use crate::agent::messages::Delivery;
use crate::errors::mailbox;
use crate::supervisor::messages::Activate;
use actix::prelude::*;
use agentd_proto::{AgentdError, ErrorCode};
use std::collections::VecDeque;

/// Envelopes waiting for one receiver, in order.
pub(super) struct Lane {
    items: VecDeque<Delivery>,
    /// How many items at the front were refused by a stopping actor (later refusals go
    /// behind them and before everything else).
    bounced: usize,
}

impl Lane {
    /// A lane holding `d`.
    pub(super) fn of(d: Delivery) -> Self {
        Lane {
            items: VecDeque::from([d]),
            bounced: 0,
        }
    }

    /// Queues `d` behind what waits.
    pub(super) fn push(&mut self, d: Delivery) {
        self.items.push_back(d);
    }

    /// Queues `d`, refused by a stopping actor, behind the refusals before it and ahead of
    /// everything else: they were all routed before anything the lane took since.
    fn push_refused(&mut self, d: Delivery) {
        let at = self.bounced.min(self.items.len());
        self.items.insert(at, d);
        self.bounced += 1;
    }

    fn pop(&mut self) -> Option<Delivery> {
        self.bounced = self.bounced.saturating_sub(1);
        self.items.pop_front()
    }
}

impl ChannelRouter {
    /// Opens `target`'s lane with what it holds (counted while it is open).
    pub(super) fn open_lane(&mut self, target: String, lane: Lane) {
        if self.lanes.insert(target, lane).is_none() {
            self.system.in_router.lane_opened();
        }
    }

    /// Routes the envelopes of `target`'s lane in order, until one must wait (a forward to
    /// another process, an activation), whose completion works the lane on.
    pub(super) fn work_lane(&mut self, target: String, ctx: &mut Context<Self>) {
        loop {
            let Some(d) = self.lanes.get_mut(&target).and_then(Lane::pop) else {
                if self.lanes.remove(&target).is_some() {
                    self.system.in_router.lane_closed();
                }
                return;
            };
            if d.from_stream && self.is_remote(&d, &target) {
                // Read from a partition this process has given up since: it stays pending for
                // the partition's next owner, whose claim delivers it in its place. Appended
                // to the stream again, it would go behind what was sent after it.
                d.answer(Err(AgentdError::new(
                    ErrorCode::Unavailable,
                    format!("agent `{target}`: this process no longer holds its partition"),
                )));
                continue;
            }
            if d.abandoned() {
                // Its sender was answered `unavailable` meanwhile (and may send it again).
                tracing::debug!(agent_id = %target, message_id = %d.env.id, "delivery dropped: its sender stopped waiting");
                continue;
            }
            if self.is_remote(&d, &target)
                && let Some(transport) = self.system.deps.transport.clone()
            {
                // Another process owns the receiver: hand it over through its partition.
                let fut = async move {
                    let res = transport.forward(&d.env).await.map(|_| true);
                    d.answer(res);
                };
                ctx.spawn(
                    fut.into_actor(self)
                        .map(move |_, act, ctx| act.work_lane(target, ctx)),
                );
                return;
            }
            if let Some(addr) = self.system.directory.agent(&target) {
                addr.do_send(d);
                continue;
            }
            let supervisor = self.system.supervisor.clone();
            let id = target.clone();
            let fut = async move { supervisor.send(Activate(id)).await.map_err(mailbox)? };
            ctx.spawn(fut.into_actor(self).map(move |res, act, ctx| {
                match res {
                    Ok(addr) => addr.do_send(d),
                    Err(e) => d.answer(Err(e)),
                }
                act.work_lane(target, ctx);
            }));
            return;
        }
    }
}

impl Handler<Refused> for ChannelRouter {
    type Result = ();

    fn handle(&mut self, Refused(d): Refused, ctx: &mut Self::Context) {
        // The actor is stopping (its partition was passivated, maybe re-taken since): it took
        // nothing. The envelope goes first into the receiver's lane, after the ones it refused
        // before. A new lane waits a moment, for the supervisor to let the actor go and
        // activate a fresh one from the durable inbox (or for the envelope to go to the
        // partition's new owner).
        let Some(target) = d.env.to.agent_id().map(str::to_string) else {
            self.system.in_router.envelope_routed();
            return;
        };
        tracing::debug!(agent_id = %target, message_id = %d.env.id, "delivery to a stopping actor; routing it again");
        match self.lanes.get_mut(&target) {
            Some(lane) => lane.push_refused(d),
            None => {
                let mut lane = Lane {
                    items: VecDeque::new(),
                    bounced: 0,
                };
                lane.push_refused(d);
                self.open_lane(target.clone(), lane);
                ctx.run_later(std::time::Duration::from_millis(5), move |act, ctx| {
                    act.work_lane(target, ctx)
                });
            }
        }
        // In a lane now (opened before this): the lane keeps senders from going straight.
        self.system.in_router.envelope_routed();
    }
}
