//! Batches of writes. A live agent's flush of its own state (see [`is_own`]) runs as its part
//! of a [`FLUSH_MANY`](super::scripts::flush_many) call per run of its writes, its record only
//! through its partition's fence; a flush that is nothing else is grouped with the flushes of
//! its partition's other agents made at the same time ([`super::flush`]). The rest of a batch is
//! plain commands and script calls. Consecutive writes in one partition's slot go in one
//! pipeline (one round trip; Redis runs a connection's commands in order, and in a Redis Cluster
//! one slot is one node), and the pipelines are sent one after another.
//!
//! A child's output for its parent ([`StoreWrite::Forward`]) is written by the child's last
//! flush call, in the child's slot: onto the partition stream itself when the parent shares
//! the child's partition, else into the partition's outbox ([`Keys::outbox`]), with the done
//! mark of the item it answers, atomically. (A flush transaction on one Redis, where there are
//! no slots, appends it to the parent's stream itself: [`super::flush`].) Then, once the flush is answered, it is appended to
//! the parent's partition as a command of its own, and taken out of the outbox. A process that
//! dies in between leaves it in the outbox, and the next owner of the child's partition
//! appends it when it takes the partition (the parent de-duplicates it by its id).
//!
//! Every write of a batch is idempotent, so a batch can be written again whole (after a
//! `NOSCRIPT`, or by its caller).
//!
//! [`Keys::outbox`]: crate::Keys::outbox

use super::{RedisStore, be, de, fenced, record_bytes};
use crate::redis_keys::assert_one_slot;
use agentd_ports::StoreKind;
use agentd_ports::{StoreError, StoreResult, StoreWrite};
use agentd_proto::codec::{encode, encode_envelope};
use agentd_proto::{AgentRecord, Envelope};
use redis::cmd;
use uuid::Uuid;

/// A piece of a batch: a run of the owner's own writes (one flush call), or one other write.
enum Piece<'w> {
    Own(Vec<&'w StoreWrite>),
    One(&'w StoreWrite),
}

impl RedisStore {
    /// Writes `writes`; with `owner`, each run of that agent's own writes as one flush call
    /// ([`super::flush`]), its record only through its partition's fence (if pushes are
    /// fenced), and its forwards as the module doc says.
    pub(super) async fn write_batch_fenced(
        &self,
        writes: &[StoreWrite],
        owner: Option<&str>,
    ) -> StoreResult<()> {
        if writes.is_empty() {
            return Ok(());
        }
        if writes
            .iter()
            .any(|w| matches!(w, StoreWrite::Outbox { .. }))
        {
            // Outputs travel through the partition streams here; refused before anything is
            // sent.
            return Err(agentd_ports::outbox_not_kept(self.kind()));
        }
        let forwards: Vec<(&str, &Envelope)> = writes
            .iter()
            .filter_map(|w| match w {
                StoreWrite::Forward { stream, env } => Some((stream.as_str(), &**env)),
                _ => None,
            })
            .collect();
        let mut pieces: Vec<Piece<'_>> = Vec::new();
        for w in writes {
            match (w, owner, pieces.last_mut()) {
                (StoreWrite::Forward { .. }, _, _) => {}
                (w, Some(o), Some(Piece::Own(run))) if is_own(w, o) => run.push(w),
                (w, Some(o), _) if is_own(w, o) => pieces.push(Piece::Own(vec![w])),
                (w, _, _) => pieces.push(Piece::One(w)),
            }
        }
        // The owner's forwards go with its last flush call (one of their own if the batch does
        // not end with one). Without an owner (no flush of an agent's own) they are appended
        // after the batch, with no outbox.
        let with_flush = owner.is_some() && !forwards.is_empty();
        if with_flush && !matches!(pieces.last(), Some(Piece::Own(_))) {
            pieces.push(Piece::Own(Vec::new()));
        }
        let last = pieces.len().saturating_sub(1);
        let outputs_of = |i: usize| -> &[(&str, &Envelope)] {
            if with_flush && i == last {
                &forwards
            } else {
                &[]
            }
        };
        let mut con = self.con.clone();
        use std::sync::atomic::Ordering::Relaxed;
        if !self.flush_scripts_loaded.load(Relaxed) {
            self.load_flush_scripts(&mut con).await?;
        }
        let mut refused = false;
        // The flush appended the outputs to their parents' streams itself (a transaction).
        let mut outputs_sent = false;
        if let (Some(owner), [Piece::Own(run)]) = (owner, pieces.as_slice()) {
            // A flush and nothing else: with the flushes of its partition's other agents.
            let flush = self.own_flush(owner, run, outputs_of(0))?;
            let n = self
                .flush_grouped(self.keys.partition_of(owner), flush)
                .await?;
            refused = n == -1;
            outputs_sent = n == 2;
        } else {
            // Consecutive pieces in one partition go in one pipeline.
            let mut pipes: Vec<(u32, redis::Pipeline)> = Vec::new();
            for (i, piece) in pieces.iter().enumerate() {
                let k = self.keys.partition_of(match piece {
                    Piece::Own(_) => owner.unwrap_or_default(),
                    Piece::One(w) => subject(w),
                });
                if pipes.last().is_none_or(|(pk, _)| *pk != k) {
                    pipes.push((k, redis::pipe()));
                }
                let Some((_, pipe)) = pipes.last_mut() else {
                    continue;
                };
                match piece {
                    Piece::Own(run) => {
                        let owner = owner.unwrap_or_default();
                        let flush = self.own_flush(owner, run, outputs_of(i))?;
                        pipe.add_command(self.flush_call(k, &[&flush]));
                    }
                    Piece::One(w) => self.pipe_one(pipe, w)?,
                }
            }
            for (_, pipe) in &pipes {
                assert_one_slot(pipe);
                // Only the flush calls (each with its one result) and the appends of entries
                // known new (`1`, or `-1` fenced) answer.
                let answers: Vec<redis::Value> = match pipe.query_async(&mut con).await {
                    Err(e)
                        if e.kind()
                            == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript) =>
                    {
                        // Redis lost its script cache (a restart): load them and write the
                        // pipeline again (its writes are idempotent).
                        self.load_flush_scripts(&mut con).await?;
                        pipe.query_async(&mut con).await.map_err(be)?
                    }
                    other => other.map_err(be)?,
                };
                for answer in answers {
                    let n = match answer {
                        redis::Value::Array(results) => {
                            let what =
                                format!("the flush of agent `{}`", owner.unwrap_or_default());
                            super::group::result_of(&Ok(results), 0, &what)?
                        }
                        other => redis::from_redis_value::<i64>(other)
                            .map_err(|e| StoreError::transient(format!("redis: {e}")))?,
                    };
                    refused |= n == -1;
                }
            }
        }
        match owner {
            Some(_) if outputs_sent => {}
            Some(owner) => {
                // With `redis.min_replicas`, the flush is replicated before its outputs go out
                // (`replicas`; nothing is sent with none asked for).
                self.wait_replicas_of(owner).await?;
                let own = self.keys.partition_of(owner);
                let out: Vec<_> = forwards
                    .iter()
                    .filter(|(stream, _)| *stream != self.keys.partition_key(own))
                    .collect();
                for (stream, env) in &out {
                    append(&mut con, stream, env).await?;
                }
                for (stream, _) in &out {
                    // And an output is replicated on its parent's node before it leaves the
                    // outbox.
                    self.wait_replicas(stream).await?;
                }
                if !out.is_empty() {
                    // Not awaited: the outputs are on their parents' streams now, and one that
                    // stays in the outbox (this fails, or the process stops first) is only
                    // appended again by the partition's next owner, and taken once.
                    let mut hdel = cmd("HDEL");
                    hdel.arg(self.keys.outbox(own)).arg(
                        out.iter()
                            .map(|(_, e)| e.id.to_string())
                            .collect::<Vec<_>>(),
                    );
                    let mut con = con.clone();
                    tokio::spawn(async move {
                        if let Err(e) = hdel.query_async::<()>(&mut con).await {
                            tracing::debug!(error = %e, "outputs sent on stay in the outbox");
                        }
                    });
                }
            }
            None => {
                for (stream, env) in &forwards {
                    append(&mut con, stream, env).await?;
                }
            }
        }
        match owner {
            Some(agent_id) if refused => fenced(-1, agent_id),
            _ => {
                for w in writes {
                    if let StoreWrite::Acknowledge { entry, .. } = w {
                        entry.acknowledge();
                    }
                }
                Ok(())
            }
        }
    }

    /// Adds one write that is not the owner's own to `pipe`.
    fn pipe_one(&self, pipe: &mut redis::Pipeline, write: &StoreWrite) -> StoreResult<()> {
        match write {
            StoreWrite::PutAgent(rec) => self.pipe_put_agent(pipe, rec)?,
            StoreWrite::Append { agent_id, entry } => {
                pipe.cmd("EVALSHA")
                    .arg(self.append.get_hash())
                    .arg(1)
                    .arg(self.keys.agent_part(agent_id, "thread"))
                    .arg(entry.id.as_bytes().as_slice())
                    .arg(encode(&**entry).map_err(de)?)
                    .ignore();
            }
            StoreWrite::AppendNew { agent_id, entry } => {
                self.pipe_append_new(pipe, agent_id, entry)?;
            }
            StoreWrite::InboxDone { agent_id, env_id } => {
                self.pipe_inbox_done(pipe, agent_id, *env_id)
            }
            // Not an agent's own flush (a close dropping what it held): acknowledged unfenced.
            StoreWrite::Acknowledge { entry, .. } => {
                pipe.cmd("XACK")
                    .arg(&*entry.stream)
                    .arg(crate::GROUP)
                    .arg(&entry.id)
                    .ignore();
            }
            // Taken out of the pieces before (see `write_batch_fenced`).
            StoreWrite::Forward { .. } | StoreWrite::Outbox { .. } => {}
        }
        Ok(())
    }

    /// Adds [`Threads::append_new`](agentd_ports::Threads::append_new) of `entry` to `agent_id`'s thread to `pipe`, fenced by
    /// the agent's partition's lease if pushes are fenced; it answers `1`, or `-1` fenced.
    pub(super) fn pipe_append_new(
        &self,
        pipe: &mut redis::Pipeline,
        agent_id: &str,
        entry: &agentd_proto::ThreadEntry,
    ) -> StoreResult<()> {
        let (lease, token) = self.lease_and_token(agent_id);
        pipe.cmd("EVALSHA")
            .arg(self.append_new.get_hash())
            .arg(2)
            .arg(self.keys.agent_part(agent_id, "thread"))
            .arg(lease)
            .arg(token)
            .arg(entry.id.as_bytes().as_slice())
            .arg(encode(entry).map_err(de)?);
        Ok(())
    }

    /// Adds the writes of [`AgentRecords::put_agent`](agentd_ports::AgentRecords::put_agent) to `pipe`: the record, then (for a root)
    /// its partition's roots index, in the same slot.
    pub(super) fn pipe_put_agent(
        &self,
        pipe: &mut redis::Pipeline,
        record: &AgentRecord,
    ) -> StoreResult<()> {
        pipe.cmd("SET")
            .arg(self.keys.agent(&record.id))
            .arg(record_bytes(record)?)
            .ignore();
        if record.parent_id.is_none() {
            pipe.cmd("ZADD")
                .arg(self.keys.roots(self.keys.partition_of(&record.id)))
                .arg(record.created_at_ms)
                .arg(&record.id)
                .ignore();
        }
        Ok(())
    }

    /// Adds the writes of [`Inboxes::inbox_done`](agentd_ports::Inboxes::inbox_done) to `pipe`.
    pub(super) fn pipe_inbox_done(&self, pipe: &mut redis::Pipeline, agent_id: &str, env_id: Uuid) {
        let id = env_id.to_string();
        pipe.cmd("ZREM")
            .arg(self.keys.agent_part(agent_id, "inbox"))
            .arg(&id)
            .ignore()
            .cmd("HDEL")
            .arg(self.keys.agent_part(agent_id, "inboxdata"))
            .arg(&id)
            .ignore();
    }
}

/// Appends a child's output to its parent's partition stream, as a command of its own.
async fn append(con: &mut crate::RedisConnection, stream: &str, env: &Envelope) -> StoreResult<()> {
    cmd("XADD")
        .arg(stream)
        .arg("*")
        .arg("m")
        .arg(encode_envelope(env).map_err(de)?)
        .query_async::<String>(con)
        .await
        .map_err(be)?;
    Ok(())
}

/// The agent whose slot `write` is in.
fn subject(write: &StoreWrite) -> &str {
    match write {
        StoreWrite::PutAgent(rec) => &rec.id,
        StoreWrite::Append { agent_id, .. }
        | StoreWrite::AppendNew { agent_id, .. }
        | StoreWrite::InboxDone { agent_id, .. }
        | StoreWrite::Acknowledge { agent_id, .. } => agent_id,
        StoreWrite::Forward { env, .. } | StoreWrite::Outbox { env } => {
            env.to.agent_id().unwrap_or_default()
        }
    }
}

/// Whether `write` is of `owner`'s own state (its thread, inbox, record or held entries),
/// which its flush writes ([`super::flush`]).
fn is_own(write: &StoreWrite, owner: &str) -> bool {
    match write {
        StoreWrite::PutAgent(rec) => rec.id == owner,
        StoreWrite::Append { agent_id, .. }
        | StoreWrite::AppendNew { agent_id, .. }
        | StoreWrite::InboxDone { agent_id, .. }
        | StoreWrite::Acknowledge { agent_id, .. } => &**agent_id == owner,
        StoreWrite::Forward { .. } | StoreWrite::Outbox { .. } => false,
    }
}
