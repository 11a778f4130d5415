//! A partition taken (or this process's own after a lost connection or a stale lease): what
//! its previous holder read and did not acknowledge is claimed (`XAUTOCLAIM`) and delivered in
//! order before anything newer is read, and its agents get direct deliveries only once its
//! stream is drained (everything read and acknowledged).

use super::RedisBus;
use super::in_flight::InFlight;
use crate::streams::{GROUP, be};
use agentd_ports::Inbound;
use agentd_proto::AgentdError;
use agentd_proto::codec::decode_envelope;
use agentd_store::RedisConnection;
use redis::cmd;
use redis::streams::{StreamAutoClaimReply, StreamId};
use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

impl RedisBus {
    /// Claims what the partitions marked to be claimed hold pending, those with a fresh lease
    /// (a stale one waits until its lease is renewed).
    pub(super) async fn claim_taken(
        &self,
        system: &Arc<dyn Inbound>,
        inflight: &mut InFlight,
        con: &mut RedisConnection,
    ) -> Result<(), AgentdError> {
        let owned = self.owned();
        let claims: Vec<u32> = self
            .to_claim
            .write()
            .map(|mut c| {
                let all = std::mem::take(&mut *c);
                let (now, later): (BTreeSet<u32>, BTreeSet<u32>) = all
                    .into_iter()
                    .filter(|k| owned.contains(k))
                    .partition(|k| self.fresh(*k));
                *c = later;
                now.into_iter().collect()
            })
            .unwrap_or_default();
        if !claims.is_empty() {
            // Claimed entries are older than anything read before: what is in flight
            // goes first.
            inflight.finish().await?;
        }
        for k in claims {
            if let Err(e) = self.claim(k, system, con).await {
                if let Ok(mut c) = self.to_claim.write() {
                    c.insert(k);
                }
                return Err(e);
            }
        }
        Ok(())
    }

    /// Claims every entry of partition `k` pending with any consumer, and delivers it in order;
    /// first appends what its outbox holds to the parents' partitions (see
    /// [`Self::send_outbox`]).
    pub(super) async fn claim(
        &self,
        k: u32,
        system: &Arc<dyn Inbound>,
        con: &mut RedisConnection,
    ) -> Result<(), AgentdError> {
        self.send_outbox(k, con).await?;
        let key = self.keys.partition(k);
        let mut start = "0-0".to_string();
        loop {
            let reply: StreamAutoClaimReply = cmd("XAUTOCLAIM")
                .arg(&key)
                .arg(GROUP)
                .arg(&self.cfg.process_id)
                .arg(0)
                .arg(&start)
                .arg("COUNT")
                .arg(self.cfg.batch)
                .query_async(con)
                .await
                .map_err(be)?;
            // An entry one of this process's agents holds is with it already (this is a claim
            // of this process's own entries after a lost connection): its agent acknowledges it.
            let ids: Vec<&StreamId> = reply
                .claimed
                .iter()
                .filter(|s| !self.held.holds(k, &s.id))
                .collect();
            if !ids.is_empty() {
                tracing::info!(
                    partition = k,
                    entries = ids.len(),
                    "claimed pending entries"
                );
            }
            let decoded = ids.iter().map(|s| self.decode_entry(s)).collect();
            let read = (k, self.held.epoch(k));
            self.handle_entries(read, &key, &ids, decoded, system, con)
                .await?;
            if reply.next_stream_id == "0-0" {
                return Ok(());
            }
            start = reply.next_stream_id;
        }
    }

    /// Appends the child outputs left in partition `k`'s outbox to their parents' partitions,
    /// and takes them out. An output is there when the process that flushed it stopped
    /// between its flush (which wrote it there with the done mark of the item it answers) and
    /// its append to the parent's partition, a command of its own (the parent's stream is in
    /// another slot); whoever holds the child's partition next sends it. The parent takes an
    /// output once, by its id, so one sent twice (the flushing process did send it) is harmless;
    /// one whose parent is gone is dropped.
    async fn send_outbox(&self, k: u32, con: &mut RedisConnection) -> Result<(), AgentdError> {
        let key = self.keys.outbox(k);
        let left: Vec<(String, Vec<u8>)> = cmd("HGETALL")
            .arg(&key)
            .query_async(con)
            .await
            .map_err(be)?;
        for (id, bytes) in left {
            match decode_envelope(&bytes, usize::MAX) {
                Ok(env) => match env.to.agent_id() {
                    Some(parent) => {
                        let appended: i64 = self
                            .scripts
                            .forward
                            .key(self.keys.partition(self.partition_of(parent)))
                            .key(self.keys.agent(parent))
                            .arg(&bytes)
                            .invoke_async(con)
                            .await
                            .map_err(be)?;
                        tracing::info!(partition = k, message_id = %id, parent, appended = appended == 1, "a child output left in the outbox sent on");
                    }
                    None => {
                        tracing::warn!(partition = k, message_id = %id, "an outbox entry for no agent; dropped")
                    }
                },
                Err(e) => {
                    tracing::error!(partition = k, message_id = %id, error = %e, "an outbox entry that does not decode; dropped")
                }
            }
            cmd("HDEL")
                .arg(&key)
                .arg(&id)
                .query_async::<()>(con)
                .await
                .map_err(be)?;
        }
        Ok(())
    }

    /// Ends the drain of every draining partition still owned whose stream holds nothing
    /// undelivered: from then on its agents get direct deliveries.
    pub(super) async fn settle_drained(&self) -> Result<(), AgentdError> {
        let owned = self.owned();
        let draining: Vec<u32> = self
            .draining
            .read()
            .map(|d| d.iter().copied().filter(|k| owned.contains(k)).collect())
            .unwrap_or_default();
        let mut con = self.con.clone();
        let mut settled = Vec::new();
        let checked = async {
            for k in draining {
                if self.drained(k, &mut con).await? {
                    if let Ok(mut d) = self.draining.write() {
                        d.remove(&k);
                    }
                    settled.push(k);
                }
            }
            Ok(())
        }
        .await;
        // One line for all the partitions this check settled (at start, every partition).
        if !settled.is_empty() {
            tracing::info!(
                count = settled.len(),
                partitions = %ranges(&settled),
                "partitions drained; their agents get direct deliveries"
            );
        }
        checked
    }

    /// Whether partition `k`'s stream holds nothing undelivered: every entry was read by the
    /// group (last-delivered-id is the stream's last id), and acknowledged or held by one of
    /// this process's agents (what is pending is no more than what they hold, with no delivery
    /// under way).
    async fn drained(&self, k: u32, con: &mut RedisConnection) -> Result<bool, AgentdError> {
        let key = self.keys.partition(k);
        let (stream, groups): (
            HashMap<String, redis::Value>,
            Vec<HashMap<String, redis::Value>>,
        ) = redis::pipe()
            .cmd("XINFO")
            .arg("STREAM")
            .arg(&key)
            .cmd("XINFO")
            .arg("GROUPS")
            .arg(&key)
            .query_async(con)
            .await
            .map_err(be)?;
        let text = |m: &HashMap<String, redis::Value>, field: &str| -> Option<String> {
            m.get(field)
                .and_then(|v| redis::from_redis_value_ref::<String>(v).ok())
        };
        let Some(last) = text(&stream, "last-generated-id") else {
            return Ok(false);
        };
        let delivering = self
            .delivering
            .get(k as usize)
            .map_or(0, |n| n.load(std::sync::atomic::Ordering::SeqCst));
        let held = self.held.count(k) as u64;
        Ok(groups.iter().any(|g| {
            text(g, "name").as_deref() == Some(GROUP)
                && text(g, "last-delivered-id").as_deref() == Some(last.as_str())
                && g.get("pending")
                    .and_then(|v| redis::from_redis_value_ref::<u64>(v).ok())
                    .is_some_and(|pending| pending == 0 || (delivering == 0 && pending <= held))
        }))
    }
}

/// Partition numbers, ascending, as ranges: `0-5,7,9-12`.
fn ranges(sorted: &[u32]) -> String {
    sorted
        .chunk_by(|a, b| a + 1 == *b)
        .map(|run| match run {
            [first, .., last] => format!("{first}-{last}"),
            [one] => one.to_string(),
            [] => String::new(),
        })
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests {
    use super::ranges;

    #[test]
    fn partitions_read_as_ranges() {
        assert_eq!(ranges(&[]), "");
        assert_eq!(ranges(&[3]), "3");
        assert_eq!(ranges(&[0, 1, 2, 3]), "0-3");
        assert_eq!(ranges(&[0, 1, 2, 5, 7, 8, 12]), "0-2,5,7-8,12");
    }
}
