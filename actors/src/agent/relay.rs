//! Relayed forwards (seed 000): a parent whose type says `manage.async_forward = "relay"` keeps a
//! worker's forwarded answer on its thread, as the seed says, without spending a model turn on
//! it. Only roots manage workers, so such a parent is a root: the forward reaches the world
//! through the events stream (the `forwarded` event every forward publishes), and the root's
//! model sees it with its next message — as input: the entry keeps the seed's `assistant` role,
//! and every model backend sends it in the role it is heard in, the user's
//! (`agentd_proto::conversation::heard_role`).

use super::AgentActor;
use crate::ports::StoreWrite;
use actix::prelude::*;
use agentd_proto::ids::derived_id;
use agentd_proto::{Envelope, InboxItem, Item, ThreadEntry};
use std::sync::Arc;

/// Whether `env` is a forward to relay rather than to run a turn on.
pub(super) fn relays(env: &Envelope) -> bool {
    matches!(
        env.item,
        Item::Inbox(InboxItem::Message { relay: true, .. })
    )
}

impl AgentActor {
    /// Relays `env` (see [`relays`]): its entry joins the thread and the item is done, in one
    /// batch.
    pub(super) fn relay(&mut self, env: Envelope, ctx: &mut Context<Self>) {
        let Item::Inbox(InboxItem::Message {
            text,
            role,
            from_agent,
            ..
        }) = &env.item
        else {
            return;
        };
        let mut entry = ThreadEntry::text(
            derived_id(env.id, "input"),
            *role,
            text.clone(),
            self.deps().clock.now_ms(),
        );
        entry.from_agent = from_agent.as_deref().map(Into::into);
        let entry = Arc::new(entry);
        if let Some(thread) = &mut self.thread {
            Arc::make_mut(thread).push(Arc::clone(&entry));
        }
        let agent_id = self.shared_id();
        self.write_later(StoreWrite::Append { agent_id, entry }, ctx);
        self.done(Some(env.id), ctx);
    }
}
