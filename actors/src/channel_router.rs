//! `ChannelRouter`: one per process. Every envelope and every child output passes through it:
//! envelopes go to the receiving agent's actor (activated from the store when needed), child
//! output goes to the parent's [`ParentRouter`]. It is the one place that decides *where* a
//! thing goes, so a remote transport (Redis partitions) plugs in here and nowhere else.

use crate::agent::AgentActor;
use crate::messages::{Activate, ChildOutput, Deliver, Forget, ParentRouterFor, Register, Route};
use crate::ops::mailbox;
use crate::parent_router::ParentRouter;
use crate::supervisor::Supervisor;
use actix::prelude::*;
use agentd_proto::{AgentdError, ErrorCode};
use std::collections::HashMap;

/// The process router.
#[derive(Default)]
pub struct ChannelRouter {
    supervisor: Option<Addr<Supervisor>>,
    agents: HashMap<String, Addr<AgentActor>>,
    parents: HashMap<String, Addr<ParentRouter>>,
}

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

impl Handler<ChildOutput> for ChannelRouter {
    type Result = AtomicResponse<Self, ()>;

    fn handle(&mut self, out: ChildOutput, _: &mut Self::Context) -> Self::Result {
        let Some(parent_id) = out.child.channel.parent_id().map(str::to_string) else {
            return AtomicResponse::new(Box::pin(actix::fut::ready(())));
        };
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
