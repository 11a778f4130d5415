//! `ChannelRouter`: one per process. Every envelope and every child output passes through it:
//! envelopes go to the receiving agent's actor (activated from the store when needed), child
//! output goes to the parent's [`ParentRouter`]. It is the one place that decides *where* a
//! thing goes, so a remote transport (Redis partitions) plugs in here and nowhere else.

use crate::FastHashMap;
use crate::deps::Deps;
use crate::messages::{
    Activate, ChildOutput, Delivery, Forget, ParentRouterFor, Refused, Register, Route,
    SharedAgentAddr,
};
use crate::ops::mailbox;
use crate::parent_router::ParentRouter;
use crate::ports::StoreWrite;
use crate::supervisor::Supervisor;
use actix::prelude::*;
use agentd_proto::ids::derived_id;
use agentd_proto::{Address, AgentRecord, AgentdError, Envelope, ErrorCode, Item};
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

/// The process router.
pub struct ChannelRouter {
    deps: Arc<Deps>,
    supervisor: Option<Addr<Supervisor>>,
    /// Keys and addresses shared with the supervisor's directory.
    agents: FastHashMap<Arc<str>, SharedAgentAddr>,
    parents: HashMap<String, Addr<ParentRouter>>,
    /// Envelopes waiting for a receiver that is being activated or lives in another process,
    /// in arrival order, per receiver.
    lanes: FastHashMap<String, Lane>,
    /// Children whose output came from another process, by id: what a parent router reads of
    /// a child (id, title, channel) never changes after its spawn, so one store read serves
    /// all its later outputs.
    remote_children: HashMap<String, Arc<AgentRecord>>,
}

/// At most this many remote children's records are kept (then the cache starts over).
const REMOTE_CHILDREN_CACHED: usize = 4096;

impl ChannelRouter {
    /// A router over `deps` (its transport decides what is local).
    pub fn new(deps: Arc<Deps>) -> Self {
        ChannelRouter {
            deps,
            supervisor: None,
            agents: FastHashMap::default(),
            parents: HashMap::new(),
            lanes: FastHashMap::default(),
            remote_children: HashMap::new(),
        }
    }
}

/// A child's output that arrived through a partition stream (`Item::Output` envelope, from
/// another process or from a child of this one): the child's record is read from the store
/// (once per child) and the output handed to the local ParentRouter; answered once that
/// router has handled it.
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

/// Asks the transport to end the drain of partitions it has emptied ([`crate::ports::Transport::settle`]).
/// Handled atomically by the router (no envelope is routed meanwhile), and only when no lane
/// of a draining agent holds an envelope: everything forwarded to those agents before is in
/// their stream by then, so the check cannot miss it.
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
        if self.agents.get(id.as_str()).is_some_and(|a| !a.connected()) {
            self.agents.remove(id.as_str());
        }
    }
}

impl Handler<ForgetParent> for ChannelRouter {
    type Result = ();

    fn handle(&mut self, ForgetParent(id): ForgetParent, _: &mut Self::Context) {
        self.parents.remove(&id);
    }
}

/// Envelopes waiting for one receiver, in order.
struct Lane {
    items: VecDeque<Delivery>,
    /// How many items at the front were refused by a stopping actor (later refusals go
    /// behind them and before everything else).
    bounced: usize,
}

impl ChannelRouter {
    /// Whether `d`'s receiver is delivered by another process (through the transport). An
    /// entry read from a partition stream this process owns is delivered here even while that
    /// partition drains after a takeover.
    fn is_remote(&self, d: &Delivery, target: &str) -> bool {
        self.deps.transport.as_ref().is_some_and(|t| {
            if d.from_stream {
                !t.owns(target)
            } else {
                !t.is_local(target)
            }
        })
    }

    /// Routes one envelope, keeping per-receiver order without holding up other receivers:
    /// a live local agent gets it at once; otherwise (activation, another process's
    /// partition) it waits in the receiver's lane, which is worked off one envelope at a time
    /// while other receivers' lanes run concurrently.
    fn route(&mut self, d: Delivery, ctx: &mut Context<Self>) {
        let Some(target) = d.env.to.agent_id().map(str::to_string) else {
            d.answer(Err(AgentdError::new(
                ErrorCode::BadEnvelope,
                "only agent addresses are routed",
            )));
            return;
        };
        if let Some(lane) = self.lanes.get_mut(&target) {
            lane.items.push_back(d);
            return;
        }
        if !self.is_remote(&d, &target)
            && let Some(addr) = self.agents.get(target.as_str()).filter(|a| a.connected())
        {
            // `do_send` queues behind everything sent before, full mailbox or not, so the
            // agent sees its envelopes in routing order.
            addr.do_send(d);
            return;
        }
        let lane = Lane {
            items: VecDeque::from([d]),
            bounced: 0,
        };
        self.lanes.insert(target.clone(), lane);
        self.work_lane(target, ctx);
    }

    /// Routes the next envelope of `target`'s lane, then the one after; the lane goes away
    /// when it is empty (and later envelopes take the direct way again).
    fn work_lane(&mut self, target: String, ctx: &mut Context<Self>) {
        let next = self.lanes.get_mut(&target).and_then(|l| {
            l.bounced = l.bounced.saturating_sub(1);
            l.items.pop_front()
        });
        let Some(d) = next else {
            self.lanes.remove(&target);
            return;
        };
        if self.is_remote(&d, &target)
            && let Some(transport) = self.deps.transport.clone()
        {
            // Another process owns the receiver: hand it over through its partition, in order.
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
        if let Some(addr) = self.agents.get(target.as_str()).filter(|a| a.connected()) {
            addr.do_send(d);
            return self.work_lane(target, ctx);
        }
        let Some(supervisor) = self.supervisor.clone() else {
            d.answer(Err(AgentdError::new(
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
                    addr.do_send(d);
                    act.agents.insert(target.as_str().into(), addr);
                }
                Err(e) => d.answer(Err(e)),
            }
            act.work_lane(target, ctx);
        }));
    }

    /// Routes `env` and answers once it is durably queued (`Ok(false)`: a duplicate).
    fn route_acked(
        &mut self,
        env: Envelope,
        from_stream: bool,
        ctx: &mut Context<Self>,
    ) -> ResponseFuture<Result<bool, AgentdError>> {
        let (ack, answer) = tokio::sync::oneshot::channel();
        let d = Delivery {
            env,
            ack: Some(ack),
            from_stream,
        };
        self.route(d, ctx);
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

impl Handler<Route> for ChannelRouter {
    type Result = ();

    fn handle(&mut self, Route(env): Route, ctx: &mut Self::Context) {
        let d = Delivery {
            env,
            ack: None,
            from_stream: false,
        };
        self.route(d, ctx);
    }
}

impl Handler<RouteAcked> for ChannelRouter {
    type Result = ResponseFuture<Result<bool, AgentdError>>;

    fn handle(&mut self, RouteAcked(env): RouteAcked, ctx: &mut Self::Context) -> Self::Result {
        self.route_acked(env, false, ctx)
    }
}

impl Handler<RouteFromStream> for ChannelRouter {
    type Result = ResponseFuture<Result<bool, AgentdError>>;

    fn handle(
        &mut self,
        RouteFromStream(env): RouteFromStream,
        ctx: &mut Self::Context,
    ) -> Self::Result {
        self.route_acked(env, true, ctx)
    }
}

impl Handler<Refused> for ChannelRouter {
    type Result = ();

    fn handle(&mut self, Refused(d, by): Refused, ctx: &mut Self::Context) {
        // The cached actor is stopping (its partition was passivated, maybe re-taken since):
        // it took nothing. It is forgotten, and the envelope goes first into the receiver's
        // lane, after the ones it refused before (they come back in the order they were sent,
        // and were all sent before anything the lane took since). A new lane waits a moment,
        // for the supervisor to let the actor go and activate a fresh one from the durable
        // inbox (or for the envelope to go to the partition's new owner).
        let Some(target) = d.env.to.agent_id().map(str::to_string) else {
            return;
        };
        tracing::debug!(agent_id = %target, message_id = %d.env.id, "delivery to a stopping actor; routing it again");
        if self.agents.get(target.as_str()).is_some_and(|a| **a == by) {
            self.agents.remove(target.as_str());
        }
        match self.lanes.get_mut(&target) {
            Some(lane) => {
                let at = lane.bounced.min(lane.items.len());
                lane.items.insert(at, d);
                lane.bounced += 1;
            }
            None => {
                let lane = Lane {
                    items: VecDeque::from([d]),
                    bounced: 1,
                };
                self.lanes.insert(target.clone(), lane);
                ctx.run_later(std::time::Duration::from_millis(5), move |act, ctx| {
                    act.work_lane(target, ctx)
                });
            }
        }
    }
}

impl Handler<SettleTransport> for ChannelRouter {
    type Result = AtomicResponse<Self, Result<(), AgentdError>>;

    fn handle(&mut self, _: SettleTransport, _: &mut Self::Context) -> Self::Result {
        let transport = self.deps.transport.clone();
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

impl Handler<RemoteOutput> for ChannelRouter {
    type Result = ResponseActFuture<Self, Result<(), AgentdError>>;

    fn handle(&mut self, RemoteOutput(env): RemoteOutput, ctx: &mut Self::Context) -> Self::Result {
        let Item::Output(output) = env.item else {
            return Box::pin(actix::fut::ready(Err(AgentdError::new(
                ErrorCode::BadEnvelope,
                "not an output envelope",
            ))));
        };
        let child_id = env.from.agent_id().unwrap_or_default().to_string();
        let cause = env.causation_id.unwrap_or(env.id);
        let cached = self.remote_children.get(&child_id).cloned();
        let store = self.deps.store.clone();
        let me = ctx.address();
        // The parent's router here, if this process owns the parent: the output is answered
        // (and its stream entry acknowledged) only once that router has handled it — put it
        // in the parent's durable inbox, or handed it to a waiting call — so a crash before
        // that leaves the entry to be read again.
        let parent_router = match (&self.supervisor, env.to.agent_id()) {
            (Some(supervisor), Some(parent))
                if self.deps.transport.as_ref().is_none_or(|t| t.owns(parent)) =>
            {
                let cached = self.parents.get(parent).filter(|a| a.connected()).cloned();
                Some((cached, supervisor.clone(), parent.to_string()))
            }
            _ => None,
        };
        let fut = async move {
            let (child, fresh) = match cached {
                Some(child) => (child, false),
                None => {
                    let child = store
                        .get_agent(&child_id)
                        .await?
                        .ok_or_else(|| AgentdError::agent_not_found(&child_id))?;
                    (Arc::new(child), true)
                }
            };
            let out = ChildOutput {
                child: child.clone(),
                output,
                cause,
                kept: false,
            };
            let mut found = None;
            match parent_router {
                Some((Some(pr), _, _)) => pr.send(out).await.map_err(mailbox)?,
                Some((None, supervisor, parent)) => {
                    let pr = supervisor
                        .send(ParentRouterFor(parent.clone()))
                        .await
                        .map_err(mailbox)?;
                    pr.send(out).await.map_err(mailbox)?;
                    found = Some((parent, pr));
                }
                // Not this process's (any more): the router forwards it.
                None => me.send(out).await.map_err(mailbox)?,
            }
            Ok::<_, AgentdError>((fresh.then_some(child), found))
        };
        Box::pin(fut.into_actor(self).map(|res, act: &mut Self, _| {
            let (fresh, found) = res?;
            if let Some((parent, pr)) = found {
                act.parents.insert(parent, pr);
            }
            if let Some(child) = fresh {
                if act.remote_children.len() >= REMOTE_CHILDREN_CACHED {
                    act.remote_children.clear();
                }
                act.remote_children.insert(child.id.clone(), child);
            }
            Ok(())
        }))
    }
}

/// Tries of forwarding one child output to its parent's process (~20 s with the backoff)
/// before it is given up. Most outputs leave with the child's own store batch instead
/// ([`crate::ports::StoreWrite::Forward`]), which is retried until it is written.
const FORWARD_ATTEMPTS: u32 = 14;

/// The envelope that carries `out` to `parent_id`'s router in another process: its id is
/// derived from the entry that carries the output, so a turn re-run after a crash sends the
/// same envelope again and the parent takes it once.
pub(crate) fn output_envelope(out: &ChildOutput, parent_id: &str, now_ms: u64) -> Envelope {
    let mut env = Envelope::new(
        Address::agent(&out.child.id),
        Address::agent(parent_id),
        Item::Output(out.output.clone()),
        now_ms,
    );
    env.id = derived_id(out.cause, "output");
    env.causation_id = Some(out.cause);
    env
}

/// Moves `outputs` into `writes`, the store batch they were made from, where the store can
/// carry them: with a bus, as [`StoreWrite::Forward`] to the parent's partition stream (also
/// when this process owns the parent: handed over in memory after the batch, an output was lost
/// if the process died in between, since the child's item was done and nothing made it
/// again); without one, a store that keeps an outbox keeps them ([`StoreWrite::Outbox`],
/// marked `kept`) until the parent's router has handled them. They leave in the same round
/// trip or commit as the writes before them and are written again with them if the batch
/// fails. What is left in `outputs` goes to the router once the batch is written.
pub(crate) fn outputs_into_batch(
    deps: &Deps,
    writes: &mut Vec<StoreWrite>,
    outputs: &mut Vec<ChildOutput>,
) {
    if outputs.is_empty() {
        return;
    }
    let now = deps.clock.now_ms();
    let transport = match &deps.transport {
        Some(transport) if deps.store.takes_forwards() => transport,
        Some(_) => return,
        None => {
            if deps.store.keeps_outbox() {
                for out in outputs.iter_mut() {
                    if let Some(parent) = out.child.channel.parent_id() {
                        let env = output_envelope(out, parent, now);
                        writes.push(StoreWrite::Outbox { env: Arc::new(env) });
                        out.kept = true;
                    }
                }
            }
            return;
        }
    };
    outputs.retain(|out| {
        let Some(parent) = out.child.channel.parent_id() else {
            return true;
        };
        let Some(stream) = transport.stream_for(parent) else {
            return true;
        };
        let env = output_envelope(out, parent, now);
        writes.push(StoreWrite::Forward {
            stream,
            env: Arc::new(env),
        });
        false
    });
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
            let env = output_envelope(&out, &parent_id, self.deps.clock.now_ms());
            // Outputs keep their order, so the next one waits while this one is tried again
            // (Redis unreachable: nothing else gets through meanwhile either).
            let fut = async move {
                let mut backoff = std::time::Duration::from_millis(50);
                for attempt in 1..=FORWARD_ATTEMPTS {
                    match transport.forward(&env).await {
                        Ok(()) => return,
                        // The parent is gone (deleted): no attempt would land.
                        Err(e) if e.code == ErrorCode::AgentNotFound => {
                            tracing::warn!(agent_id = %out.child.id, message_id = %env.id, error = %e, "child output not forwarded: its parent no longer exists");
                            return;
                        }
                        Err(e) if attempt == FORWARD_ATTEMPTS => {
                            tracing::error!(agent_id = %out.child.id, message_id = %env.id, error = %e, "child output could not be forwarded to its parent's process; given up");
                        }
                        Err(e) => {
                            tracing::warn!(agent_id = %out.child.id, message_id = %env.id, error = %e, "forwarding a child output failed; trying again");
                            tokio::time::sleep(backoff).await;
                            backoff = (backoff * 2).min(std::time::Duration::from_secs(2));
                        }
                    }
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
