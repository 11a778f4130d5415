//! `ChannelRouter`: one per process. Every envelope and every child output that cannot go
//! straight to a live actor of this process passes through it (`supervisor::shortcuts` decides):
//! envelopes go to the receiving agent's actor (activated from the store when needed), child
//! output goes to the parent's [`ParentRouter`](crate::parent_router::ParentRouter). It is the
//! one place that decides *where* a thing goes, so a remote transport (Redis partitions) plugs
//! in here and nowhere else.
//!
//! | module | what it holds |
//! |---|---|
//! | [`messages`] | the messages the router handles |
//! | [`lanes`] | per-receiver lanes: envelopes waiting for an activation or another process |
//! | [`outputs`] | child outputs: in a store batch, to a parent's router, to another process |
//!
//! Invariant: envelopes for one receiver reach it in the order they were routed. A live local
//! agent gets each at once (`do_send` queues behind everything sent before, full mailbox or
//! not); anything else waits in the receiver's lane, which is worked off one envelope at a
//! time. The router counts what it was handed and has not routed, and its open lanes, so that
//! senders may go straight to a live agent while both are zero (`supervisor::shortcuts`).

mod lanes;
pub(crate) mod messages;
mod outputs;

use crate::agent::messages::Delivery;
use crate::hashing::FastHashMap;
use crate::supervisor::SystemHandle;
use actix::prelude::*;
use agentd_proto::{AgentRecord, AgentdError, Envelope, ErrorCode};
use lanes::Lane;
use messages::{Route, RouteAcked, RouteFromStream, SettleTransport, StopRouter};
use std::collections::HashMap;
use std::sync::Arc;

/// The process router.
pub struct ChannelRouter {
    system: SystemHandle,
    /// Envelopes waiting for a receiver that is being activated or lives in another process,
    /// in arrival order, per receiver.
    lanes: FastHashMap<String, Lane>,
    /// Children whose output came from another process, by id: what a parent router reads of
    /// a child (id, title, channel) never changes after its spawn, so one store read serves
    /// all its later outputs.
    remote_children: HashMap<String, Arc<AgentRecord>>,
}

impl ChannelRouter {
    /// A router for the process of `system` (its transport decides what is local).
    pub(crate) fn new(system: SystemHandle) -> Self {
        ChannelRouter {
            system,
            lanes: FastHashMap::default(),
            remote_children: HashMap::new(),
        }
    }

    /// Whether `d`'s receiver is delivered by another process (through the transport). An
    /// entry read from a partition stream this process owns is delivered here even while that
    /// partition drains after a takeover.
    fn is_remote(&self, d: &Delivery, target: &str) -> bool {
        self.system.deps.transport.as_ref().is_some_and(|t| {
            if d.from_stream {
                !t.owns(target)
            } else {
                !t.is_local(target)
            }
        })
    }

    /// Routes one envelope, keeping per-receiver order without holding up other receivers:
    /// a live local agent gets it at once; otherwise (activation, another process's
    /// partition) it waits in the receiver's lane.
    fn route(&mut self, d: Delivery, ctx: &mut Context<Self>) {
        let Some(target) = d.env.to.agent_id() else {
            d.answer(Err(AgentdError::new(
                ErrorCode::BadEnvelope,
                "only agent addresses are routed",
            )));
            return;
        };
        if let Some(lane) = self.lanes.get_mut(target) {
            lane.push(d);
            return;
        }
        if !self.is_remote(&d, target)
            && let Some(addr) = self.system.directory.agent(target)
        {
            addr.do_send(d);
            return;
        }
        let target = target.to_string();
        self.open_lane(target.clone(), Lane::of(d));
        self.work_lane(target, ctx);
    }

    /// Routes `env` and answers once it is durably queued, or held (`Ok(false)`: a
    /// duplicate).
    fn route_acked(
        &mut self,
        env: Envelope,
        from_stream: bool,
        entry: Option<Arc<crate::ports::StreamEntry>>,
        abandonable: bool,
        ctx: &mut Context<Self>,
    ) -> ResponseFuture<Result<bool, AgentdError>> {
        let (ack, answer) = tokio::sync::oneshot::channel();
        let d = Delivery {
            env,
            ack: Some(ack),
            from_stream,
            entry,
            abandonable,
        };
        self.route(d, ctx);
        self.system.in_router.envelope_routed();
        Box::pin(async move {
            answer.await.unwrap_or_else(|_| {
                Err(AgentdError::new(
                    ErrorCode::Unavailable,
                    "the receiver stopped before answering",
                ))
            })
        })
    }
}

impl Actor for ChannelRouter {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        ctx.set_mailbox_capacity(16 * 1024);
    }
}

impl Handler<StopRouter> for ChannelRouter {
    type Result = ();

    fn handle(&mut self, _: StopRouter, ctx: &mut Self::Context) {
        ctx.stop();
    }
}

impl Handler<Route> for ChannelRouter {
    type Result = ();

    fn handle(&mut self, Route(env): Route, ctx: &mut Self::Context) {
        let d = Delivery {
            env,
            ack: None,
            from_stream: false,
            entry: None,
            abandonable: false,
        };
        self.route(d, ctx);
        self.system.in_router.envelope_routed();
    }
}

impl Handler<RouteAcked> for ChannelRouter {
    type Result = ResponseFuture<Result<bool, AgentdError>>;

    fn handle(
        &mut self,
        RouteAcked { env, abandonable }: RouteAcked,
        ctx: &mut Self::Context,
    ) -> Self::Result {
        self.route_acked(env, false, None, abandonable, ctx)
    }
}

impl Handler<RouteFromStream> for ChannelRouter {
    type Result = ResponseFuture<Result<bool, AgentdError>>;

    fn handle(
        &mut self,
        RouteFromStream { env, entry }: RouteFromStream,
        ctx: &mut Self::Context,
    ) -> Self::Result {
        self.route_acked(env, true, entry, false, ctx)
    }
}

impl Handler<SettleTransport> for ChannelRouter {
    type Result = AtomicResponse<Self, Result<(), AgentdError>>;

    fn handle(&mut self, _: SettleTransport, _: &mut Self::Context) -> Self::Result {
        let transport = self.system.deps.transport.clone();
        // A lane of a draining agent may hold (or be forwarding) an envelope not in its
        // stream yet: not now; the transport asks again after its next quiet read.
        let in_flight = transport.as_ref().is_some_and(|t| {
            self.lanes
                .keys()
                .any(|target| t.owns(target) && !t.is_local(target))
        });
        if in_flight {
            return AtomicResponse::new(Box::pin(actix::fut::ready(Ok(()))));
        }
        let fut = async move {
            match transport {
                Some(t) => t.settle().await,
                None => Ok(()),
            }
        };
        AtomicResponse::new(Box::pin(fut.into_actor(self)))
    }
}
