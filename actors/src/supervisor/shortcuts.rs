//! Shortcuts past the process router. Every envelope and child output of a process may go
//! through the [`ChannelRouter`], which keeps each receiver's order (lanes while an actor is
//! activated or lives elsewhere). When the receiver is a live actor of this process and the
//! router holds nothing that could be ahead of what is sent now, the router would only pass it
//! on: it is sent straight to the actor instead, saving a message hop.
//!
//! Invariant: a thing sent straight never overtakes one sent before it to the same receiver.
//! The router counts what it was handed and has not passed on yet, and the lanes it keeps open
//! (`InRouter`, `in_router.rs`); a shortcut is taken only while both counts are zero. Whatever the router was
//! handed before is then in the receiver's mailbox already (it passes things on before it
//! uncounts them), and `do_send` queues behind it.

use super::SharedAgentAddr;
use super::handle::Shared;
use crate::agent::AgentActor;
use crate::agent::messages::Delivery;
use crate::channel_router::ChannelRouter;
use crate::channel_router::messages::{Refused, Route, RouteAcked, RouteFromStream};
use crate::errors::mailbox;
use crate::messages::{ChildOutput, OutputPort};
use crate::ports::StreamEntry;
use actix::Addr;
use agentd_proto::{AgentdError, Envelope, ErrorCode};
use std::future::Future;
use std::sync::Arc;

impl Shared {
    /// The live actor of this process `env` may go to straight, if any.
    fn straight_to(&self, env: &Envelope) -> Option<SharedAgentAddr> {
        if !self.in_router.no_envelopes() {
            return None;
        }
        let target = env.to.agent_id()?;
        if self
            .deps
            .transport
            .as_ref()
            .is_some_and(|t| !t.is_local(target))
        {
            return None;
        }
        self.directory.agent(target)
    }

    /// The process router, for an envelope handed to it (counted until it is routed).
    fn envelope_to_router(&self) -> &Addr<ChannelRouter> {
        self.in_router.envelope_handed();
        &self.router
    }

    /// Routes `env`, answering nobody (a failure is logged).
    pub(crate) fn route(&self, env: Envelope) {
        match self.straight_to(&env) {
            Some(agent) => agent.do_send(Delivery {
                env,
                ack: None,
                from_stream: false,
                entry: None,
                abandonable: false,
            }),
            None => self.envelope_to_router().do_send(Route(env)),
        }
    }

    /// Routes `env` and answers once it is in the receiver's durable inbox (`Ok(false)`: a
    /// duplicate). Queued when called, not when the future is first polled: envelopes handed
    /// over one after another keep their order.
    pub(crate) fn route_acked(
        &self,
        env: Envelope,
    ) -> impl Future<Output = Result<bool, AgentdError>> + use<> {
        let way = match self.straight_to(&env) {
            Some(agent) => Ok(deliver_acked(&agent, env)),
            // Boxed: actix's request keeps the whole message for a full mailbox, and unboxed
            // it would make this future, and every sender's future that awaits it, larger by
            // that message, copied whole each time one of them is moved or boxed.
            None => Err(Box::pin(self.envelope_to_router().send(RouteAcked {
                env,
                abandonable: crate::deadline::current().is_some(),
            }))),
        };
        async move {
            match way {
                Ok(delivered) => delivered.await,
                Err(routed) => routed.await.map_err(mailbox)?,
            }
        }
    }

    /// [`Shared::route_acked`] for an entry a transport read from a partition stream this
    /// process owns (always through the router, which delivers it here even while the partition
    /// drains after a takeover), with the stream entry it came in.
    pub(crate) fn route_from_stream(
        &self,
        env: Envelope,
        entry: Option<Arc<StreamEntry>>,
    ) -> impl Future<Output = Result<bool, AgentdError>> + use<> {
        let routed = self
            .envelope_to_router()
            .send(RouteFromStream { env, entry });
        async move { routed.await.map_err(mailbox)? }
    }

    /// Hands back a delivery a stopping actor did not take: the router routes it again.
    pub(crate) fn refused(&self, d: Delivery) {
        self.envelope_to_router().do_send(Refused(d));
    }

    /// The process router, for a child output handed to it (counted until it is passed on).
    pub(crate) fn output_to_router(&self) -> &Addr<ChannelRouter> {
        self.in_router.output_handed();
        &self.router
    }
}

/// An output goes straight to its parent's router when that router runs here and the process
/// router holds no output; otherwise (the parent in another process, its router not made yet,
/// an output ahead) through the process router.
impl OutputPort for Shared {
    fn send_output(&self, out: ChildOutput) {
        if self.in_router.no_outputs()
            && let Some(parent) = out.child.channel.parent_id()
            && self.deps.transport.as_ref().is_none_or(|t| t.owns(parent))
            && let Some(router) = self.directory.parent_router(parent)
        {
            router.do_send(out);
            return;
        }
        self.output_to_router().do_send(out);
    }
}

/// Hands `env` straight to live agent `agent` (queued when called) and answers once it is in
/// the agent's durable inbox (`Ok(false)`: a duplicate), or `unavailable` if the agent stops
/// before answering.
pub(crate) fn deliver_acked(
    agent: &Addr<AgentActor>,
    env: Envelope,
) -> impl Future<Output = Result<bool, AgentdError>> + Send + use<> {
    let (ack, answer) = tokio::sync::oneshot::channel();
    agent.do_send(Delivery {
        env,
        ack: Some(ack),
        from_stream: false,
        entry: None,
        abandonable: crate::deadline::current().is_some(),
    });
    async move {
        answer.await.unwrap_or_else(|_| {
            Err(AgentdError::new(
                ErrorCode::Unavailable,
                "the receiver stopped before answering",
            ))
        })
    }
}
