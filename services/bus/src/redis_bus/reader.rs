//! The partition reader: one loop per process on a connection of its own. Each round it first
//! claims what partitions just taken hold pending, then reads every readable partition (but
//! one whose agents hold too many of its entries: [`super::held`]) with one blocking
//! `XREADGROUP` (`BLOCK` ≤ the takeover margin, so a read answers before the partition it was
//! sent for can be taken from this process) — on a Redis Cluster, where a read names streams of one slot, one
//! read per partition on a connection of its own, all at once — and hands what it read over:
//! batches the router takes as they are go into the [`InFlight`] window and the reader reads
//! on; anything else waits for what came before it.

use super::RedisBus;
use super::delivery::routes_directly;
use super::in_flight::InFlight;
use crate::blocking::BlockingConnection;
use crate::streams::{Backoff, GROUP, be};
use agentd_ports::Inbound;
use agentd_proto::AgentdError;
use agentd_store::RedisConnection;
use futures::StreamExt;
use redis::streams::{StreamId, StreamKey, StreamPendingReply, StreamReadReply};
use std::collections::BTreeSet;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

/// How long the reader waits for a partition held back ([`HeldEntries::is_full`]) to have room
/// before it looks again.
///
/// [`HeldEntries::is_full`]: super::held::HeldEntries::is_full
const FULL_WAIT: Duration = Duration::from_millis(20);

/// The partition reader's connections.
enum PartitionReaders {
    /// One Redis: one connection reads every partition at once (and its client id, to end a
    /// read blocked on it).
    One(BlockingConnection, i64),
    /// A Redis Cluster: a connection per owned partition, following its slot.
    Each(EachPartition),
}

/// The partition reader's connections on a Redis Cluster.
#[derive(Default)]
struct EachPartition {
    /// One per owned partition.
    readers: HashMap<u32, BlockingConnection>,
    /// The last round read something: the next one does not block.
    busy: bool,
}

impl RedisBus {
    /// Runs the partition reader until the bus stops, reconnecting after errors.
    pub(super) async fn read_loop(self: Arc<Self>, system: Arc<dyn Inbound>) {
        let mut backoff = Backoff::new();
        while !self.stopping.load(Ordering::SeqCst) {
            match self.clone().read_until_error(&system).await {
                Ok(()) => return,
                Err(e) => {
                    tracing::warn!(error = %e, backoff_ms = backoff.current().as_millis() as u64, "partition reader lost Redis; reconnecting");
                    backoff.wait().await;
                }
            }
        }
    }

    async fn read_until_error(
        self: Arc<Self>,
        system: &Arc<dyn Inbound>,
    ) -> Result<(), AgentdError> {
        let mut inflight = InFlight::default();
        let res = self.read_with(system, &mut inflight).await;
        // Nothing is claimed again (after an error) or given up (stopping) while deliveries of
        // earlier reads are still under way.
        let rest = inflight.finish().await;
        res.and(rest)
    }

    async fn read_with(
        self: &Arc<Self>,
        system: &Arc<dyn Inbound>,
        inflight: &mut InFlight,
    ) -> Result<(), AgentdError> {
        let mut readers = if self.cfg.target.is_cluster() {
            PartitionReaders::Each(EachPartition::default())
        } else {
            let mut reader = self.blocking_reader().await?;
            let id: i64 = redis::cmd("CLIENT")
                .arg("ID")
                .query_async(&mut reader)
                .await
                .map_err(be)?;
            PartitionReaders::One(reader, id)
        };
        let mut con = self.con.clone();
        // Entries this consumer read before an error but did not acknowledge are in its pending
        // list, which `>` never returns again: claim them first, and drain the partitions
        // again meanwhile so that nothing newer overtakes them.
        for k in self.owned() {
            self.claim_and_drain(k);
        }
        while !self.stopping.load(Ordering::SeqCst) {
            self.claim_taken(system, inflight, &mut con).await?;
            let readable = self.readable();
            if readable.is_empty() {
                inflight.finish().await?;
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
            // Partitions whose agents hold too much are read again once they have room.
            let (owned, full): (Vec<u32>, Vec<u32>) =
                readable.into_iter().partition(|k| !self.held.is_full(*k));
            if owned.is_empty() {
                self.held.wait_for_room(FULL_WAIT).await;
                continue;
            }
            // While one is held back, a read blocks briefly, so that it is read soon after it
            // has room.
            let block_ms = if full.is_empty() {
                self.times().read_block_ms()
            } else {
                FULL_WAIT.as_millis() as u64
            };
            inflight.make_room(self.cfg.batch * owned.len()).await?;
            // The ownership period each partition is read in: what a read returns after its
            // partition went stale and was renewed meanwhile is claimed again, in order.
            let epochs: HashMap<u32, u64> =
                owned.iter().map(|k| (*k, self.held.epoch(*k))).collect();
            let (streams, taken_late) = self.read_round(&mut readers, &owned, block_ms).await?;
            if !taken_late.is_empty() {
                inflight.finish().await?;
                for k in &taken_late {
                    tracing::warn!(
                        partition = *k,
                        "entries of an owned partition pending with another consumer; claiming them before anything newer"
                    );
                    self.claim(*k, system, &mut con).await?;
                }
            }
            let streams: Vec<_> = streams
                .into_iter()
                .filter(|s| {
                    !taken_late
                        .iter()
                        .any(|k| self.keys.partition_key(*k) == s.key.as_str())
                })
                .collect();
            // A draining partition that had nothing unread may be drained: the router checks
            // it between two routed messages (see `settle`).
            let quiet = self.draining.read().is_ok_and(|d| {
                d.iter().any(|k| {
                    let key = self.keys.partition(*k);
                    owned.contains(k) && !streams.iter().any(|s| s.key == key)
                })
            });
            for stream in streams {
                self.dispatch(&epochs, stream, system, inflight, &mut con)
                    .await?;
            }
            if quiet {
                // The drain check needs what was read acknowledged.
                inflight.finish().await?;
                system.settle_transport().await?;
            }
        }
        Ok(())
    }

    /// The partitions to read new entries (`>`) from: owned, with a fresh lease, and with
    /// nothing left to claim. A partition taken (or renewed after going stale) while the reader
    /// was busy waits for its claim: reading newer entries first would overtake what the
    /// previous holder left pending. (Each flag is set before the one checked ahead of it
    /// here, so a reader that sees a partition owned and fresh also sees its claim.)
    fn readable(&self) -> Vec<u32> {
        let owned: Vec<u32> = self
            .owned()
            .into_iter()
            .filter(|k| self.fresh(*k))
            .collect();
        let to_claim = self.to_claim.read().map(|c| c.clone()).unwrap_or_default();
        owned
            .into_iter()
            .filter(|k| !to_claim.contains(k))
            .collect()
    }

    /// One blocking read of partitions `owned` (`>`: entries no consumer has read). Answers
    /// what it read, and the partitions among them whose entries are pending with another
    /// consumer.
    async fn read_round(
        &self,
        readers: &mut PartitionReaders,
        owned: &[u32],
        block_ms: u64,
    ) -> Result<(Vec<StreamKey>, BTreeSet<u32>), AgentdError> {
        self.reading.store(true, Ordering::SeqCst);
        let read = match readers {
            PartitionReaders::One(reader, id) => {
                self.blocked_on(vec![(String::new(), 0, *id)]);
                let read = self.read_together(reader, owned, block_ms).await;
                self.blocked_on(Vec::new());
                read
            }
            PartitionReaders::Each(each) => self.read_each(each, owned, block_ms).await,
        };
        self.reading.store(false, Ordering::SeqCst);
        self.read_rounds.fetch_add(1, Ordering::SeqCst);
        read
    }

    /// One Redis: every partition in one `XREADGROUP`.
    async fn read_together(
        &self,
        reader: &mut BlockingConnection,
        owned: &[u32],
        block_ms: u64,
    ) -> Result<(Vec<StreamKey>, BTreeSet<u32>), AgentdError> {
        let reply: Vec<redis::Value> = self
            .read_pipeline(owned, Some(block_ms))
            .query_async(reader)
            .await
            .map_err(be)?;
        self.read_reply(owned, reply)
    }

    /// A Redis Cluster: a read names keys of one slot, so each partition is read on a
    /// connection of its own (to the node serving its slot, following it when it moves), all
    /// at once; the round, like one read of every partition, ends when every read has come
    /// back. While partitions have entries (the round before read some), the reads do not
    /// block: they come back at once, and the next round reads on. An idle reader's reads
    /// block; as soon as one of them returns entries (or fails), those still blocked are ended
    /// (`CLIENT UNBLOCK`, which returns them empty, having taken nothing), so that what was
    /// read is handed over at once, not a block time later.
    async fn read_each(
        &self,
        each: &mut EachPartition,
        owned: &[u32],
        block_ms: u64,
    ) -> Result<(Vec<StreamKey>, BTreeSet<u32>), AgentdError> {
        let holding = self.owned();
        each.readers.retain(|k, _| holding.contains(k));
        for k in owned {
            if !each.readers.contains_key(k) {
                each.readers.insert(*k, self.blocking_reader().await?);
            }
        }
        let block = !each.busy;
        let mut blocked: HashMap<u32, (String, u16, i64)> = HashMap::new();
        let mut reads = futures::stream::FuturesUnordered::new();
        for (k, reader) in each.readers.iter_mut().filter(|(k, _)| owned.contains(k)) {
            if let Some(client) = reader.blocked_client().filter(|_| block) {
                blocked.insert(*k, client);
            }
            let k = *k;
            let pipe = self.read_pipeline(&[k], block.then_some(block_ms));
            reads.push(async move {
                let reply: redis::RedisResult<Vec<redis::Value>> = pipe.query_async(reader).await;
                (k, reply)
            });
        }
        self.blocked_on(blocked.values().cloned().collect());
        let mut streams = Vec::new();
        let mut taken_late = BTreeSet::new();
        let mut failed = None;
        let mut unblocked = false;
        while let Some((k, reply)) = reads.next().await {
            blocked.remove(&k);
            let got = match reply.map_err(be).and_then(|r| self.read_reply(&[k], r)) {
                Ok((read, late)) => {
                    let got = !read.is_empty() || !late.is_empty();
                    streams.extend(read);
                    taken_late.extend(late);
                    got
                }
                Err(e) => {
                    failed.get_or_insert(e);
                    true
                }
            };
            if got && !unblocked && !blocked.is_empty() {
                unblocked = true;
                self.unblock(blocked.values()).await;
            }
        }
        self.blocked_on(Vec::new());
        each.busy = !streams.is_empty();
        match failed {
            // What the other reads returned stays pending here: the reader claims it again
            // once it has reconnected.
            Some(e) => Err(e),
            None => Ok((streams, taken_late)),
        }
    }

    /// Notes the connections (node, client id) a read is about to block on: a partition taken
    /// meanwhile ends that read ([`Self::wake_reader`]).
    fn blocked_on(&self, clients: Vec<(String, u16, i64)>) {
        if let Ok(mut b) = self.blocked_reads.lock() {
            *b = clients;
        }
    }

    /// Ends the blocked read under way, if any, so that the reader claims the partitions just
    /// taken at once, not a block time later.
    pub(super) fn wake_reader(self: &Arc<Self>) {
        let clients = self
            .blocked_reads
            .lock()
            .map(|b| b.clone())
            .unwrap_or_default();
        if clients.is_empty() {
            return;
        }
        let me = self.clone();
        actix_rt::spawn(async move { me.unblock(clients.iter()).await });
    }

    /// Ends the reads blocked on `clients` (node, client id), which then return nothing.
    /// Best effort: a read not ended returns after its block time anyway.
    async fn unblock<'a>(&self, clients: impl Iterator<Item = &'a (String, u16, i64)>) {
        let ends = clients.map(|(host, port, id)| {
            let mut con = self.con.clone();
            let host = host.clone();
            let port = *port;
            let id = *id;
            async move {
                let unblock = redis::cmd("CLIENT").arg("UNBLOCK").arg(id).clone();
                let _: redis::RedisResult<i64> = con.query_on_node(&host, port, &unblock).await;
            }
        });
        futures::future::join_all(ends).await;
    }

    /// The read of partitions `owned` (one `XREADGROUP` of them all, blocking up to `block` ms
    /// if given), then one `XPENDING` each: who else holds entries of these partitions, asked
    /// right after the read (the same round trip: Redis runs it once the read has returned).
    fn read_pipeline(&self, owned: &[u32], block: Option<u64>) -> redis::Pipeline {
        let mut pipe = redis::pipe();
        let read = pipe.cmd("XREADGROUP");
        read.arg("GROUP")
            .arg(GROUP)
            .arg(&self.cfg.process_id)
            .arg("COUNT")
            .arg(self.cfg.batch);
        if let Some(ms) = block {
            read.arg("BLOCK").arg(ms);
        }
        read.arg("STREAMS");
        for k in owned {
            read.arg(&*self.keys.partition_key(*k));
        }
        for _ in owned {
            read.arg(">");
        }
        for k in owned {
            pipe.cmd("XPENDING")
                .arg(&*self.keys.partition_key(*k))
                .arg(GROUP);
        }
        pipe
    }

    /// What the answer to [`Self::read_pipeline`] of `owned` holds: the entries read, and the
    /// partitions whose entries are pending with another consumer.
    fn read_reply(
        &self,
        owned: &[u32],
        reply: Vec<redis::Value>,
    ) -> Result<(Vec<StreamKey>, BTreeSet<u32>), AgentdError> {
        let mut replies = reply.into_iter();
        let streams = match replies.next() {
            // Owned: converting from a reference would copy every entry once more.
            Some(v) => redis::from_redis_value::<Option<StreamReadReply>>(v)
                .map_err(|e| be(e.into()))?
                .map(|r| r.keys)
                .unwrap_or_default(),
            None => Vec::new(),
        };
        // Entries of a partition this process owns, pending with another consumer: a
        // process that lost the partition read them late (a read it had sent before it
        // stalled, answered after this process had claimed what it left). They are older
        // than what this read returned, so every pending entry of that partition — the
        // ones just read included — is claimed and delivered in order first; without this
        // nothing would ever claim them, and newer entries would overtake them.
        let mut taken_late = BTreeSet::new();
        for (k, pending) in owned.iter().zip(replies) {
            let pending = redis::from_redis_value_ref::<StreamPendingReply>(&pending)
                .map_err(|e| be(e.into()))?;
            if let StreamPendingReply::Data(data) = pending
                && data
                    .consumers
                    .iter()
                    .any(|c| c.pending > 0 && c.name != self.cfg.process_id)
                && self.fresh(*k)
            {
                taken_late.insert(*k);
            }
        }
        Ok((streams, taken_late))
    }

    /// Hands over what one read returned for one of the partitions read (`epochs`: each with
    /// the ownership period it was read in): a batch the router takes as it is joins the
    /// in-flight window; anything else waits for what came before it.
    async fn dispatch(
        self: &Arc<Self>,
        epochs: &HashMap<u32, u64>,
        stream: StreamKey,
        system: &Arc<dyn Inbound>,
        inflight: &mut InFlight,
        con: &mut RedisConnection,
    ) -> Result<(), AgentdError> {
        let read = epochs
            .iter()
            .find(|(k, _)| self.keys.partition_key(**k) == stream.key.as_str())
            .filter(|(k, epoch)| self.fresh(**k) && self.held.epoch(**k) == **epoch)
            .map(|(k, epoch)| (*k, *epoch));
        let Some((partition, epoch)) = read else {
            // The lease went stale (and maybe was renewed), or the partition was given up,
            // during the read: what it returned stays pending here, for this process once
            // renewed or for the next owner's claim (both claim before reading anything newer).
            tracing::warn!(stream = %stream.key, entries = stream.ids.len(), "partition no longer fresh after a read; leaving its entries pending");
            return Ok(());
        };
        self.note_read(partition, stream.ids.len());
        let decoded: Vec<_> = stream.ids.iter().map(|s| self.decode_entry(s)).collect();
        if decoded
            .iter()
            .all(|d| d.as_ref().is_ok_and(routes_directly))
        {
            let envs = decoded.into_iter().flatten().collect();
            let read = (partition, epoch);
            inflight.push(self.route_batch(read, stream.key, stream.ids, envs, system));
        } else {
            // Closes, deletes, child outputs and bad entries wait for what came
            // before them.
            inflight.finish().await?;
            let ids: Vec<&StreamId> = stream.ids.iter().collect();
            self.handle_entries((partition, epoch), &stream.key, &ids, decoded, system, con)
                .await?;
        }
        Ok(())
    }
}
