//! Batches of writes in one round trip. A live agent's flush of its own state (see [`is_own`])
//! runs as one [`FLUSH_OWN`](super::scripts::FLUSH_OWN) call per run of its writes, its record
//! only through its partition's fence; the rest of a batch is plain commands and script calls,
//! pipelined.
//! Every write of a batch is idempotent, so a batch can be written again whole (after a
//! `NOSCRIPT`, or by its caller).

use super::push::fenced;
use super::{RedisStore, be, de};
use agentd_actors::{StoreResult, StoreWrite, ThreadStore};
use agentd_proto::AgentRecord;
use agentd_proto::codec::{encode, encode_envelope};
use uuid::Uuid;

impl RedisStore {
    /// Writes `writes` in one round trip; with `owner`, each run of that agent's own writes
    /// as one [`FLUSH_OWN`](super::scripts::FLUSH_OWN) call, its record only through its
    /// partition's fence (if pushes are fenced).
    pub(super) async fn write_batch_fenced(
        &self,
        writes: &[StoreWrite],
        owner: Option<&str>,
    ) -> StoreResult<()> {
        if writes.is_empty() {
            return Ok(());
        }
        // One round trip; the commands run in order on the one connection. Not MULTI: the
        // writes may touch several agents' slots, and each is idempotent on its own.
        let mut pipe = redis::pipe();
        // The owner's record goes through its partition's fence (if pushes are fenced). Only
        // the record: the batch's other writes are idempotent, and must land or not together
        // with one another, not with the record (an inbox item marked done whose answer the
        // fence refused would be lost, where an answer and its done mark written by a stale
        // owner are only a repeat the new owner's run de-duplicates).
        let fence = owner.and_then(|o| self.fence_for(o));
        let mut rest = writes;
        while let Some((first, after)) = rest.split_first() {
            if let Some(owner) = owner.filter(|o| is_own(first, o)) {
                let run = 1 + after.iter().take_while(|w| is_own(w, owner)).count();
                self.pipe_flush_own(&mut pipe, owner, &rest[..run], fence.clone())?;
                rest = &rest[run..];
                continue;
            }
            match first {
                StoreWrite::PutAgent(rec) => self.pipe_put_agent(&mut pipe, rec)?,
                StoreWrite::Append { agent_id, entry } => {
                    pipe.cmd("EVALSHA")
                        .arg(self.append.get_hash())
                        .arg(2)
                        .arg(self.keys.agent_part(agent_id, "thread"))
                        .arg(self.keys.agent_part(agent_id, "eids"))
                        .arg(entry.id.to_string())
                        .arg(encode(&**entry).map_err(de)?)
                        .ignore();
                }
                StoreWrite::InboxDone { agent_id, env_id } => {
                    self.pipe_inbox_done(&mut pipe, agent_id, *env_id)
                }
                // In the pipeline's order after what it was made from: Redis runs one
                // connection's commands in order, and the batch is answered (and retried as a
                // whole; a repeat carries the same derived id) only after all of them. Only an
                // earlier command answered with an error (a key of the wrong type) lets it out
                // before the batch is written.
                StoreWrite::Forward { stream, env } => {
                    pipe.cmd("XADD")
                        .arg(stream)
                        .arg("*")
                        .arg("m")
                        .arg(encode_envelope(env).map_err(de)?)
                        .ignore();
                }
                // Outputs travel through the partition streams here; refused before anything
                // is sent.
                StoreWrite::Outbox { .. } => {
                    return Err(agentd_actors::ports::outbox_not_kept(self.kind()));
                }
            }
            rest = after;
        }
        // Only the owner's runs answer (`-1`: its record refused by the fence).
        let mut con = self.con.clone();
        use std::sync::atomic::Ordering::Relaxed;
        if !self.flush_scripts_loaded.load(Relaxed) {
            self.load_flush_scripts(&mut con).await?;
        }
        let answers: Vec<i64> = match pipe.query_async(&mut con).await {
            Err(e) if e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript) => {
                // Redis lost its script cache (a restart): load them and write the batch
                // again (its writes are idempotent).
                self.load_flush_scripts(&mut con).await?;
                pipe.query_async(&mut con).await.map_err(be)?
            }
            other => other.map_err(be)?,
        };
        match owner {
            Some(agent_id) if answers.contains(&-1) => fenced(-1, agent_id),
            _ => Ok(()),
        }
    }

    /// Adds one [`FLUSH_OWN`](super::scripts::FLUSH_OWN) call for `run` (writes of `owner`'s
    /// own state, see [`is_own`]) to `pipe`: its entries in order, its done marks, and its last
    /// record (the call is atomic, so the record a run ends with is the one that counts). The
    /// roots index is not touched: a live agent's record was indexed when it was created.
    fn pipe_flush_own(
        &self,
        pipe: &mut redis::Pipeline,
        owner: &str,
        run: &[StoreWrite],
        fence: Option<(String, String)>,
    ) -> StoreResult<()> {
        let call = pipe
            .cmd("EVALSHA")
            .arg(self.flush_own.get_hash())
            .arg(if fence.is_some() { 6 } else { 5 })
            .arg(self.keys.agent_part(owner, "thread"))
            .arg(self.keys.agent_part(owner, "eids"))
            .arg(self.keys.agent_part(owner, "inbox"))
            .arg(self.keys.agent_part(owner, "inboxdata"))
            .arg(self.keys.agent(owner));
        match fence {
            Some((lease, token)) => call.arg(lease).arg(token),
            None => call.arg(""),
        };
        let entries = run.iter().filter_map(|w| match w {
            StoreWrite::Append { entry, .. } => Some(entry),
            _ => None,
        });
        call.arg(entries.clone().count());
        for entry in entries {
            call.arg(entry.id.to_string())
                .arg(encode(&**entry).map_err(de)?);
        }
        let dones = run.iter().filter_map(|w| match w {
            StoreWrite::InboxDone { env_id, .. } => Some(env_id),
            _ => None,
        });
        call.arg(dones.clone().count());
        for env_id in dones {
            call.arg(env_id.to_string());
        }
        let record = run.iter().rev().find_map(|w| match w {
            StoreWrite::PutAgent(rec) => Some(rec),
            _ => None,
        });
        if let Some(rec) = record {
            for (field, value) in record_fields(rec)? {
                call.arg(field).arg(value);
            }
        }
        Ok(())
    }

    /// Adds the writes of [`ThreadStore::put_agent`] to `pipe`: the record hash, then (for a
    /// root) the roots index, which lives in another slot.
    pub(super) fn pipe_put_agent(
        &self,
        pipe: &mut redis::Pipeline,
        record: &AgentRecord,
    ) -> StoreResult<()> {
        let set = pipe.cmd("HSET").arg(self.keys.agent(&record.id)).ignore();
        for (field, value) in record_fields(record)? {
            set.arg(field).arg(value);
        }
        if record.parent_id.is_none() {
            pipe.cmd("ZADD")
                .arg(self.keys.roots())
                .arg(record.created_at_ms)
                .arg(&record.id)
                .ignore();
        }
        Ok(())
    }

    /// Adds the writes of [`ThreadStore::inbox_done`] to `pipe`.
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

/// Whether `write` is of `owner`'s own state (its thread, inbox or record), which its flush
/// writes through [`FLUSH_OWN`](super::scripts::FLUSH_OWN).
fn is_own(write: &StoreWrite, owner: &str) -> bool {
    match write {
        StoreWrite::PutAgent(rec) => rec.id == owner,
        StoreWrite::Append { agent_id, .. } | StoreWrite::InboxDone { agent_id, .. } => {
            &**agent_id == owner
        }
        StoreWrite::Forward { .. } | StoreWrite::Outbox { .. } => false,
    }
}

/// The fields of an agent's record hash: the encoded record, and the fields that listings
/// read without decoding it.
pub(super) fn record_fields(record: &AgentRecord) -> StoreResult<[(&'static str, Vec<u8>); 5]> {
    Ok([
        ("rec", encode(record).map_err(de)?),
        ("status", record.status.as_str().as_bytes().to_vec()),
        ("title", record.title.as_bytes().to_vec()),
        ("type", record.agent_type.as_bytes().to_vec()),
        (
            "parent",
            record
                .parent_id
                .as_deref()
                .unwrap_or("")
                .as_bytes()
                .to_vec(),
        ),
    ])
}
