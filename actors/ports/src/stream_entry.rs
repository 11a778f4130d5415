//! A partition stream entry delivered to an agent, which may *hold* it: the stream itself is
//! then the item's durable copy until the turn that handles it is written.
//!
//! A transport that reads envelopes from a durable stream (Redis partition streams) delivers
//! each entry with a [`StreamEntry`]. It names the period of the partition's ownership it was
//! read in ([`StreamEntry::epoch`]): an agent takes it only while that period lasts, so a
//! delivery read before the partition went stale (whose older entries the transport claims and
//! delivers again) is never taken after them.
//!
//! An agent that can start on the item at once (or right after the items it holds the same
//! way) holds it: it queues the item without writing it to its durable inbox, and the entry
//! stays pending in the stream's consumer group. The flush that records the item's end (its
//! input and answer entries, the record) also acknowledges the entry
//! ([`StoreWrite::Acknowledge`](super::StoreWrite::Acknowledge)), in the same atomic write:
//! either both happened or neither, and an entry left pending is read again by whoever owns the
//! partition next, which runs the item again (its outputs carry ids derived from its input, so
//! what the first run wrote is not doubled).
//!
//! An item held longer than [`StreamEntry::hold_for`] (a slow model call, a pause, a wait for a
//! tool) is *adopted*: pushed to the durable inbox and its entry acknowledged, so that an entry
//! never keeps the stream from being trimmed for long.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// One entry of a partition stream, delivered to the agent it is addressed to (see the module
/// doc). Shared between the transport, the agent that holds it and the write that acknowledges
/// it; when the last of them lets it go, the transport hears of it ([`EntryWatch`]), and so knows
/// which entries its agents still hold and which one an agent let go without acknowledging.
pub struct StreamEntry {
    /// The partition stream's key.
    pub stream: Arc<str>,
    /// The partition's number.
    pub partition: u32,
    /// The period of the partition's ownership the entry was read in (the transport's count).
    pub epoch: u64,
    /// The entry's id in that stream.
    pub id: String,
    /// How long the agent may hold it before adopting it into its durable inbox; zero: it may
    /// not hold it (the transport acknowledges it once the item is pushed).
    pub hold_for: Duration,
    /// Set by the agent that holds it: the transport then leaves the entry pending.
    taken: AtomicBool,
    /// Set by the store once a write acknowledged the entry.
    acknowledged: AtomicBool,
    /// Told when the entry is let go.
    watch: Option<Arc<dyn EntryWatch>>,
}

/// What the transport hears of the entries its agents held.
pub trait EntryWatch: Send + Sync + 'static {
    /// `entry` is let go: not taken (its delivery pushed the item, the transport acknowledges
    /// the entry), acknowledged ([`StreamEntry::is_acknowledged`]), or taken and dropped without
    /// (its agent stopped before its item ended, or could not adopt it): then the entry is
    /// still pending, and must be delivered again.
    fn released(&self, entry: &StreamEntry);
}

impl std::fmt::Debug for StreamEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StreamEntry")
            .field("stream", &self.stream)
            .field("id", &self.id)
            .field("taken", &self.is_taken())
            .field("acknowledged", &self.is_acknowledged())
            .finish()
    }
}

/// Two held entries are the same entry when they name the same stream entry.
impl PartialEq for StreamEntry {
    fn eq(&self, other: &Self) -> bool {
        self.stream == other.stream && self.id == other.id
    }
}

impl StreamEntry {
    /// Entry `id` of stream `stream` (partition `partition`), read in ownership period
    /// `epoch`, delivered to an agent that may hold it for `hold_for`; `watch` hears when it is
    /// let go.
    pub fn new(
        stream: Arc<str>,
        partition: u32,
        epoch: u64,
        id: String,
        hold_for: Duration,
        watch: Option<Arc<dyn EntryWatch>>,
    ) -> Arc<Self> {
        Arc::new(StreamEntry {
            stream,
            partition,
            epoch,
            id,
            hold_for,
            taken: AtomicBool::new(false),
            acknowledged: AtomicBool::new(false),
            watch,
        })
    }

    /// The agent holds the entry: the transport must not acknowledge it.
    pub fn take(&self) {
        self.taken.store(true, Ordering::Release);
    }

    /// Whether an agent holds the entry (checked by the transport once the delivery answered).
    pub fn is_taken(&self) -> bool {
        self.taken.load(Ordering::Acquire)
    }

    /// A write acknowledged the entry (called by the store once the write is stored).
    pub fn acknowledge(&self) {
        self.acknowledged.store(true, Ordering::Release);
    }

    /// Whether a write acknowledged the entry.
    pub fn is_acknowledged(&self) -> bool {
        self.acknowledged.load(Ordering::Acquire)
    }
}

impl Drop for StreamEntry {
    fn drop(&mut self) {
        if let Some(watch) = self.watch.take() {
            watch.released(self);
        }
    }
}
