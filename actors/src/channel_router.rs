//! `ChannelRouter`: one per process. Every envelope and every child output passes through it:
//! envelopes go to the receiving agent's actor (activated from the store when needed), child
//! output goes to the parent's [`ParentRouter`]. It is the one place that decides *where* a
//! thing goes, so a remote transport (Redis partitions) plugs in here and nowhere else.

use crate::agent::AgentActor;
use crate::deps::Deps;
use crate::messages::{Activate, ChildOutput, Deliver, Forget, ParentRouterFor, Register, Route};
use crate::ops::mailbox;
use crate::parent_router::ParentRouter;
use crate::supervisor::Supervisor;
use actix::prelude::*;
use agentd_proto::ids::derived_id;
use agentd_proto::{Address, AgentdError, Envelope, ErrorCode, Item};
use std::collections::{HashMap, VecDeque};

/// The process router.
pub struct ChannelRouter {
    deps: Deps,
    supervisor: Option<Addr<Supervisor>>,
    agents: HashMap<String, Addr<AgentActor>>,
    parents: HashMap<String, Addr<ParentRouter>>,
    /// Envelopes waiting for a receiver that is being activated or lives in another process,
    /// in arrival order, per receiver.
    lanes: HashMap<String, VecDeque<Pending>>,
}

impl ChannelRouter {
    /// A router over `deps` (its transport decides what is local).
    pub fn new(deps: Deps) -> Self {
        ChannelRouter {
            deps,
            supervisor: None,
            agents: HashMap::new(),
            parents: HashMap::new(),
            lanes: HashMap::new(),
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

/// An envelope waiting in its receiver's lane.
enum Pending {
    /// Delivered without an answer ([`Route`]).
    Fire(Envelope),
    /// Answered once durably queued ([`RouteAcked`]).
    Acked(
        Envelope,
        tokio::sync::oneshot::Sender<Result<bool, AgentdError>>,
    ),
}

impl Pending {
    fn env(&self) -> &Envelope {
        match self {
            Pending::Fire(env) | Pending::Acked(env, _) => env,
        }
    }

    /// Answers the sender (a fire-and-forget envelope's error is logged).
    fn answer(self, res: Result<bool, AgentdError>) {
        match self {
            Pending::Acked(_, ack) => {
                let _ = ack.send(res);
            }
            Pending::Fire(env) => {
                if let Err(e) = res {
                    tracing::warn!(message_id = %env.id, error = %e, "routing an envelope failed");
                }
            }
        }
    }

    /// Hands the envelope to a live agent. `do_send` queues behind everything sent before,
    /// full mailbox or not, so the agent sees its envelopes in routing order.
    fn hand_to(self, addr: &Addr<AgentActor>) {
        match self {
            Pending::Fire(env) => addr.do_send(Deliver(env)),
            Pending::Acked(env, ack) => addr.do_send(crate::messages::DeliverAcked(env, ack)),
        }
    }
}

impl ChannelRouter {
    /// Routes one envelope, keeping per-receiver order without holding up other receivers:
    /// a live local agent gets it at once; otherwise (activation, another process's
    /// partition) it waits in the receiver's lane, which is worked off one envelope at a time
    /// while other receivers' lanes run concurrently.
    fn route(&mut self, item: Pending, ctx: &mut Context<Self>) {
        let Some(target) = item.env().to.agent_id().map(str::to_string) else {
            item.answer(Err(AgentdError::new(
                ErrorCode::BadEnvelope,
                "only agent addresses are routed",
            )));
            return;
        };
        if let Some(lane) = self.lanes.get_mut(&target) {
            lane.push_back(item);
            return;
        }
        let remote = self
            .deps
            .transport
            .as_ref()
            .is_some_and(|t| !t.is_local(&target));
        if !remote && let Some(addr) = self.agents.get(&target).filter(|a| a.connected()) {
            item.hand_to(addr);
            return;
        }
        self.lanes.insert(target.clone(), VecDeque::from([item]));
        self.work_lane(target, ctx);
    }

    /// Routes the next envelope of `target`'s lane, then the one after; the lane goes away
    /// when it is empty (and later envelopes take the direct way again).
    fn work_lane(&mut self, target: String, ctx: &mut Context<Self>) {
        let Some(item) = self.lanes.get_mut(&target).and_then(|l| l.pop_front()) else {
            self.lanes.remove(&target);
            return;
        };
        if let Some(transport) = self.deps.transport.clone().filter(|t| !t.is_local(&target)) {
            // Another process owns the receiver: hand it over through its partition, in order.
            let fut = async move {
                let res = transport.forward(item.env()).await.map(|_| true);
                item.answer(res);
            };
            ctx.spawn(
                fut.into_actor(self)
                    .map(move |_, act, ctx| act.work_lane(target, ctx)),
            );
            return;
        }
        if let Some(addr) = self.agents.get(&target).filter(|a| a.connected()) {
            item.hand_to(addr);
            return self.work_lane(target, ctx);
        }
        let Some(supervisor) = self.supervisor.clone() else {
            item.answer(Err(AgentdError::new(
                ErrorCode::Unavailable,
                "router not wired",
            )));
            return self.work_lane(target, ctx);
        };
        let id = target.clone();
        let fut = async move { supervisor.send(Activate(id)).await.map_err(mailbox)? };
        ctx.spawn(fut.into_actor(self).map(move |res, act, ctx| {
            match res {
                Ok(addr) => {
                    item.hand_to(&addr);
                    act.agents.insert(target.clone(), addr);
                }
                Err(e) => item.answer(Err(e)),
            }
            act.work_lane(target, ctx);
        }));
    }
}

impl Handler<Route> for ChannelRouter {
    type Result = ();

    fn handle(&mut self, Route(env): Route, ctx: &mut Self::Context) {
        self.route(Pending::Fire(env), ctx);
    }
}

impl Handler<RouteAcked> for ChannelRouter {
    type Result = ResponseFuture<Result<bool, AgentdError>>;

    fn handle(&mut self, RouteAcked(env): RouteAcked, ctx: &mut Self::Context) -> Self::Result {
        let (ack, answer) = tokio::sync::oneshot::channel();
        self.route(Pending::Acked(env, ack), ctx);
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
            .filter(|t| !t.is_local(&parent_id))
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
