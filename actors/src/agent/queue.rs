//! The agent's inbox queue in memory: the items its durable inbox holds that have not started
//! a turn yet, in the order the agent handles them.
//!
//! Order (seed 000 and seed 004, `docs/reference.md`):
//! - an `interrupt` message goes first (its sender aborts the running turn before queuing it);
//! - an `urgent` message (a sub-agent's result) goes after the other urgent and interrupting
//!   items, which keep their order, and before everything else;
//! - anything else goes last;
//! - an interrupted turn's item that must run again (a rate limit, an unreachable store, an
//!   automatic retry) waits in a slot of its own and runs before everything queued, urgent items
//!   included;
//! - a watch of a dependent (`InboxItem::Watch`) reached while the agent is failed, cancelled or
//!   terminated, or dropped with the queue by a cancel, terminate or restore, is set aside
//!   (parked; it stays in the durable inbox) and queued first again once the agent is none of
//!   these: its dependent waits for a success.
//!
//! The queue keeps the `agentd_inbox_depth` gauge: it counts the queued items of every agent of
//! the process (the retry slot is not counted: its item was queued once already).

use agentd_proto::{Envelope, InboxItem, Item};
use std::collections::VecDeque;
use uuid::Uuid;

/// An agent's queued inbox items.
#[derive(Default)]
pub(super) struct InboxQueue {
    items: VecDeque<Envelope>,
    /// An interrupted turn's item: it runs again before anything in `items`.
    retry: Option<Box<Envelope>>,
    /// Parked watches, in the order they were queued (boxed: most agents never have one).
    #[allow(clippy::box_collection)] // one pointer in the actor, not a 24-byte vector
    parked: Option<Box<Vec<Envelope>>>,
}

/// Whether `env` is the watch of a dependent (see `supervisor/dependencies.rs`).
pub(super) fn is_watch(env: &Envelope) -> bool {
    matches!(env.item, Item::Inbox(InboxItem::Watch { .. }))
}

/// Whether `env` is a message that interrupts the running turn.
pub(super) fn interrupts(env: &Envelope) -> bool {
    matches!(
        env.item,
        Item::Inbox(InboxItem::Message {
            interrupt: true,
            ..
        })
    )
}

/// Whether `env` goes before ordinary items: an urgent or an interrupting message.
fn goes_first(env: &Envelope) -> bool {
    matches!(
        env.item,
        Item::Inbox(
            InboxItem::Message { urgent: true, .. }
                | InboxItem::Message {
                    interrupt: true,
                    ..
                }
        )
    )
}

impl InboxQueue {
    /// Queues `env` at its place (see the module doc). The caller aborts the running turn first
    /// when [`interrupts`] holds for it.
    #[inline]
    pub(super) fn push(&mut self, env: Envelope) {
        depth_changed(1.0);
        if interrupts(&env) {
            self.items.push_front(env);
        } else if goes_first(&env) {
            let at = self
                .items
                .iter()
                .position(|e| !goes_first(e))
                .unwrap_or(self.items.len());
            self.items.insert(at, env);
        } else {
            self.items.push_back(env);
        }
    }

    /// Queues `env` before everything queued (an answer the agent waited for).
    pub(super) fn push_front(&mut self, env: Envelope) {
        depth_changed(1.0);
        self.items.push_front(env);
    }

    /// Queues `env`, found at place `mine` of the durable inbox but queued nowhere, at that
    /// place: before the first queued item that `stored_at` places after it or does not place at
    /// all (it was not stored yet when the inbox was read).
    pub(super) fn insert_in_stored_order(
        &mut self,
        env: Envelope,
        mine: usize,
        stored_at: impl Fn(Uuid) -> Option<usize>,
    ) {
        let at = self
            .items
            .iter()
            .position(|q| stored_at(q.id).is_none_or(|theirs| theirs > mine))
            .unwrap_or(self.items.len());
        depth_changed(1.0);
        self.items.insert(at, env);
    }

    /// Keeps an interrupted turn's item to run again before anything queued.
    pub(super) fn retry_first(&mut self, env: Envelope) {
        debug_assert!(self.retry.is_none(), "one item is retried at a time");
        self.retry = Some(Box::new(env));
    }

    /// The item to run next: the retried one, else the first queued one.
    #[inline]
    pub(super) fn pop_next(&mut self) -> Option<Envelope> {
        if let Some(env) = self.retry.take() {
            return Some(*env);
        }
        let env = self.items.pop_front()?;
        depth_changed(-1.0);
        Some(env)
    }

    /// Whether nothing waits, retried item included.
    pub(super) fn is_empty(&self) -> bool {
        self.retry.is_none() && self.items.is_empty()
    }

    /// How many items are queued (the retried one not counted).
    pub(super) fn len(&self) -> usize {
        self.items.len()
    }

    /// How many watches are parked.
    pub(super) fn parked_len(&self) -> usize {
        self.parked.as_ref().map_or(0, |p| p.len())
    }

    /// Whether envelope `id` waits here (parked included).
    pub(super) fn holds(&self, id: Uuid) -> bool {
        self.retry.as_ref().is_some_and(|e| e.id == id)
            || self.items.iter().any(|e| e.id == id)
            || self
                .parked
                .as_ref()
                .is_some_and(|p| p.iter().any(|e| e.id == id))
    }

    /// Envelope `id`, if it waits here (the retried item included, parked watches not).
    pub(super) fn get(&self, id: Uuid) -> Option<&Envelope> {
        self.retry
            .as_deref()
            .filter(|e| e.id == id)
            .or_else(|| self.items.iter().find(|e| e.id == id))
    }

    /// Takes envelope `id` out of the queue (the retried item included, parked watches not);
    /// answers whether it was there.
    pub(super) fn remove(&mut self, id: Uuid) -> bool {
        if self.retry.as_ref().is_some_and(|e| e.id == id) {
            self.retry = None;
            return true;
        }
        match self.items.iter().position(|e| e.id == id) {
            Some(at) => {
                self.items.remove(at);
                depth_changed(-1.0);
                true
            }
            None => false,
        }
    }

    /// Sets watch `env` aside until [`Self::unpark_watches`].
    pub(super) fn park(&mut self, env: Envelope) {
        self.parked.get_or_insert_with(Box::default).push(env);
    }

    /// Queues the parked watches again, first, in their order.
    pub(super) fn unpark_watches(&mut self) {
        let Some(parked) = self.parked.take() else {
            return;
        };
        depth_changed(parked.len() as f64);
        for env in parked.into_iter().rev() {
            self.items.push_front(env);
        }
    }

    /// Empties the queue, parked watches included; answers the ids of what it held, for the
    /// caller to mark done in the durable inbox.
    pub(super) fn take_all(&mut self) -> Vec<Uuid> {
        depth_changed(-(self.items.len() as f64));
        let mut ids: Vec<Uuid> = self.items.drain(..).map(|e| e.id).collect();
        ids.extend(self.retry.take().map(|e| e.id));
        if let Some(parked) = self.parked.take() {
            ids.extend(parked.iter().map(|e| e.id));
        }
        ids
    }

    /// [`Self::take_all`], but the watches are parked, not taken: they stay in the durable
    /// inbox until the agent reaches them in a later success.
    pub(super) fn take_all_but_watches(&mut self) -> Vec<Uuid> {
        depth_changed(-(self.items.len() as f64));
        let mut ids = Vec::new();
        let taken = self.items.drain(..).chain(self.retry.take().map(|e| *e));
        let mut watches = Vec::new();
        for env in taken {
            if is_watch(&env) {
                watches.push(env);
            } else {
                ids.push(env.id);
            }
        }
        for env in watches {
            self.park(env);
        }
        ids
    }

    /// Forgets the queued items without marking them done (they stay in the durable inbox for
    /// the agent's next activation); the retried item stays.
    pub(super) fn forget_queued(&mut self) {
        depth_changed(-(self.items.len() as f64));
        self.items.clear();
        self.parked = None;
    }
}

/// Moves the `agentd_inbox_depth` gauge (inbox items queued in this process) by `delta`.
fn depth_changed(delta: f64) {
    static DEPTH: std::sync::OnceLock<agentd_observe::metrics::Counter> =
        std::sync::OnceLock::new();
    DEPTH
        .get_or_init(|| {
            agentd_observe::metrics::global().gauge(
                "agentd_inbox_depth",
                "Inbox items queued in this process.",
                &[],
            )
        })
        .add(delta);
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentd_proto::{Address, Role};

    /// How an item is sent.
    #[derive(Clone, Copy, PartialEq, Eq)]
    enum Sent {
        Plain,
        Interrupt,
        Urgent,
    }

    fn message(text: &str, sent: Sent) -> Envelope {
        let (interrupt, urgent) = (sent == Sent::Interrupt, sent == Sent::Urgent);
        Envelope::new(
            Address::System,
            Address::agent("a"),
            Item::Inbox(InboxItem::Message {
                text: text.into(),
                interrupt,
                urgent,
                role: Role::User,
                from_agent: None,
                relay: false,
            }),
            0,
        )
    }

    fn texts(q: &mut InboxQueue) -> Vec<String> {
        std::iter::from_fn(|| q.pop_next())
            .map(|e| match e.item {
                Item::Inbox(InboxItem::Message { text, .. }) => text,
                other => format!("{other:?}"),
            })
            .collect()
    }

    #[test]
    fn ordinary_items_keep_their_arrival_order() {
        let mut q = InboxQueue::default();
        for t in ["1", "2", "3"] {
            q.push(message(t, Sent::Plain));
        }
        assert_eq!(q.len(), 3);
        assert_eq!(texts(&mut q), ["1", "2", "3"]);
        assert!(q.is_empty());
    }

    #[test]
    fn one_item_is_taken_out_alone() {
        let mut q = InboxQueue::default();
        let (a, b, c) = (
            message("a", Sent::Plain),
            message("b", Sent::Plain),
            message("c", Sent::Plain),
        );
        let (b_id, c_id) = (b.id, c.id);
        q.push(a);
        q.push(b);
        q.retry_first(c);
        assert!(q.remove(b_id));
        assert!(!q.remove(b_id), "gone once taken");
        assert!(q.remove(c_id), "the retried item too");
        assert_eq!(texts(&mut q), ["a"]);
    }

    #[test]
    fn urgent_items_go_before_ordinary_ones_and_keep_their_own_order() {
        let mut q = InboxQueue::default();
        q.push(message("a", Sent::Plain));
        q.push(message("u1", Sent::Urgent));
        q.push(message("b", Sent::Plain));
        q.push(message("u2", Sent::Urgent));
        assert_eq!(texts(&mut q), ["u1", "u2", "a", "b"]);
    }

    #[test]
    fn an_interrupt_goes_first_even_before_urgent_items() {
        let mut q = InboxQueue::default();
        q.push(message("u", Sent::Urgent));
        q.push(message("a", Sent::Plain));
        q.push(message("stop", Sent::Interrupt));
        q.push(message("u2", Sent::Urgent));
        assert_eq!(texts(&mut q), ["stop", "u", "u2", "a"]);
    }

    #[test]
    fn a_retried_item_runs_before_everything_queued() {
        let mut q = InboxQueue::default();
        q.push(message("a", Sent::Plain));
        q.push(message("u", Sent::Urgent));
        q.retry_first(message("again", Sent::Plain));
        assert!(!q.is_empty());
        assert_eq!(q.len(), 2, "the retried item is not counted as queued");
        assert_eq!(texts(&mut q), ["again", "u", "a"]);
    }

    #[test]
    fn a_stored_but_unqueued_item_takes_its_place_in_the_stored_order() {
        let mut q = InboxQueue::default();
        let (first, second, third) = (
            message("1", Sent::Plain),
            message("2", Sent::Plain),
            message("3", Sent::Plain),
        );
        let late = message("late", Sent::Plain);
        let stored = [first.id, second.id, third.id];
        let (late_id, first_id) = (late.id, first.id);
        q.push(first);
        q.push(third);
        q.push(late);
        // Stored: 1, 2, 3; `late` was not stored when the inbox was read.
        let place = |id| stored.iter().position(|s| *s == id);
        q.insert_in_stored_order(second, 1, place);
        assert!(q.holds(late_id) && q.holds(first_id));
        assert_eq!(texts(&mut q), ["1", "2", "3", "late"]);
    }

    #[test]
    fn taking_all_answers_every_id_and_forgetting_keeps_the_retried_item() {
        let mut q = InboxQueue::default();
        let (a, b, r) = (
            message("a", Sent::Plain),
            message("b", Sent::Plain),
            message("r", Sent::Plain),
        );
        let ids = [a.id, b.id, r.id];
        q.push(a);
        q.push(b);
        q.retry_first(r);
        let mut taken = q.take_all();
        taken.sort();
        let mut expected = ids.to_vec();
        expected.sort();
        assert_eq!(taken, expected);
        assert!(q.is_empty());

        q.push(message("x", Sent::Plain));
        q.retry_first(message("kept", Sent::Plain));
        q.forget_queued();
        assert_eq!(q.len(), 0);
        assert_eq!(texts(&mut q), ["kept"]);
    }
}
