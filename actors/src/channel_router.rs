//! `ChannelRouter`: one per process. Every envelope and every child output passes through it:
//! envelopes go to the receiving agent's actor (activated from the store when needed), child
//! output goes to the parent's [`ParentRouter`]. It is the one place that decides *where* a
//! thing goes, so a remote transport (Redis partitions) plugs in here and nowhere else.

use crate::agent::AgentActor;
use crate::deps::Deps;
use crate::messages::{
    Activate, ChildOutput, Deliver, Forget, Lookup, ParentRouterFor, Register, Route,
};
use crate::ops::mailbox;
use crate::parent_router::ParentRouter;
use crate::ports::Transport;
use crate::supervisor::Supervisor;
use actix::prelude::*;
use agentd_proto::ids::derived_id;
use agentd_proto::{Address, AgentdError, Envelope, ErrorCode, Item};
use std::collections::HashMap;
use std::sync::Arc;

/// The process router.
pub struct ChannelRouter {
    deps: Deps,
    supervisor: Option<Addr<Supervisor>>,
    agents: HashMap<String, Addr<AgentActor>>,
    parents: HashMap<String, Addr<ParentRouter>>,
}

impl ChannelRouter {
    /// A router over `deps` (its transport decides what is local).
    pub fn new(deps: Deps) -> Self {
        ChannelRouter {
            deps,
            supervisor: None,
            agents: HashMap::new(),
            parents: HashMap::new(),
        }
    }
}

/// A child's output that arrived from another process (`Item::Output` envelope): the child's
/// record is read from the store and the output handed to the local ParentRouter.
#[derive(Message, Debug)]
#[rtype(result = "Result<(), AgentdError>")]
pub struct RemoteOutput(pub Envelope);

/// Like [`Route`], but answers only once the receiver has the item in its durable inbox
/// (`Ok(false)`: it was a duplicate). Transports acknowledge their stream entries after it.
#[derive(Message, Debug)]
#[rtype(result = "Result<bool, AgentdError>")]
pub struct RouteAcked(pub Envelope);

/// [`RouteAcked`] for an entry a transport read from a partition stream this process owns: it
/// is delivered here even while the partition is still being drained after a takeover.
#[derive(Message, Debug)]
#[rtype(result = "Result<bool, AgentdError>")]
pub struct RouteFromStream(pub Envelope);

/// Asks the transport to end the drain of partitions it has emptied ([`Transport::settle`]).
/// Handled atomically by the router, between two routed messages: everything it forwarded
/// before is in a stream by then, so the check cannot miss it.
#[derive(Message, Debug)]
#[rtype(result = "Result<(), AgentdError>")]
pub struct SettleTransport;

/// Stops the live agents this process no longer owns (a partition lease was lost or given
/// up); their durable inboxes stay for the new owner.
#[derive(Message)]
#[rtype(result = "usize")]
pub struct Passivate(pub Box<dyn Fn(&str) -> bool + Send>);

/// Wires the supervisor in after both actors exist.
#[derive(Message)]
#[rtype(result = "()")]
pub struct SetSupervisor(pub Addr<Supervisor>);

/// Drops a parent's router (the parent was deleted).
#[derive(Message)]
#[rtype(result = "()")]
pub struct ForgetParent(pub String);

impl Actor for ChannelRouter {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        ctx.set_mailbox_capacity(16 * 1024);
    }
}

impl Handler<SetSupervisor> for ChannelRouter {
    type Result = ();

    fn handle(&mut self, SetSupervisor(s): SetSupervisor, _: &mut Self::Context) {
        self.supervisor = Some(s);
    }
}

impl Handler<Register> for ChannelRouter {
    type Result = ();

    fn handle(&mut self, msg: Register, _: &mut Self::Context) {
        self.agents.insert(msg.agent_id, msg.addr);
    }
}

impl Handler<Forget> for ChannelRouter {
    type Result = ();

    fn handle(&mut self, Forget(id): Forget, _: &mut Self::Context) {
        if self.agents.get(&id).is_some_and(|a| !a.connected()) {
            self.agents.remove(&id);
        }
    }
}

impl Handler<ForgetParent> for ChannelRouter {
    type Result = ();

    fn handle(&mut self, ForgetParent(id): ForgetParent, _: &mut Self::Context) {
        self.parents.remove(&id);
    }
}

impl Handler<Route> for ChannelRouter {
    // Atomic: while an agent is being activated, later envelopes wait, so per-agent order holds.
    type Result = AtomicResponse<Self, Result<(), AgentdError>>;

    fn handle(&mut self, Route(env): Route, _: &mut Self::Context) -> Self::Result {
        let Some(target) = env.to.agent_id().map(str::to_string) else {
            return AtomicResponse::new(Box::pin(actix::fut::ready(Err(AgentdError::new(
                ErrorCode::BadEnvelope,
                "only agent addresses are routed",
            )))));
        };
        if let Some(transport) = self.deps.transport.clone().filter(|t| !t.is_local(&target)) {
            // Another process owns the receiver: hand it over through its partition.
            let fut = async move { transport.forward(&env).await };
            return AtomicResponse::new(Box::pin(fut.into_actor(self)));
        }
        if let Some(addr) = self.agents.get(&target).filter(|a| a.connected()) {
            addr.do_send(Deliver(env));
            return AtomicResponse::new(Box::pin(actix::fut::ready(Ok(()))));
        }
        let Some(supervisor) = self.supervisor.clone() else {
            return AtomicResponse::new(Box::pin(actix::fut::ready(Err(AgentdError::new(
                ErrorCode::Unavailable,
                "router not wired",
            )))));
        };
        let fut = async move {
            supervisor
                .send(Activate(target.clone()))
                .await
                .map_err(mailbox)?
                .map(|a| (target, a))
        };
        AtomicResponse::new(Box::pin(fut.into_actor(self).map(move |res, act, _| {
            let (target, addr) = res?;
            addr.do_send(Deliver(env));
            act.agents.insert(target, addr);
            Ok(())
        })))
    }
}

impl Handler<RouteAcked> for ChannelRouter {
    type Result = AtomicResponse<Self, Result<bool, AgentdError>>;

    fn handle(&mut self, RouteAcked(env): RouteAcked, _: &mut Self::Context) -> Self::Result {
        self.route_acked(env, false)
    }
}

impl Handler<RouteFromStream> for ChannelRouter {
    type Result = AtomicResponse<Self, Result<bool, AgentdError>>;

    fn handle(
        &mut self,
        RouteFromStream(env): RouteFromStream,
        _: &mut Self::Context,
    ) -> Self::Result {
        self.route_acked(env, true)
    }
}

impl ChannelRouter {
    /// Delivers `env` into its receiver's durable inbox (here, or through the transport when
    /// another process delivers it); `from_stream`: it was read from a partition this process
    /// owns, so it is delivered here even while that partition drains.
    fn route_acked(
        &mut self,
        env: Envelope,
        from_stream: bool,
    ) -> AtomicResponse<Self, Result<bool, AgentdError>> {
        let Some(target) = env.to.agent_id().map(str::to_string) else {
            return AtomicResponse::new(Box::pin(actix::fut::ready(Err(AgentdError::new(
                ErrorCode::BadEnvelope,
                "only agent addresses are routed",
            )))));
        };
        let remote = |t: &Arc<dyn Transport>| {
            if from_stream {
                !t.owns(&target)
            } else {
                !t.is_local(&target)
            }
        };
        if let Some(transport) = self.deps.transport.clone().filter(remote) {
            let fut = async move { transport.forward(&env).await.map(|_| true) };
            return AtomicResponse::new(Box::pin(fut.into_actor(self)));
        }
        let cached = self.agents.get(&target).filter(|a| a.connected()).cloned();
        let supervisor = self.supervisor.clone();
        let fut = async move {
            let s = supervisor
                .ok_or_else(|| AgentdError::new(ErrorCode::Unavailable, "router not wired"))?;
            let addr = match cached {
                Some(a) => a,
                None => s.send(Activate(target.clone())).await.map_err(mailbox)??,
            };
            let res = addr.send(Deliver(env.clone())).await;
            if res.as_ref().is_ok_and(Result::is_ok) {
                let fresh = res.map_err(mailbox)??;
                return Ok::<_, AgentdError>((target, addr, fresh));
            }
            // The cached actor may be one the supervisor stopped meanwhile (its partition was
            // passivated, possibly re-taken since): it refuses deliveries, and an item it took
            // now would have no live actor to run it. The supervisor's live actor (activated
            // again from the durable inbox) gets it instead.
            let live = s.send(Lookup(target.clone())).await.map_err(mailbox)?;
            if live.as_ref() == Some(&addr) {
                let fresh = res.map_err(mailbox)??;
                return Ok((target, addr, fresh));
            }
            tracing::debug!(agent_id = %target, "delivery to a stopped actor; activating it again");
            let addr = s.send(Activate(target.clone())).await.map_err(mailbox)??;
            let fresh = addr.send(Deliver(env)).await.map_err(mailbox)??;
            Ok((target, addr, fresh))
        };
        AtomicResponse::new(Box::pin(fut.into_actor(self).map(|res, act, _| {
            let (target, addr, fresh) = res?;
            act.agents.insert(target, addr);
            Ok(fresh)
        })))
    }
}

impl Handler<SettleTransport> for ChannelRouter {
    type Result = AtomicResponse<Self, Result<(), AgentdError>>;

    fn handle(&mut self, _: SettleTransport, _: &mut Self::Context) -> Self::Result {
        let transport = self.deps.transport.clone();
        let fut = async move {
            match transport {
                Some(t) => t.settle().await,
                None => Ok(()),
            }
        };
        AtomicResponse::new(Box::pin(fut.into_actor(self)))
    }
}

impl Handler<RemoteOutput> for ChannelRouter {
    type Result = ResponseActFuture<Self, Result<(), AgentdError>>;

    fn handle(&mut self, RemoteOutput(env): RemoteOutput, ctx: &mut Self::Context) -> Self::Result {
        let store = self.deps.store.clone();
        let me = ctx.address();
        let fut = async move {
            let Item::Output(output) = env.item else {
                return Err(AgentdError::new(
                    ErrorCode::BadEnvelope,
                    "not an output envelope",
                ));
            };
            let child_id = env.from.agent_id().unwrap_or_default().to_string();
            let child = store
                .get_agent(&child_id)
                .await?
                .ok_or_else(|| AgentdError::agent_not_found(&child_id))?;
            let cause = env.causation_id.unwrap_or(env.id);
            me.send(ChildOutput {
                child,
                output,
                cause,
            })
            .await
            .map_err(mailbox)?;
            Ok(())
        };
        Box::pin(fut.into_actor(self))
    }
}

impl Handler<ChildOutput> for ChannelRouter {
    type Result = AtomicResponse<Self, ()>;

    fn handle(&mut self, out: ChildOutput, _: &mut Self::Context) -> Self::Result {
        let Some(parent_id) = out.child.channel.parent_id().map(str::to_string) else {
            return AtomicResponse::new(Box::pin(actix::fut::ready(())));
        };
        if let Some(transport) = self
            .deps
            .transport
            .clone()
            // Outputs go to the parent's ParentRouter in the process that owns it; what that
            // router puts in the parent's inbox is routed (and ordered) like any message.
            .filter(|t| !t.owns(&parent_id))
        {
            let mut env = Envelope::new(
                Address::agent(&out.child.id),
                Address::agent(&parent_id),
                Item::Output(out.output),
                self.deps.clock.now_ms(),
            );
            env.id = derived_id(out.cause, "output");
            env.causation_id = Some(out.cause);
            let fut = async move {
                if let Err(e) = transport.forward(&env).await {
                    tracing::error!(error = %e, "child output could not be forwarded to its parent's process");
                }
            };
            return AtomicResponse::new(Box::pin(fut.into_actor(self)));
        }
        if let Some(pr) = self.parents.get(&parent_id).filter(|a| a.connected()) {
            pr.do_send(out);
            return AtomicResponse::new(Box::pin(actix::fut::ready(())));
        }
        let Some(supervisor) = self.supervisor.clone() else {
            return AtomicResponse::new(Box::pin(actix::fut::ready(())));
        };
        let fut = async move {
            supervisor
                .send(ParentRouterFor(parent_id.clone()))
                .await
                .map(|a| (parent_id, a))
        };
        AtomicResponse::new(Box::pin(fut.into_actor(self).map(
            move |res, act, _| match res {
                Ok((parent_id, pr)) => {
                    pr.do_send(out);
                    act.parents.insert(parent_id, pr);
                }
                Err(e) => tracing::error!(error = %e, "no parent router; child output dropped"),
            },
        )))
    }
}
