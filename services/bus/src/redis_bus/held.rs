//! The entries this process delivers to its agents (see [`StreamEntry`]): the ownership period
//! each was read in, which ones agents hold now, so that a claim of this process's own pending
//! entries (after a lost connection) does not deliver them a second time, and which one an
//! agent let go without acknowledging it, so that its partition is claimed again and the entry
//! delivered anew. Their flushes acknowledge what they held without trimming the stream, and the
//! reader's own acknowledgements are plain `XACK`s too, so the reader trims a partition's
//! stream every `batch` entries it read there (and the lease round trims every owned one): a
//! stream holds what is pending or unread, plus at most about a batch and one node of its
//! listpacks, however fast it is read.
//!
//! What is out is also the reader's back-pressure: a partition whose agents hold
//! [`MOST_OUT`] entries is not read until some are let go. A flood of messages then waits
//! unread in its stream — durable, in order, and costing nothing more — instead of being read
//! into agents that hold only so many each and push the rest into their durable inboxes, each
//! push a write of its own.

use super::RedisBus;
use agentd_ports::{EntryWatch, StreamEntry};
use agentd_store::RedisConnection;
use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Notify;

/// Entries of one partition out with its agents at most before the reader stops reading it
/// (it may read up to a batch past it): far more than a partition's agents start at once in
/// normal traffic, so that only a flood is held back.
pub(super) const MOST_OUT: usize = 1_024;

/// Per partition: its ownership period (counted up each time it is to be claimed again, see
/// [`RedisBus::claim_and_drain`]), the ids of the entries delivered to agents and not let go
/// yet, and the entries read since its stream was last trimmed.
pub(super) struct HeldEntries {
    epochs: Vec<AtomicU64>,
    out: Vec<Mutex<HashSet<String>>>,
    read_since_trim: Vec<AtomicUsize>,
    /// Told when a partition's out entries fall below [`MOST_OUT`].
    room: Notify,
}

impl HeldEntries {
    pub(super) fn new(partitions: u32) -> Self {
        let n = partitions.max(1) as usize;
        HeldEntries {
            epochs: (0..n).map(|_| AtomicU64::new(0)).collect(),
            out: (0..n).map(|_| Mutex::new(HashSet::new())).collect(),
            read_since_trim: (0..n).map(|_| AtomicUsize::new(0)).collect(),
            room: Notify::new(),
        }
    }

    fn of(&self, k: u32) -> Option<std::sync::MutexGuard<'_, HashSet<String>>> {
        self.out.get(k as usize).and_then(|m| m.lock().ok())
    }

    /// Partition `k`'s ownership period now.
    pub(super) fn epoch(&self, k: u32) -> u64 {
        self.epochs
            .get(k as usize)
            .map_or(0, |e| e.load(Ordering::SeqCst))
    }

    /// Partition `k` is to be claimed again: a new ownership period starts, and what was read
    /// before it is no longer taken by agents.
    pub(super) fn next_epoch(&self, k: u32) {
        if let Some(e) = self.epochs.get(k as usize) {
            e.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// How many entries of partition `k` are out with agents.
    pub(super) fn count(&self, k: u32) -> usize {
        self.of(k).map_or(0, |s| s.len())
    }

    /// Whether partition `k`'s agents hold so many entries that it is not read now.
    pub(super) fn is_full(&self, k: u32) -> bool {
        self.count(k) >= MOST_OUT
    }

    /// Waits until a full partition has room again, or `at_most`.
    pub(super) async fn wait_for_room(&self, at_most: Duration) {
        let _ = tokio::time::timeout(at_most, self.room.notified()).await;
    }

    /// Entry `id` of partition `k` is no longer out.
    fn let_go(&self, k: u32, id: &str) {
        let Some(mut s) = self.of(k) else { return };
        if s.remove(id) && s.len() + 1 == MOST_OUT {
            self.room.notify_one();
        }
    }

    /// Counts `n` entries read from partition `k`; answers whether `every` or more were read
    /// since it last answered so (and starts counting again).
    fn read_reaches(&self, k: u32, n: usize, every: usize) -> bool {
        let Some(c) = self.read_since_trim.get(k as usize) else {
            return false;
        };
        if c.fetch_add(n, Ordering::Relaxed) + n < every {
            return false;
        }
        c.store(0, Ordering::Relaxed);
        true
    }

    /// Whether entry `id` of partition `k` is out with an agent.
    pub(super) fn holds(&self, k: u32, id: &str) -> bool {
        self.of(k).is_some_and(|s| s.contains(id))
    }
}

impl RedisBus {
    /// Whether agents may hold the entries they are delivered (`redis.hold_ms` > 0).
    pub(super) fn offers_holds(&self) -> bool {
        self.cfg.hold_ms > 0
    }

    /// Notes `n` entries read from partition `k` to hand to its agents: every `batch` of them,
    /// its stream is trimmed (in the background; the reader reads on).
    pub(super) fn note_read(self: &Arc<Self>, k: u32, n: usize) {
        if !self.offers_holds() || !self.held.read_reaches(k, n, self.cfg.batch.max(1)) {
            return;
        }
        let bus = self.clone();
        tokio::spawn(async move {
            let mut con = bus.con.clone();
            bus.trim(k, &mut con).await;
        });
    }

    /// Trims partition `k`'s stream below what is still pending (the `TRIM` script). Best
    /// effort: a stream not trimmed now is trimmed the next time.
    pub(super) async fn trim(&self, k: u32, con: &mut RedisConnection) {
        let trimmed: redis::RedisResult<i64> = self
            .scripts
            .trim
            .key(&*self.keys.partition_key(k))
            .arg(crate::streams::GROUP)
            .invoke_async(con)
            .await;
        if let Err(e) = trimmed {
            tracing::debug!(partition = k, error = %e, "trimming a partition stream failed");
        }
    }

    /// Entry `id` of partition `k` (stream `stream`), read for the first time in the
    /// partition's ownership period `epoch`, to deliver to its agent, which may hold it if
    /// holds are on; noted as out until it is let go.
    pub(super) fn entry(
        self: &Arc<Self>,
        (k, epoch): (u32, u64),
        stream: &Arc<str>,
        id: &str,
    ) -> Arc<StreamEntry> {
        if !self.offers_holds() {
            return self.unheld_entry((k, epoch), stream, id);
        }
        if let Some(mut s) = self.held.of(k) {
            s.insert(id.to_string());
        }
        let watch: Arc<dyn EntryWatch> = self.clone();
        StreamEntry::new(
            stream.clone(),
            k,
            epoch,
            id.to_string(),
            Duration::from_millis(self.cfg.hold_ms),
            Some(watch),
        )
    }

    /// Entry `id` of partition `k` (stream `stream`), read in the partition's ownership period
    /// `epoch`, to deliver to its agent, which may not hold it (it may have been delivered
    /// before: a claimed entry): the reader acknowledges it once it is pushed.
    pub(super) fn unheld_entry(
        &self,
        (k, epoch): (u32, u64),
        stream: &Arc<str>,
        id: &str,
    ) -> Arc<StreamEntry> {
        StreamEntry::new(
            stream.clone(),
            k,
            epoch,
            id.to_string(),
            Duration::ZERO,
            None,
        )
    }
}

impl EntryWatch for RedisBus {
    fn released(&self, entry: &StreamEntry) {
        self.held.let_go(entry.partition, &entry.id);
        if !entry.is_taken() || entry.is_acknowledged() || self.stopping.load(Ordering::SeqCst) {
            return;
        }
        let k = entry.partition;
        if !self.owned().contains(&k) {
            // The partition's next owner claims it.
            return;
        }
        tracing::warn!(
            partition = k,
            entry = %entry.id,
            "an agent let a held entry go without acknowledging it; claiming its partition again"
        );
        if let Ok(mut c) = self.to_claim.write() {
            c.insert(k);
        }
    }
}
