//! The partition reader: one loop per process on a connection of its own. Each round it first
//! claims what partitions just taken hold pending, then reads every readable partition with
//! one blocking `XREADGROUP` (`BLOCK` ≤ a quarter lease, so a read answers before a lease it
//! was sent under can expire), and hands what it read over: batches the router takes as they
//! are go into the [`InFlight`] window and the reader reads on; anything else waits for what
//! came before it.

use super::RedisBus;
use super::delivery::routes_directly;
use super::in_flight::InFlight;
use crate::streams::{Backoff, GROUP, be};
use agentd_actors::AgentSystem;
use agentd_proto::AgentdError;
use redis::aio::{ConnectionManager, MultiplexedConnection};
use redis::streams::{StreamId, StreamKey, StreamPendingReply, StreamReadReply};
use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

impl RedisBus {
    /// Runs the partition reader until the bus stops, reconnecting after errors.
    pub(super) async fn read_loop(self: Arc<Self>, system: AgentSystem) {
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

    async fn read_until_error(self: Arc<Self>, system: &AgentSystem) -> Result<(), AgentdError> {
        let mut inflight = InFlight::default();
        let res = self.read_with(system, &mut inflight).await;
        // Nothing is claimed again (after an error) or given up (stopping) while deliveries of
        // earlier reads are still under way.
        let rest = inflight.finish().await;
        res.and(rest)
    }

    async fn read_with(
        self: &Arc<Self>,
        system: &AgentSystem,
        inflight: &mut InFlight,
    ) -> Result<(), AgentdError> {
        let mut reader = self.blocking_reader().await?;
        let mut con = self.con.clone();
        // Entries this consumer read before an error but did not acknowledge are in its pending
        // list, which `>` never returns again: claim them first, and drain the partitions
        // again meanwhile so that nothing newer overtakes them.
        for k in self.owned() {
            self.claim_and_drain(k);
        }
        while !self.stopping.load(Ordering::SeqCst) {
            self.claim_taken(system, inflight, &mut con).await?;
            let owned = self.readable();
            if owned.is_empty() {
                inflight.finish().await?;
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
            inflight.make_room(self.cfg.batch * owned.len()).await?;
            let (streams, taken_late) = self.read_round(&mut reader, &owned).await?;
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
                .filter(|s| !taken_late.iter().any(|k| self.keys.partition(*k) == s.key))
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
                self.dispatch(&owned, stream, system, inflight, &mut con)
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
        reader: &mut MultiplexedConnection,
        owned: &[u32],
    ) -> Result<(Vec<StreamKey>, BTreeSet<u32>), AgentdError> {
        let mut pipe = redis::pipe();
        let read = pipe.cmd("XREADGROUP");
        read.arg("GROUP")
            .arg(GROUP)
            .arg(&self.cfg.process_id)
            .arg("COUNT")
            .arg(self.cfg.batch)
            .arg("BLOCK")
            .arg((self.cfg.lease_ms / 4).clamp(1, 200))
            .arg("STREAMS");
        for k in owned {
            read.arg(self.keys.partition(*k));
        }
        for _ in owned {
            read.arg(">");
        }
        // Who else holds entries of these partitions, asked right after the read (the same
        // round trip: Redis runs it once the read has returned).
        for k in owned {
            pipe.cmd("XPENDING").arg(self.keys.partition(*k)).arg(GROUP);
        }
        self.reading.store(true, Ordering::SeqCst);
        let reply: redis::RedisResult<Vec<redis::Value>> = pipe.query_async(reader).await;
        self.reading.store(false, Ordering::SeqCst);
        self.read_rounds.fetch_add(1, Ordering::SeqCst);
        let mut replies = reply.map_err(be)?.into_iter();
        let streams = match replies.next() {
            Some(v) => redis::from_redis_value_ref::<Option<StreamReadReply>>(&v)
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

    /// Hands over what one read returned for one of partitions `owned`: a batch the router
    /// takes as it is joins the in-flight window; anything else waits for what came before it.
    async fn dispatch(
        self: &Arc<Self>,
        owned: &[u32],
        stream: StreamKey,
        system: &AgentSystem,
        inflight: &mut InFlight,
        con: &mut ConnectionManager,
    ) -> Result<(), AgentdError> {
        let partition = owned
            .iter()
            .copied()
            .find(|k| self.keys.partition(*k) == stream.key)
            .filter(|k| self.fresh(*k));
        let Some(partition) = partition else {
            // The lease went stale, or the partition was given up, during the read:
            // what it returned stays pending here, for this process once renewed or
            // for the next owner's claim (both claim before reading anything newer).
            tracing::warn!(stream = %stream.key, entries = stream.ids.len(), "partition no longer fresh after a read; leaving its entries pending");
            return Ok(());
        };
        let decoded: Vec<_> = stream.ids.iter().map(|s| self.decode_entry(s)).collect();
        if decoded
            .iter()
            .all(|d| d.as_ref().is_ok_and(routes_directly))
        {
            let envs = decoded.into_iter().flatten().collect();
            inflight.push(self.route_batch(partition, stream.key, stream.ids, envs, system));
        } else {
            // Closes, deletes, child outputs and bad entries wait for what came
            // before them.
            inflight.finish().await?;
            let ids: Vec<&StreamId> = stream.ids.iter().collect();
            self.handle_entries(&stream.key, &ids, decoded, system, con)
                .await?;
        }
        Ok(())
    }
}
