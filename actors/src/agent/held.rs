//! Items the agent holds in their partition stream entries instead of its durable inbox (see
//! [`StreamEntry`]): which deliveries it holds, the turn it starts on one with its start
//! deferred, and the adoption into the durable inbox of what it held too long, what it holds
//! when an item must be pushed, and what it holds when it stops.
//!
//! Invariants:
//! - **Every item in the durable inbox is older than every item held.** Holding a delivery
//!   never reorders anything: a held item comes after what the inbox has. Before the agent
//!   pushes an item, it adopts (pushes first, in arrival order) what it holds. So after a crash
//!   the next owner, which resumes an agent from its inbox before it hands over the entries
//!   left pending, keeps the order.
//! - **A held entry is acknowledged once, with the item's end or after its adoption**: the
//!   item's end acknowledges it in the same flush ([`StoreWrite::Acknowledge`]); an adopted
//!   item's entry is acknowledged once its push is answered, and its end then marks it done in
//!   the inbox.
//! - **Nothing is held longer than its entry's `hold_for`** (plus a timer's lateness): a
//!   pending entry keeps its partition stream from being trimmed past it.

use super::AgentActor;
use super::activity::Activity;
use crate::ports::{StoreResult, StoreWrite, StreamEntry};
use actix::prelude::*;
use agentd_proto::{AgentStatus, Envelope, InboxItem, Item};
use futures::future::BoxFuture;
use std::sync::Arc;
use std::time::Instant;
use uuid::Uuid;

/// Most items an agent holds at once; past it, items are pushed (after adopting these). Above
/// what a flood leaves each agent of a partition whose reader holds back at 1,024 entries out
/// (`services/bus/src/redis_bus/held.rs`) unless the flood is for a handful of agents, and low
/// enough that the held items' scans (each linear) stay cheap.
const MOST_HELD: usize = 256;

/// What the agent holds (boxed in the actor: an agent holds nothing most of its life).
#[derive(Default)]
pub(super) struct Held {
    /// In arrival order.
    items: Vec<HeldItem>,
    /// The timer that adopts the oldest items once they have been held their time.
    timer: Option<SpawnHandle>,
}

/// One item held.
struct HeldItem {
    id: Uuid,
    entry: Arc<StreamEntry>,
    since: Instant,
    state: HoldState,
}

/// Where a held item stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum HoldState {
    /// Only its entry keeps it: its end acknowledges the entry.
    Held,
    /// Its push into the durable inbox is under way: its end marks it done there (the push
    /// lands first), and its entry is acknowledged once the push is answered.
    Adopting,
    /// It ended while its push was under way (marked done in the inbox): its entry is
    /// acknowledged once the push is answered, whatever the answer.
    DoneWhileAdopting,
}

/// The pushes that adopt held items: their ids, in order, and the future of the pushes' answers.
pub(super) type Adoption = (Vec<Uuid>, BoxFuture<'static, Vec<StoreResult<bool>>>);

impl AgentActor {
    /// Whether the agent may hold `env`, offered in its stream entry, instead of pushing it to
    /// its durable inbox: a message sent once (no copy can have come before, see
    /// [`Envelope::is_first_send`]), for an agent that runs its items now (a paused or waiting
    /// agent would keep the entry pending for long), and not one of too many.
    pub(super) fn may_hold(&self, env: &Envelope) -> bool {
        env.is_first_send()
            && matches!(&env.item, Item::Inbox(InboxItem::Message { .. }))
            && !super::relay::relays(env)
            && matches!(
                self.activity,
                Activity::Idle | Activity::Running(_) | Activity::AwaitingPermit(_)
            )
            && (self.rec.status.accepts_turns() || self.rec.status == AgentStatus::Running)
            && self.held.as_ref().is_none_or(|h| h.items.len() < MOST_HELD)
    }

    /// Holds `env`, which came in stream entry `entry`: queued without a push, its entry left
    /// pending, and the turn it starts (now, if nothing runs) written with its end.
    pub(super) fn hold(&mut self, env: Envelope, entry: Arc<StreamEntry>, ctx: &mut Context<Self>) {
        entry.take();
        let held = self.held.get_or_insert_with(Box::default);
        held.items.push(HeldItem {
            id: env.id,
            entry,
            since: Instant::now(),
            state: HoldState::Held,
        });
        self.arm_hold_timer(ctx);
        self.enqueue(env, ctx);
        self.writes.defer_flushes();
        self.pump(ctx);
        self.writes.stop_deferring();
    }

    /// The entry of item `id` if the agent holds it, for the write that marks the item done
    /// ([`StoreWrite::Acknowledge`]); `None` for an item of the durable inbox, which is marked
    /// done there (an item being adopted too: its push lands before the done mark).
    pub(super) fn held_done(&mut self, id: Uuid) -> Option<Arc<StreamEntry>> {
        let held = self.held.as_mut()?;
        let at = held.items.iter().position(|h| h.id == id)?;
        match held.items[at].state {
            HoldState::Held => {
                let item = held.items.remove(at);
                Some(item.entry)
            }
            HoldState::Adopting => {
                held.items[at].state = HoldState::DoneWhileAdopting;
                None
            }
            HoldState::DoneWhileAdopting => None,
        }
    }

    /// The pushes that adopt what the agent holds (`all`, or what it has held its time), in
    /// arrival order, with those items marked as being adopted; `None` if there is nothing to
    /// adopt. The caller holds its flushes for the pushes ([`Self::adopted`] follows them).
    pub(super) fn adoption(&mut self, all: bool) -> Option<Adoption> {
        let held = self.held.as_mut()?;
        let now = Instant::now();
        let due: Vec<Uuid> = held
            .items
            .iter()
            .filter(|h| {
                h.state == HoldState::Held
                    && (all || now.duration_since(h.since) >= h.entry.hold_for)
            })
            .map(|h| h.id)
            .collect();
        let mut ids = Vec::with_capacity(due.len());
        let mut envs = Vec::with_capacity(due.len());
        for id in due {
            let env = self
                .activity
                .item()
                .filter(|e| e.id == id)
                .or_else(|| self.queue.get(id));
            if let Some(env) = env {
                ids.push(id);
                envs.push(env.clone());
            }
        }
        if ids.is_empty() {
            return None;
        }
        if let Some(held) = self.held.as_mut() {
            for h in held.items.iter_mut().filter(|h| ids.contains(&h.id)) {
                h.state = HoldState::Adopting;
            }
        }
        let store = self.deps().store.clone();
        let agent_id = self.rec.id.clone();
        let pushes = async move {
            // Made together, so the store sends them as one call, in this order.
            let pushes = envs.iter().map(|env| store.inbox_push(&agent_id, env));
            futures::future::join_all(pushes).await
        };
        Some((ids, Box::pin(pushes)))
    }

    /// The pushes of an [`Adoption`] were answered: each adopted item's entry is acknowledged
    /// (with the next flush), and an item whose push failed is held again (an item that ended
    /// meanwhile is acknowledged all the same).
    pub(super) fn adopted(
        &mut self,
        ids: Vec<Uuid>,
        results: Vec<StoreResult<bool>>,
        ctx: &mut Context<Self>,
    ) {
        let mut acks = Vec::new();
        if let Some(held) = self.held.as_mut() {
            for (id, res) in ids.into_iter().zip(results) {
                let Some(at) = held.items.iter().position(|h| h.id == id) else {
                    continue;
                };
                match (res, held.items[at].state) {
                    (Err(e), HoldState::Adopting) => {
                        tracing::warn!(agent_id = %self.rec.id, message_id = %id, error = %e, "adopting a held item into the durable inbox failed; it stays held");
                        held.items[at].state = HoldState::Held;
                    }
                    _ => acks.push(held.items.remove(at).entry),
                }
            }
        }
        for entry in acks {
            let agent_id = self.shared_id();
            self.write_later(StoreWrite::Acknowledge { agent_id, entry }, ctx);
        }
        self.arm_hold_timer(ctx);
    }

    /// Takes out everything the agent holds (it stops): the entries of the items in the
    /// durable inbox's order, with their envelopes, for [`adopt_on_stop`].
    pub(super) fn take_held(&mut self) -> Vec<(Envelope, Arc<StreamEntry>)> {
        let Some(held) = self.held.take() else {
            return Vec::new();
        };
        held.items
            .into_iter()
            .filter_map(|h| {
                let env = self
                    .activity
                    .item()
                    .filter(|e| e.id == h.id)
                    .or_else(|| self.queue.get(h.id))?;
                Some((env.clone(), h.entry))
            })
            .collect()
    }

    /// Arms the timer that adopts the oldest held item once it has been held its time (none
    /// if one is armed or nothing is held).
    fn arm_hold_timer(&mut self, ctx: &mut Context<Self>) {
        let Some(held) = self.held.as_mut() else {
            return;
        };
        if held.items.is_empty() {
            if let Some(timer) = held.timer.take() {
                ctx.cancel_future(timer);
            }
            self.held = None;
            return;
        }
        if held.timer.is_some() {
            return;
        }
        let now = Instant::now();
        let Some(due) = held
            .items
            .iter()
            .filter(|h| h.state == HoldState::Held)
            .map(|h| (h.since + h.entry.hold_for).saturating_duration_since(now))
            .min()
        else {
            return;
        };
        held.timer = Some(ctx.run_later(due, |act, ctx| act.hold_time_over(ctx)));
    }

    /// The oldest held items have been held their time: the turn's deferred start is written,
    /// and they are adopted.
    fn hold_time_over(&mut self, ctx: &mut Context<Self>) {
        if let Some(held) = self.held.as_mut() {
            held.timer = None;
        }
        if matches!(self.activity, Activity::Stopping) {
            return;
        }
        self.release_deferred_flush(ctx);
        let Some((ids, pushes)) = self.adoption(false) else {
            self.arm_hold_timer(ctx);
            return;
        };
        self.writes.push_started();
        ctx.wait(pushes.into_actor(self).map(move |results, act, ctx| {
            act.adopted(ids, results, ctx);
            if act.writes.push_answered() {
                act.schedule_flush(ctx);
            }
        }));
    }
}

/// Adopts the items a stopping agent held (`held`, from [`AgentActor::take_held`]): pushed to
/// its durable inbox, then their entries acknowledged, so its next activation (here, or in
/// the partition's next owner) resumes from them. A push that fails (the partition's lease is
/// gone) leaves its entry pending, for the partition's next owner.
pub(super) async fn adopt_on_stop(
    store: &Arc<dyn crate::ports::ThreadStore>,
    agent_id: &str,
    held: Vec<(Envelope, Arc<StreamEntry>)>,
) {
    if held.is_empty() {
        return;
    }
    let pushes = held.iter().map(|(env, _)| store.inbox_push(agent_id, env));
    let results = futures::future::join_all(pushes).await;
    let shared: Arc<str> = agent_id.into();
    let acks: Vec<StoreWrite> = held
        .into_iter()
        .zip(results)
        .filter_map(|((env, entry), res)| match res {
            Ok(_) => Some(StoreWrite::Acknowledge {
                agent_id: shared.clone(),
                entry,
            }),
            Err(e) => {
                tracing::warn!(agent_id, message_id = %env.id, error = %e, "a held item of a stopping agent stays in its stream entry");
                None
            }
        })
        .collect();
    if !acks.is_empty()
        && let Err(e) = store.write_batch(&acks).await
    {
        tracing::warn!(agent_id, error = %e, "acknowledging the held entries of a stopping agent failed; they are delivered again");
    }
}
