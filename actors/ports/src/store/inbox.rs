//! The concern of what waits for an agent: its durable inbox, and the outbox of outputs that
//! wait for their parent in this process.

use super::{StoreKind, StoreResult, StoreWrite};
use agentd_proto::Envelope;
use async_trait::async_trait;
use uuid::Uuid;

/// What [`Inboxes::inbox_push_then`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pushed {
    /// The envelope was new, and is queued now.
    pub fresh: bool,
    /// The writes given with it were applied with it.
    pub then_applied: bool,
}

/// How many envelope ids per agent the stores remember for de-duplication.
pub const DEDUP_WINDOW: usize = 10_000;

/// Inboxes: each agent's durable queue of envelopes, each id queued once (within
/// [`DEDUP_WINDOW`]), in arrival order until done; and the outbox, the outputs of children to
/// parents in this process kept from the batch they were made in until their parent handled
/// them (only a store that [`Self::keeps_outbox`]).
#[async_trait]
pub trait Inboxes: StoreKind {
    /// Durably queues an envelope for an agent, once: returns `false` (and changes nothing) if
    /// an envelope with the same id was queued before (within the de-duplication window of the
    /// last [`DEDUP_WINDOW`] ids). A transport acknowledges its entry only after this returns.
    async fn inbox_push(&self, agent_id: &str, env: &Envelope) -> StoreResult<bool>;

    /// [`inbox_push`](Self::inbox_push), and only if `env` was new, `then` in the same
    /// atomic write where the backend can: an item that starts a turn at once carries the
    /// turn's first writes (its input entry, the `running` record), one commit or round trip
    /// instead of two. A duplicate changes nothing. By default `then` is not applied (the
    /// caller writes it itself), so a store without atomic multi-writes loses nothing.
    async fn inbox_push_then(
        &self,
        agent_id: &str,
        env: &Envelope,
        _then: &[StoreWrite],
    ) -> StoreResult<Pushed> {
        Ok(Pushed {
            fresh: self.inbox_push(agent_id, env).await?,
            then_applied: false,
        })
    }

    /// The envelopes queued for an agent and not yet done, in arrival order (an activated agent
    /// resumes from them after a restart or a failover).
    async fn inbox_pending(&self, agent_id: &str) -> StoreResult<Vec<Envelope>>;

    /// Marks a queued envelope handled (its turn finished).
    async fn inbox_done(&self, agent_id: &str, env_id: Uuid) -> StoreResult<()>;

    /// Whether [`StoreWrite::Outbox`] can be part of this store's batches: a durable store
    /// that is not a bus (on a bus, outputs travel through partition streams; a store in
    /// memory loses its outbox with the process anyway).
    fn keeps_outbox(&self) -> bool {
        false
    }

    /// The outputs kept by [`StoreWrite::Outbox`] and not done yet, oldest first.
    async fn outbox_pending(&self) -> StoreResult<Vec<Envelope>> {
        Ok(Vec::new())
    }

    /// Forgets the kept output `env_id`: its parent's router has handled it (an unknown id
    /// changes nothing).
    async fn outbox_done(&self, env_id: Uuid) -> StoreResult<()> {
        let _ = env_id;
        Ok(())
    }
}
