//! `ParentRouter`: one per parent agent, created with its first child. It resolves
//! `(worker title, threadAlias)` to a persistent child agent (get-or-create), holds the
//! pending sync waits, and forwards child output to the parent (seed 000's ManageAdapter).
//!
//! A Manage message's id derives from its tool call's, so a call run again (its turn re-run
//! after a crash or a restart) sends the same message, which the worker takes once; its sync
//! wait then starts from what the worker already answered ([`answered`]).

mod answered;

use crate::errors::mailbox;
use crate::hashing::FastHashMap;
use crate::messages::ChildOutput;
use crate::messages::{CancelWait, Dispatched, ManageSend, Wait, WaitResult};
use crate::messages::{Spawn, SpawnSpec};
use crate::supervisor::SystemHandle;
use actix::WeakRecipient;
use actix::prelude::*;
use agentd_proto::Output;
use agentd_proto::ids::{derived_id, new_id};
use agentd_proto::{
    Address, AgentStatus, AgentdError, AsyncForward, Channel, Envelope, ErrorCode, Event,
    InboxItem, Item, ManageMode, ManageOptions, Role,
};
use std::sync::Arc;
use tokio::sync::oneshot;

struct Waiter {
    id: u64,
    child_id: String,
    needed: usize,
    messages: Vec<String>,
    /// The outputs a call run again took from the worker's thread: the same outputs arriving
    /// live are not taken twice.
    taken: Vec<uuid::Uuid>,
    tx: oneshot::Sender<WaitResult>,
}

/// The router of one parent's children.
pub struct ParentRouter {
    parent_id: String,
    system: SystemHandle,
    waiters: Vec<Waiter>,
    next_wait: u64,
    /// Options of the latest call per child (per-call overrides win over the stored ones).
    options: FastHashMap<String, ManageOptions>,
    /// The child each worker title and alias last resolved to (worker title → alias → child):
    /// the next call sends to it without asking the store (the way there finds out whether it
    /// still exists). Nested, so that a lookup borrows the call's strings.
    resolved: FastHashMap<String, FastHashMap<String, String>>,
    /// This router as the recipient of its sync waits' cancellations (made with the first).
    cancel: Option<Arc<WeakRecipient<CancelWait>>>,
    /// Children whose sync wait this router gave up (timed out): their late yields and
    /// failures go to the parent as messages, without asking whether a call still awaits them.
    given_up: crate::hashing::FastHashSet<String>,
}

impl ParentRouter {
    /// A router for `parent_id`.
    pub(crate) fn new(parent_id: String, system: SystemHandle) -> Self {
        ParentRouter {
            parent_id,
            system,
            waiters: Vec::new(),
            next_wait: 1,
            options: FastHashMap::default(),
            resolved: FastHashMap::default(),
            cancel: None,
            given_up: Default::default(),
        }
    }

    /// Where a sync wait's caller gives it up: this router, made once (weak: the router does
    /// not keep itself alive).
    fn cancel_recipient(&mut self, ctx: &mut Context<Self>) -> Arc<WeakRecipient<CancelWait>> {
        Arc::clone(
            self.cancel
                .get_or_insert_with(|| Arc::new(ctx.address().downgrade().recipient())),
        )
    }

    fn complete(&mut self, index: usize, status: &'static str, error: Option<String>) {
        let w = self.waiters.remove(index);
        let _ = w.tx.send(WaitResult {
            status,
            messages: w.messages,
            error,
        });
    }

    fn delivery_failed(&self, child_id: &str, e: AgentdError) {
        tracing::warn!(agent_id = %child_id, parent_id = %self.parent_id, error = %e, "child output not delivered");
        self.system.deps.events.publish(&Event::DeliveryFailed {
            agent_id: child_id.to_string(),
            code: e.code,
            message: e.message,
        });
    }
}

impl Actor for ParentRouter {
    type Context = Context<Self>;
}

impl Handler<ManageSend> for ParentRouter {
    type Result = AtomicResponse<Self, Result<Dispatched, AgentdError>>;

    fn handle(&mut self, msg: ManageSend, ctx: &mut Self::Context) -> Self::Result {
        let known = self
            .resolved
            .get(&msg.worker_title)
            .and_then(|aliases| aliases.get(&msg.alias))
            .cloned();
        let Some(child_id) = known else {
            return AtomicResponse::new(self.resolve_and_send(msg));
        };
        // The child this alias resolved to before is sent to at once: whether it still exists
        // is found on the way (the forward to its owner checks its record in the same script
        // as its append; a local activation reads the record), so a known alias costs no
        // store round trip. A child deleted since is resolved (and made) again.
        let cancel = self.cancel_recipient(ctx);
        let (env, dispatched) = self.dispatch(&msg, child_id, false, cancel);
        AtomicResponse::new(Box::pin(self.route(env, dispatched, msg.again).then(
            move |routed, act, _| -> SendFuture {
                match routed {
                    Err(e) if e.code == ErrorCode::AgentNotFound => {
                        if let Some(aliases) = act.resolved.get_mut(&msg.worker_title) {
                            aliases.remove(&msg.alias);
                        }
                        act.resolve_and_send(msg)
                    }
                    other => Box::pin(actix::fut::ready(other)),
                }
            },
        )))
    }
}

/// What sending a Manage message answers, as the router's future.
type SendFuture = ResponseActFuture<ParentRouter, Result<Dispatched, AgentdError>>;

impl ParentRouter {
    /// Resolves `msg`'s `(worker title, alias)` in the store (get-or-create, race-free across
    /// processes), makes the child if it does not exist (yet, or any more), then sends.
    fn resolve_and_send(&mut self, msg: ManageSend) -> SendFuture {
        let deps = self.system.deps.clone();
        let supervisor = self.system.supervisor.clone();
        let parent_id = self.parent_id.clone();
        let m = msg.clone_light();
        let fut = async move {
            let candidate = new_id().to_string();
            let (child_id, created) = deps
                .store
                .alias_get_or_create(&parent_id, &m.worker_title, &m.alias, &candidate)
                .await?;
            // A new mapping names a fresh id; only an existing one can have its child already.
            let exists = !created && deps.store.agent_exists(&child_id).await?;
            if !exists {
                supervisor
                    .send(Spawn(SpawnSpec {
                        id: Some(child_id.clone()),
                        parent: Some((*m.parent).clone()),
                        agent_type: m.worker_type.clone(),
                        title: Some(m.worker_title.clone()),
                        prompt: None,
                        allowed_tools: None,
                        budget: None,
                        priority: None,
                        depends_on: Vec::new(),
                        on_dependency_failure: None,
                        provider: None,
                        model: None,
                        env: Default::default(),
                        background: false,
                        trace: m.trace,
                        channel: Channel::Manage(std::sync::Arc::new(
                            agentd_proto::ManageChannel {
                                parent_id: parent_id.clone(),
                                worker_title: m.worker_title.clone(),
                                alias: m.alias.clone(),
                                options: m.options.clone(),
                            },
                        )),
                    }))
                    .await
                    .map_err(mailbox)??;
            }
            Ok::<_, AgentdError>((child_id, created))
        };
        Box::pin(
            fut.into_actor(self)
                .then(move |res, act, ctx| -> SendFuture {
                    let (child_id, created) = match res {
                        Ok(resolved) => resolved,
                        Err(e) => return Box::pin(actix::fut::ready(Err(e))),
                    };
                    let cancel = act.cancel_recipient(ctx);
                    let (env, dispatched) = act.dispatch(&msg, child_id, created, cancel);
                    act.route(env, dispatched, msg.again)
                }),
        )
    }

    /// Records that `msg` goes to `child_id` (the alias's child, its options, a sync wait
    /// that `cancel` gives up) and makes its envelope.
    fn dispatch(
        &mut self,
        msg: &ManageSend,
        child_id: String,
        created: bool,
        cancel: Arc<WeakRecipient<CancelWait>>,
    ) -> (Envelope, Dispatched) {
        let aliases = match self.resolved.get_mut(&msg.worker_title) {
            Some(aliases) => aliases,
            None => self.resolved.entry(msg.worker_title.clone()).or_default(),
        };
        if aliases.get(&msg.alias) != Some(&child_id) {
            aliases.insert(msg.alias.clone(), child_id.clone());
        }
        if self.options.get(&child_id) != Some(&msg.options) {
            self.options.insert(child_id.clone(), msg.options.clone());
        }
        let wait = if msg.options.mode == ManageMode::Sync {
            let (tx, rx) = oneshot::channel();
            let id = self.next_wait;
            self.next_wait += 1;
            self.waiters.push(Waiter {
                id,
                child_id: child_id.clone(),
                needed: msg.options.sync_max_messages.max(1) as usize,
                messages: Vec::new(),
                taken: Vec::new(),
                tx,
            });
            Some(Wait {
                id,
                result: rx,
                cancel,
            })
        } else {
            None
        };
        let mut env = Envelope::new(
            Address::agent(&self.parent_id),
            Address::agent(&child_id),
            Item::Inbox(InboxItem::message(msg.message.clone())),
            self.system.deps.clock.now_ms(),
        );
        env.id = msg.message_id;
        if msg.again {
            // A resend: the worker looks it up among what it took.
            env.attempt = 2;
        }
        env.causation_id = Some(msg.cause);
        env.trace = msg.trace;
        (
            env,
            Dispatched {
                child_id,
                created,
                wait,
            },
        )
    }

    /// Routes a dispatched message; one that could not be sent takes its sync wait with it.
    /// The sync wait of a call run `again` first takes what the worker already answered to
    /// the message (all of it before this router handles another output, so none is missed
    /// or taken twice).
    fn route(&mut self, env: Envelope, dispatched: Dispatched, again: bool) -> SendFuture {
        let message_id = env.id;
        let routed = self.system.route_acked(env);
        let deps = self.system.deps.clone();
        let catch_up = dispatched
            .wait
            .as_ref()
            .filter(|_| again)
            .map(|w| (w.id, dispatched.child_id.clone()));
        Box::pin(
            routed
                .into_actor(self)
                .then(move |routed, act, _| -> SendFuture {
                    if let Err(e) = routed {
                        act.drop_wait(&dispatched);
                        return Box::pin(actix::fut::ready(Err(e)));
                    }
                    let Some((wait, child)) = catch_up else {
                        return Box::pin(actix::fut::ready(Ok(dispatched)));
                    };
                    let read =
                        async move { answered::answered_before(&deps, &child, message_id).await };
                    Box::pin(
                        read.into_actor(act)
                            .map(move |answered, act, _| match answered {
                                Ok(answered) => {
                                    act.take_answered(wait, answered);
                                    Ok(dispatched)
                                }
                                Err(e) => {
                                    act.drop_wait(&dispatched);
                                    Err(e)
                                }
                            }),
                    )
                }),
        )
    }

    /// Forgets the sync wait of `dispatched`, if it has one.
    fn drop_wait(&mut self, dispatched: &Dispatched) {
        if let Some(wait) = &dispatched.wait {
            self.waiters.retain(|w| w.id != wait.id);
        }
    }

    /// Gives sync wait `wait` what its worker answered before it was registered, completing it
    /// if that is enough.
    fn take_answered(&mut self, wait: u64, answered: answered::Answered) {
        let Some(index) = self.waiters.iter().position(|w| w.id == wait) else {
            return;
        };
        let waiter = &mut self.waiters[index];
        for (id, text) in answered.messages {
            waiter.taken.push(id);
            waiter.messages.push(text);
        }
        if let Some(error) = answered.failed {
            self.complete(index, "failed", Some(error));
        } else if waiter.messages.len() >= waiter.needed {
            self.complete(index, "ok", None);
        }
    }
}

impl ManageSend {
    fn clone_light(&self) -> ManageSend {
        ManageSend {
            parent: self.parent.clone(),
            worker_type: self.worker_type.clone(),
            worker_title: self.worker_title.clone(),
            alias: self.alias.clone(),
            message: self.message.clone(),
            options: self.options.clone(),
            cause: self.cause,
            message_id: self.message_id,
            again: self.again,
            trace: self.trace,
        }
    }
}

impl Handler<CancelWait> for ParentRouter {
    type Result = Option<Vec<String>>;

    fn handle(&mut self, CancelWait(id): CancelWait, _: &mut Self::Context) -> Self::Result {
        let index = self.waiters.iter().position(|w| w.id == id)?;
        let waiter = self.waiters.remove(index);
        self.given_up.insert(waiter.child_id);
        Some(waiter.messages)
    }
}

impl Handler<ChildOutput> for ParentRouter {
    type Result = ResponseActFuture<Self, ()>;

    fn handle(&mut self, out: ChildOutput, _: &mut Self::Context) -> Self::Result {
        // A kept output is let go once handled; one whose push met an unreachable store stays
        // kept, and the next start hands it over again.
        let kept = out.kept.then(|| derived_id(out.cause, "output"));
        let store = self.system.deps.store.clone();
        Box::pin(self.take_output(out).map(move |handled, _, _| {
            if let Some(id) = kept.filter(|_| handled) {
                actix_rt::spawn(async move {
                    if let Err(e) = store.outbox_done(id).await {
                        tracing::warn!(message_id = %id, error = %e, "a handled child output stays in the outbox");
                    }
                });
            }
        }))
    }
}

impl ParentRouter {
    /// Hands `out` to a waiting call, or forwards it to the parent; answers whether it was
    /// handled for good (`false`: its push met an unreachable store).
    fn take_output(&mut self, out: ChildOutput) -> ResponseActFuture<Self, bool> {
        let child = out.child;
        // A pending sync wait takes the output first (once: a call run again may have taken it
        // from the worker's thread already).
        if let Some(index) = self.waiters.iter().position(|w| w.child_id == child.id) {
            if self.waiters[index].taken.contains(&out.cause) {
                return Box::pin(actix::fut::ready(true));
            }
            match &out.output {
                Output::Reply { text } => self.waiters[index].messages.push(text.clone()),
                Output::Yield { result: v } => self.waiters[index].messages.push(value_text(v)),
                Output::Failed { error: e } => {
                    self.complete(index, "failed", Some(e.clone()));
                    return Box::pin(actix::fut::ready(true));
                }
            }
            if self.waiters[index].messages.len() >= self.waiters[index].needed {
                self.complete(index, "ok", None);
            }
            return Box::pin(actix::fut::ready(true));
        }
        // A forward the parent runs a turn on is its model's input: a user entry, like a
        // sub-agent's. One it relays is kept as seed 000's assistant entry; every model
        // backend still sends it as input (`agentd_proto::conversation::as_sent`).
        let mut awaited_by = None;
        let (role, prefix, forward, relay) = match &child.channel {
            Channel::Manage(m) => {
                let opts = self.options.get(&child.id).unwrap_or(&m.options);
                let forward = opts.mode == ManageMode::Async
                    || !matches!(out.output, Output::Reply { text: _ });
                if opts.mode == ManageMode::Sync && !self.given_up.contains(&child.id) {
                    // A sync call this router knows nothing of (made before a restart) may
                    // still await this yield or failure: then it is that call's to take.
                    awaited_by = Some(Arc::clone(m));
                }
                let relay = opts.async_forward == AsyncForward::Relay;
                (
                    if relay { Role::Assistant } else { Role::User },
                    opts.render_prefix(&m.worker_title, &m.alias, &child.id),
                    forward,
                    relay,
                )
            }
            Channel::Spawn { .. } => (
                Role::User,
                ManageOptions::default().render_prefix(&child.title, "", &child.id),
                true,
                false,
            ),
            Channel::None => return Box::pin(actix::fut::ready(true)),
        };
        if !forward {
            // Sync mode without a waiter: a late reply stays on the child thread only.
            return Box::pin(actix::fut::ready(true));
        }
        let body = match &out.output {
            Output::Reply { text: t } => t.clone(),
            Output::Yield { result: v } => value_text(v),
            Output::Failed { error: e } => format!("[failed] {e}"),
        };
        let text = format!("{prefix}{body}");
        let kind = match &out.output {
            Output::Reply { .. } => "reply",
            Output::Yield { .. } => "yield",
            Output::Failed { .. } => "failed",
        };
        // A sub-agent's output goes before what is queued for the parent, unless it was
        // spawned in the background; a Manage worker's yield or failure does too.
        let urgent = match &child.channel {
            Channel::Spawn { background, .. } => !background,
            _ => !matches!(out.output, Output::Reply { text: _ }),
        };
        let deps = self.system.deps.clone();
        let system = self.system.clone();
        let parent_id = self.parent_id.clone();
        let child_id = child.id.clone();
        let fut = async move {
            let parent = deps.store.get_agent(&parent_id).await?;
            let Some(parent) = parent else {
                return Err(AgentdError::new(
                    ErrorCode::ManageMissingParent,
                    format!("parent `{parent_id}` of `{}` no longer exists", child.id),
                ));
            };
            if matches!(
                parent.status,
                AgentStatus::Cancelled | AgentStatus::Terminated
            ) {
                return Err(AgentdError::new(
                    ErrorCode::MissingParentChannel,
                    format!(
                        "parent `{parent_id}` is {} and takes no messages",
                        parent.status
                    ),
                ));
            }
            if let Some(channel) = awaited_by
                && answered::call_awaits(&deps, &parent, &channel).await?
            {
                return Ok(());
            }
            let mut env = Envelope::new(
                Address::agent(&child.id),
                Address::agent(&parent_id),
                Item::Inbox(InboxItem::Message {
                    text: text.clone(),
                    interrupt: false,
                    urgent,
                    role,
                    from_agent: Some(child.id.clone()),
                    relay,
                }),
                deps.clock.now_ms(),
            );
            env.id = derived_id(out.cause, "forward");
            env.causation_id = Some(out.cause);
            // The turn the parent runs on it follows (links to) the child's span.
            env.trace = child.trace;
            system.route_acked(env).await?;
            agentd_observe::metrics::global().inc(
                "agentd_messages_out_total",
                "Child output forwarded to parents, by kind.",
                &[("kind", kind)],
                1.0,
            );
            deps.events.publish(&Event::Forwarded {
                parent_id: parent_id.clone(),
                child_id: child.id.clone(),
                text,
            });
            Ok(())
        };
        Box::pin(fut.into_actor(self).map(move |res, act, _| match res {
            Ok(()) => true,
            Err(e) => {
                let transient = matches!(e.code, ErrorCode::StoreError | ErrorCode::Unavailable);
                act.delivery_failed(&child_id, e);
                !transient
            }
        }))
    }
}

fn value_text(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}
