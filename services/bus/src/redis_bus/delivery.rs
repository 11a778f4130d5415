//! Handing partition entries to the local agents and acknowledging them. An entry is
//! acknowledged (`XACK`) only once it is durably with its agent, or dead-lettered: it could
//! not be decoded, failed for good, or kept failing with store errors. One that failed
//! transiently stays pending, to be claimed again. An entry read for the first time is offered
//! to its agent to hold ([`agentd_ports::StreamEntry`]): one it holds stays pending, and
//! the agent's write that records the item's end acknowledges it.

use super::RedisBus;
use super::in_flight::Batch;
use crate::streams::{GROUP, be, decode_stream_entry};
use agentd_ports::Inbound;
use agentd_ports::StreamEntry;
use agentd_proto::{AgentdError, Control, Envelope, ErrorCode, Event, Item};
use agentd_store::RedisConnection;
use redis::cmd;
use redis::streams::StreamId;
use std::sync::Arc;
use std::sync::atomic::Ordering;

impl RedisBus {
    /// The envelope of a partition entry (its `m` field), or why it has none.
    pub(super) fn decode_entry(&self, sid: &StreamId) -> Result<Envelope, AgentdError> {
        decode_stream_entry(sid, self.cfg.max_envelope_bytes)
    }

    /// Hands a batch of routable entries, read for the first time (from partition `partition`
    /// in ownership period `epoch`), to the router now, in order (the router queues each as it
    /// is sent), each offered to its agent to hold, and answers the task that waits for their
    /// deliveries and then acknowledges those their agents did not hold, so the reader can
    /// read on meanwhile.
    pub(super) fn route_batch(
        self: &Arc<Self>,
        (partition, epoch): (u32, u64),
        key: String,
        ids: Vec<StreamId>,
        envs: Vec<Envelope>,
        system: &Arc<dyn Inbound>,
    ) -> Batch {
        let n = ids.len();
        if let Some(c) = self.delivering.get(partition as usize) {
            c.fetch_add(n, Ordering::SeqCst);
        }
        let stream: Arc<str> = key.as_str().into();
        let holds: Vec<Arc<StreamEntry>> = ids
            .iter()
            .map(|sid| self.entry((partition, epoch), &stream, &sid.id))
            .collect();
        let requests: Vec<_> = envs
            .into_iter()
            .zip(holds.iter().cloned())
            .map(|(env, entry)| system.route_from_stream(env, Some(entry)))
            .collect();
        let me = self.clone();
        let task = actix_rt::spawn(async move {
            let outcomes: Vec<Result<(), AgentdError>> = futures::future::join_all(requests)
                .await
                .into_iter()
                .map(|r| r.map(|_| ()))
                .collect();
            // What an agent holds stays pending: its own write acknowledges it.
            let (refs, outcomes): (Vec<&StreamId>, Vec<_>) = ids
                .iter()
                .zip(outcomes)
                .zip(holds)
                .filter(|((_, outcome), entry)| !(outcome.is_ok() && entry.is_taken()))
                .map(|(pair, _)| pair)
                .unzip();
            let mut con = me.con.clone();
            let res = me.acknowledge(&key, &refs, outcomes, &mut con).await;
            if let Some(c) = me.delivering.get(partition as usize) {
                c.fetch_sub(n, Ordering::SeqCst);
            }
            res
        });
        (n, task)
    }

    /// Delivers entries of partition `k` (stream `key`, read in ownership period `epoch`) in
    /// order, none to be held; each is acknowledged once it is durably with its agent (or moved
    /// to the dead-letter stream).
    pub(super) async fn handle_entries(
        &self,
        read: (u32, u64),
        key: &str,
        ids: &[&StreamId],
        decoded: Vec<Result<Envelope, AgentdError>>,
        system: &Arc<dyn Inbound>,
        con: &mut RedisConnection,
    ) -> Result<(), AgentdError> {
        let stream: Arc<str> = key.into();
        let entry = |sid: &StreamId| Some(self.unheld_entry(read, &stream, &sid.id));
        // Envelopes the router takes (inbox items, pause/resume/cancel/terminate) are handed
        // over together: the router queues them in this order (per-agent order holds) and the
        // receivers' durable writes run concurrently. Anything else (close, delete, child
        // output) waits for what came before it and runs alone.
        let mut outcomes: Vec<Result<(), AgentdError>> = Vec::with_capacity(ids.len());
        let mut routed = Vec::new();
        for (decoded, sid) in decoded.into_iter().zip(ids) {
            match decoded {
                Ok(env) if routes_directly(&env) => routed.push(deliver(system, env, entry(sid))),
                other => {
                    outcomes.extend(futures::future::join_all(routed.drain(..)).await);
                    outcomes.push(match other {
                        Ok(env) if matches!(env.item, Item::Command(_)) => {
                            self.run_call(system, env);
                            Ok(())
                        }
                        Ok(env) => deliver(system, env, entry(sid)).await,
                        Err(e) => Err(e),
                    });
                }
            }
        }
        outcomes.extend(futures::future::join_all(routed).await);
        self.acknowledge(key, ids, outcomes, con).await
    }

    /// Acknowledges the entries whose delivery succeeded or failed for good (those go to the
    /// dead letters first); one that failed transiently stays pending and its error is
    /// answered.
    async fn acknowledge(
        &self,
        key: &str,
        ids: &[&StreamId],
        outcomes: Vec<Result<(), AgentdError>>,
        con: &mut RedisConnection,
    ) -> Result<(), AgentdError> {
        let mut acks = Vec::with_capacity(ids.len());
        let mut transient = None;
        for (sid, outcome) in ids.iter().zip(outcomes) {
            match outcome {
                Ok(()) => {}
                // Redis unreachable or a connection cut while the entry was being delivered
                // (a store error included: the inbox write failed): it stays pending, and is
                // claimed again after reconnecting. Dead-lettering it would lose a message
                // that was acknowledged to its sender.
                Err(e)
                    if agentd_ports::is_transient(&e)
                        && !self.delivered_too_often(key, &sid.id, &e, con).await =>
                {
                    transient.get_or_insert(e);
                    continue;
                }
                Err(e) => {
                    self.dead
                        .send(key, &sid.id, &e, sid.get::<Vec<u8>>("m"))
                        .await
                }
            }
            acks.push(sid.id.clone());
        }
        if acks.is_empty() {
            return transient.map_or(Ok(()), Err);
        }
        if self.offers_holds() {
            // The reader trims the stream every batch it reads there (`held`): a plain `XACK`,
            // not the script, which costs Redis several times more and delays what the
            // connection sends next (a caller's next message, after a reply).
            cmd("XACK")
                .arg(key)
                .arg(GROUP)
                .arg(&acks)
                .query_async::<i64>(con)
                .await
                .map_err(be)?;
        } else {
            // Acknowledged, and the stream trimmed to what is still pending or unread.
            let mut ack = self.scripts.ack_trim.prepare_invoke();
            ack.key(key).arg(GROUP).arg(&acks);
            ack.invoke_async::<i64>(con).await.map_err(be)?;
        }
        transient.map_or(Ok(()), Err)
    }

    /// Whether entry `id` of `key`, whose delivery just failed with `e`, has failed too often to
    /// be kept: only store errors count (Redis answered, the write did not go through), and
    /// only once the group has delivered the entry `max_deliveries` times. If Redis cannot
    /// tell, the entry is kept.
    async fn delivered_too_often(
        &self,
        key: &str,
        id: &str,
        e: &AgentdError,
        con: &mut RedisConnection,
    ) -> bool {
        if e.code != ErrorCode::StoreError || self.cfg.max_deliveries == 0 {
            return false;
        }
        let pending: redis::RedisResult<Vec<(String, String, u64, u64)>> = cmd("XPENDING")
            .arg(key)
            .arg(GROUP)
            .arg(id)
            .arg(id)
            .arg(1)
            .query_async(con)
            .await;
        let deliveries = match pending {
            Ok(rows) => rows.first().map_or(0, |r| r.3),
            Err(_) => return false,
        };
        if deliveries >= self.cfg.max_deliveries {
            tracing::error!(stream = key, entry = id, deliveries, error = %e, "entry keeps failing; moving it to the dead letters");
            return true;
        }
        false
    }
}

/// Whether the router takes `env` as it is (see [`deliver`]).
pub(super) fn routes_directly(env: &Envelope) -> bool {
    matches!(
        env.item,
        Item::Inbox(_)
            | Item::Control(
                Control::Pause | Control::Resume | Control::Cancel | Control::Terminate
            )
            // A dependency settled (actors' `supervisor/dependencies.rs`).
            | Item::Event(Event::DependencySettled { .. })
    )
}

/// Hands one envelope from a partition (from its entry `entry`) to the local actors.
async fn deliver(
    system: &Arc<dyn Inbound>,
    env: Envelope,
    entry: Option<Arc<StreamEntry>>,
) -> Result<(), AgentdError> {
    let target = env
        .to
        .agent_id()
        .ok_or_else(|| {
            AgentdError::new(
                ErrorCode::BadEnvelope,
                "partition entries are addressed to agents",
            )
        })?
        .to_string();
    match &env.item {
        _ if routes_directly(&env) => {
            // The router queues the envelope when this is first polled (its mailbox is far
            // larger than a read batch), so envelopes handed over together keep their order.
            system.route_from_stream(env, entry).await.map(|_| ())
        }
        Item::Control(c) => system.control(&target, *c).await,
        Item::Output(_) => system.take_output(env).await,
        _ => Err(AgentdError::new(
            ErrorCode::BadEnvelope,
            "unexpected item on a partition stream",
        )),
    }
}
